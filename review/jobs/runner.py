"""Running jobs: in a ``workbench worker`` process, or in the page that started one.

``WORKBENCH_JOBS`` says where jobs run:

- ``workers``: always queued, for ``workbench worker`` processes (a team deployment);
- ``inline``: run at once in the process that started them (one machine, as before);
- ``auto`` (the default): queued when some worker has a heartbeat, run inline otherwise, so a
  job never waits for a worker that is not there.

Inline or not, a job runs the same way: claimed (so no worker takes it meanwhile), under a
lease its heartbeat renews, with its progress, files and outcome in the database, where every
server shows them. If the process running it dies, a worker takes it over when the lease has
passed.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, Final

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session

from review.admin import users
from review.core.errors import InputError, WorkbenchError
from review.core.identity import Actor
from review.jobs import catalog, queue
from review.jobs.context import Cancelled, JobContext, LeaseLost, Retryable
from review.jobs.kinds import get_kind
from storage.db import read_session, run_write

log = logging.getLogger("workbench.jobs")

MODES: Final = ("auto", "inline", "workers")

#: every kind of job, registered wherever jobs are started or run
KINDS: Final = catalog.kinds.REGISTRY


def mode_setting() -> str:
    raw = os.environ.get("WORKBENCH_JOBS", "auto").strip().lower() or "auto"
    if raw not in MODES:
        raise InputError(f"WORKBENCH_JOBS={raw!r} must be one of {', '.join(MODES)}")
    return raw


def mode(engine: Engine) -> str:
    """Where a job started now runs: "inline" or "workers" (module docs)."""
    setting = mode_setting()
    if setting != "auto":
        return setting
    with read_session(engine) as s:
        return "workers" if queue.workers_alive(s) > 0 else "inline"


def start(
    engine: Engine,
    actor: Actor,
    kind: str,
    params: Mapping[str, Any],
    files: Mapping[str, bytes] | None = None,
    *,
    on_progress: Callable[[int, int | None, str], None] | None = None,
) -> int:
    """Submit a job (its own transaction) and, in inline mode, run it now in this process;
    returns its id either way."""
    where = mode(engine)  # a bad WORKBENCH_JOBS is refused before a job is queued
    job_id = run_write(engine, lambda s: queue.submit(s, actor, kind, params, files))
    if where == "inline":
        run_one(engine, queue.worker_name("inline"), job_id=job_id, on_progress=on_progress)
    return job_id


def _actor_now(s: Session, user_id: int) -> Actor | None:
    view = users.view_by_id(s, user_id)
    if view is None or not view.active:
        return None
    return users.to_actor(view)


def run_one(
    engine: Engine,
    worker: str,
    *,
    job_id: int | None = None,
    on_progress: Callable[[int, int | None, str], None] | None = None,
) -> int | None:
    """Claim one due job (or job ``job_id``) and run it to its end; its id, or None if none
    was due. Never raises for what the job does: its outcome is on its row."""
    # only kinds this process knows: a worker of an older release leaves a newer kind's jobs
    # to a worker that runs it, rather than failing them
    known = sorted(KINDS)
    claim = run_write(engine, lambda s: queue.claim(s, worker, job_id=job_id, kinds=known))
    if claim is None:
        return None
    with read_session(engine) as s:
        actor = _actor_now(s, claim.created_by)
    kind = None
    try:
        kind = get_kind(claim.kind)
    except InputError as exc:
        _fail(engine, claim, str(exc), retry=False)
        return claim.job_id
    if actor is None or not actor.can(kind.permission):
        _fail(
            engine,
            claim,
            f"the user who started it may no longer run a {kind.title.lower()}",
            retry=False,
        )
        return claim.job_id
    ctx = JobContext(engine, claim, actor, on_progress)
    log.info("job %s (%s) attempt %s on %s", claim.job_id, claim.kind, claim.attempt, worker)
    try:
        with ctx:
            result = kind.run(ctx)
        done, total, _ = ctx.state
        run_write(engine, lambda s: queue.finish(s, claim, result, done=done, total=total))
    except Cancelled:
        done, total, _ = ctx.state
        _quiet(engine, lambda s: queue.cancelled(s, claim, done, total))
    except LeaseLost as exc:
        log.warning("job %s: %s; its new owner goes on", claim.job_id, exc)
    except Retryable as exc:
        _fail(engine, claim, str(exc) or type(exc).__name__, retry=True)
    except WorkbenchError as exc:
        _fail(engine, claim, str(exc), retry=False)
    except (OperationalError, DBAPIError) as exc:
        log.warning("job %s: database error, retried: %s", claim.job_id, exc)
        _fail(engine, claim, f"database error: {type(exc).__name__}", retry=True)
    except Exception as exc:
        log.exception("job %s (%s) failed", claim.job_id, claim.kind)
        _fail(
            engine,
            claim,
            f"internal error: {type(exc).__name__} (see the worker's log)",
            retry=False,
        )
    return claim.job_id


def _fail(engine: Engine, claim: queue.Claim, error: str, *, retry: bool) -> None:
    _quiet(engine, lambda s: queue.fail(s, claim, error, retry=retry))


def _quiet(engine: Engine, work: Callable[[Session], Any]) -> None:
    """Write an outcome; a job taken over meanwhile is its new owner's to end."""
    try:
        run_write(engine, work)
    except LeaseLost as exc:
        log.warning("%s; its new owner goes on", exc)


def run_worker(
    engine: Engine,
    *,
    name: str | None = None,
    stop: threading.Event | None = None,
    once: bool = False,
    poll_seconds: float = 1.0,
) -> int:
    """Run jobs until ``stop`` is set (or, with ``once``, until none is due); returns how
    many it ran. The worker's heartbeat says it is alive between jobs too."""
    name = name or queue.worker_name()
    stop = stop or threading.Event()
    ran = 0
    log.info("worker %s started", name)
    outage = 0.0  # seconds to wait after the database failed, doubling up to a minute
    try:
        while not stop.is_set():
            try:
                run_write(engine, lambda s: queue.beat(s, name, None))
                job_id = run_one(engine, name)
            except (OperationalError, DBAPIError) as exc:
                # the database is down or unreachable: wait and try again, a worker outlives
                # a restart of PostgreSQL (a job it held is taken over when its lease passed)
                outage = min(60.0, max(1.0, outage * 2))
                log.warning(
                    "worker %s: database error, trying again in %.0f s: %s", name, outage, exc
                )
                if once:
                    raise
                stop.wait(outage)
                continue
            outage = 0.0
            if job_id is not None:
                ran += 1
                continue
            if once:
                break
            stop.wait(poll_seconds)
    finally:
        try:
            run_write(engine, lambda s: queue.leave(s, name))
        except (OperationalError, DBAPIError):
            log.warning("worker %s could not sign off; it is forgotten in 30 s", name)
        log.info("worker %s stopped after %s jobs", name, ran)
    return ran
