"""The database as the app and CLI open it: configured URL, migrated to the newest schema."""

from __future__ import annotations

from sqlalchemy import Engine

from storage.db import database_url, get_engine, migrate

__all__ = ["database_url", "open_database"]


def open_database(url: str | None = None) -> Engine:
    """The shared engine for ``url`` (default: the configured one), upgraded to head."""
    engine = get_engine(url or database_url())
    migrate(engine)
    return engine
