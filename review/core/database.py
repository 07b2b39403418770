"""The database as the app and CLI open it: configured URL, migrated to the newest schema, and
the units of work the entry points (``pages/ui.py``'s :func:`transact`, the CLI's
``review/cli/common.py`` :func:`transact`) run a Session-taking service in."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from storage.db import database_url, get_engine, migrate, run_write

__all__ = ["database_url", "open_database", "write"]

T = TypeVar("T")


def open_database(url: str | None = None) -> Engine:
    """The shared engine for ``url`` (default: the configured one), upgraded to head."""
    engine = get_engine(url or database_url())
    migrate(engine)
    return engine


def write(engine: Engine, work: Callable[[Session], T]) -> T:
    """Run ``work`` (a Session-taking service, which does not commit) as one write transaction:
    committed when it returns, rolled back when it raises; a busy database, a deadlock or a
    serialization failure re-runs the whole of it (:func:`storage.db.run_write`)."""
    return run_write(engine, work)
