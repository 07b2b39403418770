"""The ready cases a labeling export sends out (to Label Studio or Argilla), read the one way
both exports read them: in id order, a batch at a time in one read session, each with whether
its text is restricted (decided by :mod:`review.core.clearance` from the documents it relies
on, so the export shows it only to an exporting user with clearance).

Only ready cases are sent (a draft is not labeled), and the choice of cases may not depend on
their judgement: a filter on the expected decision or the category is refused, as which cases
were sent would tell the annotators what is expected of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from sqlalchemy import Engine

from review.cases.cases import CaseFilter, case_query, filter_conditions
from review.core import clearance
from review.core.errors import InputError
from review.core.terms import CaseStatus
from storage.db import read_session
from storage.models import Case

__all__ = ["blind_filter", "ready_batches"]


def blind_filter(flt: CaseFilter | None) -> CaseFilter:
    """The cases to export: ready ones matching ``flt`` (family, slice, split, text); a
    filter on the judgement (expected decision, category) is refused."""
    flt = flt or CaseFilter()
    if flt.expected_decision or flt.category:
        raise InputError(
            "a labeling export is blind: it cannot be filtered by expected decision or "
            "category (the choice of cases would give the judgement away)"
        )
    if flt.status not in (None, "", CaseStatus.ready):
        raise InputError("only ready cases are labeled: a draft is still being built")
    return dataclasses.replace(flt, status=CaseStatus.ready)


def ready_batches(
    engine: Engine, flt: CaseFilter | None, batch: int
) -> Iterator[list[tuple[Case, bool]]]:
    """The ready cases matching ``flt``, ``batch`` at a time in id order, each with whether
    its text is restricted. The rows are live while their batch is being used (their
    documents, family and slices load on access) and let go before the next is read."""
    conds = filter_conditions(blind_filter(flt))
    last_id = 0
    with read_session(engine) as s:
        while True:
            rows = list(
                s.scalars(
                    case_query().where(Case.id > last_id, *conds).order_by(Case.id).limit(batch)
                )
            )
            if not rows:
                return
            secret = clearance.restricted_cases(s, [r.id for r in rows])
            yield [(r, r.id in secret) for r in rows]
            last_id = rows[-1].id
            s.expunge_all()
