"""Langfuse observation exports read line by line into canonical traces."""

from __future__ import annotations

import datetime as dt
import heapq
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from review.core.records import describe, json_lines
from review.traces.formats.canonical import parse_record
from review.traces.formats.fields import (
    MAX_CHUNKS,
    BadField,
    aliased,
    at_most,
    is_absent,
    json_text,
    opt_text,
    read_chunk,
    read_ident,
    read_time,
    req_text,
    unique_chunks,
)
from review.traces.formats.otlp import ANSWER_KEYS, QUESTION_KEYS, io_text
from review.traces.formats.spans import Grouper, SpanNode, rag_attrs
from review.traces.model import DEFAULT_VOCAB, Chunk, TraceItem, TraceVocabulary

__all__ = ["iter_langfuse_jsonl"]


# ---------------------------------------------------------------------------------------
# Langfuse observations

_LF_TYPES = {
    "SPAN",
    "GENERATION",
    "EVENT",
    "AGENT",
    "TOOL",
    "CHAIN",
    "RETRIEVER",
    "EVALUATOR",
    "EMBEDDING",
    "GUARDRAIL",
}


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and key in ("rag", "rag.version", "rag.attr"):
            out.update(_flatten(v, f"{key}."))
        else:
            out[key] = v
    return out


def _langfuse_node(d: Mapping[str, Any], line: int, vocab: TraceVocabulary) -> tuple[str, SpanNode]:
    oid = read_ident(d.get("id"), "id")
    tid = read_ident(d.get("traceId"), "traceId")
    otype = req_text(d.get("type"), "type").strip().upper()
    if otype not in _LF_TYPES:
        raise BadField(
            "type",
            f"unknown observation type {d.get('type')!r} "
            f"(expected one of {', '.join(sorted(_LF_TYPES))})",
        )
    name = opt_text(d.get("name"), "name") or ""
    start = read_time(d.get("startTime"), "startTime")
    parent_raw = d.get("parentObservationId")
    parent = None if is_absent(parent_raw) else read_ident(parent_raw, "parentObservationId")
    meta = json_text(d.get("metadata"), "metadata") if d.get("metadata") is not None else {}
    if not isinstance(meta, dict):
        raise BadField("metadata", f"expected an object, got {describe(meta)}")

    role = "other"
    if otype == "RETRIEVER" or "retriev" in name.lower():
        role = "retrieval"
    elif otype == "GENERATION":
        role = "llm"
    elif otype == "EMBEDDING":
        role = "embedding"

    versions: dict[str, str] = {}
    chunks: list[Chunk] = []
    output = d.get("output")
    if role == "retrieval":
        docs = json_text(output, "output") if output is not None else []
        where = "output"
        if isinstance(docs, dict):
            docs, where = docs.get("documents"), "output.documents"
        if not isinstance(docs, list):
            raise BadField(where, f"expected a list of retrieved documents, got {describe(docs)}")
        at_most(docs, MAX_CHUNKS, where, "documents")
        for i, doc in enumerate(docs):
            if not isinstance(doc, dict):
                raise BadField(f"{where}.{i}", f"expected a document object, got {describe(doc)}")
            values, labels = aliased(doc, f"{where}.{i}")
            chunks.append(read_chunk(values, f"{where}.{i}", labels))
        unique_chunks(chunks, where)
    model = d.get("model")
    if isinstance(model, str) and model.strip() and role in ("llm", "embedding"):
        versions["model" if role == "llm" else "embedding"] = model.strip()
    if isinstance(d.get("promptName"), str):
        pv = d.get("promptVersion")
        versions["prompt"] = f"{d['promptName']}@{pv}" if pv is not None else d["promptName"]

    node = SpanNode(
        line=line,
        where=f"observation {oid}",
        parent=parent,
        start=start,
        role=role,
        input_text=io_text(d.get("input"), QUESTION_KEYS, "user"),
        output_text=None if role == "retrieval" else io_text(output, ANSWER_KEYS, "assistant"),
        chunks=tuple(chunks),
        versions=versions,
        rag=rag_attrs(_flatten(meta), lambda k: f"metadata.{k}", vocab),
    )
    return tid, node


def iter_langfuse_jsonl(
    fh: Iterable[str],
    source: str,
    skip_bad: bool = False,
    *,
    vocab: TraceVocabulary | None = None,
    max_open_traces: int = 20_000,
    accept_rootless: bool = False,
) -> Iterator[TraceItem]:
    """Langfuse observation exports, one observation per line, grouped by ``traceId``.

    ``max_open_traces`` and ``accept_rootless`` as for :func:`iter_otlp_jsonl`.
    """
    voc = vocab or DEFAULT_VOCAB
    g = Grouper(source, skip_bad, max_open_traces, accept_rootless)
    ends: list[tuple[dt.datetime, str]] = []  # (root end, trace id), a min-heap
    for n, raw, text in json_lines(fh):
        tid: str | None = None
        try:
            d = parse_record(text)
            if isinstance(d.get("traceId"), str) and d["traceId"].strip():
                tid = d["traceId"].strip()
            tid, node = _langfuse_node(d, n, voc)
        except BadField as exc:
            if tid is not None and tid not in g.poisoned and tid not in g.closed:
                yield g.poison(tid, n, raw, exc)
            else:
                yield g.reject(n, raw, exc.text())
            continue
        while ends and ends[0][0] < node.start:
            _, done = heapq.heappop(ends)
            if done in g.open and g.open[done].root_seen:
                item = g.close(done)
                if item is not None:
                    yield item
        rejected = g.add(tid, node, raw)
        if rejected is not None:
            yield rejected
            continue
        entry = g.open.get(tid)
        if entry is not None and node.parent is None:
            try:
                end = read_time(d.get("endTime"), "endTime") if d.get("endTime") else None
            except BadField as exc:
                yield g.poison(tid, n, raw, exc)
                continue
            if end is not None:
                heapq.heappush(ends, (end, tid))
    yield from g.finish()
