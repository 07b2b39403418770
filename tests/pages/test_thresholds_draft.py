"""The proposal a person is adjusting on the Thresholds page's "Calibrate and propose" tab is
their draft in the database (AppTest on the demo): sliders and picks set in one session are
where they left them in a new session of the same person (a reload, or another server);
another person does not see them; a proposal made from them, or the sliders moved back to
the thresholds in force, clears the draft; a draft set against a version no longer in force
is dropped."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine
from streamlit.testing.v1 import AppTest

from pages.thresholds import proposal_draft
from review.admin import users
from review.core import userdrafts
from review.core.identity import Actor
from review.policy import inforce, signoff
from storage.db import run_write
from tests.helpers.pages import app, no_exception, readable

PAGE = "pages/thresholds_page.py"
OMAR = "omar.haddad@brightwave.example"  # a product owner: proposes
CHEN = "chen.li@brightwave.example"  # compliance


def _actor(engine: Engine, email: str) -> Actor:
    row = users.get_by_email(engine, email)
    assert row is not None
    return users.to_actor(row)


def _open(url: str, monkeypatch: pytest.MonkeyPatch, email: str) -> AppTest:
    """A new session of ``email`` on the Thresholds page (a reload, or another server)."""
    at = app(url, monkeypatch, email).run()
    at.switch_page(PAGE).run()
    no_exception(at)
    return at


def _draft(engine: Engine, email: str) -> userdrafts.SavedDraft | None:
    return userdrafts.load_draft(engine, _actor(engine, email), proposal_draft.DRAFT_KEY)


def test_the_sliders_come_back_in_a_new_session_of_the_same_person_only(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = _open(demo_url, monkeypatch, OMAR)
    start = at.slider(key="thr_proposed_vector").value
    caveat_start = at.slider(key="thr_caveat_vector").value
    assert _draft(demo_engine, OMAR) is None  # looking proposes nothing: no draft
    at.selectbox(key="thr_split").set_value("train").run()
    at.slider(key="thr_proposed_vector").set_value(0.75).run()
    at.slider(key="thr_caveat_vector").set_value(0.8).run()
    no_exception(at)
    saved = _draft(demo_engine, OMAR)
    assert saved is not None
    assert saved.payload["sliders"]["thr_proposed_vector"] == pytest.approx(0.75)
    assert saved.payload["picks"]["thr_split"] == "train"

    again = _open(demo_url, monkeypatch, OMAR)
    assert again.slider(key="thr_proposed_vector").value == pytest.approx(0.75)
    assert again.slider(key="thr_caveat_vector").value == pytest.approx(0.8)
    assert again.selectbox(key="thr_split").value == "train"
    assert any(readable(s) == "What the change does" for s in again.subheader)

    other = _open(demo_url, monkeypatch, CHEN)
    assert other.slider(key="thr_proposed_vector").value == pytest.approx(start)
    assert other.selectbox(key="thr_split").value == "validation"
    assert _draft(demo_engine, CHEN) is None

    # back at the thresholds in force (same outcomes): no draft
    again.slider(key="thr_proposed_vector").set_value(start).run()
    again.slider(key="thr_caveat_vector").set_value(caveat_start).run()
    no_exception(again)
    assert not any(readable(s) == "What the change does" for s in again.subheader)
    assert _draft(demo_engine, OMAR) is None


def test_a_proposal_clears_the_draft(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = _open(demo_url, monkeypatch, OMAR)
    at.slider(key="thr_proposed_vector").set_value(0.7).run()
    assert _draft(demo_engine, OMAR) is not None
    next(t for t in at.text_area if t.label.startswith("Rationale")).input(
        "Raise the vector refuse threshold: fewer unsupported answers on validation."
    )
    next(b for b in at.button if b.label == "Propose for sign-off").click().run()
    no_exception(at)
    assert any("Proposed as version" in readable(s) for s in at.success)
    assert _draft(demo_engine, OMAR) is None
    at.run()  # the next run keeps what was proposed as no draft
    no_exception(at)
    assert _draft(demo_engine, OMAR) is None
    fresh = _open(demo_url, monkeypatch, OMAR)
    assert fresh.slider(key="thr_proposed_vector").value != pytest.approx(0.7)


def test_a_draft_set_against_a_version_no_longer_in_force_is_dropped(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = _open(demo_url, monkeypatch, OMAR)
    start = at.slider(key="thr_proposed_vector").value
    at.slider(key="thr_proposed_vector").set_value(0.75).run()
    saved = _draft(demo_engine, OMAR)
    assert saved is not None
    payload = {**saved.payload, "in_force": -1}  # as if set against an older version

    omar = _actor(demo_engine, OMAR)
    run_write(
        demo_engine,
        lambda s: userdrafts.save_draft(s, omar, proposal_draft.DRAFT_KEY, payload, saved.version),
    )
    fresh = _open(demo_url, monkeypatch, OMAR)
    assert fresh.slider(key="thr_proposed_vector").value == pytest.approx(start)
    assert _draft(demo_engine, OMAR) is None
    assert signoff.versions(demo_engine, inforce.KIND)  # the policy history is untouched


def test_a_tab_behind_another_tab_s_save_is_told_and_may_save_over_it(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _open(demo_url, monkeypatch, OMAR)
    second = _open(demo_url, monkeypatch, OMAR)  # both read "no draft"
    first.slider(key="thr_proposed_vector").set_value(0.75).run()
    assert _draft(demo_engine, OMAR) is not None
    second.slider(key="thr_proposed_vector").set_value(0.7).run()
    no_exception(second)
    assert any("saved in another tab or session" in readable(e) for e in second.error)
    saved = _draft(demo_engine, OMAR)
    assert saved is not None  # the other tab's draft is not written over
    assert saved.payload["sliders"]["thr_proposed_vector"] == pytest.approx(0.75)
    over = "Keep these sliders as my draft (replaces the other tab's)"
    next(b for b in second.button if b.label == over).click().run()
    no_exception(second)
    saved = _draft(demo_engine, OMAR)
    assert saved is not None
    assert saved.payload["sliders"]["thr_proposed_vector"] == pytest.approx(0.7)
