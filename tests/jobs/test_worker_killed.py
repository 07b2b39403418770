"""A worker killed in the middle of a trace import (SIGKILL: no goodbye, no clean-up) is
replaced by another ``workbench worker`` process, which takes the job over once its lease has
passed and completes it: every trace of the file is stored exactly once, nothing is lost and
nothing doubled. Real processes of the ``workbench`` command, on SQLite and PostgreSQL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, insert, select

from review.jobs import catalog, queue
from storage.db import make_engine, migrate, read_session, run_write
from storage.models import Trace as TraceRow
from storage.models import User
from tests.helpers.actors import make_actor
from tests.helpers.jobs import job_row
from tests.helpers.traces import canonical_lines, make_trace

WORKBENCH = str(Path(sys.executable).parent / "workbench")
REVIEWER = make_actor("reviewer", "rev@test.example", uid=1)
TRACES = 30_000


@pytest.fixture
def engine(any_url: str) -> Iterator[Engine]:
    eng = make_engine(any_url)
    migrate(eng)
    with eng.begin() as c:
        c.execute(
            insert(User).values(
                id=1, email=REVIEWER.email, name="Rev", roles=["reviewer"], active=True
            )
        )
    yield eng
    eng.dispose()


def _worker(url: str, name: str, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "WORKBENCH_DATABASE_URL": url,
        "WORKBENCH_JOB_LEASE_SECONDS": "3",
    }
    with log.open("ab") as out:
        return subprocess.Popen(
            [WORKBENCH, "worker", "--poll", "0.2", "--name", name],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _wait(cond: Callable[[], bool], what: str, seconds: float = 240) -> None:
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_a_killed_worker_is_replaced_and_the_import_lands_once(
    engine: Engine, any_url: str, tmp_path: Path
) -> None:
    assert "trace_import" in catalog.kinds.REGISTRY
    data = "\n".join(
        canonical_lines(make_trace(f"kill-{i:06d}", query=f"question {i}") for i in range(TRACES))
    ).encode()
    params = {"file_name": "big.jsonl", "fmt": "auto", "skip_bad": False, "redact": True}
    job_id = run_write(
        engine, lambda s: queue.submit(s, REVIEWER, "trace_import", params, {"traces": data})
    )
    log = tmp_path / "workers.log"
    first = _worker(any_url, "first", log)
    second: subprocess.Popen[bytes] | None = None
    try:
        # some of the file is stored, not all of it: then the first worker dies
        def partway() -> bool:
            with read_session(engine) as s:
                n = s.scalar(select(func.count()).select_from(TraceRow)) or 0
            assert n < TRACES, "the import finished before the worker could be killed"
            return n > 0

        _wait(partway, "the first traces to be stored")
        first.send_signal(signal.SIGKILL)
        first.wait(30)
        job = job_row(engine, job_id)
        assert job.status == "running" and job.worker == "first"
        second = _worker(any_url, "second", log)
        _wait(lambda: job_row(engine, job_id).status in queue.FINISHED, "the job to end")
        job = job_row(engine, job_id)
        assert job.status == "done", (job.status, job.error, log.read_text()[-3000:])
        assert job.attempts == 2 and job.worker == "second"
        with read_session(engine) as s:
            stored = s.scalar(select(func.count()).select_from(TraceRow))
            distinct = s.scalar(select(func.count(func.distinct(TraceRow.trace_id))))
        assert stored == distinct == TRACES
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(30)
