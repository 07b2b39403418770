"""What a signer of a threshold proposal sees and signs with: the proposal analysed on the
test split of the reference run (else the newest run) in the first ranking mode whose refuse
threshold it changes. The analysis's snapshot, data fingerprint and case ids are stored with
the signature; without a run or outcomes they are empty."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from sqlalchemy import Engine

from review.core.taxonomy import Taxonomy
from review.evaluation import evalruns
from review.policy.policy import NoAnswerPolicy
from review.thresholds import thresholds
from review.thresholds.thresholds import Analysis

__all__ = ["THRESHOLD_MODES", "SignoffEvidence", "changed_mode", "signoff_evidence"]

#: The ranking modes whose refuse threshold a proposal may change, in the order looked at.
THRESHOLD_MODES: Final = ("vector", "bm25", "semantic_reranker")


@dataclass(frozen=True)
class SignoffEvidence:
    """The run and mode a proposal is reported on, and its analysis (None: no run, or no
    scored outcome in that mode)."""

    run_name: str | None = None
    mode: str = "vector"
    analysis: Analysis | None = None
    snapshot: dict[str, Any] = field(default_factory=dict)
    fingerprint: str = ""
    case_ids: list[int] = field(default_factory=list)


def changed_mode(policy: NoAnswerPolicy, proposed: NoAnswerPolicy) -> str:
    """The first mode whose refuse threshold ``proposed`` changes ("vector" when none)."""
    changed = [
        m
        for m in THRESHOLD_MODES
        if proposed.thresholds_for(m).refuse_below != policy.thresholds_for(m).refuse_below
    ]
    return changed[0] if changed else "vector"


def signoff_evidence(
    engine: Engine, tax: Taxonomy, policy: NoAnswerPolicy, proposed: NoAnswerPolicy
) -> SignoffEvidence:
    """The proposal ``proposed`` against the policy in force ``policy`` (see the module)."""
    runs = evalruns.list_runs(engine)
    if not runs:
        return SignoffEvidence()
    run = next((r for r in runs if r.name.startswith("reference")), runs[0])
    mode = changed_mode(policy, proposed)
    frame = thresholds.outcomes(engine, run.id, tax, policy, mode)
    if frame.empty:
        return SignoffEvidence(run.name, mode)
    a = thresholds.analyse(
        frame,
        proposed,
        mode,
        policy.thresholds_for(mode).refuse_below,
        proposed.thresholds_for(mode).refuse_below,
    )
    return SignoffEvidence(run.name, mode, a, a.snapshot(), a.fingerprint, a.case_ids)
