"""The Agreement page's counts over every current label, stored, so that its unfiltered views
read a few thousand rows instead of grouping every current label by case and joining it to the
other current labels of its case (issue 18).

The rule, over the current labels case by case, is review.cases.agreement_counts' (there,
below the case service, because an edit of a case's slices or category moves counts too; its
``case_counts``, ``reference_counts`` and ``stored_counts`` are used from here).

The labeling service keeps the tables in step in
the transaction that adds a label, under the case lock (:func:`case_counts` before the label is
written, :func:`refresh_rollup` after): the case's counts after minus its counts before are
added to the stored rows. ``agreement_rollup_stamp`` holds the number of label rows and the
newest label id the tables stand for; a reader uses them only while these equal the labels
table's (:func:`stamp_columns`), so a label written past the service (a bulk load) makes
readers count from the labels until :func:`rebuild_rollup` runs.

The same cases' figures per slice and per category (review.cases.agreement_groups) move with
these tables in the same transaction, and :func:`rebuild_rollup` recomputes them too."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Engine, case, delete, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from review.cases import agreement_counts, agreement_groups
from review.cases.agreement_counts import (
    RollupCounts,
    case_counts,
    reference_counts,
    stored_counts,
)
from storage.db import run_write
from storage.models import AgreementRollupStamp, Label

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


def refresh_rollup(s: Session, case_id: int, before: RollupCounts, new_label_id: int) -> None:
    """After one label was added to ``case_id`` (``before``: :func:`case_counts` of the case
    read before it was written, under the same case lock), move the stored tables by the
    case's change and count the label in the stamp (:func:`refresh_rollup_cases` of one
    label)."""
    refresh_rollup_cases(s, [case_id], before, 1, new_label_id)


def rebuild_rollup(s: Session) -> int:
    """Recompute the stored tables, in every scope, from every current label and every
    case's groups and stamp them (after a bulk load of labels or cases that did not go
    through the services); returns the annotator-pair rows (every scope's)."""
    s.execute(delete(AgreementRollupStamp))
    counts = agreement_counts.rebuild(s)
    agreement_groups.stamp(s)
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
    :func:`refresh_rollup` does for one label. The stamp row is updated first, so every
    writer locks the shared rows in the same order."""
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
    agreement_counts.move(s, before, after)
