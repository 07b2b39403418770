"""Run metrics against hand-worked numbers; comparison and metamorphic checks."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from review.evaluation import runmetrics


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
                "citations_support": bool(cited) and all(c.startswith("OK") for c in cited),
                # the decisive document of every answerable case here is OK-1
                "answer_ok": (decision in answering)
                and not infra
                and gold in answering
                and "OK-1" in cited,
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
    # note 000: exactly abstain on the 4 expected abstains: U1, U2 (U4 clarified)
    assert (m["abstention_recall"].k, m["abstention_recall"].n) == (2, 4)
    # the broader figure: any non-answer on them (U1, U2, U4)
    assert (m["non_answer_recall"].k, m["non_answer_recall"].n) == (3, 4)
    # A3 refused of 3 answerable that ran (A4 is an infrastructure failure)
    assert (m["false_refusal_rate"].k, m["false_refusal_rate"].n) == (1, 3)
    # exact decision: A1, A2, U1, U2 of 7 that ran
    assert (m["decision_accuracy"].k, m["decision_accuracy"].n) == (4, 7)
    # note 002: unsupported over the 4 cases requiring abstention: U3
    assert (m["unsupported_answer_rate"].k, m["unsupported_answer_rate"].n) == (1, 4)
    # supported answers over the 3 answerable that ran: A1 (A2 misses the decisive document)
    assert (m["supported_answer_rate"].k, m["supported_answer_rate"].n) == (1, 3)
    # reason codes over all 4 non-answers (A3, U1, U2, U4): only U1's is right; U4 has none
    assert (m["reason_code_accuracy"].k, m["reason_code_accuracy"].n) == (1, 4)
    # citations over all 3 answers: A1 ok, A2 bad, U3 ok
    assert (m["citation_validity"].k, m["citation_validity"].n) == (2, 3)
    # CRAG: A1 +1, A2 -1 (not acceptable), A3 0 | U1 0, U2 0, U3 -1, U4 0 -> -1 / 7
    assert m["crag_score"].value == pytest.approx(-1 / 7)
    lo, hi = m["abstention_recall"].lo, m["abstention_recall"].hi
    assert lo < 0.5 < hi and lo >= 0 and hi <= 1


def test_a_partial_answer_is_a_refusal_unless_the_policy_allows_partial_answers() -> None:
    df = frame(
        [
            ("A1", "answer", "partial", False, None, ["OK-1"]),
            ("A2", "answer", "answer", False, None, ["OK-1"]),
        ]
    )
    strict = runmetrics.summarize(df)["false_refusal_rate"]
    allowed = runmetrics.summarize(df, partial_allowed=True)["false_refusal_rate"]
    assert (strict.k, strict.n) == (1, 2)
    assert (allowed.k, allowed.n) == (0, 2)


def test_an_empty_denominator_is_undefined_with_its_reason() -> None:
    df = frame([("A1", "answer", "answer", False, None, ["OK-1"])])
    table = runmetrics.summary_table(df).set_index("metric")
    row = table.loc["Abstention recall"]
    assert math.isnan(row["value"]) and row["n"] == 0
    assert row["note"] == "undefined: no cases expecting abstain"
    assert table.loc["False-refusal rate", "note"] == ""


def test_state_recall_counts_each_exact_state() -> None:
    r = runmetrics.state_recall(HAND, ["answer", "abstain", "clarify"]).set_index("expected")
    assert (r.loc["answer", "k"], r.loc["answer", "n"]) == (2, 3)
    assert (r.loc["abstain", "k"], r.loc["abstain", "n"]) == (2, 4)
    assert r.loc["clarify", "n"] == 0 and math.isnan(r.loc["clarify", "recall"])
    assert r.loc["clarify", "note"] == "undefined: no case expects clarify"


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
    assert row["delta"] == pytest.approx(-1 / 4)
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
    assert bad.loc[runmetrics.METAMORPHIC["removed"][0], "pass_rate"] == 0.0
    present = bad.loc[runmetrics.METAMORPHIC["present"][0]]
    assert math.isclose(present["pass_rate"], 2 / 3) and present["varying"] == 1
    # variance: the most frequent decision holds 2 of 3 repeats
    assert math.isclose(present["decision_variance"], 1 / 3)


def test_family_checks_look_past_the_decision() -> None:
    """Restricted text in an abstention, a superseded citation in a right answer and an
    invisible citation in an answer each fail their check."""
    df = _family(
        {"forbidden": ["abstain"] * 2, "conflicted": ["answer"] * 2, "present": ["answer"]}
    )
    df["leaked"] = [True, False, False, False, False]
    df["cites_superseded"] = [False, False, True, False, False]
    df["citations_valid"] = [True, True, True, True, False]
    out = runmetrics.family_outcomes(df)
    assert list(out["passed"]) == [False, True, False, True, False]
    assert list(out["why"]) == [
        "restricted text or a forbidden document in the answer",
        "",
        "cites a superseded version",
        "",
        "cites a document the identity cannot see",
    ]
    table = runmetrics.metamorphic_checks(df).set_index("check")
    assert table.loc[runmetrics.METAMORPHIC["forbidden"][0], "pass_rate"] == 0.5
    assert table.loc[runmetrics.METAMORPHIC["conflicted"][0], "passed"] == 1


def _perturbed(
    rows: list[tuple[str, int, str, str | None, str | None, list[str], str]],
) -> pd.DataFrame:
    """(key, repeat, kind, decision before, decision after (None: infra), cited, text)."""
    answering = {"answer", "partial"}
    out = []
    for key, rep, kind, before, after, cited, text in rows:
        out.append(
            {
                "key": key,
                "repeat": rep,
                "kind": kind,
                "base_decision": before,
                "base_infra": before is None,
                "base_answered": before in answering,
                "decision": after,
                "infra": after is None,
                "answered": after in answering,
                "cited_doc_ids": cited,
                "text": text,
                "perturbation": {
                    "added": "D-OPEN-QUESTIONS@1",
                    "body": "# D: open questions\n\nA reader asked: How long?\n\nNothing "
                    "further is recorded here yet.\n",
                }
                if kind == "distractor"
                else {"order": ["B@1", "A@1"], "was": ["A@1", "B@1"]},
            }
        )
    return pd.DataFrame(out)


PERTURBED = _perturbed(
    [
        ("C1", 0, "reorder", "answer", "answer", ["D@1"], "14 days."),  # same decision
        ("C1", 1, "reorder", "answer", "abstain", [], ""),  # changed
        ("C2", 0, "reorder", "abstain", None, [], ""),  # infrastructure failure
        ("C1", 0, "distractor", "answer", "answer", ["D@1"], "14 days."),  # same evidence
        ("C1", 1, "distractor", "answer", "answer", ["D-OPEN-QUESTIONS@1"], "x"),  # cites it
        ("C2", 0, "distractor", "abstain", "answer", ["E@1"], "30 days."),  # new answer
        ("C3", 0, "distractor", "answer", "answer", [], "A reader asked: How long?"),  # text
        ("C3", 1, "distractor", "answer", "abstain", [], ""),  # no claim at all
    ]
)


def test_perturbation_checks_against_hand_worked_outcomes() -> None:
    judged = runmetrics.judge_perturbed(PERTURBED)
    assert list(judged["why"]) == [
        "",
        "decision changed: answer -> abstain",
        "infrastructure failure",
        "",
        "answers citing the distractor",
        "answers where the original input got abstain",
        "answers with the distractor's text",
        "",
    ]
    assert judged["passed"].isna().sum() == 1
    table = runmetrics.metamorphic_checks(HAND.iloc[:0], PERTURBED).set_index("check")
    reorder = table.loc[runmetrics.PERTURBATION_CHECKS["reorder"]]
    # C1 twice (1 passed); C2's pair is an infrastructure failure, counted apart
    assert (reorder["cases"], reorder["runs"], reorder["passed"]) == (1, 2, 1)
    assert reorder["pass_rate"] == 0.5 and reorder["infrastructure failures"] == 1
    # C1 answered then abstained on the reordered input: varying, variance 1 - 1/2
    assert reorder["varying"] == 1 and reorder["decision_variance"] == 0.5
    distractor = table.loc[runmetrics.PERTURBATION_CHECKS["distractor"]]
    assert (distractor["cases"], distractor["runs"], distractor["passed"]) == (3, 5, 2)
    assert distractor["pass_rate"] == pytest.approx(2 / 5)
    # C3 answered then abstained (variance 1/2); C1 and C2 kept theirs: mean 1/6
    assert distractor["varying"] == 1
    assert distractor["decision_variance"] == pytest.approx(1 / 6)
    assert set(table["kind"]) == {"perturbation"}


def _history(
    rows: list[tuple[int, str, str, str, int, str, str | None]],
) -> pd.DataFrame:
    """(run id, created, family, case, repeat, gold, decision (None: infra))."""
    answering = {"answer", "partial"}
    out = []
    for rid, created, fam, key, rep, gold, decision in rows:
        out.append(
            {
                "run_id": rid,
                "run": f"R{rid}",
                "created_at": pd.Timestamp(created, tz="UTC"),
                "family": fam,
                "key": key,
                "repeat": rep,
                "gold": gold,
                "decision": decision,
                "infra": decision is None,
                "answerable": gold in answering,
                "answered": decision in answering,
            }
        )
    return pd.DataFrame(out)


# R1 is the oldest; R2 and R3 share a time (the id breaks the tie). F1 is answerable, F2 and
# G1 are not. R2 runs twice per case, and its first G1 call is an infrastructure failure.
HISTORY = _history(
    [
        (2, "2025-02-01", "F", "F1", 0, "answer", "answer"),
        (2, "2025-02-01", "F", "F1", 1, "answer", "abstain"),
        (2, "2025-02-01", "F", "F2", 0, "abstain", "abstain"),
        (2, "2025-02-01", "F", "F2", 1, "abstain", "abstain"),
        (2, "2025-02-01", "G", "G1", 0, "abstain", None),
        (2, "2025-02-01", "G", "G1", 1, "abstain", "abstain"),
        (1, "2025-01-01", "F", "F1", 0, "answer", "answer"),
        (1, "2025-01-01", "F", "F2", 0, "abstain", "answer"),
        (1, "2025-01-01", "G", "G1", 0, "abstain", "abstain"),
        (3, "2025-02-01", "F", "F1", 0, "answer", "abstain"),
        (3, "2025-02-01", "F", "F2", 0, "abstain", "abstain"),
    ]
)


def test_family_drift_against_a_hand_worked_example() -> None:
    d = runmetrics.family_drift(HISTORY)
    got = {
        (r.run, r.family): (
            r.order,
            r.cases,
            r.decision_accuracy,
            r.accuracy_n,
            r.abstention_recall,
            r.recall_n,
            None if math.isnan(r.flips) else int(r.flips),
            r.compared,
        )
        for r in d.itertuples()
    }
    assert got == {
        # R1: F1 right, F2 answered though unanswerable; G1 right
        ("R1", "F"): (1, 2, 1 / 2, 2, 0.0, 1, None, 0),
        ("R1", "G"): (1, 1, 1.0, 1, 1.0, 1, None, 0),
        # R2: 3 of 4 outputs right (F1's second repeat abstained); F2 refused twice; against
        # R1's decisions F2 flipped (answer -> abstain), F1's first repeat did not
        ("R2", "F"): (2, 2, 3 / 4, 4, 1.0, 2, 1, 2),
        # R2: the infrastructure failure is left out of the rates but is a flip of its own
        ("R2", "G"): (2, 1, 1.0, 1, 1.0, 1, 1, 1),
        # R3: F1 now abstains (wrong, a flip from R2's first repeat), F2 still refused
        ("R3", "F"): (3, 2, 1 / 2, 2, 1.0, 1, 1, 2),
    }
    assert list(d["run"]) == ["R1", "R1", "R2", "R2", "R3"]


def test_drift_chart_puts_runs_oldest_first() -> None:
    d = runmetrics.family_drift(HISTORY)
    for metric in runmetrics.DRIFT_METRICS:
        spec = runmetrics.drift_chart(d, metric).to_dict()
        x = spec["layer"][0]["encoding"]["x"]
        assert x["sort"] == ["R1", "R2", "R3"] and x["field"] == "run"
        assert spec["layer"][0]["encoding"]["color"]["field"] == "family"
    assert runmetrics.family_drift(HISTORY.iloc[:0]).empty


def test_a_refusal_that_still_makes_a_claim_is_an_unsupported_answer() -> None:
    """Note 000: "I cannot confirm this, but ... 60 days" is linted with the wording rules and
    counted as an unsupported answer (and -1 in the CRAG score)."""
    df = frame(
        [
            ("U1", "abstain", "abstain", False, "no_answer_bearing_evidence", []),
            ("U2", "abstain", "abstain", False, "no_answer_bearing_evidence", []),
        ]
    ).assign(claim_after_refusal=[True, False])
    m = runmetrics.summarize(df)
    assert (m["unsupported_answer_rate"].k, m["unsupported_answer_rate"].n) == (1, 2)
    assert m["crag_score"].value == pytest.approx(-1 / 2)
    # the decision itself was right: decision accuracy and abstention recall stand
    assert m["decision_accuracy"].k == 2 and m["abstention_recall"].k == 2


def test_refusals_citing_a_distractor_are_counted() -> None:
    """Note 000: a refusal never cites a near-neighbour source as support."""
    df = frame(
        [
            ("U1", "abstain", "abstain", False, "no_answer_bearing_evidence", ["NEAR-1"]),
            ("U2", "abstain", "abstain", False, "no_answer_bearing_evidence", []),
            ("A1", "answer", "answer", False, None, ["OK-1"]),
        ]
    ).assign(refusal_cites_distractor=[True, False, False])
    m = runmetrics.summarize(df)["refusals_citing_distractor"]
    assert (m.k, m.n) == (1, 2)
    table = runmetrics.summary_table(df).set_index("metric")
    assert table.loc["Refusals citing a distractor", "over"] == "non-answer outputs"


def test_a_case_without_a_language_is_grouped_as_not_stated() -> None:
    df = frame(
        [
            ("A1", "answer", "answer", False, None, ["OK-1"]),
            ("A2", "answer", "abstain", False, "no_answer_bearing_evidence", []),
            ("A3", "abstain", "abstain", False, "no_answer_bearing_evidence", []),
        ]
    ).assign(language=["de", "de", "language not stated"])
    g = runmetrics.by_group(df, "language").set_index("language")
    assert g.loc["de", "False-refusal rate"] == 0.5 and g.loc["de", "false_refusal_rate n"] == 2
    assert g.loc["language not stated", "cases"] == 1


def test_groups_by_retrieval_depth_and_freshness(demo_engine: Any, tax: Any) -> None:
    from review.evaluation import evalruns

    run = evalruns.list_runs(demo_engine)[0]
    df = evalruns.outputs_frame(demo_engine, run.id, tax)
    assert set(df["retrieval_depth"]) <= {
        "0 documents", "1 document", "2 documents", "3 documents", "4+ documents",
    }  # fmt: skip
    assert df["freshness"].str.len().gt(0).all()
    assert set(df["language"]) == {"en"}  # every demo case states its language
    for column in ("retrieval_depth", "freshness", "language"):
        g = runmetrics.by_group(df, column)
        assert int(g["cases"].sum()) == int((~df["infra"]).sum())


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["present", "removed", "forbidden", "partial", "conflicted"]),
        st.lists(
            st.lists(
                st.sampled_from(["answer", "abstain", "clarify", None]), min_size=1, max_size=4
            ),
            min_size=1,
            max_size=3,
        ),
        min_size=1,
    )
)
def test_decision_variance_is_the_mean_over_cases_of_one_less_the_top_share(
    cases: dict[str, list[list[str | None]]],
) -> None:
    """Per check, the mean over its cases of 1 - (the most frequent decision's repeats / the
    repeats with a decision), a case without any decision left out ("undefined" when none
    has one), counted case by case here."""
    rows = [
        {
            "key": f"F-{state}-{i}",
            "evidence_state": state,
            "decision": d,
            "gold": "answer" if state in ("present", "conflicted") else "abstain",
            "infra": False,
            "repeat": rep,
        }
        for state, per_case in cases.items()
        for i, ds in enumerate(per_case)
        for rep, d in enumerate(ds)
    ]
    table = runmetrics.metamorphic_checks(pd.DataFrame(rows)).set_index("check")
    for state, per_case in cases.items():
        shares = []
        for ds in per_case:
            said = [d for d in ds if d is not None]
            if said:
                shares.append(1 - max(said.count(d) for d in said) / len(said))
        got = table.loc[runmetrics.METAMORPHIC[state][0], "decision_variance"]
        if shares:
            assert math.isclose(got, sum(shares) / len(shares), abs_tol=1e-12)
        else:
            assert math.isnan(got)
