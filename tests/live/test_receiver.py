"""The OTLP/HTTP receiver, run on a free loopback port against a test database, fed by the REAL
OpenTelemetry SDK exporters: ``opentelemetry-exporter-otlp-proto-http`` (protobuf, plain and
gzip) and ``opentelemetry-exporter-otlp-json-http`` (OpenTelemetry's own OTLP/JSON exporter).
What was sent is assembled and compared with what is stored (query, chunks, decision, scores,
versions, hex trace id). Hostile requests are sent by hand (http.client), and a receiver
process is killed mid-request to show that only what is stored is acknowledged."""

from __future__ import annotations

import contextlib
import gzip
import http.client
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.json.http.trace_exporter import (
    OTLPSpanExporter as JsonExporter,
)
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace.export import SpanExportResult
from sqlalchemy import Engine, func, select, text

from review.core.identity import SYSTEM
from review.traces import browse
from review.traces.live import sources, staging
from review.traces.live.receiver import Receiver, ReceiverConfig
from storage.models import SourceSpan
from tests.helpers.paths import ROOT
from tests.helpers.ragspans import ExpectedTrace, make_rag_spans

WAIT = 180.0  # seconds: generous for a busy 2-core machine; never a timing assertion


@pytest.fixture
def source_id(engine: Engine) -> int:
    src = sources.add_source(engine, SYSTEM, kind="otlp", name="otlp-test")
    return int(src.id)


@pytest.fixture
def start(engine: Engine, source_id: int) -> Iterator[Callable[..., tuple[Receiver, int]]]:
    started: list[Receiver] = []

    def go(**kw: Any) -> tuple[Receiver, int]:
        kw.setdefault("assemble_every", None)
        r = Receiver(engine, SYSTEM, source_id, ReceiverConfig(port=0, **kw))
        started.append(r)
        return r, r.start()

    yield go
    for r in started:
        r.stop()


def url(port: int) -> str:
    return f"http://127.0.0.1:{port}/v1/traces"


def post(port: int, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    try:
        conn.request("POST", "/v1/traces", body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


PB = {"Content-Type": "application/x-protobuf"}
JS = {"Content-Type": "application/json"}


def assemble(engine: Engine, source_id: int) -> staging.AssembleResult:
    return staging.assemble(engine, SYSTEM, source_id, grace_seconds=0)


def staged_count(engine: Engine, source_id: int) -> int:
    with engine.connect() as conn:
        n = conn.scalar(
            select(func.count()).select_from(SourceSpan).where(SourceSpan.source_id == source_id)
        )
    return int(n or 0)


def check_stored(engine: Engine, expected: list[ExpectedTrace]) -> None:
    for e in expected:
        v = browse.get_trace(engine, SYSTEM, trace_id=e.trace_id)
        assert v is not None, f"trace {e.trace_id} was not imported"
        assert v.trace_id == e.trace_id and len(v.trace_id) == 32
        assert (v.query, v.rewritten_query, v.answer_text) == (
            e.query,
            e.rewritten_query,
            e.answer,
        )
        assert (v.decision, v.reason_code, v.top_score) == (e.decision, e.reason_code, e.top_score)
        got = [(c.chunk_id, c.doc_id, c.doc_version, c.score, c.text) for c in v.chunks]
        assert got == [(c.chunk_id, c.doc_id, c.doc_version, c.score, c.text) for c in e.chunks]
        assert (v.versions["model"], v.versions["prompt"], v.versions["index"]) == (
            e.model,
            e.prompt,
            e.index,
        )


# ---------------------------------------------------------------------------------------
# The real exporters


@pytest.mark.parametrize("compression", [Compression.NoCompression, Compression.Gzip])
def test_the_sdk_protobuf_exporter_stores_the_traces_it_sent(
    engine: Engine, source_id: int, start: Any, compression: Compression
) -> None:
    receiver, port = start()
    spans, expected = make_rag_spans(12)
    exporter = OTLPSpanExporter(endpoint=url(port), compression=compression, timeout=WAIT)
    assert exporter.export(spans) == SpanExportResult.SUCCESS
    assert staged_count(engine, source_id) == len(spans)  # stored before the 200
    result = assemble(engine, source_id)
    assert result.imported == len(expected) and result.rejected == 0
    check_stored(engine, expected)
    # the exporter's retry of the same batch stores nothing twice
    assert exporter.export(spans) == SpanExportResult.SUCCESS
    assert staged_count(engine, source_id) == len(spans)
    assert receiver.stats["duplicates"] == len(spans)
    assert assemble(engine, source_id).imported == 0
    exporter.shutdown()


def test_the_sdk_otlp_json_exporter_stores_the_traces_it_sent(
    engine: Engine, source_id: int, start: Any
) -> None:
    _, port = start()
    spans, expected = make_rag_spans(9)
    exporter = JsonExporter(endpoint=url(port), timeout=WAIT)
    assert exporter.export(spans) == SpanExportResult.SUCCESS
    assert staged_count(engine, source_id) == len(spans)
    assert assemble(engine, source_id).imported == len(expected)
    check_stored(engine, expected)
    exporter.shutdown()


def test_the_background_loop_imports_traces_once_their_grace_passed(
    engine: Engine, source_id: int, start: Any
) -> None:
    _, port = start(assemble_every=0.2, grace_seconds=0.0)
    spans, expected = make_rag_spans(3)
    assert OTLPSpanExporter(endpoint=url(port)).export(spans) == SpanExportResult.SUCCESS
    deadline = time.monotonic() + WAIT
    while browse.get_trace(engine, SYSTEM, trace_id=expected[-1].trace_id) is None:
        assert time.monotonic() < deadline, "the assembly loop imported nothing"
        time.sleep(0.1)
    check_stored(engine, expected)


def test_ten_thousand_spans_in_one_request(engine: Engine, source_id: int, start: Any) -> None:
    receiver, port = start()
    spans, expected = make_rag_spans(3334)
    exporter = OTLPSpanExporter(endpoint=url(port), timeout=WAIT, compression=Compression.Gzip)
    assert exporter.export(spans) == SpanExportResult.SUCCESS
    assert receiver.stats["requests"] == 1 and receiver.stats["added"] == 10_002
    assert staged_count(engine, source_id) == 10_002
    assert assemble(engine, source_id).imported == 3334
    check_stored(engine, expected[::333])


# ---------------------------------------------------------------------------------------
# Hostile requests


def test_json_with_hex_and_with_base64_ids_store_the_same_trace(
    engine: Engine, source_id: int, start: Any
) -> None:
    from google.protobuf import json_format

    _, port = start()
    spans, expected = make_rag_spans(1)
    generic = json_format.MessageToJson(encode_spans(spans)).encode()  # base64 ids
    status, headers, body = post(port, generic, JS)
    assert status == 200 and json.loads(body) == {}
    assert headers["content-type"].startswith("application/json")
    assert staged_count(engine, source_id) == 3
    # the same spans in OTLP/JSON (hex ids) are the same span ids: duplicates, nothing new
    from opentelemetry.exporter.otlp.json.common._internal.trace_encoder import (
        encode_spans as encode_json,
    )

    status, _, _ = post(port, encode_json(spans).to_json().encode(), JS)
    assert status == 200 and staged_count(engine, source_id) == 3
    assert assemble(engine, source_id).imported == 1
    check_stored(engine, expected)


def test_a_gzip_bomb_is_refused_within_its_bound(
    engine: Engine, source_id: int, start: Any
) -> None:
    _, port = start(max_decoded_bytes=4 * 1024 * 1024)
    bomb = gzip.compress(b"\0" * (256 * 1024 * 1024), compresslevel=9)  # 256 MiB in ~250 KB
    status, headers, body = post(port, bomb, {**PB, "Content-Encoding": "gzip"})
    assert status == 413
    assert headers["content-type"] == "application/x-protobuf"
    from google.rpc import status_pb2

    assert "decompresses to more than 4,194,304 bytes" in status_pb2.Status.FromString(body).message
    assert staged_count(engine, source_id) == 0


def test_an_oversized_body_is_413_and_a_truncated_protobuf_400(
    engine: Engine, source_id: int, start: Any
) -> None:
    _, port = start(max_body_bytes=64 * 1024)
    spans, _ = make_rag_spans(200)
    body = encode_spans(spans).SerializeToString()
    assert len(body) > 64 * 1024
    status, _, _ = post(port, body, PB)
    assert status == 413
    small = encode_spans(spans[:9]).SerializeToString()
    status, _, err = post(port, small[: len(small) // 2], PB)
    assert status == 400
    from google.rpc import status_pb2

    assert "not a protobuf ExportTraceServiceRequest" in status_pb2.Status.FromString(err).message
    status, _, err = post(port, b'{"resourceSpans": [', JS)
    assert status == 400 and "not valid JSON" in json.loads(err)["message"]
    assert staged_count(engine, source_id) == 0


def test_wrong_content_type_or_encoding_is_415(start: Any) -> None:
    _, port = start()
    status, _, body = post(port, b"{}", {"Content-Type": "text/plain"})
    assert status == 415 and b"application/x-protobuf or application/json" in body
    status, _, _ = post(port, b"{}", {**JS, "Content-Encoding": "br"})
    assert status == 415
    assert post(port, b"{}", {**JS, "Content-Type": "application/json; charset=utf-8"})[0] == 200


def test_a_token_is_required_when_configured(engine: Engine, source_id: int, start: Any) -> None:
    token = "s3cret-token-for-the-test"
    _, port = start(token=token)
    spans, _ = make_rag_spans(1)
    wrong = OTLPSpanExporter(endpoint=url(port), headers={"Authorization": "Bearer nope"})
    assert wrong.export(spans) == SpanExportResult.FAILURE
    status, headers, body = post(port, b"{}", JS)
    assert status == 401 and headers["www-authenticate"].startswith("Bearer")
    assert token.encode() not in body
    assert staged_count(engine, source_id) == 0
    right = OTLPSpanExporter(endpoint=url(port), headers={"Authorization": f"Bearer {token}"})
    assert right.export(spans) == SpanExportResult.SUCCESS
    assert staged_count(engine, source_id) == 3


def test_an_unknown_attribute_value_type_is_warned_and_its_trace_refused_with_the_reason(
    engine: Engine, source_id: int, start: Any
) -> None:
    _, port = start()
    span = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": "b7ad6b7169203331",
        "name": "support-answer",
        "startTimeUnixNano": str(time.time_ns()),
        "attributes": [
            {"key": "input.value", "value": {"stringValue": "Can we get a refund?"}},
            {"key": "rag.top_score", "value": {"decimalValue": "0.8"}},
        ],
    }
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()
    status, _, resp = post(port, body, JS)
    assert status == 200
    partial = json.loads(resp)["partialSuccess"]
    assert "unknown OTLP value type 'decimalValue'" in partial["errorMessage"]
    assert int(partial.get("rejectedSpans", 0)) == 0
    result = assemble(engine, source_id)
    assert (result.imported, result.rejected) == (0, 1)
    assert any("unknown OTLP value type" in r for r in result.reasons.values())


def test_rejected_spans_come_back_in_partial_success(
    engine: Engine, source_id: int, start: Any
) -> None:
    _, port = start()
    spans, _ = make_rag_spans(1)
    req = encode_spans(spans)
    req.resource_spans[0].scope_spans[0].spans[0].trace_id = b"\x01" * 15
    status, _, body = post(port, req.SerializeToString(), PB)
    assert status == 200
    resp = ExportTraceServiceResponse.FromString(body)
    assert resp.partial_success.rejected_spans == 1
    message = resp.partial_success.error_message
    assert "spans.0: field traceId: 15 bytes; a trace id has 16" in message
    assert staged_count(engine, source_id) == 2


# ---------------------------------------------------------------------------------------
# When it cannot keep up: 429 and 503 with Retry-After, and the exporter's retry stores once


@contextlib.contextmanager
def write_lock(engine: Engine) -> Iterator[None]:
    """Hold SQLite's write lock (as a long import in another process would)."""
    conn = sqlite3.connect(str(engine.url.database), isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield
        conn.execute("ROLLBACK")
    finally:
        conn.close()


def test_too_many_requests_in_flight_is_429_with_retry_after(
    engine: Engine, source_id: int, start: Any
) -> None:
    receiver, port = start(max_in_flight=1, busy_timeout_ms=60_000)
    spans, _ = make_rag_spans(1)
    body = encode_spans(spans).SerializeToString()
    first: list[int] = []
    with write_lock(engine):
        t = threading.Thread(target=lambda: first.append(post(port, body, PB)[0]))
        t.start()
        deadline = time.monotonic() + WAIT
        while receiver.in_flight < 1:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        status, headers, _ = post(port, body, PB)
        assert status == 429 and int(headers["retry-after"]) >= 1
    t.join(WAIT)
    assert first == [200] and staged_count(engine, source_id) == 3


def test_a_busy_database_is_503_and_the_exporters_retry_stores_once(
    engine: Engine, source_id: int, start: Any
) -> None:
    receiver, port = start(busy_timeout_ms=50, retry_after_s=1)
    spans, expected = make_rag_spans(2)
    body = encode_spans(spans).SerializeToString()
    with write_lock(engine):
        status, headers, _ = post(port, body, PB)
        assert status == 503 and headers["retry-after"] == "1"
        assert staged_count(engine, source_id) == 0
        # the real exporter: 503 now, retried after Retry-After until the lock is gone
        result: list[SpanExportResult] = []
        exporter = OTLPSpanExporter(endpoint=url(port), timeout=WAIT)
        t = threading.Thread(target=lambda: result.append(exporter.export(spans)))
        t.start()
        deadline = time.monotonic() + WAIT
        while receiver.stats["unavailable"] < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    t.join(WAIT)
    assert result == [SpanExportResult.SUCCESS]
    assert staged_count(engine, source_id) == len(spans)
    assert assemble(engine, source_id).imported == 2
    check_stored(engine, expected)


# ---------------------------------------------------------------------------------------
# Killed mid-request: nothing acknowledged that was not stored, the retry stores it once


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _receiver_process(db_url: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "WORKBENCH_DATABASE_URL": db_url}
    with log.open("wb") as err:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "review.cli.main", "receive", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )


def _wait_for(what: Callable[[], bool], why: str) -> None:
    deadline = time.monotonic() + WAIT
    while not what():
        assert time.monotonic() < deadline, why
        time.sleep(0.05)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_a_receiver_killed_mid_request_acknowledges_nothing_and_the_retry_stores_once(
    engine: Engine, sqlite_url: str, tmp_path: Path
) -> None:
    port = _free_port()
    log1 = tmp_path / "receiver1.log"
    proc = _receiver_process(sqlite_url, port, log1)
    try:
        _wait_for(lambda: _listening(port), "the receiver did not start")
        spans, expected = make_rag_spans(4)
        exporter = OTLPSpanExporter(endpoint=url(port), timeout=WAIT)
        result: list[SpanExportResult] = []
        with write_lock(engine):
            t = threading.Thread(target=lambda: result.append(exporter.export(spans)))
            t.start()
            # the request is in the receiver, waiting for the database: kill it there
            _wait_for(lambda: b"staging 12 spans" in log1.read_bytes(), "no request arrived")
            proc.send_signal(signal.SIGKILL)
            proc.wait(WAIT)
            assert result == []  # not acknowledged
        with engine.connect() as conn:
            n = conn.execute(text("SELECT count(*) FROM source_spans")).scalar()
        assert n == 0  # nothing half-written
        proc = _receiver_process(sqlite_url, port, tmp_path / "receiver2.log")
        t.join(WAIT)
        assert result == [SpanExportResult.SUCCESS]  # the exporter's retry, to the new one
        ids = select(SourceSpan.span_id)
        with engine.connect() as conn:
            stored = list(conn.scalars(ids))
        assert sorted(stored) == sorted(
            format(c.span_id, "016x") for s in spans if (c := s.get_span_context()) is not None
        )
        source_id = next(s.id for s in sources.list_sources(engine) if s.name == "OTLP receiver")
        assemble(engine, int(source_id))
        check_stored(engine, expected)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_a_body_trickling_in_past_the_timeout_is_408_and_frees_its_slot(start: Any) -> None:
    _, port = start(body_timeout_s=0.5, max_in_flight=1)
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as s:
        s.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\n\r\n{"
        )
        reply = s.recv(4096)
    assert reply.startswith(b"HTTP/1.1 408")
    assert post(port, b"{}", JS)[0] == 200  # the slot is free again


def test_a_receiver_killed_anywhere_in_a_stream_of_exports_loses_and_duplicates_nothing(
    engine: Engine, sqlite_url: str, tmp_path: Path
) -> None:
    """Killed at whatever point the 4th request reached (decoding, inside the transaction,
    committed but unanswered): every export still succeeds, through the exporter's retry to
    the restarted receiver, and every span is stored exactly once."""
    port = _free_port()
    log1 = tmp_path / "receiver1.log"
    proc = _receiver_process(sqlite_url, port, log1)
    try:
        _wait_for(lambda: _listening(port), "the receiver did not start")
        spans, expected = make_rag_spans(400)
        batches = [spans[i : i + 120] for i in range(0, len(spans), 120)]
        exporter = OTLPSpanExporter(endpoint=url(port), timeout=WAIT)
        results: list[SpanExportResult] = []

        def export_all() -> None:
            for b in batches:
                results.append(exporter.export(b))

        t = threading.Thread(target=export_all)
        t.start()
        _wait_for(lambda: log1.read_bytes().count(b"staging ") >= 4, "too few requests")
        proc.send_signal(signal.SIGKILL)
        proc.wait(WAIT)
        proc = _receiver_process(sqlite_url, port, tmp_path / "receiver2.log")
        t.join(WAIT)
        assert results == [SpanExportResult.SUCCESS] * len(batches)
        with engine.connect() as conn:
            stored = list(conn.scalars(select(SourceSpan.span_id)))
        sent = [format(c.span_id, "016x") for s in spans if (c := s.get_span_context())]
        assert len(stored) == len(set(stored)) and sorted(stored) == sorted(sent)
        source_id = next(s.id for s in sources.list_sources(engine) if s.name == "OTLP receiver")
        assert assemble(engine, int(source_id)).imported == len(expected)
        check_stored(engine, expected[::40])
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            proc.kill()
