"""Alembic environment: the engine comes from the caller (storage.db.migrate) or the URL."""

from __future__ import annotations

from alembic import context
from sqlalchemy import ForeignKeyConstraint, UniqueConstraint

from storage import partitions
from storage.db import get_engine
from storage.models import Base
from storage.trace_search import UNMODELLED

config = context.config


def include_name(name: str | None, type_: str, parent_names: object) -> bool:
    """The model check skips what migration 0019 made outside the models (the traces' FTS5
    table and its shadow tables, SQLite's generated version columns, the version and trigram
    indexes: storage.trace_search.UNMODELLED), and the monthly partitions of migration 0036 with
    their engine-specific keys (storage.partitions)."""
    if name in UNMODELLED or name in partitions.UNMODELLED:
        return False
    if type_ == "table" and partitions.is_partition(name):
        return False
    table = parent_names.get("table_name") if isinstance(parent_names, dict) else None
    return not (type_ == "column" and table == "audit_items" and name == "trace_at")


def include_object(
    obj: object, name: str | None, type_: str, reflected: bool, compare_to: object
) -> bool:
    """The keys that differ by engine since migration 0036 (storage.partitions) are skipped on
    both sides: the traces' unique trace id (a plain index and a trigger on PostgreSQL) and
    the foreign keys to the traces (by ``(trace_pk, trace_at)`` to every partition there)."""
    if type_ == "unique_constraint" and isinstance(obj, UniqueConstraint):
        return not (obj.table.name == "traces" and [c.name for c in obj.columns] == ["trace_id"])
    if type_ == "foreign_key_constraint" and isinstance(obj, ForeignKeyConstraint):
        target = obj.elements[0].column.table.name if obj.elements else ""
        return not (
            obj.table.name in ("trace_chunks", "audit_items")
            and (target == "traces" or partitions.is_partition(target))
        )
    return True


target_metadata = Base.metadata


def run_migrations_online() -> None:
    engine = config.attributes.get("engine") or get_engine()
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=True,
            compare_type=True,
            include_name=include_name,
            include_object=include_object,
        )
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()


if context.is_offline_mode():
    raise SystemExit("offline migrations are not supported; run `workbench migrate`")
run_migrations_online()
