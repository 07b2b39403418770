"""The Agreement page's counts over every current label, stored, so that its unfiltered views
read a few thousand rows instead of grouping every current label by case and joining it to the
other current labels of its case (issue 18).

The rule (:func:`reference_counts`), over the current labels (the newest row of each case and
annotator), case by case; for a case with m current labels:

* ``agreement_pairs``: for every two annotators a < b (code-point order, as Python sorts
  strings) on the case, one case for (a, b, a's decision, b's decision);
* ``agreement_pair_codes``: for those two and every reason code on either label (a label has a
  code when its list holds it), one case in ``both`` when both labels have it, in ``in_a`` when
  a's has it, in ``in_b`` when b's has it;
* ``agreement_item_values``: for every decision and every reason code on the case's labels,
  with n the number of its labels with that value, n added to ``labels`` and n * n to
  ``squares`` of (m, "decision" or "code", value).

Rows whose counts are all 0 are not stored. The labeling service keeps the tables in step in
the transaction that adds a label, under the case lock (:func:`case_counts` before the label is
written, :func:`refresh_rollup` after): the case's counts after minus its counts before are
added to the stored rows. ``agreement_rollup_stamp`` holds the number of label rows and the
newest label id the tables stand for; a reader uses them only while these equal the labels
table's (:func:`stamp_columns`), so a label written past the service (a bulk load) makes
readers count from the labels until :func:`rebuild_rollup` runs.

The same cases' figures per slice and per category (review.cases.agreement_groups) move with
these tables in the same transaction, and :func:`rebuild_rollup` recomputes them too."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from sqlalchemy import Engine, case, delete, func, insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from review.cases import agreement_groups
from review.cases.agreed import current_label_filter
from review.cases.agreement_groups import GroupCounts
from storage.counted import move_counts
from storage.db import plain_rows, run_write
from storage.models import (
    AgreementItemValue,
    AgreementPair,
    AgreementPairCode,
    AgreementRollupStamp,
    Label,
)

__all__ = [
    "RollupCounts",
    "case_counts",
    "rebuild_everything",
    "rebuild_rollup",
    "reference_counts",
    "refresh_rollup",
    "stamp_columns",
    "stored_counts",
]

#: case ids per statement when reading the labels of a set of cases
_CHUNK = 500

Key = tuple[Any, ...]
Counts = dict[Key, tuple[int, ...]]


@dataclass(frozen=True)
class _Table:
    model: Any
    keys: tuple[str, ...]
    counts: tuple[str, ...]


_PAIRS = _Table(
    AgreementPair, ("annotator_a", "annotator_b", "decision_a", "decision_b"), ("cases",)
)
_PAIR_CODES = _Table(
    AgreementPairCode, ("annotator_a", "annotator_b", "code"), ("both", "in_a", "in_b")
)
_ITEM_VALUES = _Table(AgreementItemValue, ("m", "field", "value"), ("labels", "squares"))


def _add(counts: Counts, key: Key, values: tuple[int, ...]) -> None:
    old = counts.get(key)
    counts[key] = values if old is None else tuple(x + y for x, y in zip(old, values, strict=True))


@dataclass
class RollupCounts:
    """The three tables' counts of some cases, per table a dict key -> counts (in the
    tables' column order)."""

    pairs: Counts = field(default_factory=dict)
    pair_codes: Counts = field(default_factory=dict)
    item_values: Counts = field(default_factory=dict)
    #: the same cases' figures per slice and category (review.cases.agreement_groups)
    groups: GroupCounts = field(default_factory=GroupCounts)

    def add_case(self, labels: Sequence[tuple[str, str, frozenset[str]]]) -> None:
        """Count one case's current labels (annotator, decision, codes)."""
        for (a, da, ca), (b, db, cb) in combinations(sorted(labels), 2):
            _add(self.pairs, (a, b, da, db), (1,))
            for code in ca | cb:
                _add(
                    self.pair_codes,
                    (a, b, code),
                    (int(code in ca and code in cb), int(code in ca), int(code in cb)),
                )
        m = len(labels)
        decisions = Counter(d for _, d, _ in labels)
        codes = Counter(code for _, _, cs in labels for code in cs)
        for kind, per_value in (("decision", decisions), ("code", codes)):
            for value, n in per_value.items():
                _add(self.item_values, (m, kind, value), (n, n * n))

    def table(self, t: _Table) -> Counts:
        return {_PAIRS: self.pairs, _PAIR_CODES: self.pair_codes, _ITEM_VALUES: self.item_values}[t]

    def nonzero(self) -> RollupCounts:
        """The same counts without the keys whose counts are all 0 (as stored)."""
        pairs, pair_codes, item_values = (
            {k: v for k, v in t.items() if any(v)} for t in self._all()
        )
        return RollupCounts(pairs, pair_codes, item_values, self.groups.nonzero())

    def _all(self) -> tuple[Counts, Counts, Counts]:
        return self.pairs, self.pair_codes, self.item_values


def _codes(value: Any) -> frozenset[str]:
    """A label's reason codes as a set of strings, from the JSON column (a list, or its text
    where the driver hands JSON back raw)."""
    if isinstance(value, str):
        value = json.loads(value)
    return frozenset(str(x) for x in (value or []))


def _count(rows: Iterable[Sequence[Any]]) -> RollupCounts:
    """The counts from current-label rows (case_id, annotator, decision, reason codes)."""
    by_case: dict[int, list[tuple[str, str, frozenset[str]]]] = {}
    for case_id, annotator, decision, codes in rows:
        by_case.setdefault(int(case_id), []).append((str(annotator), str(decision), _codes(codes)))
    out = RollupCounts()
    for labels in by_case.values():
        out.add_case(labels)
    return out


def _current_labels() -> Any:
    return select(Label.case_id, Label.annotator, Label.decision, Label.reason_codes).where(
        current_label_filter()
    )


def case_counts(s: Session, case_ids: Iterable[int]) -> RollupCounts:
    """The rule over the current labels of ``case_ids`` (read in the caller's transaction)."""
    ids = sorted(set(case_ids))
    s.flush()
    rows: list[Sequence[Any]] = []
    for lo in range(0, len(ids), _CHUNK):
        part = ids[lo : lo + _CHUNK]
        rows.extend(s.execute(_current_labels().where(Label.case_id.in_(part))).all())
    out = _count(rows)
    out.groups = agreement_groups.case_counts(s, ids)
    return out


def reference_counts(s: Session) -> RollupCounts:
    """The rule over every current label: what the stored tables must hold."""
    s.flush()
    out = _count(plain_rows(s, _current_labels()))
    out.groups = agreement_groups.reference_counts(s)
    return out


def stored_counts(s: Session) -> RollupCounts:
    """The stored tables, as counts."""
    out = RollupCounts()
    for t in (_PAIRS, _PAIR_CODES, _ITEM_VALUES):
        columns = [getattr(t.model, c) for c in (*t.keys, *t.counts)]
        k = len(t.keys)
        out.table(t).update(
            {
                tuple(int(x) if c == "m" else str(x) for c, x in zip(t.keys, r[:k], strict=True)): (
                    tuple(int(x) for x in r[k:])
                )
                for r in s.execute(select(*columns))
            }
        )
    out.groups = agreement_groups.stored_counts(s)
    return out


def stamp_columns() -> tuple[Any, Any]:
    """SQL: the label rows the rollup stands for and their newest id (0 and 0 without a stamp
    row: an empty database has none), as scalar subqueries to read beside the labels table's
    own figures in one statement (one snapshot). The rollup may be used only while both equal
    them."""
    one = AgreementRollupStamp.id == 1
    return (
        func.coalesce(select(AgreementRollupStamp.labels).where(one).scalar_subquery(), 0),
        func.coalesce(select(AgreementRollupStamp.newest_label_id).where(one).scalar_subquery(), 0),
    )


def _move(s: Session, t: _Table, before: Counts, after: Counts) -> None:
    """Add ``after - before`` to the stored rows of ``t`` (storage.counted: keys in order, so
    that two writers lock shared rows in the same order; rows that fell to 0 dropped)."""
    move_counts(s, t.model, t.keys, t.counts, before, after)


def refresh_rollup(s: Session, case_id: int, before: RollupCounts, new_label_id: int) -> None:
    """After one label was added to ``case_id`` (``before``: :func:`case_counts` of the case
    read before it was written, under the same case lock), move the stored tables by the
    case's change and count the label in the stamp. The stamp row is updated first, so every
    writer locks the shared rows in the same order."""
    after = case_counts(s, [case_id])
    dialect = s.get_bind().dialect.name
    maker: Any = postgresql.insert if dialect == "postgresql" else sqlite.insert
    stamp = maker(AgreementRollupStamp).values(id=1, labels=1, newest_label_id=new_label_id)
    stamp = stamp.on_conflict_do_update(
        index_elements=["id"],
        set_={
            "labels": AgreementRollupStamp.labels + 1,
            "newest_label_id": case(
                (AgreementRollupStamp.newest_label_id < new_label_id, new_label_id),
                else_=AgreementRollupStamp.newest_label_id,
            ),
        },
    )
    s.execute(stamp)
    for t in (_PAIRS, _PAIR_CODES, _ITEM_VALUES):
        _move(s, t, before.table(t), after.table(t))
    agreement_groups.move(s, before.groups, after.groups)


def rebuild_rollup(s: Session) -> int:
    """Recompute the stored tables from every current label and stamp them (after a bulk
    load of labels that did not go through the labeling service); returns the pair rows."""
    counts = reference_counts(s).nonzero()
    s.execute(delete(AgreementRollupStamp))
    for t in (_PAIRS, _PAIR_CODES, _ITEM_VALUES):
        s.execute(delete(t.model))
        rows = [
            {**dict(zip(t.keys, k, strict=True)), **dict(zip(t.counts, v, strict=True))}
            for k, v in sorted(counts.table(t).items())
        ]
        if rows:
            s.execute(insert(t.model), rows)
    agreement_groups.rebuild(s)
    n, newest = s.execute(select(func.count(Label.id), func.coalesce(func.max(Label.id), 0))).one()
    if n:  # no row stands for no label (an empty database holds no row at all)
        s.add(AgreementRollupStamp(id=1, labels=int(n), newest_label_id=int(newest)))
        s.flush()
    return len(counts.pairs)


def rebuild_everything(engine: Engine) -> int:
    """:func:`rebuild_rollup` in a write transaction of its own (the rollup and the figures per
    slice and category together): what an admin runs after labels or cases were written past
    the services (a bulk load, a restore of a partial dump). Returns the label rows the
    figures now stand for."""

    def work(s: Session) -> int:
        rebuild_rollup(s)
        return int(s.scalar(select(func.count(Label.id))) or 0)

    return run_write(engine, work)


def refresh_rollup_cases(
    s: Session, case_ids: Sequence[int], before: RollupCounts, added: int, newest_label_id: int
) -> None:
    """After ``added`` labels were written to ``case_ids`` in one transaction (a label import;
    ``before``: :func:`case_counts` of those cases read before, under their locks), move the
    stored tables by the cases' change and count the labels in the stamp, as
    :func:`refresh_rollup` does for one label."""
    if not added:
        return
    after = case_counts(s, case_ids)
    dialect = s.get_bind().dialect.name
    maker: Any = postgresql.insert if dialect == "postgresql" else sqlite.insert
    stamp = maker(AgreementRollupStamp).values(id=1, labels=added, newest_label_id=newest_label_id)
    stamp = stamp.on_conflict_do_update(
        index_elements=["id"],
        set_={
            "labels": AgreementRollupStamp.labels + added,
            "newest_label_id": case(
                (AgreementRollupStamp.newest_label_id < newest_label_id, newest_label_id),
                else_=AgreementRollupStamp.newest_label_id,
            ),
        },
    )
    s.execute(stamp)
    for t in (_PAIRS, _PAIR_CODES, _ITEM_VALUES):
        _move(s, t, before.table(t), after.table(t))
    agreement_groups.move(s, before.groups, after.groups)
