"""AppTest of the Runs page's metamorphic checks (family variants and perturbed re-runs), the
breakdown by question family, and the drift view over runs (demo data and a run without
perturbations); untrusted text from the perturbations is rendered as text."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from sqlalchemy import Engine
from streamlit.testing.v1 import AppTest

from review.demo.fixtures import DEMO_RUNS
from review.evaluation import runmetrics
from tests.helpers.pages import INES, app, no_exception, readable

RUNS = "pages/runs_page.py"
DISTRACTOR = runmetrics.PERTURBATION_CHECKS["distractor"]
REORDER = runmetrics.PERTURBATION_CHECKS["reorder"]


def frame(at: AppTest, column: str) -> pd.DataFrame:
    return next(d.value for d in at.dataframe if column in d.value.columns)


def checks(at: AppTest) -> pd.DataFrame:
    return frame(at, "check").set_index("check")


def open_runs(url: str, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    at = app(url, monkeypatch, INES).run()
    at.switch_page(RUNS).run()
    no_exception(at)
    return at


def test_metamorphic_checks_pass_for_the_reference_and_fail_for_the_naive_run(
    demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_runs(demo_url, monkeypatch)
    assert at.selectbox(key="runs_pick").value == "reference-v1 (July)"
    ref = checks(at)
    assert {DISTRACTOR, REORDER} <= set(ref.index)
    assert set(ref["kind"]) == {"family variant", "perturbation"}
    assert ref.loc[DISTRACTOR, "pass_rate"] == 1.0 and ref.loc[REORDER, "pass_rate"] == 1.0
    assert any(e.label.startswith("Perturbed answers") for e in at.expander)

    at.selectbox(key="runs_pick").set_value("naive-v0 (June)").run()
    no_exception(at)
    naive = checks(at)
    assert naive.loc[DISTRACTOR, "pass_rate"] < 0.1
    current = "Superseded or conflicting version -> current rules hold"
    assert naive.loc[current, "pass_rate"] < ref.loc[current, "pass_rate"]
    # the failing perturbed answers, and why
    failing = frame(at, "why")
    assert (failing["passed"] == False).all()  # noqa: E712 (object column)
    assert failing["why"].eq("answers citing the distractor").any()
    # what the distractor was, shown verbatim as text (never markdown)
    shown = [t.value for t in at.text]
    assert any(v.startswith("# ") and "A reader asked:" in v for v in shown)
    assert not any("A reader asked:" in readable(m) for m in at.markdown)


def test_repeats_show_decision_variance(demo_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    sampled = next(r for r in DEMO_RUNS if r.repeats > 1)
    at = open_runs(demo_url, monkeypatch)
    at.selectbox(key="runs_pick").set_value(sampled.name).run()
    no_exception(at)
    table = checks(at)
    assert (table["runs"] == table["cases"] * sampled.repeats).all()
    assert table["varying"].sum() > 0 and table["decision_variance"].max() > 0


def test_breakdown_by_question_family(demo_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_runs(demo_url, monkeypatch)
    group = next(b for b in at.button_group if b.label == "Group by")
    assert "Family" in group.options  # the choices read as words, not column keys
    group.set_value("family").run()
    no_exception(at)
    table = frame(at, "family")
    assert "FAM-REFUND-WINDOW" in set(table["family"])
    assert {"Decision accuracy", "Abstention recall"} <= set(table.columns)


def test_drift_view_orders_runs_oldest_first(
    demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_runs(demo_url, monkeypatch)
    assert [t.label for t in at.tabs] == ["One run", "Compare two runs", "Drift by family"]
    assert any(readable(s) == "Drift by question family" for s in at.subheader)
    oldest_first = [r.name for r in sorted(DEMO_RUNS, key=lambda r: r.at)]
    pivot = next(
        d.value for d in at.dataframe if list(d.value.columns) == ["family", *oldest_first]
    )
    assert pivot["family"].is_unique and len(pivot) >= 10
    assert pivot[oldest_first].stack().between(0, 1).all()
    assert any(
        '"question family"' in c.proto.spec and json.dumps(oldest_first) in c.proto.spec
        for c in at.get("vega_lite_chart")
    ), "a line chart per family, runs oldest first on the x axis"
    metric = next(b for b in at.button_group if b.label == "Metric")
    metric.set_value("flips").run()
    no_exception(at)
    pivot = next(
        d.value for d in at.dataframe if list(d.value.columns) == ["family", *oldest_first]
    )
    assert pivot[oldest_first[0]].isna().all()  # nothing before the first run
    assert (pivot[oldest_first[1:]].fillna(0) >= 0).all().all()
    at.multiselect(key="runs_drift_families").set_value(["FAM-REFUND-WINDOW"]).run()
    no_exception(at)
    pivot = next(
        d.value for d in at.dataframe if list(d.value.columns) == ["family", *oldest_first]
    )
    assert list(pivot["family"]) == ["FAM-REFUND-WINDOW"]


def test_an_imported_run_has_family_checks_but_no_perturbations(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_runs(demo_url, monkeypatch)
    good = (
        b'{"case": "CASE-001", "decision": "answer", "score": 0.9, "text": "Yes."}\n'
        b'{"case": "CASE-002", "decision": "answer", "score": 0.9, "text": "Yes."}\n'
    )
    at.file_uploader[0].set_value([("run.jsonl", good, "application/jsonl")])
    next(t for t in at.text_input if t.label == "Run name").input("imported")
    next(b for b in at.button if b.label == "Import run").click().run()
    no_exception(at)
    at.selectbox(key="runs_pick").set_value("imported").run()
    no_exception(at)
    table = checks(at)
    assert set(table["kind"]) == {"family variant"}
    removed = table.loc["Decisive evidence removed -> abstain or clarify"]
    assert (removed["runs"], removed["passed"]) == (1, 0)
    assert any("No perturbed re-runs" in readable(c) for c in at.caption)


def test_a_bundled_pipeline_runs_on_the_chosen_subset(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from review.core.taxonomy import load_taxonomy
    from review.evaluation import evalruns, execution

    at = open_runs(demo_url, monkeypatch)
    at.text_input(key="runs_exec_name").input("reference on test")
    at.selectbox(key="runs_subset_split").set_value("test")
    next(c for c in at.checkbox if c.label.startswith("Also re-run")).uncheck()
    next(b for b in at.button if b.label == "Run on the chosen cases").click().run()
    no_exception(at)
    run = next(r for r in evalruns.list_runs(demo_engine) if r.name == "reference on test")
    keys = set(evalruns.outputs_frame(demo_engine, run.id, load_taxonomy())["key"])
    expected = execution.subset_size(demo_engine, execution.CaseSubset(split="test"))
    assert len(keys) == expected == run.cases


def test_judge_labels_are_imported_and_compared_on_the_runs_page(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_runs(demo_url, monkeypatch)
    assert any("No judge labels for this run" in readable(c) for c in at.caption)
    body = (
        b'{"case": "CASE-001", "judge": "judge-a", "decision": "answer"}\n'
        b'{"case": "CASE-002", "judge": "judge-a", "decision": "answer"}\n'
        b'{"case": "CASE-003", "judge": "judge-a", "decision": "abstain",'
        b' "reason_codes": ["evidence_stale"]}\n'
    )
    up = next(u for u in at.file_uploader if u.label == "Judge labels JSONL")
    up.set_value([("judge.jsonl", body, "application/jsonl")])
    next(b for b in at.button if b.label == "Import judge labels").click().run()
    no_exception(at)
    table = next(d.value for d in at.dataframe if "kappa" in d.value.columns)
    assert set(table["judge"]) == {"judge-a"}
    decision = table[table["field"] == "decision the case called for"].iloc[0]
    assert decision["items"] == 3
