"""The rule behind the Agreement page's stored counts (review.labels.agreement_rollup keeps
them: the tables ``agreement_pairs``, ``agreement_pair_codes`` and ``agreement_item_values``,
and with them the figures per slice and category of review.cases.agreement_groups), over the
current labels (the newest row of each case and annotator), case by case; for a case with m
current labels:

* ``agreement_pairs``: for every two annotators a < b (code-point order, as Python sorts
  strings) on the case, one case for (a, b, a's decision, b's decision);
* ``agreement_pair_codes``: for those two and every reason code on either label (a label has a
  code when its list holds it), one case in ``both`` when both labels have it, in ``in_a`` when
  a's has it, in ``in_b`` when b's has it;
* ``agreement_item_values``: for every decision and every reason code on the case's labels,
  with n the number of its labels with that value, n added to ``labels`` and n * n to
  ``squares`` of (m, "decision" or "code", value).

Rows whose counts are all 0 are not stored. Here, below the labels and the case services,
because both move the counts: the labeling service when a label is added, the case service
when an edit moves a labelled case between slices and categories."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from review.cases import agreement_groups
from review.cases.agreed import current_label_filter
from review.cases.agreement_groups import GroupCounts
from storage.counted import move_counts
from storage.db import plain_rows
from storage.models import AgreementItemValue, AgreementPair, AgreementPairCode, Label

__all__ = [
    "TABLES",
    "RollupCounts",
    "Table",
    "case_counts",
    "move",
    "reference_counts",
    "stored_counts",
]

Key = tuple[Any, ...]
Counts = dict[Key, tuple[int, ...]]

#: case ids per statement when reading the labels of a set of cases
_CHUNK = 500


@dataclass(frozen=True)
class Table:
    model: Any
    keys: tuple[str, ...]
    counts: tuple[str, ...]


PAIRS = Table(AgreementPair, ("annotator_a", "annotator_b", "decision_a", "decision_b"), ("cases",))
PAIR_CODES = Table(
    AgreementPairCode, ("annotator_a", "annotator_b", "code"), ("both", "in_a", "in_b")
)
ITEM_VALUES = Table(AgreementItemValue, ("m", "field", "value"), ("labels", "squares"))


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

    def table(self, t: Table) -> Counts:
        return {PAIRS: self.pairs, PAIR_CODES: self.pair_codes, ITEM_VALUES: self.item_values}[t]

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
    for t in (PAIRS, PAIR_CODES, ITEM_VALUES):
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


TABLES = (PAIRS, PAIR_CODES, ITEM_VALUES)


def move(s: Session, before: RollupCounts, after: RollupCounts) -> None:
    """Add ``after - before`` to the stored rows of every table (storage.counted: keys in
    order, so that two writers lock shared rows in the same order; rows that fell to 0
    dropped)."""
    for t in TABLES:
        move_counts(s, t.model, t.keys, t.counts, before.table(t), after.table(t))
    agreement_groups.move(s, before.groups, after.groups)
