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

The same rule is kept per scope (the ``scope`` column of each table, and of the figures per
slice and category, review.cases.agreement_groups), so that the Agreement page's filtered
views read a few thousand rows as its default view does. A scope is at most one filter of
each kind (:func:`scope_key`): ``""`` is every current label, ``"slice:NAME"`` and
``"category:NAME"`` the current labels on the cases of a slice or a category,
``"source:NAME"`` and ``"import:ID"`` the current labels made in one place or brought by one
import (a label replaced since counts in none: the newest label of a case and annotator is
found first, then the filter applies, as the page's Scope says), and their combinations
(``"slice:NAME|category:NAME|source:NAME"``) the labels in all of them. For each scope the
rule counts a case's labels in it as above, m being the number of them. (A family's views are
counted from the labels by the report: a family is a handful of cases.)

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

from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from review.cases import agreement_groups
from review.cases.agreed import current_label_filter
from review.cases.agreement_groups import GroupCounts
from storage.counted import move_counts
from storage.db import plain_rows
from storage.inlists import one_of
from storage.models import AgreementItemValue, AgreementPair, AgreementPairCode, Label

__all__ = [
    "TABLES",
    "RollupCounts",
    "Table",
    "case_counts",
    "move",
    "rebuild",
    "reference_counts",
    "scope_key",
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


PAIRS = Table(
    AgreementPair,
    ("scope", "annotator_a", "annotator_b", "decision_a", "decision_b"),
    ("cases",),
)
PAIR_CODES = Table(
    AgreementPairCode, ("scope", "annotator_a", "annotator_b", "code"), ("both", "in_a", "in_b")
)
ITEM_VALUES = Table(AgreementItemValue, ("scope", "m", "field", "value"), ("labels", "squares"))

#: a filter: (kind, value), kind "slice" or "category" (on the cases: one of their groups),
#: "source" or "import" (on the labels themselves)
Filter = tuple[str, object]
#: the kinds of filter, in the order a scope names them
KINDS = ("slice", "category", "source", "import")


def scope_key(*filters: Filter) -> str:
    """The ``scope`` of the stored rows of some filters, at most one of each kind: ``""``,
    ``"slice:NAME"``, ``"import:7"``, ``"slice:NAME|category:NAME|source:NAME"`` (named in
    the order of :data:`KINDS`; a "|" or "%" in a value escaped)."""
    ordered = sorted(filters, key=lambda f: KINDS.index(f[0]))
    return "|".join(f"{kind}:{_escaped(value)}" for kind, value in ordered)


def _escaped(value: object) -> str:
    """A filter's value in a scope, with "%" and "|" written %25 and %7C, so that no value
    (a slice written past the case service may hold any text) reads as two filters."""
    return str(value).replace("%", "%25").replace("|", "%7C")


@dataclass(frozen=True)
class _Label:
    annotator: str
    decision: str
    codes: frozenset[str]
    source: str
    import_id: int | None


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


LabelFilters = tuple[Filter, ...]


def _label_filters(labels: Sequence[_Label]) -> list[tuple[LabelFilters, Sequence[_Label]]]:
    """The filters on the labels one case's labels are in, each with its labels: none, the
    labels of one source, of one import, and of one source and one import."""
    out: list[tuple[LabelFilters, Sequence[_Label]]] = [((), labels)]
    for source in sorted({x.source for x in labels}):
        out.append(((("source", source),), [x for x in labels if x.source == source]))
    brought = sorted({(x.source, x.import_id) for x in labels if x.import_id is not None})
    for imp in sorted({imp for _, imp in brought}):
        out.append(((("import", imp),), [x for x in labels if x.import_id == imp]))
    for source, imp in brought:
        out.append(
            (
                (("source", source), ("import", imp)),
                [x for x in labels if (x.source, x.import_id) == (source, imp)],
            )
        )
    return out


def _case_filters(groups: Sequence[tuple[str, str]]) -> list[tuple[Filter, ...]]:
    """The filters on the cases a case with ``groups`` is in: none, one of its slices, its
    category, and one of its slices with its category."""
    slices = [g for g in groups if g[0] == "slice"]
    categories = [g for g in groups if g[0] == "category"]
    out: list[tuple[Filter, ...]] = [(), *((g,) for g in groups)]
    return out + [(sl, cat) for sl in slices for cat in categories]


@dataclass
class _Partial:
    """The counts of the cases that have one same set of groups, keyed by the filters on the
    labels first (instead of a scope): those cases are in the same filters on the cases, so
    their labels are counted once per filter on the labels and the sums spread to every
    scope at the end (:meth:`spread`), not counted once per scope. ``annotators``: per
    filter on the labels and annotator, the cases with a label of theirs in it."""

    pairs: Counts = field(default_factory=dict)
    pair_codes: Counts = field(default_factory=dict)
    item_values: Counts = field(default_factory=dict)
    annotators: Counts = field(default_factory=dict)

    def add_case(self, labels: Sequence[_Label]) -> None:
        """The rule over one case's current labels, for each filter on the labels."""
        for on_labels, some in _label_filters(labels):
            ordered = sorted(some, key=lambda x: x.annotator)
            for x, y in combinations(ordered, 2):
                a, b, ca, cb = x.annotator, y.annotator, x.codes, y.codes
                _add(self.pairs, (on_labels, a, b, x.decision, y.decision), (1,))
                for code in ca | cb:
                    _add(
                        self.pair_codes,
                        (on_labels, a, b, code),
                        (int(code in ca and code in cb), int(code in ca), int(code in cb)),
                    )
            m = len(some)
            decisions = Counter(x.decision for x in some)
            codes = Counter(code for x in some for code in x.codes)
            for kind, per_value in (("decision", decisions), ("code", codes)):
                for value, n in per_value.items():
                    _add(self.item_values, (on_labels, m, kind, value), (n, n * n))
            for x in ordered:
                _add(self.annotators, (on_labels, x.annotator), (1,))

    def spread(self, groups: Sequence[tuple[str, str]], out: RollupCounts) -> None:
        """Add the sums to ``out`` in every scope of the cases (``groups``: their groups),
        and to the figures of each of their groups: a group's values are the decisions' item
        values, its annotators the annotators' cases."""
        every = {key[0] for key in self.item_values}  # each filter with a label has values
        for on_cases in _case_filters(groups):
            scopes = {on_labels: scope_key(*on_cases, *on_labels) for on_labels in every}
            for (on_labels, *rest), v in self.pairs.items():
                _add(out.pairs, (scopes[on_labels], *rest), v)
            for (on_labels, *rest), v in self.pair_codes.items():
                _add(out.pair_codes, (scopes[on_labels], *rest), v)
            for (on_labels, m, kind, value), v in self.item_values.items():
                scope = scopes[on_labels]
                _add(out.item_values, (scope, m, kind, value), v)
                if kind == "decision":
                    for grouping, name in groups:
                        _add(out.groups.values, (scope, grouping, name, m, value), v)
            for (on_labels, annotator), v in self.annotators.items():
                for grouping, name in groups:
                    _add(out.groups.annotators, (scopes[on_labels], grouping, name, annotator), v)


def _codes(value: Any) -> frozenset[str]:
    """A label's reason codes as a set of strings, from the JSON column (a list, or its text
    where the driver hands JSON back raw)."""
    if isinstance(value, str):
        value = json.loads(value)
    return frozenset(str(x) for x in (value or []))


def _count(
    label_rows: Iterable[Sequence[Any]], group_rows: Iterable[Sequence[Any]]
) -> RollupCounts:
    """The counts from current-label rows (case_id, annotator, decision, reason codes,
    source, import id) and group rows (case_id, kind, name)."""
    groups: dict[int, list[tuple[str, str]]] = {}
    for case_id, kind, name in group_rows:
        groups.setdefault(int(case_id), []).append((str(kind), str(name)))
    by_case: dict[int, list[_Label]] = {}
    for case_id, annotator, decision, codes, source, import_id in label_rows:
        by_case.setdefault(int(case_id), []).append(
            _Label(
                str(annotator),
                str(decision),
                _codes(codes),
                str(source),
                None if import_id is None else int(import_id),
            )
        )
    # the cases by their set of groups (a few hundred sets, however many cases)
    partials: dict[tuple[tuple[str, str], ...], _Partial] = {}
    for case_id, labels in by_case.items():
        mine = tuple(sorted(set(groups.get(case_id, []))))
        partials.setdefault(mine, _Partial()).add_case(labels)
    out = RollupCounts()
    for mine, partial in partials.items():
        partial.spread(mine, out)
    return out


def _current_labels() -> Any:
    return select(
        Label.case_id,
        Label.annotator,
        Label.decision,
        Label.reason_codes,
        Label.source,
        Label.import_id,
    ).where(current_label_filter())


def case_counts(s: Session, case_ids: Iterable[int]) -> RollupCounts:
    """The rule over the current labels and the groups of ``case_ids`` (read in the caller's
    transaction)."""
    ids = sorted(set(case_ids))
    s.flush()
    label_rows: list[Sequence[Any]] = []
    group_rows: list[Sequence[Any]] = []
    for lo in range(0, len(ids), _CHUNK):
        part = ids[lo : lo + _CHUNK]
        label_rows.extend(s.execute(_current_labels().where(one_of(s, Label.case_id, part))))
        for stmt, case_id in agreement_groups.group_selects():  # each by its indexed column
            group_rows.extend(s.execute(stmt.where(one_of(s, case_id, part))))
    return _count(label_rows, group_rows)


def reference_counts(s: Session) -> RollupCounts:
    """The rule over every current label and every case's groups: what the stored tables must
    hold."""
    s.flush()
    return _count(
        plain_rows(s, _current_labels()), plain_rows(s, select(agreement_groups.group_rows()))
    )


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


def rebuild(s: Session) -> RollupCounts:
    """Recompute every stored row (the three tables and the figures per slice and category,
    in every scope) from every current label and every case's groups; returns the counts now
    stored. The caller stamps them."""
    counts = reference_counts(s).nonzero()
    groups = agreement_groups.TABLES
    for model, keys, names, data in (
        *((t.model, t.keys, t.counts, counts.table(t)) for t in TABLES),
        *(
            (model, keys, names, data)
            for (model, keys, names), data in zip(
                groups, (counts.groups.values, counts.groups.annotators), strict=True
            )
        ),
    ):
        s.execute(delete(model))
        rows = [
            {**dict(zip(keys, k, strict=True)), **dict(zip(names, v, strict=True))}
            for k, v in sorted(data.items())
        ]
        for lo in range(0, len(rows), 5000):
            s.execute(insert(model), rows[lo : lo + 5000])
    return counts
