"""The agreed label of a case: the latest adjudication, else the label its annotators agree on
(two or more current labels, the same decision and the same reason codes). Cases without
either fall back to the author's expected decision where this is used. Read by the runs and
their metrics, the Cases list and page, and the exports.

The current label of an annotator on a case is their newest label row (a label is changed by
adding a row, never by editing one).

The agreed label is stored per case (``case_agreed``) so that reading it costs a join, not a
scan of every label: the labeling service refreshes a case's row (:func:`refresh_agreed`) in
the transaction that adds a label or an adjudication, under the case lock; bulk loaders call
:func:`rebuild_agreed`. :func:`agreed_reference_subquery` is the rule computed from the labels
themselves; the stored rows are made by it and tested against it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    String,
    Text,
    cast,
    delete,
    distinct,
    exists,
    func,
    insert,
    literal_column,
    select,
    union_all,
)
from sqlalchemy.orm import Session, aliased

from storage.db import one_of
from storage.models import Adjudication, CaseAgreed, Label

__all__ = [
    "Agreed",
    "agreed_labels",
    "agreed_reference_subquery",
    "agreed_subquery",
    "current_label_filter",
    "rebuild_agreed",
    "refresh_agreed",
]

#: case ids per statement when refreshing a set of cases (well under SQLite's variable limit)
_CHUNK = 500


def current_label_filter() -> Any:
    """Label rows that are the current label of their (case, annotator): no newer row."""
    newer = aliased(Label)
    return ~exists().where(
        newer.case_id == Label.case_id,
        newer.annotator == Label.annotator,
        newer.id > Label.id,
    )


def agreed_reference_subquery(case_ids: Sequence[int] | None = None) -> Any:
    """The agreed label per case computed from the labels and adjudications themselves (of
    ``case_ids`` only, when given): the latest adjudication; for a case never adjudicated,
    the label its annotators agree on (two or more current labels, the same decision and the
    same reason codes, compared as stored), taken from the newest of them. Columns: case_id,
    gold_decision, gold_reasons, agreed_by, source_id (the adjudication's or the label's id).

    This is the rule; the stored rollup (``case_agreed``, read by :func:`agreed_subquery`) is
    rebuilt from it and tested against it."""
    latest_q = select(Adjudication.case_id, func.max(Adjudication.id).label("adj_id"))
    current_q = select(
        Label.case_id,
        Label.id,
        Label.decision,
        cast(Label.reason_codes, Text).label("rc"),
    ).where(current_label_filter())
    if case_ids is not None:
        latest_q = latest_q.where(Adjudication.case_id.in_(case_ids))
        current_q = current_q.where(Label.case_id.in_(case_ids))
    latest = latest_q.group_by(Adjudication.case_id).subquery()
    adjudicated = select(
        latest.c.case_id,
        Adjudication.decision.label("gold_decision"),
        Adjudication.reason_codes.label("gold_reasons"),
        literal_column("'adjudication'", String).label("agreed_by"),
        Adjudication.id.label("source_id"),
    ).join(Adjudication, Adjudication.id == latest.c.adj_id)
    current = current_q.subquery("current_labels")
    unanimous = (
        select(current.c.case_id, func.max(current.c.id).label("label_id"))
        .group_by(current.c.case_id)
        .having(
            func.count() >= 2,
            func.count(distinct(current.c.decision)) == 1,
            func.count(distinct(current.c.rc)) == 1,
        )
        .subquery("unanimous")
    )
    agreed = (
        select(
            unanimous.c.case_id,
            Label.decision.label("gold_decision"),
            Label.reason_codes.label("gold_reasons"),
            literal_column("'annotators'", String).label("agreed_by"),
            Label.id.label("source_id"),
        )
        .join(Label, Label.id == unanimous.c.label_id)
        .where(~exists().where(Adjudication.case_id == unanimous.c.case_id))
    )
    return union_all(adjudicated, agreed).subquery("gold_reference")


def agreed_subquery() -> Any:
    """The agreed (gold) label per case, where one exists, read from the stored rollup
    ``case_agreed``: the latest adjudication; for a case never adjudicated, the label its
    annotators agree on (two or more current labels, the same decision and the same reason
    codes). Cases without either fall back to the author's expected decision where this is
    used. Columns: case_id, gold_decision, gold_reasons, agreed_by."""
    return select(
        CaseAgreed.case_id,
        CaseAgreed.decision.label("gold_decision"),
        CaseAgreed.reason_codes.label("gold_reasons"),
        CaseAgreed.agreed_by,
    ).subquery("gold")


def _fill(s: Session, case_ids: Sequence[int] | None) -> None:
    ref = agreed_reference_subquery(case_ids)
    s.execute(
        insert(CaseAgreed).from_select(
            ["case_id", "decision", "reason_codes", "agreed_by", "source_id"],
            select(
                ref.c.case_id,
                ref.c.gold_decision,
                ref.c.gold_reasons,
                ref.c.agreed_by,
                ref.c.source_id,
            ),
        )
    )


def refresh_agreed(s: Session, case_ids: Iterable[int]) -> None:
    """Recompute the stored agreed label of ``case_ids`` from their labels and adjudications,
    in the caller's transaction. Called by every writer of labels and adjudications after it
    has locked the case and written its row, so the rollup moves with the data it rolls up."""
    ids = sorted(set(case_ids))
    s.flush()
    for lo in range(0, len(ids), _CHUNK):
        part = ids[lo : lo + _CHUNK]
        s.execute(delete(CaseAgreed).where(CaseAgreed.case_id.in_(part)))
        _fill(s, part)


def rebuild_agreed(s: Session) -> int:
    """Recompute the stored agreed label of every case (after a bulk load of labels or
    adjudications that did not go through the labeling service); returns the rows stored."""
    s.flush()
    s.execute(delete(CaseAgreed))
    _fill(s, None)
    return int(s.scalar(select(func.count()).select_from(CaseAgreed)) or 0)


@dataclass(frozen=True)
class Agreed:
    """A case's agreed label and where it comes from ("adjudication" or "annotators")."""

    decision: str
    reason_codes: tuple[str, ...]
    by: str

    def as_json(self) -> dict[str, Any]:
        return {"decision": self.decision, "reason_codes": list(self.reason_codes), "by": self.by}


def agreed_labels(s: Session, case_ids: Iterable[int]) -> dict[int, Agreed]:
    """The agreed label of each of ``case_ids`` that has one."""
    ids = sorted(set(case_ids))
    if not ids:
        return {}
    gold = agreed_subquery()
    rows = s.execute(
        select(gold.c.case_id, gold.c.gold_decision, gold.c.gold_reasons, gold.c.agreed_by).where(
            one_of(s, gold.c.case_id, ids)
        )
    )
    return {
        int(cid): Agreed(str(decision), tuple(reasons or ()), str(by))
        for cid, decision, reasons, by in rows
    }
