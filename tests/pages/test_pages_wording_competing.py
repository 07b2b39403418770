"""AppTest of the Wording page (issue 35 items 6d and 7): a second pending proposal is warned
that it competes with the first, approving one says what it does to the others and their
cards show them stale afterwards (three pending proposals), and the History tab shows the
change in force (the version in force against the one it replaced), in the same words as the
pickers."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine

from review.core.taxonomy import Taxonomy
from review.demo import wording_versions
from review.policy import signoff
from review.wording import drafts, signing, versions
from tests.helpers.pages import PAULA, actor_of, no_exception, page_app, readable

PAGE = "pages/wording_page.py"
OMAR = "omar.haddad@brightwave.example"
CHEN = "chen.li@brightwave.example"


@pytest.fixture
def wording_url(demo_url: str, demo_engine: Engine, tax: Taxonomy) -> str:
    """The demo with its wording history: version 1 in force, Paula's R2 edit pending (2)."""
    wording_versions.build_demo_wording(demo_engine, tax)
    return demo_url


def button(at: Any, key: str) -> Any:
    return next(b for b in at.button if b.key == key)


def test_a_second_proposal_is_told_it_competes(
    wording_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    (r2,) = versions.pending(demo_engine)
    at = page_app(wording_url, monkeypatch, PAGE, OMAR).run()
    at.selectbox(key="wd_key").select("F1").run()
    at.text_area(key="wd_text_F1").input("Which {missing_item} do you mean?").run()
    no_exception(at)
    # beside the form, before proposing
    assert any(
        f"Pending proposal {r2.number} also waits to change version 1" in readable(w)
        for w in at.warning
    ), [readable(w) for w in at.warning]
    at.text_area(key="wd_rationale").input("Shorter follow-up.")
    button(at, "wd_submit").click().run()
    no_exception(at)
    assert any("Proposed as version 3" in readable(s) for s in at.success)
    assert any(
        readable(w).startswith(
            f"Version 3 competes with pending proposal {r2.number}, which also waits to change "
            "version 1. Only one can be approved"
        )
        for w in at.warning
    ), [readable(w) for w in at.warning]


def test_approving_one_of_three_says_what_happens_to_the_others(
    wording_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    (r2,) = versions.pending(demo_engine)  # Paula's R2 edit, waiting for a product owner
    v3 = signing.propose_edits(
        demo_engine,
        actor_of(demo_engine, OMAR),
        {"F1": drafts.MessageDraft("Which {missing_item} do you mean?")},
        "Shorter follow-up.",
    )
    v4 = signing.propose_edits(
        demo_engine,
        actor_of(demo_engine, CHEN),
        {"C1": drafts.MessageDraft("Parts of this may be incomplete: check {source}.")},
        "Plainer caveat.",
    )
    n3, n4 = (signoff.get_version(demo_engine, v).number for v in (v3, v4))
    at = page_app(wording_url, monkeypatch, PAGE, OMAR).run()
    no_exception(at)
    before = f"Approving version {r2.number} (once it has every signature it needs) puts it in "
    assert any(
        readable(w).startswith(before)
        and f"makes pending proposals {n3} and {n4} stale" in readable(w)
        for w in at.warning
    ), [readable(w) for w in at.warning]
    button(at, f"wd_approve_{r2.id}").click().run()
    no_exception(at)
    assert any(
        f"Version {r2.number} approved as Product owner: it is the wording in force now."
        == readable(s)
        for s in at.success
    )
    assert any(
        readable(w)
        == (
            f"Pending proposals {n3} and {n4} are stale now, superseded by version {r2.number}: "
            f"reject them and propose the change again on top of version {r2.number}."
        )
        for w in at.warning
    ), [readable(w) for w in at.warning]
    # their cards say so, and why they can no longer be approved
    heads = [readable(h) for h in at.subheader]
    assert f"Version {n3} · stale: superseded by version {r2.number}" in heads
    assert f"Version {n4} · stale: superseded by version {r2.number}" in heads
    assert any("has been approved since" in readable(e) for e in at.error)


def test_history_shows_the_change_in_force(
    wording_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    (r2,) = versions.pending(demo_engine)
    # a competing proposal that is never approved, newer than the version approved after it
    signing.propose_edits(
        demo_engine,
        actor_of(demo_engine, OMAR),
        {"F1": drafts.MessageDraft("Which {missing_item} do you mean?")},
        "Shorter follow-up.",
    )
    signing.sign_wording(demo_engine, actor_of(demo_engine, OMAR), r2.id, "approve")
    at = page_app(wording_url, monkeypatch, PAGE, PAULA).run()
    no_exception(at)
    caption = next(
        readable(c) for c in at.caption if readable(c).startswith("The change in force:")
    )
    assert caption == (
        f"The change in force: sign-off v{r2.number} · file version 2 (in force) against the "
        f"version it replaced, sign-off v1 · file version 1 (approved, replaced by version "
        f"{r2.number})."
    )
    # the History tab's diff: R2 changed, F1 (the stale proposal's edit) not in it
    diffs = [df.value for df in at.dataframe if "compliance signs" in df.value]
    history_diff = diffs[-1].set_index("key")["status"].to_dict()
    assert history_diff["R2"] == "changed" and history_diff["F1"] == "unchanged"
    # the compare pickers start from the same change, in the same words
    assert at.selectbox(key="wd_cmp_a").value == r2.parent_id
    assert at.selectbox(key="wd_cmp_b").value == r2.id
