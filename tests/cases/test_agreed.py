"""One agreed label everywhere (issue 15 item 9): once a case is adjudicated, the case page,
the Cases list, the exports (canonical, Ragas, DeepEval) and the run metrics show the agreed
label, with the author's expected decision beside it where they differ."""

from __future__ import annotations

import io
import json

from sqlalchemy import Engine

from review.cases import cases, display, exchange
from review.core.identity import SYSTEM
from review.core.taxonomy import Taxonomy
from review.evaluation import evalruns
from review.labels import labeling
from tests.helpers.actors import make_actor


def _adjudicate_differently(engine: Engine, tax: Taxonomy) -> cases.CaseView:
    """CASE-001 (the author expects answer) adjudicated as clarify by a reviewer."""
    view = cases.get_case(engine, key="CASE-001")
    assert view is not None and view.expected_decision == "answer"
    reviewer = make_actor("reviewer", "rev@test.example")
    labeling.adjudicate(
        engine, reviewer, view.id, "clarify", ["ambiguous_question"], "two readings", tax
    )
    again = cases.get_case(engine, key="CASE-001")
    assert again is not None
    return again


def test_the_case_page_and_list_show_the_agreed_label(demo_engine: Engine, tax: Taxonomy) -> None:
    view = _adjudicate_differently(demo_engine, tax)
    assert view.agreed is not None
    assert (view.agreed.decision, view.agreed.reason_codes, view.agreed.by) == (
        "clarify",
        ("ambiguous_question",),
        "adjudication",
    )
    text = display.agreed_text(view, tax)
    assert text is not None and "adjudicated" in text and "The author expected" in text
    rows = cases.list_cases(demo_engine, cases.CaseFilter(text="CASE-001"), page_size=100)
    row = next(r for r in rows if r.key == "CASE-001")
    assert (row.agreed_decision, row.agreed_by) == ("clarify", "adjudication")
    other = cases.get_case(demo_engine, key="CASE-097")
    assert other is not None and other.agreed is None and display.agreed_text(other, tax) is None


def test_every_export_carries_the_agreed_label(demo_engine: Engine, tax: Taxonomy) -> None:
    _adjudicate_differently(demo_engine, tax)
    flt = cases.CaseFilter(status="ready")
    buf = io.StringIO()
    cases.export_cases(demo_engine, buf, flt, viewer=SYSTEM)
    canonical = {r["key"]: r for r in map(json.loads, buf.getvalue().splitlines())}
    assert canonical["CASE-001"]["expected_decision"] == "answer"  # the author's, unchanged
    assert canonical["CASE-001"]["agreed"] == {
        "decision": "clarify",
        "reason_codes": ["ambiguous_question"],
        "by": "adjudication",
    }
    # the canonical file still imports: the agreed label is read-only and ignored
    line = json.dumps(canonical["CASE-001"])
    [(_, parsed)] = list(cases.iter_cases_jsonl([line], "x.jsonl", tax))
    assert parsed.agreed is not None and "agreed" not in cases.normalised_case(parsed)
    ragas = io.StringIO()
    exchange.export(demo_engine, ragas, "ragas", tax, flt, viewer=SYSTEM)
    sample = next(
        s for s in map(json.loads, ragas.getvalue().splitlines()) if s["case_key"] == "CASE-001"
    )
    assert (sample["expected_decision"], sample["reason_codes"]) == (
        "clarify",
        ["ambiguous_question"],
    )
    assert sample["author_expected_decision"] == "answer"
    assert sample["label_source"] == "adjudication"
    assert sample["reference"].startswith("Clarify")
    deepeval = io.StringIO()
    exchange.export(demo_engine, deepeval, "deepeval", tax, flt, viewer=SYSTEM)
    golden = next(
        g
        for g in json.loads(deepeval.getvalue())
        if g["additional_metadata"]["case_key"] == "CASE-001"
    )
    meta = golden["additional_metadata"]
    assert (meta["expected_decision"], meta["author_expected_decision"]) == ("clarify", "answer")
    plain = next(
        s for s in map(json.loads, ragas.getvalue().splitlines()) if s["case_key"] == "CASE-097"
    )
    assert plain["label_source"] == "author" and "author_expected_decision" not in plain


def test_run_metrics_score_against_the_agreed_label(demo_engine: Engine, tax: Taxonomy) -> None:
    _adjudicate_differently(demo_engine, tax)
    run = evalruns.list_runs(demo_engine)[0]
    frame = evalruns.outputs_frame(demo_engine, run.id, tax)
    row = frame[frame["key"] == "CASE-001"].iloc[0]
    assert row["gold"] == "clarify" and not row["answerable"]
