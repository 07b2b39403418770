"""The threshold gate fails closed for any policy (issue 30, item 12): with generated policies
(directions, inequalities, gate orders, missing-signal sections) and generated signals with one
or more of them removed, NaN, infinite or out of range, no request is answered, unless the
broken signal is one the signed policy says the assistant does not produce. The same holds
for the vectorised gate that replay, re-decision and the pipelines use."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from review.policy.gate import Signals, decide, decide_frame
from review.policy.policy import NoAnswerPolicy
from tests.policy.test_policy_gate import BROKEN, _frame, policies

#: A logged value that is absent, not a number or out of range for each signal, whatever the
#: ranking mode (9.0 is a fine BM25 score, so it is left out here).
_BROKEN = {**BROKEN, "top_score": [None, float("nan"), float("inf"), float("-inf"), -1.0]}
_BREAKABLE = sorted(_BROKEN)


@st.composite
def broken_signals(draw: st.DrawFn) -> tuple[Signals, tuple[str, ...]]:
    """Signals that would answer in some mode, with at least one signal broken."""
    values: dict[str, Any] = {
        "ranking_mode": draw(st.sampled_from(["bm25", "vector", "semantic_reranker", "hybrid"])),
        "hits_after_filter": draw(st.integers(3, 50)),
        "top_score": draw(st.sampled_from([0.3, 0.6, 0.9])),  # in range for every mode
        "answerable": True,
        "ambiguous": False,
        "ungrounded": False,
        "topics": (),
    }
    broken = tuple(draw(st.lists(st.sampled_from(_BREAKABLE), min_size=1, unique=True)))
    for name in broken:
        values[name] = draw(st.sampled_from(_BROKEN[name]))
    return Signals(**values), broken


def _reads_score(policy: NoAnswerPolicy, mode: str | None) -> bool:
    """Whether the gate reads ``top_score`` in ``mode``: only where a threshold is set (for
    hybrid, on the mode its ``threshold_on`` names)."""
    th = policy.ranking_modes.get(mode or "")
    if th is not None and mode == "hybrid":
        th = policy.ranking_modes.get(th.threshold_on or "")
    return th is not None and (th.refuse_below is not None or th.caveat_below is not None)


@settings(max_examples=100, deadline=None)
@given(policy=policies(), rows=st.lists(broken_signals(), min_size=1, max_size=20))
def test_a_broken_signal_never_answers_under_any_policy(
    policy: NoAnswerPolicy, rows: list[tuple[Signals, tuple[str, ...]]]
) -> None:
    declared = set(policy.missing_signal.not_produced if policy.missing_signal else ())
    out = decide_frame(policy, _frame([s for s, _ in rows]))
    for (signals, broken), frame_decision in zip(rows, out["decision"], strict=True):
        result = decide(policy, signals)
        assert frame_decision == result.decision
        needed = set(broken) - declared  # the signed policy's not_produced may be missing
        if not _reads_score(policy, signals.ranking_mode):
            needed.discard("top_score")  # a mode without score thresholds reads no score
        if not needed:
            continue
        assert result.decision != "answer", (signals, broken, result)
        if result.rule == "signal_missing":
            assert result.missing[0] in broken, (signals, broken, result)
