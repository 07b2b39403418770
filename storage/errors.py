"""The root of every error meant for the person using the workbench.

It lives in storage, the lowest layer, so that storage's own such error (a stale write) is one
too; review/core/errors.py builds the rest of the family on it.
"""

from __future__ import annotations

__all__ = ["WorkbenchError"]


class WorkbenchError(Exception):
    """An error meant for the person using the workbench: the message says what was wrong and
    where, and nothing was written."""
