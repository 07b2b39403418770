"""What every command shares: who the command line acts as, the database, and the one handler
that turns an error meant for the user into ``error: <message>`` and exit status 1."""

from __future__ import annotations

import getpass
import sys
from dataclasses import replace
from typing import Any, NoReturn

import click
from sqlalchemy import Engine

from review.core.errors import WorkbenchError
from review.core.identity import SYSTEM, Actor
from storage.db import get_engine, migrate

__all__ = ["WorkbenchCommand", "WorkbenchGroup", "cli_actor", "fail", "open_engine"]


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
