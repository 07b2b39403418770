"""Which production traces are restricted content.

A trace is stored as **restricted** (shown only to users with clearance) when its
``attributes.restricted`` is true, when its identity scopes include ``restricted``, when a
chunk that was *not* filtered by authorization comes from a document whose access scope in the
corpus is ``restricted`` (its text then reached the context), or when the answer or the context
names the title of a restricted document (a leak: the trace itself is now restricted content)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import (
    Engine,
    select,
)

from review.traces.model import (
    Trace,
)
from storage.db import read_session
from storage.models import Document

if TYPE_CHECKING:
    pass


__all__ = ["RestrictedCorpus", "is_restricted", "restricted_corpus"]


def _truthy(v: object) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        return v.strip().lower() in ("true", "yes", "1")
    return isinstance(v, int) and v == 1


@dataclass(frozen=True)
class RestrictedCorpus:
    """Restricted documents of the corpus: their ids and (lower-cased) titles."""

    doc_ids: frozenset[str] = frozenset()
    titles: tuple[str, ...] = ()


def is_restricted(t: Trace, corpus: RestrictedCorpus) -> bool:
    """The restricted rule of the module docs."""
    if _truthy(t.attributes.get("restricted")):
        return True
    if "restricted" in t.identity_scopes:
        return True
    if any(not c.filtered and c.doc_id in corpus.doc_ids for c in t.chunks):
        return True
    if corpus.titles:
        said = f"{t.answer_text}\n{t.context_sent}".lower()
        return any(title in said for title in corpus.titles)
    return False


def restricted_corpus(engine: Engine) -> RestrictedCorpus:
    """The restricted documents of the corpus (every version counts)."""
    with read_session(engine) as s:
        rows = s.execute(
            select(Document.doc_key, Document.title).where(Document.access_scope == "restricted")
        ).all()
    titles = {r.title.strip().lower() for r in rows if len(r.title.strip()) >= 8}
    return RestrictedCorpus(frozenset(r.doc_key for r in rows), tuple(sorted(titles)))
