"""The release gate (issue 15 item 4): both sides of the boundary, note 002's release table,
per high-harm slice with counts; a run correct by construction over the demo's test split
passes `workbench gate`, the degenerate runs fail naming the rows; an empty slice fails with
its reason; infrastructure failures never pass; a run decided with another policy does not
reproduce."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner
from sqlalchemy import Engine

from review.cases import splits
from review.cli.main import main
from review.core.taxonomy import Taxonomy
from review.policy.policy import load_policy
from review.thresholds import release
from tests.helpers.paths import ROOT
from tests.helpers.release_runs import correct_output, ready_cases, scored_frame

POLICY = ROOT / "policies" / "no-answer-policy.yaml"


def _everything(c: dict[str, Any], decision: str) -> dict[str, Any]:
    if decision == "answer":
        cited = [d for d, _ in c["docs"]][:1]
        return {"case": c["key"], "decision": "answer", "text": "Yes.", "cited_ids": cited}
    return {"case": c["key"], "decision": decision, "text": "No.", "reason_code": None}


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_the_demo_test_split_has_cases_in_every_gated_slice(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    policy = load_policy(POLICY)
    frame = scored_frame(demo_engine, tax, [correct_output(c) for c in ready_cases(demo_engine)])
    test = frame[frame["split"] == "test"]
    covered = {s for sl in test["slices"] for s in sl}
    assert set(policy.targets.slice_gates) <= covered


def test_a_correct_run_passes_and_the_degenerate_runs_fail_naming_rows(
    demo_url: str,
    demo_engine: Engine,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", demo_url)
    cases = ready_cases(demo_engine)
    run = CliRunner().invoke
    good = _write(tmp_path / "correct.jsonl", [correct_output(c) for c in cases])
    r = run(main, ["gate", "--policy", str(POLICY), "--run", str(good)])
    assert r.exit_code == 0, r.output
    assert " 0 failed" in r.output and "FAILED" not in r.output
    # every overall row of both notes is in the table, with its count
    for row in (
        "Answer coverage on answerable cases",
        "False-refusal rate",
        "Abstention recall",
        "Unsupported-answer rate",
        "Supported-answer rate",
        "Reason-code accuracy",
        "Citation validity",
    ):
        assert row in r.output
    assert "slice:adversarial_instruction" in r.output
    expected_failures = {
        "answer": "FAILED: Abstention recall [overall]",
        "abstain": "FAILED: False-refusal rate [overall]",
        "clarify": "FAILED: Abstention recall [overall]",
    }
    for decision, line in expected_failures.items():
        path = _write(tmp_path / f"{decision}.jsonl", [_everything(c, decision) for c in cases])
        r = run(main, ["gate", "--policy", str(POLICY), "--run", str(path)])
        assert r.exit_code == 1, (decision, r.output)
        assert line in r.output, (decision, r.output)
    # answering everything fails the unsupported side; refusing everything the answer side
    path = _write(tmp_path / "answer.jsonl", [_everything(c, "answer") for c in cases])
    out = run(main, ["gate", "--policy", str(POLICY), "--run", str(path)]).output
    assert "FAILED: Unsupported-answer rate [slice:access_filtered_answer]" in out
    path = _write(tmp_path / "abstain.jsonl", [_everything(c, "abstain") for c in cases])
    out = run(main, ["gate", "--policy", str(POLICY), "--run", str(path)]).output
    assert "FAILED: Answer coverage on answerable cases [overall]" in out


def test_figures_and_counts_of_the_correct_run(demo_engine: Engine, tax: Taxonomy) -> None:
    policy = load_policy(POLICY)
    cases = ready_cases(demo_engine)
    report = release.release_gate(
        policy, scored_frame(demo_engine, tax, [correct_output(c) for c in cases])
    )
    rows = {(r.row, r.scope): r for r in report.rows}
    test_keys = {c["key"] for c in cases}
    frame = scored_frame(demo_engine, tax, [correct_output(c) for c in cases])
    test = frame[frame["split"] == "test"]
    assert report.cases == len(test) and test_keys >= set(test["key"])
    answer_cases = int((test["gold"] == "answer").sum())
    abstain_cases = int((test["gold"] == "abstain").sum())
    needs = int((test["gold"] != "answer").sum())
    fr = rows[("False-refusal rate", "overall")]
    assert (fr.k, fr.n, fr.value) == (0, answer_cases, 0.0)
    ar = rows[("Abstention recall", "overall")]
    assert (ar.k, ar.n) == (abstain_cases, abstain_cases)
    ua = rows[("Unsupported-answer rate", "overall")]
    assert (ua.k, ua.n) == (0, needs)
    rc = rows[("Reason-code accuracy", "overall")]
    assert rc.n == int((~test["gold"].isin(["answer", "partial"])).sum()) and rc.k == rc.n


def test_a_gated_slice_without_cases_fails_with_its_reason(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    policy = load_policy(POLICY)
    frame = scored_frame(demo_engine, tax, [correct_output(c) for c in ready_cases(demo_engine)])
    without = frame[["adversarial_instruction" not in s for s in frame["slices"]]]
    report = release.release_gate(policy, without)
    empty = [r for r in report.rows if r.scope == "slice:adversarial_instruction"]
    assert len(empty) == 1 and not empty[0].passed
    assert empty[0].why == "no test cases in slice adversarial_instruction"
    assert empty[0].value != empty[0].value  # undefined, never 0 or 1
    assert not report.passed


def test_infrastructure_failures_fail_both_sides(demo_engine: Engine, tax: Taxonomy) -> None:
    policy = load_policy(POLICY)
    rows = []
    for c in ready_cases(demo_engine):
        rows.append({"case": c["key"], "error": "timed out after 30s"})
    report = release.release_gate(policy, scored_frame(demo_engine, tax, rows))
    failed = {(r.row, r.scope) for r in report.failed}
    assert ("False-refusal rate", "overall") in failed
    assert ("Abstention recall", "overall") in failed
    fr = next(r for r in report.rows if (r.row, r.scope) == ("False-refusal rate", "overall"))
    assert fr.k == fr.n > 0  # every crashed answerable case is a refusal, not left out


def test_drift_against_a_baseline_and_reproduction_under_the_policy(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    policy = load_policy(POLICY)
    cases = ready_cases(demo_engine)
    good = scored_frame(demo_engine, tax, [correct_output(c) for c in cases])
    worse = scored_frame(demo_engine, tax, [_everything(c, "answer") for c in cases])
    same = release.release_gate(policy, good, baseline=good)
    drift = next(r for r in same.rows if r.row == "Drift against the baseline run")
    assert drift.passed and drift.value == 0.0 and drift.k == 0
    moved = release.release_gate(policy, worse, baseline=good)
    drift = next(r for r in moved.rows if r.row == "Drift against the baseline run")
    assert not drift.passed and "moved by" in drift.why
    # no signals logged: the reproduction row is listed as not measured
    assert any("logs no gate signals" in line for line in same.not_measured)
    # every row says where its rule comes from, in the words docs/release-gate.md explains
    sources = {r.source for r in (*same.rows, *moved.rows)}
    assert {"boundary", "release", "complete", "slice gate"} <= sources <= set(release.SOURCES)


def test_a_run_whose_signals_the_policy_decides_otherwise_fails(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    # The run's own not_produced list no longer switches a check off (issue 30): the output
    # that reproduces logs answerable and ambiguous, as the shipped policy requires.
    policy = load_policy(POLICY)
    case = next(c for c in ready_cases(demo_engine) if c["decision"] == "answer")
    signals = {
        "ranking_mode": "vector",
        "hits_after_filter": 3,
        "top_score": 0.9,
        "answerable": True,
        "ambiguous": False,
        "ungrounded": False,
        "topics": [],
    }
    declared = {k: v for k, v in signals.items() if k not in ("answerable", "ambiguous")}
    ok = correct_output(case) | {"signals": signals}
    low = correct_output(case) | {"signals": signals | {"top_score": 0.40}}
    nan = correct_output(case) | {"signals": signals | {"top_score": None}}
    undeclared = correct_output(case) | {
        "signals": declared | {"not_produced": ["answerable", "ambiguous"]}
    }
    lacked = "1 output lacked the top score"
    cases = ((ok, True, ""), (low, False, "decided otherwise"), (nan, False, lacked))
    for output, reproduced, why in (*cases, (undeclared, False, "lacked the answerable flag")):
        report = release.release_gate(policy, scored_frame(demo_engine, tax, [output]), "all")
        row = next(r for r in report.rows if r.row == "Decisions reproduce under this policy")
        assert row.passed is reproduced, (output, row)
        assert why in row.why


def test_a_correct_run_missing_six_test_cases_fails_the_gate(
    demo_url: str,
    demo_engine: Engine,
    tax: Taxonomy,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Issue 30: a correct run with the outputs of 6 of the 32 test cases left out passed.
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", demo_url)
    scope = splits.cases_in_scope(demo_engine, "test")
    assert len(scope) == 32
    dropped = sorted(scope["key"])[:6]
    rows = [correct_output(c) for c in ready_cases(demo_engine) if c["key"] not in dropped]
    path = _write(tmp_path / "short.jsonl", rows)
    r = CliRunner().invoke(main, ["gate", "--policy", str(POLICY), "--run", str(path)])
    assert r.exit_code == 1, r.output
    assert "FAILED: Every case in scope has an output [overall]: no output for 6 cases" in r.output
    assert dropped[0] in r.output
    # an infrastructure failure is an output: counted on both sides, not as missing
    crashed = rows + [{"case": k, "error": "timed out after 30s"} for k in dropped]
    report = release.release_gate(
        load_policy(POLICY), scored_frame(demo_engine, tax, crashed), in_scope=scope
    )
    row = next(r for r in report.rows if r.row == "Every case in scope has an output")
    assert row.passed and (row.k, row.n) == (32, 32)
    assert not report.passed


def test_a_gated_slice_whose_outputs_are_missing_says_so(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    policy = load_policy(POLICY)
    scope = splits.cases_in_scope(demo_engine, "test")
    frame = scored_frame(demo_engine, tax, [correct_output(c) for c in ready_cases(demo_engine)])
    without = frame[["adversarial_instruction" not in s for s in frame["slices"]]]
    report = release.release_gate(policy, without, in_scope=scope)
    mine = [r for r in report.rows if r.scope == "slice:adversarial_instruction"]
    assert mine and not any(r.passed for r in mine)
    assert all("no test cases" not in r.why for r in mine)
    missing = next(r for r in mine if r.row == "Every case in scope has an output")
    assert missing.why.startswith("no output for 2 cases (CASE-098, CASE-099)")
    gated = [r for r in mine if r.row != "Every case in scope has an output"]
    assert gated and all(
        r.why.startswith("no output for the 2 test cases in slice adversarial_instruction")
        for r in gated
    )
    assert not report.passed


def test_one_non_answer_without_a_reason_code_fails_the_gate(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    # Issue 30: 15 of 16 non-answers with a reason clear the 0.90 accuracy floor; the reason
    # row fails on the one without, outside every gated slice.
    policy = load_policy(POLICY)
    cases = ready_cases(demo_engine)
    rows = [correct_output(c) for c in cases]
    for row in rows:
        if row["case"] == "CASE-085":  # abstain, slice empty_retrieval (not gated)
            row["reason_code"] = None
    report = release.release_gate(
        policy, scored_frame(demo_engine, tax, rows), in_scope=splits.cases_in_scope(demo_engine)
    )
    by_row = {(r.row, r.scope): r for r in report.rows}
    accuracy = by_row[("Reason-code accuracy", "overall")]
    assert accuracy.passed and (accuracy.k, accuracy.n) == (15, 16)
    reasons = by_row[("Every non-answer has a reason code", "overall")]
    assert not reasons.passed and (reasons.k, reasons.n) == (1, 16)
    assert reasons.why == "1 of 16 non-answers have no reason code (CASE-085)"
    assert [r.row for r in report.failed] == ["Every non-answer has a reason code"]
    assert not report.passed


def _coverage_reference(
    scope: pd.DataFrame, answered: set[str]
) -> tuple[tuple[int, int, str], dict[str, tuple[int, int, str]]]:
    """The coverage rows counted case by case (the gate's rule in words): overall and per
    slice, (k, n, why) with the missing keys sorted."""

    def why(missing: list[str]) -> str:
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        return f"no output for {len(missing)} cases ({shown})" if missing else ""

    keys = sorted(set(scope["key"]))
    missing = [k for k in keys if k not in answered]
    per: dict[str, set[str]] = {}
    for key, slices in zip(scope["key"], scope["slices"], strict=True):
        for sl in slices:
            per.setdefault(sl, set()).add(key)
    slices = {
        sl: (len(ks) - len(gone), len(ks), why(gone))
        for sl, ks in per.items()
        for gone in [sorted(k for k in ks if k not in answered)]
    }
    return (len(keys) - len(missing), len(keys), why(missing)), slices


def test_the_coverage_rows_of_both_scope_forms_equal_the_rule_case_by_case(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    """The list form (cases_in_scope) and the long form (scope_pairs, which the monthly
    review and `workbench gate` read at any size) give the same rows, equal to a count case
    by case, for every way of leaving outputs out."""
    policy = load_policy(POLICY)
    listed = splits.cases_in_scope(demo_engine, "test")
    pairs = splits.scope_pairs(demo_engine, "test")
    assert sorted(pairs["key"].unique()) == list(listed["key"])
    full = scored_frame(demo_engine, tax, [correct_output(c) for c in ready_cases(demo_engine)])
    rng = random.Random(5)
    keys = list(listed["key"])
    for drop in (0, 1, 6, len(keys) // 2, len(keys)):
        gone = set(rng.sample(keys, drop))
        frame = full[~full["key"].isin(gone)]
        if frame[frame["split"] == "test"].empty:
            continue
        answered = set(frame[frame["split"] == "test"]["key"])
        overall, per_slice = _coverage_reference(listed, answered)
        for scope in (listed, pairs):
            report = release.release_gate(policy, frame, in_scope=scope)
            rows = [r for r in report.rows if r.row == "Every case in scope has an output"]
            top = next(r for r in rows if r.scope == "overall")
            assert (top.k, top.n, top.why) == overall
            for r in rows:
                if r.scope.startswith("slice:"):
                    k, n, why = per_slice[r.scope.removeprefix("slice:")]
                    assert (r.k, r.n, r.why) == (k, n, why)
                    assert k < n  # a slice's row is shown when outputs are missing there
            gated_missing = {
                sl for sl in policy.targets.slice_gates if per_slice.get(sl, (0, 0, ""))[2]
            }
            assert {r.scope.removeprefix("slice:") for r in rows if r.scope != "overall"} == (
                gated_missing
            )
