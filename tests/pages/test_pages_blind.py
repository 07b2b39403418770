"""Blind on every page: while a case still waits for my label, no page shows me its expected
decision, category, document roles or the author's notes (what the Label page hides); after I
label it, they show. AppTest on the demo, signed in as an annotator (Inés or Tom), or as Ravi,
a reviewer who also labels."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pandas as pd
import pytest
from sqlalchemy import Engine
from sqlalchemy import text as sql
from streamlit.testing.v1 import AppTest

from review.admin import users
from review.cases import cases, sight
from review.core import readable
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy
from review.labels import blind, labeling
from tests.helpers.blind import Judgement, all_text, judgement
from tests.helpers.pages import INES, no_exception, page_app

BLIND_KEY = "CASE-087"  # ready, nobody labeled it, by the demo's author: an answer


def _actor(engine: Engine, email: str) -> Actor:
    row = users.get_by_email(engine, email)
    assert row is not None
    return users.to_actor(row)


def _case(engine: Engine, key: str = BLIND_KEY) -> cases.CaseView:
    view = cases.get_case(engine, key=key)
    assert view is not None and view.notes and view.documents
    assert not labeling.current_labels(engine, view.id)
    return view


def _label(engine: Engine, email: str, view: cases.CaseView, tax: Taxonomy) -> None:
    labeling.submit(engine, _actor(engine, email), view.id, labeling.LabelIn("answer"), None, tax)


def _run(at: AppTest) -> str:
    at.run()
    no_exception(at)
    return all_text(at)


def _all_shown(seen: Judgement, text: str) -> None:
    assert seen.decision in text and seen.category in text and seen.notes in text
    assert all(r in text for r in seen.roles), seen.roles


def test_the_cases_page_shows_a_case_waiting_for_my_label_without_its_judgement(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch, tax: Taxonomy
) -> None:
    view = _case(demo_engine)
    seen = judgement(view, tax)
    at = page_app(demo_url, monkeypatch, "pages/cases_page.py", INES, case=str(view.id))
    text = _run(at)
    assert view.question in text  # the case is there, its evidence too
    assert seen.shown_in(text) == []
    assert sight.BLIND_NOTE in text
    assert not any(b.label == "Edit this case" for b in at.button)  # the form holds it all
    _label(demo_engine, INES, view, tax)
    text = _run(at)
    assert sight.BLIND_NOTE not in text
    _all_shown(seen, text)


def test_the_case_list_and_its_filters_do_not_tell_a_blind_case_s_judgement(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch, tax: Taxonomy
) -> None:
    view = _case(demo_engine)
    seen = judgement(view, tax)
    at = page_app(demo_url, monkeypatch, "pages/cases_page.py", INES)
    at.session_state["cases_q"] = view.key
    _run(at)
    table = next(d.value for d in at.dataframe if "case" in d.value.columns)
    row = table[table["case"] == view.key]
    assert len(row) == 1
    cells = row.to_csv(index=False)
    assert seen.decision not in cells and seen.category not in cells
    assert sight.HIDDEN in cells
    # filtering by its expected decision does not find it while it is blind
    at.session_state["cases_decision"] = view.expected_decision
    text = _run(at)
    assert "No cases match these filters." in text
    assert not any("case" in d.value.columns for d in at.dataframe)
    _label(demo_engine, INES, view, tax)
    text = _run(at)
    table = next(d.value for d in at.dataframe if "case" in d.value.columns)
    assert list(table["case"]) == [view.key]
    assert seen.decision in text and seen.category in text


def test_the_cases_export_leaves_out_cases_waiting_for_my_label(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch, tax: Taxonomy
) -> None:
    view = _case(demo_engine)
    at = page_app(demo_url, monkeypatch, "pages/cases_page.py", INES)
    at.session_state["cases_q"] = view.key
    _run(at)
    next(b for b in at.button if b.label == "Prepare export of the filtered cases").click()
    text = _run(at)
    assert "Download 0 cases as JSONL" in text
    assert "1 case still waiting for your label is left out" in text
    assert view.notes not in at.session_state["cases_export"][1]
    _label(demo_engine, INES, view, tax)
    next(b for b in at.button if b.label == "Prepare export of the filtered cases").click()
    text = _run(at)
    assert "Download 1 case as JSONL" in text
    assert view.notes[:40] in at.session_state["cases_export"][1]


RAVI = "ravi.menon@brightwave.example"  # reviewer and annotator
TOM = "tom.becker@brightwave.example"  # an annotator
#: Ravi's forbidden-evidence variant of FAM-REFUND-WINDOW, confirmed by Inés: blind to Tom
BLIND_VARIANT = "CASE-001-CF-1"


def _table_with(at: AppTest, column: str) -> pd.DataFrame:
    return next(d.value for d in at.dataframe if column in d.value.columns)


def test_the_builder_withholds_the_judgement_of_a_variant_waiting_for_my_label(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch, tax: Taxonomy
) -> None:
    view = cases.get_case(demo_engine, key=BLIND_VARIANT)
    assert view is not None and view.family and view.evidence_state == "forbidden"
    assert not labeling.current_labels(demo_engine, view.id)
    # its forbidden document is restricted: only an annotator with clearance labels it
    with demo_engine.begin() as c:
        c.execute(sql("update users set clearance = true where email = :e"), {"e": TOM})
    state = tax.label("evidence_states", view.evidence_state)
    at = page_app(demo_url, monkeypatch, "pages/builder_page.py", TOM, family=view.family)
    text = _run(at)
    row = _table_with(at, "evidence state")
    row = row[row["case"] == view.key].iloc[0]
    assert row["evidence state"] == sight.HIDDEN and row["expected"] == sight.HIDDEN
    assert tax.label("decisions", view.expected_decision) not in str(row["documents"])
    assert "decisive" not in str(row["documents"])
    assert state not in text  # only this variant is forbidden: nothing else says so
    assert "1 variant of this family still waits for your label" in text
    # opened as a base case in the builder: nothing to build from while blind
    base = page_app(demo_url, monkeypatch, "pages/builder_page.py", TOM, case=str(view.id))
    base_text = _run(base)
    assert sight.BLIND_NOTE in base_text and state not in base_text
    _label(demo_engine, TOM, view, tax)
    text = _run(at)
    assert state in text
    row = _table_with(at, "evidence state")
    assert row[row["case"] == view.key].iloc[0]["evidence state"] == state


def test_a_run_s_outputs_hide_the_gold_of_a_case_waiting_for_my_label(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch, tax: Taxonomy
) -> None:
    view = _case(demo_engine)
    at = page_app(demo_url, monkeypatch, "pages/runs_page.py", INES)
    _run(at)
    outputs = _table_with(at, "gold")
    mine = outputs[outputs["key"] == view.key]
    assert len(mine) >= 1, "the demo's runs have an output on the case"
    assert set(mine["gold"]) == {sight.HIDDEN} and set(mine["answer_ok"]) == {sight.HIDDEN}
    assert outputs["gold"].ne(sight.HIDDEN).any()  # the cases I labeled keep their gold
    # comparing two runs: a case that changed its decision shows neither gold nor effect
    flips = _table_with(at, "effect")
    seen = blind.sight(demo_engine, _actor(demo_engine, INES))
    hidden = flips["case"].isin(sorted(seen.blind_keys(demo_engine, flips["case"])))
    assert hidden.any(), "some flipping cases still wait for Inés's label"
    assert set(flips.loc[hidden, "gold"]) == set(flips.loc[hidden, "effect"]) == {sight.HIDDEN}
    assert flips.loc[~hidden, "effect"].isin(["fixed", "broken", "changed"]).all()
    _label(demo_engine, INES, view, tax)
    _run(at)
    outputs = _table_with(at, "gold")
    # the gold decision now shows, as its label
    gold = readable.term(tax, "decisions", view.expected_decision)
    assert set(outputs.loc[outputs["key"] == view.key, "gold"]) == {gold}


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def arrow_log() -> Iterator[list[str]]:
    """What Streamlit logs while it turns tables into Arrow (it logs a table it could not
    convert as it was, then converts a copy with its columns forced to text)."""
    log = logging.getLogger("streamlit.dataframe_util")
    handler, level = _Records(), log.level
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    try:
        yield handler.messages
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


def test_the_runs_page_sends_the_blinded_outputs_as_they_are(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch, arrow_log: list[str]
) -> None:
    view = _case(demo_engine)
    at = page_app(demo_url, monkeypatch, "pages/runs_page.py", INES)
    _run(at)
    unconverted = [m for m in arrow_log if "Arrow table was unsuccessful" in m]
    assert unconverted == []
    outputs = _table_with(at, "answer_ok")
    mine = outputs["key"] == view.key
    assert set(outputs.loc[mine, "answer_ok"]) == {sight.HIDDEN}
    assert set(outputs.loc[~mine & outputs["gold"].ne(sight.HIDDEN), "answer_ok"].dropna()) <= {
        "yes",
        "no",
    }
    assert _table_with(at, "effect")["effect"].eq(sight.HIDDEN).any()


def test_adjudication_shows_a_reviewer_who_may_still_label_no_expected_decision(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch, tax: Taxonomy
) -> None:
    view = _case(demo_engine)
    seen = judgement(view, tax)
    at = page_app(demo_url, monkeypatch, "pages/adjudication_page.py", RAVI, case=str(view.id))
    text = _run(at)
    assert view.question in text
    assert "Expected decision on the case" not in text
    assert seen.shown_in(text) == []
    roles = {d.role for d in view.documents}
    assert roles == {"decisive"}
    assert not [r for r in roles if r in text.lower()]  # the page shows roles by their keys
    assert sight.BLIND_NOTE in text
    _label(demo_engine, RAVI, view, tax)
    text = _run(at)
    assert f"Expected decision on the case: {seen.decision}" in text
    assert all(r in text for r in roles)


def test_the_decisions_that_flip_hide_the_gold_of_cases_waiting_for_my_label(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = page_app(demo_url, monkeypatch, "pages/thresholds_page.py", INES)
    _run(at)
    slider = at.slider(key="thr_proposed_vector")
    slider.set_value(0.7).run()
    no_exception(at)
    flips = _table_with(at, "raw_score")
    seen = blind.sight(demo_engine, _actor(demo_engine, INES))
    hidden = seen.blind_keys(demo_engine, flips["key"].astype(str))
    assert hidden, "some flipping cases still wait for Inés's label"
    assert set(flips.loc[flips["key"].isin(sorted(hidden)), "gold"]) == {sight.HIDDEN}
    assert flips.loc[~flips["key"].isin(sorted(hidden)), "gold"].ne(sight.HIDDEN).all()
