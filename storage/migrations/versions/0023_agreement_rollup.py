"""The Agreement page's counts over every current label, stored (agreement_pairs,
agreement_pair_codes, agreement_item_values, agreement_rollup_stamp), issue 18

Filled here from the labels already stored, by the rule of review.labels.agreement_rollup as
it was when this revision was written. Over the current labels (the newest row of each case and
annotator), case by case, for a case with m current labels: for every two annotators a < b
(code-point order) on it, one case for (a, b, a's decision, b's decision), and per reason code
on either label one case in both / in_a / in_b as both labels / a's / b's have it; for every
decision and reason code on its labels, with n the number of its labels with it, n added to
labels and n * n to squares of (m, "decision" or "code", value). Rows whose counts are all 0
are not stored. The stamp holds the number of label rows and the newest label id (no row: no
label). From this revision on the labeling service keeps them in step.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-02 02:10:00
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from itertools import combinations
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CURRENT = """
SELECT l.case_id, l.annotator, l.decision, l.reason_codes
FROM labels l
WHERE NOT EXISTS (
    SELECT 1 FROM labels newer
    WHERE newer.case_id = l.case_id AND newer.annotator = l.annotator AND newer.id > l.id
)
"""


def _codes(value: Any) -> frozenset[str]:
    if isinstance(value, str):
        value = json.loads(value)
    return frozenset(str(x) for x in (value or []))


def _add(counts: dict[Any, list[int]], key: Any, values: Sequence[int]) -> None:
    row = counts.setdefault(key, [0] * len(values))
    for i, v in enumerate(values):
        row[i] += v


def _backfill(bind: Any) -> None:
    by_case: dict[int, list[tuple[str, str, frozenset[str]]]] = {}
    for case_id, annotator, decision, codes in bind.execute(sa.text(CURRENT)):
        by_case.setdefault(int(case_id), []).append((str(annotator), str(decision), _codes(codes)))
    pairs: dict[Any, list[int]] = {}
    pair_codes: dict[Any, list[int]] = {}
    item_values: dict[Any, list[int]] = {}
    for labels in by_case.values():
        for (a, da, ca), (b, db, cb) in combinations(sorted(labels), 2):
            _add(pairs, (a, b, da, db), [1])
            for code in ca | cb:
                _add(
                    pair_codes,
                    (a, b, code),
                    [int(code in ca and code in cb), int(code in ca), int(code in cb)],
                )
        m = len(labels)
        decisions = Counter(d for _, d, _ in labels)
        codes = Counter(code for _, _, cs in labels for code in cs)
        for kind, per_value in (("decision", decisions), ("code", codes)):
            for value, n in per_value.items():
                _add(item_values, (m, kind, value), [n, n * n])
    tables: list[tuple[str, tuple[str, ...], tuple[str, ...], dict[Any, list[int]]]] = [
        (
            "agreement_pairs",
            ("annotator_a", "annotator_b", "decision_a", "decision_b"),
            ("cases",),
            pairs,
        ),
        (
            "agreement_pair_codes",
            ("annotator_a", "annotator_b", "code"),
            ("both", "in_a", "in_b"),
            pair_codes,
        ),
        ("agreement_item_values", ("m", "field", "value"), ("labels", "squares"), item_values),
    ]
    for name, keys, counts, data in tables:
        table = sa.table(name, *[sa.column(c) for c in (*keys, *counts)])
        rows = [
            {**dict(zip(keys, k, strict=True)), **dict(zip(counts, v, strict=True))}
            for k, v in sorted(data.items())
            if any(v)
        ]
        if rows:
            bind.execute(sa.insert(table), rows)
    n, newest = bind.execute(sa.text("SELECT COUNT(*), COALESCE(MAX(id), 0) FROM labels")).one()
    if not n:  # no stamp row stands for no label: an empty database stays without rows
        return
    bind.execute(
        sa.text(
            "INSERT INTO agreement_rollup_stamp (id, labels, newest_label_id) VALUES (1, :n, :m)"
        ),
        {"n": int(n), "m": int(newest)},
    )


def upgrade() -> None:
    op.create_table(
        "agreement_pairs",
        sa.Column("annotator_a", sa.String(length=320), nullable=False),
        sa.Column("annotator_b", sa.String(length=320), nullable=False),
        sa.Column("decision_a", sa.String(length=40), nullable=False),
        sa.Column("decision_b", sa.String(length=40), nullable=False),
        sa.Column("cases", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint(
            "annotator_a",
            "annotator_b",
            "decision_a",
            "decision_b",
            name=op.f("pk_agreement_pairs"),
        ),
    )
    op.create_table(
        "agreement_pair_codes",
        sa.Column("annotator_a", sa.String(length=320), nullable=False),
        sa.Column("annotator_b", sa.String(length=320), nullable=False),
        sa.Column("code", sa.Text(), nullable=False),
        sa.Column("both", sa.Integer(), nullable=False),
        sa.Column("in_a", sa.Integer(), nullable=False),
        sa.Column("in_b", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint(
            "annotator_a", "annotator_b", "code", name=op.f("pk_agreement_pair_codes")
        ),
    )
    op.create_table(
        "agreement_item_values",
        sa.Column("m", sa.Integer(), nullable=False),
        sa.Column("field", sa.String(length=20), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("labels", sa.Integer(), nullable=False),
        sa.Column("squares", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("m", "field", "value", name=op.f("pk_agreement_item_values")),
    )
    op.create_table(
        "agreement_rollup_stamp",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("labels", sa.Integer(), nullable=False),
        sa.Column("newest_label_id", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agreement_rollup_stamp")),
    )
    _backfill(op.get_bind())


def downgrade() -> None:
    op.drop_table("agreement_rollup_stamp")
    op.drop_table("agreement_item_values")
    op.drop_table("agreement_pair_codes")
    op.drop_table("agreement_pairs")
