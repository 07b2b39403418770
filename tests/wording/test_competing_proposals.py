"""Competing wording proposals (issue 35 item 6d): two pending versions proposed on top of the
same version compete, since approving one makes the other stale. Which versions compete, and
what the page says when the second is proposed, before and after one is approved."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Engine

from review.core.identity import Role
from review.core.taxonomy import Taxonomy
from review.demo import wording_versions
from review.policy import display as policy_display
from review.policy import signoff
from review.wording import drafts, signing, versions
from tests.helpers.actors import make_actor

AT = dt.datetime(2025, 6, 2, 9, 30, tzinfo=dt.UTC)
PAULA = make_actor("product_owner", "paula.kim@brightwave.example")
OMAR = make_actor("product_owner", "omar.haddad@brightwave.example")
CHEN = make_actor("compliance", "chen.li@brightwave.example", clearance=True)


def view(
    vid: int, number: int, parent: int | None, *sigs: signoff.Signature
) -> signoff.VersionView:
    return signoff.VersionView(
        id=vid,
        kind="refusal_wording",
        number=number,
        yaml_text="",
        sha256="0" * 64,
        parent_id=parent,
        author="omar@example.org",
        rationale="why",
        tuned_on_split=None,
        override_note=None,
        snapshot=None,
        created_at=AT,
        signatures=sigs,
        required_roles=frozenset({Role.product_owner}),
    )


def approve() -> signoff.Signature:
    return signoff.Signature(1, "p@example.org", "product_owner", "approve", "", AT, "", "", {})


def reject() -> signoff.Signature:
    return signoff.Signature(2, "p@example.org", "product_owner", "reject", "x", AT, "", "", {})


def test_competitors_share_the_parent_and_wait() -> None:
    v1 = view(1, 1, None, approve())
    v2, v3, v4 = view(2, 2, 1), view(3, 3, 1), view(4, 4, 1)
    rejected = view(5, 5, 1, reject())
    elsewhere = view(6, 6, None)  # proposed on top of the shipped file
    allv = [elsewhere, rejected, v4, v3, v2, v1]
    assert [v.number for v in signoff.competing(allv, v2)] == [3, 4]
    assert [v.number for v in signoff.competing(allv, v4)] == [2, 3]
    assert signoff.competing(allv, elsewhere) == []
    assert signoff.competing([v1, v2], v2) == []


def test_the_three_messages() -> None:
    assert policy_display.competing_on_propose(3, [], "version 1") == ""
    assert policy_display.competing_on_propose(3, [2], "version 1") == (
        "Version 3 competes with pending proposal 2, which also waits to change version 1. "
        "Only one can be approved: approving one puts it in force and makes the other stale "
        "(it can then only be rejected, and its change must be proposed again on top of the "
        "approved version)."
    )
    assert "pending proposals 2 and 3, which also wait" in policy_display.competing_on_propose(
        4, [2, 3], "version 1"
    )
    assert policy_display.competing_before_approval(2, [3, 4, 5]) == (
        "Approving version 2 (once it has every signature it needs) puts it in force and makes "
        "pending proposals 3, 4 and 5 stale: they can then no longer be approved, only "
        "rejected, and must be proposed again on top of version 2."
    )
    assert policy_display.competing_after_approval(2, [3]) == (
        "Pending proposal 3 is stale now, superseded by version 2: reject it and propose the "
        "change again on top of version 2."
    )
    assert policy_display.competing_after_approval(2, []) == ""
    assert "your proposal would compete with them" in policy_display.competing_draft(
        [2, 3], "version 1"
    )


def test_the_review_of_each_version_says_what_competes_and_what_superseded_it(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    wording_versions.build_demo_wording(demo_engine, tax)
    (r2,) = versions.pending(demo_engine)  # the demo's pending R2 edit, by Paula
    v3 = signing.propose_edits(
        demo_engine, OMAR, {"F1": drafts.MessageDraft("Which {missing_item} do you mean?")}, "F1"
    )
    v4 = signing.propose_edits(
        demo_engine, CHEN, {"C1": drafts.MessageDraft("Some of this may be incomplete.")}, "C1"
    )
    n3, n4 = (signoff.get_version(demo_engine, v).number for v in (v3, v4))
    assert signing.competing_numbers(demo_engine, v3) == [r2.number, n4]
    assert signing.review_version(demo_engine, r2.id).competitors == (n3, n4)
    # one is approved: the others are stale, superseded by it, and compete no more
    signing.sign_wording(demo_engine, OMAR, r2.id, "approve")
    later = signing.review_version(demo_engine, v3)
    assert later.superseded_by == r2.number and later.competitors == ()
    assert later.stale_parent is not None
    assert signing.review_version(demo_engine, v4).superseded_by == r2.number
