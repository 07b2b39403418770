"""The Agreement page's figures per slice and per category, stored (issue 33).

The page's table by slice (or by category) needs, per group of cases and label count m, the
items, each decision's labels and the sum of the squared per-case counts, and the annotators
with a label on the group's cases. Counted from the labels that is a grouping of every current
label by case joined to the cases' slices: about 3.5 s at two million labels on PostgreSQL.

The rule (:func:`reference_counts`), over the current labels (the newest row of each case and
annotator), case by case; for a case with m current labels, in each of its groups (each of its
slices, ``("slice", name)``, and its category, ``("category", name)``):

* ``agreement_group_values``: for each decision on its labels, with n the number of its labels
  with that decision, n added to ``labels`` and n * n to ``squares`` of (group, m, decision);
* ``agreement_group_annotators``: 1 added to ``cases`` of (group, annotator) for each annotator
  with a current label on it.

Rows whose counts are all 0 are not stored. Two things move a case's figures: a label (the
labeling service moves them with its other rollup, review.labels.agreement_rollup) and an
edit of the case's slices or category (the case service, :func:`hold` before and
:func:`settle` after). Both move the stored rows by the case's figures after minus before.

Whether the rows stand for the cases as they are: triggers on ``case_slices`` (any write) and
``cases`` (a change of category, a delete) bump the counter ``counters.case_groups_changes``,
whoever writes (migration 0039). ``counters.agreement_groups_stamp`` holds the value the rows
stand for: the case service, having locked the counter, moves the rows and sets the stamp to
the counter again only when it was equal before. A case written past the service (a bulk
load) leaves the stamp behind, and readers count from the labels until :func:`rebuild` runs.
The rows also stand for the labels only while the label rollup's stamp is right (a label
written past the service), which readers check as well."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from sqlalchemy import delete, func, insert, literal, select, union_all, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from review.cases.agreed import current_label_filter
from storage.counted import move_counts
from storage.db import plain_rows
from storage.inlists import one_of
from storage.models import (
    AgreementGroupAnnotator,
    AgreementGroupValue,
    Case,
    CaseSlice,
    Label,
)
from storage.models import Counter as CounterRow

__all__ = [
    "COUNTER",
    "STAMP",
    "GroupCounts",
    "case_counts",
    "hold",
    "move",
    "rebuild",
    "reference_counts",
    "settle",
    "stamp_columns",
    "stored_counts",
]

#: bumped by the triggers on ``case_slices`` and ``cases`` (migration 0039)
COUNTER: Final = "case_groups_changes"
#: the value of COUNTER the stored rows stand for
STAMP: Final = "agreement_groups_stamp"

#: case ids per statement when reading the labels and groups of a set of cases
_CHUNK = 500

Key = tuple[Any, ...]
Counts = dict[Key, tuple[int, ...]]


def _add(counts: Counts, key: Key, values: tuple[int, ...]) -> None:
    old = counts.get(key)
    counts[key] = values if old is None else tuple(x + y for x, y in zip(old, values, strict=True))


@dataclass
class GroupCounts:
    """The two tables' counts: (kind, group, m, decision) -> (labels, squares) and
    (kind, group, annotator) -> (cases,)."""

    values: Counts = field(default_factory=dict)
    annotators: Counts = field(default_factory=dict)

    def add_case(
        self, groups: Iterable[tuple[str, str]], labels: Sequence[tuple[str, str]]
    ) -> None:
        """Count one case's current labels ((annotator, decision)) in each of its groups."""
        m = len(labels)
        if not m:
            return
        decisions = Tally(d for _, d in labels)
        who = sorted({a for a, _ in labels})
        for grouping, name in groups:
            for decision, n in decisions.items():
                _add(self.values, (grouping, name, m, decision), (n, n * n))
            for annotator in who:
                _add(self.annotators, (grouping, name, annotator), (1,))

    def nonzero(self) -> GroupCounts:
        """The same counts without the keys whose counts are all 0 (as stored)."""
        return GroupCounts(
            {k: v for k, v in self.values.items() if any(v)},
            {k: v for k, v in self.annotators.items() if any(v)},
        )


def _count(label_rows: Iterable[Sequence[Any]], group_rows: Iterable[Sequence[Any]]) -> GroupCounts:
    """The counts from current-label rows (case_id, annotator, decision) and group rows
    (case_id, grouping, name)."""
    groups: dict[int, list[tuple[str, str]]] = {}
    for case_id, grouping, name in group_rows:
        groups.setdefault(int(case_id), []).append((str(grouping), str(name)))
    labels: dict[int, list[tuple[str, str]]] = {}
    for case_id, annotator, decision in label_rows:
        labels.setdefault(int(case_id), []).append((str(annotator), str(decision)))
    out = GroupCounts()
    for case_id, case_labels in labels.items():
        out.add_case(groups.get(case_id, []), case_labels)
    return out


def _current_labels() -> Any:
    return select(Label.case_id, Label.annotator, Label.decision).where(current_label_filter())


def _group_selects() -> tuple[tuple[Any, Any], ...]:
    """The groups of the cases, (case id, kind, name) rows, as (select, its case id column):
    one row per slice of a case and one for its category."""
    return (
        (select(CaseSlice.case_id, literal("slice"), CaseSlice.slice), CaseSlice.case_id),
        (select(Case.id, literal("category"), Case.category), Case.id),
    )


def _groups() -> Any:
    return union_all(*(stmt for stmt, _ in _group_selects())).subquery()


def case_counts(s: Session, case_ids: Iterable[int]) -> GroupCounts:
    """The rule over the current labels and the groups of ``case_ids`` (read in the caller's
    transaction)."""
    ids = sorted(set(case_ids))
    s.flush()
    label_rows: list[Sequence[Any]] = []
    group_rows: list[Sequence[Any]] = []
    for lo in range(0, len(ids), _CHUNK):
        part = ids[lo : lo + _CHUNK]
        label_rows.extend(s.execute(_current_labels().where(one_of(s, Label.case_id, part))))
        for stmt, case_id in _group_selects():  # each filtered by its own indexed column
            group_rows.extend(s.execute(stmt.where(one_of(s, case_id, part))))
    return _count(label_rows, group_rows)


def reference_counts(s: Session) -> GroupCounts:
    """The rule over every current label and every case's groups: what the tables must hold."""
    s.flush()
    return _count(plain_rows(s, _current_labels()), plain_rows(s, select(_groups())))


def stored_counts(s: Session) -> GroupCounts:
    """The stored tables, as counts."""
    v, a = AgreementGroupValue, AgreementGroupAnnotator
    return GroupCounts(
        {
            (str(g), str(n), int(m), str(d)): (int(x), int(y))
            for g, n, m, d, x, y in s.execute(
                select(v.kind, v.grp, v.m, v.decision, v.labels, v.squares)
            )
        },
        {
            (str(g), str(n), str(who)): (int(k),)
            for g, n, who, k in s.execute(select(a.kind, a.grp, a.annotator, a.cases))
        },
    )


_TABLES: Final = (
    (AgreementGroupValue, ("kind", "grp", "m", "decision"), ("labels", "squares")),
    (AgreementGroupAnnotator, ("kind", "grp", "annotator"), ("cases",)),
)


def move(s: Session, before: GroupCounts, after: GroupCounts) -> None:
    """Add ``after - before`` to the stored rows (storage.counted: in key order, so that two
    writers lock shared rows in the same order; rows that fell to 0 dropped)."""
    for (model, keys, counts), old, new in zip(
        _TABLES,
        (before.values, before.annotators),
        (after.values, after.annotators),
        strict=True,
    ):
        move_counts(s, model, keys, counts, old, new)


def hold(s: Session) -> int:
    """Before the case service writes a case's slices or category: lock the change counter (no
    other writer of slices or categories can bump it until this transaction ends) and return
    its value (-1 when it has no row: the stored rows are then never used)."""
    value = s.scalar(select(CounterRow.value).where(CounterRow.name == COUNTER).with_for_update())
    return -1 if value is None else int(value)


def settle(s: Session, held: int) -> None:
    """After the case service wrote a case and moved its figures: the stored rows stand for the
    new counter value if they stood for ``held`` (the value :func:`hold` returned)."""
    s.flush()
    counter = CounterRow.__table__.alias("changes")
    s.execute(
        update(CounterRow)
        .where(CounterRow.name == STAMP, CounterRow.value == held)
        .values(value=select(counter.c.value).where(counter.c.name == COUNTER).scalar_subquery())
    )


def stamp_columns() -> tuple[Any, Any]:
    """SQL: the counter value the stored rows stand for and the counter's own (-1 and -2
    without rows: never equal), as scalar subqueries to read in the reader's statement."""

    def value(name: str, missing: int) -> Any:
        return func.coalesce(
            select(CounterRow.value).where(CounterRow.name == name).scalar_subquery(), missing
        )

    return value(STAMP, -1), value(COUNTER, -2)


def _item_rows() -> Any:
    """SQL: per case and decision of its current labels, the labels n with it and the case's
    label count m."""
    per = (
        select(Label.case_id, Label.decision, func.count().label("n"))
        .where(current_label_filter())
        .group_by(Label.case_id, Label.decision)
        .subquery()
    )
    return select(
        per.c.case_id,
        per.c.decision,
        per.c.n,
        func.sum(per.c.n).over(partition_by=per.c.case_id).label("m"),
    ).subquery()


def rebuild(s: Session) -> int:
    """Recompute the stored rows from every current label and every case's groups (two
    grouped statements) and stamp them with the counter's value; returns the value rows."""
    s.execute(delete(AgreementGroupValue))
    s.execute(delete(AgreementGroupAnnotator))
    item = _item_rows()
    g = _groups()
    gid, gkind, gname = g.c[0], g.c[1], g.c[2]
    values = (
        select(
            gkind,
            gname,
            item.c.m,
            item.c.decision,
            func.sum(item.c.n),
            func.sum(item.c.n * item.c.n),
        )
        .select_from(item.join(g, gid == item.c.case_id))
        .group_by(gkind, gname, item.c.m, item.c.decision)
    )
    s.execute(
        insert(AgreementGroupValue).from_select(
            ["kind", "grp", "m", "decision", "labels", "squares"], values
        )
    )
    cur = _current_labels().subquery()
    annotators = (
        select(gkind, gname, cur.c.annotator, func.count())
        .select_from(cur.join(g, gid == cur.c.case_id))
        .group_by(gkind, gname, cur.c.annotator)
    )
    s.execute(
        insert(AgreementGroupAnnotator).from_select(
            ["kind", "grp", "annotator", "cases"], annotators
        )
    )
    dialect = s.get_bind().dialect.name
    maker: Any = postgresql.insert if dialect == "postgresql" else sqlite.insert
    now = select(CounterRow.value).where(CounterRow.name == COUNTER).scalar_subquery()
    stamp = maker(CounterRow).values(name=STAMP, value=func.coalesce(now, -1), version=1)
    s.execute(
        stamp.on_conflict_do_update(index_elements=["name"], set_={"value": stamp.excluded.value})
    )
    return int(s.scalar(select(func.count()).select_from(AgreementGroupValue)) or 0)
