"""Retention of production traces: the retention setting and purging what is older, the
rollup and audit items kept consistent in the same transaction."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import (
    Engine,
    delete,
    exists,
    func,
    select,
)
from sqlalchemy.orm import Session

from review.core import readable
from review.core.errors import InputError
from review.core.identity import Actor, Permission, require
from review.traces import rollup
from storage import changes, runs
from storage.db import read_session, run_write
from storage.models import AuditItem, Counter, Setting, SourceSpan, TraceChunk, utcnow
from storage.models import Trace as TraceRow
from storage.settings import put_setting

if TYPE_CHECKING:
    pass


__all__ = [
    "PurgeReport",
    "Retention",
    "apply_retention",
    "get_retention",
    "purge_older_than",
    "set_retention",
]


RETENTION_KEY = "retention"


MAX_RETENTION_DAYS = 10 * 366


#: The audit-log entity of a purge; its ids are numbered by the ``trace_purge`` counter.
RUN_ENTITY = "trace_purge"


# ---------------------------------------------------------------------------------------
# Retention


@dataclass(frozen=True)
class Retention:
    days: int | None  # None: keep traces until someone purges them
    version: int  # 0 when never set
    updated_by: str | None
    updated_at: dt.datetime | None


def get_retention(engine: Engine) -> Retention:
    with read_session(engine) as s:
        row = s.get(Setting, RETENTION_KEY)
        if row is None:
            return Retention(None, 0, None, None)
        days = (row.value or {}).get("days")
        return Retention(
            int(days) if isinstance(days, int) else None,
            row.version,
            row.updated_by,
            row.updated_at,
        )


def set_retention(
    engine: Engine, actor: Actor, days: int | None, expected_version: int
) -> Retention:
    """Set (or clear, with None) how many days traces are kept. Version-checked, audited."""
    require(actor, Permission.manage_users)
    if days is not None and not 1 <= days <= MAX_RETENTION_DAYS:
        raise InputError(f"retention must be between 1 and {MAX_RETENTION_DAYS} days")

    def work(s: Session) -> Retention:
        value = {"days": days}
        row, before = put_setting(
            s,
            RETENTION_KEY,
            value,
            actor.email,
            expected_version=expected_version,
            what="the retention setting",
        )
        changes.record(s, actor.email, "update", "setting", RETENTION_KEY, before, value)
        return Retention(days, row.version, actor.email, row.updated_at)

    return run_write(engine, work)


@dataclass(frozen=True)
class PurgeReport:
    cutoff: dt.datetime
    deleted: int
    kept_in_audits: int

    def summary(self) -> str:
        kept = (
            f"; {readable.count(self.kept_in_audits, 'older trace')} kept because they are in an "
            "audit sample"
            if self.kept_in_audits
            else ""
        )
        return (
            f"{readable.count(self.deleted, 'trace')} from before {self.cutoff:%Y-%m-%d %H:%M} UTC "
            "deleted "
            f"with their chunks{kept}."
        )


def purge_older_than(
    engine: Engine,
    actor: Actor,
    days: int,
    *,
    now: dt.datetime | None = None,
    batch: int = 2000,
    progress: Callable[[int], None] | None = None,
) -> PurgeReport:
    """Delete traces (and their chunks) recorded more than ``days`` days ago, in batches.

    Traces in an audit sample are kept (deleting them would delete the verdicts); the report
    counts them. The purge is written to the audit log as it goes (:mod:`storage.runs`): a
    ``start`` entry with the cutoff, a ``progress`` entry with the count deleted so far in the
    transaction of every batch, and the closing ``purge`` entry; a killed purge shows as
    interrupted, and the next purge whose cutoff covers it names it in ``resumes``.
    """
    require(actor, Permission.manage_users)
    if not 0 <= days <= MAX_RETENTION_DAYS:
        raise InputError(f"days must be between 0 and {MAX_RETENTION_DAYS}")
    cutoff = (now or utcnow()) - dt.timedelta(days=days)
    in_audit = exists().where(AuditItem.trace_pk == TraceRow.id)
    deleted = 0
    plan = {"older_than_days": days, "cutoff": cutoff.isoformat()}

    def begin(s: Session) -> str:
        counter = s.get(Counter, RUN_ENTITY, with_for_update=True)
        if counter is None:
            counter = Counter(name=RUN_ENTITY, value=0, version=1)
            s.add(counter)
        counter.value += 1
        counter.version += 1
        run_id = str(counter.value)
        resumes = [r.entity_id for r in runs.interrupted(s, RUN_ENTITY) if _covers(plan, r.plan)]
        runs.started(s, actor.email, RUN_ENTITY, run_id, plan, resumes)
        return run_id

    run_id = run_write(engine, begin)

    def work(s: Session) -> int:
        found = s.execute(
            select(TraceRow.id, TraceRow.trace_id)
            .where(TraceRow.at < cutoff, ~in_audit)
            .limit(batch)
        ).all()
        ids = [pk for pk, _ in found]
        if ids:
            rollup.subtract_ids(s, ids)
            s.execute(delete(TraceChunk).where(TraceChunk.trace_pk.in_(ids)))
            # the spans a live source delivered for them (their ids, kept for de-duplication
            # and to write verdicts back) go with them
            s.execute(delete(SourceSpan).where(SourceSpan.trace_id.in_([t for _, t in found])))
            s.execute(delete(TraceRow).where(TraceRow.id.in_(ids)))
            runs.progressed(s, actor.email, RUN_ENTITY, run_id, {"deleted": deleted + len(ids)})
        return len(ids)

    try:
        while True:
            n = run_write(engine, work)
            deleted += n
            if progress is not None and n:
                progress(deleted)
            if n < batch:
                break
    except BaseException as exc:
        message = (str(exc) or f"stopped by {type(exc).__name__}")[:2000]
        failed = {"deleted": deleted, "status": "failed", "message": message}
        with contextlib.suppress(Exception):  # the purge's own error is the one to report
            run_write(
                engine,
                lambda s: changes.record(s, actor.email, "purge", RUN_ENTITY, run_id, plan, failed),
            )
        raise

    def finish(s: Session) -> int:
        # spans that never became a stored trace (late, or of a refused trace) older than
        # the cutoff: only their ids and reason are left, and nothing refers to them
        s.execute(
            delete(SourceSpan).where(
                SourceSpan.state.in_(("late", "rejected")), SourceSpan.received_at < cutoff
            )
        )
        kept = int(
            s.scalar(
                select(func.count()).select_from(TraceRow).where(TraceRow.at < cutoff, in_audit)
            )
            or 0
        )
        changes.record(
            s,
            actor.email,
            "purge",
            RUN_ENTITY,
            run_id,
            plan,
            {"deleted": deleted, "kept_in_audits": kept},
        )
        return kept

    kept = run_write(engine, finish)
    return PurgeReport(cutoff, deleted, kept)


def _covers(plan: dict[str, object], earlier: dict[str, object]) -> bool:
    """Whether a purge with ``plan`` deletes everything an earlier purge set out to delete
    (its cutoff is the same or later)."""
    try:
        mine = dt.datetime.fromisoformat(str(plan["cutoff"]))
        theirs = dt.datetime.fromisoformat(str(earlier.get("cutoff")))
    except (KeyError, ValueError):
        return False
    return mine >= theirs


def apply_retention(
    engine: Engine, actor: Actor, *, now: dt.datetime | None = None
) -> PurgeReport | None:
    """Purge by the retention setting; None when no retention is set."""
    require(actor, Permission.manage_users)
    r = get_retention(engine)
    if r.days is None:
        return None
    return purge_older_than(engine, actor, r.days, now=now)
