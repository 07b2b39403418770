"""The builder's suggestion of stale evidence shows the freshness rules of the policy in force
for the edited document (issue 35, item 3): whether a moved date makes the evidence stale
depends on the kind of claim and the source, not on one global age."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, select

from storage.db import read_session
from storage.models import Case
from tests.helpers.pages import INES, no_exception, page_app, readable

PAGE = "pages/builder_page.py"


def _case_id(engine: Engine, key: str) -> int:
    with read_session(engine) as s:
        found = s.scalar(select(Case.id).where(Case.key == key))
    assert found is not None
    return int(found)


def _suggestion(at: object) -> dict[str, str]:
    for frame in at.dataframe:  # type: ignore[attr-defined]
        table = frame.value
        if list(table.columns) == ["", "suggestion"]:
            return dict(zip(table[""], table["suggestion"], strict=True))
    raise AssertionError("no suggestion table")


def test_a_stale_evidence_suggestion_names_the_policys_age_limits(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = str(_case_id(demo_engine, "CASE-001"))
    at = page_app(demo_url, monkeypatch, PAGE, INES, case=case).run()
    no_exception(at)
    op = next(w for w in at.selectbox if readable(w.label).startswith("Operator"))
    op.set_value("swap_year").run()
    next(w for w in at.text_input if readable(w.label).startswith("to year")).input("2023")
    next(b for b in at.button if readable(b.label).startswith("Preview the edit")).click().run()
    no_exception(at)
    assert not at.error
    row = _suggestion(at)
    assert "Evidence stale" in row["reasons"]
    note = row["freshness"]
    assert "for a document of authority 'policy'" in note
    assert "a claim without a kind: 365 days (global max_age_days)" in note
    assert "kind 'current_price': 30 days (claim kind 'current_price')" in note
    assert "kind 'historical': no age limit (claim kind 'historical')" in note
