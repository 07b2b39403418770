"""Clearance: the one place that decides what a user may see of restricted content, and the one
text shown in its place.

Everything restricted is restricted for the same reason: a document whose access scope is
``restricted``, or content derived from one. The kinds of content and where their restriction
comes from:

* a document (its title and body): its own access scope;
* a passage or retrieved chunk: the document it was cut from, or the authorization filter that
  kept it from the model;
* a case's text (question, required claims, notes, and what exports build from them): the case's
  documents; one restricted document among them makes the text restricted. This is read from
  the documents each time (:func:`restricted_cases`), never stored on the case, so a document
  restricted later restricts the cases that rely on it from then on;
* a trace: its restricted mark (set by a reviewer or derived when it was imported);
* a run output: its case, the documents it cites, or text repeating a restricted document (worked
  out in :mod:`review.evaluation.clearance`, which asks here for the verdict).

A user with clearance sees all of it; anyone else sees :data:`REDACTED` instead. The areas query
their own data and pass what they found to these functions; only :func:`restricted_cases`
queries, because every area that shows a case needs the same answer.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from review.core.identity import Actor
from storage.models import CaseDocument, Document

__all__ = [
    "CASE_TEXT_FIELDS",
    "REDACTED",
    "RESTRICTED_SCOPE",
    "case_record",
    "case_restricted",
    "case_text",
    "cleared",
    "document_restricted",
    "may_see",
    "may_see_document",
    "restricted_cases",
    "shown",
    "shown_all",
    "title",
]

#: what a user without clearance sees in place of restricted content, on every surface
REDACTED = "[restricted: shown only to users with clearance]"
#: the access scope of a restricted document
RESTRICTED_SCOPE = "restricted"
#: the fields of a case record (the canonical exchange format) that are written from its
#: documents and so are as restricted as they are
CASE_TEXT_FIELDS = ("question", "required_claims", "notes")


def cleared(actor: Actor) -> bool:
    """Whether ``actor`` holds clearance (may see restricted content and act on it)."""
    return actor.clearance


def may_see(actor: Actor, restricted: bool) -> bool:
    """Whether ``actor`` may see one piece of content whose restriction is ``restricted``."""
    return cleared(actor) or not restricted


def document_restricted(access_scope: str | None) -> bool:
    """Whether a document of this access scope is restricted."""
    return access_scope == RESTRICTED_SCOPE


def may_see_document(actor: Actor, access_scope: str | None) -> bool:
    """Whether ``actor`` may read a document (title and body) of this access scope."""
    return may_see(actor, document_restricted(access_scope))


def shown(actor: Actor, text: str, restricted: bool) -> str:
    """``text`` as ``actor`` may see it: itself, or :data:`REDACTED`."""
    return text if may_see(actor, restricted) else REDACTED


def shown_all(actor: Actor, texts: Sequence[str], restricted: bool) -> tuple[str, ...]:
    """Each of ``texts`` as ``actor`` may see it."""
    return tuple(shown(actor, t, restricted) for t in texts)


def title(actor: Actor, text: str, access_scope: str | None) -> str:
    """A document's title as ``actor`` may see it."""
    return shown(actor, text, document_restricted(access_scope))


def case_restricted(access_scopes: Iterable[str | None]) -> bool:
    """Whether a case's text is restricted, from the access scopes of its documents."""
    return any(document_restricted(s) for s in access_scopes)


def case_text(actor: Actor, text: str, access_scopes: Iterable[str | None]) -> str:
    """One text of a case (question, claim, notes) as ``actor`` may see it."""
    return shown(actor, text, case_restricted(access_scopes))


def case_record(actor: Actor, record: Mapping[str, Any], restricted: bool) -> dict[str, Any]:
    """A case record (canonical format) with its text redacted where ``actor`` may not see it.
    Empty notes stay empty; each claim is replaced by :data:`REDACTED`, so the count shows."""
    out = dict(record)
    if may_see(actor, restricted):
        return out
    out["question"] = REDACTED
    out["required_claims"] = [REDACTED for _ in record.get("required_claims") or []]
    if record.get("notes"):
        out["notes"] = REDACTED
    return out


def restricted_cases(s: Session, case_ids: Collection[int]) -> frozenset[int]:
    """Which of ``case_ids`` rely on a restricted document (any version the case lists), read
    from the documents as they are now."""
    ids = sorted({int(c) for c in case_ids})
    found: set[int] = set()
    for start in range(0, len(ids), 900):
        found.update(
            s.scalars(
                select(CaseDocument.case_id)
                .join(Document, Document.id == CaseDocument.document_id)
                .where(
                    Document.access_scope == RESTRICTED_SCOPE,
                    CaseDocument.case_id.in_(ids[start : start + 900]),
                )
                .distinct()
            )
        )
    return frozenset(found)
