"""Errors that carry a message meant for the person using the workbench.

Every such error is a :class:`WorkbenchError`: its message says what was wrong and where, and
nothing was written. Pages show one through ``pages.ui.reported`` (or ``ui.show_error``) and
the command line through one handler (``review.cli.common``), so neither lists exception
classes. The root class is defined in ``storage.errors`` so that :class:`StaleWriteError`,
which storage raises when a row changed since it was read, is one too.
"""

from __future__ import annotations

from storage.changes import StaleWriteError
from storage.errors import WorkbenchError

__all__ = ["InputError", "PermissionDenied", "PolicyFileError", "StaleWriteError", "WorkbenchError"]


class InputError(WorkbenchError, ValueError):
    """Input that cannot be accepted; the message says where and why. Nothing was written."""


class PolicyFileError(InputError):
    """A policy/taxonomy YAML file is invalid; the message names the file, key and problem."""


class PermissionDenied(WorkbenchError, PermissionError):
    """The current user's role or clearance does not allow this action."""
