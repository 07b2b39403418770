"""Freshness that fits the fact (issue 35, item 3): the evidence gate's age limit per claim
kind and source category, signed with the policy; old policies read and hash as before."""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from review.cli.main import main
from review.core.errors import InputError, PolicyFileError
from review.policy.evidence import EvidenceState, decide_evidence, parse_input
from review.policy.policy import (
    EvidenceGatePolicy,
    NoAnswerPolicy,
    canonical_text,
    load_policy,
    parse_policy,
    policy_sha256,
)
from tests.helpers.paths import ROOT

POLICY_PATH = ROOT / "policies" / "no-answer-policy.yaml"
FIXTURES = ROOT / "examples" / "freshness-fixtures.jsonl"

#: A policy signed before freshness rules existed, and the sha256 the code of that time gave
#: it (computed on the base commit): a signature over it must still verify.
OLD_POLICY = """\
version: 2
ranking_modes:
  bm25:
    scale: Keyword relevance with no upper bound.
    score_direction: higher_is_better
    inequality: strict
    min_hits_after_filter: 1
    refuse_below: 8.0
    caveat_below: 12.0
gate_order: [restricted_topic, no_hits, low_score_refuse, not_answerable, ambiguous,
  ungrounded, low_score_caveat, answer]
evidence_gate:
  min_support: 0.75
  required_coverage: 1.0
  max_age_days: 365
  superseded: stale
  max_contradictions: 0
  on_missing_signal: abstain
targets:
  min_answer_rate_answerable: 0.9
  max_false_refusal_rate: 0.1
  min_abstention_recall: 0.9
  max_unsupported_answer_rate: 0.05
costs:
  false_refusal: 1.0
  unsupported_answer: 5.0
change_record:
  - version: 1
    date: 2026-01-05
    author: paula@example.com
    summary: First version.
  - version: 2
    date: 2026-02-01
    author: paula@example.com
    summary: Evidence gate thresholds.
"""
OLD_SHA256 = "99cec8c6cdf123b53d6285c33d30f2b7df42ab34fa642094c1cdee94607ec79d"


def _data() -> dict[str, Any]:
    data = yaml.safe_load(POLICY_PATH.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _policy(rules: list[dict[str, Any]] | None, **gate: Any) -> NoAnswerPolicy:
    data = _data()
    data["evidence_gate"].update(gate)
    if rules is None:
        data["evidence_gate"].pop("freshness", None)
    else:
        data["evidence_gate"]["freshness"] = rules
    return parse_policy(yaml.safe_dump(data), "p.yaml")


def _super_bowl(kind: str | None, **passage: Any) -> dict[str, Any]:
    claim: dict[str, Any] = {"id": "c1", "text": "Where the 2021 Super Bowl was played"}
    if kind is not None:
        claim["kind"] = kind
    return {
        "id": "super-bowl-2021",
        "question": "Where was Super Bowl LV (2021) played?",
        "required_claims": [claim],
        "passages": [
            {
                "id": "p1",
                "source": "nfl-history@1",
                "text": "Super Bowl LV was played at Raymond James Stadium in Tampa, Florida.",
                "supports": ["c1"],
                "support_score": 0.93,
                "allowed": True,
                "effective_date": "2024-02-01",
                "superseded": False,
                **passage,
            }
        ],
        "contradictions": [],
        "as_of": "2026-06-01",
    }


def _decide(line: dict[str, Any], policy: NoAnswerPolicy) -> EvidenceState:
    return decide_evidence(parse_input(line), policy)


# The Super Bowl case ------------------------------------------------------------------------


def test_a_settled_historical_fact_is_not_stale_under_the_shipped_policy() -> None:
    shipped = load_policy(POLICY_PATH)
    state = _decide(_super_bowl("historical"), shipped)
    assert state.status == "answer" and state.supporting_passage_ids == ["p1"]
    assert "Raymond James Stadium" in state.answer and state.stale_evidence == {}


def test_the_same_passage_for_a_current_price_is_stale_and_names_the_rule() -> None:
    shipped = load_policy(POLICY_PATH)
    state = _decide(_super_bowl("current_price"), shipped)
    assert state.status == "abstain" and state.reason_codes == ["evidence_stale"]
    why = "p1 is older than 30 days (rule: claim kind 'current_price')"
    assert state.stale_evidence == {"c1": why}
    assert why in state.next_step and state.as_json()["stale_evidence"] == {"c1": why}
    # with a date inside the 30 days the price is current
    fresh = _decide(_super_bowl("current_price", effective_date="2026-05-20"), shipped)
    assert fresh.status == "answer"


def test_a_claim_without_a_kind_falls_back_to_the_global_rule() -> None:
    shipped = load_policy(POLICY_PATH)
    for kind in (None, "no_such_kind"):  # an unknown kind matches no rule: not an error
        state = _decide(_super_bowl(kind), shipped)
        assert state.reason_codes == ["evidence_stale"]
        assert state.stale_evidence == {
            "c1": "p1 is older than 365 days (rule: global max_age_days)"
        }


def test_workbench_decide_gives_the_readmes_freshness_fixtures() -> None:
    result = CliRunner().invoke(main, ["decide", str(FIXTURES), "--policy", str(POLICY_PATH)])
    assert result.exit_code == 0, result.output
    states = {s["id"]: s for s in map(json.loads, result.output.splitlines())}
    assert {k: (s["status"], s["stale_evidence"]) for k, s in states.items()} == {
        "historical": ("answer", {}),
        "current_price": (
            "abstain",
            {"c1": "p1 is older than 30 days (rule: claim kind 'current_price')"},
        ),
        "no_kind": ("abstain", {"c1": "p1 is older than 365 days (rule: global max_age_days)"}),
    }


# Precedence ---------------------------------------------------------------------------------

RULES: list[dict[str, Any]] = [
    {"source_category": "legal", "max_age_days": 730},
    {"claim_kind": "price", "max_age_days": 30},
    {"claim_kind": "price", "source_category": "contract", "max_age_days": 400},
    {"source_category": "archive", "max_age_days": None},
]


@pytest.mark.parametrize(
    ("kind", "category", "limit", "rule"),
    [
        ("price", "contract", 400, "claim kind 'price' and source category 'contract'"),
        ("price", "legal", 30, "claim kind 'price'"),  # a claim's kind before a source's
        ("price", None, 30, "claim kind 'price'"),
        (None, "legal", 730, "source category 'legal'"),
        ("other", "legal", 730, "source category 'legal'"),
        (None, "archive", None, "source category 'archive'"),
        (None, "contract", 365, "global max_age_days"),  # the pair rule needs the kind too
        (None, None, 365, "global max_age_days"),
    ],
)
def test_the_most_specific_rule_wins(
    kind: str | None, category: str | None, limit: int | None, rule: str
) -> None:
    gate = _policy(RULES).evidence_gate
    assert gate is not None
    got = gate.limit_for(kind, category)
    assert (got.max_age_days, got.rule) == (limit, rule)
    # the gate applies it: one day inside the limit is current, one day past it is stale
    if limit is None:
        return
    for age, status in ((limit, "answer"), (limit + 1, "abstain")):
        day = (dt.date(2026, 6, 1) - dt.timedelta(days=age)).isoformat()
        line = _super_bowl(kind, effective_date=day, category=category)
        state = _decide(line, _policy(RULES))
        assert state.status == status, (age, state.as_json())
        if status == "abstain":
            assert f"(rule: {rule})" in state.stale_evidence["c1"]


def test_one_passage_serves_two_claims_under_their_own_rules() -> None:
    line = _super_bowl("historical")
    line["required_claims"].append({"id": "c2", "text": "Ticket price", "kind": "current_price"})
    line["passages"][0]["supports"] = ["c1", "c2"]
    state = _decide(line, load_policy(POLICY_PATH))
    assert state.status == "abstain" and list(state.stale_evidence) == ["c2"]


# Fail closed ---------------------------------------------------------------------------------


def test_a_date_is_needed_only_where_the_rule_that_applies_has_a_limit() -> None:
    no_limit = _policy([{"claim_kind": "historical", "max_age_days": None}], max_age_days=None)
    undated = _super_bowl("historical", effective_date=None)
    undated["as_of"] = None
    assert _decide(undated, no_limit).status == "answer"
    # the same passage for a claim under the global limit: the dates are missing signals
    limited = _policy([{"claim_kind": "historical", "max_age_days": None}])
    state = _decide(_super_bowl(None, effective_date=None), limited)
    assert state.rule == "signal_missing" and state.status == "abstain"
    assert any(m.startswith("passages.0.effective_date") for m in state.missing_signals)
    line = _super_bowl("price")
    line["as_of"] = None
    priced = _policy([{"claim_kind": "price", "max_age_days": 30}], max_age_days=None)
    state = _decide(line, priced)
    assert state.rule == "signal_missing"
    assert any("as_of" in m and "claim kind 'price'" in m for m in state.missing_signals)


@pytest.mark.parametrize(
    ("rule", "where"),
    [
        ({"claim_kind": "price", "max_age_days": -1}, "evidence_gate.freshness.0.max_age_days"),
        ({"claim_kind": "price", "max_age_days": "30"}, "evidence_gate.freshness.0.max_age_days"),
        ({"claim_kind": "price", "max_age_days": 1.5}, "evidence_gate.freshness.0.max_age_days"),
        ({"claim_kind": "price", "max_age_days": True}, "evidence_gate.freshness.0.max_age_days"),
        ({"claim_kind": "price"}, "evidence_gate.freshness.0.max_age_days"),
        ({"claim_kind": "price", "max_age": 3}, "evidence_gate.freshness.0.max_age"),
        ({"max_age_days": 3}, "evidence_gate.freshness.0"),
        ({"claim_kind": "", "max_age_days": 3}, "evidence_gate.freshness.0.claim_kind"),
        ({"claim_kind": 7, "max_age_days": 3}, "evidence_gate.freshness.0.claim_kind"),
        ({"source_category": "a b", "max_age_days": 3}, "evidence_gate.freshness.0.source"),
    ],
)
def test_a_malformed_rule_is_refused_naming_its_field(rule: dict[str, Any], where: str) -> None:
    with pytest.raises(PolicyFileError, match=re.escape(f"p.yaml: {where}")):
        _policy([rule])


def test_two_rules_with_the_same_keys_are_refused() -> None:
    twice = [
        {"claim_kind": "price", "max_age_days": 30},
        {"claim_kind": "price", "max_age_days": 9},
    ]
    with pytest.raises(PolicyFileError, match=r"evidence_gate\.freshness\.1: .*freshness\.0"):
        _policy(twice)
    with pytest.raises(PolicyFileError, match=r"evidence_gate\.freshness"):
        data = _data()
        data["evidence_gate"]["freshness"] = {"price": 30}  # a mapping, not a list of rules
        parse_policy(yaml.safe_dump(data), "p.yaml")


def test_a_kind_or_category_of_the_input_is_checked_like_any_field() -> None:
    with pytest.raises(InputError, match=r"required_claims\.0\.kind"):
        parse_input(_super_bowl(""))
    with pytest.raises(InputError, match=r"passages\.0\.category"):
        parse_input(_super_bowl(None, category=3))


# Old policies and signatures ----------------------------------------------------------------


def test_an_old_policy_reads_and_hashes_as_before() -> None:
    assert policy_sha256(OLD_POLICY) == OLD_SHA256
    assert "freshness" not in canonical_text(OLD_POLICY)
    gate = parse_policy(OLD_POLICY).evidence_gate
    assert gate is not None and gate.freshness == []
    assert gate.limit_for("historical", "legal").rule == "global max_age_days"
    # an empty list means the same as none, so it signs the same
    empty = OLD_POLICY.replace(
        "on_missing_signal: abstain", "on_missing_signal: abstain\n  freshness: []"
    )
    assert policy_sha256(empty) == OLD_SHA256


def test_the_rules_are_part_of_what_is_signed() -> None:
    with_rules = OLD_POLICY.replace(
        "on_missing_signal: abstain",
        "on_missing_signal: abstain\n  freshness:\n    - claim_kind: historical\n"
        "      max_age_days: null",
    )
    assert policy_sha256(with_rules) != OLD_SHA256
    changed = with_rules.replace("max_age_days: null", "max_age_days: 90")
    assert policy_sha256(changed) not in (OLD_SHA256, policy_sha256(with_rules))
    assert "claim_kind: historical" in canonical_text(with_rules)


# Properties ---------------------------------------------------------------------------------

KINDS = ["historical", "price", "news", None]
CATEGORIES = ["legal", "contract", "archive", None]
AS_OF = dt.date(2026, 6, 1)
BASE = load_policy(POLICY_PATH)


@st.composite
def rule_sets(draw: st.DrawFn) -> list[dict[str, Any]]:
    keys = draw(
        st.lists(
            st.tuples(st.sampled_from(KINDS), st.sampled_from(CATEGORIES)).filter(
                lambda k: k != (None, None)
            ),
            unique=True,
            max_size=6,
        )
    )
    rules = []
    for kind, category in keys:
        rule: dict[str, Any] = {"max_age_days": draw(st.none() | st.integers(0, 800))}
        if kind is not None:
            rule["claim_kind"] = kind
        if category is not None:
            rule["source_category"] = category
        rules.append(rule)
    return rules


def _oracle(
    rules: list[dict[str, Any]], global_days: int | None, kind: str | None, cat: str | None
) -> int | None:
    """The limit that applies, from the documented order, written out rule by rule."""
    order: list[tuple[str | None, str | None]] = []
    if kind is not None:
        order += [(kind, cat), (kind, None)]  # kind and category, then kind alone
    if cat is not None:
        order.append((None, cat))  # then category alone
    by_keys = {(r.get("claim_kind"), r.get("source_category")): r for r in rules}
    for keys in order:
        if keys in by_keys:
            days: int | None = by_keys[keys]["max_age_days"]
            return days
    return global_days


@st.composite
def inputs(draw: st.DrawFn) -> dict[str, Any]:
    n_claims = draw(st.integers(1, 3))
    claims = []
    for i in range(n_claims):
        claim: dict[str, Any] = {"id": f"c{i}", "text": f"claim {i}"}
        kind = draw(st.sampled_from(KINDS))
        if kind is not None:
            claim["kind"] = kind
        claims.append(claim)
    passages = []
    for j in range(draw(st.integers(1, 4))):
        age = draw(st.none() | st.integers(-5, 1000))
        passage: dict[str, Any] = {
            "id": f"p{j}",
            "text": f"passage {j}",
            "supports": draw(st.lists(st.sampled_from([c["id"] for c in claims]), unique=True)),
            "support_score": 0.9,
            "allowed": True,
            "superseded": False,
            "effective_date": None if age is None else (AS_OF - dt.timedelta(days=age)).isoformat(),
        }
        category = draw(st.sampled_from(CATEGORIES))
        if category is not None:
            passage["category"] = category
        passages.append(passage)
    as_of = draw(st.sampled_from([AS_OF.isoformat(), None]))
    return {
        "id": "q",
        "question": "q?",
        "required_claims": claims,
        "passages": passages,
        "contradictions": [],
        "as_of": as_of,
    }


@settings(max_examples=300, deadline=None)
@given(rules=rule_sets(), global_days=st.none() | st.integers(0, 800), line=inputs())
def test_the_gate_never_answers_with_a_passage_too_old_for_its_rule(
    rules: list[dict[str, Any]], global_days: int | None, line: dict[str, Any]
) -> None:
    gate = BASE.evidence_gate
    assert gate is not None
    new_gate = EvidenceGatePolicy.model_validate(
        {**gate.model_dump(), "max_age_days": global_days, "freshness": rules}
    )
    state = _decide(line, BASE.model_copy(update={"evidence_gate": new_gate}))
    kinds = {c["id"]: c.get("kind") for c in line["required_claims"]}
    limits = {
        (p["id"], c): _oracle(rules, global_days, kinds[c], p.get("category"))
        for p in line["passages"]
        for c in p["supports"]
    }
    # fail closed: a limit that applies without both dates is a missing signal, never an answer
    undated = any(
        limits[(p["id"], c)] is not None and (p["effective_date"] is None or line["as_of"] is None)
        for p in line["passages"]
        for c in p["supports"]
    )
    if undated:
        assert state.status != "answer" and state.rule == "signal_missing", state.as_json()
        return
    if state.status != "answer":
        return
    used = [p for p in line["passages"] if p["id"] in state.supporting_passage_ids]
    for c in kinds:
        ok = []
        for p in used:
            if c not in p["supports"]:
                continue
            limit = limits[(p["id"], c)]
            if p["effective_date"] is None or line["as_of"] is None:
                ok.append(limit is None)
                continue
            age = (AS_OF - dt.date.fromisoformat(p["effective_date"])).days
            ok.append(age >= 0 and (limit is None or age <= limit))
        assert any(ok), (c, state.as_json())


def test_a_stale_passage_the_user_may_not_see_is_never_described() -> None:
    line = _super_bowl("current_price", allowed=False, id="memo-secret", source="memo@9")
    state = _decide(line, load_policy(POLICY_PATH))
    assert state.status == "abstain" and state.stale_evidence == {}
    assert "memo" not in json.dumps(state.as_json()) and "30 days" not in state.next_step
