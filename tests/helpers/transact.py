"""Calling a Session-taking service the way the pages and the CLI do: in one write
transaction of its own (review.core.database.write, which their entry points use)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from review.core import database

T = TypeVar("T")


def write(engine: Engine, service: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``service(s, *args, **kwargs)`` in one write transaction on ``engine``."""

    def work(s: Session) -> T:
        return service(s, *args, **kwargs)

    return database.write(engine, work)
