"""Alembic environment: the engine comes from the caller (storage.db.migrate) or the URL."""

from __future__ import annotations

from alembic import context

from storage.db import get_engine
from storage.models import Base
from storage.trace_search import UNMODELLED

config = context.config


def include_name(name: str | None, type_: str, parent_names: object) -> bool:
    """The model check skips what migration 0019 made outside the models (the traces' FTS5
    table and its shadow tables, SQLite's generated version columns, the version and trigram
    indexes: storage.trace_search.UNMODELLED)."""
    return name not in UNMODELLED


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
        )
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()


if context.is_offline_mode():
    raise SystemExit("offline migrations are not supported; run `workbench migrate`")
run_migrations_online()
