"""The record of trace imports: the recent imports with their status, and which earlier
import a new one repeats. An import's run in the audit log (:mod:`storage.runs`) has the
entity :data:`RUN_ENTITY` and the ``trace_imports`` row's id; a row still marked ``running``
whose run the audit log reports as interrupted is listed as ``interrupted``."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from review.core.terms import ImportStatus
from storage import runs
from storage.db import read_session
from storage.models import TraceImport

__all__ = ["RUN_ENTITY", "ImportRow", "recent_imports", "same_work"]


#: The audit-log entity of a trace import (its id is the ``trace_imports`` row's).
RUN_ENTITY = "trace_import"


def same_work(earlier: dict[str, Any], plan: dict[str, Any]) -> bool:
    """Whether an earlier import's plan is the same source: the same sha256 when both have
    one, else the same source name and format."""
    if earlier.get("sha256") or plan.get("sha256"):
        return bool(earlier.get("sha256") == plan.get("sha256"))
    return bool(earlier.get("source") == plan["source"] and earlier.get("format") == plan["format"])


@dataclass(frozen=True)
class ImportRow:
    id: int
    source: str
    format: str
    status: str
    added: int
    skipped: int
    rejected: int
    redactions: dict[str, Any]
    actor: str
    started_at: dt.datetime
    finished_at: dt.datetime | None
    message: str


def _status(s: Session, row: TraceImport) -> str:
    """The import row's status; a ``running`` row whose run the audit log reports as
    interrupted (its process is gone, or a re-run resumed it) is ``interrupted``."""
    if row.status != ImportStatus.running:
        return row.status
    state = runs.state_of(s, RUN_ENTITY, row.id)
    return "interrupted" if state is not None and state.status == "interrupted" else row.status


def recent_imports(engine: Engine, limit: int = 10) -> list[ImportRow]:
    with read_session(engine) as s:
        rows = list(s.scalars(select(TraceImport).order_by(TraceImport.id.desc()).limit(limit)))
        return [
            ImportRow(
                r.id,
                r.source,
                r.format,
                _status(s, r),
                r.added,
                r.skipped,
                r.rejected,
                dict(r.redactions or {}),
                r.actor,
                r.started_at,
                r.finished_at,
                r.message,
            )
            for r in rows
        ]
