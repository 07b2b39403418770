"""The Thresholds page's Evidence gate tab with freshness that fits the fact (issue 35, item
3): the reviewer gives a claim its kind, and a stale claim shows the freshness rule that
applied to it."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import Engine

from tests.helpers.pages import PAULA, app, no_exception, open_tab, readable

ROWS_KEY = "thr_gate_rows_CASE-001"
CLAIMS_KEY = "thr_gate_claims_CASE-001"


def _edits(rows: dict[int, dict[str, object]]) -> dict[str, object]:
    return {"edited_rows": rows, "added_rows": [], "deleted_rows": []}


def test_the_evidence_tab_names_the_freshness_rule_of_each_stale_claim(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = app(demo_url, monkeypatch, PAULA).run()
    at.switch_page("pages/thresholds_page.py").run()
    open_tab(at, "Evidence gate")
    at.text_input(key="thr_gate_case").input("CASE-001").run()
    no_exception(at)
    assert any(
        "claim kind 'current_price': 30 days" in readable(c)
        and "otherwise (global max_age_days): 365 days" in readable(c)
        for c in at.caption
    )
    claims = at.data_editor(key=CLAIMS_KEY)
    assert list(claims.value.columns) == ["id", "text", "kind"]
    passages = at.data_editor(key=ROWS_KEY)
    assert "category" in passages.value.columns
    assert set(passages.value["category"]) == {"policy"}  # the documents' authority
    # the decisive passage (2025-03-01) scored, asked about more than a year later
    at.date_input(key="thr_gate_asof").set_value(dt.date(2026, 12, 1))
    at.session_state[ROWS_KEY] = _edits({0: {"support_score": 0.9}, 1: {"support_score": 0.1}})
    at.run()
    no_exception(at)
    status = next(m for m in at.metric if m.label == "Status")
    assert status.value == "abstain"
    assert any("Stale evidence" in readable(c) for c in at.caption)
    stale = next(d.value for d in at.dataframe if "why not current" in d.value.columns)
    assert stale.to_dict(orient="records") == [
        {
            "claim": "c1",
            "kind": "(none)",
            "why not current": "POL-REFUND-MONTHLY@2 is older than 365 days "
            "(rule: global max_age_days)",
        }
    ]
    # the claim is a settled fact: no age limit, and the gate answers
    at.session_state[CLAIMS_KEY] = _edits({0: {"kind": "historical"}})
    at.run()
    no_exception(at)
    assert next(m for m in at.metric if m.label == "Status").value == "answer"
    assert not any("why not current" in d.value.columns for d in at.dataframe)


def test_the_evidence_tab_starts_each_claim_with_the_kind_the_case_gives_it(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CASE-001's claim stored as a settled historical fact: the tab starts with that kind,
    and the gate answers from the passage a year and a half old without the reviewer's edit."""
    from sqlalchemy import update

    from storage.db import write_session
    from storage.models import Case, CaseClaim

    with write_session(demo_engine) as s:
        case_id = s.query(Case.id).filter(Case.key == "CASE-001").scalar_subquery()
        s.execute(update(CaseClaim).where(CaseClaim.case_id == case_id).values(kind="historical"))
    at = app(demo_url, monkeypatch, PAULA).run()
    at.switch_page("pages/thresholds_page.py").run()
    open_tab(at, "Evidence gate")
    at.text_input(key="thr_gate_case").input("CASE-001").run()
    no_exception(at)
    assert list(at.data_editor(key=CLAIMS_KEY).value["kind"]) == ["historical"]
    assert any("each with the kind the case gives it" in readable(c) for c in at.caption)
    at.date_input(key="thr_gate_asof").set_value(dt.date(2026, 12, 1))
    at.session_state[ROWS_KEY] = _edits({0: {"support_score": 0.9}, 1: {"support_score": 0.1}})
    at.run()
    no_exception(at)
    assert next(m for m in at.metric if m.label == "Status").value == "answer"
