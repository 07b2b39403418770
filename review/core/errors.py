"""Errors that carry a message meant for the person using the workbench."""

from __future__ import annotations

from storage.changes import StaleWriteError

__all__ = ["InputError", "PermissionDenied", "PolicyFileError", "StaleWriteError"]


class InputError(ValueError):
    """Input that cannot be accepted; the message says where and why. Nothing was written."""


class PolicyFileError(InputError):
    """A policy/taxonomy YAML file is invalid; the message names the file, key and problem."""


class PermissionDenied(PermissionError):
    """The current user's role or clearance does not allow this action."""
