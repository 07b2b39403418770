"""AppTest of the Wording page's draft kept in the database (issue 33 item 3): an edit made in
one session (one server) is there when the page opens in another session as the same user,
never for another user; proposing or discarding it clears it everywhere; a stale tab's edit
overwrites nothing."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine
from streamlit.testing.v1 import AppTest

from review.core import userdrafts
from review.core.taxonomy import Taxonomy
from review.demo import wording_versions
from review.wording import signing, versions
from tests.helpers.pages import INES, PAULA, actor_of, no_exception, page_app, readable

PAGE = "pages/wording_page.py"
OMAR = "omar.haddad@brightwave.example"
NEW_R3 = (
    "I drafted an answer, but the documents available to you do not back all of it, so I have "
    "held it back. Please raise a support ticket and {role} will look at your question."
)


@pytest.fixture
def wording_url(demo_url: str, demo_engine: Engine, tax: Taxonomy) -> str:
    if not versions.versions(demo_engine):
        wording_versions.build_demo_wording(demo_engine, tax)
    return demo_url


def session(url: str, monkeypatch: pytest.MonkeyPatch, user: str) -> AppTest:
    """A new browser session (on any server) of ``user`` on the Wording page."""
    at = page_app(url, monkeypatch, PAGE, user).run()
    no_exception(at)
    return at


def again(at: AppTest, monkeypatch: pytest.MonkeyPatch, user: str) -> AppTest:
    """One more run of an open session of ``user`` (the test router reads who from the
    environment)."""
    monkeypatch.setenv("WB_TEST_USER", user)
    return at


def button(at: AppTest, key: str) -> Any:
    return next(b for b in at.button if b.key == key)


def text_of(at: AppTest, key: str) -> str:
    value = at.text_area(key=key).value
    assert value is not None
    return value


def edited(at: AppTest) -> str:
    return " ".join(readable(c) for c in at.caption if "Edited in your draft" in readable(c))


def test_the_draft_follows_its_owner_to_another_server_and_proposing_clears_it(
    wording_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = session(wording_url, monkeypatch, OMAR)
    first.selectbox(key="wd_key").select("R3").run()
    first.text_area(key="wd_text_R3").input(NEW_R3).run()
    no_exception(first)
    saved = userdrafts.load_draft(demo_engine, actor_of(demo_engine, OMAR), "wording")
    assert saved is not None and saved.payload["messages"]["R3"]["text"] == NEW_R3
    # the server went down: the browser opens the page on another one, a new session
    second = session(wording_url, monkeypatch, OMAR)
    assert "R3" in edited(second)
    second.selectbox(key="wd_key").select("R3").run()
    assert second.text_area(key="wd_text_R3").value == NEW_R3
    # another user does not see it
    paula = session(wording_url, monkeypatch, PAULA)
    assert edited(paula) == ""
    assert any("No edits yet" in readable(c) for c in paula.caption)
    # proposing from the second session clears it, there and on the next server
    again(second, monkeypatch, OMAR)
    second.text_area(key="wd_rationale").input("Plainer wording for held-back answers.")
    button(second, "wd_submit").click().run()
    no_exception(second)
    assert any("Proposed as version 3" in readable(s) for s in second.success)
    assert edited(second) == ""
    assert userdrafts.load_draft(demo_engine, actor_of(demo_engine, OMAR), "wording") is None
    third = session(wording_url, monkeypatch, OMAR)
    assert edited(third) == ""
    newest = signing.review_version(demo_engine, versions.versions(demo_engine)[0].id)
    assert [c.key for c in newest.changes if c.status == "changed"] == ["R3"]


def test_discarding_clears_the_saved_draft(
    wording_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = session(wording_url, monkeypatch, INES)
    at.selectbox(key="wd_key").select("F1").run()
    at.text_area(key="wd_text_F1").input("Which {missing_item} do you mean?").run()
    assert userdrafts.load_draft(demo_engine, actor_of(demo_engine, INES), "wording") is not None
    button(at, "wd_discard").click().run()
    no_exception(at)
    assert edited(at) == ""
    assert userdrafts.load_draft(demo_engine, actor_of(demo_engine, INES), "wording") is None
    assert edited(session(wording_url, monkeypatch, INES)) == ""


def test_undoing_every_edit_drops_the_saved_draft(
    wording_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = session(wording_url, monkeypatch, INES)
    at.selectbox(key="wd_key").select("F1").run()
    original = at.text_area(key="wd_text_F1").value
    assert original is not None
    at.text_area(key="wd_text_F1").input("Which {missing_item} do you mean?").run()
    at.text_area(key="wd_text_F1").input(original).run()
    no_exception(at)
    assert userdrafts.load_draft(demo_engine, actor_of(demo_engine, INES), "wording") is None


def test_a_stale_tab_overwrites_nothing_and_may_load_the_newer_draft(
    wording_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    ines = actor_of(demo_engine, INES)
    tab_a = session(wording_url, monkeypatch, INES)
    tab_b = session(wording_url, monkeypatch, INES)
    tab_a.selectbox(key="wd_key").select("F1").run()
    tab_a.text_area(key="wd_text_F1").input("Which {missing_item} do you mean? (A)").run()
    again(tab_b, monkeypatch, INES)
    tab_b.selectbox(key="wd_key").select("F1").run()
    tab_b.text_area(key="wd_text_F1").input("Which {missing_item} is it? (B)").run()
    no_exception(tab_b)
    assert any("saved in another tab or session" in readable(e) for e in tab_b.error)
    saved = userdrafts.load_draft(demo_engine, ines, "wording")
    assert saved is not None and saved.payload["messages"]["F1"]["text"].endswith("(A)")
    # tab B's text is still on its page; it loads tab A's draft instead
    assert text_of(tab_b, "wd_text_F1").endswith("(B)")
    button(tab_b, "wd_load_saved").click().run()
    no_exception(tab_b)
    assert text_of(tab_b, "wd_text_F1").endswith("(A)")
    assert not tab_b.error


def test_a_stale_tab_may_save_over_the_newer_draft(
    wording_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    ines = actor_of(demo_engine, INES)
    tab_a = session(wording_url, monkeypatch, INES)
    tab_b = session(wording_url, monkeypatch, INES)
    tab_a.selectbox(key="wd_key").select("F1").run()
    tab_a.text_area(key="wd_text_F1").input("Which {missing_item} do you mean? (A)").run()
    tab_b.selectbox(key="wd_key").select("F1").run()
    tab_b.text_area(key="wd_text_F1").input("Which {missing_item} is it? (B)").run()
    button(tab_b, "wd_overwrite").click().run()
    no_exception(tab_b)
    assert not tab_b.error
    saved = userdrafts.load_draft(demo_engine, ines, "wording")
    assert saved is not None and saved.payload["messages"]["F1"]["text"].endswith("(B)")


def test_a_saved_draft_on_a_version_no_longer_in_force_says_so(
    wording_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = session(wording_url, monkeypatch, OMAR)
    first.selectbox(key="wd_key").select("F1").run()
    first.text_area(key="wd_text_F1").input("Which {missing_item} do you mean?").run()
    # the pending R2 change is approved meanwhile; the draft opens on another server later
    (r2,) = versions.pending(demo_engine)
    signing.sign_wording(demo_engine, actor_of(demo_engine, OMAR), r2.id, "approve")
    later = session(wording_url, monkeypatch, OMAR)
    assert any("changed while you were drafting" in readable(w) for w in later.warning)
    button(later, "wd_rebase").click().run()
    no_exception(later)
    assert not any("changed while you were drafting" in readable(w) for w in later.warning)
    # the rebase is saved too: a third session opens on the draft, current
    third = session(wording_url, monkeypatch, OMAR)
    assert "F1" in edited(third)
    assert not any("changed while you were drafting" in readable(w) for w in third.warning)


def test_a_session_signed_in_as_someone_else_shows_their_draft_not_the_last_ones(
    wording_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = session(wording_url, monkeypatch, OMAR)
    at.selectbox(key="wd_key").select("R3").run()
    at.text_area(key="wd_text_R3").input(NEW_R3).run()
    again(at, monkeypatch, PAULA).run()
    no_exception(at)
    assert edited(at) == ""
    assert userdrafts.load_draft(demo_engine, actor_of(demo_engine, PAULA), "wording") is None
    again(at, monkeypatch, OMAR).run()
    assert "R3" in edited(at)
