"""The audit log and optimistic-concurrency writes shared by every service."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from sqlalchemy import inspect, select, update
from sqlalchemy.orm import DeclarativeBase, Session

from storage.errors import WorkbenchError
from storage.models import AuditLog, utcnow


class StaleWriteError(WorkbenchError):
    """Someone else saved the row after the caller read it; nothing was written."""


def _jsonable(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return json.loads(json.dumps(value, default=str))


def snapshot(row: DeclarativeBase) -> dict[str, Any]:
    """The row's column values as JSON-ready data (for the audit log)."""
    mapper = inspect(type(row))
    return {c.key: _jsonable(getattr(row, c.key)) for c in mapper.column_attrs}


def record(
    session: Session,
    actor: str,
    action: str,
    entity: str,
    entity_id: object,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
) -> None:
    """Append one audit-log row in the caller's transaction."""
    session.add(
        AuditLog(
            at=utcnow(),
            actor=actor,
            action=action,
            entity=entity,
            entity_id=str(entity_id),
            before=_jsonable(before) if before is not None else None,
            after=_jsonable(after) if after is not None else None,
        )
    )


def versioned_update(
    session: Session,
    model: type[Any],
    row_id: int,
    expected_version: int,
    values: dict[str, Any],
    actor: str,
    entity: str,
    audit: bool = True,
) -> Any:
    """Update one row only if it is still at ``expected_version``; audit the change.

    The row must have ``version``, ``updated_at`` and ``updated_by`` columns. A stale write
    raises :class:`StaleWriteError` naming who changed the row and when.
    """
    current = session.get(model, row_id, populate_existing=True, with_for_update=True)
    if current is None:
        raise LookupError(f"{entity} {row_id} does not exist")
    before = snapshot(current)
    now = utcnow()
    stmt = (
        update(model)
        .where(model.id == row_id, model.version == expected_version)
        .values(**values, version=model.version + 1, updated_at=now, updated_by=actor)
        .execution_options(synchronize_session=False)
    )
    result = session.execute(stmt)
    if result.rowcount != 1:  # type: ignore[attr-defined]
        raise stale_error(entity, row_id, expected_version, current)
    fresh = session.execute(
        select(model).where(model.id == row_id).execution_options(populate_existing=True)
    ).scalar_one()
    if audit:
        record(session, actor, "update", entity, row_id, before, snapshot(fresh))
    return fresh


def stale_error(
    entity: str, row_id: object, expected_version: int, current: Any
) -> StaleWriteError:
    who = getattr(current, "updated_by", None) or "another user"
    when = getattr(current, "updated_at", None)
    when_text = when.strftime("%Y-%m-%d %H:%M UTC") if isinstance(when, dt.datetime) else "recently"
    return StaleWriteError(
        f"{entity} {row_id} was changed by {who} at {when_text} (now version "
        f"{current.version}, you opened version {expected_version}). Nothing was saved: "
        "reload to see their change, then apply yours again."
    )
