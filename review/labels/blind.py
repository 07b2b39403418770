"""Blind labeling: what of a case's own judgement an annotator may see.

A case carries its author's judgement: the role of each document (decisive, distractor,
superseded, ...), the family's evidence state, the suggested category, the expected decision,
message and reason codes, and the author's notes (which often state the answer). An annotator
who has not labeled a case sees none of it, not even through the order of the documents
(authors list the decisive passage first): the documents are listed by reference instead. The
judgement appears once the annotator has submitted a label, and to reviewers (adjudicators)
who may no longer label the case blind.

The rule itself (who may see) is the one every view of a case asks,
:mod:`review.cases.sight`; :func:`sight` gives it the labeling overlap, and
:func:`judgement_visible` answers it for one case. :func:`labeling_case` builds the view the
labeling page shows from it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import Engine

from review.cases.cases import CaseView
from review.cases.sight import Sight
from review.core.identity import Actor, Permission
from review.labels import labeling

__all__ = ["LabelingCase", "ShownDoc", "judgement_visible", "labeling_case", "sight"]


@dataclass(frozen=True)
class ShownDoc:
    """A document of a case as the labeling page shows it; ``role`` is None while blind."""

    document_id: int
    ref: str
    title: str
    access_scope: str
    effective_date: dt.date | None
    authority: str
    jurisdiction: str
    visibility: str
    is_current: bool
    role: str | None


@dataclass(frozen=True)
class LabelingCase:
    """A case as an annotator sees it on the labeling page. ``blind`` True: the author's
    judgement (document roles, evidence state, suggested category, expected decision,
    message and reasons, and the author's notes, which often state the answer) is withheld
    and every field carrying it is None or empty."""

    id: int
    key: str
    question: str
    required_claims: tuple[str, ...]
    identity_name: str
    identity_scopes: tuple[str, ...]
    documents: tuple[ShownDoc, ...]
    family: str | None
    slices: tuple[str, ...]
    split: str
    notes: str
    blind: bool
    suggested_category: str | None
    evidence_state: str | None
    expected_decision: str | None
    expected_message: str | None
    expected_reasons: tuple[str, ...]


def sight(engine: Engine, actor: Actor) -> Sight:
    """``actor`` as the blind rule of :mod:`review.cases.sight` needs them: whether they
    label, and the overlap (how many labels a case waits for)."""
    return Sight(actor.email, actor.can(Permission.label), labeling.get_settings(engine).overlap)


def judgement_visible(engine: Engine, actor: Actor, case_id: int) -> bool:
    """Whether ``actor`` may see the author's judgement of a case: unless they may still give
    it one of its independent labels (it is ready, they label, did not write it or confirm
    its expected decision, have not labeled it, and it has fewer labels than the overlap),
    as on every other page. A reviewer who is also an
    annotator stays blind until they label it too."""
    return not sight(engine, actor).is_blind(engine, case_id)


def labeling_case(view: CaseView, visible: bool) -> LabelingCase:
    """The case as the labeling page shows it: with the judgement when ``visible``, else
    blind (roles, state, category, expected decision withheld; documents by reference)."""
    docs = [
        ShownDoc(
            d.document_id,
            d.ref,
            d.title,
            d.access_scope,
            d.effective_date,
            d.authority,
            d.jurisdiction,
            d.visibility,
            d.is_current,
            d.role if visible else None,
        )
        for d in view.documents
    ]
    if not visible:
        docs.sort(key=lambda d: (d.ref, d.document_id))
    return LabelingCase(
        id=view.id,
        key=view.key,
        question=view.question,
        required_claims=view.required_claims,
        identity_name=view.identity_name,
        identity_scopes=view.identity_scopes,
        documents=tuple(docs),
        family=view.family,
        slices=view.slices,
        split=view.split,
        notes=view.notes if visible else "",
        blind=not visible,
        suggested_category=view.category if visible else None,
        evidence_state=view.evidence_state if visible else None,
        expected_decision=view.expected_decision if visible else None,
        expected_message=view.expected_message if visible else None,
        expected_reasons=view.reason_codes if visible else (),
    )
