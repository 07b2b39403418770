"""The OTLP/HTTP receiver beside the app, as `make run RECEIVE=PORT` starts it: serve.py with
WORKBENCH_RECEIVE_PORT (and a bearer token named by WORKBENCH_RECEIVE_TOKEN_ENV) on the demo
database; the REAL OpenTelemetry SDK exporter sends three traces to it and one request with a
wrong token; the traces are in the database, the Traces page's Live sources panel (in
Chromium) says where the receiver listens and what it answered, and one of the traces opens on
the page. When the app stops, the receiver is gone with it."""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult
from playwright.sync_api import expect

from review.core.identity import SYSTEM
from review.traces import browse
from review.traces.live import sources, tally
from storage.db import make_engine
from tests.helpers.browser import chromium_page, open_as, streamlit_server, wait_idle
from tests.helpers.paths import ROOT
from tests.helpers.ragspans import make_rag_spans

pytestmark = pytest.mark.browser

ADMIN = 1  # Ada Okafor on the demo
WAIT = 180.0  # seconds: generous for a busy 2-core machine; never a timing assertion
SHOTS = os.environ.get("WB_SOURCES_SHOTS")  # a folder: save what the journey saw there


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(what: Callable[[], object], why: str) -> None:
    deadline = time.monotonic() + WAIT
    while not what():
        assert time.monotonic() < deadline, why
        time.sleep(0.2)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _receivers(port: int) -> list[int]:
    """The processes running ``workbench receive`` on ``port`` (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().split(") ", 1)[1][:1]
        except OSError:
            continue
        if b"receive" in args and str(port).encode() in args and state != "Z":
            found.append(int(entry.name))
    return found


def test_the_receiver_beside_the_app_stores_what_the_exporter_sent_and_stops_with_it(
    demo_url: str, tmp_path: Path
) -> None:
    engine = make_engine(demo_url)
    # the source the receiver receives for, with no grace period (the test waits less)
    src = sources.add_source(
        engine,
        SYSTEM,
        kind="otlp",
        name="OTLP receiver",
        secret_name="BESIDE_TOKEN",
        grace_seconds=0,
    )
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}/v1/traces"
    spans, expected = make_rag_spans(3, seed=40)
    with streamlit_server(
        ROOT / "app.py",
        tmp_path,
        WORKBENCH_DATABASE_URL=demo_url,
        WORKBENCH_RECEIVE_PORT=str(port),
        WORKBENCH_RECEIVE_TOKEN_ENV="BESIDE_TOKEN",
        BESIDE_TOKEN="a-long-random-token",
    ) as base:
        _wait(lambda: _listening(port), "the receiver beside the app did not listen")
        [child] = _receivers(port)
        good = OTLPSpanExporter(
            endpoint=endpoint, headers={"Authorization": "Bearer a-long-random-token"}, timeout=WAIT
        )
        assert good.export(spans) == SpanExportResult.SUCCESS
        good.shutdown()
        bad = OTLPSpanExporter(endpoint=endpoint, headers={"Authorization": "Bearer nope"})
        assert bad.export(spans) == SpanExportResult.FAILURE
        bad.shutdown()
        # imported by the receiver's own assembly pass, counted by its own flush
        ids = [e.trace_id for e in expected]
        _wait(
            lambda: all(browse.get_trace(engine, SYSTEM, trace_id=t) for t in ids),
            f"the traces {ids} were not all imported",
        )
        _wait(
            lambda: tally.read_counts(engine, src.id).requests >= 2,
            "the receiver's request counts were not written",
        )
        counts = tally.read_counts(engine, src.id)
        assert (counts.accepted, counts.spans, counts.refused) == (1, len(spans), {401: 1})

        with chromium_page() as page:
            open_as(page, f"{base}/traces?as={ADMIN}")
            wait_idle(page)
            page.get_by_text("Live sources", exact=False).first.click()
            wait_idle(page)
            # the page's escaper breaks addresses (http:<word joiner>//): no link is made
            listens = re.compile(
                rf"The receiver beside the app listens on http:\W?//127\.0\.0\.1:{port}/v1/traces"
            )
            expect(page.get_by_text(listens)).to_be_visible()
            expect(
                page.get_by_text(
                    f"Requests: 1 request accepted ({len(spans)} spans); 1 refused: "
                    "1 × 401 no valid token; last request"
                )
            ).to_be_visible()
            if SHOTS:
                page.screenshot(path=str(Path(SHOTS) / "receiver-beside.png"), full_page=True)
            view = browse.get_trace(engine, SYSTEM, trace_id=expected[0].trace_id)
            assert view is not None
            open_as(page, f"{base}/traces?as={ADMIN}&trace={view.id}")
            wait_idle(page)
            expect(page.get_by_text(expected[0].query).first).to_be_visible()
            assert page.errors == []  # type: ignore[attr-defined]
    # the app stopped (SIGTERM): its receiver went with it
    _wait(lambda: not _receivers(port), "the receiver outlived the app")
    assert not _listening(port)
    assert child not in _receivers(port)
    engine.dispose()
