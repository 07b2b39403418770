"""Jobs in the database: submit, claim under a lease, record progress, finish, cancel.

A job is a row of ``jobs``. Any number of ``workbench worker`` processes, on any machine, claim
due jobs with ``SELECT ... FOR UPDATE SKIP LOCKED`` (PostgreSQL; SQLite serialises writers, so
a plain claim in a write transaction is already exclusive), so two workers never take the same
job and none waits on another's claim. The claim sets a lease (``lease_until``) that the
worker renews while the job runs (:mod:`review.jobs.context`'s heartbeat); a job whose lease
has passed, because its worker died or lost the database, is claimed again by the next worker,
up to the kind's ``max_attempts``, after which it fails with a reason that says so.

``attempts`` is the fencing token: a worker writes progress, output files and the outcome only
while the row still carries its attempt number and its name, so a worker that was only slow
(and whose job was taken over) cannot overwrite what the new owner does. Job kinds make their
work safe to run again (the trace import adds nothing for a trace already there), so a job
taken over is neither lost nor done twice.

Times of the leases come from the database's clock on PostgreSQL, so workers on machines
whose clocks differ agree on when a lease has passed; SQLite runs on one machine.

The files a job reads (``input``) and writes (``output``) are chunks in ``job_files``, so any
server shows a job's result file and any worker reads its input; inputs are dropped when the
job ends.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import socket
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from sqlalchemy import and_, delete, func, or_, select, update
from sqlalchemy.orm import Session

from review.core.errors import InputError, PermissionDenied
from review.core.identity import Actor, require
from review.jobs.kinds import get_kind, sees_all, visible_kinds
from storage.models import Job, JobFile, JobWorker, User, utcnow

STATUSES: Final = ("queued", "running", "done", "failed", "cancelled")
FINISHED: Final = frozenset({"done", "failed", "cancelled"})

#: chunk size of the files in job_files
CHUNK: Final = 4 * 1024 * 1024
#: a worker with no heartbeat for this long is taken for gone
ALIVE: Final = dt.timedelta(seconds=30)
#: the longest error text kept on a job
ERROR_CHARS: Final = 4000
#: the longest note a progress report keeps
NOTE_CHARS: Final = 500


def lease() -> dt.timedelta:
    """How long a claim holds without a heartbeat (WORKBENCH_JOB_LEASE_SECONDS, default 30):
    a job whose worker died is taken over this long after its last heartbeat."""
    raw = os.environ.get("WORKBENCH_JOB_LEASE_SECONDS", "30")
    try:
        seconds = float(raw)
    except ValueError:
        raise InputError(f"WORKBENCH_JOB_LEASE_SECONDS={raw!r} is not a number") from None
    if not math.isfinite(seconds) or not 1 <= seconds <= 3600:
        raise InputError(f"WORKBENCH_JOB_LEASE_SECONDS={raw!r} must be 1 to 3600 seconds")
    return dt.timedelta(seconds=seconds)


def worker_name(suffix: str = "") -> str:
    """This process as a worker: ``host:pid`` (plus ``:suffix``)."""
    name = f"{socket.gethostname()}:{os.getpid()}"
    return f"{name}:{suffix}" if suffix else name


def db_now(s: Session) -> dt.datetime:
    """Now by the database's clock on PostgreSQL (every machine agrees), this machine's on
    SQLite (one machine)."""
    if s.get_bind().dialect.name == "postgresql":
        now = s.scalar(select(func.clock_timestamp()))
        assert isinstance(now, dt.datetime)
        return now.astimezone(dt.UTC)
    return utcnow()


# --- what pages and the CLI read -------------------------------------------------------------


@dataclass(frozen=True)
class JobView:
    id: int
    kind: str
    title: str
    status: str
    created_by: str
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    attempts: int
    max_attempts: int
    done: int
    total: int | None
    note: str
    result: dict[str, Any]
    error: str | None
    worker: str | None
    files: tuple[str, ...] = ()
    cancel_requested: bool = False
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    @property
    def fraction(self) -> float | None:
        """How far it is (0 to 1), or None while its total is unknown."""
        if self.status == "done":
            return 1.0
        if not self.total or self.total <= 0:
            return None
        return max(0.0, min(1.0, self.done / self.total))

    @property
    def waiting_for_worker(self) -> bool:
        return self.status == "queued"


def _view(s: Session, job: Job, email: str, with_files: bool = True) -> JobView:
    try:
        title = get_kind(job.kind).title
    except InputError:
        title = job.kind
    files: tuple[str, ...] = ()
    if with_files:
        files = tuple(
            s.scalars(
                select(JobFile.name)
                .where(JobFile.job_id == job.id, JobFile.role == "output", JobFile.seq == 0)
                .order_by(JobFile.name)
            )
        )
    return JobView(
        id=job.id,
        kind=job.kind,
        title=title,
        status=job.status,
        created_by=email,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        attempts=job.attempts,
        max_attempts=job.max_attempts,
        done=int(job.done or 0),
        total=None if job.total is None else int(job.total),
        note=job.note or "",
        result=dict(job.result or {}),
        error=job.error,
        worker=job.worker,
        files=files,
        cancel_requested=bool(job.cancel_requested),
        params=dict(job.params or {}),
    )


def _visible(actor: Actor, kind: str) -> bool:
    return kind in visible_kinds(actor)


def get(s: Session, actor: Actor, job_id: int) -> JobView | None:
    """Job ``job_id`` as ``actor`` may see it, or None (missing, or a kind they may not see)."""
    row = s.execute(
        select(Job, User.email).join(User, User.id == Job.created_by).where(Job.id == job_id)
    ).first()
    if row is None or not _visible(actor, row[0].kind):
        return None
    return _view(s, row[0], row[1])


def recent(
    s: Session,
    actor: Actor,
    *,
    kinds: Sequence[str] | None = None,
    limit: int = 20,
    before: int | None = None,
    after: int | None = None,
    status: str | None = None,
) -> list[JobView]:
    """The jobs ``actor`` may see (of ``kinds``), newest first: the newest ``limit``, or
    with ``before`` the newest older than job ``before`` (the next page), or with ``after``
    the oldest newer than job ``after`` (the page before), still newest first. Keyset pages:
    each reads ``limit`` rows down (or up) the jobs' ids from where it starts, so any page
    of a million jobs costs the same, and a job deleted meanwhile moves nothing."""
    if before is not None and after is not None:
        raise InputError("a page of jobs starts before one job or after one, not both")
    allowed = visible_kinds(actor)
    if kinds is not None:
        allowed = [k for k in allowed if k in kinds]
    if not allowed:
        return []
    stmt = (
        select(Job, User.email)
        .join(User, User.id == Job.created_by)
        .where(Job.kind.in_(allowed))
        .order_by(Job.id.asc() if after is not None else Job.id.desc())
        .limit(max(1, min(limit, 500)))
    )
    if before is not None:
        stmt = stmt.where(Job.id < before)
    if after is not None:
        stmt = stmt.where(Job.id > after)
    if status is not None:
        if status not in STATUSES:
            raise InputError(f"unknown job status {status!r}")
        stmt = stmt.where(Job.status == status)
    rows = [_view(s, job, email, with_files=False) for job, email in s.execute(stmt)]
    return rows[::-1] if after is not None else rows


def result_file(s: Session, actor: Actor, job_id: int, name: str) -> bytes | None:
    """An output file of a job ``actor`` may see, or None."""
    job = s.get(Job, job_id)
    if job is None or not _visible(actor, job.kind):
        return None
    chunks = list(
        s.scalars(
            select(JobFile.data)
            .where(JobFile.job_id == job_id, JobFile.role == "output", JobFile.name == name)
            .order_by(JobFile.seq)
        )
    )
    return b"".join(chunks) if chunks else None


@dataclass(frozen=True)
class WorkerView:
    name: str
    started_at: dt.datetime
    seen_at: dt.datetime
    job_id: int | None


def workers(s: Session) -> list[WorkerView]:
    """Workers with a heartbeat in the last :data:`ALIVE`, newest first."""
    since = db_now(s) - ALIVE
    rows = s.scalars(
        select(JobWorker).where(JobWorker.seen_at >= since).order_by(JobWorker.seen_at.desc())
    )
    return [WorkerView(w.name, w.started_at, w.seen_at, w.job_id) for w in rows]


def workers_alive(s: Session) -> int:
    since = db_now(s) - ALIVE
    return int(s.scalar(select(func.count()).where(JobWorker.seen_at >= since)) or 0)


def counts(s: Session, actor: Actor) -> dict[str, int]:
    """Jobs ``actor`` may see that are queued and running (the Background work page's head)."""
    allowed = visible_kinds(actor)
    if not allowed:
        return {"queued": 0, "running": 0}
    rows = s.execute(
        select(Job.status, func.count())
        .where(Job.kind.in_(allowed), Job.status.in_(("queued", "running")))
        .group_by(Job.status)
    )
    got = {str(st): int(n) for st, n in rows}
    return {"queued": got.get("queued", 0), "running": got.get("running", 0)}


# --- what users do -----------------------------------------------------------------------------


def _json_params(params: Mapping[str, Any]) -> dict[str, Any]:
    try:
        text = json.dumps(dict(params), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InputError(f"a job's parameters must be plain JSON values: {exc}") from None
    if len(text) > 64_000:
        raise InputError("a job's parameters must be at most 64,000 characters of JSON")
    loaded = json.loads(text)
    assert isinstance(loaded, dict)
    return loaded


def _chunks(data: bytes) -> Iterator[tuple[int, bytes]]:
    if not data:
        yield 0, b""
        return
    for seq, start in enumerate(range(0, len(data), CHUNK)):
        yield seq, data[start : start + CHUNK]


def _check_file_name(name: str) -> str:
    if not name or len(name) > 200 or any(ord(c) < 32 for c in name) or "/" in name:
        raise InputError(f"a job's file name must be 1 to 200 plain characters: {name!r}")
    return name


def submit(
    s: Session,
    actor: Actor,
    kind: str,
    params: Mapping[str, Any],
    files: Mapping[str, bytes] | None = None,
) -> int:
    """Queue a job of ``kind`` for ``actor`` (who needs the kind's permission); ``files`` are
    what it reads (``ctx.input(name)``). Returns its id; the caller commits."""
    k = get_kind(kind)
    require(actor, k.permission)
    if s.get(User, actor.id) is None:
        raise InputError(
            f"jobs are started by a workbench user; {actor.name} is not one (the command line "
            "runs its work itself)"
        )
    now = db_now(s)
    job = Job(
        kind=k.name,
        params=_json_params(params),
        status="queued",
        created_by=actor.id,
        created_at=now,
        run_after=now,
        max_attempts=k.max_attempts,
        attempts=0,
        done=0,
        note="",
        cancel_requested=False,
        result={},
    )
    s.add(job)
    s.flush()
    for name, data in (files or {}).items():
        _check_file_name(name)
        for seq, part in _chunks(bytes(data)):
            s.add(JobFile(job_id=job.id, role="input", name=name, seq=seq, data=part))
        s.flush()
    return int(job.id)


def cancel(s: Session, actor: Actor, job_id: int) -> str:
    """Cancel job ``job_id``: a queued one at once, a running one when its worker next reports
    progress. Who started it, or an admin, may; says what happened."""
    if not visible_kinds(actor):
        raise PermissionDenied("you may not start or cancel background jobs")
    job = s.scalar(select(Job).where(Job.id == job_id).with_for_update())
    if job is None or not _visible(actor, job.kind):
        raise InputError(f"there is no job {job_id}")
    if job.created_by != actor.id and not sees_all(actor):
        raise PermissionDenied("only who started a job, or an admin, may cancel it")
    if job.status in FINISHED:
        raise InputError(f"job {job_id} has already ended ({job.status})")
    job.cancelled_by = actor.id if actor.id > 0 else None  # the command line is no user
    if job.status == "queued":
        job.status = "cancelled"
        job.finished_at = db_now(s)
        job.note = "cancelled before it started"
        _drop_inputs(s, job_id)
        return f"Job {job_id} is cancelled; it had not started."
    job.cancel_requested = True
    return f"Job {job_id} stops at its next progress report; what it wrote so far stays."


# --- what workers do ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    """A job a worker holds: ``attempt`` and ``worker`` fence every later write."""

    job_id: int
    kind: str
    params: dict[str, Any]
    attempt: int
    max_attempts: int
    created_by: int
    worker: str


class LeaseLost(Exception):
    """Another worker took the job over (this one's lease had passed), or it was removed."""


def _fenced(claim: Claim) -> Any:
    return and_(
        Job.id == claim.job_id,
        Job.attempts == claim.attempt,
        Job.worker == claim.worker,
        Job.status == "running",
    )


def _drop_inputs(s: Session, job_id: int) -> None:
    s.execute(delete(JobFile).where(JobFile.job_id == job_id, JobFile.role == "input"))


def claim(
    s: Session,
    worker: str,
    *,
    job_id: int | None = None,
    kinds: Sequence[str] | None = None,
) -> Claim | None:
    """Take the oldest due job (queued and due, or running with its lease passed), or job
    ``job_id`` only, for ``worker``. A job taken over after its last allowed attempt fails
    instead ("its worker stopped ..."), a job whose cancellation was asked is cancelled, and
    the next one is tried. The caller commits."""
    for _ in range(100):
        now = db_now(s)
        due = or_(
            and_(Job.status == "queued", Job.run_after <= now)
            if job_id is None
            else Job.status == "queued",
            and_(Job.status == "running", Job.lease_until < now),
        )
        stmt = select(Job).where(due).order_by(Job.id).limit(1)
        if job_id is not None:
            stmt = stmt.where(Job.id == job_id)
        if kinds is not None:
            stmt = stmt.where(Job.kind.in_(list(kinds)))
        job = s.scalar(stmt.with_for_update(skip_locked=True))
        if job is None:
            return None
        if job.cancel_requested:
            _end(s, job, "cancelled", now, note="cancelled: its worker had stopped")
            continue
        if job.status == "running" and job.attempts >= job.max_attempts:
            _end(
                s,
                job,
                "failed",
                now,
                error=(
                    f"its worker ({job.worker}) stopped without finishing, "
                    f"{job.attempts} of {job.max_attempts} attempts"
                ),
            )
            continue
        taken_over = job.status == "running"
        job.status = "running"
        job.attempts += 1
        job.worker = worker
        job.lease_until = now + lease()
        job.started_at = job.started_at or now
        if taken_over:
            job.note = f"taken over from a worker that stopped (attempt {job.attempts})"
        # what a previous attempt wrote out is written again by this one
        s.execute(delete(JobFile).where(JobFile.job_id == job.id, JobFile.role == "output"))
        s.flush()
        return Claim(
            job_id=int(job.id),
            kind=job.kind,
            params=dict(job.params or {}),
            attempt=int(job.attempts),
            max_attempts=int(job.max_attempts),
            created_by=int(job.created_by),
            worker=worker,
        )
    return None


def _end(
    s: Session,
    job: Job,
    status: str,
    now: dt.datetime,
    *,
    note: str | None = None,
    error: str | None = None,
) -> None:
    job.status = status
    job.finished_at = now
    job.lease_until = None
    if note is not None:
        job.note = note[:NOTE_CHARS]
    if error is not None:
        job.error = error[:ERROR_CHARS]
    _drop_inputs(s, job.id)
    s.flush()


def heartbeat(s: Session, claim: Claim, done: int, total: int | None, note: str) -> bool:
    """Record progress and renew the lease; True if cancelling was asked. Raises
    :class:`LeaseLost` when the job is no longer this worker's."""
    now = db_now(s)
    row = s.execute(
        update(Job)
        .where(_fenced(claim))
        .values(
            done=max(0, int(done)),
            total=None if total is None else max(0, int(total)),
            note=note[:NOTE_CHARS],
            lease_until=now + lease(),
        )
        .returning(Job.cancel_requested)
    ).first()
    if row is None:
        raise LeaseLost(f"job {claim.job_id} is no longer this worker's ({claim.worker})")
    # a worker busy with a long job is alive all the same
    s.execute(
        update(JobWorker)
        .where(JobWorker.name == claim.worker)
        .values(seen_at=now, job_id=claim.job_id)
    )
    return bool(row[0])


def _owned(s: Session, claim: Claim) -> Job:
    job = s.scalar(select(Job).where(_fenced(claim)).with_for_update())
    if job is None:
        raise LeaseLost(f"job {claim.job_id} is no longer this worker's ({claim.worker})")
    return job


def read_input(s: Session, job_id: int, name: str) -> Iterator[bytes]:
    """The chunks of input file ``name`` of job ``job_id``, in order (InputError if missing)."""
    seqs = list(
        s.scalars(
            select(JobFile.seq)
            .where(JobFile.job_id == job_id, JobFile.role == "input", JobFile.name == name)
            .order_by(JobFile.seq)
        )
    )
    if not seqs:
        raise InputError(f"job {job_id} has no input file {name!r} (it may have ended)")
    for seq in seqs:
        data = s.scalar(
            select(JobFile.data).where(
                JobFile.job_id == job_id,
                JobFile.role == "input",
                JobFile.name == name,
                JobFile.seq == seq,
            )
        )
        yield bytes(data or b"")


def write_output(s: Session, claim: Claim, name: str, data: bytes, mime: str) -> None:
    """Keep ``data`` as the job's output file ``name`` (replacing one of that name)."""
    _owned(s, claim)
    _check_file_name(name)
    s.execute(
        delete(JobFile).where(
            JobFile.job_id == claim.job_id, JobFile.role == "output", JobFile.name == name
        )
    )
    for seq, part in _chunks(bytes(data)):
        s.add(
            JobFile(
                job_id=claim.job_id, role="output", name=name, seq=seq, mime=mime[:100], data=part
            )
        )
    s.flush()


def finish(
    s: Session,
    claim: Claim,
    result: Mapping[str, Any],
    *,
    done: int = 0,
    total: int | None = None,
    note: str = "",
) -> None:
    """The job did its work: ``done`` with ``result``; ``total`` is its last progress report's
    (the whole of it is done)."""
    job = _owned(s, claim)
    job.result = _json_params(result)
    job.total = total if total is not None else job.total
    job.done = job.total if job.total is not None else max(done, int(job.done or 0))
    _end(s, job, "done", db_now(s), note=note or "finished")


def fail(s: Session, claim: Claim, error: str, *, retry: bool) -> str:
    """The attempt failed: queued again after a back-off when ``retry`` and attempts are left,
    failed for good otherwise. Returns the status it now has."""
    job = _owned(s, claim)
    now = db_now(s)
    job.error = error[:ERROR_CHARS]
    if retry and job.attempts < job.max_attempts:
        job.status = "queued"
        job.worker = None
        job.lease_until = None
        job.run_after = now + dt.timedelta(seconds=min(300, 5 * 2 ** (job.attempts - 1)))
        job.note = f"attempt {job.attempts} of {job.max_attempts} failed; retried soon"
        s.flush()
        return "queued"
    _end(s, job, "failed", now, note=f"failed after {job.attempts} of {job.max_attempts} attempts")
    return "failed"


def cancelled(s: Session, claim: Claim, done: int, total: int | None) -> None:
    """The job stopped because cancelling was asked."""
    job = _owned(s, claim)
    job.done = max(0, int(done))
    job.total = total
    _end(s, job, "cancelled", db_now(s), note="cancelled while it ran; what it wrote stays")


def beat(s: Session, name: str, job_id: int | None) -> None:
    """A worker's heartbeat: ``name`` is alive (and runs ``job_id``)."""
    now = db_now(s)
    row = s.get(JobWorker, name)
    if row is None:
        s.add(JobWorker(name=name, started_at=now, seen_at=now, job_id=job_id))
    else:
        row.seen_at = now
        row.job_id = job_id
    s.flush()


def leave(s: Session, name: str) -> None:
    """A worker stops: it is no longer counted (workers that die are forgotten after ALIVE)."""
    s.execute(delete(JobWorker).where(JobWorker.name == name))
    old = db_now(s) - dt.timedelta(days=1)
    s.execute(delete(JobWorker).where(JobWorker.seen_at < old))
