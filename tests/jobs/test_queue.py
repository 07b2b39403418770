"""The job queue on SQLite and PostgreSQL: submit, claim, progress, outcome, cancel, retry,
take-over after a lease passed, fencing of a worker that lost its job, files in the database.

A kind registered for these tests only (``test_count``) records each run's rows in a table of
its own (``job_test_marks``) keyed by (job, item), so "nothing lost, nothing twice" is a query.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, func, insert, select, text, update
from sqlalchemy.orm import Session

from review.core.errors import InputError, PermissionDenied
from review.core.identity import Actor, Permission
from review.jobs import kinds, queue, runner
from review.jobs.context import JobContext, Retryable
from storage.db import read_session, run_write
from storage.models import Job, JobFile, User
from tests.helpers.actors import make_actor
from tests.helpers.jobs import job_row

REVIEWER = make_actor("reviewer", "rev@test.example", uid=1)
ANNOTATOR = make_actor("annotator", "ann@test.example", uid=2)
ADMIN = make_actor("admin", "adm@test.example", uid=3)

#: what the test kind does on its next run, by job id: "fail", "retry", "block"
BEHAVIOUR: dict[int, str] = {}
GATE = threading.Event()


def _run(ctx: JobContext) -> dict[str, Any]:
    n = int(ctx.params["n"])
    how = BEHAVIOUR.get(ctx.job_id, "")
    data = ""
    if "numbers" in ctx.params:
        with ctx.input("numbers") as f:
            data = f.read().decode()
    for i in range(n):
        if how == "block" and i == 1:
            GATE.wait(60)
        ctx.progress(i, n, f"item {i}")
        with ctx.engine.begin() as c:
            # idempotent: a re-run after a take-over adds nothing already there
            have = c.execute(
                text("SELECT 1 FROM job_test_marks WHERE job_id = :j AND item = :i"),
                {"j": ctx.job_id, "i": i},
            ).first()
            if have is None:
                c.execute(
                    text("INSERT INTO job_test_marks (job_id, item) VALUES (:j, :i)"),
                    {"j": ctx.job_id, "i": i},
                )
    if how == "fail":
        raise InputError("the file has no line 3")
    if how == "retry":
        raise Retryable("the trace store answered 503")
    if how == "crash":
        raise KeyError("x")
    ctx.output("sum.txt", str(n).encode() + data.encode(), "text/plain")
    return {"items": n, "actor": ctx.actor.email}


KIND = kinds.Kind(
    "test_count",
    "Test count",
    Permission.import_traces,
    _run,
    lambda result: f"{result.get('items')} items counted.",
    max_attempts=2,
)


@pytest.fixture
def engine(any_engine: Engine) -> Iterator[Engine]:
    kinds.register(KIND)
    with any_engine.begin() as c:
        c.execute(text("CREATE TABLE job_test_marks (job_id INTEGER, item INTEGER)"))
        for a in (REVIEWER, ANNOTATOR, ADMIN):
            c.execute(
                insert(User).values(
                    id=a.id,
                    email=a.email,
                    name=a.name,
                    roles=sorted(r.value for r in a.roles),
                    clearance=a.clearance,
                    active=True,
                    version=1,
                )
            )
        if any_engine.dialect.name == "postgresql":
            c.execute(text("SELECT setval('users_id_seq', 10)"))
    BEHAVIOUR.clear()
    GATE.clear()
    yield any_engine
    GATE.set()
    kinds.REGISTRY.pop(KIND.name, None)


def _submit(engine: Engine, actor: Actor = REVIEWER, n: int = 3, **files: bytes) -> int:
    params: dict[str, Any] = {"n": n}
    if files:
        params["numbers"] = True
    return run_write(engine, lambda s: queue.submit(s, actor, "test_count", params, files))


def _marks(engine: Engine, job_id: int) -> list[int]:
    with engine.connect() as c:
        rows = c.execute(
            text("SELECT item FROM job_test_marks WHERE job_id = :j ORDER BY item"), {"j": job_id}
        )
        return [r[0] for r in rows]


def test_a_worker_runs_a_job_and_any_session_reads_its_result(engine: Engine) -> None:
    job_id = _submit(engine, numbers=b"+7")
    with read_session(engine) as s:
        seen = queue.get(s, REVIEWER, job_id)
    assert seen is not None and seen.status == "queued" and seen.waiting_for_worker
    assert runner.run_worker(engine, name="w1", once=True) == 1
    with read_session(engine) as s:
        seen = queue.get(s, ADMIN, job_id)
        assert seen is not None
        assert seen.status == "done" and seen.finished and seen.fraction == 1.0
        assert seen.result == {"items": 3, "actor": REVIEWER.email}
        assert seen.attempts == 1 and seen.worker == "w1" and seen.error is None
        assert seen.files == ("sum.txt",)
        assert queue.result_file(s, REVIEWER, job_id, "sum.txt") == b"3+7"
        # the input is dropped once the job ended
        left = s.scalar(
            select(func.count()).where(JobFile.job_id == job_id, JobFile.role == "input")
        )
        assert left == 0
        # the worker signed off
        assert queue.workers_alive(s) == 0
    assert _marks(engine, job_id) == [0, 1, 2]


def test_only_who_may_start_a_kind_sees_its_jobs(engine: Engine) -> None:
    with pytest.raises(PermissionDenied), Session(engine) as s:
        queue.submit(s, ANNOTATOR, "test_count", {"n": 1})
    job_id = _submit(engine)
    with read_session(engine) as s:
        assert queue.get(s, ANNOTATOR, job_id) is None
        assert queue.recent(s, ANNOTATOR) == []
        assert queue.result_file(s, ANNOTATOR, job_id, "sum.txt") is None
        assert [j.id for j in queue.recent(s, ADMIN)] == [job_id]
    # an annotator may see other kinds of job (evaluation runs), not this one's
    with pytest.raises((PermissionDenied, InputError)):
        run_write(engine, lambda s: queue.cancel(s, ANNOTATOR, job_id))
    assert job_row(engine, job_id).status == "queued"
    with pytest.raises(InputError, match="no job"):
        run_write(engine, lambda s: queue.cancel(s, REVIEWER, job_id + 1))


def test_bad_parameters_and_unknown_kinds_are_refused(engine: Engine) -> None:
    with Session(engine) as s:
        with pytest.raises(InputError, match="unknown kind"):
            queue.submit(s, REVIEWER, "nope", {})
        with pytest.raises(InputError, match="plain JSON"):
            queue.submit(s, REVIEWER, "test_count", {"n": float("nan")})
        with pytest.raises(InputError, match="plain JSON"):
            queue.submit(s, REVIEWER, "test_count", {"n": object()})
        with pytest.raises(InputError, match="file name"):
            queue.submit(s, REVIEWER, "test_count", {"n": 1}, {"../etc/passwd": b""})


def test_big_input_files_are_chunked_and_read_back_whole(engine: Engine) -> None:
    big = bytes(range(256)) * (queue.CHUNK // 256 * 2 + 3)
    job_id = _submit(engine, n=1, numbers=big)
    with read_session(engine) as s:
        parts = s.scalar(select(func.count()).where(JobFile.job_id == job_id))
        assert parts == 3
        assert b"".join(queue.read_input(s, job_id, "numbers")) == big


def test_two_workers_never_claim_the_samejob_row(engine: Engine) -> None:
    first, second = _submit(engine), _submit(engine)
    with Session(engine) as a, Session(engine) as b:
        with a.begin():
            ca = queue.claim(a, "wa")
            # on PostgreSQL, b's claim skips the row a holds locked and takes the next one;
            # SQLite serialises writers, so b claims after a committed
            if engine.dialect.name == "postgresql":
                cb = queue.claim(b, "wb")
                assert ca is not None and cb is not None
                assert {ca.job_id, cb.job_id} == {first, second}
                b.commit()
        if engine.dialect.name == "sqlite":
            with b.begin():
                cb = queue.claim(b, "wb")
            assert ca is not None and cb is not None
            assert {ca.job_id, cb.job_id} == {first, second}
    with Session(engine) as c, c.begin():
        assert queue.claim(c, "wc") is None


def test_an_input_error_fails_the_job_with_its_message(engine: Engine) -> None:
    job_id = _submit(engine)
    BEHAVIOUR[job_id] = "fail"
    runner.run_worker(engine, name="w", once=True)
    job = job_row(engine, job_id)
    assert job.status == "failed" and job.error == "the file has no line 3"
    assert job.attempts == 1


def test_an_unexpected_error_fails_without_showing_its_text(engine: Engine) -> None:
    job_id = _submit(engine)
    BEHAVIOUR[job_id] = "crash"
    runner.run_worker(engine, name="w", once=True)
    job = job_row(engine, job_id)
    assert job.status == "failed" and job.error is not None
    assert job.error.startswith("internal error: KeyError")


def test_a_retryable_error_is_retried_after_a_backoff_then_fails(engine: Engine) -> None:
    job_id = _submit(engine)
    BEHAVIOUR[job_id] = "retry"
    runner.run_worker(engine, name="w", once=True)
    job = job_row(engine, job_id)
    assert job.status == "queued" and job.attempts == 1 and "503" in (job.error or "")
    assert job.run_after > job.created_at
    # not due yet: a worker passes it by
    assert runner.run_worker(engine, name="w", once=True) == 0
    with engine.begin() as c:
        c.execute(update(Job).where(Job.id == job_id).values(run_after=job.created_at))
    runner.run_worker(engine, name="w", once=True)
    job = job_row(engine, job_id)
    assert job.status == "failed" and job.attempts == 2
    # the items it did are there once, not twice
    assert _marks(engine, job_id) == [0, 1, 2]


def test_cancelling_a_queued_job_ends_it_at_once(engine: Engine) -> None:
    job_id = _submit(engine, numbers=b"x")
    said = run_write(engine, lambda s: queue.cancel(s, REVIEWER, job_id))
    assert "had not started" in said
    assert job_row(engine, job_id).status == "cancelled"
    assert runner.run_worker(engine, name="w", once=True) == 0
    with pytest.raises(InputError, match="already ended"):
        run_write(engine, lambda s: queue.cancel(s, REVIEWER, job_id))


def test_only_its_starter_or_an_admin_cancels(engine: Engine) -> None:
    other = make_actor("reviewer", "other@test.example", uid=4)
    with engine.begin() as c:
        c.execute(insert(User).values(id=4, email=other.email, name="O", roles=["reviewer"]))
    job_id = _submit(engine)
    with pytest.raises(PermissionDenied):
        run_write(engine, lambda s: queue.cancel(s, other, job_id))
    run_write(engine, lambda s: queue.cancel(s, ADMIN, job_id))
    assert job_row(engine, job_id).cancelled_by == ADMIN.id


def test_cancelling_a_running_job_stops_it_at_its_next_progress(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_JOB_LEASE_SECONDS", "3")
    job_id = _submit(engine, n=5)
    BEHAVIOUR[job_id] = "block"
    t = threading.Thread(
        target=runner.run_worker, kwargs={"engine": engine, "name": "w", "once": True}
    )
    t.start()
    try:
        _wait(lambda: job_row(engine, job_id).status == "running")
        said = run_write(engine, lambda s: queue.cancel(s, REVIEWER, job_id))
        assert "next progress report" in said
        # the heartbeat reads the request; the job goes on to its next progress and stops
        _wait(lambda: job_row(engine, job_id).cancel_requested)
        _wait_beat()
    finally:
        GATE.set()
        t.join(60)
    job = job_row(engine, job_id)
    assert job.status == "cancelled", (job.status, job.note, job.error)
    assert _marks(engine, job_id) == [0]


def _wait(cond: Any, seconds: float = 60) -> None:
    deadline = dt.datetime.now() + dt.timedelta(seconds=seconds)
    while not cond():
        assert dt.datetime.now() < deadline, "timed out waiting"
        threading.Event().wait(0.05)


def _wait_beat() -> None:
    # two heartbeat intervals (1 s each) so the running job has read the cancel request
    threading.Event().wait(2.5)


def test_a_job_whose_worker_died_is_taken_over_and_completed_once(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_JOB_LEASE_SECONDS", "2")
    job_id = _submit(engine, n=4)
    # worker A claims it and does two items, then "dies" (never beats again)
    dead = run_write(engine, lambda s: queue.claim(s, "dead"))
    assert dead is not None and dead.job_id == job_id
    for i in range(2):
        with engine.begin() as c:
            c.execute(text("INSERT INTO job_test_marks VALUES (:j, :i)"), {"j": job_id, "i": i})
    # before the lease passes nobody else takes it
    assert runner.run_worker(engine, name="early", once=True) == 0
    _wait(lambda: _lease_passed(engine, job_id))
    assert runner.run_worker(engine, name="heir", once=True) == 1
    job = job_row(engine, job_id)
    assert job.status == "done" and job.attempts == 2 and job.worker == "heir"
    assert _marks(engine, job_id) == [0, 1, 2, 3]
    # the dead worker, were it only slow, can no longer write anything
    with pytest.raises(queue.LeaseLost):
        run_write(engine, lambda s: queue.finish(s, dead, {"items": 99}))
    with pytest.raises(queue.LeaseLost):
        run_write(engine, lambda s: queue.heartbeat(s, dead, 1, 4, "late"))
    assert job_row(engine, job_id).result["items"] == 4


def _lease_passed(engine: Engine, job_id: int) -> bool:
    with read_session(engine) as s:
        job = s.get(Job, job_id)
        assert job is not None and job.lease_until is not None
        return job.lease_until < queue.db_now(s)


def test_a_job_whose_workers_keep_dying_fails_with_why(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_JOB_LEASE_SECONDS", "1")
    job_id = _submit(engine)
    for name in ("dies0", "dies1"):

        def take(s: Session, name: str = name) -> queue.Claim | None:
            return queue.claim(s, name)

        assert run_write(engine, take) is not None
        _wait(lambda: _lease_passed(engine, job_id))
    assert runner.run_worker(engine, name="w", once=True) == 0
    job = job_row(engine, job_id)
    assert job.status == "failed"
    assert job.error == "its worker (dies1) stopped without finishing, 2 of 2 attempts"


def test_a_job_of_a_user_deactivated_meanwhile_does_not_run(engine: Engine) -> None:
    job_id = _submit(engine)
    with engine.begin() as c:
        c.execute(update(User).where(User.id == REVIEWER.id).values(active=False))
    runner.run_worker(engine, name="w", once=True)
    job = job_row(engine, job_id)
    assert job.status == "failed" and "may no longer run a test count" in (job.error or "")
    assert _marks(engine, job_id) == []


def test_inline_mode_runs_the_job_in_the_starting_process(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_JOBS", "auto")
    seen: list[tuple[int, int | None, str]] = []
    job_id = runner.start(
        engine, REVIEWER, "test_count", {"n": 2}, on_progress=lambda *a: seen.append(a)
    )
    assert job_row(engine, job_id).status == "done"
    assert seen == [(0, 2, "item 0"), (1, 2, "item 1")]
    # with a worker alive, auto queues it for the worker
    run_write(engine, lambda s: queue.beat(s, "w", None))
    assert runner.mode(engine) == "workers"
    queued = runner.start(engine, REVIEWER, "test_count", {"n": 2})
    assert job_row(engine, queued).status == "queued"
    monkeypatch.setenv("WORKBENCH_JOBS", "inline")
    assert runner.mode(engine) == "inline"
    monkeypatch.setenv("WORKBENCH_JOBS", "sometimes")
    with pytest.raises(InputError, match="WORKBENCH_JOBS"):
        runner.mode(engine)


@pytest.mark.parametrize("raw", ["0", "nan", "-5", "1e9", "soon"])
def test_a_bad_lease_setting_is_refused_with_its_name(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv("WORKBENCH_JOB_LEASE_SECONDS", raw)
    with pytest.raises(InputError, match="WORKBENCH_JOB_LEASE_SECONDS"):
        queue.lease()


def test_a_worker_leaves_a_kind_it_does_not_know_to_a_worker_that_does(engine: Engine) -> None:
    job_id = _submit(engine)
    kinds.REGISTRY.pop(KIND.name)
    try:
        assert runner.run_worker(engine, name="old release", once=True) == 0
        assert job_row(engine, job_id).status == "queued"
    finally:
        kinds.register(KIND)
    assert runner.run_worker(engine, name="new release", once=True) == 1
    assert job_row(engine, job_id).status == "done"


def test_a_bad_jobs_setting_queues_nothing(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_JOBS", "later")
    with pytest.raises(InputError, match="WORKBENCH_JOBS"):
        runner.start(engine, REVIEWER, "test_count", {"n": 1})
    with read_session(engine) as s:
        assert s.scalar(select(func.count()).select_from(Job)) == 0


def test_a_worker_outlives_a_database_outage(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlalchemy.exc import OperationalError

    job_id = _submit(engine)
    real = queue.beat
    failures = iter([True, True])
    stop = threading.Event()

    def flaky(s: Session, name: str, job: int | None) -> None:
        if next(failures, False):
            raise OperationalError("SELECT 1", {}, Exception("server closed the connection"))
        real(s, name, job)
        if job_row(engine, job_id).status == "done":
            stop.set()

    monkeypatch.setattr(queue, "beat", flaky)
    t = threading.Thread(
        target=runner.run_worker,
        kwargs={"engine": engine, "name": "w", "stop": stop, "poll_seconds": 0.1},
    )
    t.start()
    t.join(120)
    assert not t.is_alive()
    assert job_row(engine, job_id).status == "done"


def test_pages_of_recent_jobs(engine: Engine) -> None:
    ids = [_submit(engine, n=1) for _ in range(5)]
    with read_session(engine) as s:
        first = queue.recent(s, REVIEWER, limit=2)
        assert [j.id for j in first] == ids[::-1][:2]
        nxt = queue.recent(s, REVIEWER, limit=2, before=first[-1].id)
        assert [j.id for j in nxt] == ids[::-1][2:4]
        assert queue.counts(s, REVIEWER) == {"queued": 5, "running": 0}
        with pytest.raises(InputError):
            queue.recent(s, REVIEWER, status="sleeping")


def test_the_command_line_lists_jobs_a_page_at_a_time(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``workbench jobs list --limit 2`` shows the two newest and how to see older ones;
    ``--before`` and ``--after`` walk the pages both ways, each page newest first."""
    from click.testing import CliRunner

    from review.cli import jobscli

    ids = [_submit(engine) for _ in range(5)]
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", engine.url.render_as_string(hide_password=False))
    cli = CliRunner()

    def page(*args: str) -> tuple[list[int], str]:
        out = cli.invoke(jobscli.list_cmd, ["--limit", "2", *args])
        assert out.exit_code == 0, out.output
        shown = [int(line.split("\t")[0]) for line in out.stdout.splitlines() if "\t" in line]
        return shown, out.stderr

    first, hint = page()
    assert first == [ids[4], ids[3]] and f"--before {ids[3]}" in hint
    second, hint = page("--before", str(ids[3]))
    assert second == [ids[2], ids[1]] and f"--before {ids[1]}" in hint
    last, hint = page("--before", str(ids[1]))
    assert last == [ids[0]] and hint == ""
    back, _ = page("--after", str(ids[2]))
    assert back == [ids[4], ids[3]]
    out = cli.invoke(jobscli.list_cmd, ["--before", "3", "--after", "1"])
    assert out.exit_code != 0 and "not both" in out.output
    out = cli.invoke(jobscli.list_cmd, ["--before", "0"])
    assert out.exit_code == 2
