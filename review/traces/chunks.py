"""One view of a retrieved chunk, as a given person may see it, for every page that shows one.

A chunk that authorization filtered out of the context is restricted content: for a person
without clearance its text, and its id where a citation names it, are the one redaction text of
:mod:`review.core.clearance`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from dataclasses import dataclass

from review.core import clearance
from review.core.identity import Actor
from storage.models import TraceChunk

__all__ = ["ChunkView", "chunk_view"]


@dataclass(frozen=True)
class ChunkView:
    chunk_id: str
    doc_id: str | None
    doc_version: int | None
    rank: int | None
    score: float | None
    text: str
    filtered: bool
    hidden: bool  # filtered and the viewer has no clearance: text is redacted
    effective_date: dt.date | None
    in_context: bool | None = None  # None: the trace logged no context text
    cited: bool = False


def chunk_view(
    row: TraceChunk, actor: Actor, context: str | None = None, cited: Collection[str] = ()
) -> ChunkView:
    """``row`` as ``actor`` may see it; ``context`` is the context text sent to the model (to
    say whether the chunk reached it) and ``cited`` the chunk ids the answer cites."""
    hidden = not clearance.may_see(actor, bool(row.filtered))
    return ChunkView(
        chunk_id=row.chunk_id,
        doc_id=row.doc_id,
        doc_version=row.doc_version,
        rank=row.rank,
        score=row.score,
        text=clearance.shown(actor, row.text, bool(row.filtered)),
        filtered=bool(row.filtered),
        hidden=hidden,
        effective_date=row.effective_date,
        in_context=None if not context else (not row.filtered and row.chunk_id in context),
        cited=row.chunk_id in cited,
    )
