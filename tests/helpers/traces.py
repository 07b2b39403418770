"""Small hand-made traces for the trace tests (the demo database with traces is the
``trace_demo_*`` fixtures in tests/conftest.py)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from review.core.identity import SYSTEM
from review.corpus import corpus
from review.corpus.docformat import DocumentIn
from review.traces import importer
from review.traces.formats.canonical import trace_to_dict
from review.traces.model import Chunk, Citation, Trace

UTC = dt.UTC


def make_trace(
    trace_id: str,
    at: dt.datetime | str = "2025-06-02T10:00:00Z",
    *,
    query: str = "How many days do we have to ask for a refund?",
    decision: str | None = "answer",
    reason: str | None = None,
    chunks: Iterable[Chunk] = (),
    **kw: Any,
) -> Trace:
    when = dt.datetime.fromisoformat(at) if isinstance(at, str) else at
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return Trace(
        trace_id=trace_id,
        time=when.astimezone(UTC),
        query=query,
        decision=decision,
        reason_code=reason,
        chunks=tuple(chunks),
        **kw,
    )


def chunk(cid: str, doc: str = "POL-REFUND-MONTHLY", rank: int = 1, **kw: Any) -> Chunk:
    return Chunk(
        chunk_id=cid,
        doc_id=doc,
        doc_version=kw.pop("doc_version", 2),
        rank=rank,
        score=kw.pop("score", 0.8),
        text=kw.pop("text", f"text of {cid}"),
        **kw,
    )


def canonical_lines(items: Iterable[Trace]) -> list[str]:
    return [json.dumps(trace_to_dict(t)) for t in items]


def write_jsonl(path: Path, lines: Iterable[str | bytes]) -> Path:
    with path.open("wb") as fh:
        for line in lines:
            fh.write(line if isinstance(line, bytes) else line.encode("utf-8"))
            fh.write(b"\n")
    return path


def import_traces(engine: Engine, items: list[Trace], **kw: Any) -> importer.ImportReport:
    return importer.import_items(engine, SYSTEM, items, source="test", **kw)


def add_document(
    engine: Engine,
    key: str,
    *,
    version: int = 1,
    title: str | None = None,
    scope: str = "public",
    body: str = "A passage of the document.",
) -> None:
    """Add a document version through the corpus service (so the traces citing it follow).
    Traces citing a document the corpus has never seen are restricted by default, so tests
    about something else add the documents their traces cite."""
    doc = DocumentIn(
        doc_id=key,
        version=version,
        title=title or f"Document {key}",
        authority="policy",
        owner="Tests",
        access_scope=scope,
        jurisdiction="EU",
        body=body,
    )
    corpus.import_documents(engine, SYSTEM, [doc], source="tests")


def cited(claim: str, *ids: str) -> Citation:
    return Citation(claim, tuple(ids))


# --- the demo database with demo traces, built once per session -------------------------
