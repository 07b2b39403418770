"""Pages degrade, never crash (issue 16, item 13): with the wording or thresholds in force
edited in the database every page still renders, says what cannot be read, and shows no
traceback; and links carry their query values URL-encoded."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, text
from streamlit.testing.v1 import AppTest

from review.policy import inforce
from review.wording import versions
from tests.helpers.pages import ADA, app, no_exception, page_files, readable

PAGES = page_files()
PEOPLE = (ADA, "chen.li@brightwave.example", "ravi.menon@brightwave.example")


def _set_text(engine: Engine, version_id: int, yaml_text: str) -> None:
    with engine.begin() as c:
        c.execute(
            text("update policy_versions set yaml_text = :t where id = :i"),
            {"t": yaml_text, "i": version_id},
        )


def _every_page(url: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """The errors each page shows, as every person who can open it; no page raises."""
    shown: dict[str, list[str]] = {}
    for who in PEOPLE:
        at = app(url, monkeypatch, who).run()
        for page in PAGES:
            try:
                at.switch_page(page).run()
            except ValueError:  # not registered for this role (Admin)
                continue
            no_exception(at)
            shown.setdefault(page, []).extend(readable(e) for e in at.error)
    return shown


def test_an_edited_wording_in_force_degrades_every_page(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = versions.in_force(demo_engine).version
    assert w is not None
    _set_text(demo_engine, w.id, w.yaml_text.replace("could you tell me", "you must tell me", 1))
    shown = _every_page(demo_url, monkeypatch)
    monitoring = shown["pages/monitoring_page.py"]
    assert any("refusal wording in force cannot be read" in e for e in monitoring), monitoring
    assert any("cannot be read" in e for e in shown["pages/wording_page.py"])


def test_an_edited_thresholds_version_in_force_degrades_every_page(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    v = inforce.in_force(demo_engine).version
    assert v is not None
    _set_text(demo_engine, v.id, v.yaml_text + "\n# edited in the database\nextra: 1\n")
    shown = _every_page(demo_url, monkeypatch)
    assert shown["pages/thresholds_page.py"], "the Thresholds page says nothing"


def _link_app() -> None:
    import streamlit as st

    from pages import ui

    st.session_state[ui.LOCAL_AS_KEY] = 7
    st.text(ui.link("traces", family="A&B=C #1", q="50% off?"))
    st.text(ui.link("cases"))


def test_links_url_encode_every_query_value() -> None:
    at = AppTest.from_function(_link_app).run()
    no_exception(at)
    first, second = (t.value for t in at.text)
    assert first == "/traces?family=A%26B%3DC%20%231&q=50%25%20off%3F&as=7"
    assert second == "/cases?as=7"
