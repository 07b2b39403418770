"""OTLP/JSON spans of an OpenInference RAG trace, as a source delivers them one by one."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from review.traces.live.staging import StagedSpan

T0 = dt.datetime(2026, 11, 20, 9, 0, tzinfo=dt.UTC)


def _value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, list):
        return {"arrayValue": {"values": [_value(x) for x in v]}}
    return {"stringValue": str(v)}


def span(
    trace_id: str,
    span_id: str,
    parent: str | None,
    attrs: dict[str, Any],
    start: dt.datetime = T0,
    name: str = "span",
) -> StagedSpan:
    ns = int((start - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)).total_seconds() * 10**9)
    body: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": name,
        "startTimeUnixNano": str(ns),
        "endTimeUnixNano": str(ns + 10**6),
        "attributes": [{"key": k, "value": _value(v)} for k, v in attrs.items()],
    }
    if parent is not None:
        body["parentSpanId"] = parent
    entry = {
        "resource": {"attributes": [{"key": "service.name", "value": _value("rag-demo")}]},
        "scopeSpans": [{"scope": {"name": "test"}, "spans": [body]}],
    }
    return StagedSpan(trace_id, span_id, parent, start, entry)


def rag_trace(n: int, *, decision: str = "answer", start: dt.datetime = T0) -> list[StagedSpan]:
    """Root CHAIN, RETRIEVER and LLM spans of trace number ``n`` (children first, as an SDK
    exports them)."""
    tid = f"{n:032x}"
    root, ret, llm = f"{n:012x}0001", f"{n:012x}0002", f"{n:012x}0003"
    docs: dict[str, Any] = {}
    for i, (cid, score) in enumerate([("POL-REFUND-MONTHLY@2#2.1", 0.83), ("FAQ-1@1#1", 0.41)]):
        docs[f"retrieval.documents.{i}.document.id"] = cid
        docs[f"retrieval.documents.{i}.document.score"] = score
        docs[f"retrieval.documents.{i}.document.content"] = f"text of {cid}"
        docs[f"retrieval.documents.{i}.document.metadata"] = json.dumps(
            {"doc_id": cid.split("@")[0], "doc_version": int(cid.split("@")[1].split("#")[0])}
        )
    return [
        span(
            tid,
            ret,
            root,
            {"openinference.span.kind": "RETRIEVER", "input.value": "refund window", **docs},
            start + dt.timedelta(milliseconds=5),
        ),
        span(
            tid,
            llm,
            root,
            {
                "openinference.span.kind": "LLM",
                "llm.model_name": "gpt-test",
                "output.value": f"answer {n}",
            },
            start + dt.timedelta(milliseconds=20),
        ),
        span(
            tid,
            root,
            None,
            {
                "openinference.span.kind": "CHAIN",
                "input.value": f"Can I get a refund, question {n}?",
                "output.value": f"answer {n}",
                "rag.decision": decision,
                "rag.top_score": 0.83,
                "rag.topics": "refunds",
                "rag.ranking_mode": "vector",
                "rag.hits_after_filter": 2,
            },
            start,
        ),
    ]
