"""One audit item as a reviewer sees it (the trace, its chunks, clearance respected), and the
answer cut into claims with the chunks each cites."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, select

from review.audits.claims import CitationReport, citation_validity, split_claims
from review.audits.plans import spec_of
from review.core import clearance
from review.core.errors import PermissionDenied
from review.core.identity import Actor
from review.traces.chunks import ChunkView, chunk_view
from storage.db import read_session
from storage.models import AuditItem, SamplingPlan, Trace, TraceChunk

__all__ = ["ChunkView", "ClaimDraft", "ItemView", "check_claims", "get_item", "propose_claims"]


# --- one item -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ItemView:
    id: int
    plan_id: int
    plan_name: str
    plan_status: str
    overlap: int
    blind: bool
    stratum: str
    position: int
    trace_pk: int
    trace_id: str
    at: dt.datetime
    query: str
    rewritten_query: str | None
    user_role: str | None
    identity_scopes: tuple[str, ...]
    decision: str | None
    reason_code: str | None
    answer_text: str
    citations: tuple[dict[str, Any], ...]
    feedback: str | None
    ranking_mode: str | None
    hits_after_filter: int | None
    top_score: float | None
    answerable: bool | None
    ambiguous: bool | None
    ungrounded: bool | None
    versions: dict[str, Any]
    attributes: dict[str, Any]
    restricted: bool
    chunks: tuple[ChunkView, ...]
    reserved_by: str | None
    reserved_until: dt.datetime | None

    @property
    def context_ids(self) -> tuple[str, ...]:
        """Ids of the chunks that reached the model (retrieved and not filtered out)."""
        return tuple(c.chunk_id for c in self.chunks if not c.filtered)


def get_item(engine: Engine, actor: Actor, item_id: int) -> ItemView | None:
    """An audit item with its trace. Restricted traces only for users with clearance; the text
    of chunks that authorization filtered out likewise."""
    with read_session(engine) as s:
        item = s.get(AuditItem, item_id)
        if item is None:
            return None
        trace = s.get(Trace, item.trace_pk)
        plan = s.get(SamplingPlan, item.plan_id)
        assert trace is not None and plan is not None
        if not clearance.may_see(actor, trace.restricted):
            raise PermissionDenied(
                f"trace {trace.trace_id} is restricted: it is shown only to users with clearance"
            )
        chunks = s.scalars(
            select(TraceChunk)
            .where(TraceChunk.trace_pk == trace.id)
            .order_by(TraceChunk.rank.is_(None), TraceChunk.rank, TraceChunk.id)
        ).all()
        spec = spec_of(plan)
        return ItemView(
            item.id,
            plan.id,
            plan.name,
            plan.status,
            plan.overlap,
            spec.blind,
            item.stratum,
            item.position,
            trace.id,
            trace.trace_id,
            trace.at,
            trace.query,
            trace.rewritten_query,
            trace.user_role,
            tuple(str(x) for x in trace.identity_scopes or ()),
            trace.decision,
            trace.reason_code,
            trace.answer_text,
            tuple(c for c in (trace.citations or ()) if isinstance(c, dict)),
            trace.feedback,
            trace.ranking_mode,
            trace.hits_after_filter,
            trace.top_score,
            trace.answerable,
            trace.ambiguous,
            trace.ungrounded,
            dict(trace.versions or {}),
            dict(trace.attributes or {}),
            trace.restricted,
            tuple(chunk_view(c, actor) for c in chunks),
            item.reserved_by,
            item.reserved_until,
        )


# --- claims ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClaimDraft:
    """One claim of an answer under review: its text, the chunk ids it cites, a verdict."""

    text: str
    cited: tuple[str, ...] = ()
    verdict: str | None = None


_WORD = re.compile(r"[a-z0-9]+")


# inline citation markers: [id], [id1, id2]; ids may hold @ (chunk ids like DOC@2#2.1), which
# review.audits.claims.extract_citations does not accept; Markdown links [text](url) are not markers
_MARKER = re.compile(r"\[\s*\^?([A-Za-z0-9][^\[\]\s,;]*(?:\s*[,;]\s*\^?[^\[\]\s,;]+)*)\s*\](?!\()")


def _inline_citations(text: str) -> list[str]:
    found: dict[str, None] = {}
    for m in _MARKER.finditer(text):
        for part in re.split(r"\s*[,;]\s*", m.group(1)):
            found.setdefault(part.lstrip("^"), None)
    return list(found)


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2}


def propose_claims(
    answer_text: str, citations: Sequence[Mapping[str, Any]] = ()
) -> list[ClaimDraft]:
    """The starting point of a claim review: the answer cut into sentences, each with the ids
    it cites inline (``[id]``) plus the ids of the trace's citation mapping that belong to it
    (the mapped claim text contains the sentence or is contained in it, else the sentence
    sharing most words with it; with one sentence, everything maps to it)."""
    claims = split_claims(answer_text)
    cited: list[list[str]] = [_inline_citations(c.text) for c in claims]
    if not claims:
        return []
    for entry in citations:
        ids = [str(x) for x in (entry.get("chunk_ids") or ()) if str(x).strip()]
        if not ids:
            continue
        mapped = str(entry.get("claim") or "").strip()
        target: int | None = None
        if len(claims) == 1:
            target = 0
        elif mapped:
            low = mapped.lower()
            for i, c in enumerate(claims):
                if low in c.text.lower() or c.text.lower() in low:
                    target = i
                    break
            if target is None:
                words = _words(mapped)
                overlaps = [len(words & _words(c.text)) for c in claims]
                best = max(overlaps)
                if best > 0:
                    target = overlaps.index(best)
        if target is not None:
            for x in ids:
                if x not in cited[target]:
                    cited[target].append(x)
    return [ClaimDraft(c.text, tuple(ids)) for c, ids in zip(claims, cited, strict=True)]


def check_claims(claims: Sequence[ClaimDraft], context_ids: Iterable[str]) -> CitationReport:
    """Claim by claim: a claim passes when it is supported and every chunk it cites was in
    the context sent; the answer passes only when every claim passes."""
    return citation_validity(
        [(c.text, c.cited) for c in claims], list(context_ids), [c.verdict for c in claims]
    )
