"""The Traces page's "Sync now" on a Phoenix source, against a real Phoenix: an admin presses
it, the traces sent with the OpenTelemetry exporter are read and imported, and what the sync
did is said under the button; a Phoenix that is down leaves its reason there and on the
source, and a reviewer has no such button."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from streamlit.testing.v1 import AppTest

from review.traces.live import display, sources
from review.traces.live.phoenix import SyncReport
from storage.db import make_engine, read_session
from storage.models import Trace
from tests.helpers.actors import make_actor
from tests.helpers.pages import ADA, RAVI, no_exception, page_app
from tests.helpers.placement import said_under
from tests.live.phoenix_server import (
    PHOENIX_GROUP,
    PhoenixServer,
    phoenix,  # noqa: F401  (the module-scoped fixture)
    rag_traces,
    send_rag_traces,
    wait_for_spans,
)

pytestmark = [pytest.mark.timeout(1800), PHOENIX_GROUP]

TRACES = "pages/traces_page.py"
K = "traces_src_"


def _press(at: AppTest, label: str) -> None:
    next(b for b in at.button if b.label == label).click()
    at.run(timeout=300)
    no_exception(at)


def _open_panel_on(at: AppTest, source_id: int) -> None:
    at.selectbox(key=f"{K}pick").set_value(source_id)
    at.run(timeout=120)


def test_an_admin_syncs_a_phoenix_source_from_the_page(
    phoenix: PhoenixServer,  # noqa: F811
    trace_demo_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project = "sync-now-page"
    sent = rag_traces(4, seed=11, tag="-syncnow")
    send_rag_traces(phoenix.traces_url, sent, project=project)
    wait_for_spans(phoenix.base_url, project, 3 * len(sent))
    engine = make_engine(trace_demo_url)
    admin = make_actor("admin", ADA, clearance=True, uid=1)
    src = sources.add_source(
        engine,
        admin,
        kind="phoenix",
        name="Phoenix under test",
        url=phoenix.base_url,
        project=project,
        grace_seconds=0,
    )
    with read_session(engine) as s:
        before = s.scalar(select(func.count()).select_from(Trace))

    at = page_app(trace_demo_url, monkeypatch, TRACES, ADA).run(timeout=120)
    no_exception(at)
    _open_panel_on(at, src.id)
    _press(at, "Sync now")
    said = said_under(at, f"{K}sync")
    assert len(said) == 1, said
    # the overlap window (120 s) holds the traces back this first time (a child committed
    # late by a second Phoenix must not be left out): nothing imported yet, and it says so
    assert said[0].startswith(
        "Read 12 spans (12 new) in 1 page; 0 traces imported; 12 spans wait for their trace. "
        "A trace is imported by the first sync at least the overlap window (2 minutes) after"
    ), said
    assert sources.get_source(engine, src.id).spans_read == 12

    # a Phoenix that cannot be reached: the reason under the button and on the source
    sources.set_status(engine, admin, src.id, "active")
    dead = sources.add_source(
        engine,
        admin,
        kind="phoenix",
        name="Phoenix that is down",
        url="http://127.0.0.1:9",
        project=project,
    )
    at.run(timeout=120)
    _open_panel_on(at, dead.id)
    _press(at, "Sync now")
    said = said_under(at, f"{K}sync")
    assert len(said) == 1 and "The sync stopped:" in said[0], said
    err = sources.get_source(engine, dead.id).last_error
    assert err and "127.0.0.1:9" in err
    with read_session(engine) as s:
        assert s.scalar(select(func.count()).select_from(Trace)) == before
    engine.dispose()


def test_a_reviewer_has_no_sync_button(trace_demo_url: str, monkeypatch: pytest.MonkeyPatch):
    engine = make_engine(trace_demo_url)
    sources.add_source(
        engine,
        make_actor("admin", ADA, clearance=True, uid=1),
        kind="phoenix",
        name="Phoenix",
        url="http://127.0.0.1:6006",
        project="p",
    )
    engine.dispose()
    at = page_app(trace_demo_url, monkeypatch, TRACES, RAVI).run(timeout=120)
    no_exception(at)
    assert not [b for b in at.button if b.label == "Sync now"]


def test_the_words_of_a_sync() -> None:
    r = SyncReport(1, pages=2, spans_read=1500, added=1200, imported=390, waiting_spans=30)
    assert display.synced_text(r) == (
        "Read 1,500 spans (1,200 new) in 2 pages; 390 traces imported; 30 spans wait for "
        "their trace. A trace is imported by the first sync at least the overlap window (2 "
        "minutes) after its newest span, so that no late span is left out of it.",
        "success",
    )
    r = SyncReport(1, pages=5, spans_read=5_000, added=5_000, imported=1500)
    text, kind = display.synced_text(r)
    assert kind == "warning" and "stopped after 5 pages; more may wait" in text
    r = SyncReport(
        1,
        pages=1,
        spans_read=3,
        rejected=1,
        reasons={"t": "span 1: attribute x: bad"},
        error="Phoenix at http://h:1 did not answer",
    )
    text, kind = display.synced_text(r)
    assert kind == "warning"
    assert "1 trace refused (first reason: span 1: attribute x: bad)" in text
    assert text.endswith("The sync stopped: Phoenix at http://h:1 did not answer")
