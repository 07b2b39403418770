"""How live trace sources read on the pages, as plain data: the Traces page's sources table,
the way to point an exporter at the receiver or to sync a Phoenix project, the words said after
adding, pausing, resuming or removing a source, and the freshness lines of the Monitoring page.

Pure functions of :class:`~review.traces.live.sources.SourceView` rows and a given ``now`` (the
tests fix it). Text a source came with (its name, URL, project, an error quoting a server) is
returned as it is: the pages show it in table cells and code blocks, or through the pages' one
escaper where Markdown renders it. A figure of a source that has never synced or received
reads "never" or "—", not 0.
"""

from __future__ import annotations

import datetime as dt
import shlex
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import pandas as pd

from review.core import readable
from review.traces.live.beside import BesideStatus
from review.traces.live.phoenix import DEFAULT_OVERLAP_SECONDS, SyncReport
from review.traces.live.sources import SourceView
from review.traces.live.tally import RequestCounts

__all__ = [
    "COLUMNS",
    "KIND_LABELS",
    "NEVER",
    "RECEIVER_PORT",
    "Connect",
    "Freshness",
    "added_text",
    "ago",
    "beside_text",
    "connect",
    "duration",
    "error_text",
    "freshness_lines",
    "lag_text",
    "panel_label",
    "panel_note",
    "paused_text",
    "removal_warning",
    "removed_text",
    "requests_text",
    "source_label",
    "sources_frame",
    "status_text",
]

#: What a source's kind reads as.
KIND_LABELS = {"phoenix": "Phoenix project", "otlp": "OTLP/HTTP receiver"}
#: What a source's status reads as.
STATUS_LABELS = {"active": "active", "paused": "paused"}
#: A time that has not come yet (a source never synced).
NEVER = "never"
#: The receiver's default port (OTLP/HTTP's own).
RECEIVER_PORT = 4318
#: The sources table's columns, in order.
COLUMNS = (
    "Name",
    "Kind",
    "Status",
    "Last sync",
    "Lag",
    "Last error",
    "Traces added",
    "Spans waiting",
    "Late spans",
    "Traces refused",
    "Requests",
    "URL",
    "Project",
)


def _utc(value: dt.datetime) -> dt.datetime:
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def kind_label(kind: str) -> str:
    return KIND_LABELS.get(kind, readable.humanize(kind))


def status_text(status: str) -> str:
    return STATUS_LABELS.get(status, readable.humanize(status))


def duration(delta: dt.timedelta) -> str:
    """A span of time in words, to the second under a minute and in its two largest units
    above: "45 seconds", "3 minutes", "2 hours 5 minutes", "4 days 1 hour". A negative span
    reads as "0 seconds" (the callers say when a time lies ahead)."""
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 60:
        return readable.count(seconds, "second")
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if minutes < 60:
        return readable.count(minutes, "minute")
    if hours < 24:
        rest = minutes % 60
        return readable.count(hours, "hour") + (
            f" {readable.count(rest, 'minute')}" if rest else ""
        )
    rest = hours % 24
    return readable.count(days, "day") + (f" {readable.count(rest, 'hour')}" if rest else "")


def _since(at: dt.datetime, now: dt.datetime) -> str:
    """ "5 minutes ago", "just now", or "ahead of this clock by 2 minutes"."""
    delta = _utc(now) - _utc(at)
    if delta < dt.timedelta(0):
        if -delta < dt.timedelta(seconds=1):
            return "just now"
        return f"ahead of this clock by {duration(-delta)}"
    if delta < dt.timedelta(seconds=1):
        return "just now"
    return f"{duration(delta)} ago"


def ago(at: dt.datetime | None, now: dt.datetime, missing: str = NEVER) -> str:
    """A time and how long ago it was: "2026-12-04 23:50 UTC (7 minutes ago)"; ``missing``
    ("never") when there is none."""
    if at is None:
        return missing
    return f"{readable.when(_utc(at))} ({_since(at, now)})"


def _happened(src: SourceView) -> bool:
    """Whether the source has synced or received anything (else its figures are undefined)."""
    return src.last_sync_at is not None or src.spans_read > 0


def lag_text(src: SourceView, now: dt.datetime) -> str:
    """How far behind the source the workbench is: how old the newest span read is and, for
    a Phoenix source, how long since its last successful sync."""
    if src.newest_span_at is None:
        parts = ["no span read yet"]
    else:
        behind = _utc(now) - _utc(src.newest_span_at)
        if behind < dt.timedelta(0):
            parts = [f"newest span ahead of this clock by {duration(-behind)}"]
        else:
            parts = [f"newest span {duration(behind)} old"]
    if src.kind == "phoenix":
        if src.last_success_at is None:
            parts.append("never synced successfully")
        else:
            parts.append(f"last successful sync {_since(src.last_success_at, now)}")
    return "; ".join(parts)


def error_text(src: SourceView, now: dt.datetime) -> str:
    """The last error with its time, "none" when the last sync succeeded or nothing ran."""
    if not src.last_error:
        return "none"
    when = src.last_error_at or src.last_sync_at
    head = ago(when, now, missing="at an unknown time")
    return f"{head}: {src.last_error}"


#: Why the receiver answers a request with a status other than 200, in a few words.
REFUSALS = {
    400: "malformed",
    401: "no valid token",
    408: "too slow",
    413: "too large",
    415: "not OTLP protobuf or JSON",
    429: "too many at once",
    500: "receiver error",
    503: "database busy or source paused",
}


def requests_text(counts: RequestCounts | None, now: dt.datetime) -> str | None:
    """What a receiver answered: "12 requests accepted (36 spans); 3 refused: 2 × 401 no
    valid token, 1 × 413 too large; last request 2026-12-05 03:30 UTC (5 seconds ago)".
    None for a source that receives nothing (Phoenix)."""
    if counts is None:
        return None
    if counts.requests == 0:
        return "no request received yet"
    parts = [
        f"{readable.count(counts.accepted, 'request')} accepted "
        f"({readable.count(counts.spans, 'span')})"
    ]
    refused = sum(counts.refused.values())
    if refused:
        why = ", ".join(
            f"{n:,} × {status} {REFUSALS.get(status, 'refused')}"
            for status, n in sorted(counts.refused.items())
        )
        parts.append(f"{refused:,} refused: {why}")
    parts.append(f"last request {ago(counts.last_at, now)}")
    return "; ".join(parts)


def _count(src: SourceView, value: int) -> int | None:
    return value if _happened(src) else None


def sources_frame(rows: Sequence[SourceView], now: dt.datetime) -> pd.DataFrame:
    """One row per source, in words (:data:`COLUMNS`); a count of a source that has not
    synced or received anything yet is empty (shown "—"), not 0."""
    records = [
        {
            "Name": src.name,
            "Kind": kind_label(src.kind),
            "URL": src.url or None,
            "Project": src.project or None,
            "Status": status_text(src.status),
            "Last sync": ago(src.last_sync_at, now),
            "Lag": lag_text(src, now) if _happened(src) else None,
            "Traces added": _count(src, src.traces_added),
            "Spans waiting": _count(src, src.spans_waiting),
            "Late spans": _count(src, src.late_spans),
            "Traces refused": _count(src, src.traces_rejected),
            "Requests": requests_text(src.requests, now),
            "Last error": error_text(src, now),
        }
        for src in rows
    ]
    frame = pd.DataFrame(records, columns=list(COLUMNS))
    for col in ("Traces added", "Spans waiting", "Late spans", "Traces refused"):
        frame[col] = frame[col].astype("Int64")
    return frame


def panel_label(rows: Sequence[SourceView], receiver_down: bool = False) -> str:
    """The sources panel's title, saying at a glance how many there are and what is wrong:
    "Live sources: 3 (1 paused, 1 failing)", "... (the receiver beside the app stopped)"."""
    down = ["the receiver beside the app stopped"] if receiver_down else []
    if not rows:
        head = "Live sources: none (traces arrive by file import)"
        return head[:-1] + f"; {down[0]})" if down else head
    paused = sum(s.status == "paused" for s in rows)
    failing = sum(bool(s.last_error) for s in rows)
    notes = [f"{paused} paused"] if paused else []
    notes += [f"{failing} failing"] if failing else []
    notes += down
    return f"Live sources: {len(rows)}" + (f" ({', '.join(notes)})" if notes else "")


def _exit_text(code: int | None) -> str:
    if code is None:
        return "for a reason not known"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "an unknown signal"
        return f"killed by signal {-code}, {name}"
    return f"exit status {code}"


def beside_text(status: BesideStatus, now: dt.datetime) -> tuple[str, str]:
    """What the receiver started beside the app is doing, and how to show it (``info``,
    ``warning`` or ``error``): listening where, for which source; or stopped, how and when,
    and when it is started again (its last lines are shown beside)."""
    src = f"for the source {status.settings.source!r}"
    before = ""
    if status.restarts and status.exited_at is not None:
        before = (
            f"; it stopped {readable.count(status.restarts, 'time')} so far (the last time "
            f"{ago(status.exited_at, now)}: {_exit_text(status.exit_code)}) and was started again"
        )
    if status.state == "listening":
        return (
            f"The receiver beside the app listens on {status.url} {src} (process "
            f"{status.pid}){before}.",
            "warning" if before else "info",
        )
    if status.state == "starting":
        return (
            f"The receiver beside the app is starting on {status.settings.host}:"
            f"{status.settings.port} {src} (process {status.pid}){before}.",
            "warning" if before else "info",
        )
    if status.state == "stopped":
        return ("The receiver beside the app is stopping with the app.", "warning")
    again = ""
    if status.restart_at is not None:
        wait = _utc(status.restart_at) - _utc(now)
        again = (
            f"; it is started again in {duration(wait)}"
            if wait >= dt.timedelta(seconds=1)
            else "; it is being started again"
        )
    return (
        f"The receiver beside the app stopped "
        f"{ago(status.exited_at, now, 'at a time not known')} "
        f"({_exit_text(status.exit_code)}){again}. Exporters sending to "
        f"{status.settings.host}:{status.settings.port} get no answer meanwhile (they retry). "
        "Its last lines are below.",
        "error",
    )


def panel_note(rows: Sequence[SourceView]) -> str:
    """What the panel's figures mean (or, with no source, how traces arrive)."""
    if not rows:
        return (
            "No live source yet: traces arrive by file import (Import traces above, or "
            "workbench import-traces). A live source is a Phoenix project the workbench syncs "
            "or the OTLP/HTTP receiver an OpenTelemetry exporter sends to."
        )
    return (
        "Last sync: a Phoenix source's last sync, the receiver's last pass (every few seconds "
        "while it runs). Lag: how old the newest span read is and, for a Phoenix source, how "
        "long since its last successful sync. A span waits until its trace's root span has "
        "arrived and the grace period has passed; a span that comes after its trace was "
        "imported is late (counted, not imported); a trace whose root never came is refused. "
        "Requests: what a receiver answered exporters, counted every few seconds while it "
        "runs: requests accepted with their spans, requests refused by HTTP status."
    )


def source_label(src: SourceView) -> str:
    """A source in a picker: "Support bot (Phoenix project)" (its status is in the table and
    on its button: a picker's labels are not redrawn when only a label changes)."""
    return f"{src.name} ({kind_label(src.kind)})"


@dataclass(frozen=True, slots=True)
class Connect:
    """How to connect a source: a sentence, the commands (shell, quoted) and a warning when
    something is missing (no token)."""

    intro: str
    commands: str
    warning: str | None = None


def _endpoint(url: str) -> tuple[str, int]:
    """The OTLP/HTTP traces endpoint an exporter posts to, and the port the receiver listens
    on, for a receiver reached at ``url`` (empty: this machine, the default port)."""
    if not url:
        return f"http://HOST:{RECEIVER_PORT}/v1/traces", RECEIVER_PORT
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    path = parts.path.rstrip("/")
    full = url.rstrip("/") if path.endswith("/v1/traces") else f"{url.rstrip('/')}/v1/traces"
    return full, port or RECEIVER_PORT


def connect(src: SourceView) -> Connect:
    """For an OTLP source: the receiver's command and how to point an OpenTelemetry exporter
    at it (endpoint, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, the bearer token header). For a
    Phoenix source: the command that syncs it."""
    q = shlex.quote
    if src.kind == "phoenix":
        cmd = f"workbench sync phoenix --url {q(src.url)} --project {q(src.project)}"
        if src.secret_name:
            cmd += f" --api-key-env {q(src.secret_name)}"
        return Connect(
            intro=(
                "Sync this project from the command line (it resumes where the last sync "
                "stopped); add --every 60 to keep syncing every minute."
            ),
            commands=cmd,
        )
    endpoint, port = _endpoint(src.url)
    receive = f"workbench receive --port {port} --source {q(src.name)}"
    host = urlsplit(src.url).hostname if src.url else None
    if host and host not in ("127.0.0.1", "localhost", "::1"):
        receive += " --host 0.0.0.0"
    lines = ["# on the workbench's machine", receive]
    if src.secret_name:
        receive_token = f" --token-env {q(src.secret_name)}"
        lines[1] += receive_token
    lines += ["", "# in the environment of the application that exports its traces"]
    lines.append(f"export OTEL_EXPORTER_OTLP_TRACES_ENDPOINT={q(endpoint)}")
    warning = None
    if src.secret_name:
        var = src.secret_name if src.secret_name.isidentifier() else "TOKEN"
        lines.append(
            f'export OTEL_EXPORTER_OTLP_TRACES_HEADERS="Authorization=Bearer%20${{{var}}}"'
        )
        lines.append(
            f"# the exporter then sends the header  Authorization: Bearer <the value of "
            f"{src.secret_name}>"
        )
    else:
        warning = (
            "No secret is named, so the receiver takes spans from anyone who reaches its port; "
            "name a secret (a bearer token) for a receiver others can reach."
        )
    intro = (
        "Start the receiver, then point an OpenTelemetry exporter at it (OTLP/HTTP, protobuf "
        f"or JSON): the endpoint is {endpoint}"
        + (
            ", HOST being this machine's address as the exporter reaches it."
            if not src.url
            else "."
        )
    )
    return Connect(intro=intro, commands="\n".join(lines), warning=warning)


def removal_warning(src: SourceView) -> str:
    """What removing ``src`` loses, said before it is confirmed."""
    kept = (
        f"the {readable.count(src.traces_added, 'trace')} it added stay"
        if src.traces_added
        else "it added no trace"
    )
    if src.spans_waiting:
        lost = (
            f"{readable.count(src.spans_waiting, 'span')} waiting for their trace "
            f"{'is' if src.spans_waiting == 1 else 'are'} dropped"
        )
    else:
        lost = "no span is waiting for its trace, so none is dropped"
    return f"Removing {src.name} forgets where its syncs stopped; {lost}; {kept}."


def added_text(src: SourceView) -> str:
    return (
        f"Source {src.name} added ({kind_label(src.kind)}, grace period "
        f"{readable.number(src.grace_seconds)} s)."
    )


def removed_text(name: str, dropped: int) -> str:
    tail = (
        f"{readable.count(dropped, 'waiting span')} dropped"
        if dropped
        else "no waiting span was dropped"
    )
    return f"Source {name} removed; {tail}."


def paused_text(src: SourceView) -> str:
    if src.status == "paused":
        return f"Source {src.name} paused: its syncs and its receiver refuse to run until resumed."
    return f"Source {src.name} resumed."


@dataclass(frozen=True, slots=True)
class Freshness:
    """How fresh the traces are: the newest trace's time, the live sources, and when the last
    file import finished."""

    newest_trace_at: dt.datetime | None
    last_import_at: dt.datetime | None
    sources: tuple[SourceView, ...]


def _source_line(src: SourceView, now: dt.datetime) -> str:
    # the receiver records a successful pass every few seconds while it runs, spans or not:
    # it says the receiver ran; how fresh its spans are is the newest span's age
    what = "last successful sync" if src.kind == "phoenix" else "last ran"
    paused = ", paused" if src.status == "paused" else ""
    head = f"{src.name} ({kind_label(src.kind)}{paused})"
    parts = [f"{what} {ago(src.last_success_at, now)}"]
    if src.newest_span_at is not None:
        behind = _utc(now) - _utc(src.newest_span_at)
        parts.append(
            f"newest span {duration(behind)} old"
            if behind >= dt.timedelta(0)
            else f"newest span ahead of this clock by {duration(-behind)}"
        )
    else:
        parts.append("no span read yet")
    if src.last_error:
        parts.append(f"last error {error_text(src, now)}")
    return f"{head}: " + "; ".join(parts) + "."


def freshness_lines(f: Freshness, now: dt.datetime) -> list[str]:
    """The Monitoring page's lines on how fresh its data is: the newest trace, then each live
    source's last successful sync or receive and lag, or, with no source, that traces arrive
    by file import and when the last import finished."""
    lines = [
        f"Newest trace: {ago(f.newest_trace_at, now)}."
        if f.newest_trace_at is not None
        else "No trace yet."
    ]
    if f.sources:
        lines += [_source_line(src, now) for src in f.sources]
    elif f.last_import_at is not None:
        lines.append(
            "Traces arrive by file import (no live source is set up); the last import "
            f"finished {ago(f.last_import_at, now)}."
        )
    else:
        lines.append(
            "Traces arrive by file import (no live source is set up); no import has finished yet."
        )
    return lines


#: pages a "Sync now" press reads at most (a page is up to 1,000 spans); a larger backlog is
#: the command's work (``workbench sync phoenix --every``), so the page answers in seconds
SYNC_NOW_PAGES = 5


def synced_text(report: SyncReport, max_pages: int = SYNC_NOW_PAGES) -> tuple[str, str]:
    """What a "Sync now" press did, and its kind (success, or warning when it stopped on an
    error or left pages to read)."""
    parts = [
        f"Read {readable.count(report.spans_read, 'span')} "
        f"({report.added:,} new) in {readable.count(report.pages, 'page')}",
        f"{readable.count(report.imported, 'trace')} imported",
    ]
    if report.rejected:
        first = next(iter(report.reasons.values()), "")
        parts.append(
            f"{readable.count(report.rejected, 'trace')} refused"
            + (f" (first reason: {first[:300]})" if first else "")
        )
    parts.append(f"{readable.count(report.waiting_spans, 'span')} wait for their trace")
    text = "; ".join(parts) + "."
    if report.waiting_spans and not report.error:
        text += (
            " A trace is imported by the first sync at least the overlap window ("
            f"{duration(dt.timedelta(seconds=DEFAULT_OVERLAP_SECONDS))}) after its newest span, "
            "so that no late span is left out of it."
        )
    if report.error:
        return f"{text} The sync stopped: {report.error[:500]}", "warning"
    if report.pages >= max_pages:
        return (
            f"{text} It stopped after {max_pages} pages; more may wait: press again, or run "
            "workbench sync phoenix --every 60 beside the app.",
            "warning",
        )
    return text, "success"
