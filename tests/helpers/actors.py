"""Actors for service calls, built without a database row."""

from __future__ import annotations

from review.core.identity import Actor, Role


def make_actor(
    role: str, email: str | None = None, clearance: bool = False, uid: int = 99
) -> Actor:
    return Actor(
        id=uid,
        email=email or f"{role}@test.example",
        name=role.title(),
        roles=frozenset({Role(role)}),
        clearance=clearance,
    )


REVIEWER = make_actor("reviewer", "rev@test.example", clearance=True, uid=11)
