"""Real OpenInference RAG spans made with the OpenTelemetry SDK, for the live-trace tests and
benchmarks: a CHAIN root (question, answer, the rag.* decision), a RETRIEVER child (the
rewritten query and scored documents) and an LLM child (model and prompt versions), exported
through whatever span exporter the caller gives (OTLP/HTTP protobuf or JSON, to the receiver).

:func:`rag_request` records what each trace should import as, to compare with what was stored.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from openinference.semconv.trace import (
    DocumentAttributes,
    OpenInferenceSpanKindValues,
    SpanAttributes,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

KIND = SpanAttributes.OPENINFERENCE_SPAN_KIND
DOCS = SpanAttributes.RETRIEVAL_DOCUMENTS


@dataclass(frozen=True, slots=True)
class ExpectedChunk:
    chunk_id: str
    doc_id: str
    doc_version: int
    score: float
    text: str


@dataclass(frozen=True, slots=True)
class ExpectedTrace:
    trace_id: str  # 32 lowercase hex
    query: str
    rewritten_query: str
    answer: str
    decision: str
    reason_code: str | None
    top_score: float
    chunks: tuple[ExpectedChunk, ...]
    model: str
    prompt: str
    index: str
    spans: int = 3


class Collect(SpanExporter):
    """Keeps the finished spans, to send them later in one export call of any size."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def _doc(n: int, d: ExpectedChunk) -> dict[str, str | float]:
    base = f"{DOCS}.{n}"
    return {
        f"{base}.{DocumentAttributes.DOCUMENT_ID}": d.chunk_id,
        f"{base}.{DocumentAttributes.DOCUMENT_SCORE}": d.score,
        f"{base}.{DocumentAttributes.DOCUMENT_CONTENT}": d.text,
        f"{base}.{DocumentAttributes.DOCUMENT_METADATA}": json.dumps(
            {"doc_id": d.doc_id, "doc_version": d.doc_version}
        ),
    }


def make_rag_spans(
    n_traces: int, *, seed: int = 0
) -> tuple[list[ReadableSpan], list[ExpectedTrace]]:
    """``n_traces`` RAG traces (3 spans each, children end before their root) made by the
    real SDK, and what each should import as."""
    collect = Collect()
    provider = TracerProvider(
        resource=Resource.create(
            {"service.name": "brightwave-assistant", "rag.version.index": "kb-2026-11-30"}
        )
    )
    provider.add_span_processor(SimpleSpanProcessor(collect))
    tracer = provider.get_tracer("openinference.instrumentation.test", "1.0")
    expected: list[ExpectedTrace] = []
    for i in range(seed, seed + n_traces):
        abstain = i % 3 == 2
        chunks = tuple(
            ExpectedChunk(
                chunk_id=f"POL-REFUND-MONTHLY@2#2.{k + 1}-{i}",
                doc_id="POL-REFUND-MONTHLY",
                doc_version=2,
                score=round(0.9 - 0.1 * k - (0.4 if abstain else 0.0), 3),
                text=f"2.{k + 1} Refund rule {k} for request {i} (é, ü, 中文).",
            )
            for k in range(2)
        )
        query = f"Can we get a refund for the charge on invoice {i}?"
        answer = (
            "The sources I can use do not establish this."
            if abstain
            else f"Yes, within 14 days of the charge date ({i})."
        )
        root_attrs: dict[str, str | float | bool] = {
            KIND: OpenInferenceSpanKindValues.CHAIN.value,
            SpanAttributes.INPUT_VALUE: query,
            SpanAttributes.OUTPUT_VALUE: answer,
            "rag.decision": "abstain" if abstain else "answer",
            "rag.top_score": chunks[0].score,
            "rag.answerable": not abstain,
        }
        if abstain:
            root_attrs["rag.reason_code"] = "no_answer_bearing_evidence"
        with tracer.start_as_current_span("support-answer", attributes=root_attrs) as root:
            with tracer.start_as_current_span(
                "VectorStoreRetriever",
                attributes={
                    KIND: OpenInferenceSpanKindValues.RETRIEVER.value,
                    SpanAttributes.INPUT_VALUE: f"refund window invoice {i}",
                    **{k: v for n, d in enumerate(chunks) for k, v in _doc(n, d).items()},
                },
            ):
                pass
            with tracer.start_as_current_span(
                "ChatOpenAI",
                attributes={
                    KIND: OpenInferenceSpanKindValues.LLM.value,
                    SpanAttributes.LLM_MODEL_NAME: "gpt-4.1-mini-2025-04-14",
                    SpanAttributes.LLM_PROMPT_TEMPLATE_VERSION: "support-answer@12",
                    SpanAttributes.OUTPUT_VALUE: answer,
                },
            ):
                pass
            trace_id = format(root.get_span_context().trace_id, "032x")
        expected.append(
            ExpectedTrace(
                trace_id=trace_id,
                query=query,
                rewritten_query=f"refund window invoice {i}",
                answer=answer,
                decision="abstain" if abstain else "answer",
                reason_code="no_answer_bearing_evidence" if abstain else None,
                top_score=chunks[0].score,
                chunks=chunks,
                model="gpt-4.1-mini-2025-04-14",
                prompt="support-answer@12",
                index="kb-2026-11-30",
            )
        )
    provider.shutdown()
    return collect.spans, expected
