"""The job kind "trace_import" (review/jobs/trace_import.py) on SQLite and PostgreSQL: run
inline by runner.start and by a worker (run_worker(once=True)), idempotent when run again or
after an import that stopped half-way, its rejected lines a result file, a bad file failing
the job with nothing written, redaction switched off only by an actor who holds clearance at
run time, and the job and its result seen only by people who may import traces."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from review.admin import users
from review.core.errors import PermissionDenied
from review.core.identity import SYSTEM, Actor
from review.jobs import queue, runner, trace_import
from review.jobs.queue import JobView
from review.traces import browse, importer
from storage.models import Job, TraceChunk
from storage.models import Trace as TraceRow
from tests.helpers.paths import ROOT

SAMPLE = (ROOT / "tests" / "data" / "traces" / "canonical.jsonl").read_bytes()
N = len(SAMPLE.splitlines())


def person(engine: Engine, email: str, roles: list[str], clearance: bool = False) -> Actor:
    """A user of the database (a job re-reads its actor from there at run time)."""
    row = users.get_by_email(engine, email)
    if row is None:
        row = users.add_user(engine, SYSTEM, email, email.split("@")[0].title(), roles, clearance)
    return users.to_actor(row)


def get(engine: Engine, actor: Actor, job_id: int) -> JobView | None:
    with Session(engine) as s:
        return queue.get(s, actor, job_id)


def done(engine: Engine, actor: Actor, job_id: int) -> JobView:
    job = get(engine, actor, job_id)
    assert job is not None
    assert job.status == "done", (job.status, job.error)
    return job


def counts(engine: Engine) -> tuple[int, int, int]:
    with Session(engine) as s:
        traces = s.scalar(select(func.count()).select_from(TraceRow)) or 0
        distinct = s.scalar(select(func.count(func.distinct(TraceRow.trace_id)))) or 0
        chunks = s.scalar(select(func.count()).select_from(TraceChunk)) or 0
    return traces, distinct, chunks


def params(name: str = "canonical.jsonl", **kw: Any) -> dict[str, Any]:
    return trace_import.params(
        name,
        kw.pop("fmt", "auto"),
        skip_bad=kw.pop("skip_bad", False),
        redact=kw.pop("redact", True),
    )


def bad_file() -> bytes:
    lines = SAMPLE.decode().splitlines()
    bad = json.loads(lines[1])
    bad["top_score"] = "very high"
    return "\n".join([lines[0], json.dumps(bad), *lines[2:]]).encode()


def test_inline_the_kind_imports_with_progress_and_again_adds_nothing(
    any_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_JOBS", "inline")
    rev = person(any_engine, "rev@jobs.example", ["reviewer"])
    seen: list[tuple[int, int | None, str]] = []
    job_id = runner.start(
        any_engine,
        rev,
        trace_import.NAME,
        params(),
        {"traces": SAMPLE},
        on_progress=lambda d, t, n: seen.append((d, t, n)),
    )
    job = done(any_engine, rev, job_id)
    assert job.title == "Trace import" and job.created_by == rev.email
    assert job.result["added"] == N and job.result["skipped"] == 0
    assert job.result["summary"].startswith(f"canonical.jsonl: {N} traces added")
    assert job.result["rejects"] is None
    # an empty corpus: the traces citing documents it has never seen are said
    assert job.result["unknown"]["headline"].startswith("4 of 5 imported traces are restricted")
    assert job.files == ()
    # the bar: checking first (no total known), then writing with the total
    assert seen and seen[-1][1] == N
    assert any(note.startswith("Checking the file") for _, _, note in seen)
    assert any(note.startswith("Writing") for _, _, note in seen)
    before = counts(any_engine)
    assert before[:2] == (N, N)
    # the same file again (a second run of the kind): nothing is added twice
    again = done(
        any_engine,
        rev,
        runner.start(any_engine, rev, trace_import.NAME, params(), {"traces": SAMPLE}),
    )
    assert again.result["added"] == 0 and again.result["skipped"] == N
    assert counts(any_engine) == before


def test_a_worker_runs_it_and_completes_an_import_that_stopped_half_way(
    any_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_JOBS", "workers")
    rev = person(any_engine, "rev@jobs.example", ["reviewer"])

    # a worker that died mid-import: its first batch committed, the rest never written
    class Died(Exception):
        pass

    def die(phase: str, done_: int, total: int | None) -> None:
        if phase == "writing":
            raise Died

    with pytest.raises(Died):
        importer.import_bytes(
            any_engine, rev, SAMPLE, "canonical.jsonl", batch_size=2, progress=die
        )
    partial = counts(any_engine)[0]
    assert 0 < partial < N

    job_id = runner.start(any_engine, rev, trace_import.NAME, params(), {"traces": SAMPLE})
    queued = get(any_engine, rev, job_id)
    assert queued is not None and queued.status == "queued" and queued.waiting_for_worker
    assert runner.run_worker(any_engine, name="test-worker", once=True) == 1
    job = done(any_engine, rev, job_id)
    assert job.worker == "test-worker" and job.attempts == 1
    assert job.result["added"] == N - partial and job.result["skipped"] == partial
    traces, distinct, _ = counts(any_engine)
    assert traces == distinct == N
    chunks = counts(any_engine)[2]
    # and the whole job run again by a worker (as after a worker died at its end) adds nothing
    job2 = runner.start(any_engine, rev, trace_import.NAME, params(), {"traces": SAMPLE})
    assert runner.run_worker(any_engine, name="test-worker", once=True) == 1
    assert done(any_engine, rev, job2).result["added"] == 0
    assert counts(any_engine) == (N, N, chunks)


def test_rejected_lines_are_a_result_file_and_a_bad_file_fails_with_nothing_written(
    any_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_JOBS", "inline")
    rev = person(any_engine, "rev@jobs.example", ["reviewer"])
    payload = bad_file()
    failed_id = runner.start(
        any_engine, rev, trace_import.NAME, params("bad.jsonl"), {"traces": payload}
    )
    failed = get(any_engine, rev, failed_id)
    assert failed is not None and failed.status == "failed"
    assert failed.error is not None and failed.error.startswith(trace_import.FILE_PROBLEM)
    headline, detail = trace_import.failure(failed.error)
    assert headline == "Nothing was imported. The file has a problem:"
    assert detail.startswith("bad.jsonl: line 2: field top_score")
    assert browse.total_traces(any_engine) == 0

    job_id = runner.start(
        any_engine, rev, trace_import.NAME, params("bad.jsonl", skip_bad=True), {"traces": payload}
    )
    job = done(any_engine, rev, job_id)
    assert job.result["added"] == N - 1 and job.result["rejected"] == 1
    assert "1 rejected" in job.result["summary"] and "(see " not in job.result["summary"]
    assert any("line 2: field top_score" in p for p in job.result["problems"])
    assert job.files == (trace_import.REJECTS,)
    with Session(any_engine) as s:
        data = queue.result_file(s, rev, job_id, trace_import.REJECTS)
    assert data is not None
    [line] = data.decode().splitlines()
    assert json.loads(line)["line"] == 2


def test_redaction_is_switched_off_only_by_whoever_holds_clearance_when_it_runs(
    any_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_JOBS", "workers")
    cleared = person(any_engine, "chen@jobs.example", ["reviewer"], clearance=True)
    job_id = runner.start(
        any_engine, cleared, trace_import.NAME, params(redact=False), {"traces": SAMPLE}
    )
    # clearance taken away before a worker runs it: the job fails, nothing is imported
    row = users.get_by_email(any_engine, cleared.email)
    assert row is not None
    users.update_user(
        any_engine,
        SYSTEM,
        row.id,
        row.version,
        name=row.name,
        roles=["reviewer"],
        clearance=False,
        active=True,
    )
    assert runner.run_worker(any_engine, name="w", once=True) == 1
    job = get(any_engine, cleared, job_id)
    assert job is not None and job.status == "failed"
    assert job.error is not None and "clearance" in job.error
    assert browse.total_traces(any_engine) == 0
    # with clearance, the import is stored unredacted and says so
    boss = person(any_engine, "ada@jobs.example", ["admin"], clearance=True)
    ok = runner.start(any_engine, boss, trace_import.NAME, params(redact=False), {"traces": SAMPLE})
    assert runner.run_worker(any_engine, name="w", once=True) == 1
    assert "redaction was switched off" in done(any_engine, boss, ok).result["summary"]


def test_only_people_who_may_import_traces_start_or_see_an_import(
    any_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_JOBS", "inline")
    rev = person(any_engine, "rev@jobs.example", ["reviewer"])
    ann = person(any_engine, "ann@jobs.example", ["annotator"])
    with pytest.raises(PermissionDenied):
        runner.start(any_engine, ann, trace_import.NAME, params(), {"traces": SAMPLE})
    job_id = runner.start(any_engine, rev, trace_import.NAME, params(), {"traces": SAMPLE})
    assert get(any_engine, ann, job_id) is None
    with Session(any_engine) as s:
        assert queue.recent(s, ann) == []
        assert queue.result_file(s, ann, job_id, trace_import.REJECTS) is None
        assert [j.id for j in queue.recent(s, rev)] == [job_id]
    # the rejected lines quote the file before redaction: its starter or clearance only
    other = person(any_engine, "rev2@jobs.example", ["reviewer"])
    assert trace_import.may_see_rejected(rev, rev.email)
    assert not trace_import.may_see_rejected(other, rev.email)
    assert trace_import.may_see_rejected(
        person(any_engine, "chen@jobs.example", ["reviewer"], clearance=True), rev.email
    )


def test_cancelled_while_it_runs_it_stops_and_a_new_run_completes_the_import(
    any_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_JOBS", "workers")
    rev = person(any_engine, "rev@jobs.example", ["reviewer"])
    job_id = runner.start(any_engine, rev, trace_import.NAME, params(), {"traces": SAMPLE})

    def lease_until() -> object:
        with Session(any_engine) as s:
            return s.scalar(select(Job.lease_until).where(Job.id == job_id))

    asked: list[bool] = []

    def cancel_at_first_report(done_: int, total: int | None, note: str) -> None:
        """Someone cancels on another server; the job's heartbeat hears of it before the
        next report, which stops the import."""
        if asked:
            return
        asked.append(True)
        with Session(any_engine) as s, s.begin():
            queue.cancel(s, rev, job_id)
        before = lease_until()
        deadline = time.monotonic() + 60
        while lease_until() == before:  # the heartbeat has answered since
            assert time.monotonic() < deadline, "no heartbeat within 60 s"
            time.sleep(0.05)

    assert runner.run_one(any_engine, "w", job_id=job_id, on_progress=cancel_at_first_report)
    job = get(any_engine, rev, job_id)
    assert job is not None and job.status == "cancelled", job.status if job else None
    assert job.note == "cancelled while it ran; what it wrote stays"
    assert counts(any_engine)[0] <= N  # its batches written before the cancel stay
    again = runner.start(any_engine, rev, trace_import.NAME, params(), {"traces": SAMPLE})
    assert runner.run_worker(any_engine, name="w", once=True) == 1
    done(any_engine, rev, again)
    traces, distinct, _ = counts(any_engine)
    assert traces == distinct == N
