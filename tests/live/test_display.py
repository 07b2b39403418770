"""How live trace sources read on the pages (review.traces.live.display), at a fixed ``now``:
a source never synced reads "never" and "—" rather than 0, an error with its reason and time,
paused, lag from the newest span and (Phoenix) the last successful sync, the commands to
connect a source quoted for the shell, and hostile names, URLs and errors kept as text that
the pages' escaper makes inert. And the Monitoring page's freshness lines, read from a
database."""

from __future__ import annotations

import dataclasses
import datetime as dt
import shlex

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from review.core.escape import markdown_text
from review.core.identity import Actor
from review.traces.live import display, sources, staging
from review.traces.live.display import Freshness
from review.traces.live.freshness import read_freshness
from review.traces.live.sources import SourceView
from tests.helpers.pages import live_markdown
from tests.live.spanmaker import T0, rag_trace

NOW = dt.datetime(2026, 12, 4, 12, 0, tzinfo=dt.UTC)
HOSTILE = "![x](http://evil.example/x.png) <script>alert(1)</script> **b** mail@evil.example"


def view(**changes: object) -> SourceView:
    base = SourceView(
        id=1,
        kind="phoenix",
        name="Support bot",
        url="http://phoenix.internal:6006",
        project="support-bot",
        secret_name=None,
        status="active",
        grace_seconds=30.0,
        cursor=None,
        state={},
        last_sync_at=None,
        last_success_at=None,
        newest_span_at=None,
        last_error=None,
        last_error_at=None,
        spans_read=0,
        traces_added=0,
        traces_rejected=0,
        late_spans=0,
        spans_waiting=0,
        created_by="ada@test.example",
        created_at=NOW - dt.timedelta(days=2),
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def synced(**changes: object) -> SourceView:
    return view(
        **{
            "last_sync_at": NOW - dt.timedelta(minutes=4),
            "last_success_at": NOW - dt.timedelta(minutes=4),
            "newest_span_at": NOW - dt.timedelta(minutes=7),
            "spans_read": 30,
            "traces_added": 9,
            "spans_waiting": 3,
            "late_spans": 1,
            "traces_rejected": 2,
            **changes,
        }
    )


def row(src: SourceView) -> dict[str, object]:
    frame = display.sources_frame([src], NOW)
    assert list(frame.columns) == list(display.COLUMNS)
    return dict(frame.iloc[0])


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 seconds"),
        (1, "1 second"),
        (59, "59 seconds"),
        (60, "1 minute"),
        (61, "1 minute"),
        (3599, "59 minutes"),
        (3600, "1 hour"),
        (3660, "1 hour 1 minute"),
        (7500, "2 hours 5 minutes"),
        (86400, "1 day"),
        (4 * 86400 + 3600 + 59, "4 days 1 hour"),
        (-30, "0 seconds"),
    ],
)
def test_durations_read_in_their_two_largest_units(seconds: int, text: str) -> None:
    assert display.duration(dt.timedelta(seconds=seconds)) == text


def test_a_source_never_synced_reads_never_and_undefined_not_zero() -> None:
    r = row(view())
    assert r["Last sync"] == "never"
    assert r["Lag"] is None
    for col in ("Traces added", "Spans waiting", "Late spans", "Traces refused"):
        assert r[col] is pd.NA, col
    assert r["Last error"] == "none"
    assert (r["Kind"], r["Status"], r["Name"]) == ("Phoenix project", "active", "Support bot")
    # an OTLP receiver with no address: the URL and project are undefined, not blank
    r = row(view(kind="otlp", url="", project=""))
    assert (r["Kind"], r["URL"], r["Project"]) == ("OTLP/HTTP receiver", None, None)


def test_a_synced_source_shows_its_time_lag_and_counts() -> None:
    r = row(synced())
    assert r["Last sync"] == "2026-12-04 11:56 UTC (4 minutes ago)"
    assert r["Lag"] == "newest span 7 minutes old; last successful sync 4 minutes ago"
    counts = [r[c] for c in ("Traces added", "Spans waiting", "Late spans", "Traces refused")]
    assert counts == [9, 3, 1, 2]
    # zero counts of a source that ran are zeros
    r = row(synced(traces_added=0, spans_waiting=0, late_spans=0, traces_rejected=0))
    assert r["Traces added"] == 0 and r["Late spans"] == 0


def test_lag_of_a_receiver_is_its_newest_span_and_a_phoenix_source_adds_its_last_success() -> None:
    otlp = synced(kind="otlp", url="", project="")
    assert display.lag_text(otlp, NOW) == "newest span 7 minutes old"
    # spans received but nothing synced successfully yet (Phoenix)
    failing = synced(last_success_at=None)
    assert display.lag_text(failing, NOW) == (
        "newest span 7 minutes old; never synced successfully"
    )
    # no span read yet, a sync ran
    empty = synced(newest_span_at=None, spans_read=0)
    assert display.lag_text(empty, NOW).startswith("no span read yet")
    # a span stamped in the future (the source's clock is ahead) is not a negative lag
    ahead = synced(newest_span_at=NOW + dt.timedelta(minutes=2))
    assert display.lag_text(ahead, NOW).startswith("newest span ahead of this clock by 2 minutes")
    assert display.ago(NOW + dt.timedelta(hours=1), NOW).endswith("(ahead of this clock by 1 hour)")
    assert display.ago(NOW, NOW).endswith("(just now)")
    # a naive time is taken as UTC
    assert display.ago(dt.datetime(2026, 12, 4, 11, 0), NOW) == (
        "2026-12-04 11:00 UTC (1 hour ago)"
    )


def test_an_errored_source_shows_the_reason_and_when() -> None:
    src = synced(
        last_sync_at=NOW - dt.timedelta(minutes=1),
        last_error="connection refused",
        last_error_at=NOW - dt.timedelta(minutes=1),
    )
    r = row(src)
    assert r["Last error"] == "2026-12-04 11:59 UTC (1 minute ago): connection refused"
    assert r["Last sync"] == "2026-12-04 11:59 UTC (1 minute ago)"
    # the last successful sync stays older than the last (failed) one
    assert r["Lag"] == "newest span 7 minutes old; last successful sync 4 minutes ago"
    no_time = display.error_text(view(last_error="boom"), NOW)
    assert no_time == "at an unknown time: boom"


def test_a_paused_source_says_so() -> None:
    src = synced(status="paused")
    assert row(src)["Status"] == "paused"
    assert display.source_label(src) == "Support bot (Phoenix project)"
    assert "refuse to run until resumed" in display.paused_text(src)
    assert display.paused_text(synced()) == "Source Support bot resumed."


def test_removal_says_how_many_waiting_spans_it_drops() -> None:
    said = display.removal_warning(synced(spans_waiting=3, traces_added=9))
    assert "3 spans waiting for their trace are dropped" in said
    assert "the 9 traces it added stay" in said
    said = display.removal_warning(synced(spans_waiting=1, traces_added=1))
    assert "1 span waiting for their trace is dropped" in said
    assert "the 1 trace it added stay" in said
    assert "none is dropped" in display.removal_warning(view())
    assert display.removed_text("X", 0) == "Source X removed; no waiting span was dropped."
    assert display.removed_text("X", 2) == "Source X removed; 2 waiting spans dropped."


def test_a_phoenix_source_shows_the_command_that_syncs_it() -> None:
    how = display.connect(synced(secret_name="PHOENIX_API_KEY"))
    assert how.commands == (
        "workbench sync phoenix --url http://phoenix.internal:6006 --project support-bot "
        "--api-key-env PHOENIX_API_KEY"
    )
    assert how.warning is None


def test_an_otlp_source_shows_the_endpoint_env_variable_and_bearer_header() -> None:
    how = display.connect(view(kind="otlp", url="", project="", secret_name="RECEIVER_TOKEN"))
    lines = how.commands.splitlines()
    assert lines[1] == (
        "workbench receive --port 4318 --source 'Support bot' --token-env RECEIVER_TOKEN"
    )
    assert "export OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://HOST:4318/v1/traces" in lines
    assert (
        'export OTEL_EXPORTER_OTLP_TRACES_HEADERS="Authorization=Bearer%20${RECEIVER_TOKEN}"'
        in lines
    )
    assert any("Authorization: Bearer <the value of RECEIVER_TOKEN>" in x for x in lines)
    assert "HOST" in how.intro and how.warning is None
    # a receiver given its public address: that endpoint, its port, listening beyond localhost
    how = display.connect(view(kind="otlp", url="http://traces.example:9000", project=""))
    assert "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://traces.example:9000/v1/traces" in (
        how.commands
    )
    assert "--port 9000" in how.commands and "--host 0.0.0.0" in how.commands
    assert how.warning is not None and "anyone" in how.warning
    how = display.connect(view(kind="otlp", url="https://t.example/v1/traces", project=""))
    assert "=https://t.example/v1/traces\n" in how.commands + "\n"
    assert "--port 4318" in how.commands


_TEXT = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=80
)


@settings(max_examples=200, deadline=None)
@given(
    name=_TEXT,
    url=_TEXT,
    project=_TEXT,
    secret=st.from_regex(r"[A-Za-z_][A-Za-z0-9_.-]{0,20}", fullmatch=True),
)
def test_commands_quote_every_value_for_the_shell(
    name: str, url: str, project: str, secret: str
) -> None:
    """A hostile name, URL or project is one argument of the command it is pasted into,
    exactly as stored (no command substitution, no second command)."""
    phx = display.connect(view(name=name, url=url, project=project, secret_name=secret))
    argv = shlex.split(phx.commands)
    assert argv[argv.index("--url") + 1] == url
    assert argv[argv.index("--project") + 1] == project
    assert argv[argv.index("--api-key-env") + 1] == secret
    otlp = display.connect(view(kind="otlp", name=name, url="", project="", secret_name=secret))
    argv = shlex.split(otlp.commands, comments=True)
    assert argv[argv.index("--source") + 1] == name


@settings(max_examples=200, deadline=None)
@given(name=_TEXT, url=_TEXT, error=_TEXT)
def test_hostile_names_urls_and_errors_stay_text(name: str, url: str, error: str) -> None:
    """The table keeps them verbatim (cells are text); every sentence a page shows in
    Markdown is inert once through the pages' escaper."""
    src = synced(
        name=name,
        url=url,
        project=url,
        last_error=error or "x",
        last_error_at=NOW,
    )
    r = row(src)
    assert (r["Name"], r["URL"] or "", r["Project"] or "") == (name, url, url)
    assert str(r["Last error"]).endswith(": " + (error or "x"))
    said = [
        display.source_label(src),
        display.removal_warning(src),
        display.added_text(src),
        display.removed_text(src.name, 3),
        display.paused_text(src),
        display.connect(src).intro,
        display.connect(dataclasses.replace(src, kind="otlp")).intro,
        *display.freshness_lines(Freshness(NOW, NOW, (src,)), NOW),
    ]
    for text in said:
        assert live_markdown(markdown_text(text)) == [], text


def test_hostile_text_escaped_reads_as_typed() -> None:
    src = synced(name=HOSTILE, last_error=HOSTILE, last_error_at=NOW)
    line = display.freshness_lines(Freshness(NOW, None, (src,)), NOW)[1]
    assert HOSTILE in line
    assert live_markdown(line)  # raw, it would be live
    assert live_markdown(markdown_text(line)) == []


def test_freshness_without_a_source_says_traces_arrive_by_file_import() -> None:
    lines = display.freshness_lines(
        Freshness(NOW - dt.timedelta(days=3), NOW - dt.timedelta(hours=2), ()), NOW
    )
    assert lines == [
        "Newest trace: 2026-12-01 12:00 UTC (3 days ago).",
        "Traces arrive by file import (no live source is set up); the last import finished "
        "2026-12-04 10:00 UTC (2 hours ago).",
    ]
    lines = display.freshness_lines(Freshness(None, None, ()), NOW)
    assert lines == [
        "No trace yet.",
        "Traces arrive by file import (no live source is set up); no import has finished yet.",
    ]


def test_freshness_names_each_live_source_with_its_last_success_and_lag() -> None:
    phx = synced(name="Support bot")
    rcv = synced(
        kind="otlp",
        name="Receiver",
        status="paused",
        last_success_at=NOW - dt.timedelta(seconds=40),
        newest_span_at=None,
        last_error="database busy",
        last_error_at=NOW - dt.timedelta(seconds=10),
    )
    never = view(name="New one")
    lines = display.freshness_lines(Freshness(NOW, NOW, (phx, rcv, never)), NOW)
    assert lines[1] == (
        "Support bot (Phoenix project): last successful sync 2026-12-04 11:56 UTC "
        "(4 minutes ago); newest span 7 minutes old."
    )
    assert lines[2] == (
        "Receiver (OTLP/HTTP receiver, paused): last ran 2026-12-04 11:59 UTC "
        "(40 seconds ago); no span read yet; last error 2026-12-04 11:59 UTC "
        "(10 seconds ago): database busy."
    )
    assert lines[3] == ("New one (Phoenix project): last successful sync never; no span read yet.")


def test_freshness_is_read_from_the_database(engine: Engine, admin: Actor) -> None:
    empty = read_freshness(engine)
    assert empty == Freshness(None, None, ())
    sid = sources.add_source(engine, admin, kind="otlp", name="receiver", grace_seconds=0).id
    staging.stage(engine, sid, rag_trace(3))
    staging.assemble(engine, admin, sid, now=T0 + dt.timedelta(days=3650))
    sources.record_sync(engine, sid, at=NOW)
    f = read_freshness(engine)
    assert f.newest_trace_at == T0
    assert [s.name for s in f.sources] == ["receiver"]
    src = f.sources[0]
    assert src.last_success_at == NOW
    assert src.newest_span_at is not None and src.newest_span_at >= T0
