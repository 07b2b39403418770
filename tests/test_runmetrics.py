"""Run metrics against hand-worked numbers; comparison and metamorphic checks."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from review import runmetrics


def frame(rows: list[tuple[str, str, str | None, bool, str | None, list[str]]]) -> pd.DataFrame:
    """(key, gold, decision, infra, reason_code, cited) -> an outputs-like frame."""
    answering = {"answer", "partial"}
    out = []
    for key, gold, decision, infra, reason, cited in rows:
        out.append(
            {
                "key": key,
                "gold": gold,
                "decision": None if infra else decision,
                "infra": infra,
                "reason_code": reason,
                "cited_doc_ids": cited,
                "gold_reasons": ["no_answer_bearing_evidence"] if gold not in answering else [],
                "answerable": gold in answering,
                "answered": (decision in answering) and not infra,
                "acceptable": gold in answering,
                "citations_valid": all(c.startswith("OK") for c in cited),
                "split": "test",
                "category": "x",
                "slices": ("entity_collision",),
                "evidence_state": None,
                "repeat": 0,
            }
        )
    return pd.DataFrame(out)


# 8 cases: 4 answerable (gold answer), 4 unanswerable (gold abstain), 1 infra failure.
HAND = frame(
    [
        ("A1", "answer", "answer", False, None, ["OK-1"]),  # correct answer
        ("A2", "answer", "answer", False, None, ["BAD-9"]),  # correct, invalid citation
        ("A3", "answer", "abstain", False, "no_answer_bearing_evidence", []),  # false refusal
        ("A4", "answer", None, True, None, []),  # infrastructure failure
        ("U1", "abstain", "abstain", False, "no_answer_bearing_evidence", []),  # right code
        ("U2", "abstain", "abstain", False, "evidence_stale", []),  # wrong code
        ("U3", "abstain", "answer", False, None, ["OK-2"]),  # unsupported answer
        ("U4", "abstain", "clarify", False, None, []),  # refusal without code
    ]
)


def test_hand_worked_metrics() -> None:
    m = runmetrics.summarize(HAND)
    # 3 unanswerable refused (U1, U2, U4) of 4
    assert (m["abstention_recall"].k, m["abstention_recall"].n) == (3, 4)
    # A3 refused of 3 answerable that ran (A4 is an infrastructure failure)
    assert (m["false_refusal_rate"].k, m["false_refusal_rate"].n) == (1, 3)
    # exact decision: A1, A2, U1, U2 of 7 that ran
    assert (m["decision_accuracy"].k, m["decision_accuracy"].n) == (4, 7)
    # unsupported: U3 of 7
    assert (m["unsupported_answer_rate"].k, m["unsupported_answer_rate"].n) == (1, 7)
    # reason codes among refusals of unanswerable with a code: U1 right, U2 wrong
    assert (m["reason_code_accuracy"].k, m["reason_code_accuracy"].n) == (1, 2)
    # citations among answers with citations: A1 ok, A2 bad, U3 ok
    assert (m["citation_validity"].k, m["citation_validity"].n) == (2, 3)
    # CRAG: +1 +1 0 (A3) | 0 0 -1 0 -> 1 / 7
    assert m["crag_score"].value == pytest.approx(1 / 7)
    lo, hi = m["abstention_recall"].lo, m["abstention_recall"].hi
    assert lo < 0.75 < hi and lo >= 0 and hi <= 1


def test_groups_and_confusion() -> None:
    g = runmetrics.by_group(HAND, "slices")
    assert list(g["slices"]) == ["entity_collision"] and int(g["cases"].iloc[0]) == 7
    c = runmetrics.confusion(HAND, ["answer", "abstain", "clarify", "partial", "escalate"])
    assert int(c.loc["answer", "answer"]) == 2
    assert int(c.loc["answer", "infrastructure failure"]) == 1
    assert int(c.loc["abstain", "clarify"]) == 1


def test_comparison_of_a_run_with_itself_has_no_delta() -> None:
    boot = runmetrics.paired_bootstrap(HAND, HAND, resamples=200)
    assert (boot["delta"].fillna(0) == 0).all()
    assert (boot["low"].fillna(0) == 0).all() and (boot["high"].fillna(0) == 0).all()
    assert runmetrics.decision_flips(HAND, HAND).empty


def test_comparison_finds_flips_and_an_improvement() -> None:
    better = HAND.copy()
    better.loc[better["key"] == "U3", ["decision", "answered"]] = ["abstain", False]
    flips = runmetrics.decision_flips(HAND, better)
    assert list(flips["case"]) == ["U3"] and list(flips["effect"]) == ["fixed"]
    boot = runmetrics.paired_bootstrap(HAND, better, resamples=500).set_index("metric")
    row = boot.loc["Unsupported-answer rate"]
    assert row["delta"] == pytest.approx(-1 / 7)
    assert row["low"] <= row["delta"] <= row["high"]


def _family(decisions: dict[str, list[str]]) -> pd.DataFrame:
    rows = []
    for state, ds in decisions.items():
        for rep, d in enumerate(ds):
            rows.append(
                {
                    "key": f"F-{state}",
                    "evidence_state": state,
                    "decision": d,
                    "gold": "answer" if state in ("present", "conflicted") else "abstain",
                    "infra": False,
                    "repeat": rep,
                }
            )
    return pd.DataFrame(rows)


def test_metamorphic_checks_pass_for_a_good_pipeline_and_fail_for_a_bad_one() -> None:
    good = runmetrics.metamorphic_checks(
        _family(
            {
                "present": ["answer"] * 3,
                "removed": ["abstain"] * 3,
                "forbidden": ["abstain"] * 3,
                "partial": ["clarify"] * 3,
                "conflicted": ["answer"] * 3,
            }
        )
    )
    assert (good["pass_rate"] == 1.0).all() and (good["varying"] == 0).all()
    bad = runmetrics.metamorphic_checks(
        _family(
            {
                "present": ["answer", "abstain", "answer"],
                "removed": ["answer"] * 3,
                "forbidden": ["answer"] * 3,
                "partial": ["answer"] * 3,
                "conflicted": ["abstain"] * 3,
            }
        )
    ).set_index("check")
    assert bad.loc["Decisive evidence removed -> abstain or clarify", "pass_rate"] == 0.0
    present = bad.loc["Authoritative passage present -> answer"]
    assert math.isclose(present["pass_rate"], 2 / 3) and present["varying"] == 1
