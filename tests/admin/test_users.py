"""Users and roles: only admins manage them, every change is audited, the first admin is
bootstrapped once."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, select

from review.admin import users
from review.core.errors import InputError, PermissionDenied, StaleWriteError
from review.core.identity import Actor, Permission, Role, require
from storage.db import read_session
from storage.models import AuditLog
from tests.helpers.actors import make_actor


def test_only_admins_manage_users_and_changes_are_audited(engine: Engine, admin: Actor) -> None:
    with pytest.raises(PermissionDenied, match="manage users"):
        users.add_user(engine, make_actor("annotator"), "x@example.org", "X", ["annotator"])
    u = users.add_user(engine, admin, "Ines@Example.org", "Inés", ["annotator"])
    assert u.email == "ines@example.org" and u.roles == ("annotator",)
    with pytest.raises(InputError, match="already exists"):
        users.add_user(engine, admin, "ines@example.org", "Dup", ["annotator"])
    with pytest.raises(InputError, match="unknown role 'boss'"):
        users.add_user(engine, admin, "b@example.org", "B", ["boss"])
    with pytest.raises(InputError, match="not a valid address"):
        users.add_user(engine, admin, "nope", "B", ["annotator"])
    with pytest.raises(InputError, match="at least one role"):
        users.add_user(engine, admin, "c@example.org", "C", [])
    users.update_user(
        engine,
        admin,
        u.id,
        1,
        name="Inés D.",
        roles=["annotator", "reviewer"],
        clearance=True,
        active=True,
    )
    with pytest.raises(StaleWriteError, match=admin.email):
        users.update_user(
            engine, admin, u.id, 1, name="Other", roles=["annotator"], clearance=False, active=True
        )
    with read_session(engine) as s:
        log = s.scalars(
            select(AuditLog).where(AuditLog.entity == "user").order_by(AuditLog.id)
        ).all()
    assert [e.action for e in log] == ["create", "update"]
    assert log[1].before["roles"] == ["annotator"]  # type: ignore[index]
    assert log[1].after["roles"] == ["annotator", "reviewer"]  # type: ignore[index]


def test_bootstrap_admin_only_on_an_empty_database(engine: Engine) -> None:
    first = users.bootstrap_admin(engine, "first@example.org", "First")
    assert first.roles == ("admin",)
    with pytest.raises(InputError, match="users already exist"):
        users.bootstrap_admin(engine, "second@example.org", "Second")


def test_role_grants() -> None:
    assert make_actor("annotator").can(Permission.label)
    assert not make_actor("annotator").can(Permission.approve_policy)
    assert make_actor("compliance").can(Permission.approve_policy)
    assert not make_actor("product_owner").can(Permission.edit_cases)
    with pytest.raises(PermissionDenied, match="needs one of the roles: Admin"):
        require(make_actor("reviewer"), Permission.manage_users)
    assert set(Role) == {
        Role(r) for r in ("annotator", "reviewer", "product_owner", "compliance", "admin")
    }
