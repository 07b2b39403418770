"""OTLP/JSON traces (OpenTelemetry, with the rag.* attributes or OpenInference/GenAI
conventions) read line by line into canonical traces."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from review.core.records import JsonProblem, describe, json_lines, parse_json, quoted
from review.traces.formats.canonical import parse_record
from review.traces.formats.fields import (
    CHUNK_ALIASES,
    MAX_CHUNKS,
    MAX_FACTS,
    BadField,
    aliased,
    at_most,
    checked_time,
    is_absent,
    json_text,
    opt_bool,
    opt_float,
    opt_int,
    opt_text,
    opt_topics,
    read_chunk,
    unique_chunks,
)
from review.traces.formats.spans import Grouper, SpanNode, rag_attrs
from review.traces.model import DEFAULT_VOCAB, Chunk, TraceItem, TraceVocabulary

__all__ = [
    "ANSWER_KEYS",
    "QUESTION_KEYS",
    "io_text",
    "iter_otlp_jsonl",
    "otlp_attributes",
    "otlp_id",
    "unix_nano",
]


# ---------------------------------------------------------------------------------------
# OTLP/JSON


def otlp_id(v: object, f: str, nbytes: int) -> str:
    """A trace (16 bytes) or span (8 bytes) id in hex or base64, as lowercase hex."""
    kind = "trace" if nbytes == 16 else "span"
    if is_absent(v):
        raise BadField(f, f"{kind} id is missing")
    if not isinstance(v, str):
        raise BadField(f, f"expected a {kind} id as text, got {describe(v)}")
    s = v.strip()
    if len(s) == 2 * nbytes and re.fullmatch(r"[0-9a-fA-F]+", s):
        out = s.lower()
    else:
        if not re.fullmatch(r"[A-Za-z0-9+/_-]+={0,2}", s):
            raise BadField(
                f, f"{quoted(v)} is neither a {2 * nbytes}-digit hex nor a base64 {kind} id"
            )
        body = s.rstrip("=").replace("-", "+").replace("_", "/")
        try:
            raw = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
        except (binascii.Error, ValueError):
            raise BadField(f, f"{quoted(v)} is not valid base64") from None
        if len(raw) != nbytes:
            raise BadField(
                f,
                f"{quoted(v)} decodes to {len(raw)} bytes; a {kind} id has {nbytes} "
                f"({2 * nbytes} hex digits)",
            )
        out = raw.hex()
    if set(out) == {"0"}:
        raise BadField(f, f"the {kind} id is all zeros (invalid in OTLP)")
    return out


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

#: Attributes of one span or resource (a retrieval span carries four per document)
MAX_SPAN_ATTRIBUTES = 4 * MAX_CHUNKS + MAX_FACTS


def unix_nano(v: object, f: str) -> dt.datetime:
    if v is None:
        raise BadField(f, "required field is missing")
    ns = opt_int(v, f, minimum=1)
    if ns is None:
        raise BadField(f, "must not be empty")
    try:
        t = _EPOCH + dt.timedelta(seconds=ns // 10**9, microseconds=(ns % 10**9) // 1000)
    except OverflowError:
        raise BadField(f, f"{ns} is out of range") from None
    return checked_time(t, f, ns)


def _any_value(v: object, f: str) -> Any:
    """Decode an OTLP AnyValue into plain Python (lists and dicts for array/kvlist)."""
    if not isinstance(v, dict):
        raise BadField(f, f"expected an OTLP value object, got {describe(v)}")
    if not v:
        return None
    if "stringValue" in v:
        s = v["stringValue"]
        if not isinstance(s, str):
            raise BadField(f, f"stringValue must be text, got {describe(s)}")
        return s
    if "boolValue" in v:
        return opt_bool(v["boolValue"], f)
    if "intValue" in v:
        return opt_int(v["intValue"], f)
    if "doubleValue" in v:
        return opt_float(v["doubleValue"], f)
    if "arrayValue" in v:
        arr = v["arrayValue"] or {}
        values = arr.get("values", []) if isinstance(arr, dict) else None
        if not isinstance(values, list):
            raise BadField(f, "arrayValue must hold a values list")
        return [_any_value(x, f"{f}.{i}") for i, x in enumerate(values)]
    if "kvlistValue" in v:
        kv = v["kvlistValue"] or {}
        values = kv.get("values", []) if isinstance(kv, dict) else None
        if not isinstance(values, list):
            raise BadField(f, "kvlistValue must hold a values list")
        return otlp_attributes(values, f)
    if "bytesValue" in v:
        return v["bytesValue"]
    raise BadField(f, f"unknown OTLP value type {sorted(v)[0]!r}")


def otlp_attributes(items: object, owner: str) -> dict[str, Any]:
    """OTLP ``attributes`` of ``owner`` (a span or resource path) as a plain dict."""
    if items is None:
        return {}
    if not isinstance(items, list):
        raise BadField(
            f"{owner}.attributes",
            f"expected a list of {{key, value}} attributes, got {describe(items)}",
        )
    at_most(items, MAX_SPAN_ATTRIBUTES, f"{owner}.attributes", "attributes")
    out: dict[str, Any] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise BadField(f"{owner}.attributes.{i}", "expected {key, value} with a text key")
        out[item["key"]] = _any_value(item.get("value", {}), f"{owner} attribute {item['key']}")
    return out


@dataclass(slots=True)
class _RawSpan:
    line: int
    where: str
    trace_id: str
    span_id: str
    parent: str | None
    start: dt.datetime
    attrs: dict[str, Any]


def _otlp_spans(data: Mapping[str, Any], line: int, ids: list[str]) -> list[_RawSpan]:
    """Structural pass over one export line: its spans, or BadField.

    ``ids`` collects the trace ids read so far, so that a bad line can poison them.
    """
    rs = data.get("resourceSpans")
    if not isinstance(rs, list):
        why = "missing" if rs is None else f"expected a list, got {describe(rs)}"
        raise BadField("resourceSpans", f"{why} (not an OTLP/JSON trace export)")
    spans: list[_RawSpan] = []
    for i, r in enumerate(rs):
        if not isinstance(r, dict):
            raise BadField(f"resourceSpans.{i}", "expected an object")
        res = r.get("resource") or {}
        res_attrs = otlp_attributes(
            res.get("attributes") if isinstance(res, dict) else None,
            f"resourceSpans.{i}.resource",
        )
        scopes = r.get("scopeSpans") or []
        if not isinstance(scopes, list):
            raise BadField(f"resourceSpans.{i}.scopeSpans", "expected a list")
        for j, ss in enumerate(scopes):
            raw_spans = ss.get("spans") if isinstance(ss, dict) else None
            if not isinstance(raw_spans, list):
                raise BadField(f"resourceSpans.{i}.scopeSpans.{j}.spans", "expected a list")
            for k, sp in enumerate(raw_spans):
                where = f"resourceSpans.{i}.scopeSpans.{j}.spans.{k}"
                if not isinstance(sp, dict):
                    raise BadField(where, f"expected a span object, got {describe(sp)}")
                tid = otlp_id(sp.get("traceId"), f"{where}.traceId", 16)
                ids.append(tid)
                parent_raw = sp.get("parentSpanId")
                spans.append(
                    _RawSpan(
                        line=line,
                        where=where,
                        trace_id=tid,
                        span_id=otlp_id(sp.get("spanId"), f"{where}.spanId", 8),
                        parent=None
                        if is_absent(parent_raw)
                        else otlp_id(parent_raw, f"{where}.parentSpanId", 8),
                        start=unix_nano(sp.get("startTimeUnixNano"), f"{where}.startTimeUnixNano"),
                        attrs={
                            **res_attrs,
                            **otlp_attributes(sp.get("attributes"), where),
                        },
                    )
                )
    return spans


_OI_DOC = re.compile(r"^retrieval\.documents\.(\d+)\.document\.(id|score|content|metadata)$")


_GENAI_LLM_OPS = {"chat", "text_completion", "generate_content"}


def io_text(value: object, keys: tuple[str, ...], role: str | None = None) -> str | None:
    """Text out of an input/output value: plain text, an object's key, or a message list."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in "{[" and stripped:
            try:
                return io_text(parse_json(stripped), keys, role)
            except JsonProblem:  # not JSON (or a key given twice): the text itself, whole
                return value if value.strip() else None
        return value if stripped else None
    if isinstance(value, dict):
        for k in keys:
            if isinstance(value.get(k), str) and value[k].strip():
                return str(value[k])
        if isinstance(value.get("messages"), list):
            return io_text(value["messages"], keys, role)
        return None
    if isinstance(value, list) and role is not None:
        for msg in reversed(value):
            if isinstance(msg, dict) and msg.get("role") == role:
                content = msg.get("content")
                if isinstance(content, str) and content.strip():
                    return content
                parts = msg.get("parts")
                if isinstance(parts, list):
                    texts = [
                        str(p["content"])
                        for p in parts
                        if isinstance(p, dict)
                        and p.get("type") == "text"
                        and isinstance(p.get("content"), str)
                    ]
                    if texts:
                        return "".join(texts)
    return None


QUESTION_KEYS = ("query", "question", "input", "text")


ANSWER_KEYS = ("answer", "output", "text", "content", "response")


def _span_role(a: Mapping[str, Any]) -> str:
    """retrieval, llm, embedding, reranker or other, from OpenInference's span kind or the
    GenAI operation name."""
    kind = str(a.get("openinference.span.kind") or "").upper()
    op = str(a.get("gen_ai.operation.name") or "").lower()
    if kind == "RETRIEVER" or op == "retrieval" or "gen_ai.retrieval.documents" in a:
        return "retrieval"
    if kind == "LLM" or op in _GENAI_LLM_OPS:
        return "llm"
    if kind == "EMBEDDING" or op == "embeddings":
        return "embedding"
    if kind == "RERANKER":
        return "reranker"
    return "other"


def _oi_chunk(part: dict[str, tuple[Any, str]], base: str) -> Chunk:
    """One OpenInference retrieval.documents.N.document.* group as a chunk; the chunk fields
    other than id, score and text come from its JSON metadata."""
    vals: dict[str, Any] = {}
    labels = {"chunk_id": f"{base}.id", "score": f"{base}.score", "text": f"{base}.content"}
    for src_key, ckey in (("id", "chunk_id"), ("score", "score"), ("content", "text")):
        if src_key in part:
            vals[ckey] = part[src_key][0]
    if "metadata" in part:
        meta_val, meta_f = part["metadata"]
        meta = json_text(meta_val, meta_f)
        if not isinstance(meta, dict):
            raise BadField(meta_f, f"expected an object, got {describe(meta)}")
        for ckey, names in CHUNK_ALIASES.items():
            if ckey in ("chunk_id", "text", "score"):
                continue
            hit = next((n for n in names if meta.get(n) is not None), None)
            if hit is not None:
                vals[ckey] = meta[hit]
                labels[ckey] = f"{meta_f}.{hit}"
    return read_chunk(vals, base, labels)


def _oi_chunks(a: Mapping[str, Any], label: Callable[[str], str]) -> list[Chunk]:
    """The chunks of OpenInference's flattened retrieval.documents.N.document.* attributes."""
    docs: dict[int, dict[str, tuple[Any, str]]] = {}
    for key, val in a.items():
        m = _OI_DOC.match(key)
        if m:
            docs.setdefault(int(m.group(1)), {})[m.group(2)] = (val, label(key))
    at_most(docs, MAX_CHUNKS, label("retrieval.documents"), "documents")
    return [
        _oi_chunk(docs[idx], label(f"retrieval.documents.{idx}.document")) for idx in sorted(docs)
    ]


def _genai_chunks(a: Mapping[str, Any], label: Callable[[str], str]) -> list[Chunk]:
    """The chunks of the GenAI gen_ai.retrieval.documents attribute (a JSON list)."""
    if "gen_ai.retrieval.documents" not in a:
        return []
    f = label("gen_ai.retrieval.documents")
    gdocs = json_text(a["gen_ai.retrieval.documents"], f)
    if not isinstance(gdocs, list):
        raise BadField(f, f"expected a list of documents, got {describe(gdocs)}")
    at_most(gdocs, MAX_CHUNKS, f, "documents")
    chunks: list[Chunk] = []
    for i, d in enumerate(gdocs):
        d = json_text(d, f"{f}.{i}")
        if not isinstance(d, dict):
            raise BadField(f"{f}.{i}", f"expected a document object, got {describe(d)}")
        values, labels = aliased(d, f"{f}.{i}")
        chunks.append(read_chunk(values, f"{f}.{i}", labels))
    return chunks


def _retrieval_versions(a: Mapping[str, Any]) -> dict[str, str]:
    versions: dict[str, str] = {}
    if isinstance(a.get("gen_ai.data_source.id"), str):
        versions["index"] = a["gen_ai.data_source.id"]
    if isinstance(a.get("gen_ai.request.model"), str):
        versions["embedding"] = a["gen_ai.request.model"]
    return versions


def _llm_versions(a: Mapping[str, Any]) -> dict[str, str]:
    versions: dict[str, str] = {}
    model = a.get("llm.model_name") or a.get("gen_ai.response.model")
    model = model or a.get("gen_ai.request.model")
    if isinstance(model, str) and model:
        versions["model"] = model
    prompt = a.get("llm.prompt_template.version")
    if isinstance(prompt, str | int) and not isinstance(prompt, bool):
        versions["prompt"] = str(prompt)
    return versions


def _io_texts(a: Mapping[str, Any], label: Callable[[str], str]) -> tuple[str | None, str | None]:
    """The span's input and output text (out of JSON when their mime type says so)."""
    input_text = opt_text(a.get("input.value"), label("input.value"))
    output_text = opt_text(a.get("output.value"), label("output.value"))
    if input_text and "json" in str(a.get("input.mime_type", "")):
        input_text = io_text(input_text, QUESTION_KEYS, "user")
    if output_text and "json" in str(a.get("output.mime_type", "")):
        output_text = io_text(output_text, ANSWER_KEYS, "assistant")
    return input_text, output_text


def _otlp_node(sp: _RawSpan, vocab: TraceVocabulary) -> SpanNode:
    a = sp.attrs

    def label(key: str) -> str:
        return f"{sp.where} attribute {key}"

    role = _span_role(a)
    input_text, output_text = _io_texts(a, label)
    versions: dict[str, str] = {}
    chunks: list[Chunk] = []

    if role == "retrieval":
        gq = opt_text(a.get("gen_ai.retrieval.query.text"), label("gen_ai.retrieval.query.text"))
        input_text = gq or input_text
        chunks = _oi_chunks(a, label) + _genai_chunks(a, label)
        unique_chunks(chunks, label("retrieval documents"))
        versions = _retrieval_versions(a)
    elif role == "llm":
        versions = _llm_versions(a)
        if "gen_ai.output.messages" in a:
            msgs = json_text(a["gen_ai.output.messages"], label("gen_ai.output.messages"))
            output_text = output_text or io_text(msgs, ANSWER_KEYS, "assistant")
    elif role == "embedding":
        model = a.get("embedding.model_name") or a.get("gen_ai.request.model")
        if isinstance(model, str) and model:
            versions["embedding"] = model
    elif role == "reranker" and isinstance(a.get("reranker.model_name"), str):
        versions["reranker"] = a["reranker.model_name"]

    return SpanNode(
        line=sp.line,
        where=sp.where,
        parent=sp.parent,
        start=sp.start,
        role=role,
        input_text=input_text,
        output_text=output_text,
        chunks=tuple(chunks),
        versions=versions,
        rag=_with_metadata_topics(rag_attrs(a, label, vocab), a, label),
    )


def _with_metadata_topics(
    rag: dict[str, tuple[Any, str]], a: Mapping[str, Any], label: Any
) -> dict[str, tuple[Any, str]]:
    """OpenInference keeps free-form span metadata as JSON text in ``metadata``; its
    ``topics`` key (the topic classifier's keys) counts as ``rag.topics`` when that is not
    set. The GenAI conventions name no topic attribute: use ``rag.topics`` there."""
    raw = a.get("metadata")
    if "topics" in rag or not isinstance(raw, str):
        return rag
    meta = json_text(raw, label("metadata"))
    if not isinstance(meta, dict) or "topics" not in meta:
        return rag
    f = label("metadata") + " key topics"
    val = opt_topics(meta["topics"], f)
    return rag if val is None else {**rag, "topics": (val, f)}


def iter_otlp_jsonl(
    fh: Iterable[str],
    source: str,
    skip_bad: bool = False,
    *,
    vocab: TraceVocabulary | None = None,
    max_open_traces: int = 20_000,
    accept_rootless: bool = False,
) -> Iterator[TraceItem]:
    """OTLP/JSON export lines (OpenInference or GenAI attributes); one Trace per trace id.

    ``max_open_traces`` bounds memory: more traces waiting for their root raise InputError.
    ``accept_rootless`` imports traces whose root span never arrived instead of refusing them.
    """
    voc = vocab or DEFAULT_VOCAB
    g = Grouper(source, skip_bad, max_open_traces, accept_rootless)
    for n, raw, text in json_lines(fh):
        ids: list[str] = []
        try:
            spans = _otlp_spans(parse_record(text), n, ids)
        except BadField as exc:
            for tid in ids:  # traces with spans in a refused line would be incomplete
                g.open.pop(tid, None)
                g.poisoned.add(tid)
            yield g.reject(n, raw, exc.text())
            continue
        roots: list[str] = []
        dead_roots: list[str] = []
        for sp in spans:
            tid = sp.trace_id
            if tid in g.poisoned:
                if sp.parent is None:
                    dead_roots.append(tid)
                continue
            try:
                node = _otlp_node(sp, voc)
            except BadField as exc:
                yield g.poison(tid, n, raw, exc)
                if sp.parent is None:
                    dead_roots.append(tid)
                continue
            rejected = g.add(tid, node, raw)
            if rejected is not None:
                yield rejected
            elif sp.parent is None:
                roots.append(tid)
        # traces close after the whole line: its spans may come in any order
        for tid in dict.fromkeys(roots):
            item = g.close(tid, n)
            if item is not None:
                yield item
        for tid in dead_roots:
            g.bury(tid)
    yield from g.finish()
