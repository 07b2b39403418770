"""People's drafts in the database (issue 33 item 3), on SQLite and PostgreSQL: saved, loaded
by their owner only, a save from a stale tab refused with nothing overwritten, size-bounded,
discarded."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from review.admin import users
from review.core import database, userdrafts
from review.core.errors import InputError, PermissionDenied, StaleWriteError
from review.core.identity import SYSTEM, Actor
from storage.db import read_session
from storage.models import UserDraft

KEY = "wording"


def _user(engine: Engine, email: str, roles: list[str]) -> Actor:
    users.add_user(engine, SYSTEM, email, email.split("@")[0].title(), roles)
    row = users.get_by_email(engine, email)
    assert row is not None
    return users.to_actor(row)


def _save(engine: Engine, actor: Actor, payload: Any, based_on: int | None, key: str = KEY) -> int:
    return database.write(engine, lambda s: userdrafts.save_draft(s, actor, key, payload, based_on))


def _discard(engine: Engine, actor: Actor, based_on: int | None, key: str = KEY) -> bool:
    return database.write(engine, lambda s: userdrafts.discard_draft(s, actor, key, based_on))


def _rows(engine: Engine) -> int:
    with read_session(engine) as s:
        return int(s.scalar(select(func.count()).select_from(UserDraft)) or 0)


def test_a_draft_is_saved_loaded_and_discarded_by_its_owner_only(any_engine: Engine) -> None:
    ines = _user(any_engine, "ines@drafts.example", ["compliance"])
    omar = _user(any_engine, "omar@drafts.example", ["product_owner"])
    assert userdrafts.load_draft(any_engine, ines, KEY) is None
    payload = {"base": 3, "messages": {"R2": {"text": "Très bien — {topic}", "description": ""}}}
    assert _save(any_engine, ines, payload, None) == 1
    got = userdrafts.load_draft(any_engine, ines, KEY)
    assert got is not None and got.payload == payload and got.version == 1
    # another user has no such draft, and saving theirs leaves hers alone
    assert userdrafts.load_draft(any_engine, omar, KEY) is None
    assert _save(any_engine, omar, {"messages": {}}, None) == 1
    assert _save(any_engine, ines, {**payload, "base": 4}, 1) == 2
    again = userdrafts.load_draft(any_engine, ines, KEY)
    assert again is not None and again.payload["base"] == 4 and again.version == 2
    assert again.updated_at >= again.created_at
    assert _discard(any_engine, ines, 2) is True
    assert userdrafts.load_draft(any_engine, ines, KEY) is None
    assert userdrafts.load_draft(any_engine, omar, KEY) is not None
    assert _discard(any_engine, ines, None) is False  # nothing to drop


def test_a_save_from_a_stale_tab_overwrites_nothing(any_engine: Engine) -> None:
    ines = _user(any_engine, "ines@drafts.example", ["compliance"])
    _save(any_engine, ines, {"n": 1}, None)
    _save(any_engine, ines, {"n": 2}, 1)  # tab A
    with pytest.raises(StaleWriteError, match=r"saved in another tab or session at .* \(save 2\)"):
        _save(any_engine, ines, {"n": "tab B"}, 1)  # tab B still on version 1
    with pytest.raises(StaleWriteError):
        _save(any_engine, ines, {"n": "tab C"}, None)  # a tab that saw no draft
    with pytest.raises(StaleWriteError):
        _discard(any_engine, ines, 1)  # a stale discard keeps the newer draft
    got = userdrafts.load_draft(any_engine, ines, KEY)
    assert got is not None and got.payload == {"n": 2} and got.version == 2
    # saving over it knowingly: based on the version now read
    assert _save(any_engine, ines, {"n": "tab B"}, 2) == 3
    # a draft discarded in another tab: a save based on it is refused, a discard is a no-op
    assert _discard(any_engine, ines, 3)
    with pytest.raises(StaleWriteError, match="discarded"):
        _save(any_engine, ines, {"n": 4}, 3)
    assert _discard(any_engine, ines, 3) is False


def test_bad_drafts_are_refused_with_a_clear_error(any_engine: Engine) -> None:
    ines = _user(any_engine, "ines@drafts.example", ["compliance"])
    big = {"text": "x" * (userdrafts.MAX_BYTES + 1)}
    with pytest.raises(InputError, match=r"1\.0 MB; at most 1 MB is kept"):
        _save(any_engine, ines, big, None)
    # counted as UTF-8: 400 000 three-byte characters are 1.2 MB
    with pytest.raises(InputError, match="MB"):
        _save(any_engine, ines, {"text": "€" * 400_000}, None)
    with pytest.raises(InputError, match="NUL"):
        _save(any_engine, ines, {"messages": {"R1": {"text": "a\x00b"}}}, None)
    with pytest.raises(InputError, match="JSON"):
        _save(any_engine, ines, {"when": object()}, None)
    with pytest.raises(InputError, match="JSON object"):
        _save(any_engine, ines, ["not", "a", "mapping"], None)
    with pytest.raises(InputError, match="not a draft key"):
        _save(any_engine, ines, {}, None, key="Bad Key")
    assert _rows(any_engine) == 0
    # just under the bound is kept
    fits = {"t": "x" * (userdrafts.MAX_BYTES - 20)}
    assert _save(any_engine, ines, fits, None) == 1


def test_who_keeps_drafts(any_engine: Engine) -> None:
    ines = _user(any_engine, "ines@drafts.example", ["compliance"])
    roleless = Actor(id=ines.id, email=ines.email, name=ines.name, roles=frozenset())
    with pytest.raises(PermissionDenied, match="no role"):
        _save(any_engine, roleless, {"n": 1}, None)
    ghost = Actor(id=987_654, email="ghost@x", name="Ghost", roles=ines.roles)
    with pytest.raises(PermissionDenied, match="no active user"):
        _save(any_engine, ghost, {"n": 1}, None)
    row = users.get_by_email(any_engine, ines.email)
    assert row is not None
    users.update_user(
        any_engine,
        SYSTEM,
        row.id,
        row.version,
        name=row.name,
        roles=list(row.roles),
        clearance=row.clearance,
        active=False,
    )
    with pytest.raises(PermissionDenied, match="no active user"):
        _save(any_engine, ines, {"n": 1}, None)
    assert _rows(any_engine) == 0
