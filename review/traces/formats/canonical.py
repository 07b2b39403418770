"""The canonical trace record: a trace to and from a JSON-able dict, canonical JSONL written
and read line by line with the line and field of any problem."""

from __future__ import annotations

import datetime as dt
import functools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import IO, Any

from review.core.errors import InputError
from review.core.records import JsonProblem, json_lines, json_object, parse_json
from review.traces.formats.fields import (
    INT_MAX,
    BadField,
    is_absent,
    opt_bool,
    opt_float,
    opt_int,
    opt_text,
    opt_topics,
    read_attributes,
    read_chunks,
    read_citations,
    read_decision,
    read_ident,
    read_reason,
    read_time,
    read_versions,
    req_text,
    str_list,
    text_or_empty,
)
from review.traces.model import (
    DEFAULT_VOCAB,
    ParsedTrace,
    Rejected,
    Trace,
    TraceItem,
    TraceVocabulary,
)

__all__ = [
    "CANONICAL_FIELDS",
    "Converter",
    "iter_canonical_jsonl",
    "line_error",
    "parse_record",
    "scalar_fields",
    "trace_from_dict",
    "trace_from_mapping",
    "trace_to_dict",
    "write_canonical_jsonl",
]


# The canonical record ---------------------------------------------------------------------

Converter = Callable[[object, str], Any]


@functools.lru_cache(maxsize=16)
def scalar_fields(vocab: TraceVocabulary) -> dict[str, Converter]:
    """Trace fields besides trace_id/time/query/chunks, with their converters."""
    return {
        "rewritten_query": opt_text,
        "user_role": lambda v, f: None if is_absent(v) else read_ident(v, f),
        "identity_scopes": str_list,
        "context_sent": text_or_empty,
        "ranking_mode": lambda v, f: None if is_absent(v) else read_ident(v, f).lower(),
        "hits_after_filter": lambda v, f: opt_int(v, f, minimum=0, maximum=INT_MAX),
        "top_score": opt_float,
        "answerable": opt_bool,
        "ambiguous": opt_bool,
        "ungrounded": opt_bool,
        "topics": opt_topics,
        "decision": read_decision(vocab),
        "reason_code": read_reason(vocab),
        "answer_text": text_or_empty,
        "citations": read_citations,
        "feedback": lambda v, f: None if is_absent(v) else read_ident(v, f),
        "reformulated": opt_bool,
        "citation_opened": opt_bool,
    }


CANONICAL_FIELDS = (
    "trace_id",
    "time",
    "query",
    *scalar_fields(DEFAULT_VOCAB),
    "chunks",
    "versions",
    "attributes",
)


def trace_from_mapping(d: Mapping[str, Any], vocab: TraceVocabulary) -> Trace:
    extra = [k for k in d if k not in CANONICAL_FIELDS]
    if extra:
        raise BadField(str(extra[0]), "unknown field (put extra facts under attributes)")
    values = {name: conv(d.get(name), name) for name, conv in scalar_fields(vocab).items()}
    return Trace(
        trace_id=read_ident(d.get("trace_id"), "trace_id"),
        time=read_time(d.get("time"), "time"),
        query=req_text(d.get("query"), "query"),
        chunks=read_chunks(d.get("chunks"), "chunks"),
        versions=read_versions(d.get("versions"), "versions"),
        attributes=read_attributes(d.get("attributes"), "attributes"),
        **values,
    )


def trace_from_dict(
    data: Mapping[str, Any], source: str = "trace", vocab: TraceVocabulary | None = None
) -> Trace:
    """Validate one canonical record (a decoded JSON object); errors name ``source`` and field."""
    try:
        return trace_from_mapping(data, vocab or DEFAULT_VOCAB)
    except BadField as exc:
        raise InputError(f"{source}: {exc.text()}") from None


def _iso(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def trace_to_dict(trace: Trace) -> dict[str, Any]:
    """The canonical JSON object for a trace (round-trips through :func:`trace_from_dict`)."""
    return {
        "trace_id": trace.trace_id,
        "time": _iso(trace.time),
        "query": trace.query,
        "rewritten_query": trace.rewritten_query,
        "user_role": trace.user_role,
        "identity_scopes": list(trace.identity_scopes),
        "chunks": [
            {
                "chunk_id": c.chunk_id,
                "doc_id": c.doc_id,
                "doc_version": c.doc_version,
                "rank": c.rank,
                "score": c.score,
                "text": c.text,
                "filtered": c.filtered,
                "effective_date": c.effective_date.isoformat() if c.effective_date else None,
            }
            for c in trace.chunks
        ],
        "context_sent": trace.context_sent,
        "ranking_mode": trace.ranking_mode,
        "hits_after_filter": trace.hits_after_filter,
        "top_score": trace.top_score,
        "answerable": trace.answerable,
        "ambiguous": trace.ambiguous,
        "ungrounded": trace.ungrounded,
        "topics": None if trace.topics is None else list(trace.topics),
        "decision": trace.decision,
        "reason_code": trace.reason_code,
        "answer_text": trace.answer_text,
        "citations": [{"claim": c.claim, "chunk_ids": list(c.chunk_ids)} for c in trace.citations],
        "feedback": trace.feedback,
        "reformulated": trace.reformulated,
        "citation_opened": trace.citation_opened,
        "versions": dict(trace.versions),
        "attributes": dict(trace.attributes),
    }


def write_canonical_jsonl(traces: Iterable[Trace], fh: IO[str]) -> int:
    """Write traces as canonical JSONL, one per line; returns how many were written."""
    n = 0
    for t in traces:
        fh.write(json.dumps(trace_to_dict(t), ensure_ascii=False, separators=(",", ":")))
        fh.write("\n")
        n += 1
    return n


# ---------------------------------------------------------------------------------------
# Line reading shared by the JSONL formats


def _lines(fh: Iterable[str]) -> Iterator[tuple[int, str, str]]:
    """(line number, raw line without newline, stripped text) for non-blank lines."""
    return json_lines(fh)


def parse_record(text: str) -> dict[str, Any]:
    try:
        data = parse_json(text)
        # a decoded text can only hold a NUL character written as the escape \u0000 (JSON
        # refuses a raw control character in a string): without one, skip the walk for it
        if isinstance(data, dict) and "\\u0000" not in text and "\x00" not in text:
            return data
        return json_object(data)
    except JsonProblem as exc:
        raise BadField(exc.field, exc.reason) from None


def line_error(source: str, line_no: int, reason: str) -> InputError:
    return InputError(f"{source}: line {line_no}: {reason}")


def iter_canonical_jsonl(
    fh: Iterable[str],
    source: str,
    skip_bad: bool = False,
    *,
    vocab: TraceVocabulary | None = None,
) -> Iterator[TraceItem]:
    """Canonical JSONL, one trace per line (schema in the module docstring)."""
    voc = vocab or DEFAULT_VOCAB
    for n, raw, text in _lines(fh):
        try:
            trace = trace_from_mapping(parse_record(text), voc)
        except BadField as exc:
            if not skip_bad:
                raise line_error(source, n, exc.text()) from None
            yield Rejected(n, raw, exc.text())
            continue
        yield ParsedTrace(trace, n)
