"""Error messages on the live paths never repeat a document's words (the house rule on
clearance: restricted content is shown only with clearance, on every surface).

A refused span or trace is never imported, so it never gets a restricted flag: whatever its
refusal says is shown to everyone who sees the trace sources (the Traces page's Sources panel,
the sync's and the receiver's reports, the logs). So the messages about an untrusted value
quote at most ``records.QUOTED_WORDS`` of its words, fewer than the run of words
(``clearance.RUN``) by which a text retells a document. Checked on the parsers' messages with
Hypothesis, and end to end: a span whose text sits where a number belongs, sent by the REAL
OpenTelemetry SDK exporter to the receiver, is refused with a reason that shares no run of
five words with it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from sqlalchemy import Engine, select

from review.core import clearance, records
from review.core.identity import SYSTEM
from review.traces.formats import fields, otlp
from review.traces.live import phoenix, sources, staging
from review.traces.live.receiver import Receiver, ReceiverConfig
from storage.models import SourceSpan, TraceSource

SECRET = (
    "The Lisbon severance multiplier is four point two months per year of service, "
    "approved by the board in March."
)
DATA = Path(__file__).parent / "data"

#: texts of many words, each longer than the messages' short words ("a", "is", "id")
words = st.lists(
    st.text("abcdefghijklmnopqrstuvwxyzéü中", min_size=4, max_size=9), min_size=5, max_size=30
)


def _leaks(message: str, value: str) -> set[str]:
    return clearance.word_runs(message) & clearance.word_runs(value)


def test_quoting_keeps_short_values_whole_and_cuts_long_ones_below_a_run() -> None:
    assert records.QUOTED_WORDS <= clearance.RUN - 2  # a word either side makes no run
    assert records.describe("high") == "text 'high'"
    assert records.describe(SECRET) == "text 'The Lisbon severance...'"
    assert records.quoted("x" * 80) == repr("x" * 37 + "...")


#: a whole Phoenix span (its fields replaced one at a time by the value under test)
PHOENIX_SPAN: dict[str, Any] = {
    "id": "U3BhbjoxNTAw",  # Span:1500
    "name": "rag-request",
    "context": {"trace_id": "a" * 32, "span_id": "b" * 16},
    "span_kind": "CHAIN",
    "parent_id": None,
    "start_time": "2026-12-05T03:20:35.960829+00:00",
    "end_time": "2026-12-05T03:20:35.960996+00:00",
    "status_code": "UNSET",
    "attributes": {},
}


@settings(max_examples=300, deadline=None)
@given(words, st.sampled_from([" ", "-", "_", "/", "+", ".", ", "]))
def test_no_parser_message_repeats_five_words_of_the_value(parts: list[str], sep: str) -> None:
    value = sep.join(parts)
    messages: list[str] = [records.describe(value)]
    for call in (
        lambda: otlp.otlp_id(value, "traceId", 16),
        lambda: otlp.otlp_id(value, "spanId", 8),
        lambda: fields.read_chunk({"chunk_id": "c1", "effective_date": value}, "chunks.0"),
        lambda: phoenix.otlp_span({**PHOENIX_SPAN, "start_time": value}),
        lambda: phoenix.otlp_span(
            {**PHOENIX_SPAN, "context": {"trace_id": value, "span_id": "b" * 16}}
        ),
        lambda: phoenix.phoenix_rowid(value),
    ):
        try:
            call()
        except Exception as exc:
            messages.append(str(exc))
    for m in messages:
        assert not _leaks(m, value), m


def test_a_phoenix_span_with_text_in_its_fields_is_refused_without_repeating_it() -> None:
    span = json.loads((DATA / "phoenix_spans_page1.json").read_text())["data"][0]
    for field, value in [
        ("start_time", SECRET[:60]),
        ("parent_id", SECRET[:60]),
        ("id", SECRET.replace(" ", "-")),
    ]:
        with pytest.raises(phoenix.PhoenixError) as got:
            phoenix.otlp_span({**span, field: value})
        assert not _leaks(str(got.value), SECRET), got.value
    ctx = {**span["context"], "trace_id": SECRET}
    with pytest.raises(phoenix.PhoenixError, match="trace_id: expected 32 hex digits") as got:
        phoenix.otlp_span({**span, "context": ctx})
    assert not _leaks(str(got.value), SECRET)


# --- end to end: the real exporter, the receiver, the refusal's reason -------------------


@pytest.fixture
def receiver(engine: Engine) -> Iterator[tuple[int, int]]:
    src = sources.add_source(engine, SYSTEM, kind="otlp", name="echo-test")
    r = Receiver(engine, SYSTEM, int(src.id), ReceiverConfig(port=0, assemble_every=None))
    port = r.start()
    yield int(src.id), port
    r.stop()


def _send(port: int, attributes: dict[str, Any]) -> None:
    exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces", timeout=180)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("openinference.instrumentation.test")
    with tracer.start_as_current_span("support-answer") as span:
        span.set_attributes({"openinference.span.kind": "CHAIN", **attributes})
        time.sleep(0.001)
    provider.shutdown()


@pytest.mark.parametrize(
    "attributes",
    [
        {"input.value": "How long is the refund window?", "rag.top_score": SECRET},
        {
            "input.value": "How long is the refund window?",
            "gen_ai.retrieval.documents": json.dumps(SECRET),
        },
    ],
    ids=["text-as-score", "text-as-documents"],
)
def test_a_trace_the_receiver_refuses_is_refused_without_repeating_its_words(
    engine: Engine,
    receiver: tuple[int, int],
    attributes: dict[str, Any],
) -> None:
    source_id, port = receiver
    _send(port, attributes)
    result = staging.assemble(engine, SYSTEM, source_id, grace_seconds=0)
    assert (result.imported, result.rejected) == (0, 1), result
    [reason] = result.reasons.values()
    with engine.connect() as c:
        stored = [r for r in c.scalars(select(SourceSpan.reason)) if r]
        last_error = c.scalar(select(TraceSource.last_error).where(TraceSource.id == source_id))
    assert stored, "the refused span keeps its reason"
    for text in [reason, *stored, last_error or ""]:
        assert not _leaks(text, SECRET), text
    assert "The Lisbon severance..." in reason  # still says what was wrong


def test_a_database_error_while_assembling_does_not_echo_the_spans_content(
    engine: Engine, receiver: tuple[int, int], caplog: pytest.LogCaptureFixture
) -> None:
    """The receiver records an assembly failure on its source (shown on the Sources panel)
    and logs it; a database error's text carries its statement's parameters, here the trace
    being imported: the engine hides them."""
    source_id, port = receiver
    _send(port, {"input.value": SECRET, "output.value": "I can't answer that."})
    with engine.begin() as c:  # the database refuses every trace, as a full disk would
        c.exec_driver_sql(
            "CREATE TRIGGER refuse_traces BEFORE INSERT ON traces "
            "BEGIN SELECT RAISE(ABORT, 'disk full'); END"
        )
    # the pass fails (None); the next one retries
    config = ReceiverConfig(port=0, assemble_every=None, grace_seconds=0)
    assert Receiver(engine, SYSTEM, source_id, config).assemble_once() is None
    with engine.connect() as c:
        last_error = c.scalar(select(TraceSource.last_error).where(TraceSource.id == source_id))
    assert last_error and "assembling failed" in last_error and "disk full" in last_error
    assert not _leaks(last_error, SECRET), last_error
    assert not _leaks(caplog.text, SECRET)
    with engine.begin() as c:
        c.exec_driver_sql("DROP TRIGGER refuse_traces")
    done = staging.assemble(engine, SYSTEM, source_id, grace_seconds=0)
    assert done.imported == 1  # nothing was lost
