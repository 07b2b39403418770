"""Competing and stale threshold proposals on the Thresholds page, as on the Wording page.

Following the product owner guide, a newcomer proposed while the demo's version 3 was pending,
with no word that the two compete; once another version was approved, version 3 still offered
its signers the full Approve form beside a note that it could only be rejected."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import Engine

from review.core.identity import Role
from review.core.taxonomy import Taxonomy
from review.monthly import report
from review.monthly.overview import build_overview
from review.policy import inforce, signoff
from review.thresholds import signing, thresholds
from tests.helpers.pages import CHEN, PAULA, actor_of, no_exception, open_tab, page_app, readable

OMAR = "omar.haddad@brightwave.example"
PAGE = "pages/thresholds_page.py"


def _pending(engine: Engine) -> list[signoff.VersionView]:
    return [v for v in signoff.versions(engine, inforce.KIND) if v.status == "pending"]


def _propose(engine: Engine, who: str, refuse: float) -> int:
    return thresholds.propose_thresholds(
        engine,
        actor_of(engine, who),
        "vector",
        refuse,
        0.7,
        "Raise the vector refuse threshold.",
        tuned_on_split="validation",
    )


def test_a_proposal_beside_a_pending_one_is_warned_and_a_stale_one_can_only_be_rejected(
    demo_url: str, demo_engine: Engine, tax: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    (demo_pending,) = _pending(demo_engine)
    new_id = _propose(demo_engine, OMAR, 0.6)
    new = signoff.get_version(demo_engine, new_id)
    # both wait on the version in force: each card says what approving it does to the other
    at = page_app(demo_url, monkeypatch, PAGE, CHEN).run()
    open_tab(at, "Sign-off")
    no_exception(at)
    warned = [readable(w) for w in at.warning]
    assert any(
        w.startswith(f"Approving version {new.number} (once it has every signature it needs)")
        and f"makes pending proposal {demo_pending.number} stale" in w
        for w in warned
    ), warned
    # it is approved: the demo's proposal is stale, says so, and offers only Reject
    for who, role in ((PAULA, Role.product_owner), (CHEN, Role.compliance)):
        signing.sign_thresholds(
            demo_engine,
            actor_of(demo_engine, who),
            tax,
            new_id,
            "approve",
            role=role,
            note="Accepted for the test.",
            confirm_failing_targets=True,
        )
    signoff.clear_chain_cache()
    at = page_app(demo_url, monkeypatch, PAGE, CHEN).run()
    open_tab(at, "Sign-off")
    no_exception(at)
    heads = [readable(h) for h in at.subheader]
    assert any(
        h.startswith(f"Version {demo_pending.number} · proposed by")
        and h.endswith(f"· stale: superseded by version {new.number}")
        for h in heads
    ), heads
    assert [b.label for b in at.button if b.label in ("Approve", "Reject")] == ["Reject"]
    # the Overview and the month's record say it is stale, not waiting
    author = actor_of(demo_engine, demo_pending.author)
    said = [a.text for a in build_overview(demo_engine, author, tax).attention]
    assert f"Your proposal v{demo_pending.number} (threshold change) is stale: another " in (
        " ".join(said)
    ), said
    month = f"{dt.datetime.now(dt.UTC):%Y-%m}"
    ctx = report.live_context(demo_engine, tax, month)
    frame = report.changes_frame(ctx.policy_changes, ctx.names, ctx.stale)
    row = frame[frame["version"].str.startswith(f"sign-off v{demo_pending.number} ")]
    assert list(row["status"]) == [f"Stale: superseded by version {new.number}"]


def test_proposing_while_another_proposal_waits_says_they_compete(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    (demo_pending,) = _pending(demo_engine)
    at = page_app(demo_url, monkeypatch, PAGE, PAULA).run()
    no_exception(at)
    warned = [readable(w) for w in at.warning]
    assert any(
        w.startswith(f"Pending proposal {demo_pending.number} also waits to change version")
        and "your proposal would compete with it" in w
        for w in warned
    ), warned
