"""The Thresholds page as signers use it (AppTest on the demo): a link from Overview opens the
Sign-off tab on the linked proposal, whose headline shows the failing targets in red; Approve
is refused at the form without a reason and the confirmation; with nothing proposed the page
says so and shows the figures in force (no "8 of 8 targets fail"); after an approval the
controls start from the version in force."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine

from review.admin import users
from review.core.identity import Role
from review.core.taxonomy import Taxonomy
from review.policy import inforce, signoff
from review.thresholds import signing
from tests.helpers.fragments import fragment_reruns
from tests.helpers.pages import PAULA, app, no_exception, open_tab, readable

OMAR = "omar.haddad@brightwave.example"
CHEN = "chen.li@brightwave.example"
PAGE = "pages/thresholds_page.py"


def _actor(engine: Engine, email: str) -> Any:
    return users.to_actor(users.get_by_email(engine, email))  # type: ignore[arg-type]


def _pending(engine: Engine) -> signoff.VersionView:
    (v,) = [v for v in signoff.versions(engine, inforce.KIND) if v.status == "pending"]
    return v


def _tab_index(at: Any) -> int:
    """The tab the page opens on (the tab container's default)."""
    found: list[int] = []

    def walk(node: Any) -> None:
        proto = getattr(node, "proto", None)
        fields = {f.name for f, _ in proto.ListFields()} if proto is not None else set()
        if proto is not None and "tab_container" in fields:
            found.append(proto.tab_container.default_tab_index)
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at.main)
    assert found, "no tabs on the page"
    return found[0]


def test_the_overview_link_opens_the_sign_off_tab_on_the_item(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    v = _pending(demo_engine)
    at = app(demo_url, monkeypatch, CHEN).run()
    no_exception(at)
    (link,) = [p for p in at.get("page_link") if p.proto.page == "thresholds"]
    assert link.proto.query_string == f"tab=signoff&version={v.number}"
    assert readable(link.proto.label) == f"Open Thresholds: version {v.number} on the Sign-off tab"
    at = app(demo_url, monkeypatch, CHEN, tab="signoff", version=str(v.number)).run()
    at.switch_page(PAGE).run()
    no_exception(at)
    assert [t.label for t in at.tabs][_tab_index(at)] == "Sign-off"
    assert any(readable(c) == "Opened from a link to this proposal." for c in at.caption)
    # the headline: in force, proposed and target, the failing ones in red
    shown = [m.value for m in at.markdown]
    assert any(readable(m).startswith("50% (33–67%) · 15 of 30") for m in shown)
    assert any(":red-badge[fails target]" in m for m in shown)
    assert any(
        readable(m).endswith("fails 4 of 8 release targets on the test split (30 outcomes).")
        for m in shown
    )
    assert any("False-refusal rate, overall: 88%, target ≤ 10%" in readable(m) for m in shown)
    # the form asks for a reason and the confirmation, and refuses Approve without them
    assert at.checkbox(key=f"thr_sign_confirm_{v.id}").label.startswith("I approve this change")
    next(b for b in at.button if b.label == "Approve").click().run()
    assert any(
        "was not approved" in readable(e) and "a written reason and the confirmation" in readable(e)
        for e in at.error
    )
    assert signoff.get_version(demo_engine, v.id).signatures == ()


def test_a_link_to_a_version_that_waits_no_more_says_so(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_force = inforce.in_force(demo_engine).version
    assert in_force is not None
    at = app(demo_url, monkeypatch, CHEN, tab="signoff", version=str(in_force.number)).run()
    at.switch_page(PAGE).run()
    no_exception(at)
    assert any(
        readable(i) == f"Version {in_force.number} is approved: it is the policy in force."
        for i in at.info
    )


def test_the_author_is_told_their_proposal_waits(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    v = _pending(demo_engine)
    at = app(demo_url, monkeypatch, PAULA).run()
    no_exception(at)
    assert any(
        readable(m)
        == f"Your proposal v{v.number} (threshold change) waits for compliance and product owner."
        for m in at.markdown
    )
    at = app(demo_url, monkeypatch, PAULA, tab="signoff").run()
    at.switch_page(PAGE).run()
    assert any(
        readable(i) == "You proposed this change: someone else must sign it (it waits for "
        "compliance and product owner)."  # the roles in words, not product_owner
        for i in at.info
    ), [readable(i) for i in at.info]
    assert not [b for b in at.button if b.label == "Approve"]


def test_nothing_proposed_says_so_and_shows_the_figures_in_force(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch, tax: Taxonomy
) -> None:
    v = _pending(demo_engine)
    signing.sign_thresholds(
        demo_engine, _actor(demo_engine, CHEN), tax, v.id, "reject", note="Not now."
    )
    at = app(demo_url, monkeypatch, OMAR).run()
    at.switch_page(PAGE).run()
    no_exception(at)
    assert _tab_index(at) == 0
    calibrate = _shown(at)
    assert "Nothing is proposed: the sliders are at the thresholds in force." in calibrate
    assert any(readable(s) == "The policy in force" for s in at.subheader)
    # the figures in force are there, without a verdict on a proposal
    assert "50% (33–67%) · 15 of 30" in calibrate
    # each tab is drawn when opened: no tab judges a proposal
    everything = [calibrate]
    for label in ("Sign-off", "History", "Evidence gate", "Calibrate and propose"):
        open_tab(at, label)
        no_exception(at)
        everything.append(_shown(at))
    assert "Nothing is proposed: no change is waiting for sign-off." in everything[1]
    for shown in everything:
        assert "targets fail" not in shown and "fails target" not in shown
    # moving a slider makes it a change, judged against the targets
    at.slider(key="thr_proposed_vector").set_value(0.6).run()
    no_exception(at)
    assert any(readable(s) == "What the change does" for s in at.subheader)
    assert any(":red-badge[fails target]" in m.value for m in at.markdown)


def _shown(at: Any) -> str:
    """The text of the page's messages, markdown and captions, readable."""
    return " ".join(
        readable(e)
        for kind in ("info", "warning", "success", "markdown", "caption")
        for e in at.get(kind)
    )


def test_after_an_approval_the_controls_start_from_the_version_in_force(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch, tax: Taxonomy
) -> None:
    v = _pending(demo_engine)
    at = app(demo_url, monkeypatch, CHEN).run()
    at.switch_page(PAGE).run()
    no_exception(at)
    at.slider(key="thr_proposed_vector").set_value(0.7).run()
    # only the open tab is drawn; a slider moved before opening another tab keeps its place
    open_tab(at, "Sign-off")
    assert not at.slider
    open_tab(at, "Calibrate and propose")
    assert at.slider(key="thr_proposed_vector").value == pytest.approx(0.7)
    open_tab(at, "Sign-off")
    # Omar approves with a reason; Chen approves on the page with hers
    signing.sign_thresholds(
        demo_engine,
        _actor(demo_engine, OMAR),
        tax,
        v.id,
        "approve",
        note="Accepted: unsupported answers first.",
        confirm_failing_targets=True,
    )
    at.text_area(key=f"thr_sign_note_{v.id}").input("Compliance accepts the lower coverage.")
    at.checkbox(key=f"thr_sign_confirm_{v.id}").check()
    next(b for b in at.button if b.label == "Approve").click().run()
    no_exception(at)
    assert any(
        readable(s) == f"Version {v.number} approved as Compliance: it is the policy in force now."
        for s in at.success
    )
    assert any(readable(c).startswith(f"In force: sign-off v{v.number} ") for c in at.caption)
    # the slider moved to the thresholds in force, and nothing is proposed
    open_tab(at, "Calibrate and propose")
    slider = at.slider(key="thr_proposed_vector")
    assert slider.value == pytest.approx(0.6)
    assert "(current: 0.6)" in readable(slider.label)
    assert any(readable(s) == "The policy in force" for s in at.subheader)
    done = signoff.get_version(demo_engine, v.id)
    assert done.status == "approved"
    assert sorted(s.note for s in done.signatures) == [
        "Accepted: unsupported answers first.",
        "Compliance accepts the lower coverage.",
    ]


def test_a_slider_step_reruns_the_calibrate_tab_and_follows_a_new_policy_in_force(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch, tax: Taxonomy
) -> None:
    """The Calibrate tab is a fragment: a slider step there reruns it alone (as the browser
    asks) and shows what the step does; when a version was put in force meanwhile by others,
    the step draws the whole page again, from the thresholds now in force."""
    v = _pending(demo_engine)
    at = app(demo_url, monkeypatch, PAULA).run()
    at.switch_page(PAGE).run()
    no_exception(at)
    with fragment_reruns(at, "thr_calibrate"):
        at.slider(key="thr_proposed_vector").set_value(0.7).run()
        no_exception(at)
        assert any(readable(s) == "What the change does" for s in at.subheader)
        assert at.slider(key="thr_proposed_vector").value == pytest.approx(0.7)
        for who, role in ((OMAR, "product_owner"), (CHEN, "compliance")):
            signing.sign_thresholds(
                demo_engine,
                _actor(demo_engine, who),
                tax,
                v.id,
                "approve",
                role=Role(role),
                note="Accepted: unsupported answers first.",
                confirm_failing_targets=True,
            )
        at.slider(key="thr_proposed_vector").set_value(0.65).run()
    no_exception(at)
    assert any(readable(c).startswith(f"In force: sign-off v{v.number} ") for c in at.caption)
    slider = at.slider(key="thr_proposed_vector")
    assert "(current: 0.6)" in readable(slider.label) and slider.value == pytest.approx(0.6)
    assert any(readable(s) == "The policy in force" for s in at.subheader)


def test_the_proposed_threshold_at_either_end_of_its_range_keeps_the_page(
    demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the top of its range the proposed refuse_below leaves no room for a caveat band (the
    caveat slider would run from a value to itself, which Streamlit refuses): the page says so
    and goes on. At the bottom the band is as wide as it can be."""
    at = app(demo_url, monkeypatch, PAULA).run()
    at.switch_page(PAGE).run()
    no_exception(at)
    slider = at.slider(key="thr_proposed_vector")
    top, bottom = slider.max, slider.min
    slider.set_value(top).run()
    no_exception(at)
    assert not [s for s in at.slider if s.key == "thr_caveat_vector"]
    assert any(
        readable(c).startswith("Proposed Caveat below for vector: ")
        and "no answer would carry the caveat" in readable(c)
        for c in at.caption
    )
    assert any(readable(s) == "What the change does" for s in at.subheader)
    at.slider(key="thr_proposed_vector").set_value(bottom).run()
    no_exception(at)
    assert at.slider(key="thr_caveat_vector").value >= bottom


def test_an_approval_that_waits_for_another_role_says_so_on_its_proposal(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compliance approves first: the proposal (a fragment of its own) is drawn again with the
    signature stored, says what it still needs, and no longer offers Chen the form."""
    v = _pending(demo_engine)
    at = app(demo_url, monkeypatch, CHEN, tab="signoff").run()
    at.switch_page(PAGE).run()
    no_exception(at)
    at.text_area(key=f"thr_sign_note_{v.id}").input("Compliance accepts it.")
    at.checkbox(key=f"thr_sign_confirm_{v.id}").check()
    next(b for b in at.button if b.label == "Approve").click().run()
    no_exception(at)
    assert any(
        readable(s) == f"Version {v.number} approved as Compliance; it still needs: Product owner."
        for s in at.success
    )
    done = signoff.get_version(demo_engine, v.id)
    assert done.status == "pending"
    assert [s.role for s in done.signatures] == ["compliance"]
    assert not [b for b in at.button if b.label == "Approve"]
