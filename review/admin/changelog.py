"""Reading the audit log (paginated, newest first), and the runs of imports and purges it
records (:mod:`storage.runs`): each with its status (running, completed, failed or
interrupted) and its last counts."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlalchemy import ColumnElement, Engine, func, select

from review.core import readable
from storage import runs
from storage.db import read_session
from storage.models import AuditLog
from storage.runs import RunState

__all__ = [
    "AuditRow",
    "RunState",
    "count_entries",
    "count_runs",
    "entities",
    "entries",
    "entries_frame",
    "recent_runs",
    "runs_frame",
]


@dataclass(frozen=True)
class AuditRow:
    id: int
    at: dt.datetime
    actor: str
    action: str
    entity: str
    entity_id: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None


def _conds(entity: str | None, progress: bool = True) -> list[ColumnElement[bool]]:
    conds = [AuditLog.entity == entity] if entity else []
    if not progress:
        conds.append(AuditLog.action != runs.PROGRESS)
    return conds


def count_entries(engine: Engine, entity: str | None = None, progress: bool = True) -> int:
    with read_session(engine) as s:
        return int(s.scalar(select(func.count(AuditLog.id)).where(*_conds(entity, progress))) or 0)


def entries(
    engine: Engine,
    entity: str | None = None,
    page: int = 1,
    page_size: int = 25,
    progress: bool = True,
) -> list[AuditRow]:
    """One page of the log, newest first; ``progress=False`` leaves out the progress entries
    of imports and purges (one per committed batch)."""
    with read_session(engine) as s:
        rows = s.scalars(
            select(AuditLog)
            .where(*_conds(entity, progress))
            .order_by(AuditLog.id.desc())
            .limit(page_size)
            .offset((max(page, 1) - 1) * page_size)
        )
        return [
            AuditRow(r.id, r.at, r.actor, r.action, r.entity, r.entity_id, r.before, r.after)
            for r in rows
        ]


def entities(engine: Engine) -> list[str]:
    with read_session(engine) as s:
        return list(s.scalars(select(AuditLog.entity).distinct().order_by(AuditLog.entity)))


#: Characters of a before/after snapshot shown in the change-log table.
SNAPSHOT_CHARS = 500


def entries_frame(rows: list[AuditRow], names: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The change-log table: one row per change (when as a date and time, who by name when
    ``names`` is given), before and after as JSON cut to :data:`SNAPSHOT_CHARS` characters
    (empty when there is none)."""

    def snap(value: dict[str, Any] | None) -> str:
        return json.dumps(value, ensure_ascii=False)[:SNAPSHOT_CHARS] if value else ""

    return pd.DataFrame(
        [
            {
                "when": readable.when(r.at),
                "who": r.actor
                if names is None or "@" not in r.actor
                else readable.person(r.actor, names),
                "action": r.action,
                "entity": readable.humanize(r.entity),
                "id": r.entity_id,
                "before": snap(r.before),
                "after": snap(r.after),
            }
            for r in rows
        ],
        columns=["when", "who", "action", "entity", "id", "before", "after"],
    )


def count_runs(engine: Engine) -> int:
    with read_session(engine) as s:
        return runs.count(s)


def recent_runs(engine: Engine, page: int = 1, page_size: int = 10) -> list[RunState]:
    """Imports and purges, newest first, with their status derived from the audit log."""
    with read_session(engine) as s:
        return runs.recent(s, limit=page_size, offset=(max(page, 1) - 1) * page_size)


def _counts_text(counts: dict[str, Any]) -> str:
    shown = {k: v for k, v in counts.items() if isinstance(v, int) and not isinstance(v, bool)}
    return ", ".join(f"{k} {v:,}" for k, v in shown.items())


def _what(r: RunState) -> str:
    if r.entity == "trace_purge":
        return f"older than {r.plan.get('older_than_days')} days (before {r.plan.get('cutoff')})"
    what = str(r.plan.get("source", ""))
    if r.plan.get("sha256"):
        what += f" (sha256 {str(r.plan['sha256'])[:12]}…, {r.plan.get('bytes', 0):,} bytes)"
    return what


def runs_frame(rows: list[RunState]) -> pd.DataFrame:
    """The runs table: one row per import or purge, its status in words (an interrupted run
    names the run that resumed it) and its last counts."""
    return pd.DataFrame(
        [
            {
                "run": f"{r.entity} {r.entity_id}",
                "status": r.status,
                "what": _what(r),
                "counts": _counts_text(r.counts),
                "details": r.describe(),
                "who": r.actor,
                "started": r.started_at,
                "last entry": r.last_at,
            }
            for r in rows
        ],
        columns=["run", "status", "what", "counts", "details", "who", "started", "last entry"],
    )
