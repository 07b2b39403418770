"""The router in local mode (issue 16, item 11): a new session starts on the user picker, a
link naming a user who cannot act is refused, and an address open to the network is said on
every page."""

from __future__ import annotations

import ast
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine
from streamlit import config

from pages.ui import ACTOR_KEY
from review.admin import signin, users
from tests.helpers.pages import ADA, INES, app, no_exception, readable
from tests.helpers.paths import ROOT


def _names(engine: Engine) -> dict[str, int]:
    return {u.email: u.id for u in users.list_users(engine)}


def test_a_new_session_starts_on_the_picker_as_nobody(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = app(demo_url, monkeypatch, pick=False).run()
    no_exception(at)
    assert ACTOR_KEY not in at.session_state
    assert [readable(h) for h in at.subheader] == ["Who is working?"]
    picker = at.selectbox[0]
    assert picker.label == "Your name" and picker.value is None
    assert not at.sidebar.selectbox  # no "Acting as" before a person picked
    # Continue without a name: said, nobody acts
    at.button[0].click().run()
    assert any("Pick your name first" in readable(e) for e in at.error)
    assert ACTOR_KEY not in at.session_state
    ines = _names(demo_engine)[INES]
    at.selectbox[0].set_value(ines)
    at.button[0].click().run()
    no_exception(at)
    assert at.session_state[ACTOR_KEY].email == INES
    assert readable(at.title[0]) == "Overview"
    assert at.query_params["as"] == str(ines)


@pytest.mark.parametrize("who", ["999999", "abc", "1e3"])
def test_a_link_naming_an_unknown_user_is_refused(
    demo_url: str, monkeypatch: pytest.MonkeyPatch, who: str
) -> None:
    at = app(demo_url, monkeypatch, pick=False, **{"as": who}).run()
    no_exception(at)
    assert ACTOR_KEY not in at.session_state
    assert any("Pick who you are" in readable(e) for e in at.error)
    assert [readable(h) for h in at.subheader] == ["Who is working?"]


def test_a_link_naming_a_deactivated_user_is_refused(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = users.to_actor(users.get_by_email(demo_engine, ADA))  # type: ignore[arg-type]
    tom = users.get_by_email(demo_engine, "tom.becker@brightwave.example")
    assert tom is not None
    users.update_user(
        demo_engine,
        admin,
        tom.id,
        tom.version,
        name=tom.name,
        roles=list(tom.roles),
        clearance=tom.clearance,
        active=False,
    )
    at = app(demo_url, monkeypatch, pick=False, **{"as": str(tom.id)}).run()
    no_exception(at)
    assert ACTOR_KEY not in at.session_state
    assert any(f"user {tom.id}, who is not an active user" in readable(e) for e in at.error)
    # a link naming an active user opens as that user
    ines = _names(demo_engine)[INES]
    at2 = app(demo_url, monkeypatch, pick=False, **{"as": str(ines)}).run()
    assert at2.session_state[ACTOR_KEY].email == INES


@pytest.fixture
def open_address() -> Iterator[None]:
    before = config.get_option("server.address")
    config.set_option("server.address", "0.0.0.0")
    try:
        yield
    finally:
        config.set_option("server.address", before)


def _network_warnings(at: object) -> list[str]:
    return [readable(w) for w in at.warning if "open to the network" in readable(w)]  # type: ignore[attr-defined]


def test_local_mode_open_to_the_network_warns_on_every_page(
    demo_url: str, monkeypatch: pytest.MonkeyPatch, open_address: None
) -> None:
    at = app(demo_url, monkeypatch, pick=False).run()
    assert _network_warnings(at)  # on the picker too
    at = app(demo_url, monkeypatch, ADA).run()
    for page in ("pages/overview_page.py", "pages/cases_page.py", "pages/thresholds_page.py"):
        at.switch_page(page).run()
        no_exception(at)
        assert _network_warnings(at), page


def test_local_mode_on_the_loopback_address_does_not_warn(
    demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert config.get_option("server.address") == "127.0.0.1"  # the shipped config
    at = app(demo_url, monkeypatch, ADA).run()
    assert not _network_warnings(at)


def test_a_link_naming_someone_else_asks_before_switching(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 30, item 11: a session acting as an annotator that follows ``/admin?as=<admin>``
    is asked "Continue as Ada Okafor (admin)?" and keeps acting as the annotator until the
    person says yes."""
    ids = _names(demo_engine)
    at = app(demo_url, monkeypatch, INES).run()
    assert at.session_state[ACTOR_KEY].email == INES
    at.query_params["as"] = str(ids[ADA])
    at.run()
    no_exception(at)
    assert [readable(h) for h in at.subheader] == ["Continue as Ada Okafor (admin)?"]
    assert ACTOR_KEY not in at.session_state or at.session_state[ACTOR_KEY].email == INES
    assert not at.sidebar.selectbox  # no page, no "Acting as": only the question
    # "Stay": still the annotator, the address names her again
    stay = next(b for b in at.button if readable(b.label).startswith("Stay as"))
    stay.click().run()
    no_exception(at)
    assert at.session_state[ACTOR_KEY].email == INES
    assert at.query_params["as"] == str(ids[INES])
    # the same link again, and this time "Continue"
    at.query_params["as"] = str(ids[ADA])
    at.run()
    go = next(b for b in at.button if readable(b.label) == "Continue as Ada Okafor (admin)")
    go.click().run()
    no_exception(at)
    assert at.session_state[ACTOR_KEY].email == ADA
    assert at.query_params["as"] == str(ids[ADA])


def test_switching_in_the_sidebar_is_not_taken_for_a_link(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _names(demo_engine)
    at = app(demo_url, monkeypatch, INES).run()
    pick = at.sidebar.selectbox[0]
    ada = next(o for o in pick.options if o.startswith("Ada Okafor"))
    pick.set_value(ada).run()
    no_exception(at)
    assert at.session_state[ACTOR_KEY].email == ADA
    assert at.query_params["as"] == str(ids[ADA])
    assert "Continue as" not in " ".join(readable(h) for h in at.subheader)


def test_the_remember_script_writes_the_cookie_the_router_reads() -> None:
    """The script is a constant (no value is ever formatted into HTML); its cookie name must
    be the one ``signin.remembered_user`` is fed from."""
    tree = ast.parse((ROOT / "app.py").read_text(encoding="utf-8"))
    script = next(
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id == "_REMEMBER_SCRIPT"
        and isinstance(node.value, ast.Constant)
    )
    assert isinstance(script, str)
    assert f"document.cookie = '{signin.REMEMBER_COOKIE}=' + who" in script
    assert "st-key-wb_user_pick" in script  # only while a user acts (the picker is drawn)
