"""A live source's assembly passes fold into one import log entry per source and hour: a real
OTLP/HTTP receiver fed by the real OpenTelemetry SDK exporter, many passes each importing a
trace or two, then the import log (one entry, its counts the sum of the passes) and the audit
log (every pass still there: reopened, its batches, closed with the run's totals and its own).
An hour that has passed, or an import another process made, starts a new entry."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult
from sqlalchemy import Engine, select, update

from review.core.identity import SYSTEM
from review.traces import importer
from review.traces.importlog import RUN_ENTITY
from review.traces.live import sources
from review.traces.live.receiver import Receiver, ReceiverConfig
from storage import runs
from storage.db import read_session
from storage.models import AuditLog, TraceImport
from tests.helpers.ragspans import make_rag_spans

LABEL = "live source fold test (otlp)"


@pytest.fixture
def receiver(engine: Engine) -> Iterator[tuple[Receiver, OTLPSpanExporter]]:
    src = sources.add_source(engine, SYSTEM, kind="otlp", name="fold test", grace_seconds=0)
    r = Receiver(engine, SYSTEM, src.id, ReceiverConfig(port=0, assemble_every=None))
    port = r.start()
    exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces", timeout=180)
    yield r, exporter
    exporter.shutdown()
    r.stop()


def _passes(r: Receiver, exporter: OTLPSpanExporter, sizes: list[int], seed: int) -> list[int]:
    """One export and one assembly pass per size; what each pass imported."""
    imported: list[int] = []
    for i, n in enumerate(sizes):
        spans, _ = make_rag_spans(n, seed=seed + 100 * i)
        assert exporter.export(spans) == SpanExportResult.SUCCESS
        result = r.assemble_once()
        assert result is not None and result.rejected == 0
        imported.append(result.imported)
    return imported


def _entries(engine: Engine) -> list[TraceImport]:
    with read_session(engine) as s:
        rows = s.scalars(
            select(TraceImport).where(TraceImport.source == LABEL).order_by(TraceImport.id)
        )
        return list(rows)


def _log(engine: Engine, import_id: int) -> list[AuditLog]:
    with read_session(engine) as s:
        return list(
            s.scalars(
                select(AuditLog)
                .where(AuditLog.entity == RUN_ENTITY, AuditLog.entity_id == str(import_id))
                .order_by(AuditLog.id)
            )
        )


def test_many_passes_make_one_import_log_entry_whose_counts_are_their_sum(
    engine: Engine, receiver: tuple[Receiver, OTLPSpanExporter]
) -> None:
    r, exporter = receiver
    sizes = [1, 2, 1, 3, 1, 1, 2, 1, 1, 2, 1, 1]
    imported = _passes(r, exporter, sizes, seed=0)
    assert imported == sizes
    assert r.assemble_once() is not None  # a pass that imports nothing adds no entry
    [entry] = _entries(engine)
    assert (entry.status, entry.added, entry.skipped, entry.rejected) == ("done", sum(sizes), 0, 0)
    assert entry.message.startswith(f"{len(sizes)} imports of this source this hour, folded")
    # the Traces page's import log shows the one entry
    assert [row.id for row in importer.recent_imports(engine) if row.source == LABEL] == [entry.id]

    # the audit log keeps every pass: one start, then per pass a reopening progress entry
    # (but the first), its batch's progress entry and its closing entry
    log = _log(engine, entry.id)
    actions = [e.action for e in log]
    assert actions.count("start") == 1 and actions[0] == "start"
    closes = [e for e in log if e.action == "import"]
    assert len(closes) == len(sizes)
    reopened = [e for e in log if e.action == "progress" and "reopened" in (e.after or {})]
    assert [(e.after or {})["pass"] for e in reopened] == list(range(2, len(sizes) + 1))
    after = [e.after or {} for e in closes]
    assert [a.get("pass_counts", a)["added"] for a in after] == sizes
    running_total = [sum(sizes[: i + 1]) for i in range(len(sizes))]
    assert [a["added"] for a in after] == running_total
    assert after[-1]["passes"] == len(sizes)
    # the run as the audit pages derive it: completed, with the totals
    with read_session(engine) as s:
        state = runs.state_of(s, RUN_ENTITY, entry.id)
        listed = [x for x in runs.recent(s, RUN_ENTITY) if x.plan.get("source") == LABEL]
    assert state is not None and state.status == "completed"
    assert state.counts["added"] == sum(sizes)
    assert [x.entity_id for x in listed] == [str(entry.id)]


def test_a_new_hour_or_another_process_starts_a_new_entry(
    engine: Engine, receiver: tuple[Receiver, OTLPSpanExporter]
) -> None:
    r, exporter = receiver
    _passes(r, exporter, [1, 1], seed=0)
    [first] = _entries(engine)
    # the entry was started in the previous hour: the next pass starts this hour's
    with engine.begin() as conn:
        conn.execute(
            update(TraceImport)
            .where(TraceImport.id == first.id)
            .values(started_at=first.started_at - dt.timedelta(hours=1))
        )
    _passes(r, exporter, [2, 1], seed=1000)
    entries = _entries(engine)
    assert [e.added for e in entries] == [2, 3]
    # an entry another process started (its start entry names another pid) is not reopened
    start = next(e for e in _log(engine, entries[1].id) if e.action == "start")
    with engine.begin() as conn:
        conn.execute(
            update(AuditLog)
            .where(AuditLog.id == start.id)
            .values(after={**(start.after or {}), "pid": 4_194_305})  # above any pid_max
        )
    _passes(r, exporter, [1], seed=2000)
    assert [e.added for e in _entries(engine)] == [2, 3, 1]


def test_the_receivers_own_loop_folds_its_passes_too(engine: Engine) -> None:
    """The background loop (a pass every 0.1 s here, 5 s by default) while an exporter sends
    traces one by one: however many passes imported them, one entry holds them all."""
    from review.traces import browse

    src = sources.add_source(engine, SYSTEM, kind="otlp", name="fold test", grace_seconds=0)
    r = Receiver(engine, SYSTEM, src.id, ReceiverConfig(port=0, assemble_every=0.1))
    port = r.start()
    exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces", timeout=180)
    sent: list[str] = []
    try:
        for i in range(15):
            spans, expected = make_rag_spans(1, seed=5000 + i)
            assert exporter.export(spans) == SpanExportResult.SUCCESS
            sent.append(expected[0].trace_id)
            time.sleep(0.05)
        deadline = time.monotonic() + 180
        while not all(browse.get_trace(engine, SYSTEM, trace_id=t) for t in sent):
            assert time.monotonic() < deadline, "the loop did not import every trace"
            time.sleep(0.1)
    finally:
        exporter.shutdown()
        r.stop()
    [entry] = _entries(engine)
    assert (entry.status, entry.added) == ("done", len(sent))
    closes = [e.after or {} for e in _log(engine, entry.id) if e.action == "import"]
    assert closes[-1].get("passes", 1) == len(closes)
    assert sum(a.get("pass_counts", a)["added"] for a in closes) == len(sent)
