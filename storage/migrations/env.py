"""Alembic environment: the engine comes from the caller (storage.db.migrate) or the URL."""

from __future__ import annotations

from alembic import context

from storage.db import get_engine
from storage.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    engine = config.attributes.get("engine") or get_engine()
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=True,
            compare_type=True,
        )
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()


if context.is_offline_mode():
    raise SystemExit("offline migrations are not supported; run `workbench migrate`")
run_migrations_online()
