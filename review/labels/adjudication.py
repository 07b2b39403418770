"""Adjudication: cases whose current labels disagree, and the gold label a reviewer sets on
them (appended; the newest is what metrics use)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, Text, cast, distinct, exists, func, or_, select
from sqlalchemy.orm import Session

from review.cases.agreed import current_label_filter
from review.core.errors import InputError, PermissionDenied
from review.core.identity import Actor, Permission, require
from review.core.taxonomy import Taxonomy
from storage import changes
from storage.db import read_session, run_write
from storage.models import Adjudication, Case, Label, utcnow

# review.labels.labeling re-exports this module's services, so this module imports labeling
# only inside the functions that need it (no import cycle at load time).


@dataclass(frozen=True)
class GoldView:
    id: int
    case_id: int
    adjudicator: str
    decision: str
    reason_codes: tuple[str, ...]
    note: str
    created_at: dt.datetime


def _disagreement_candidates() -> Any:
    """SQL: cases with two or more current labels that differ in decision or in the stored
    reason-code list, and no adjudication at or after their newest label; columns case_id,
    key, n (current labels), decisions (distinct decisions). Lists that hold the same codes
    in another order also count here; ``disagreements`` checks those."""
    cur = (
        select(
            Label.case_id,
            Label.decision,
            cast(Label.reason_codes, Text).label("rc"),
            Label.created_at,
        )
        .where(current_label_filter())
        .subquery("cur")
    )
    decisions = func.count(distinct(cur.c.decision))
    grouped = (
        select(
            cur.c.case_id,
            func.count().label("n"),
            decisions.label("decisions"),
            func.max(cur.c.created_at).label("last"),
        )
        .group_by(cur.c.case_id)
        .having(func.count() >= 2, or_(decisions > 1, func.count(distinct(cur.c.rc)) > 1))
        .subquery("grouped")
    )
    settled = exists().where(
        Adjudication.case_id == grouped.c.case_id, Adjudication.created_at >= grouped.c.last
    )
    return (
        select(grouped.c.case_id, Case.key, grouped.c.n, grouped.c.decisions)
        .join(Case, Case.id == grouped.c.case_id)
        .where(~settled)
    )


def disagreements(engine: Engine, limit: int = 200) -> list[tuple[int, str, int]]:
    """Cases (id, key, number of current labels), by id, whose current labels disagree on the
    decision or the set of reason codes and that have no adjudication newer than their
    newest label; at most ``limit``. Found in SQL a page at a time (never every label)."""
    base = _disagreement_candidates().subquery("cand")
    out: list[tuple[int, str, int]] = []
    after = 0
    page = max(limit, 100)
    with read_session(engine) as s:
        while len(out) < limit:
            rows = s.execute(
                select(base).where(base.c.case_id > after).order_by(base.c.case_id).limit(page)
            ).all()
            if not rows:
                break
            after = int(rows[-1].case_id)
            # same decision everywhere: a real disagreement only if the code sets differ
            check = [int(r.case_id) for r in rows if int(r.decisions) <= 1]
            sets: dict[int, set[tuple[str, ...]]] = {}
            if check:
                for cid, codes in s.execute(
                    select(Label.case_id, Label.reason_codes).where(
                        Label.case_id.in_(check), current_label_filter()
                    )
                ):
                    sets.setdefault(int(cid), set()).add(tuple(sorted(codes or [])))
            for r in rows:
                cid = int(r.case_id)
                if int(r.decisions) > 1 or len(sets.get(cid, ())) > 1:
                    out.append((cid, str(r.key), int(r.n)))
            if len(rows) < page:
                break
    return out[:limit]


def adjudicate(
    engine: Engine,
    actor: Actor,
    case_id: int,
    decision: str,
    reason_codes: Iterable[str],
    note: str,
    tax: Taxonomy,
) -> GoldView:
    """Set the gold label of a case (appended; earlier gold labels stay in the history)."""
    from review.labels.labeling import LabelIn, still_blind

    require(actor, Permission.adjudicate)
    if still_blind(engine, actor, case_id):
        raise PermissionDenied(
            "you may still label this case blind: label it first, or adjudicate it once it "
            "has the labels it needs"
        )
    reasons = tuple(reason_codes)
    LabelIn(decision, reasons).check(tax, 0)
    if not note.strip():
        raise InputError("say why: the adjudication note is required")

    def work(s: Session) -> GoldView:
        case = s.get(Case, case_id)
        if case is None:
            raise InputError(f"case {case_id} does not exist")
        row = Adjudication(
            case_id=case_id,
            adjudicator=actor.email,
            decision=decision,
            reason_codes=list(reasons),
            note=note.strip(),
            created_at=utcnow(),
        )
        s.add(row)
        s.flush()
        changes.record(s, actor.email, "adjudicate", "case", case.key, None, changes.snapshot(row))
        return GoldView(
            row.id, case_id, row.adjudicator, decision, reasons, row.note, row.created_at
        )

    return run_write(engine, work)


def gold_history(engine: Engine, case_id: int) -> list[GoldView]:
    with read_session(engine) as s:
        return [
            GoldView(
                r.id,
                r.case_id,
                r.adjudicator,
                r.decision,
                tuple(r.reason_codes),
                r.note,
                r.created_at,
            )
            for r in s.scalars(
                select(Adjudication)
                .where(Adjudication.case_id == case_id)
                .order_by(Adjudication.id)
            )
        ]
