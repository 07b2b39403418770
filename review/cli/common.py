"""What every command shares: who the command line acts as, the database, the one way a command
writes (:func:`transact`) and the one handler that turns an error meant for the user into
``error: <message>`` and exit status 1."""

from __future__ import annotations

import getpass
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any, NoReturn, TypeVar

import click
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from review.core import database
from review.core.errors import WorkbenchError
from review.core.identity import SYSTEM, Actor
from storage.db import get_engine, migrate

__all__ = ["WorkbenchCommand", "WorkbenchGroup", "cli_actor", "fail", "open_engine", "transact"]

T = TypeVar("T")


def cli_actor() -> Actor:
    """The command line acts as the operator of the machine: an administrator with clearance,
    named after the login user."""
    try:
        who = getpass.getuser()
    except (KeyError, OSError):
        who = "unknown"
    return replace(SYSTEM, email=f"cli:{who}", name=f"command line ({who})")


def open_engine() -> Engine:
    """The configured database, migrated to the newest schema."""
    eng = get_engine()
    migrate(eng)
    return eng


def transact(engine: Engine, work: Callable[[Session], T]) -> T:
    """The commands' one way to write: run ``work`` (a Session-taking service, which does not
    commit) as one transaction; a busy database or a serialization conflict re-runs it, and a
    :class:`WorkbenchError` rolls it back and ends the command with ``error: <message>`` and
    exit status 1 (:func:`fail`)."""
    try:
        return database.write(engine, work)
    except WorkbenchError as exc:
        fail(exc)


def fail(exc: BaseException) -> NoReturn:
    click.echo(f"error: {exc}", err=True)
    sys.exit(1)


class WorkbenchCommand(click.Command):
    """A command whose errors meant for the user (a :class:`WorkbenchError`, or a file that is
    not UTF-8 text) end it with ``error: <message>`` on stderr and exit status 1; nothing was
    written."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (WorkbenchError, UnicodeDecodeError) as exc:
            fail(exc)


class WorkbenchGroup(click.Group):
    """The ``workbench`` group: its commands are :class:`WorkbenchCommand`."""

    command_class = WorkbenchCommand


class WorkbenchSubgroup(WorkbenchGroup, WorkbenchCommand):
    """A group under ``workbench`` (``sync``, ``push``): its subcommands are
    :class:`WorkbenchCommand` (errors meant for the user end them with ``error: <message>``),
    and it is one itself, as every command of ``workbench`` is."""
