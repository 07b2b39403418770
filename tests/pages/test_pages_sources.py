"""AppTest of the Traces page's live sources panel and the Monitoring page's freshness lines:
an admin adds, pauses, resumes and removes a source (the removal confirmed, saying how many
waiting spans it drops), each said under its control; a refused source (duplicate name, a URL
that is not one, a URL carrying a password) is said under the form and the form keeps what was
typed; a reviewer reads the panel with no control; an annotator does not see it; hostile
names, URLs and errors stay text; the Monitoring page says how fresh its data is."""

from __future__ import annotations

import datetime as dt
import os

import pytest
from sqlalchemy import Engine
from streamlit.testing.v1 import AppTest

from review.traces.live import display, sources, staging, tally
from review.traces.live.receiver import Receiver, ReceiverConfig
from storage.db import make_engine
from storage.models import utcnow
from tests.helpers.actors import make_actor
from tests.helpers.pages import (
    ADA,
    INES,
    RAVI,
    live_markdown,
    markdown_shown,
    no_exception,
    page_app,
    readable,
)
from tests.helpers.placement import said_under
from tests.helpers.ragspans import make_rag_spans
from tests.helpers.shown import raw_keys
from tests.live.spanmaker import rag_trace

TRACES = "pages/traces_page.py"
MONITORING = "pages/monitoring_page.py"
K = "traces_src_"
ADMIN = make_actor("admin", ADA, clearance=True, uid=1)
HOSTILE = "![x](http://evil.example/x.png) <b>bold</b> **b** ops@evil.example"


@pytest.fixture
def engine(trace_demo_url: str):
    eng = make_engine(trace_demo_url)
    yield eng
    eng.dispose()


def panel(at: AppTest):
    found = [e for e in at.expander if readable(e.label).startswith("Live sources")]
    assert len(found) == 1, [e.label for e in at.expander]
    return found[0]


def table(at: AppTest):
    return next(d.value for d in at.dataframe if "Last sync" in d.value.columns)


def buttons(at: AppTest) -> set[str]:
    return {b.label for b in at.button}


def fill_form(at: AppTest, **values: object) -> None:
    for field, value in values.items():
        if field == "kind":
            at.selectbox(key=f"{K}kind").set_value(value)
        elif field == "grace":
            at.number_input(key=f"{K}grace").set_value(int(str(value)))
        else:
            at.text_input(key=f"{K}{field}").input(str(value))


def press(at: AppTest, label: str) -> AppTest:
    next(b for b in at.button if b.label == label).click()
    at.run()
    no_exception(at)
    return at


def test_an_admin_adds_pauses_resumes_and_removes_a_source(
    trace_demo_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = page_app(trace_demo_url, monkeypatch, TRACES, ADA).run()
    no_exception(at)
    assert readable(panel(at).label) == "Live sources: none (traces arrive by file import)"
    assert any("No live source yet" in readable(c) for c in at.caption)
    assert any("never stored or shown" in readable(c) for c in at.caption)  # the secret

    fill_form(at, kind="otlp", name="Checkout receiver", secret="RECEIVER_TOKEN", grace=10)
    press(at, "Add source")
    assert said_under(at, "Add source") == [
        "Source Checkout receiver added (OTLP/HTTP receiver, grace period 10 s)."
    ]
    rows = sources.list_sources(engine)
    assert [(s.name, s.kind, s.secret_name, s.grace_seconds) for s in rows] == [
        ("Checkout receiver", "otlp", "RECEIVER_TOKEN", 10.0)
    ]
    sid = rows[0].id
    shown = table(at)
    first = dict(shown.iloc[0])
    assert (first["Name"], first["Status"], first["Last sync"]) == (
        "Checkout receiver",
        "active",
        "never",
    )
    assert readable(panel(at).label) == "Live sources: 1"
    # how an exporter reaches it: endpoint, env variable, bearer header
    code = "\n".join(c.value for c in at.code)
    assert "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://HOST:4318/v1/traces" in code
    assert "Authorization=Bearer%20${RECEIVER_TOKEN}" in code
    assert "workbench receive --port 4318 --source 'Checkout receiver'" in code
    # the form is empty again for the next one
    assert at.text_input(key=f"{K}name").value == ""

    press(at, "Pause")
    assert said_under(at, f"{K}status") == [
        "Source Checkout receiver paused: its syncs and its receiver refuse to run until resumed."
    ]
    assert sources.get_source(engine, sid).status == "paused"
    assert dict(table(at).iloc[0])["Status"] == "paused"
    assert readable(panel(at).label) == "Live sources: 1 (1 paused)"
    press(at, "Resume")
    assert said_under(at, f"{K}status") == ["Source Checkout receiver resumed."]
    assert sources.get_source(engine, sid).status == "active"

    # two spans wait for their trace: the confirmation says they are dropped
    staging.stage(engine, sid, rag_trace(41)[:2])
    at.run()
    remove = next(b for b in at.button if b.label == "Remove source")
    assert remove.disabled  # not before the confirmation
    sure = at.checkbox(key=f"{K}sure_{sid}")
    assert "2 spans waiting for their trace are dropped" in readable(sure.label)
    sure.check()
    at.run()
    press(at, "Remove source")
    assert sources.list_sources(engine) == []
    assert said_under(at, display.panel_note([])) == [
        "Source Checkout receiver removed; 2 waiting spans dropped."
    ]


@pytest.mark.parametrize(
    ("values", "error"),
    [
        (
            {"kind": "phoenix", "name": "Phx", "url": "not a url", "project": "p"},
            "is not an http or https URL with a host",
        ),
        (
            {"kind": "phoenix", "name": "Phx", "url": "http://u:pw@phoenix:6006", "project": "p"},
            "put no user name or password in the URL",
        ),
        ({"kind": "otlp", "name": "Existing"}, "a source named 'Existing' exists already"),
        (
            {"kind": "phoenix", "name": "Phx", "url": "http://phoenix:6006", "project": ""},
            "a Phoenix source needs its project's name",
        ),
        (
            {"kind": "otlp", "name": "Tok", "secret": "token value with spaces"},
            "not the secret itself",
        ),
    ],
    ids=["bad-url", "password-in-url", "duplicate-name", "no-project", "secret-not-a-name"],
)
def test_a_refused_source_is_said_under_the_form_and_keeps_what_was_typed(
    trace_demo_url: str,
    engine: Engine,
    monkeypatch: pytest.MonkeyPatch,
    values: dict[str, str],
    error: str,
) -> None:
    sources.add_source(engine, ADMIN, kind="otlp", name="Existing")
    at = page_app(trace_demo_url, monkeypatch, TRACES, ADA).run()
    fill_form(at, **values)
    press(at, "Add source")
    said = said_under(at, "Add source")
    assert len(said) == 1 and said[0].startswith("Nothing was added.") and error in said[0], said
    assert [s.name for s in sources.list_sources(engine)] == ["Existing"]
    assert at.text_input(key=f"{K}name").value == values["name"]
    # the password is not echoed back in the message
    assert "pw" not in said[0].replace("password", "")


def _sources_in_every_state(engine: Engine, odd: str = HOSTILE) -> tuple[int, int, int]:
    """A Phoenix source synced then failing, a receiver that received, one never run and
    paused; ``odd`` is the text of a name, a project and an error."""
    now = utcnow()
    phx = sources.add_source(
        engine,
        ADMIN,
        kind="phoenix",
        name="Support bot",
        url="http://phoenix.internal:6006",
        project="support-bot",
        secret_name="PHOENIX_API_KEY",
    ).id
    staging.stage(engine, phx, rag_trace(51, start=now - dt.timedelta(minutes=7))[:2])
    sources.record_sync(engine, phx, at=now - dt.timedelta(minutes=4))
    sources.record_error(
        engine, phx, f"HTTP 500 from Phoenix: {odd}", at=now - dt.timedelta(minutes=1)
    )
    rcv = sources.add_source(engine, ADMIN, kind="otlp", name=odd).id
    staging.stage(engine, rcv, rag_trace(52, start=now - dt.timedelta(minutes=2)))
    sources.record_sync(engine, rcv)
    new = sources.add_source(
        engine, ADMIN, kind="phoenix", name="New one", url="https://x.example", project=odd
    ).id
    sources.set_status(engine, ADMIN, new, "paused")
    return phx, rcv, new


def test_a_reviewer_reads_the_panel_without_any_control(
    trace_demo_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    _sources_in_every_state(engine)
    at = page_app(trace_demo_url, monkeypatch, TRACES, RAVI).run()
    no_exception(at)
    assert readable(panel(at).label) == "Live sources: 3 (1 paused, 1 failing)"
    shown = table(at)
    assert list(shown["Name"]) == ["Support bot", HOSTILE, "New one"]
    assert list(shown["Status"]) == ["active", "active", "paused"]
    errors = list(shown["Last error"])
    assert errors[0].endswith(f": HTTP 500 from Phoenix: {HOSTILE}") and "ago" in errors[0]
    assert errors[1:] == ["none", "none"]
    assert shown["Traces added"].isna().tolist() == [False, False, True]  # never ran: "—"
    assert shown["Spans waiting"].tolist()[:2] == [2, 3]
    assert "last successful sync" in shown["Lag"][0]
    # the picked source's last error in full, as text; the sync command
    assert any(c.value == f"HTTP 500 from Phoenix: {HOSTILE}" for c in at.code)
    assert any(
        "workbench sync phoenix --url http://phoenix.internal:6006" in c.value for c in at.code
    )
    # no control: neither the form nor pause, resume or remove
    assert not buttons(at) & {"Add source", "Pause", "Resume", "Remove source"}
    assert not [c for c in at.checkbox if "Remove" in c.label]
    assert not [t for t in at.text_input if t.key and t.key.startswith(K)]
    # hostile names, URLs and errors are text: nothing on the page is live Markdown
    live = [m for m in markdown_shown(at) if live_markdown(m)]
    assert live == [], live


@pytest.mark.parametrize("user", [ADA, RAVI], ids=["admin", "reviewer"])
def test_the_sources_table_shows_no_stored_key(
    trace_demo_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch, user: str
) -> None:
    _sources_in_every_state(engine, odd="Checkout bot")
    at = page_app(trace_demo_url, monkeypatch, TRACES, user).run()
    no_exception(at)
    assert raw_keys(at, TRACES) == []
    shown = table(at)
    assert set(shown["Kind"]) == {"Phoenix project", "OTLP/HTTP receiver"}
    text = shown.astype(str).to_string()
    assert "None" not in text and "nan" not in text and "_" not in text


def test_hostile_text_stays_text_for_the_admin_too(
    trace_demo_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, rcv, _ = _sources_in_every_state(engine)
    at = page_app(trace_demo_url, monkeypatch, TRACES, ADA).run()
    at.selectbox(key=f"{K}pick").set_value(rcv).run()
    no_exception(at)
    sure = at.checkbox(key=f"{K}sure_{rcv}")
    assert HOSTILE in readable(sure.label)
    live = [m for m in markdown_shown(at) if live_markdown(m)]
    assert live == [], live
    sure.check().run()
    press(at, "Remove source")
    assert said_under(at, f"{K}remove") == [f"Source {HOSTILE} removed; 3 waiting spans dropped."]
    assert not [m for m in markdown_shown(at) if live_markdown(m)]


def test_an_annotator_sees_no_sources(
    trace_demo_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    _sources_in_every_state(engine)
    at = page_app(trace_demo_url, monkeypatch, TRACES, INES).run()
    no_exception(at)
    assert not [e for e in at.expander if "Live sources" in e.label]
    assert not [d for d in at.dataframe if "Last sync" in d.value.columns]


def _freshness(at: AppTest) -> list[str]:
    return [
        readable(c)
        for c in at.caption
        if readable(c).startswith(("Newest trace", "No trace yet", "Traces arrive"))
        or "(OTLP/HTTP receiver" in readable(c)
        or "(Phoenix project" in readable(c)
    ]


def test_monitoring_says_traces_arrive_by_file_import_when_there_is_no_source(
    trace_demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = page_app(trace_demo_url, monkeypatch, MONITORING, RAVI).run()
    no_exception(at)
    lines = _freshness(at)
    assert len(lines) == 2, lines
    assert lines[0].startswith("Newest trace: ") and "ago)" in lines[0]
    assert lines[1].startswith("Traces arrive by file import (no live source is set up)")


def test_monitoring_names_each_live_source_with_its_last_success_and_lag(
    trace_demo_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    _sources_in_every_state(engine)
    at = page_app(trace_demo_url, monkeypatch, MONITORING, RAVI).run()
    no_exception(at)
    lines = _freshness(at)
    assert len(lines) == 4, lines
    assert lines[1].startswith("Support bot (Phoenix project): last successful sync ")
    assert "newest span 7 minutes old" in lines[1] and "last error" in lines[1]
    assert lines[2].startswith(f"{HOSTILE} (OTLP/HTTP receiver): last ran ")
    assert lines[3] == (
        "New one (Phoenix project, paused): last successful sync never; no span read yet."
    )
    assert not [m for m in markdown_shown(at) if live_markdown(m)]


def test_monitoring_on_an_empty_database_says_nothing_arrived_yet(
    empty_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = page_app(empty_url, monkeypatch, MONITORING, "solo@example.org").run()
    no_exception(at)
    assert next(i.value for i in at.info).startswith("No production traces yet")
    assert _freshness(at) == [
        "Traces arrive by file import (no live source is set up); no import has finished yet.",
    ]


def _exported(code: str, name: str) -> str:
    """The value the panel's commands export for the environment variable ``name``."""
    line = next(x for x in code.splitlines() if x.startswith(f"export {name}="))
    return line.split("=", 1)[1].strip('"')


def test_the_exporter_settings_the_panel_shows_reach_the_real_receiver(
    trace_demo_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An admin adds a receiver source on the page; the real OpenTelemetry exporter, set up
    only from the environment variables the panel shows (endpoint, bearer token header), sends
    three traces to the real receiver; the panel then shows them added, when and the lag."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    at = page_app(trace_demo_url, monkeypatch, TRACES, ADA).run()
    fill_form(at, kind="otlp", name="Checkout receiver", secret="RECEIVER_TOKEN", grace=0)
    press(at, "Add source")
    [src] = sources.list_sources(engine)
    code = "\n".join(c.value for c in at.code)
    monkeypatch.setenv("RECEIVER_TOKEN", "a-long-random-token")
    receiver = Receiver(
        engine,
        ADMIN,
        src.id,
        ReceiverConfig(port=0, token=sources.secret_value(src.secret_name), assemble_every=None),
    )
    port = receiver.start()
    try:
        endpoint = _exported(code, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        assert endpoint == "http://HOST:4318/v1/traces"
        monkeypatch.setenv(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint.replace("HOST:4318", f"127.0.0.1:{port}")
        )
        headers = _exported(code, "OTEL_EXPORTER_OTLP_TRACES_HEADERS")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", os.path.expandvars(headers))
        spans, expected = make_rag_spans(3)
        exporter = OTLPSpanExporter(timeout=180)
        assert exporter.export(spans) == SpanExportResult.SUCCESS
        exporter.shutdown()
        result = receiver.assemble_once()
        assert result is not None and result.imported == len(expected) == 3
    finally:
        receiver.stop()
    at.run()
    no_exception(at)
    shown = dict(table(at).iloc[0])
    assert (shown["Traces added"], shown["Spans waiting"], shown["Traces refused"]) == (3, 0, 0)
    assert shown["Last sync"] != "never" and str(shown["Last sync"]).endswith(")")
    assert str(shown["Lag"]).startswith("newest span ")
    assert shown["Last error"] == "none"
    # the exporter's one request, counted by the receiver and written when it stopped
    assert str(shown["Requests"]).startswith("1 request accepted (9 spans); last request 20")
    mon = page_app(trace_demo_url, monkeypatch, MONITORING, RAVI).run()
    line = next(x for x in _freshness(mon) if "(OTLP/HTTP receiver" in x)
    assert line.startswith("Checkout receiver (OTLP/HTTP receiver): last ran 20")


def test_the_panel_shows_what_the_receiver_answered(
    trace_demo_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A receiver's request counts (as its flushes store them) in the table and under the
    picked source: accepted with their spans, refused by status, the last request's time; a
    Phoenix source has none, a receiver that got nothing says so."""
    phx, rcv, _ = _sources_in_every_state(engine, odd="Checkout bot")
    idle = sources.add_source(
        engine, ADMIN, kind="otlp", name="Idle receiver", url="http://127.0.0.1:4319"
    ).id
    t = tally.Tally()
    for _ in range(3):
        t.count(200, 12)
    t.count(401)
    t.count(401)
    t.count(413)
    t.count(503)
    tally.flush(engine, rcv, t)
    at = page_app(trace_demo_url, monkeypatch, TRACES, RAVI).run()
    no_exception(at)
    shown = table(at).set_index("Name")["Requests"]
    got = str(shown["Checkout bot"])
    assert got.startswith(
        "3 requests accepted (36 spans); 4 refused: 2 × 401 no valid token, 1 × 413 too large, "
        "1 × 503 database busy or source paused; last request 20"
    ), got
    assert got.endswith("ago)") or got.endswith("just now)")
    assert shown["Idle receiver"] == "no request received yet"
    assert shown.isna().tolist() == [True, False, True, False]  # Phoenix sources: none
    at.selectbox(key=f"{K}pick").set_value(rcv).run()
    no_exception(at)
    assert any(
        readable(c.value).startswith("Requests: 3 requests accepted (36 spans); 4 refused")
        for c in at.caption
    )
    assert phx and idle
