"""The notes' definitions, transcribed, against the workbench's figures (issue 15).

Note 000's ``score_decision`` is copied as the note prints it. Note 002's release table is
written out row by row as a plain loop over cases. Both are compared with
:mod:`review.evaluation.runmetrics` on random runs with all five decision states, repeated
cases, reason codes missing and slices left empty. Where the note falls back to 1.0 or 0.0 on
an empty denominator, the workbench says "undefined" (NaN) instead: the house rule, checked
here too.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import pandas as pd
import pytest

from review.evaluation import runmetrics

STATES = ("answer", "abstain", "clarify", "partial", "escalate")
ANSWERING = {"answer", "partial"}
REASONS = ("no_answer_bearing_evidence", "evidence_stale", "conflicting_evidence", None)


# --- note 000, verbatim ------------------------------------------------------------------


@dataclass
class EvalCase:
    expected_decision: str


@dataclass
class RagResponse:
    decision: str


def score_decision(cases: list[EvalCase], outputs: list[RagResponse]) -> dict[str, float]:
    if len(cases) != len(outputs):
        raise ValueError("Each evaluation case requires one output")

    expected_abstentions = sum(c.expected_decision == "abstain" for c in cases)
    correct_abstentions = sum(
        c.expected_decision == "abstain" and o.decision == "abstain"
        for c, o in zip(cases, outputs, strict=True)
    )
    answerable_cases = sum(c.expected_decision == "answer" for c in cases)
    false_refusals = sum(
        c.expected_decision == "answer" and o.decision != "answer"
        for c, o in zip(cases, outputs, strict=True)
    )

    return {
        "abstention_recall": correct_abstentions / expected_abstentions
        if expected_abstentions
        else 1.0,
        "false_refusal_rate": false_refusals / answerable_cases if answerable_cases else 0.0,
        "decision_accuracy": sum(
            c.expected_decision == o.decision for c, o in zip(cases, outputs, strict=True)
        )
        / len(cases),
    }


# --- note 002's release table, row by row -------------------------------------------------


def release_table(rows: list[dict[str, object]]) -> dict[str, tuple[int, int]]:
    """(k, n) per row of note 002's table. Test sets: 'no-answer, partial, conflict, stale
    and unauthorized cases' are the cases not expecting a plain answer; 'complete, allowed,
    current, consistent cases' those expecting one; 'all abstentions' every non-answer
    output; 'answered cases' every answer."""
    out = {m: [0, 0] for m in ("unsupported", "supported", "reason", "citation")}
    for r in rows:
        gold, decision = r["gold"], r["decision"]
        answered = decision in ANSWERING
        if gold != "answer":
            out["unsupported"][1] += 1
            # an answer where the policy required abstention; on a partial case, a full one
            if answered and (gold not in ANSWERING or decision == "answer"):
                out["unsupported"][0] += 1
        if gold == "answer":
            out["supported"][1] += 1
            out["supported"][0] += bool(r["answer_ok"])
        if not answered:
            out["reason"][1] += 1
            out["reason"][0] += (
                r["reason_code"] is not None and r["reason_code"] in r["gold_reasons"]  # type: ignore[operator]
            )
        else:
            out["citation"][1] += 1
            out["citation"][0] += bool(r["citations_support"])
    return {k: (v[0], v[1]) for k, v in out.items()}


def random_run(rng: random.Random, n: int, states: tuple[str, ...]) -> pd.DataFrame:
    rows = []
    for i in range(n):
        gold = rng.choice(states)
        decision = rng.choice(STATES)
        answered = decision in ANSWERING
        rows.append(
            {
                "key": f"C{i % max(1, n - 3)}",  # a few cases appear twice (repeats)
                "gold": gold,
                "decision": decision,
                "infra": False,
                "reason_code": None if answered else rng.choice(REASONS),
                "gold_reasons": [] if gold == "answer" else [rng.choice(REASONS[:3])],
                "answerable": gold in ANSWERING,
                "answered": answered,
                "answer_ok": answered and gold in ANSWERING and rng.random() < 0.7,
                "citations_support": answered and rng.random() < 0.6,
                "slices": (),
                "split": "test",
            }
        )
    return pd.DataFrame(rows)


def _same(ours: float, theirs: float) -> None:
    assert ours == pytest.approx(theirs, abs=1e-12)


@pytest.mark.parametrize("seed", range(40))
def test_figures_equal_the_notes_definitions_on_random_runs(seed: int) -> None:
    rng = random.Random(seed)
    # some runs leave states out, so that denominators are empty
    states = STATES if seed % 4 else tuple(rng.sample(STATES, 2))
    df = random_run(rng, rng.randint(1, 60), states)
    m = runmetrics.summarize(df)
    note = score_decision(
        [EvalCase(g) for g in df["gold"]], [RagResponse(d) for d in df["decision"]]
    )
    n_abstain = int((df["gold"] == "abstain").sum())
    n_answer = int((df["gold"] == "answer").sum())
    if n_abstain:
        _same(m["abstention_recall"].value, note["abstention_recall"])
    else:  # the note falls back to 1.0; the workbench says undefined
        assert note["abstention_recall"] == 1.0 and math.isnan(m["abstention_recall"].value)
    if n_answer:
        _same(m["false_refusal_rate"].value, note["false_refusal_rate"])
    else:
        assert note["false_refusal_rate"] == 0.0 and math.isnan(m["false_refusal_rate"].value)
    _same(m["decision_accuracy"].value, note["decision_accuracy"])
    table = release_table(df.to_dict("records"))
    for ours, row in (
        ("unsupported_answer_rate", "unsupported"),
        ("supported_answer_rate", "supported"),
        ("reason_code_accuracy", "reason"),
        ("citation_validity", "citation"),
    ):
        k, n = table[row]
        assert (m[ours].k, m[ours].n) == (k, n), ours
        if n:
            _same(m[ours].value, k / n)
        else:
            assert math.isnan(m[ours].value)
    # per state: the recall of that exact state
    recall = runmetrics.state_recall(df, list(STATES)).set_index("expected")
    for state in STATES:
        mine = df[df["gold"] == state]
        assert recall.loc[state, "n"] == len(mine)
        assert recall.loc[state, "k"] == int((mine["decision"] == state).sum())


def test_the_release_gate_uses_the_same_figures() -> None:
    """The gate's counts are the metrics' counts (infrastructure failures aside)."""
    from review.thresholds.release import gate_counts

    df = random_run(random.Random(99), 80, STATES)
    m = runmetrics.summarize(df)
    counts = gate_counts(df, partial_allowed=False)
    for name in (
        "abstention_recall",
        "false_refusal_rate",
        "unsupported_answer_rate",
        "supported_answer_rate",
        "reason_code_accuracy",
        "citation_validity",
    ):
        assert counts[name] == (m[name].k, m[name].n), name
    k, n = counts["answer_rate_answerable"]
    assert n == m["false_refusal_rate"].n and k == n - m["false_refusal_rate"].k
