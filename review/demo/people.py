"""The demo's people: the seven Brightwave users and the actors the demo builders act as."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from sqlalchemy import Engine

from review.admin import users
from review.core.identity import SYSTEM, Actor, Role

__all__ = ["DEMO_ACTOR", "DEMO_USERS", "DemoUser", "demo_actor", "registered_actor"]

#: Who the demo data is written as when no demo user does it (imports, executed runs).
DEMO_ACTOR: Actor = dataclasses.replace(SYSTEM, email="demo-data", name="Demo data")


@dataclass(frozen=True)
class DemoUser:
    email: str
    name: str
    roles: tuple[str, ...]
    clearance: bool


DEMO_USERS = (
    DemoUser("ada.admin@brightwave.example", "Ada Okafor", ("admin",), True),
    DemoUser("ines.duarte@brightwave.example", "Inés Duarte", ("annotator",), False),
    DemoUser("tom.becker@brightwave.example", "Tom Becker", ("annotator",), False),
    DemoUser("ravi.menon@brightwave.example", "Ravi Menon", ("reviewer", "annotator"), True),
    DemoUser("paula.kim@brightwave.example", "Paula Kim", ("product_owner",), False),
    DemoUser("omar.haddad@brightwave.example", "Omar Haddad", ("product_owner",), False),
    DemoUser("chen.li@brightwave.example", "Chen Li", ("compliance",), True),
)


def demo_actor(email: str) -> Actor:
    """The demo user ``email`` as an actor with the roles and clearance of :data:`DEMO_USERS`
    (whether or not the user is in the database yet)."""
    u = next(x for x in DEMO_USERS if x.email == email)
    return dataclasses.replace(
        DEMO_ACTOR,
        email=u.email,
        name=u.name,
        roles=frozenset(Role(r) for r in u.roles),
        clearance=u.clearance,
    )


def registered_actor(engine: Engine, email: str) -> Actor:
    """The user ``email`` as stored in the database (its id, roles and clearance), or
    :data:`DEMO_ACTOR` when the demo users have not been added."""
    row = users.get_by_email(engine, email)
    if row is None:
        return DEMO_ACTOR
    return users.to_actor(row)
