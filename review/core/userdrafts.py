"""A person's unsaved work, kept in the database (issue 33): the wording they are editing, and
other drafts a page keeps between edits. The app runs as several servers behind one address;
a server that goes down takes its sessions with it, and the browser reconnects to another
one: a draft held only in the session would be lost, so each edit is saved here and the page
loads it again on whichever server it opens.

A draft is one row per user and draft key (``"wording"``, ``"audit.claims.12"``): a JSON
object of at most :data:`MAX_BYTES`. Only its owner reads or writes it: every function takes
the acting user and works on that user's rows only; nothing here reads another person's
draft. A draft is private scratch work, not a change to a shared record, so it is not written
to the change log (what a person proposes from it is).

Saves are optimistic: :func:`save_draft` and :func:`discard_draft` name the version the
caller last saw (``None``: no draft). A save from a stale tab, one based on an older version
than the database holds, is refused with :class:`StaleWriteError` naming when the newer one
was saved, and nothing is overwritten; the caller still holds its text and may load the
newer draft or save over it knowingly (based on the version it now read).

The writers take a Session and do not commit: the pages run them through ``ui.transact``."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, delete, insert, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from review.core.errors import InputError, PermissionDenied, StaleWriteError
from review.core.identity import Actor
from review.core.textcheck import NUL_PROBLEM, nul_field
from storage.db import read_session
from storage.models import User, UserDraft, utcnow

__all__ = ["MAX_BYTES", "SavedDraft", "discard_draft", "load_draft", "save_draft"]

#: the largest draft kept, as UTF-8 JSON (1 MB: far more than any page's draft)
MAX_BYTES = 1_000_000
#: draft keys: lower-case words, digits and ``._:-``, as a page names its draft
_KEY_RE = re.compile(r"[a-z][a-z0-9_.:-]{0,119}")


@dataclass(frozen=True)
class SavedDraft:
    """A draft as stored: its key, the JSON object, the version (the number of saves) and
    when it was first and last saved."""

    key: str
    payload: dict[str, Any]
    version: int
    created_at: dt.datetime
    updated_at: dt.datetime


def _check_key(key: str) -> None:
    if not _KEY_RE.fullmatch(key):
        raise InputError(
            f"{key!r} is not a draft key: lower-case letters, digits and . _ : -, "
            "starting with a letter, at most 120 characters"
        )


def _check_actor(actor: Actor) -> None:
    """Drafts belong to people who may use the workbench: a user with no role left keeps
    none."""
    if not actor.roles:
        raise PermissionDenied(f"{actor.name} has no role left and keeps no drafts.")


def _encoded_size(payload: Mapping[str, Any]) -> int:
    """The size of ``payload`` as UTF-8 JSON; refused unless it is a JSON object of text,
    numbers, booleans, null, lists and objects."""
    if not isinstance(payload, Mapping):
        raise InputError("a draft is a JSON object (a mapping of names to values)")
    try:
        encoded = json.dumps(payload, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InputError(f"the draft cannot be stored as JSON: {exc}") from exc
    where = nul_field(payload)
    if where is not None:
        raise InputError(f"the draft's {where} {NUL_PROBLEM}")
    return len(encoded.encode("utf-8"))


def _row(s: Session, actor: Actor, key: str) -> UserDraft | None:
    return s.get(UserDraft, (actor.id, key), populate_existing=True)


def _stale(row: UserDraft | None, key: str) -> StaleWriteError:
    if row is None:
        return StaleWriteError(
            f"your draft {key!r} was discarded (in another tab or session) after you opened "
            "it; nothing was saved. Reload to start again from the saved state."
        )
    return StaleWriteError(
        f"your draft {key!r} was saved in another tab or session at "
        f"{row.updated_at:%Y-%m-%d %H:%M:%S} UTC (save {row.version}) after this one read "
        "it; nothing was saved. Load the newer draft, or save this one over it."
    )


def load_draft(engine: Engine, actor: Actor, key: str) -> SavedDraft | None:
    """The acting user's draft ``key``, or None when they have none."""
    _check_key(key)
    with read_session(engine) as s:
        row = s.get(UserDraft, (actor.id, key))
        if row is None:
            return None
        return SavedDraft(row.key, dict(row.payload), row.version, row.created_at, row.updated_at)


def save_draft(
    s: Session, actor: Actor, key: str, payload: Mapping[str, Any], based_on: int | None
) -> int:
    """Save the acting user's draft ``key`` (a JSON object of at most :data:`MAX_BYTES`),
    based on the version the caller last saw (None: it saw no draft); returns the new
    version. A draft saved or discarded since then is not overwritten: StaleWriteError."""
    _check_actor(actor)
    _check_key(key)
    size = _encoded_size(payload)
    if size > MAX_BYTES:
        raise InputError(
            f"the draft is {size / 1_000_000:.1f} MB; at most {MAX_BYTES / 1_000_000:.0f} MB "
            "is kept, so it was not saved (your edits are still on the page). Shorten it, or "
            "propose part of it."
        )
    user = s.get(User, actor.id)
    if user is None or not user.active:
        raise PermissionDenied(f"{actor.name} is no active user of this workbench.")
    now = utcnow()
    if based_on is None:
        if _row(s, actor, key) is not None:
            raise _stale(_row(s, actor, key), key)
        try:
            with s.begin_nested():  # another server inserting the same draft meanwhile
                s.execute(
                    insert(UserDraft).values(
                        user_id=actor.id,
                        key=key,
                        payload=dict(payload),
                        version=1,
                        created_at=now,
                        updated_at=now,
                    )
                )
        except IntegrityError:
            raise _stale(_row(s, actor, key), key) from None
        return 1
    done = s.execute(
        update(UserDraft)
        .where(
            UserDraft.user_id == actor.id,
            UserDraft.key == key,
            UserDraft.version == based_on,
        )
        .values(payload=dict(payload), version=based_on + 1, updated_at=now)
    )
    if getattr(done, "rowcount", 0) != 1:
        raise _stale(_row(s, actor, key), key)
    return based_on + 1


def discard_draft(s: Session, actor: Actor, key: str, based_on: int | None) -> bool:
    """Drop the acting user's draft ``key`` if it is still the version the caller last saw
    (a proposal made from it, or the person's own Discard); True when a row went. A newer
    draft saved in another tab is kept: StaleWriteError. None: nothing to drop."""
    _check_actor(actor)
    _check_key(key)
    if based_on is None:
        if _row(s, actor, key) is not None:
            raise _stale(_row(s, actor, key), key)
        return False
    done = s.execute(
        delete(UserDraft).where(
            UserDraft.user_id == actor.id,
            UserDraft.key == key,
            UserDraft.version == based_on,
        )
    )
    if getattr(done, "rowcount", 0) != 1:
        row = _row(s, actor, key)
        if row is None:
            return False  # gone already (discarded in another tab): nothing to keep
        raise _stale(row, key)
    return True
