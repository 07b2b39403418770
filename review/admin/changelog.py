"""Reading the audit log (paginated, newest first)."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlalchemy import ColumnElement, Engine, func, select

from storage.db import read_session
from storage.models import AuditLog


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


def _conds(entity: str | None) -> list[ColumnElement[bool]]:
    return [AuditLog.entity == entity] if entity else []


def count_entries(engine: Engine, entity: str | None = None) -> int:
    with read_session(engine) as s:
        return int(s.scalar(select(func.count(AuditLog.id)).where(*_conds(entity))) or 0)


def entries(
    engine: Engine, entity: str | None = None, page: int = 1, page_size: int = 25
) -> list[AuditRow]:
    with read_session(engine) as s:
        rows = s.scalars(
            select(AuditLog)
            .where(*_conds(entity))
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


def entries_frame(rows: list[AuditRow]) -> pd.DataFrame:
    """The change-log table: one row per change, before and after as JSON cut to
    :data:`SNAPSHOT_CHARS` characters (empty when there is none)."""

    def snap(value: dict[str, Any] | None) -> str:
        return json.dumps(value, ensure_ascii=False)[:SNAPSHOT_CHARS] if value else ""

    return pd.DataFrame(
        [
            {
                "when": r.at,
                "who": r.actor,
                "action": r.action,
                "entity": r.entity,
                "id": r.entity_id,
                "before": snap(r.before),
                "after": snap(r.after),
            }
            for r in rows
        ],
        columns=["when", "who", "action", "entity", "id", "before", "after"],
    )
