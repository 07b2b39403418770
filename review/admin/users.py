"""User accounts and roles (admin page and CLI)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd
from sqlalchemy import Engine, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from review.core import readable
from review.core.errors import InputError
from review.core.identity import Actor, Permission, parse_roles, require
from storage import changes
from storage.db import read_session, run_write
from storage.models import User

EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


@dataclass(frozen=True)
class UserView:
    id: int
    email: str
    name: str
    roles: tuple[str, ...]
    clearance: bool
    active: bool
    version: int


def _view(u: User) -> UserView:
    return UserView(u.id, u.email, u.name, tuple(sorted(u.roles)), u.clearance, u.active, u.version)


def to_actor(u: UserView) -> Actor:
    return Actor(
        id=u.id, email=u.email, name=u.name, roles=parse_roles(u.roles), clearance=u.clearance
    )


def view_by_id(s: Session, user_id: int) -> UserView | None:
    """User ``user_id`` as they are now (a job re-reads its user's roles when it runs)."""
    u = s.get(User, user_id)
    return _view(u) if u else None


def list_users(engine: Engine, include_inactive: bool = True) -> list[UserView]:
    with read_session(engine) as s:
        stmt = select(User).order_by(User.name)
        if not include_inactive:
            stmt = stmt.where(User.active.is_(True))
        return [_view(u) for u in s.scalars(stmt)]


def display_names(engine: Engine) -> dict[str, str]:
    """Every user's name by e-mail (lower case), inactive users too: for showing people as
    names (review.core.readable.person)."""
    with read_session(engine) as s:
        return {str(e).lower(): str(n) for e, n in s.execute(select(User.email, User.name))}


def users_frame(people: list[UserView]) -> pd.DataFrame:
    """The users table of the Admin page."""
    return pd.DataFrame(
        [
            {
                "name": u.name,
                "email": u.email,
                "roles": ", ".join(readable.humanize(r) for r in u.roles),
                "clearance": u.clearance,
                "active": u.active,
                "version": u.version,
            }
            for u in people
        ],
        columns=["name", "email", "roles", "clearance", "active", "version"],
    )


def get_by_email(engine: Engine, email: str) -> UserView | None:
    with read_session(engine) as s:
        u = s.scalar(select(User).where(func.lower(User.email) == email.strip().lower()))
        return _view(u) if u else None


def _check(email: str, name: str, roles: list[str]) -> tuple[str, str, list[str]]:
    email = email.strip().lower()
    name = name.strip()
    if not EMAIL_RE.match(email):
        raise InputError(f"email {email!r} is not a valid address")
    if not name:
        raise InputError("name is required")
    try:
        parsed = sorted(r.value for r in parse_roles(roles))
    except ValueError as exc:
        raise InputError(str(exc)) from None
    if not parsed:
        raise InputError("give the user at least one role")
    return email, name, parsed


def add_user(
    engine: Engine,
    actor: Actor,
    email: str,
    name: str,
    roles: list[str],
    clearance: bool = False,
) -> UserView:
    require(actor, Permission.manage_users)
    email, name, parsed = _check(email, name, roles)

    def work(s: Session) -> UserView:
        if s.scalar(select(User.id).where(func.lower(User.email) == email)) is not None:
            raise InputError(f"a user with email {email} already exists")
        u = User(
            email=email,
            name=name,
            roles=parsed,
            clearance=clearance,
            active=True,
            updated_by=actor.email,
        )
        s.add(u)
        s.flush()
        changes.record(s, actor.email, "create", "user", u.id, None, changes.snapshot(u))
        return _view(u)

    try:
        return run_write(engine, work)
    except IntegrityError:
        raise InputError(f"a user with email {email} already exists") from None


def update_user(
    engine: Engine,
    actor: Actor,
    user_id: int,
    expected_version: int,
    *,
    name: str,
    roles: list[str],
    clearance: bool,
    active: bool,
) -> UserView:
    require(actor, Permission.manage_users)

    def work(s: Session) -> UserView:
        u = s.get(User, user_id)
        if u is None:
            raise InputError(f"user {user_id} does not exist")
        _, clean_name, parsed = _check(u.email, name, roles)
        if u.email == actor.email and ("admin" not in parsed or not active):
            raise InputError("you cannot remove your own admin role or deactivate yourself")
        fresh = changes.versioned_update(
            s,
            User,
            user_id,
            expected_version,
            {"name": clean_name, "roles": parsed, "clearance": clearance, "active": active},
            actor.email,
            "user",
        )
        return _view(fresh)

    return run_write(engine, work)


def bootstrap_admin(engine: Engine, email: str, name: str) -> UserView:
    """Create the first administrator; only allowed while the database has no users."""
    email, name, roles = _check(email, name, ["admin"])

    def work(s: Session) -> UserView:
        if s.scalar(select(func.count()).select_from(User)):
            raise InputError("users already exist; ask an administrator to add you")
        u = User(email=email, name=name, roles=roles, clearance=True, active=True, updated_by=email)
        s.add(u)
        s.flush()
        changes.record(s, email, "create", "user", u.id, None, changes.snapshot(u))
        return _view(u)

    return run_write(engine, work)
