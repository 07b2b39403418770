"""The agreed label of a case: the latest adjudication, else the label its annotators agree on
(two or more current labels, the same decision and the same reason codes). Cases without
either fall back to the author's expected decision where this is used. Read by the runs and
their metrics, the Cases list and page, and the exports.

The current label of an annotator on a case is their newest label row (a label is changed by
adding a row, never by editing one)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import String, Text, cast, distinct, exists, func, literal_column, select, union_all
from sqlalchemy.orm import Session, aliased

from storage.models import Adjudication, Label

__all__ = ["Agreed", "agreed_labels", "agreed_subquery", "current_label_filter"]


def current_label_filter() -> Any:
    """Label rows that are the current label of their (case, annotator): no newer row."""
    newer = aliased(Label)
    return ~exists().where(
        newer.case_id == Label.case_id,
        newer.annotator == Label.annotator,
        newer.id > Label.id,
    )


def agreed_subquery() -> Any:
    """The agreed (gold) label per case, where one exists: the latest adjudication; for a
    case never adjudicated, the label its annotators agree on (two or more current labels,
    the same decision and the same reason codes). Cases without either fall back to the
    author's expected decision where this is used."""
    latest = (
        select(Adjudication.case_id, func.max(Adjudication.id).label("adj_id"))
        .group_by(Adjudication.case_id)
        .subquery()
    )
    adjudicated = select(
        latest.c.case_id,
        Adjudication.decision.label("gold_decision"),
        Adjudication.reason_codes.label("gold_reasons"),
        literal_column("'adjudication'", String).label("agreed_by"),
    ).join(Adjudication, Adjudication.id == latest.c.adj_id)
    current = (
        select(
            Label.case_id,
            Label.id,
            Label.decision,
            cast(Label.reason_codes, Text).label("rc"),
        )
        .where(current_label_filter())
        .subquery("current_labels")
    )
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
        )
        .join(Label, Label.id == unanimous.c.label_id)
        .where(~exists().where(Adjudication.case_id == unanimous.c.case_id))
    )
    return union_all(adjudicated, agreed).subquery("gold")


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
            gold.c.case_id.in_(ids)
        )
    )
    return {
        int(cid): Agreed(str(decision), tuple(reasons or ()), str(by))
        for cid, decision, reasons, by in rows
    }
