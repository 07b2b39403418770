"""The one writer of a row of ``settings``: version-checked, stamped with who and when."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from storage.changes import StaleWriteError
from storage.models import Setting, utcnow


def put_setting(
    s: Session,
    key: str,
    value: dict[str, Any],
    by: str,
    *,
    expected_version: int | None = None,
    what: str = "the setting",
) -> tuple[Setting, dict[str, Any] | None]:
    """Store ``value`` under ``key`` in the caller's transaction (the row locked first) and
    return the row with the value it held before (None when new).

    With ``expected_version`` (0 for a setting never saved), a row changed since the person
    opened it is refused with :class:`StaleWriteError` naming ``what`` and who changed it."""
    row = s.get(Setting, key, with_for_update=True)
    if expected_version is not None:
        current = row.version if row else 0
        if current != expected_version:
            raise StaleWriteError(
                f"{what} was changed by {row.updated_by if row else '?'} (now version "
                f"{current}, you opened version {expected_version}); nothing was saved: "
                "reload and try again"
            )
    before = dict(row.value) if row else None
    now = utcnow()
    if row is None:
        row = Setting(key=key, value=value, version=1, updated_by=by, updated_at=now)
        s.add(row)
    else:
        row.value = value
        row.version += 1
        row.updated_at = now
        row.updated_by = by
    s.flush()
    return row, before
