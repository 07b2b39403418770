"""Interrupted work leaves a record (issue 16, item 9): a trace import or purge writes its
audit-log start entry when it begins, a progress entry with every committed batch and a
closing entry; a run killed on the way shows as interrupted with the counts of its last
committed batch, and the run that completes it says so. The audit log stays append-only."""

from __future__ import annotations

import datetime as dt
import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine, select

from review.admin import changelog
from review.core.identity import SYSTEM
from review.traces import importer, retention
from storage import runs
from storage.db import read_session
from storage.models import AuditLog, utcnow
from tests.helpers.actors import make_actor
from tests.helpers.paths import ROOT
from tests.helpers.traces import canonical_lines, chunk, import_traces, make_trace, write_jsonl

ADMIN = make_actor("admin", clearance=True, uid=15)
UTC = dt.UTC


def log(engine: Engine, entity: str, entity_id: object) -> list[tuple[str, dict[str, Any]]]:
    """The audit entries of one run, oldest first: (action, after)."""
    with engine.connect() as c:
        rows = c.execute(
            select(AuditLog.action, AuditLog.after)
            .where(AuditLog.entity == entity, AuditLog.entity_id == str(entity_id))
            .order_by(AuditLog.id)
        ).all()
    return [(r[0], dict(r[1] or {})) for r in rows]


def run_of(engine: Engine, entity: str, entity_id: object) -> runs.RunState:
    with read_session(engine) as s:
        state = runs.state_of(s, entity, entity_id)
    assert state is not None
    return state


def trace_file(tmp_path: Path, n: int, name: str = "t.jsonl") -> Path:
    items = [make_trace(f"r-{i:02d}", chunks=[chunk("a"), chunk("b", rank=2)]) for i in range(n)]
    return write_jsonl(tmp_path / name, canonical_lines(items))


def fail_on_batch(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """Make the n-th batch's chunk insert raise, after its traces are written (not committed)."""
    real = importer.insert_chunks
    calls = {"n": 0}

    def failing(session: Any, rows: list[tuple[Any, ...]]) -> None:
        calls["n"] += 1
        real(session, rows)
        if calls["n"] == n:
            raise OSError("disk full")

    monkeypatch.setattr(importer, "insert_chunks", failing)


# ---------------------------------------------------------------------------------------
# Trace imports


def test_a_completed_import_logs_start_progress_and_its_close(
    engine: Engine, tmp_path: Path
) -> None:
    path = trace_file(tmp_path, 5)
    report = importer.import_file(engine, ADMIN, path, "canonical", batch_size=2)
    entries = log(engine, "trace_import", report.import_id)
    assert [a for a, _ in entries] == ["start", "progress", "progress", "progress", "import"]
    start = entries[0][1]
    assert start["source"] == str(path) and start["format"] == "canonical"
    assert start["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert start["bytes"] == path.stat().st_size
    assert (start["traces"], start["batch_size"], start["skip_bad"]) == (5, 2, False)
    assert [e[1]["added"] for e in entries[1:4]] == [2, 4, 5]
    state = run_of(engine, "trace_import", report.import_id)
    assert state.status == "completed" and state.describe() == "completed"
    assert (state.counts["added"], state.counts["skipped"]) == (5, 0)


def test_a_failing_import_is_closed_as_failed_with_only_committed_batches_counted(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fail_on_batch(monkeypatch, 3)
    with pytest.raises(OSError, match="disk full"):
        importer.import_file(engine, ADMIN, trace_file(tmp_path, 9), "canonical", batch_size=2)
    import_id = importer.recent_imports(engine)[0].id
    entries = log(engine, "trace_import", import_id)
    # the third batch's progress entry was rolled back with its traces
    assert [a for a, _ in entries] == ["start", "progress", "progress", "import"]
    assert entries[-1][1]["status"] == "failed" and entries[-1][1]["added"] == 4
    state = run_of(engine, "trace_import", import_id)
    assert state.status == "failed" and state.counts["added"] == 4
    assert state.describe() == "failed: disk full"


def test_an_import_that_never_closes_is_interrupted_and_a_rerun_resumes_it(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = trace_file(tmp_path, 9)
    fail_on_batch(monkeypatch, 3)
    # the process dies before it can write the closing entry
    monkeypatch.setattr(importer, "_close_import", lambda *a, **k: None)
    with pytest.raises(OSError):
        importer.import_file(engine, ADMIN, path, "canonical", batch_size=2)
    first = importer.recent_imports(engine)[0].id
    assert [a for a, _ in log(engine, "trace_import", first)] == ["start", "progress", "progress"]
    # its process (this one) still exists and it wrote a moment ago: it may be running
    assert run_of(engine, "trace_import", first).status == "running"
    later = utcnow() + runs.STALE_AFTER + dt.timedelta(minutes=1)
    monkeypatch.setattr(runs, "utcnow", lambda: later)
    stale = run_of(engine, "trace_import", first)
    assert stale.status == "interrupted" and stale.counts["added"] == 4
    monkeypatch.undo()

    monkeypatch.setattr(runs, "process_alive", lambda host, pid: False)
    state = run_of(engine, "trace_import", first)
    assert state.status == "interrupted"
    assert (state.counts["added"], state.counts["of"], state.progress_entries) == (4, 9, 2)
    assert "counts as of its last progress entry" in state.describe()
    assert importer.recent_imports(engine)[0].status == "interrupted"
    assert changelog.runs_frame(changelog.recent_runs(engine))["status"].tolist() == ["interrupted"]

    report = importer.import_file(engine, ADMIN, path, "canonical", batch_size=2)
    assert (report.added, report.skipped) == (5, 4)
    assert log(engine, "trace_import", report.import_id)[0][1]["resumes"] == [str(first)]
    old = run_of(engine, "trace_import", first)
    assert old.status == "interrupted" and old.resumed_by == str(report.import_id)
    assert f"resumed by trace_import {report.import_id}" in old.describe()
    new = run_of(engine, "trace_import", report.import_id)
    assert new.status == "completed"
    assert new.describe() == f"completed; resumes interrupted trace_import {first}"
    # a different file does not claim to resume anything
    other = importer.import_file(engine, ADMIN, trace_file(tmp_path, 2, "other.jsonl"))
    assert "resumes" not in log(engine, "trace_import", other.import_id)[0][1]


def test_an_import_killed_with_sigkill_shows_interrupted_with_its_counts(
    engine: Engine, sqlite_url: str, tmp_path: Path
) -> None:
    path = trace_file(tmp_path, 10)
    script = f"""
import os, signal, sys
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
from review.core.identity import SYSTEM
from review.traces import importer
from storage.db import make_engine

calls = 0
real = importer.insert_chunks

def dying(session, rows):
    global calls
    calls += 1
    real(session, rows)
    if calls == 3:  # the third batch is written, not committed
        os.kill(os.getpid(), signal.SIGKILL)

importer.insert_chunks = dying
importer.import_file(make_engine({sqlite_url!r}), SYSTEM, Path({str(path)!r}), "canonical",
                     batch_size=3)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == -9, done.stderr
    first = importer.recent_imports(engine)[0].id
    entries = log(engine, "trace_import", first)
    assert [a for a, _ in entries] == ["start", "progress", "progress"]
    assert entries[0][1]["pid"] != 0 and entries[-1][1]["added"] == 6
    state = run_of(engine, "trace_import", first)
    assert state.status == "interrupted" and state.counts["added"] == 6
    assert importer.recent_imports(engine)[0].status == "interrupted"
    report = importer.import_file(engine, SYSTEM, path, "canonical", batch_size=3)
    assert (report.added, report.skipped) == (4, 6)
    assert run_of(engine, "trace_import", first).resumed_by == str(report.import_id)


def test_the_demo_import_without_a_file_is_logged_too(engine: Engine) -> None:
    report = import_traces(engine, [make_trace("d1"), make_trace("d2")])
    entries = log(engine, "trace_import", report.import_id)
    assert [a for a, _ in entries] == ["start", "progress", "import"]
    assert "sha256" not in entries[0][1]


# ---------------------------------------------------------------------------------------
# Purges


NOW = dt.datetime(2025, 7, 1, 12, tzinfo=UTC)


def old_traces(engine: Engine, n: int) -> None:
    import_traces(
        engine,
        [
            make_trace(f"old-{i}", NOW - dt.timedelta(days=40 + i), chunks=[chunk("c")])
            for i in range(n)
        ],
    )


def purge_ids(engine: Engine) -> list[str]:
    return [r.entity_id for r in changelog.recent_runs(engine) if r.entity == "trace_purge"]


def test_a_completed_purge_logs_start_progress_and_its_close(engine: Engine) -> None:
    old_traces(engine, 5)
    report = retention.purge_older_than(engine, ADMIN, 30, now=NOW, batch=2)
    assert report.deleted == 5
    [run_id] = purge_ids(engine)
    entries = log(engine, "trace_purge", run_id)
    assert [a for a, _ in entries] == ["start", "progress", "progress", "progress", "purge"]
    assert entries[0][1]["cutoff"] == (NOW - dt.timedelta(days=30)).isoformat()
    assert [e[1]["deleted"] for e in entries[1:4]] == [2, 4, 5]
    state = run_of(engine, "trace_purge", run_id)
    assert state.status == "completed" and state.counts == {"deleted": 5, "kept_in_audits": 0}


def test_a_purge_killed_mid_way_is_interrupted_and_the_next_purge_resumes_it(
    engine: Engine, sqlite_url: str
) -> None:
    old_traces(engine, 5)
    script = f"""
import datetime as dt, os, signal, sys
sys.path.insert(0, {str(ROOT)!r})
from review.core.identity import SYSTEM
from review.traces import retention, rollup
from storage.db import make_engine

calls = 0
real = rollup.subtract_ids

def dying(session, ids):
    global calls
    calls += 1
    if calls == 2:  # the second batch: nothing of it is committed
        os.kill(os.getpid(), signal.SIGKILL)
    real(session, ids)

rollup.subtract_ids = dying
retention.purge_older_than(make_engine({sqlite_url!r}), SYSTEM, 30,
                           now=dt.datetime(2025, 7, 1, 12, tzinfo=dt.UTC), batch=2)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == -9, done.stderr
    [first] = purge_ids(engine)
    assert [a for a, _ in log(engine, "trace_purge", first)] == ["start", "progress"]
    state = run_of(engine, "trace_purge", first)
    assert state.status == "interrupted" and state.counts == {"deleted": 2}

    report = retention.purge_older_than(engine, ADMIN, 30, now=NOW, batch=2)
    assert report.deleted == 3
    second, _ = purge_ids(engine)
    assert log(engine, "trace_purge", second)[0][1]["resumes"] == [first]
    assert run_of(engine, "trace_purge", first).resumed_by == second


def test_a_failing_purge_is_closed_as_failed(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    old_traces(engine, 5)
    from review.traces import rollup

    real = rollup.subtract_ids
    calls = {"n": 0}

    def failing(session: Any, ids: list[int]) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("disk full")
        real(session, ids)

    monkeypatch.setattr(rollup, "subtract_ids", failing)
    with pytest.raises(OSError):
        retention.purge_older_than(engine, ADMIN, 30, now=NOW, batch=2)
    [run_id] = purge_ids(engine)
    state = run_of(engine, "trace_purge", run_id)
    assert state.status == "failed" and state.counts["deleted"] == 2
    assert state.describe() == "failed: disk full"


# ---------------------------------------------------------------------------------------
# Where the runs are shown


def test_cli_runs_lists_an_interrupted_run_until_it_is_resumed(
    engine: Engine,
    sqlite_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from review.cli import tracecli

    path = trace_file(tmp_path, 6)
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", sqlite_url)
    runner = CliRunner()
    out = runner.invoke(tracecli.runs_cmd, [])
    assert out.exit_code == 0 and "no imports or purges recorded" in out.output
    with monkeypatch.context() as m:
        fail_on_batch(m, 2)
        m.setattr(importer, "_close_import", lambda *a, **k: None)
        with pytest.raises(OSError):
            importer.import_file(engine, ADMIN, path, "canonical", batch_size=2)
    first = importer.recent_imports(engine)[0].id
    monkeypatch.setattr(runs, "process_alive", lambda host, pid: False)
    out = runner.invoke(tracecli.runs_cmd, [])
    assert out.exit_code == 1
    assert f"trace_import {first}: interrupted" in out.output
    assert "added 2" in out.output and "1 interrupted run not resumed" in out.output
    out = runner.invoke(tracecli.import_traces_cmd, [str(path), "--batch-size", "2"])
    assert out.exit_code == 0, out.output
    out = runner.invoke(tracecli.runs_cmd, [])
    assert out.exit_code == 0, out.output
    assert f"trace_import {first}: interrupted" in out.output
    assert f"resumes interrupted trace_import {first}" in out.output
    assert "resumed by trace_import" in out.output


def test_the_raw_log_can_leave_out_progress_entries(engine: Engine, tmp_path: Path) -> None:
    importer.import_file(engine, SYSTEM, trace_file(tmp_path, 5), "canonical", batch_size=2)
    everything = changelog.count_entries(engine, "trace_import")
    assert everything == 5
    assert changelog.count_entries(engine, "trace_import", progress=False) == 2
    rows = changelog.entries(engine, "trace_import", progress=False)
    assert [r.action for r in rows] == ["import", "start"]


def test_runs_only_ever_append_to_the_audit_log(engine: Engine, tmp_path: Path) -> None:
    from sqlalchemy import event

    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "audit_log" in statement:
            statements.append(statement.split(None, 1)[0].upper())

    event.listen(engine, "before_cursor_execute", seen)
    try:
        path = trace_file(tmp_path, 5)
        importer.import_file(engine, ADMIN, path, "canonical", batch_size=2)
        importer.import_file(engine, ADMIN, path, "canonical", batch_size=2)
        retention.purge_older_than(engine, ADMIN, 0, batch=2)
        changelog.runs_frame(changelog.recent_runs(engine))
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert "INSERT" in statements
    assert set(statements) <= {"INSERT", "SELECT"}
