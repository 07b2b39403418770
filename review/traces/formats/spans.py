"""Spans and observations grouped into traces, shared by the OTLP and Langfuse parsers: a
trace is assembled from its root and child nodes when it is complete, within bounded memory."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from review.traces.formats.canonical import Converter, line_error, scalar_fields
from review.traces.formats.fields import (
    MAX_CHUNKS,
    MAX_FACTS,
    BadField,
    at_most,
    attr_value,
    opt_text,
    read_versions,
    str_list,
)
from review.traces.model import (
    CLOSED_MEMORY,
    AttrValue,
    Chunk,
    ParsedTrace,
    Rejected,
    Trace,
    TraceItem,
    TraceVocabulary,
)

# ---------------------------------------------------------------------------------------
# Span/observation grouping shared by OTLP and Langfuse


@dataclass(slots=True)
class SpanNode:
    """One span or observation, already converted into typed facts."""

    line: int
    where: str  # field path of the span/observation, for messages
    parent: str | None
    start: dt.datetime
    role: str  # "retrieval", "llm", "embedding", "reranker" or "other"
    input_text: str | None = None
    output_text: str | None = None
    chunks: tuple[Chunk, ...] = ()
    versions: dict[str, str] = field(default_factory=dict)
    rag: dict[str, tuple[Any, str]] = field(default_factory=dict)  # field -> (value, label)


@functools.lru_cache(maxsize=16)
def _rag_fields(vocab: TraceVocabulary) -> dict[str, Converter]:
    return {**scalar_fields(vocab), "query": opt_text, "filtered_chunk_ids": str_list}


def rag_attrs(
    attrs: Mapping[str, Any], label: Callable[[str], str], vocab: TraceVocabulary
) -> dict[str, tuple[Any, str]]:
    """Typed values of the ``rag.*`` keys; unknown rag keys are refused."""
    convs = _rag_fields(vocab)
    out: dict[str, tuple[Any, str]] = {}
    for key, raw in attrs.items():
        if not key.startswith("rag."):
            continue
        name = key[4:]
        f = label(key)
        if name.startswith("version.") and len(name) > 8:
            val: Any = None if raw is None else read_versions({"v": raw}, f).get("v")
        elif name.startswith("attr.") and len(name) > 5:
            val = None if raw is None else attr_value(raw, f)
        elif name in convs:
            val = convs[name](raw, f)
        else:
            known = ", ".join(f"rag.{k}" for k in sorted(convs))
            raise BadField(
                f, f"unknown key in the rag namespace (known: {known}, rag.version.*, rag.attr.*)"
            )
        if val is not None and (val != () or name == "topics") and val != "":
            out[name] = (val, f)  # topics () is "classified, no topic", not absent
    return out


def _agreed_rag(nodes: list[SpanNode]) -> dict[str, tuple[Any, str, int]]:
    """The rag.* values of the trace's spans (value, label, line); two spans that give one
    name different values refuse the trace."""
    rag: dict[str, tuple[Any, str, int]] = {}
    for node in nodes:
        for name, (val, label) in node.rag.items():
            if name in rag and rag[name][0] != val:
                old, _, old_line = rag[name]
                raise BadField(
                    label,
                    f"spans/observations of the trace disagree: {old!r} (line {old_line}) and "
                    f"{val!r} (line {node.line})",
                )
            rag.setdefault(name, (val, label, node.line))
    return rag


def _span_chunks(retrievals: list[SpanNode], filtered: tuple[str, ...]) -> list[Chunk]:
    """The retrieval spans' chunks, first of each id kept and ranked by order where unranked;
    the filtered ids marked (and added when no span retrieved them)."""
    chunks: list[Chunk] = []
    seen: set[str] = set()
    for node in retrievals:
        for c in node.chunks:
            if c.chunk_id in seen:
                continue
            seen.add(c.chunk_id)
            chunks.append(c if c.rank is not None else dataclasses.replace(c, rank=len(chunks) + 1))
    if filtered:
        fset = set(filtered)
        chunks = [
            dataclasses.replace(c, filtered=True) if c.chunk_id in fset else c for c in chunks
        ]
        chunks.extend(
            Chunk(cid, filtered=True) for cid in dict.fromkeys(filtered) if cid not in seen
        )
    return chunks


def _versions_and_attributes(
    nodes: list[SpanNode], rag: dict[str, tuple[Any, str, int]]
) -> tuple[dict[str, str], dict[str, AttrValue]]:
    """The spans' versions (first wins) overridden by rag.version.*, and the rag.attr.*."""
    versions: dict[str, str] = {}
    for node in nodes:
        for k, v in node.versions.items():
            versions.setdefault(k, v)
    attributes: dict[str, AttrValue] = {}
    for name, (val, _, _) in rag.items():
        if name.startswith("version."):
            versions[name[8:]] = val
        elif name.startswith("attr."):
            attributes[name[5:]] = val
    return versions, attributes


def _assemble(trace_id: str, nodes: list[SpanNode]) -> Trace:
    """Combine the spans/observations of one trace into a Trace (precedence: module docs)."""
    nodes = sorted(nodes, key=lambda n: n.start)
    roots = [n for n in nodes if n.parent is None]
    root = roots[0] if roots else None
    rag = _agreed_rag(nodes)

    def pick(name: str) -> Any:
        return rag[name][0] if name in rag else None

    retrievals = [n for n in nodes if n.role == "retrieval"]
    retrieval_query = next((n.input_text for n in retrievals if n.input_text), None)
    query = pick("query") or (root.input_text if root else None) or retrieval_query
    if not query:
        raise BadField(
            "query",
            "no span carries the question (rag.query, the root's input, or a retrieval query)",
        )
    rewritten = pick("rewritten_query")
    if rewritten is None and retrieval_query and retrieval_query != query:
        rewritten = retrieval_query
    llm_output = next(
        (n.output_text for n in reversed(nodes) if n.role == "llm" and n.output_text), None
    )
    answer = pick("answer_text") or (root.output_text if root else None) or llm_output or ""
    chunks = _span_chunks(retrievals, pick("filtered_chunk_ids") or ())
    versions, attributes = _versions_and_attributes(nodes, rag)

    # the spans' parts are each bounded; so is what they add up to
    at_most(chunks, MAX_CHUNKS, "chunks", "chunks in the trace")
    at_most(versions, MAX_FACTS, "versions", "versions in the trace")
    at_most(attributes, MAX_FACTS, "attributes", "attributes in the trace")
    return Trace(
        trace_id=trace_id,
        time=(root or nodes[0]).start,
        query=query,
        rewritten_query=rewritten,
        user_role=pick("user_role"),
        identity_scopes=pick("identity_scopes") or (),
        chunks=tuple(chunks),
        context_sent=pick("context_sent") or "",
        ranking_mode=pick("ranking_mode"),
        hits_after_filter=pick("hits_after_filter"),
        top_score=pick("top_score"),
        answerable=pick("answerable"),
        ambiguous=pick("ambiguous"),
        ungrounded=pick("ungrounded"),
        topics=pick("topics"),
        decision=pick("decision"),
        reason_code=pick("reason_code"),
        answer_text=answer,
        citations=pick("citations") or (),
        feedback=pick("feedback"),
        reformulated=pick("reformulated"),
        citation_opened=pick("citation_opened"),
        versions=versions,
        attributes=attributes,
    )


@dataclass(slots=True)
class _Open:
    nodes: list[SpanNode]
    first_line: int
    last_raw: str
    root_seen: bool = False


class Grouper:
    """Holds open traces, closes them, and remembers recently closed ids to refuse late spans."""

    def __init__(self, source: str, skip_bad: bool, max_open: int, accept_rootless: bool) -> None:
        self.source = source
        self.skip_bad = skip_bad
        self.max_open = max_open
        self.accept_rootless = accept_rootless
        self.open: dict[str, _Open] = {}
        self.poisoned: set[str] = set()
        self.closed: OrderedDict[str, None] = OrderedDict()

    def bury(self, tid: str) -> None:
        """The root of a rejected trace arrived: forget it, and refuse its late spans."""
        self.poisoned.discard(tid)
        self._remember_closed(tid)

    def _remember_closed(self, tid: str) -> None:
        self.closed[tid] = None
        if len(self.closed) > CLOSED_MEMORY:
            self.closed.popitem(last=False)

    def reject(self, line: int, raw: str, reason: str) -> Rejected:
        if not self.skip_bad:
            raise line_error(self.source, line, reason)
        return Rejected(line, raw, reason)

    def poison(self, tid: str, line: int, raw: str, bad: BadField) -> Rejected:
        """A span of trace ``tid`` is bad: drop what is open of it and ignore its other spans."""
        self.open.pop(tid, None)
        self.poisoned.add(tid)
        return self.reject(line, raw, f"trace {tid}: {bad.text()}")

    def add(self, tid: str, node: SpanNode, raw: str) -> Rejected | None:
        if tid in self.poisoned:
            return None
        if tid in self.closed:
            return self.poison(
                tid,
                node.line,
                raw,
                BadField(
                    node.where,
                    "arrives after its trace was closed (see the grouping assumption: a trace's "
                    "spans or observations must not come after the line that closed it)",
                ),
            )
        entry = self.open.get(tid)
        if entry is None:
            if len(self.open) >= self.max_open:
                raise line_error(
                    self.source,
                    node.line,
                    f"more than {self.max_open:,} traces are open at once (no root span yet); "
                    "the file is not grouped by trace or time-ordered",
                )
            entry = self.open[tid] = _Open([], node.line, raw)
        entry.nodes.append(node)
        entry.last_raw = raw
        if node.parent is None:
            entry.root_seen = True
        return None

    def close(self, tid: str, line: int | None = None) -> TraceItem | None:
        entry = self.open.pop(tid, None)
        if entry is None:
            return None
        self._remember_closed(tid)
        at = line if line is not None else entry.first_line
        try:
            return ParsedTrace(_assemble(tid, entry.nodes), at)
        except BadField as exc:
            return self.reject(at, entry.last_raw, f"trace {tid}: {exc.text()}")

    def finish(self) -> Iterator[TraceItem]:
        """At the end of the file: emit what is still open (rootless traces are refused)."""
        for tid in list(self.open):
            entry = self.open[tid]
            if not entry.root_seen and not self.accept_rootless:
                del self.open[tid]
                yield self.reject(
                    entry.first_line,
                    entry.last_raw,
                    f"trace {tid}: no root span/observation arrived before the end of the file "
                    "(the export may be truncated, or the root was in a refused line)",
                )
                continue
            item = self.close(tid)
            if item is not None:
                yield item
