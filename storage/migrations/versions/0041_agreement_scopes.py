"""The Agreement page's stored counts per scope: the views filtered by one slice, category,
source or import read stored rows as the unfiltered view does, issue 33

At two million labels on PostgreSQL the filtered views counted from the labels: one slice
3.3 s, one category 2.5 s, the source filter 11.7 s. Each of the five stored tables
(agreement_pairs, agreement_pair_codes, agreement_item_values, agreement_group_values,
agreement_group_annotators) gains a ``scope`` column, first in its primary key: ``""`` for the
rows there were (every current label), ``"slice:NAME"``, ``"category:NAME"``,
``"source:NAME"`` and ``"import:ID"`` for the current labels on the cases of a slice or a
category, made in one place or brought by one import (the newest label of a case and
annotator first, then the filter), and their combinations, at most one filter of each kind
named in this order (``"slice:NAME|category:NAME|source:NAME|import:ID"``; a "%" or "|" in a
name written %25 and %7C), for the labels in all of them.

Filled here from the labels and cases already stored, by the rule of
review.cases.agreement_counts as it was when this revision was written: for each scope of a
case, its current labels in the scope counted as the rows of ``""`` are. The stamps stay: the
new rows stand for what the old ones stood for.

Revision ID: 0041
Revises: 0040
Create Date: 2026-12-06 05:00:00
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from itertools import combinations
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0041"
down_revision: str | None = "0040"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: table -> (key columns without the scope, count columns)
TABLES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "agreement_pairs": (("annotator_a", "annotator_b", "decision_a", "decision_b"), ("cases",)),
    "agreement_pair_codes": (("annotator_a", "annotator_b", "code"), ("both", "in_a", "in_b")),
    "agreement_item_values": (("m", "field", "value"), ("labels", "squares")),
    "agreement_group_values": (("kind", "grp", "m", "decision"), ("labels", "squares")),
    "agreement_group_annotators": (("kind", "grp", "annotator"), ("cases",)),
}

CURRENT = """
SELECT l.case_id, l.annotator, l.decision, l.reason_codes, l.source, l.import_id
FROM labels l
WHERE NOT EXISTS (
    SELECT 1 FROM labels newer
    WHERE newer.case_id = l.case_id AND newer.annotator = l.annotator AND newer.id > l.id
)
"""
GROUPS = """
SELECT case_id, 'slice', slice FROM case_slices
UNION ALL SELECT id, 'category', category FROM cases
"""

Label = tuple[str, str, frozenset[str], str, Any]


def _escaped(value: str) -> str:
    """A value in a scope, "%" and "|" written %25 and %7C (no value reads as two filters)."""
    return value.replace("%", "%25").replace("|", "%7C")


def _codes(value: Any) -> frozenset[str]:
    if isinstance(value, str):
        value = json.loads(value)
    return frozenset(str(x) for x in (value or []))


def _add(counts: dict[Any, list[int]], key: Any, values: Sequence[int]) -> None:
    row = counts.setdefault(key, [0] * len(values))
    for i, v in enumerate(values):
        row[i] += v


def _count(
    out: dict[str, dict[Any, list[int]]],
    scope: str,
    groups: list[tuple[str, str]],
    labels: list[Label],
) -> None:
    """One case's labels in one scope, added to the five tables' counts."""
    for (a, da, ca, _, _), (b, db, cb, _, _) in combinations(sorted(labels), 2):
        _add(out["agreement_pairs"], (scope, a, b, da, db), [1])
        for code in ca | cb:
            _add(
                out["agreement_pair_codes"],
                (scope, a, b, code),
                [int(code in ca and code in cb), int(code in ca), int(code in cb)],
            )
    m = len(labels)
    decisions = Counter(x[1] for x in labels)
    codes = Counter(code for x in labels for code in x[2])
    for field, per_value in (("decision", decisions), ("code", codes)):
        for value, n in per_value.items():
            _add(out["agreement_item_values"], (scope, m, field, value), [n, n * n])
    for kind, name in groups:
        for decision, n in decisions.items():
            _add(out["agreement_group_values"], (scope, kind, name, m, decision), [n, n * n])
        for annotator in sorted({x[0] for x in labels}):
            _add(out["agreement_group_annotators"], (scope, kind, name, annotator), [1])


def _backfill(bind: Any) -> None:
    groups: dict[int, set[tuple[str, str]]] = {}
    for case_id, kind, name in bind.execute(sa.text(GROUPS)):
        groups.setdefault(int(case_id), set()).add((str(kind), str(name)))
    by_case: dict[int, list[Label]] = {}
    for case_id, annotator, decision, codes, source, import_id in bind.execute(sa.text(CURRENT)):
        by_case.setdefault(int(case_id), []).append(
            (str(annotator), str(decision), _codes(codes), str(source), import_id)
        )
    out: dict[str, dict[Any, list[int]]] = {name: {} for name in TABLES}
    for case_id, labels in by_case.items():
        mine = sorted(groups.get(case_id, set()))
        slices = [f"slice:{_escaped(n)}" for k, n in mine if k == "slice"]
        categories = [f"category:{_escaped(n)}" for k, n in mine if k == "category"]
        on_cases = ["", *slices, *categories, *(f"{a}|{b}" for a in slices for b in categories)]
        on_labels: list[tuple[str, list[Label]]] = [("", labels)]
        for source in sorted({x[3] for x in labels}):
            on_labels.append((f"source:{_escaped(source)}", [x for x in labels if x[3] == source]))
        brought = sorted({(x[3], int(x[4])) for x in labels if x[4] is not None})
        for imp in sorted({imp for _, imp in brought}):
            on_labels.append(
                (f"import:{imp}", [x for x in labels if x[4] is not None and int(x[4]) == imp])
            )
        for source, imp in brought:
            on_labels.append(
                (
                    f"source:{_escaped(source)}|import:{imp}",
                    [x for x in labels if x[4] is not None and (x[3], int(x[4])) == (source, imp)],
                )
            )
        for on_case in on_cases:
            for on_label, some in on_labels:
                scope = "|".join(part for part in (on_case, on_label) if part)
                if scope:  # the rows of every label are there already
                    _count(out, scope, mine, some)
    for name, (keys, counts) in TABLES.items():
        columns = ("scope", *keys)
        table = sa.table(name, *[sa.column(c) for c in (*columns, *counts)])
        rows = [
            {**dict(zip(columns, k, strict=True)), **dict(zip(counts, v, strict=True))}
            for k, v in sorted(out[name].items())
            if any(v)
        ]
        for lo in range(0, len(rows), 5000):
            bind.execute(sa.insert(table), rows[lo : lo + 5000])


def upgrade() -> None:
    for name, (keys, _) in TABLES.items():
        with op.batch_alter_table(name, recreate="always") as b:
            b.add_column(sa.Column("scope", sa.Text(), nullable=False, server_default=""))
            b.drop_constraint(f"pk_{name}", type_="primary")
            b.create_primary_key(f"pk_{name}", ["scope", *keys])
    _backfill(op.get_bind())


def downgrade() -> None:
    for name, (keys, _) in TABLES.items():
        op.execute(f"DELETE FROM {name} WHERE scope <> ''")
        with op.batch_alter_table(name, recreate="always") as b:
            b.drop_constraint(f"pk_{name}", type_="primary")
            b.drop_column("scope")
            b.create_primary_key(f"pk_{name}", list(keys))
