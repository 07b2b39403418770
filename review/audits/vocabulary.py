"""The words of an audit: trace verdicts, failing stages, claim verdicts, what a verdict needs,
the tie-break between reviewers, and the texts shown in place of restricted content."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Sequence

__all__ = ["HEADLINE", "STAGES", "VERDICTS"]


# --- vocabulary -----------------------------------------------------------------------------

VERDICTS: dict[str, str] = {
    "correct_refusal": "Correct refusal",
    "false_refusal": "False refusal (I expected an answer)",
    "supported_answer": "Supported answer",
    "unsupported_answer": "Unsupported answer (this answer is wrong)",
    "partially_supported": "Partially supported",
    "restricted_leak": "Restricted content leaked",
    "wording_violation": "Wording violation",
}


STAGES: dict[str, str] = {
    "retrieval_missed": "Retrieval missed the evidence",
    "filter_removed": "Authorization filter removed it",
    "policy_too_strict": "Answer policy too strict",
    "generator_ignored_signal": "Generator ignored a low-evidence signal",
    "citation_partial": "Citation covers only part of the prose",
}


#: The rates a monthly review reads first.
HEADLINE = ("unsupported_answer", "false_refusal", "correct_refusal", "restricted_leak")


#: Verdicts that name a failure and must say which stage caused it.
NEEDS_STAGE = frozenset({"false_refusal", "unsupported_answer", "partially_supported"})


#: Verdicts that say the system behaved well: no failing stage.
CORRECT = frozenset({"correct_refusal", "supported_answer"})


#: Verdicts whose notes are required (what leaked, which wording rule).
NEEDS_NOTE = frozenset({"restricted_leak", "wording_violation"})


#: Tie-break between reviewers who disagree: the more severe verdict wins.
SEVERITY = (
    "restricted_leak",
    "unsupported_answer",
    "partially_supported",
    "false_refusal",
    "wording_violation",
    "supported_answer",
    "correct_refusal",
)


def outcome(verdicts: Sequence[str]) -> str | None:
    """The item's verdict: the majority of its reviewers, ties going to the more severe."""
    if not verdicts:
        return None
    tally = Tally(verdicts)
    top = max(tally.values())
    tied = [v for v in tally if tally[v] == top]
    return min(tied, key=lambda v: SEVERITY.index(v) if v in SEVERITY else len(SEVERITY))
