"""Clearance: the one place that decides what a user may see of restricted content, and the one
text shown in its place.

Everything restricted is restricted for the same reason: a document whose access scope is
``restricted``, or content derived from one. The kinds of content and where their restriction
comes from:

* a document (its title and body): its own access scope;
* a passage or retrieved chunk: the document it was cut from, or the authorization filter that
  kept it from the model;
* a case's text (question, required claims, notes, and what exports build from them): the
  documents it relies on. One restricted document among the case's documents makes the text
  restricted, and so does text that retells a restricted document without listing it: a run
  of :data:`RUN` words (lowercased, punctuation dropped) that a restricted document has and no
  other document has. This is read from the documents each time (:func:`restricted_cases`),
  never stored on the case, so a document restricted later restricts the cases that rely on it
  from then on;
* a trace: its restricted mark (set by a reviewer or derived when it was imported);
* a run output: its case, the documents it cites, or text repeating a restricted document (worked
  out in :mod:`review.evaluation.clearance`, which asks here for the verdict).

A user with clearance sees all of it; anyone else sees :data:`REDACTED` instead. The areas query
their own data and pass what they found to these functions; only :func:`restricted_cases`
queries, because every area that shows a case needs the same answer.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from sqlalchemy import ColumnElement, exists, select
from sqlalchemy.orm import Session

from review.core.identity import Actor
from storage.models import Case, CaseClaim, CaseDocument, Document

__all__ = [
    "REDACTED",
    "RESTRICTED_SCOPE",
    "case_record",
    "cleared",
    "document_restricted",
    "lists_restricted_document",
    "may_see",
    "may_see_document",
    "restricted_cases",
    "restricted_runs",
    "retells",
    "shown",
    "shown_all",
    "title",
    "word_runs",
]

#: what a user without clearance sees in place of restricted content, on every surface
REDACTED = "[restricted: shown only to users with clearance]"
#: the access scope of a restricted document
RESTRICTED_SCOPE = "restricted"
#: how many consecutive words a text must share with a restricted document to retell it
RUN = 5
_WORD = re.compile(r"[^\W_]+")


def cleared(actor: Actor) -> bool:
    """Whether ``actor`` holds clearance (may see restricted content and act on it)."""
    return actor.clearance


def may_see(actor: Actor, restricted: bool) -> bool:
    """Whether ``actor`` may see one piece of content whose restriction is ``restricted``."""
    return cleared(actor) or not restricted


def may_see_unredacted_upload(actor: Actor, uploaded_by: str) -> bool:
    """Whether ``actor`` may see what an upload said before redaction (a trace import's
    rejected lines quote the file as it came): who uploaded it (who had the file) and people
    with clearance."""
    return actor.email.lower() == uploaded_by.lower() or cleared(actor)


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


def case_record(actor: Actor, record: Mapping[str, Any], restricted: bool) -> dict[str, Any]:
    """A case record (canonical format) with its text redacted where ``actor`` may not see it.
    Empty notes stay empty; each claim is replaced by :data:`REDACTED`, so the count shows."""
    out = dict(record)
    if may_see(actor, restricted):
        return out
    out["question"] = REDACTED
    out["required_claims"] = [REDACTED for _ in record.get("required_claims") or []]
    out.pop("claim_kinds", None)  # keyed by the claims' text
    if record.get("notes"):
        out["notes"] = REDACTED
    return out


def word_runs(text: str, n: int = RUN) -> set[str]:
    """Every run of ``n`` consecutive words of ``text``, lowercased, punctuation dropped."""
    words = _WORD.findall(text.lower())
    return {" ".join(words[i : i + n]) for i in range(len(words) - n + 1)}


def retells(text: str, runs: Collection[str]) -> bool:
    """Whether ``text`` shares a word run with ``runs`` (see :func:`restricted_runs`)."""
    return bool(runs) and not word_runs(text).isdisjoint(runs)


def restricted_runs(s: Session) -> frozenset[str]:
    """The word runs of the restricted documents (every version) that no other document has."""
    runs: set[str] = set()
    for body in s.scalars(select(Document.body).where(Document.access_scope == RESTRICTED_SCOPE)):
        runs |= word_runs(body)
    if runs:
        for body in s.scalars(
            select(Document.body).where(Document.access_scope != RESTRICTED_SCOPE)
        ):
            runs -= word_runs(body)
    return frozenset(runs)


def lists_restricted_document() -> ColumnElement[bool]:
    """A condition on :class:`Case`: the case lists a restricted document (any version)."""
    return exists().where(
        CaseDocument.case_id == Case.id,
        CaseDocument.document_id == Document.id,
        Document.access_scope == RESTRICTED_SCOPE,
    )


def restricted_cases(
    s: Session, case_ids: Collection[int], runs: frozenset[str] | None = None
) -> frozenset[int]:
    """Which of ``case_ids`` have restricted text, read from the documents as they are now: the
    case lists a restricted document (any version), or its question, a claim or its notes
    retell one (``runs``: :func:`restricted_runs` of this session, when the caller asks
    about one case after another)."""
    ids = sorted({int(c) for c in case_ids})
    found: set[int] = set()
    runs = restricted_runs(s) if runs is None else runs
    for start in range(0, len(ids), 900):
        chunk = ids[start : start + 900]
        found.update(
            s.scalars(
                select(CaseDocument.case_id)
                .join(Document, Document.id == CaseDocument.document_id)
                .where(
                    Document.access_scope == RESTRICTED_SCOPE,
                    CaseDocument.case_id.in_(chunk),
                )
                .distinct()
            )
        )
        if not runs:
            continue
        texts = s.execute(select(Case.id, Case.question, Case.notes).where(Case.id.in_(chunk)))
        found.update(cid for cid, q, notes in texts if retells(f"{q}\n{notes}", runs))
        claims = s.execute(
            select(CaseClaim.case_id, CaseClaim.text).where(CaseClaim.case_id.in_(chunk))
        )
        found.update(cid for cid, text in claims if retells(text, runs))
    return frozenset(found)
