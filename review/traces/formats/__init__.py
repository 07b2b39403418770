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
     "answerable": true, "ambiguous": false, "ungrounded": false, "topics": ["refunds"],
     "decision": "answer", "reason_code": null,
     "answer_text": "Yes, if you ask within 14 days of the charge date.",
     "citations": [{"claim": "Monthly charges can be refunded within 14 days of the charge.",
                    "chunk_ids": ["POL-REFUND-MONTHLY@2#2.1"]}],
     "feedback": "positive", "reformulated": false, "citation_opened": true,
     "versions": {"model": "gpt-4.1-mini-2025-04-14", "embedding": "text-embedding-3-large",
                  "reranker": "none", "prompt": "support-answer@12", "index": "kb-2025-06-01",
                  "policy": "no-answer-policy@7"},
     "attributes": {"language": "en", "document_type": "policy", "customer_tier": "team"}}

Field rules: ``time`` is ISO 8601; a time without an offset is read as UTC; an offset beyond
+-14:00, a time before 2000-01-01 (``EARLIEST_TRACE_TIME``) and a time more than one day after
the import (``MAX_FUTURE``) are refused, in every format. ``decision`` is a
decision of the taxonomy (answer, abstain, clarify, partial, escalate) and ``reason_code`` one of
its reason codes. ``chunks[].chunk_id`` is required and unique within the trace; ``rank`` is
1-based and defaults to the position in the list; ``filtered: true`` marks a chunk that
authorization removed before the context was built. ``doc_version`` is the integer version of the
corpus document. ``topics`` holds the topic keys the topic classifier gave the question (a list,
or text with keys separated by commas); ``[]`` means classified with no topic, and a missing or
null ``topics`` means not classified: the gate's restricted-topic check then fails closed.
``feedback`` is free text; the conventional values are ``positive``,
``negative``, ``expected_answer`` ("I expected an answer") and ``answer_wrong`` ("this answer is
wrong"). ``reformulated`` (the user asked again in other words right after this response) and
``citation_opened`` (the user opened a source this response cited) are what the user did next,
the reformulation and citation-interaction signals: true, false, or null when the client
does not log it (``citation_opened`` is null for a response that cited nothing).
``versions`` conventionally holds model, embedding, reranker, prompt, index and policy
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
  ``rag.ambiguous``, ``rag.ungrounded``, ``rag.topics`` (array or comma-separated text),
  ``rag.decision``, ``rag.reason_code``,
  ``rag.answer_text``, ``rag.citations`` (JSON ``[{"claim", "chunk_ids"}]``),
  ``rag.filtered_chunk_ids`` (array or JSON text), ``rag.feedback``, ``rag.reformulated``,
  ``rag.citation_opened``, ``rag.version.<name>``
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
  a span's ``metadata`` (JSON text) key ``topics`` gives the question's topics when
  ``rag.topics`` is not set;
* OpenTelemetry GenAI: a span with ``gen_ai.operation.name`` ``retrieval`` (or any span with
  ``gen_ai.retrieval.documents``) gives ``gen_ai.retrieval.query.text`` (rewritten query),
  ``gen_ai.retrieval.documents`` (JSON text or array of objects ``{id, score, content, doc_id,
  doc_version, effective_date, filtered, rank}``), ``gen_ai.data_source.id`` (index version) and
  ``gen_ai.request.model`` (embedding model); a ``chat``/``text_completion``/``generate_content``
  span gives ``gen_ai.response.model`` or ``gen_ai.request.model`` (model) and the answer from
  the assistant text parts of ``gen_ai.output.messages``. The GenAI conventions name no topic
  attribute: send the topic classifier's keys as ``rag.topics``.

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
unique key)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from review.core.errors import InputError
from review.core.records import JsonProblem, parse_json
from review.traces.formats.canonical import iter_canonical_jsonl
from review.traces.formats.flatcsv import iter_csv
from review.traces.formats.langfuse import iter_langfuse_jsonl
from review.traces.formats.otlp import iter_otlp_jsonl
from review.traces.model import TraceItem, TraceVocabulary

__all__ = ["FORMATS", "detect_format", "iter_traces"]


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
        data = parse_json(text)
    except JsonProblem:
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
