"""The bundled no-answer policy's freshness rules are a change of their own: file version 4,
with a change record, and the demo's sign-off chain signs that file (issue 35, item 3)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from review.demo.fixtures import demo_first_policy
from review.policy import inforce, signoff
from review.policy.policy import parse_policy

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = (ROOT / "policies" / "no-answer-policy.yaml").read_text(encoding="utf-8")


def test_the_freshness_rules_came_with_a_version_of_their_own() -> None:
    policy = parse_policy(SHIPPED, "shipped")
    assert policy.evidence_gate is not None and policy.evidence_gate.freshness
    assert policy.version == 4
    last = policy.change_record[-1]
    assert last.version == 4 and "freshness" in last.summary.lower()
    assert "historical" in last.summary and "30 days" in last.summary
    assert policy.approved_on is None  # signed in a workbench, not in the file


def test_the_demos_first_signed_version_predates_the_freshness_rules() -> None:
    first = parse_policy(demo_first_policy(SHIPPED), "demo v1")
    assert first.version == 2
    assert [e.version for e in first.change_record] == [1, 2]
    assert first.evidence_gate is not None and first.evidence_gate.freshness == []
    assert first.ranking_modes["vector"].refuse_below == 0.50


def test_the_demo_signs_the_shipped_file_and_it_is_in_force(demo_engine: Engine) -> None:
    assert signoff.verify_chain(demo_engine) == []
    pif = inforce.in_force(demo_engine)
    assert pif.version is not None and pif.version.status == "approved"
    assert pif.version.file_version == 4
    assert pif.policy.canonical_data() == parse_policy(SHIPPED, "shipped").canonical_data()
    versions = {v.number: v for v in signoff.versions(demo_engine, inforce.KIND)}
    assert versions[1].file_version == 2 and versions[2].id == pif.version.id
