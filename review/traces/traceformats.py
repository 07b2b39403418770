"""Production traces: one canonical model and streaming parsers for four export formats.

A trace is one production request of the RAG assistant: what was asked, what retrieval
returned (and what authorization removed), what context went to the model, the signals the
decision gate saw, the decision with its reason code, the final text with its citations, any
user feedback, and the versions of every component. The parsers turn exports into
:class:`Trace` objects one at a time, so a file of a million traces is read in constant memory.

Canonical JSONL
---------------
One JSON object per line. Only ``trace_id``, ``time`` and ``query`` are required; every other
field may be left out or set to ``null`` (lists and objects default to empty, text to ``""``).
A full line (wrapped here; in the file it is one line)::

    {"trace_id": "bw-2025-06-03-000184", "time": "2025-06-03T09:14:22.120Z",
     "query": "Can we still get our money back for the May charge on our monthly Team plan?",
     "rewritten_query": "refund window monthly Team plan charge",
     "user_role": "customer_admin", "identity_scopes": ["public"],
     "chunks": [{"chunk_id": "POL-REFUND-MONTHLY@2#2.1", "doc_id": "POL-REFUND-MONTHLY",
                 "doc_version": 2, "rank": 1, "score": 0.83,
                 "text": "2.1 A customer may ask for a refund of a monthly subscription charge
                          within 14 days of the charge date.",
                 "filtered": false, "effective_date": "2025-03-01"},
                {"chunk_id": "CTR-MSA-ENT@2#7.2", "doc_id": "CTR-MSA-ENT", "doc_version": 2,
                 "rank": 2, "score": 0.71, "text": "", "filtered": true,
                 "effective_date": "2025-01-01"}],
     "context_sent": "[POL-REFUND-MONTHLY@2#2.1] 2.1 A customer may ask for a refund ...",
     "ranking_mode": "cosine", "hits_after_filter": 1, "top_score": 0.83,
     "answerable": true, "ambiguous": false, "ungrounded": false,
     "decision": "answer", "reason_code": null,
     "answer_text": "Yes, if you ask within 14 days of the charge date.",
     "citations": [{"claim": "Monthly charges can be refunded within 14 days of the charge.",
                    "chunk_ids": ["POL-REFUND-MONTHLY@2#2.1"]}],
     "feedback": "positive",
     "versions": {"model": "gpt-4.1-mini-2025-04-14", "embedding": "text-embedding-3-large",
                  "reranker": "none", "prompt": "support-answer@12", "index": "kb-2025-06-01",
                  "policy": "no-answer-policy@7"},
     "attributes": {"language": "en", "document_type": "policy", "customer_tier": "team"}}

Field rules: ``time`` is ISO 8601; a time without an offset is read as UTC. ``decision`` is a
decision of the taxonomy (answer, abstain, clarify, partial, escalate) and ``reason_code`` one of
its reason codes. ``chunks[].chunk_id`` is required and unique within the trace; ``rank`` is
1-based and defaults to the position in the list; ``filtered: true`` marks a chunk that
authorization removed before the context was built. ``doc_version`` is the integer version of the
corpus document. ``feedback`` is free text; the conventional values are ``positive``,
``negative``, ``expected_answer`` ("I expected an answer") and ``answer_wrong`` ("this answer is
wrong"). ``versions`` conventionally holds model, embedding, reranker, prompt, index and policy
(values are text); ``attributes`` holds flat facts used to slice and stratify (language,
document_type, customer_tier, ...; values are text, numbers or booleans). Numbers may be written
as strings ("0.83"). Unknown top-level fields are refused, so a misspelt field is not lost
silently; put extra facts under ``attributes``.

OTLP/JSON (OpenInference or OpenTelemetry GenAI)
------------------------------------------------
Each line is one OTLP/JSON export request (``resourceSpans[].scopeSpans[].spans[]``), as the
OpenTelemetry file exporter writes it. Span and trace ids may be hex or base64 (protobuf JSON);
both become lowercase hex, and the hex trace id is the trace's ``trace_id``. Resource attributes
apply to every span of the resource. Fields are taken, in order of precedence, from:

* the ``rag.*`` namespace, on any span: ``rag.query``, ``rag.rewritten_query``,
  ``rag.user_role``, ``rag.identity_scopes`` (array or JSON text), ``rag.context_sent``,
  ``rag.ranking_mode``, ``rag.hits_after_filter``, ``rag.top_score``, ``rag.answerable``,
  ``rag.ambiguous``, ``rag.ungrounded``, ``rag.decision``, ``rag.reason_code``,
  ``rag.answer_text``, ``rag.citations`` (JSON ``[{"claim", "chunk_ids"}]``),
  ``rag.filtered_chunk_ids`` (array or JSON text), ``rag.feedback``, ``rag.version.<name>``
  (into ``versions``) and ``rag.attr.<name>`` (into ``attributes``). An unknown ``rag.`` key is
  refused (a typo would otherwise lose a field), and two spans giving different values for the
  same key are refused;
* OpenInference: the root span's ``input.value`` is the question and its ``output.value`` the
  answer; a ``RETRIEVER`` span's ``input.value`` is the rewritten query and its
  ``retrieval.documents.N.document.id/score/content/metadata`` are the chunks (``id`` is the
  chunk id; ``metadata``, JSON text or a key-value list, may carry ``doc_id``, ``doc_version``,
  ``effective_date``, ``filtered`` and ``rank``); an ``LLM`` span gives ``llm.model_name`` (model),
  ``llm.prompt_template.version`` (prompt) and, when the root has none, the answer
  (``output.value``); ``EMBEDDING`` and ``RERANKER`` spans give the embedding and reranker model;
* OpenTelemetry GenAI: a span with ``gen_ai.operation.name`` ``retrieval`` (or any span with
  ``gen_ai.retrieval.documents``) gives ``gen_ai.retrieval.query.text`` (rewritten query),
  ``gen_ai.retrieval.documents`` (JSON text or array of objects ``{id, score, content, doc_id,
  doc_version, effective_date, filtered, rank}``), ``gen_ai.data_source.id`` (index version) and
  ``gen_ai.request.model`` (embedding model); a ``chat``/``text_completion``/``generate_content``
  span gives ``gen_ai.response.model`` or ``gen_ai.request.model`` (model) and the answer from
  the assistant text parts of ``gen_ai.output.messages``.

The question falls back to the retrieval query when nothing else carries it. Chunk ids listed in
``rag.filtered_chunk_ids`` are marked ``filtered``; ids that retrieval did not report are added
as filtered chunks without rank, score or text. Chunks of several retrieval spans are joined in
span start order (the first occurrence of a chunk id wins). ``time`` is the root span's start.

Grouping assumption: spans are exported when they end, and a root span (no ``parentSpanId``)
ends after its children, so a trace is complete once its root span has been read (with the rest
of that line). Spans of different traces may be interleaved freely; only traces whose root has
not arrived yet are held in memory. A span that arrives after its trace was closed is refused
(for the most recent 100,000 closed traces). A trace whose root never arrives (a truncated file,
or a root in a refused line) is refused when the file ends, unless ``accept_rootless=True``.
A trace's ``line_no`` is the line of its root span (of its first span when emitted at the end).

Langfuse observations
---------------------
One observation per line (``id``, ``traceId``, ``type``, ``name``, ``startTime``, ``endTime``,
``parentObservationId``, ``input``, ``output``, ``metadata``, ``model``, optionally
``promptName``/``promptVersion``), grouped by ``traceId``. Mapping:

* the root observation (no ``parentObservationId``): ``input`` is the question (text, or the
  ``query``/``question``/``input`` key of an object, or the last user message of a message
  list), ``output`` the answer (text, or ``answer``/``output``/``text``/``content``), and its
  ``startTime`` the trace time;
* a retrieval observation (type ``RETRIEVER``, or a name containing "retriev"): ``input`` is the
  rewritten query; ``output`` is a list of documents, or an object with a ``documents`` list;
  each document gives ``id`` or ``chunk_id``, ``doc_id``, ``doc_version``, ``score``,
  ``content``/``page_content``/``text``, ``effective_date``, ``filtered``, ``rank``, read from
  the document or from its ``metadata`` object (LangChain style);
* a ``GENERATION`` gives ``model`` (model version), ``promptName@promptVersion`` (prompt
  version) and, when the root has no output, the answer; an ``EMBEDDING`` observation gives the
  embedding model;
* ``metadata`` of any observation, flattened with dots (``{"rag": {"decision": "abstain"}}`` is
  ``rag.decision``), carries the same ``rag.*`` keys as OTLP above.

Grouping assumption: the export is ordered by start time or grouped by trace. A trace is closed
when its root observation has been read and a later line starts after the root's ``endTime``,
or when the file ends; an observation arriving after that is refused, and so is a trace without
a root observation (unless ``accept_rootless=True``). ``line_no`` is the trace's first line.

Flat CSV
--------
One row per trace, with a header row. Columns have the canonical field names; ``trace_id``,
``time`` and ``query`` are required, the rest optional. ``chunks`` and ``citations`` hold the
canonical JSON arrays; ``identity_scopes`` is a ``;``-separated list (or a JSON array);
``version.<name>`` columns fill ``versions`` and ``attr.<name>`` columns fill ``attributes``
(as text). Empty cells mean "not recorded". Booleans accept true/false, yes/no and 1/0. Open the
file with ``newline=""`` so quoted cells may contain line breaks.

Errors
------
Every parser raises :class:`~review.core.errors.InputError` ``"file: line N: field F: reason"`` on
the first bad record, or, with ``skip_bad=True``, yields a :class:`Rejected` item for it and goes
on. For OTLP and Langfuse a bad span or observation refuses its whole trace: one Rejected names
the trace, and the trace's other spans are dropped. A line that cannot be read at all is one
Rejected; traces whose ids could still be read from it are refused with it, a trace whose root
was in it is refused at the end as rootless, and a trace that only lost child spans to it is
imported without them. Duplicate trace ids across a file are not detected here (storage has the
unique key).
"""

from __future__ import annotations

import base64
import binascii
import csv
import dataclasses
import datetime as dt
import functools
import heapq
import json
import math
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, Any, TypeAlias

from review.core.errors import InputError
from review.core.taxonomy import CORE_DECISIONS, Taxonomy
from review.core.textcheck import NUL_PROBLEM, nul_field

__all__ = [
    "DEFAULT_REASON_CODES",
    "FEEDBACK_VALUES",
    "FORMATS",
    "NEGATIVE_FEEDBACK",
    "AttrValue",
    "Chunk",
    "Citation",
    "ParsedTrace",
    "Rejected",
    "Trace",
    "TraceItem",
    "TraceVocabulary",
    "detect_format",
    "iter_canonical_jsonl",
    "iter_csv",
    "iter_langfuse_jsonl",
    "iter_otlp_jsonl",
    "iter_traces",
    "trace_from_dict",
    "trace_to_dict",
    "write_canonical_jsonl",
]

AttrValue: TypeAlias = str | int | float | bool

DEFAULT_REASON_CODES = (
    "no_answer_bearing_evidence",
    "required_claim_not_covered",
    "support_below_threshold",
    "conflicting_evidence",
    "evidence_stale",
    "source_not_allowed",
    "ambiguous_question",
    "restricted_topic",
    "false_premise",
)
FEEDBACK_VALUES = ("positive", "negative", "expected_answer", "answer_wrong")
NEGATIVE_FEEDBACK = frozenset({"negative", "expected_answer", "answer_wrong"})

MAX_TEXT = 1_000_000  # characters in any one text field
CLOSED_MEMORY = 100_000  # recently closed trace ids remembered to refuse late spans


# ---------------------------------------------------------------------------------------
# The model


@dataclass(frozen=True, slots=True)
class Chunk:
    """One retrieved chunk, as the production system saw it."""

    chunk_id: str
    doc_id: str | None = None
    doc_version: int | None = None
    rank: int | None = None  # 1-based; None when the exporter recorded no rank
    score: float | None = None
    text: str = ""
    filtered: bool = False  # removed by authorization before the context was built
    effective_date: dt.date | None = None


@dataclass(frozen=True, slots=True)
class Citation:
    """A claim of the answer and the chunk ids cited for it (possibly none)."""

    claim: str
    chunk_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Trace:
    """One production request, whatever format it was exported in."""

    trace_id: str
    time: dt.datetime  # timezone-aware, UTC
    query: str
    rewritten_query: str | None = None
    user_role: str | None = None
    identity_scopes: tuple[str, ...] = ()
    chunks: tuple[Chunk, ...] = ()
    context_sent: str = ""
    ranking_mode: str | None = None
    hits_after_filter: int | None = None
    top_score: float | None = None
    answerable: bool | None = None
    ambiguous: bool | None = None
    ungrounded: bool | None = None
    decision: str | None = None
    reason_code: str | None = None
    answer_text: str = ""
    citations: tuple[Citation, ...] = ()
    feedback: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    attributes: dict[str, AttrValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ParsedTrace:
    """A trace read from a file; ``line_no`` is its line (for OTLP/Langfuse: module docs)."""

    trace: Trace
    line_no: int


@dataclass(frozen=True, slots=True)
class Rejected:
    """A record refused with ``skip_bad=True``: its line, its raw text and why."""

    line_no: int
    raw_line: str
    reason: str

    def message(self, source: str) -> str:
        return f"{source}: line {self.line_no}: {self.reason}"


TraceItem: TypeAlias = ParsedTrace | Rejected


@dataclass(frozen=True, slots=True)
class TraceVocabulary:
    """The decisions and reason codes a trace may carry (the taxonomy's, by default)."""

    decisions: frozenset[str] = frozenset(CORE_DECISIONS)
    reason_codes: frozenset[str] = frozenset(DEFAULT_REASON_CODES)

    @classmethod
    def from_taxonomy(cls, tax: Taxonomy) -> TraceVocabulary:
        return cls(frozenset(tax.decisions), frozenset(tax.reason_codes))


_DEFAULT_VOCAB = TraceVocabulary()


# ---------------------------------------------------------------------------------------
# Field coercion: each helper takes a value and the field's name, and raises _Bad


class _Bad(Exception):
    def __init__(self, fld: str | None, reason: str) -> None:
        super().__init__(reason)
        self.fld = fld
        self.reason = reason

    def text(self) -> str:
        return f"field {self.fld}: {self.reason}" if self.fld else self.reason


def _describe(v: object) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"boolean {str(v).lower()}"
    if isinstance(v, int | float):
        return f"number {v!r}"
    if isinstance(v, str):
        return f"text {v if len(v) <= 40 else v[:37] + '...'!r}"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


def _absent(v: object) -> bool:
    return v is None or (isinstance(v, str) and (not v or v.isspace()))


def _opt_text(v: object, f: str) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str):
        raise _Bad(f, f"expected text, got {_describe(v)}")
    if len(v) > MAX_TEXT:
        raise _Bad(f, f"longer than {MAX_TEXT:,} characters")
    if "\x00" in v:
        raise _Bad(f, NUL_PROBLEM)
    return None if not v or v.isspace() else v


def _text(v: object, f: str) -> str:
    return _opt_text(v, f) or ""


def _req_text(v: object, f: str, max_len: int = MAX_TEXT) -> str:
    if v is None:
        raise _Bad(f, "required field is missing")
    out = _opt_text(v, f)
    if out is None:
        raise _Bad(f, "must not be empty")
    if len(out) > max_len:
        raise _Bad(f, f"longer than {max_len} characters")
    return out


def _ident(v: object, f: str) -> str:
    """An identifier: text (or an integer, written as text), stripped, at most 200 chars."""
    if isinstance(v, int) and not isinstance(v, bool):
        v = str(v)
    return _req_text(v, f, 200).strip()


_INT_MAX = 2**31 - 1  # the largest whole number the database's integer columns hold
_INT_RE = re.compile(r"^\s*[+-]?\d+\s*$")
_FLOAT_RE = re.compile(r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$")


def _opt_int(
    v: object, f: str, minimum: int | None = None, maximum: int | None = None
) -> int | None:
    if _absent(v):
        return None
    out: int
    if isinstance(v, bool):
        raise _Bad(f, f"expected a whole number, got {_describe(v)}")
    if isinstance(v, int):
        out = v
    elif (isinstance(v, float) and v.is_integer()) or (isinstance(v, str) and _INT_RE.match(v)):
        try:
            out = int(v)
        except ValueError:  # more digits than Python converts
            raise _Bad(f, "expected a whole number, got a number too long to read") from None
    else:
        raise _Bad(f, f"expected a whole number, got {_describe(v)}")
    if minimum is not None and out < minimum:
        raise _Bad(f, f"must be at least {minimum}, got {out}")
    if maximum is not None and out > maximum:
        raise _Bad(f, f"must be at most {maximum}, got a larger number")
    return out


def _opt_float(v: object, f: str) -> float | None:
    if _absent(v):
        return None
    out: float
    if isinstance(v, bool):
        raise _Bad(f, f"expected a number, got {_describe(v)}")
    if isinstance(v, int | float) or (isinstance(v, str) and _FLOAT_RE.match(v)):
        try:
            out = float(v)
        except OverflowError:
            raise _Bad(f, "expected a finite number, got a number too large") from None
    else:
        raise _Bad(f, f"expected a number, got {_describe(v)}")
    if not math.isfinite(out):
        raise _Bad(f, f"expected a finite number, got {out}")
    return out


_TRUE = {"true", "yes", "1"}
_FALSE = {"false", "no", "0"}


def _opt_bool(v: object, f: str) -> bool | None:
    if _absent(v):
        return None
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    if isinstance(v, str):
        low = v.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
    raise _Bad(f, f"expected true or false, got {_describe(v)}")


def _opt_date(v: object, f: str) -> dt.date | None:
    if _absent(v):
        return None
    if not isinstance(v, str):
        raise _Bad(f, f"expected a date (YYYY-MM-DD), got {_describe(v)}")
    text = v.strip()
    try:
        if len(text) == 10:
            return dt.date.fromisoformat(text)
        return dt.datetime.fromisoformat(text).date()  # a full timestamp: keep its date
    except ValueError:
        raise _Bad(f, f"not a valid date (YYYY-MM-DD): {v!r}") from None


def _time(v: object, f: str) -> dt.datetime:
    if v is None:
        raise _Bad(f, "required field is missing")
    if not isinstance(v, str) or not v.strip():
        raise _Bad(f, f"expected an ISO 8601 time, got {_describe(v)}")
    try:
        t = dt.datetime.fromisoformat(v.strip())
    except ValueError:
        raise _Bad(f, f"not a valid ISO 8601 time: {v!r}") from None
    if t.tzinfo is None:
        return t.replace(tzinfo=dt.UTC)
    return t.astimezone(dt.UTC)


def _json_text(v: object, f: str) -> Any:
    """Values that exporters write as JSON text (arrays, objects) are decoded here."""
    if isinstance(v, str) and v.lstrip()[:1] in ("[", "{"):
        try:
            return json.loads(v)
        except json.JSONDecodeError as exc:
            raise _Bad(f, f"not valid JSON ({exc.msg})") from None
        except RecursionError:
            raise _Bad(f, "not valid JSON (nested too deeply)") from None
        except ValueError:  # an integer of more digits than Python converts
            raise _Bad(f, "not valid JSON (a number too long to read)") from None
    return v


def _str_list(v: object, f: str) -> tuple[str, ...]:
    if _absent(v):
        return ()
    v = _json_text(v, f)
    if not isinstance(v, list):
        raise _Bad(f, f"expected a list of text, got {_describe(v)}")
    out: list[str] = []
    for i, item in enumerate(v):
        out.append(_ident(item, f"{f}.{i}"))
    return tuple(out)


def _decision(vocab: TraceVocabulary) -> Callable[[object, str], str | None]:
    def conv(v: object, f: str) -> str | None:
        text = _opt_text(v, f)
        if text is None:
            return None
        key = text.strip().lower()
        if key not in vocab.decisions:
            allowed = ", ".join(sorted(vocab.decisions))
            raise _Bad(f, f"unknown decision {text!r} (allowed: {allowed})")
        return key

    return conv


def _reason(vocab: TraceVocabulary) -> Callable[[object, str], str | None]:
    def conv(v: object, f: str) -> str | None:
        text = _opt_text(v, f)
        if text is None:
            return None
        key = text.strip()
        if key not in vocab.reason_codes:
            raise _Bad(f, f"unknown reason code {text!r} (see the taxonomy's reason_codes)")
        return key

    return conv


def _citations(v: object, f: str) -> tuple[Citation, ...]:
    if _absent(v):
        return ()
    v = _json_text(v, f)
    if not isinstance(v, list):
        raise _Bad(f, f"expected a list of {{claim, chunk_ids}} objects, got {_describe(v)}")
    out: list[Citation] = []
    for i, item in enumerate(v):
        at = f"{f}.{i}"
        if not isinstance(item, dict):
            raise _Bad(at, f"expected an object with claim and chunk_ids, got {_describe(item)}")
        extra = sorted(set(item) - {"claim", "chunk_ids"})
        if extra:
            raise _Bad(f"{at}.{extra[0]}", "unknown field (a citation has claim and chunk_ids)")
        claim = _req_text(item.get("claim"), f"{at}.claim")
        out.append(Citation(claim, _str_list(item.get("chunk_ids"), f"{at}.chunk_ids")))
    return tuple(out)


def _versions(v: object, f: str) -> dict[str, str]:
    if _absent(v):
        return {}
    if not isinstance(v, dict):
        raise _Bad(f, f"expected an object of name: version, got {_describe(v)}")
    out: dict[str, str] = {}
    for key, val in v.items():
        if val is None:
            continue
        if isinstance(val, bool) or not isinstance(val, str | int | float):
            at = f if key == "v" else f"{f}.{key}"
            raise _Bad(at, f"expected a version as text, got {_describe(val)}")
        if nul_field(val) is not None or "\x00" in str(key):
            raise _Bad(f"{f}.{key}", NUL_PROBLEM)
        out[str(key)] = str(val)
    return out


def _attr_value(val: object, f: str) -> AttrValue:
    if isinstance(val, str) and "\x00" in val:
        raise _Bad(f, NUL_PROBLEM)
    if isinstance(val, str | bool | int):
        return val
    if isinstance(val, float):
        if not math.isfinite(val):
            raise _Bad(f, f"expected a finite number, got {val}")
        return val
    raise _Bad(f, f"expected text, a number or a boolean, got {_describe(val)}")


def _attributes(v: object, f: str) -> dict[str, AttrValue]:
    if _absent(v):
        return {}
    if not isinstance(v, dict):
        raise _Bad(f, f"expected an object of flat facts, got {_describe(v)}")
    if any("\x00" in str(k) for k in v):
        raise _Bad(f, NUL_PROBLEM)
    return {str(k): _attr_value(val, f"{f}.{k}") for k, val in v.items() if val is not None}


# Chunks ---------------------------------------------------------------------------------

_CHUNK_KEYS = (
    "chunk_id",
    "doc_id",
    "doc_version",
    "rank",
    "score",
    "text",
    "filtered",
    "effective_date",
)
# accepted spellings of chunk fields in third-party documents (first found wins)
_CHUNK_ALIASES: dict[str, tuple[str, ...]] = {
    "chunk_id": ("chunk_id", "id"),
    "doc_id": ("doc_id", "document_id"),
    "doc_version": ("doc_version", "version"),
    "rank": ("rank",),
    "score": ("score",),
    "text": ("text", "content", "page_content"),
    "filtered": ("filtered",),
    "effective_date": ("effective_date",),
}

_CHUNK_KEYSET = frozenset(_CHUNK_KEYS)


def _chunk(values: Mapping[str, Any], where: str, labels: Mapping[str, str] | None = None) -> Chunk:
    """A chunk from canonical keys; a bad field is named ``labels[key]`` or ``where.key``.

    Labels are only built when something is wrong: this runs once per chunk of every trace.
    """
    get = values.get
    try:
        doc = get("doc_id")
        return Chunk(
            chunk_id=_ident(get("chunk_id"), "chunk_id"),
            doc_id=None if _absent(doc) else _ident(doc, "doc_id"),
            doc_version=_opt_int(get("doc_version"), "doc_version", minimum=1, maximum=_INT_MAX),
            rank=_opt_int(get("rank"), "rank", minimum=1, maximum=_INT_MAX),
            score=_opt_float(get("score"), "score"),
            text=_text(get("text"), "text"),
            filtered=bool(_opt_bool(get("filtered"), "filtered")),
            effective_date=_opt_date(get("effective_date"), "effective_date"),
        )
    except _Bad as exc:
        key = exc.fld or ""
        exc.fld = (labels or {}).get(key) or f"{where}.{key}"
        raise


def _aliased(doc: Mapping[str, Any], where: str) -> tuple[dict[str, Any], dict[str, str]]:
    """Chunk fields of a third-party document (on it, else in its metadata), with labels."""
    meta_raw = doc.get("metadata")
    meta = _json_text(meta_raw, f"{where}.metadata") if meta_raw is not None else {}
    if not isinstance(meta, dict):
        raise _Bad(f"{where}.metadata", f"expected an object, got {_describe(meta)}")
    values: dict[str, Any] = {}
    labels: dict[str, str] = {"chunk_id": f"{where}.id"}
    for key, names in _CHUNK_ALIASES.items():
        for src, label in ((doc, where), (meta, f"{where}.metadata")):
            hit = next((n for n in names if src.get(n) is not None), None)
            if hit is not None:
                values[key] = src[hit]
                labels[key] = f"{label}.{hit}"
                break
    return values, labels


def _chunk_list(v: object, f: str) -> tuple[Chunk, ...]:
    """Canonical chunks (strict keys); rank defaults to the position in the list."""
    if _absent(v):
        return ()
    v = _json_text(v, f)
    if not isinstance(v, list):
        raise _Bad(f, f"expected a list of chunk objects, got {_describe(v)}")
    out: list[Chunk] = []
    for i, item in enumerate(v):
        at = f"{f}.{i}"
        if not isinstance(item, dict):
            raise _Bad(at, f"expected a chunk object, got {_describe(item)}")
        extra = item.keys() - _CHUNK_KEYSET
        if extra:
            raise _Bad(
                f"{at}.{sorted(extra)[0]}",
                f"unknown field (chunk fields: {', '.join(_CHUNK_KEYS)})",
            )
        c = _chunk(item, at)
        out.append(c if c.rank is not None else dataclasses.replace(c, rank=i + 1))
    _unique_chunks(out, f)
    return tuple(out)


def _unique_chunks(chunks: Iterable[Chunk], f: str) -> None:
    seen: dict[str, int] = {}
    for i, c in enumerate(chunks):
        if c.chunk_id in seen:
            raise _Bad(
                f"{f}.{i}.chunk_id",
                f"chunk id {c.chunk_id!r} appears twice (also item {seen[c.chunk_id]})",
            )
        seen[c.chunk_id] = i


# The canonical record ---------------------------------------------------------------------

_Conv = Callable[[object, str], Any]


@functools.lru_cache(maxsize=16)
def _scalar_fields(vocab: TraceVocabulary) -> dict[str, _Conv]:
    """Trace fields besides trace_id/time/query/chunks, with their converters."""
    return {
        "rewritten_query": _opt_text,
        "user_role": lambda v, f: None if _absent(v) else _ident(v, f),
        "identity_scopes": _str_list,
        "context_sent": _text,
        "ranking_mode": lambda v, f: None if _absent(v) else _ident(v, f).lower(),
        "hits_after_filter": lambda v, f: _opt_int(v, f, minimum=0, maximum=_INT_MAX),
        "top_score": _opt_float,
        "answerable": _opt_bool,
        "ambiguous": _opt_bool,
        "ungrounded": _opt_bool,
        "decision": _decision(vocab),
        "reason_code": _reason(vocab),
        "answer_text": _text,
        "citations": _citations,
        "feedback": lambda v, f: None if _absent(v) else _ident(v, f),
    }


_CANONICAL_FIELDS = (
    "trace_id",
    "time",
    "query",
    *_scalar_fields(_DEFAULT_VOCAB),
    "chunks",
    "versions",
    "attributes",
)


def _trace_from_mapping(d: Mapping[str, Any], vocab: TraceVocabulary) -> Trace:
    extra = [k for k in d if k not in _CANONICAL_FIELDS]
    if extra:
        raise _Bad(str(extra[0]), "unknown field (put extra facts under attributes)")
    values = {name: conv(d.get(name), name) for name, conv in _scalar_fields(vocab).items()}
    return Trace(
        trace_id=_ident(d.get("trace_id"), "trace_id"),
        time=_time(d.get("time"), "time"),
        query=_req_text(d.get("query"), "query"),
        chunks=_chunk_list(d.get("chunks"), "chunks"),
        versions=_versions(d.get("versions"), "versions"),
        attributes=_attributes(d.get("attributes"), "attributes"),
        **values,
    )


def trace_from_dict(
    data: Mapping[str, Any], source: str = "trace", vocab: TraceVocabulary | None = None
) -> Trace:
    """Validate one canonical record (a decoded JSON object); errors name ``source`` and field."""
    try:
        return _trace_from_mapping(data, vocab or _DEFAULT_VOCAB)
    except _Bad as exc:
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
        "decision": trace.decision,
        "reason_code": trace.reason_code,
        "answer_text": trace.answer_text,
        "citations": [{"claim": c.claim, "chunk_ids": list(c.chunk_ids)} for c in trace.citations],
        "feedback": trace.feedback,
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
    for n, raw in enumerate(fh, start=1):
        line = raw.rstrip("\r\n")
        if n == 1:
            line = line.removeprefix("\ufeff")
        text = line.strip()
        if text:
            yield n, line, text


def _json_object(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Bad(None, f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise _Bad(None, "not valid JSON (nested too deeply)") from None
    except ValueError:  # an integer of more digits than Python converts
        raise _Bad(None, "not valid JSON (a number too long to read)") from None
    if not isinstance(data, dict):
        raise _Bad(None, f"expected a JSON object, got {_describe(data)}")
    return data


def _fail(source: str, line_no: int, reason: str) -> InputError:
    return InputError(f"{source}: line {line_no}: {reason}")


def iter_canonical_jsonl(
    fh: Iterable[str],
    source: str,
    skip_bad: bool = False,
    *,
    vocab: TraceVocabulary | None = None,
) -> Iterator[TraceItem]:
    """Canonical JSONL, one trace per line (schema in the module docstring)."""
    voc = vocab or _DEFAULT_VOCAB
    for n, raw, text in _lines(fh):
        try:
            trace = _trace_from_mapping(_json_object(text), voc)
        except _Bad as exc:
            if not skip_bad:
                raise _fail(source, n, exc.text()) from None
            yield Rejected(n, raw, exc.text())
            continue
        yield ParsedTrace(trace, n)


# ---------------------------------------------------------------------------------------
# Span/observation grouping shared by OTLP and Langfuse


@dataclass(slots=True)
class _Node:
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
def _rag_fields(vocab: TraceVocabulary) -> dict[str, _Conv]:
    return {**_scalar_fields(vocab), "query": _opt_text, "filtered_chunk_ids": _str_list}


def _rag_attrs(
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
            val: Any = None if raw is None else _versions({"v": raw}, f).get("v")
        elif name.startswith("attr.") and len(name) > 5:
            val = None if raw is None else _attr_value(raw, f)
        elif name in convs:
            val = convs[name](raw, f)
        else:
            known = ", ".join(f"rag.{k}" for k in sorted(convs))
            raise _Bad(
                f, f"unknown key in the rag namespace (known: {known}, rag.version.*, rag.attr.*)"
            )
        if val is not None and val != () and val != "":
            out[name] = (val, f)
    return out


def _assemble(trace_id: str, nodes: list[_Node]) -> Trace:
    """Combine the spans/observations of one trace into a Trace (precedence: module docs)."""
    nodes = sorted(nodes, key=lambda n: n.start)
    roots = [n for n in nodes if n.parent is None]
    root = roots[0] if roots else None
    rag: dict[str, tuple[Any, str, int]] = {}
    for node in nodes:
        for name, (val, label) in node.rag.items():
            if name in rag and rag[name][0] != val:
                old, _, old_line = rag[name]
                raise _Bad(
                    label,
                    f"spans/observations of the trace disagree: {old!r} (line {old_line}) and "
                    f"{val!r} (line {node.line})",
                )
            rag.setdefault(name, (val, label, node.line))

    def pick(name: str) -> Any:
        return rag[name][0] if name in rag else None

    retrievals = [n for n in nodes if n.role == "retrieval"]
    retrieval_query = next((n.input_text for n in retrievals if n.input_text), None)
    query = pick("query") or (root.input_text if root else None) or retrieval_query
    if not query:
        raise _Bad(
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

    chunks: list[Chunk] = []
    seen: set[str] = set()
    for node in retrievals:
        for c in node.chunks:
            if c.chunk_id in seen:
                continue
            seen.add(c.chunk_id)
            chunks.append(c if c.rank is not None else dataclasses.replace(c, rank=len(chunks) + 1))
    filtered: tuple[str, ...] = pick("filtered_chunk_ids") or ()
    if filtered:
        fset = set(filtered)
        chunks = [
            dataclasses.replace(c, filtered=True) if c.chunk_id in fset else c for c in chunks
        ]
        chunks.extend(
            Chunk(cid, filtered=True) for cid in dict.fromkeys(filtered) if cid not in seen
        )

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
        decision=pick("decision"),
        reason_code=pick("reason_code"),
        answer_text=answer,
        citations=pick("citations") or (),
        feedback=pick("feedback"),
        versions=versions,
        attributes=attributes,
    )


@dataclass(slots=True)
class _Open:
    nodes: list[_Node]
    first_line: int
    last_raw: str
    root_seen: bool = False


class _Grouper:
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
            raise _fail(self.source, line, reason)
        return Rejected(line, raw, reason)

    def poison(self, tid: str, line: int, raw: str, bad: _Bad) -> Rejected:
        """A span of trace ``tid`` is bad: drop what is open of it and ignore its other spans."""
        self.open.pop(tid, None)
        self.poisoned.add(tid)
        return self.reject(line, raw, f"trace {tid}: {bad.text()}")

    def add(self, tid: str, node: _Node, raw: str) -> Rejected | None:
        if tid in self.poisoned:
            return None
        if tid in self.closed:
            return self.poison(
                tid,
                node.line,
                raw,
                _Bad(
                    node.where,
                    "arrives after its trace was closed (see the grouping assumption: a trace's "
                    "spans or observations must not come after the line that closed it)",
                ),
            )
        entry = self.open.get(tid)
        if entry is None:
            if len(self.open) >= self.max_open:
                raise _fail(
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
        except _Bad as exc:
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


# ---------------------------------------------------------------------------------------
# OTLP/JSON


def _otlp_id(v: object, f: str, nbytes: int) -> str:
    """A trace (16 bytes) or span (8 bytes) id in hex or base64, as lowercase hex."""
    kind = "trace" if nbytes == 16 else "span"
    if _absent(v):
        raise _Bad(f, f"{kind} id is missing")
    if not isinstance(v, str):
        raise _Bad(f, f"expected a {kind} id as text, got {_describe(v)}")
    s = v.strip()
    if len(s) == 2 * nbytes and re.fullmatch(r"[0-9a-fA-F]+", s):
        out = s.lower()
    else:
        if not re.fullmatch(r"[A-Za-z0-9+/_-]+={0,2}", s):
            raise _Bad(f, f"{v!r} is neither a {2 * nbytes}-digit hex nor a base64 {kind} id")
        body = s.rstrip("=").replace("-", "+").replace("_", "/")
        try:
            raw = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
        except (binascii.Error, ValueError):
            raise _Bad(f, f"{v!r} is not valid base64") from None
        if len(raw) != nbytes:
            raise _Bad(
                f,
                f"{v!r} decodes to {len(raw)} bytes; a {kind} id has {nbytes} "
                f"({2 * nbytes} hex digits)",
            )
        out = raw.hex()
    if set(out) == {"0"}:
        raise _Bad(f, f"the {kind} id is all zeros (invalid in OTLP)")
    return out


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _unix_nano(v: object, f: str) -> dt.datetime:
    if v is None:
        raise _Bad(f, "required field is missing")
    ns = _opt_int(v, f, minimum=1)
    if ns is None:
        raise _Bad(f, "must not be empty")
    try:
        return _EPOCH + dt.timedelta(seconds=ns // 10**9, microseconds=(ns % 10**9) // 1000)
    except OverflowError:
        raise _Bad(f, f"{ns} is out of range") from None


def _any_value(v: object, f: str) -> Any:
    """Decode an OTLP AnyValue into plain Python (lists and dicts for array/kvlist)."""
    if not isinstance(v, dict):
        raise _Bad(f, f"expected an OTLP value object, got {_describe(v)}")
    if not v:
        return None
    if "stringValue" in v:
        s = v["stringValue"]
        if not isinstance(s, str):
            raise _Bad(f, f"stringValue must be text, got {_describe(s)}")
        return s
    if "boolValue" in v:
        return _opt_bool(v["boolValue"], f)
    if "intValue" in v:
        return _opt_int(v["intValue"], f)
    if "doubleValue" in v:
        return _opt_float(v["doubleValue"], f)
    if "arrayValue" in v:
        arr = v["arrayValue"] or {}
        values = arr.get("values", []) if isinstance(arr, dict) else None
        if not isinstance(values, list):
            raise _Bad(f, "arrayValue must hold a values list")
        return [_any_value(x, f"{f}.{i}") for i, x in enumerate(values)]
    if "kvlistValue" in v:
        kv = v["kvlistValue"] or {}
        values = kv.get("values", []) if isinstance(kv, dict) else None
        if not isinstance(values, list):
            raise _Bad(f, "kvlistValue must hold a values list")
        return _attr_list(values, f)
    if "bytesValue" in v:
        return v["bytesValue"]
    raise _Bad(f, f"unknown OTLP value type {sorted(v)[0]!r}")


def _attr_list(items: object, owner: str) -> dict[str, Any]:
    """OTLP ``attributes`` of ``owner`` (a span or resource path) as a plain dict."""
    if items is None:
        return {}
    if not isinstance(items, list):
        raise _Bad(
            f"{owner}.attributes",
            f"expected a list of {{key, value}} attributes, got {_describe(items)}",
        )
    out: dict[str, Any] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise _Bad(f"{owner}.attributes.{i}", "expected {key, value} with a text key")
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
    """Structural pass over one export line: its spans, or _Bad.

    ``ids`` collects the trace ids read so far, so that a bad line can poison them.
    """
    rs = data.get("resourceSpans")
    if not isinstance(rs, list):
        why = "missing" if rs is None else f"expected a list, got {_describe(rs)}"
        raise _Bad("resourceSpans", f"{why} (not an OTLP/JSON trace export)")
    spans: list[_RawSpan] = []
    for i, r in enumerate(rs):
        if not isinstance(r, dict):
            raise _Bad(f"resourceSpans.{i}", "expected an object")
        res = r.get("resource") or {}
        res_attrs = _attr_list(
            res.get("attributes") if isinstance(res, dict) else None,
            f"resourceSpans.{i}.resource",
        )
        scopes = r.get("scopeSpans") or []
        if not isinstance(scopes, list):
            raise _Bad(f"resourceSpans.{i}.scopeSpans", "expected a list")
        for j, ss in enumerate(scopes):
            raw_spans = ss.get("spans") if isinstance(ss, dict) else None
            if not isinstance(raw_spans, list):
                raise _Bad(f"resourceSpans.{i}.scopeSpans.{j}.spans", "expected a list")
            for k, sp in enumerate(raw_spans):
                where = f"resourceSpans.{i}.scopeSpans.{j}.spans.{k}"
                if not isinstance(sp, dict):
                    raise _Bad(where, f"expected a span object, got {_describe(sp)}")
                tid = _otlp_id(sp.get("traceId"), f"{where}.traceId", 16)
                ids.append(tid)
                parent_raw = sp.get("parentSpanId")
                spans.append(
                    _RawSpan(
                        line=line,
                        where=where,
                        trace_id=tid,
                        span_id=_otlp_id(sp.get("spanId"), f"{where}.spanId", 8),
                        parent=None
                        if _absent(parent_raw)
                        else _otlp_id(parent_raw, f"{where}.parentSpanId", 8),
                        start=_unix_nano(sp.get("startTimeUnixNano"), f"{where}.startTimeUnixNano"),
                        attrs={
                            **res_attrs,
                            **_attr_list(sp.get("attributes"), where),
                        },
                    )
                )
    return spans


_OI_DOC = re.compile(r"^retrieval\.documents\.(\d+)\.document\.(id|score|content|metadata)$")
_GENAI_LLM_OPS = {"chat", "text_completion", "generate_content"}


def _io_text(value: object, keys: tuple[str, ...], role: str | None = None) -> str | None:
    """Text out of an input/output value: plain text, an object's key, or a message list."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in "{[" and stripped:
            try:
                return _io_text(json.loads(stripped), keys, role)
            except (ValueError, RecursionError):  # not JSON after all: the text itself
                return value if value.strip() else None
        return value if stripped else None
    if isinstance(value, dict):
        for k in keys:
            if isinstance(value.get(k), str) and value[k].strip():
                return str(value[k])
        if isinstance(value.get("messages"), list):
            return _io_text(value["messages"], keys, role)
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


_Q_KEYS = ("query", "question", "input", "text")
_A_KEYS = ("answer", "output", "text", "content", "response")


def _otlp_node(sp: _RawSpan, vocab: TraceVocabulary) -> _Node:
    a = sp.attrs

    def label(key: str) -> str:
        return f"{sp.where} attribute {key}"

    kind = str(a.get("openinference.span.kind") or "").upper()
    op = str(a.get("gen_ai.operation.name") or "").lower()
    role = "other"
    if kind == "RETRIEVER" or op == "retrieval" or "gen_ai.retrieval.documents" in a:
        role = "retrieval"
    elif kind == "LLM" or op in _GENAI_LLM_OPS:
        role = "llm"
    elif kind == "EMBEDDING" or op == "embeddings":
        role = "embedding"
    elif kind == "RERANKER":
        role = "reranker"

    input_text = _opt_text(a.get("input.value"), label("input.value"))
    output_text = _opt_text(a.get("output.value"), label("output.value"))
    if input_text and "json" in str(a.get("input.mime_type", "")):
        input_text = _io_text(input_text, _Q_KEYS, "user")
    if output_text and "json" in str(a.get("output.mime_type", "")):
        output_text = _io_text(output_text, _A_KEYS, "assistant")
    versions: dict[str, str] = {}
    chunks: list[Chunk] = []

    if role == "retrieval":
        gq = _opt_text(a.get("gen_ai.retrieval.query.text"), label("gen_ai.retrieval.query.text"))
        input_text = gq or input_text
        docs: dict[int, dict[str, tuple[Any, str]]] = {}
        for key, val in a.items():
            m = _OI_DOC.match(key)
            if m:
                docs.setdefault(int(m.group(1)), {})[m.group(2)] = (val, label(key))
        for idx in sorted(docs):
            part = docs[idx]
            base = label(f"retrieval.documents.{idx}.document")
            vals: dict[str, Any] = {}
            labels = {"chunk_id": f"{base}.id", "score": f"{base}.score", "text": f"{base}.content"}
            for src_key, ckey in (("id", "chunk_id"), ("score", "score"), ("content", "text")):
                if src_key in part:
                    vals[ckey] = part[src_key][0]
            if "metadata" in part:
                meta_val, meta_f = part["metadata"]
                meta = _json_text(meta_val, meta_f)
                if not isinstance(meta, dict):
                    raise _Bad(meta_f, f"expected an object, got {_describe(meta)}")
                for ckey, names in _CHUNK_ALIASES.items():
                    if ckey in ("chunk_id", "text", "score"):
                        continue
                    hit = next((n for n in names if meta.get(n) is not None), None)
                    if hit is not None:
                        vals[ckey] = meta[hit]
                        labels[ckey] = f"{meta_f}.{hit}"
            chunks.append(_chunk(vals, base, labels))
        if "gen_ai.retrieval.documents" in a:
            f = label("gen_ai.retrieval.documents")
            gdocs = _json_text(a["gen_ai.retrieval.documents"], f)
            if not isinstance(gdocs, list):
                raise _Bad(f, f"expected a list of documents, got {_describe(gdocs)}")
            for i, d in enumerate(gdocs):
                d = _json_text(d, f"{f}.{i}")
                if not isinstance(d, dict):
                    raise _Bad(f"{f}.{i}", f"expected a document object, got {_describe(d)}")
                values, labels = _aliased(d, f"{f}.{i}")
                chunks.append(_chunk(values, f"{f}.{i}", labels))
        _unique_chunks(chunks, label("retrieval documents"))
        if isinstance(a.get("gen_ai.data_source.id"), str):
            versions["index"] = a["gen_ai.data_source.id"]
        if isinstance(a.get("gen_ai.request.model"), str):
            versions["embedding"] = a["gen_ai.request.model"]
    elif role == "llm":
        model = a.get("llm.model_name") or a.get("gen_ai.response.model")
        model = model or a.get("gen_ai.request.model")
        if isinstance(model, str) and model:
            versions["model"] = model
        prompt = a.get("llm.prompt_template.version")
        if isinstance(prompt, str | int) and not isinstance(prompt, bool):
            versions["prompt"] = str(prompt)
        if "gen_ai.output.messages" in a:
            msgs = _json_text(a["gen_ai.output.messages"], label("gen_ai.output.messages"))
            output_text = output_text or _io_text(msgs, _A_KEYS, "assistant")
    elif role == "embedding":
        model = a.get("embedding.model_name") or a.get("gen_ai.request.model")
        if isinstance(model, str) and model:
            versions["embedding"] = model
    elif role == "reranker" and isinstance(a.get("reranker.model_name"), str):
        versions["reranker"] = a["reranker.model_name"]

    return _Node(
        line=sp.line,
        where=sp.where,
        parent=sp.parent,
        start=sp.start,
        role=role,
        input_text=input_text,
        output_text=output_text,
        chunks=tuple(chunks),
        versions=versions,
        rag=_rag_attrs(a, label, vocab),
    )


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
    voc = vocab or _DEFAULT_VOCAB
    g = _Grouper(source, skip_bad, max_open_traces, accept_rootless)
    for n, raw, text in _lines(fh):
        ids: list[str] = []
        try:
            spans = _otlp_spans(_json_object(text), n, ids)
        except _Bad as exc:
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
            except _Bad as exc:
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


def _langfuse_node(d: Mapping[str, Any], line: int, vocab: TraceVocabulary) -> tuple[str, _Node]:
    oid = _ident(d.get("id"), "id")
    tid = _ident(d.get("traceId"), "traceId")
    otype = _req_text(d.get("type"), "type").strip().upper()
    if otype not in _LF_TYPES:
        raise _Bad(
            "type",
            f"unknown observation type {d.get('type')!r} "
            f"(expected one of {', '.join(sorted(_LF_TYPES))})",
        )
    name = _opt_text(d.get("name"), "name") or ""
    start = _time(d.get("startTime"), "startTime")
    parent_raw = d.get("parentObservationId")
    parent = None if _absent(parent_raw) else _ident(parent_raw, "parentObservationId")
    meta = _json_text(d.get("metadata"), "metadata") if d.get("metadata") is not None else {}
    if not isinstance(meta, dict):
        raise _Bad("metadata", f"expected an object, got {_describe(meta)}")

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
        docs = _json_text(output, "output") if output is not None else []
        where = "output"
        if isinstance(docs, dict):
            docs, where = docs.get("documents"), "output.documents"
        if not isinstance(docs, list):
            raise _Bad(where, f"expected a list of retrieved documents, got {_describe(docs)}")
        for i, doc in enumerate(docs):
            if not isinstance(doc, dict):
                raise _Bad(f"{where}.{i}", f"expected a document object, got {_describe(doc)}")
            values, labels = _aliased(doc, f"{where}.{i}")
            chunks.append(_chunk(values, f"{where}.{i}", labels))
        _unique_chunks(chunks, where)
    model = d.get("model")
    if isinstance(model, str) and model.strip() and role in ("llm", "embedding"):
        versions["model" if role == "llm" else "embedding"] = model.strip()
    if isinstance(d.get("promptName"), str):
        pv = d.get("promptVersion")
        versions["prompt"] = f"{d['promptName']}@{pv}" if pv is not None else d["promptName"]

    node = _Node(
        line=line,
        where=f"observation {oid}",
        parent=parent,
        start=start,
        role=role,
        input_text=_io_text(d.get("input"), _Q_KEYS, "user"),
        output_text=None if role == "retrieval" else _io_text(output, _A_KEYS, "assistant"),
        chunks=tuple(chunks),
        versions=versions,
        rag=_rag_attrs(_flatten(meta), lambda k: f"metadata.{k}", vocab),
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
    voc = vocab or _DEFAULT_VOCAB
    g = _Grouper(source, skip_bad, max_open_traces, accept_rootless)
    ends: list[tuple[dt.datetime, str]] = []  # (root end, trace id), a min-heap
    for n, raw, text in _lines(fh):
        tid: str | None = None
        try:
            d = _json_object(text)
            if isinstance(d.get("traceId"), str) and d["traceId"].strip():
                tid = d["traceId"].strip()
            tid, node = _langfuse_node(d, n, voc)
        except _Bad as exc:
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
                end = _time(d.get("endTime"), "endTime") if d.get("endTime") else None
            except _Bad as exc:
                yield g.poison(tid, n, raw, exc)
                continue
            if end is not None:
                heapq.heappush(ends, (end, tid))
    yield from g.finish()


# ---------------------------------------------------------------------------------------
# Flat CSV

_CSV_LIST = {"chunks", "citations"}


class _LineTap:
    """Feeds csv.reader and keeps the raw lines of the current record."""

    def __init__(self, fh: Iterable[str]) -> None:
        self._it = iter(fh)
        self.buf: list[str] = []
        self.count = 0

    def __iter__(self) -> _LineTap:
        return self

    def __next__(self) -> str:
        line = next(self._it)
        self.buf.append(line)
        self.count += 1
        return line

    def take(self) -> str:
        raw = "".join(self.buf).rstrip("\r\n")
        self.buf.clear()
        return raw


def _csv_record(header: list[str], cells: list[str]) -> dict[str, Any]:
    if len(cells) > len(header):
        raise _Bad(None, f"the row has {len(cells)} cells but the header has {len(header)}")
    rec: dict[str, Any] = {}
    versions: dict[str, str] = {}
    attributes: dict[str, str] = {}
    for col, cell in zip(header, cells, strict=False):
        if not cell.strip():
            continue
        if col.startswith("version."):
            versions[col[8:]] = cell.strip()
        elif col.startswith("attr."):
            attributes[col[5:]] = cell.strip()
        elif col == "identity_scopes" and not cell.lstrip().startswith("["):
            rec[col] = [s.strip() for s in cell.split(";") if s.strip()]
        elif col in _CSV_LIST:
            rec[col] = _json_text(cell, col)
        else:
            rec[col] = cell
    if versions:
        rec["versions"] = versions
    if attributes:
        rec["attributes"] = attributes
    return rec


def _csv_header(cells: list[str]) -> list[str]:
    header = [c.strip() for c in cells]
    if header:
        header[0] = header[0].removeprefix("\ufeff")
    allowed = set(_CANONICAL_FIELDS) - {"versions", "attributes"}
    for i, col in enumerate(header):
        if col in header[:i]:
            raise _Bad(f"column {col!r}", "appears twice in the header")
        ok = col in allowed or (
            col.startswith(("version.", "attr.")) and len(col.split(".", 1)[1]) > 0
        )
        if not ok:
            raise _Bad(
                f"column {col!r}",
                "unknown column (use the canonical field names, version.<name> or attr.<name>)",
            )
    missing = [c for c in ("trace_id", "time", "query") if c not in header]
    if missing:
        raise _Bad(f"column {missing[0]!r}", "required column is missing from the header")
    return header


def iter_csv(
    fh: Iterable[str],
    source: str,
    skip_bad: bool = False,
    *,
    vocab: TraceVocabulary | None = None,
) -> Iterator[TraceItem]:
    """A flat CSV, one trace per row (columns in the module docstring).

    A bad header always raises: no row of the file could be read correctly.
    """
    voc = vocab or _DEFAULT_VOCAB
    tap = _LineTap(fh)
    reader = csv.reader(tap, strict=True)
    header: list[str] | None = None
    while True:
        start = tap.count + 1
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raw = tap.take()
            reason = f"not valid CSV ({exc})"
            if header is None or not skip_bad:
                raise _fail(source, start, reason) from None
            yield Rejected(start, raw, reason)
            if tap.count < start:
                break
            continue
        raw = tap.take()
        if not any(c.strip() for c in cells):
            continue
        if header is None:
            try:
                header = _csv_header(cells)
            except _Bad as exc:
                raise _fail(source, start, exc.text()) from None
            continue
        try:
            trace = _trace_from_mapping(_csv_record(header, cells), voc)
        except _Bad as exc:
            if not skip_bad:
                raise _fail(source, start, exc.text()) from None
            yield Rejected(start, raw, exc.text())
            continue
        yield ParsedTrace(trace, start)
    if header is None:
        raise _fail(source, 1, "the file is empty (expected a header row)")


# ---------------------------------------------------------------------------------------
# Format registry

Parser = Callable[..., Iterator[TraceItem]]

FORMATS: dict[str, Parser] = {
    "canonical": iter_canonical_jsonl,
    "otlp": iter_otlp_jsonl,
    "langfuse": iter_langfuse_jsonl,
    "csv": iter_csv,
}


def iter_traces(
    fh: Iterable[str],
    source: str,
    fmt: str,
    skip_bad: bool = False,
    *,
    vocab: TraceVocabulary | None = None,
) -> Iterator[TraceItem]:
    """Dispatch to the parser of ``fmt`` (a key of :data:`FORMATS`)."""
    parser = FORMATS.get(fmt)
    if parser is None:
        raise InputError(f"{source}: unknown trace format {fmt!r} (one of {', '.join(FORMATS)})")
    return parser(fh, source, skip_bad, vocab=vocab)


def detect_format(first_line: str, filename: str = "") -> str:
    """Guess the format from the file name and its first non-blank line."""
    text = first_line.strip().removeprefix("\ufeff")
    if filename.lower().endswith(".csv") or (text and not text.startswith("{")):
        return "csv"
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise InputError(f"{filename or 'file'}: line 1: neither JSON lines nor CSV") from None
    if isinstance(data, dict):
        if "resourceSpans" in data:
            return "otlp"
        if "traceId" in data and ("type" in data or "startTime" in data):
            return "langfuse"
        if "trace_id" in data:
            return "canonical"
    raise InputError(
        f"{filename or 'file'}: line 1: not a known trace format (canonical JSONL has "
        "trace_id, OTLP has resourceSpans, Langfuse observations have traceId and type)"
    )
