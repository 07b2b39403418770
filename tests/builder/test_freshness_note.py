"""What the policy's freshness rules say about a builder suggestion of stale evidence (issue
35, item 3)."""

from __future__ import annotations

import yaml

from review.builder.operator import Suggestion
from review.builder.suggestions import freshness_note
from review.policy.policy import NoAnswerPolicy, load_policy, parse_policy
from tests.helpers.paths import ROOT

POLICY_PATH = ROOT / "policies" / "no-answer-policy.yaml"
STALE = Suggestion("abstain", ("evidence_stale",), ("temporal_mismatch",))


def _with_rules(rules: list[dict[str, object]]) -> NoAnswerPolicy:
    data = yaml.safe_load(POLICY_PATH.read_text(encoding="utf-8"))
    data["evidence_gate"]["freshness"] = rules
    return parse_policy(yaml.safe_dump(data), "p.yaml")


def test_the_note_gives_the_limit_per_claim_kind_for_the_documents_authority() -> None:
    policy = _with_rules(
        [
            {"claim_kind": "historical", "max_age_days": None},
            {"source_category": "legal", "max_age_days": None},
            {"claim_kind": "price", "source_category": "legal", "max_age_days": 90},
        ]
    )
    legal = freshness_note(policy, "legal", STALE)
    assert legal is not None
    assert "a claim without a kind: no age limit (source category 'legal')" in legal
    assert "kind 'historical': no age limit (claim kind 'historical')" in legal
    assert "kind 'price': 90 days (claim kind 'price' and source category 'legal')" in legal
    other = freshness_note(policy, "policy", STALE)
    assert other is not None
    assert "a claim without a kind: 365 days (global max_age_days)" in other
    assert "kind 'price': 365 days (global max_age_days)" in other


def test_no_note_for_other_suggestions_or_without_an_evidence_gate() -> None:
    policy = load_policy(POLICY_PATH)
    assert (
        freshness_note(policy, "policy", Suggestion("abstain", ("conflicting_evidence",))) is None
    )
    data = yaml.safe_load(POLICY_PATH.read_text(encoding="utf-8"))
    del data["evidence_gate"]
    assert freshness_note(parse_policy(yaml.safe_dump(data), "p.yaml"), "policy", STALE) is None
