"""The database as the app and CLI open it: configured URL, migrated to the newest schema, and
the units of work the entry points (``pages/ui.py``'s :func:`transact`, the CLI's
``review/cli/common.py`` :func:`transact`) run a Session-taking service in."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from storage.db import database_url, get_engine, migrate, run_write

__all__ = ["database_url", "open_database", "show_migration_log", "write"]

T = TypeVar("T")


def open_database(url: str | None = None) -> Engine:
    """The shared engine for ``url`` (default: the configured one), upgraded to head: by this
    process, or by another one started with it while this one waits (``storage.migrating``).
    What it did goes to the server's log (:func:`show_migration_log`)."""
    show_migration_log()
    engine = get_engine(url or database_url())
    migrate(engine)
    return engine


def show_migration_log() -> None:
    """Let an operator see the ``workbench.migrate`` lines (waiting for the lock, migrated
    from X to Y, schema at head) in the server's standard error, unless logging was set up
    to send them somewhere already."""
    logger = logging.getLogger("workbench.migrate")
    if logger.hasHandlers():
        return
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def write(engine: Engine, work: Callable[[Session], T]) -> T:
    """Run ``work`` (a Session-taking service, which does not commit) as one write transaction:
    committed when it returns, rolled back when it raises; a busy database, a deadlock or a
    serialization failure re-runs the whole of it (:func:`storage.db.run_write`)."""
    return run_write(engine, work)


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is when a line is logged (as ``logging.lastResort``
    does), not to the stream that was standard error when the handler was made."""

    @property
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, _value: object) -> None:
        pass
