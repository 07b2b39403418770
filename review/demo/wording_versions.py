"""Demo wording history: the shipped wording file signed as version 1 and a pending edit of
R2 that waits for another product owner."""

from __future__ import annotations

from sqlalchemy import Engine

from review.core.identity import Role
from review.core.taxonomy import Taxonomy
from review.wording.drafts import MessageDraft
from review.wording.signing import propose_edits, propose_wording, sign_wording
from review.wording.versions import shipped_text, versions

__all__ = ["build_demo_wording"]


# ---------------------------------------------------------------------------------------------
# Demo data
# ---------------------------------------------------------------------------------------------

_DEMO_R2 = (
    "The documents available to you cover {topic}, but none of them settles your question. "
    "Could you tell me {missing_item}? Then I can look for the passage that applies to you."
)


def build_demo_wording(engine: Engine, tax: Taxonomy | None = None) -> int:
    """Version 1 (the shipped file) proposed by Omar Haddad and signed by Paula Kim (product
    owner) and Chen Li (compliance), plus a pending edit of R2 by Paula Kim that waits for
    another product owner. Returns the number of versions added (0 when wording versions
    exist already or the demo users are missing). Production findings come from the demo
    traces, if any; none are added here."""
    from review.admin import users

    if versions(engine):
        return 0
    people = {}
    for email in (
        "paula.kim@brightwave.example",
        "omar.haddad@brightwave.example",
        "chen.li@brightwave.example",
    ):
        row = users.get_by_email(engine, email)
        if row is None:
            return 0
        people[email.split(".")[0]] = users.to_actor(row)
    paula, omar, chen = people["paula"], people["omar"], people["chen"]
    v1 = propose_wording(
        engine,
        omar,
        shipped_text(),
        "First signed refusal wording: the six required messages as drafted with Support and "
        "Legal, clean under the wording lint.",
        based_on=None,
    )
    sign_wording(
        engine, paula, v1, "approve", note="Read against the support macros; tone is right."
    )
    sign_wording(
        engine,
        chen,
        v1,
        "approve",
        role=Role.compliance,
        note="R3 and E1 give no conclusion and route to a team.",
    )
    propose_edits(
        engine,
        paula,
        {"R2": MessageDraft(_DEMO_R2)},
        "Customers read 'do not establish the answer' as legal language; say it plainly and "
        "keep the request for the missing detail.",
        based_on=v1,
    )
    return 2
