"""What a running job sees: its parameters, its user, its files, and a way to report progress.

A kind's ``run(ctx)`` calls :meth:`JobContext.progress` as it goes. A heartbeat thread beside
it writes the newest progress to the job's row about once a second and renews the lease, so a
job that spends minutes in one SQL statement keeps its lease all the same; the thread's last
answer says whether someone asked to cancel (the next ``progress`` raises :class:`Cancelled`)
or the job was taken over (it raises :class:`LeaseLost`).
"""

from __future__ import annotations

import logging
import tempfile
import threading
from collections.abc import Callable
from typing import IO, Any, Final

from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError

from review.core.identity import Actor
from review.jobs import queue
from review.jobs.queue import Claim, LeaseLost
from storage.db import read_session, run_write

__all__ = ["Cancelled", "JobContext", "LeaseLost", "Retryable"]

log = logging.getLogger("workbench.jobs")

#: how often the heartbeat writes progress and renews the lease, at most (seconds); a third of
#: the lease at least, so two missed beats do not lose it
BEAT_SECONDS: Final = 1.0
#: inputs larger than this are spooled to a temporary file rather than held in memory
SPOOL_BYTES: Final = 32 * 1024 * 1024


class Cancelled(Exception):
    """Someone asked to cancel the job: raised by ``progress``; the job ends cancelled."""


class Retryable(Exception):
    """A transient failure: the job is queued again after a back-off, up to max_attempts."""


class JobContext:
    def __init__(
        self,
        engine: Engine,
        claim: Claim,
        actor: Actor,
        on_progress: Callable[[int, int | None, str], None] | None = None,
    ) -> None:
        self.engine = engine
        self.claim = claim
        self.job_id = claim.job_id
        self.attempt = claim.attempt
        self.actor = actor
        self.params: dict[str, Any] = dict(claim.params)
        self._on_progress = on_progress
        self._lock = threading.Lock()
        self._state: tuple[int, int | None, str] = (0, None, "started")
        self._written: tuple[int, int | None, str] | None = None
        self._cancel = False
        self._lost: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._interval = min(BEAT_SECONDS, queue.lease().total_seconds() / 3)

    # --- what a kind calls ---------------------------------------------------------------

    def progress(self, done: int, total: int | None = None, note: str = "") -> None:
        """Report how far the job is (``done`` of ``total``, ``total`` None while unknown)."""
        with self._lock:
            self._state = (int(done), None if total is None else int(total), note)
            lost, cancel = self._lost, self._cancel
        if self._on_progress is not None:
            self._on_progress(int(done), total, note)
        if lost is not None:
            raise LeaseLost(lost)
        if cancel:
            raise Cancelled(f"job {self.job_id} was cancelled")

    @property
    def state(self) -> tuple[int, int | None, str]:
        with self._lock:
            return self._state

    def input(self, name: str) -> IO[bytes]:
        """Input file ``name`` given when the job was submitted, as a seekable binary file."""
        out: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115
        with read_session(self.engine) as s:
            for part in queue.read_input(s, self.job_id, name):
                out.write(part)
        out.seek(0)
        return out

    def output(self, name: str, data: bytes, mime: str = "application/octet-stream") -> None:
        """Keep ``data`` as the job's result file ``name`` (any server offers it)."""
        run_write(self.engine, lambda s: queue.write_output(s, self.claim, name, data, mime))

    # --- the heartbeat -----------------------------------------------------------------------

    def beat_once(self) -> None:
        """Write the newest progress and renew the lease (what the heartbeat thread does)."""
        with self._lock:
            state = self._state
        try:
            ask = run_write(self.engine, lambda s: queue.heartbeat(s, self.claim, *state))
        except LeaseLost as exc:
            with self._lock:
                self._lost = str(exc)
            return
        except OperationalError as exc:
            # a busy or unreachable database: the lease holds for a while, try again next beat
            log.warning("job %s: heartbeat failed: %s", self.job_id, exc)
            return
        with self._lock:
            self._written = state
            self._cancel = ask

    def _beat(self) -> None:
        while not self._stop.wait(self._interval):
            self.beat_once()
            if self._lost is not None:
                return

    def __enter__(self) -> JobContext:
        self._thread = threading.Thread(
            target=self._beat, name=f"job-{self.job_id}-heartbeat", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
