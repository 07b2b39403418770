"""The Case builder as a user sees it while some of its cases still wait for their label: the
blind rule of :mod:`review.cases.sight` applied to families, variants and base cases.

A variant blind to the user keeps its key, status, question, identity and documents (by
reference); its evidence state, expected and suggested decision and reasons, document roles,
claim support and recorded edits (an operator names what it did to the evidence) are withheld,
and it offers no suggestion to confirm. The family's checks and decisive passage describe the
judgement of every variant, so they are withheld while any variant is blind. The base cases
(evidence present, expecting an answer) list none blind to the user.
"""

from __future__ import annotations

import dataclasses

from sqlalchemy import Engine, select

from review.builder import documents
from review.builder.documents import BaseCaseRow
from review.builder.family_view import ClaimMark, FamilyRow, FamilyView, VariantRow, list_families
from review.cases.sight import HIDDEN, Sight
from review.core.identity import Actor
from storage.db import one_of, read_session
from storage.models import Case, CaseFamily

__all__ = ["base_cases", "count_base_cases", "families", "family"]


def _blind_variant(v: VariantRow) -> VariantRow:
    docs = sorted(
        (dataclasses.replace(d, role=HIDDEN) for d in v.documents),
        key=lambda d: (d.ref, d.document_id),
    )
    return dataclasses.replace(
        v,
        evidence_state=HIDDEN,
        expected_decision=HIDDEN,
        reason_codes=(),
        suggested_decision=None,
        suggested_reasons=(),
        suggestion_source=None,
        confirmed_by=None,
        confirmed_at=None,
        documents=tuple(docs),
        claims=tuple(ClaimMark(c.text, HIDDEN) for c in v.claims),
        edits=(),
    )


def family(engine: Engine, seen: Sight, fam: FamilyView) -> FamilyView:
    """The family view without the judgement of the variants blind to the user."""
    blind = seen.blind_ids(engine, [v.case_id for v in fam.variants])
    if not blind:
        return fam
    return dataclasses.replace(
        fam,
        variants=tuple(_blind_variant(v) if v.case_id in blind else v for v in fam.variants),
        checks=(),
        passage=None,
        passage_source=HIDDEN,
        blind=len(blind),
    )


def families(engine: Engine, seen: Sight, page: int = 1, page_size: int = 25) -> list[FamilyRow]:
    """One page of families; the evidence states of their cases blind to the user read as
    hidden."""
    rows = list_families(engine, page=page, page_size=page_size)
    if not seen.may_label or not rows:
        return rows
    keys = [r.key for r in rows]
    states: dict[str, set[str | None]] = {k: set() for k in keys}
    with read_session(engine) as s:
        for key, state, blind in s.execute(
            select(CaseFamily.key, Case.evidence_state, seen.blind_clause())
            .join(Case, Case.family_id == CaseFamily.id)
            .where(one_of(s, CaseFamily.key, keys))
        ):
            states[key].add(HIDDEN if blind else state)
    return [
        dataclasses.replace(
            r, states=tuple(sorted(states[r.key], key=lambda x: (x is None, x or "")))
        )
        for r in rows
    ]


#: the landing's count of base cases stops after this many ("more than 1,000", 40 pages): each
#: case is tested for blindness, and every one counted took 1.3 s at 500,000 cases
BASE_COUNT_LIMIT = 1000


def count_base_cases(
    engine: Engine, seen: Sight, text: str = "", limit: int | None = None
) -> tuple[int, bool]:
    """How many base cases the user may list, counted as far as ``limit`` (default
    :data:`BASE_COUNT_LIMIT`): ``(n, False)`` exactly, or ``(limit, True)`` when there are
    more."""
    upto = BASE_COUNT_LIMIT if limit is None else limit
    return documents.count_base_cases_upto(engine, text, upto, also=[~seen.blind_clause()])


def base_cases(
    engine: Engine,
    seen: Sight,
    text: str = "",
    page: int = 1,
    page_size: int = 50,
    *,
    viewer: Actor,
) -> list[BaseCaseRow]:
    """The evidence-present cases expecting an answer, none blind to the user (listing one
    would tell its expected decision), their questions as ``viewer`` may see them."""
    return documents.list_base_cases(
        engine, text, page=page, page_size=page_size, also=[~seen.blind_clause()], viewer=viewer
    )
