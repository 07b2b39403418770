"""The receiver's request counts (review.traces.live.tally): the in-memory tally and its sum
(Hypothesis: any sequence of answers sums to what was counted, whatever the flushes and the
failed flushes in between), the rows added on SQLite and PostgreSQL, and a real receiver fed by
the real OpenTelemetry SDK exporter plus refused requests, its figures read back as the Traces
page reads them."""

from __future__ import annotations

import datetime as dt
import http.client
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult
from sqlalchemy import Engine

from review.core.identity import SYSTEM
from review.traces.live import display, sources, tally
from review.traces.live.receiver import Receiver, ReceiverConfig
from tests.helpers.ragspans import make_rag_spans

WAIT = 180.0
T0 = dt.datetime(2026, 12, 5, 3, 0, tzinfo=dt.UTC)

STATUSES = st.sampled_from([200, 400, 401, 408, 413, 415, 429, 500, 503])
ANSWERS = st.lists(st.tuples(STATUSES, st.integers(0, 10_000), st.integers(0, 86_400)), max_size=60)


def _naive(answers: list[tuple[int, int, int]]) -> tally.RequestCounts:
    accepted = sum(1 for s, _, _ in answers if s == 200)
    spans = sum(n for s, n, _ in answers if s == 200)
    refused: dict[int, int] = {}
    for s, _, _ in answers:
        if s != 200:
            refused[s] = refused.get(s, 0) + 1
    last = max((T0 + dt.timedelta(seconds=t) for _, _, t in answers), default=None)
    return tally.RequestCounts(accepted, spans, dict(sorted(refused.items())), last)


def _rows(counts: dict[int, tally.Count]) -> list[tuple[int, int, int, dt.datetime | None]]:
    return [(k, c.requests, c.spans, c.last_at) for k, c in counts.items()]


@settings(max_examples=200, deadline=None)
@given(ANSWERS, st.lists(st.integers(0, 60), max_size=5), st.lists(st.booleans(), max_size=5))
def test_the_tally_sums_what_was_counted_across_flushes_and_failed_flushes(
    answers: list[tuple[int, int, int]], cuts: list[int], failed: list[bool]
) -> None:
    t = tally.Tally()
    stored: dict[int, tally.Count] = {}
    flushes = iter(failed)
    for i, (status, spans, sec) in enumerate(answers):
        t.count(status, spans if status == 200 else 0, T0 + dt.timedelta(seconds=sec))
        if i in cuts:
            taken = t.take()
            if next(flushes, False):
                t.give_back(taken)  # the database refused: kept for the next flush
            else:
                for k, c in taken.items():
                    stored.setdefault(k, tally.Count()).add(c)
    for k, c in t.take().items():
        stored.setdefault(k, tally.Count()).add(c)
    expected = _naive([(s, n if s == 200 else 0, x) for s, n, x in answers])
    assert tally.summarize(_rows(stored)) == expected
    assert t.take() == {}


@pytest.mark.parametrize(
    ("status", "spans"), [(99, 0), (600, 0), (-1, 0), (200, -1), (0, 0), (10**6, 0)]
)
def test_the_tally_refuses_what_is_not_an_answer(status: int, spans: int) -> None:
    t = tally.Tally()
    with pytest.raises(ValueError):
        t.count(status, spans)
    assert t.take() == {}


def test_the_counts_add_up_in_the_database(any_engine: Engine) -> None:
    src = sources.add_source(any_engine, SYSTEM, kind="otlp", name="counted")
    assert tally.read_counts(any_engine, src.id) == tally.RequestCounts()
    t = tally.Tally()
    t.count(200, 30, T0)
    t.count(200, 6, T0 + dt.timedelta(seconds=5))
    t.count(401, 0, T0 + dt.timedelta(seconds=1))
    assert tally.flush(any_engine, src.id, t) is True
    assert tally.flush(any_engine, src.id, t) is False  # nothing new: nothing written
    t.count(401, 0, T0 - dt.timedelta(seconds=60))  # an older time does not go back
    t.count(413, 0, T0 + dt.timedelta(seconds=2))
    tally.flush(any_engine, src.id, t)
    got = tally.read_counts(any_engine, src.id)
    assert got == tally.RequestCounts(2, 36, {401: 2, 413: 1}, T0 + dt.timedelta(seconds=5))
    assert got.requests == 5
    # the sources list carries them for a receiver, not for a Phoenix source
    listed = {s.name: s for s in sources.list_sources(any_engine)}
    assert listed["counted"].requests == got
    # a removed source takes its counts with it
    sources.remove_source(any_engine, SYSTEM, src.id)
    assert tally.read_counts(any_engine, src.id) == tally.RequestCounts()


def test_the_words_of_the_counts() -> None:
    now = T0 + dt.timedelta(seconds=65)
    assert display.requests_text(None, now) is None
    assert display.requests_text(tally.RequestCounts(), now) == "no request received yet"
    text = display.requests_text(tally.RequestCounts(1, 3, {401: 2, 413: 1, 599: 1}, T0), now)
    assert text == (
        "1 request accepted (3 spans); 4 refused: 2 × 401 no valid token, 1 × 413 too large, "
        "1 × 599 refused; last request 2026-12-05 03:00 UTC (1 minute ago)"
    )


# ---------------------------------------------------------------------------------------
# A real receiver and the real exporter


@pytest.fixture
def receiver(engine: Engine) -> Iterator[Callable[..., tuple[Receiver, int, int]]]:
    started: list[Receiver] = []

    def go(**kw: Any) -> tuple[Receiver, int, int]:
        src = sources.add_source(engine, SYSTEM, kind="otlp", name="counted receiver")
        r = Receiver(engine, SYSTEM, src.id, ReceiverConfig(port=0, assemble_every=None, **kw))
        started.append(r)
        return r, r.start(), src.id

    yield go
    for r in started:
        r.stop()


def _post(port: int, body: bytes, headers: dict[str, str]) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    try:
        conn.request("POST", "/v1/traces", body=body, headers=headers)
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def test_a_real_receiver_counts_what_the_exporter_sent_and_what_it_refused(
    engine: Engine, receiver: Any
) -> None:
    _, port, source_id = receiver(token="s3cret", flush_every=0.2)
    spans_a, _ = make_rag_spans(4)
    spans_b, _ = make_rag_spans(2, seed=10)
    endpoint = f"http://127.0.0.1:{port}/v1/traces"
    good = OTLPSpanExporter(endpoint=endpoint, headers={"Authorization": "Bearer s3cret"})
    assert good.export(spans_a) == SpanExportResult.SUCCESS
    assert good.export(spans_b) == SpanExportResult.SUCCESS
    good.shutdown()
    bad = OTLPSpanExporter(endpoint=endpoint, headers={"Authorization": "Bearer wrong"})
    assert bad.export(spans_a) == SpanExportResult.FAILURE  # 401 is not retried
    bad.shutdown()
    auth = {"Authorization": "Bearer s3cret"}
    assert _post(port, b"not otlp", {**auth, "Content-Type": "text/plain"}) == 415
    assert _post(port, b"\xff\xff\xff", {**auth, "Content-Type": "application/x-protobuf"}) == 400
    expected = tally.RequestCounts(2, len(spans_a) + len(spans_b), {400: 1, 401: 1, 415: 1})
    deadline = time.monotonic() + WAIT
    while (got := tally.read_counts(engine, source_id)).requests < expected.requests:
        assert time.monotonic() < deadline, f"the counts were not flushed: {got}"
        time.sleep(0.1)
    assert (got.accepted, got.spans, got.refused) == (
        expected.accepted,
        expected.spans,
        expected.refused,
    )
    assert got.last_at is not None
    text = display.requests_text(got, dt.datetime.now(dt.UTC))
    assert text is not None and text.startswith("2 requests accepted (18 spans); 3 refused")


def test_counts_a_receiver_holds_are_written_when_it_stops(engine: Engine, receiver: Any) -> None:
    r, port, source_id = receiver(flush_every=None)
    spans, _ = make_rag_spans(1)
    endpoint = f"http://127.0.0.1:{port}/v1/traces"
    assert OTLPSpanExporter(endpoint=endpoint).export(spans) == SpanExportResult.SUCCESS
    assert tally.read_counts(engine, source_id).requests == 0  # held in memory
    r.stop()
    assert tally.read_counts(engine, source_id) == tally.RequestCounts(
        1, len(spans), {}, tally.read_counts(engine, source_id).last_at
    )
