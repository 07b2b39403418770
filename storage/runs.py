"""Long-running writes (trace imports, purges) recorded in the audit log while they run.

The audit log is append-only, so a run is a sequence of entries sharing one ``entity`` and
``entity_id``:

- ``start`` when the run begins writing, with what it will do (its plan: file, size, sha256,
  mode) and the host and process id that run it;
- ``progress`` in the same transaction as every batch it commits, with the counts so far (a
  progress entry never claims rows that were not committed: they commit together);
- one closing entry with the final counts (any other action, e.g. ``import`` or ``purge``;
  ``after["status"] == "failed"`` marks a run that stopped on an error and said so).

A run can be reopened by the process that started it: a ``progress`` entry after its closing
entry (a live source's import folded into the run of its hour, :mod:`review.traces.importer`),
then its batches' progress entries and a new closing entry. The newest closing entry, when
nothing follows it, is the one that counts.

A start without a closing entry is a run that is still going or was killed. It is reported as
**interrupted** when the process that started it is gone (same host, process id no longer
running), when it has written nothing for :data:`STALE_AFTER` (another host, or a reused
process id), or when a later run of the same work names it in its plan's ``resumes`` (a re-run
of a killed import or purge completes it). Otherwise it is **running**.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import sys
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from storage import changes
from storage.models import AuditLog, utcnow

__all__ = [
    "PROGRESS",
    "STALE_AFTER",
    "START",
    "RunState",
    "count",
    "interrupted",
    "process_alive",
    "progressed",
    "recent",
    "started",
    "state_of",
]


START = "start"
PROGRESS = "progress"

#: A run with no entry for this long is reported as interrupted even if a process with its id
#: still exists (batches commit in well under a minute).
STALE_AFTER = dt.timedelta(minutes=15)


def started(
    session: Session,
    actor: str,
    entity: str,
    entity_id: object,
    plan: dict[str, Any],
    resumes: list[str] | None = None,
) -> None:
    """Append the ``start`` entry of a run, in the caller's transaction."""
    after: dict[str, Any] = {**plan, "host": socket.gethostname(), "pid": os.getpid()}
    if resumes:
        after["resumes"] = list(resumes)
    changes.record(session, actor, START, entity, entity_id, None, after)


def progressed(
    session: Session, actor: str, entity: str, entity_id: object, counts: dict[str, Any]
) -> None:
    """Append a ``progress`` entry, in the transaction of the batch whose counts it states."""
    changes.record(session, actor, PROGRESS, entity, entity_id, None, counts)


@dataclass(frozen=True)
class RunState:
    """One run as the audit log tells it."""

    entity: str
    entity_id: str
    actor: str
    started_at: dt.datetime
    last_at: dt.datetime
    status: str  # running, completed, failed or interrupted
    plan: dict[str, Any]
    counts: dict[str, Any]  # the closing entry's, else the last progress entry's
    progress_entries: int
    resumes: tuple[str, ...] = ()
    resumed_by: str | None = None
    start_entry: int = 0

    def describe(self) -> str:
        """The status in words, with the link to the run that resumed it."""
        text = self.status
        if self.status == "failed" and self.counts.get("message"):
            text += f": {self.counts['message']}"
        if self.status == "interrupted":
            text += " (no closing entry"
            if self.progress_entries:
                text += f"; counts as of its last progress entry at {self.last_at:%Y-%m-%d %H:%M}"
            else:
                text += "; no batch was committed"
            text += ")"
            if self.resumed_by is not None:
                text += f"; resumed by {self.entity} {self.resumed_by}"
        if self.resumes:
            text += "; resumes interrupted " + ", ".join(f"{self.entity} {r}" for r in self.resumes)
        return text


def process_alive(host: object, pid: object) -> bool | None:
    """Whether the process that started a run still exists; None when this cannot be told
    (another host, or a platform without signal 0)."""
    if host != socket.gethostname() or not isinstance(pid, int) or sys.platform == "win32":
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    except OSError:
        return None
    return True


def _as_utc(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def _state(session: Session, start: AuditLog, now: dt.datetime) -> RunState:
    same = (
        AuditLog.entity == start.entity,
        AuditLog.entity_id == start.entity_id,
        AuditLog.id > start.id,
    )
    # the run's newest entry closes it when it is neither a start nor a progress entry; a
    # progress entry after a closing one reopened the run (an import folded into it)
    newest = session.scalar(select(AuditLog).where(*same).order_by(AuditLog.id.desc()).limit(1))
    closing = newest if newest is not None and newest.action not in (START, PROGRESS) else None
    n_progress = int(
        session.scalar(select(func.count(AuditLog.id)).where(*same, AuditLog.action == PROGRESS))
        or 0
    )
    last_progress = session.scalar(
        select(AuditLog)
        .where(*same, AuditLog.action == PROGRESS)
        .order_by(AuditLog.id.desc())
        .limit(1)
    )
    resumed_by: str | None = None
    if closing is None:  # only an unfinished run can have been resumed
        later_starts = session.scalars(
            select(AuditLog)
            .where(
                AuditLog.entity == start.entity, AuditLog.action == START, AuditLog.id > start.id
            )
            .order_by(AuditLog.id)
        )
        resumed_by = next(
            (
                s.entity_id
                for s in later_starts
                if start.entity_id in ((s.after or {}).get("resumes") or [])
            ),
            None,
        )
    plan = dict(start.after or {})
    resumes = tuple(str(r) for r in plan.get("resumes") or [])
    last = closing or last_progress or start
    counts = dict((closing.after if closing is not None else None) or {})
    if closing is None and last_progress is not None:
        counts = dict(last_progress.after or {})
    if closing is not None:
        status = "failed" if counts.get("status") == "failed" else "completed"
    else:
        gone = process_alive(plan.get("host"), plan.get("pid")) is False
        silent = now - _as_utc(last.at) > STALE_AFTER
        status = "interrupted" if resumed_by is not None or gone or silent else "running"
    return RunState(
        entity=start.entity,
        entity_id=start.entity_id,
        actor=start.actor,
        started_at=_as_utc(start.at),
        last_at=_as_utc(last.at),
        status=status,
        plan=plan,
        counts=counts,
        progress_entries=n_progress,
        resumes=resumes,
        resumed_by=resumed_by,
        start_entry=start.id,
    )


def recent(
    session: Session, entity: str | None = None, limit: int = 20, offset: int = 0
) -> list[RunState]:
    """Runs newest first (of one entity, or of all), with their derived status."""
    stmt = select(AuditLog).where(AuditLog.action == START)
    if entity is not None:
        stmt = stmt.where(AuditLog.entity == entity)
    starts = list(session.scalars(stmt.order_by(AuditLog.id.desc()).limit(limit).offset(offset)))
    now = utcnow()
    return [_state(session, s, now) for s in starts]


def count(session: Session, entity: str | None = None) -> int:
    stmt = select(func.count(AuditLog.id)).where(AuditLog.action == START)
    if entity is not None:
        stmt = stmt.where(AuditLog.entity == entity)
    return int(session.scalar(stmt) or 0)


def state_of(session: Session, entity: str, entity_id: object) -> RunState | None:
    """The run recorded for one entity id (its latest start), or None."""
    start = session.scalar(
        select(AuditLog)
        .where(
            AuditLog.entity == entity,
            AuditLog.entity_id == str(entity_id),
            AuditLog.action == START,
        )
        .order_by(AuditLog.id.desc())
        .limit(1)
    )
    return None if start is None else _state(session, start, utcnow())


def interrupted(session: Session, entity: str, limit: int = 50) -> list[RunState]:
    """Recent interrupted runs of ``entity`` that no later run has resumed yet."""
    return [
        r
        for r in recent(session, entity, limit=limit)
        if r.status == "interrupted" and r.resumed_by is None
    ]
