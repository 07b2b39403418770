"""The Agreement page's figures per slice and per category, stored (issue 33).

The page's table by slice (or by category) needs, per group of cases and label count m, the
items, each decision's labels and the sum of the squared per-case counts, and the annotators
with a label on the group's cases. Counted from the labels that is a grouping of every current
label by case joined to the cases' slices: about 3.5 s at two million labels on PostgreSQL.

The rule (review.cases.agreement_counts, which counts them with the rollup's other tables, in
each scope, that is for every label and for the labels of each filter whose view is stored),
over the current labels in the scope, case by case; for a case with m of them, in each of its
groups (each of its slices, ``("slice", name)``, and its category, ``("category", name)``):

* ``agreement_group_values``: for each decision on its labels, with n the number of its labels
  with that decision, n added to ``labels`` and n * n to ``squares`` of (scope, group, m,
  decision);
* ``agreement_group_annotators``: 1 added to ``cases`` of (scope, group, annotator) for each
  annotator with a label on it.

Rows whose counts are all 0 are not stored. Two things move a case's figures: a label (the
labeling service moves them with its other rollup, review.labels.agreement_rollup) and an
edit of the case's slices or category (the case service, :func:`hold` before and
:func:`settle` after). Both move the stored rows by the case's figures after minus before.

Whether the rows stand for the cases as they are: triggers on ``case_slices`` (any write) and
``cases`` (a change of category, a delete) bump the counter ``counters.case_groups_changes``,
whoever writes (migration 0039). ``counters.agreement_groups_stamp`` holds the value the rows
stand for: the case service, having locked the counter, moves the rows and sets the stamp to
the counter again only when it was equal before. A case written past the service (a bulk
load) leaves the stamp behind, and readers count from the labels until a rebuild
(review.labels.agreement_rollup.rebuild_rollup) stamps them again (:func:`stamp`).
The rows also stand for the labels only while the label rollup's stamp is right (a label
written past the service), which readers check as well."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from sqlalchemy import func, literal, select, union_all, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from storage.counted import move_counts
from storage.models import AgreementGroupAnnotator, AgreementGroupValue, Case, CaseSlice
from storage.models import Counter as CounterRow

__all__ = [
    "COUNTER",
    "STAMP",
    "TABLES",
    "GroupCounts",
    "group_rows",
    "group_selects",
    "hold",
    "move",
    "settle",
    "stamp",
    "stamp_columns",
    "stored_counts",
]

#: bumped by the triggers on ``case_slices`` and ``cases`` (migration 0039)
COUNTER: Final = "case_groups_changes"
#: the value of COUNTER the stored rows stand for
STAMP: Final = "agreement_groups_stamp"

Key = tuple[Any, ...]
Counts = dict[Key, tuple[int, ...]]


@dataclass
class GroupCounts:
    """The two tables' counts: (scope, kind, group, m, decision) -> (labels, squares) and
    (scope, kind, group, annotator) -> (cases,), as review.cases.agreement_counts counts
    them."""

    values: Counts = field(default_factory=dict)
    annotators: Counts = field(default_factory=dict)

    def nonzero(self) -> GroupCounts:
        """The same counts without the keys whose counts are all 0 (as stored)."""
        return GroupCounts(
            {k: v for k, v in self.values.items() if any(v)},
            {k: v for k, v in self.annotators.items() if any(v)},
        )


def group_selects() -> tuple[tuple[Any, Any], ...]:
    """The groups of the cases, (case id, kind, name) rows, as (select, its case id column):
    one row per slice of a case and one for its category."""
    return (
        (select(CaseSlice.case_id, literal("slice"), CaseSlice.slice), CaseSlice.case_id),
        (select(Case.id, literal("category"), Case.category), Case.id),
    )


def group_rows() -> Any:
    """SQL: every case's groups, (case id, kind, name) rows."""
    return union_all(*(stmt for stmt, _ in group_selects())).subquery()


def stored_counts(s: Session) -> GroupCounts:
    """The stored tables, as counts."""
    v, a = AgreementGroupValue, AgreementGroupAnnotator
    return GroupCounts(
        {
            (str(sc), str(g), str(n), int(m), str(d)): (int(x), int(y))
            for sc, g, n, m, d, x, y in s.execute(
                select(v.scope, v.kind, v.grp, v.m, v.decision, v.labels, v.squares)
            )
        },
        {
            (str(sc), str(g), str(n), str(who)): (int(k),)
            for sc, g, n, who, k in s.execute(select(a.scope, a.kind, a.grp, a.annotator, a.cases))
        },
    )


TABLES: Final = (
    (AgreementGroupValue, ("scope", "kind", "grp", "m", "decision"), ("labels", "squares")),
    (AgreementGroupAnnotator, ("scope", "kind", "grp", "annotator"), ("cases",)),
)


def move(s: Session, before: GroupCounts, after: GroupCounts) -> None:
    """Add ``after - before`` to the stored rows (storage.counted: in key order, so that two
    writers lock shared rows in the same order; rows that fell to 0 dropped)."""
    for (model, keys, counts), old, new in zip(
        TABLES,
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


def stamp(s: Session) -> None:
    """After the stored rows were recomputed from every label and case (a rebuild): they
    stand for the counter's value now."""
    dialect = s.get_bind().dialect.name
    maker: Any = postgresql.insert if dialect == "postgresql" else sqlite.insert
    now = select(CounterRow.value).where(CounterRow.name == COUNTER).scalar_subquery()
    row = maker(CounterRow).values(name=STAMP, value=func.coalesce(now, -1), version=1)
    s.execute(
        row.on_conflict_do_update(index_elements=["name"], set_={"value": row.excluded.value})
    )
