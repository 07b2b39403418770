"""The evidence gate's agreement predicate and what a state may name (issue 30, items 1 and 2).

A passage that only refutes a supporting one is a conflict; supersession under a policy that
counts superseded versions as stale is the one precedence rule that settles a pair; and no
field of a state names, cites or quotes a passage the user may not see."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from review.policy.evidence import decide_evidence, parse_input
from review.policy.policy import NoAnswerPolicy, load_policy, parse_policy
from tests.helpers.paths import ROOT

POLICY_PATH = ROOT / "policies" / "no-answer-policy.yaml"

SUPPORT = "Monthly charges can be refunded within 14 days of the charge date."
REFUTE = "Monthly charges are not refundable."
SECRET = "Board memo: monthly refunds are stopped for every tier from October."


@pytest.fixture(scope="module")
def policy() -> NoAnswerPolicy:
    return load_policy(POLICY_PATH)


def _policy(**gate: Any) -> NoAnswerPolicy:
    data = yaml.safe_load(POLICY_PATH.read_text(encoding="utf-8"))
    data["evidence_gate"].update(gate)
    return parse_policy(yaml.safe_dump(data), "p")


def _passage(pid: str, text: str, supports: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "id": pid,
        "source": f"{pid}-source@1",
        "text": text,
        "supports": supports,
        "support_score": 0.9,
        "allowed": True,
        "effective_date": "2026-03-01",
        "superseded": False,
    } | extra


def _row(*passages: dict[str, Any], contradictions: list[list[str]] | None = None) -> Any:
    return parse_input(
        {
            "id": "q1",
            "question": "Can a monthly charge be refunded, and within how many days?",
            "required_claims": [{"id": "c1", "text": "Monthly charges are refundable in 14 days"}],
            "passages": list(passages),
            "contradictions": contradictions or [],
            "as_of": "2026-08-23",
        }
    )


def _dump(state: Any) -> str:
    return json.dumps(state.as_json(), ensure_ascii=False)


# Item 1: a refuting passage is a conflict --------------------------------------------------------


def test_a_passage_that_only_refutes_the_support_blocks_the_answer(
    policy: NoAnswerPolicy,
) -> None:
    # The example: "Monthly charges are not refundable" supports no claim, but is
    # listed as contradicting the passage the answer rests on.
    without = _row(_passage("p1", SUPPORT, ["c1"]), _passage("p2", REFUTE, []))
    assert decide_evidence(without, policy).status == "answer"
    state = decide_evidence(
        _row(
            _passage("p1", SUPPORT, ["c1"]),
            _passage("p2", REFUTE, []),
            contradictions=[["p1", "p2"]],
        ),
        policy,
    )
    assert state.status == "abstain" and state.answer == ""
    assert state.reason_codes == ["conflicting_evidence"] and state.rule == "agreement"
    assert state.predicates["agreement"] == "fail"
    assert "(p1/p2)" in state.next_step
    # the order of the pair does not matter
    flipped = _row(
        _passage("p1", SUPPORT, ["c1"]), _passage("p2", REFUTE, []), contradictions=[["p2", "p1"]]
    )
    assert decide_evidence(flipped, policy).reason_codes == ["conflicting_evidence"]


def test_a_refuting_passage_the_user_may_not_see_still_blocks(policy: NoAnswerPolicy) -> None:
    row = _row(
        _passage("p1", SUPPORT, ["c1"]),
        _passage("memo-7", SECRET, [], allowed=False),
        contradictions=[["p1", "memo-7"]],
    )
    state = decide_evidence(row, policy)
    assert state.status == "abstain" and state.reason_codes == ["conflicting_evidence"]


def test_supersession_settles_a_pair_only_when_the_policy_counts_it_stale(
    policy: NoAnswerPolicy,
) -> None:
    old_refutation = _passage("p2", REFUTE, [], superseded=True, effective_date="2024-01-01")
    row = _row(_passage("p1", SUPPORT, ["c1"]), old_refutation, contradictions=[["p1", "p2"]])
    # superseded versions are stale: the version still in force (p1) controls
    assert policy.evidence_gate is not None and policy.evidence_gate.superseded == "stale"
    assert decide_evidence(row, policy).status == "answer"
    # a policy that keeps superseded versions current names no precedence rule: a conflict
    keeps = _policy(superseded="current", max_age_days=None)
    state = decide_evidence(row, keeps)
    assert state.status == "abstain" and state.reason_codes == ["conflicting_evidence"]
    # the supporting side superseded by a current refutation: the refutation controls, and
    # the superseded support is no current evidence
    row = _row(
        _passage("p1", SUPPORT, ["c1"], superseded=True),
        _passage("p2", REFUTE, []),
        contradictions=[["p1", "p2"]],
    )
    state = decide_evidence(row, policy)
    assert state.status == "abstain" and state.reason_codes == ["evidence_stale"]


def test_a_pair_without_an_answer_bearing_side_does_not_concern_the_question(
    policy: NoAnswerPolicy,
) -> None:
    row = _row(
        _passage("p1", SUPPORT, ["c1"]),
        _passage("p2", "Invoices are sent on the first of the month.", []),
        _passage("p3", "Invoices are sent on the fifth of the month.", []),
        contradictions=[["p2", "p3"]],
    )
    state = decide_evidence(row, policy)
    assert state.status == "answer" and state.predicates["agreement"] == "pass"


def test_a_refuting_passage_without_its_superseded_flag_fails_closed(
    policy: NoAnswerPolicy,
) -> None:
    refutation = _passage("p2", REFUTE, [])
    del refutation["superseded"]
    row = _row(_passage("p1", SUPPORT, ["c1"]), refutation, contradictions=[["p1", "p2"]])
    # without the flag the gate cannot tell whether supersession settles the pair
    state = decide_evidence(row, policy)
    assert state.status == "abstain" and state.reason_codes == ["signal_missing"]
    assert [m.split(":")[0] for m in state.missing_signals] == ["passages.1.superseded"]
    # a policy that does not count superseded versions as stale does not need it: a conflict
    keeps = _policy(superseded="current", max_age_days=None)
    assert decide_evidence(row, keeps).reason_codes == ["conflicting_evidence"]
    # the same passage outside any contradiction is not evidence, and needs no flag
    alone = _row(_passage("p1", SUPPORT, ["c1"]), refutation)
    assert decide_evidence(alone, policy).status == "answer"


def test_a_refuting_passage_of_unknown_access_blocks_and_is_not_named(
    policy: NoAnswerPolicy,
) -> None:
    refutation = _passage("p2", REFUTE, [])
    del refutation["allowed"]
    row = _row(_passage("p1", SUPPORT, ["c1"]), refutation, contradictions=[["p1", "p2"]])
    state = decide_evidence(row, policy)
    assert state.status == "abstain" and state.reason_codes == ["conflicting_evidence"]
    assert "p2" not in _dump(state) and "(p1)" in state.next_step


def test_the_same_pair_listed_twice_is_one_contradiction() -> None:
    tolerant = _policy(max_contradictions=1)
    row = _row(
        _passage("p1", SUPPORT, ["c1"]),
        _passage("p2", REFUTE, []),
        contradictions=[["p1", "p2"], ["p2", "p1"]],
    )
    assert decide_evidence(row, tolerant).status == "answer"
    row = _row(
        _passage("p1", SUPPORT, ["c1"]),
        _passage("p2", REFUTE, []),
        _passage("p3", "Monthly charges are refunded within 30 days.", []),
        contradictions=[["p1", "p2"], ["p3", "p1"]],
    )
    assert decide_evidence(row, tolerant).reason_codes == ["conflicting_evidence"]


# Item 2: a state never names what the user may not see --------------------------------------


def test_the_next_step_names_only_the_sources_the_user_may_see(policy: NoAnswerPolicy) -> None:
    # The example: a disallowed passage in a contradiction was named in next_step.
    row = _row(
        _passage("p1", SUPPORT, ["c1"]),
        _passage("p2", SECRET, ["c1"], allowed=False),
        contradictions=[["p1", "p2"]],
    )
    state = decide_evidence(row, policy)
    assert state.status == "abstain" and state.reason_codes == ["conflicting_evidence"]
    assert "(p1)" in state.next_step and "do not settle it" in state.next_step
    # nothing tells the user that a source they may not see exists
    assert "cannot see disagrees" not in state.next_step
    text = _dump(state)
    assert "p2" not in text and "board" not in text.lower() and "p2-source" not in text


def test_a_conflict_between_sources_the_user_may_not_see_names_none(
    policy: NoAnswerPolicy,
) -> None:
    row = _row(
        _passage("p1", SUPPORT, ["c1"]),
        _passage("hid-a", SUPPORT, ["c1"], allowed=False),
        _passage("hid-b", SECRET, [], allowed=False),
        contradictions=[["hid-a", "hid-b"]],
    )
    state = decide_evidence(row, policy)
    assert state.reason_codes == ["conflicting_evidence"]
    assert "hid-" not in _dump(state) and "Board" not in _dump(state)
    assert "do not agree" in state.next_step


def test_a_draft_that_names_or_quotes_a_hidden_source_is_not_released(
    policy: NoAnswerPolicy,
) -> None:
    base = {
        "id": "q1",
        "question": "Can a monthly charge be refunded, and within how many days?",
        "required_claims": [{"id": "c1", "text": "Monthly charges are refundable in 14 days"}],
        "passages": [
            _passage("p1", SUPPORT, ["c1"]),
            _passage("memo-7", SECRET, [], allowed=False, source="board-memo@1"),
        ],
        "as_of": "2026-08-23",
    }
    good = copy.deepcopy(base) | {"answer": "Yes, within 14 days of the charge date [p1]."}
    state = decide_evidence(parse_input(good), policy)
    assert state.status == "answer" and state.answer == good["answer"]
    drafts = [
        f"Yes [p1]. Note: {SECRET.lower()}",  # quotes the hidden text
        "Yes, within 14 days [p1][memo-7].",  # cites the hidden passage
        "Yes, within 14 days [p1], though board-memo@1 says otherwise.",  # names its source
    ]
    for draft in drafts:
        state = decide_evidence(parse_input(copy.deepcopy(base) | {"answer": draft}), policy)
        assert state.status == "abstain", draft
        assert state.reason_codes == ["source_not_allowed"] and state.rule == "source_policy"
        assert state.answer == "" and state.supporting_passage_ids == ["p1"]
        text = _dump(state)
        assert "memo-7" not in text and "board" not in text.lower()
    # a string a source the user may see also holds is no secret
    shared: dict[str, Any] = copy.deepcopy(base)
    shared["passages"][1]["text"] = SUPPORT
    shared["answer"] = SUPPORT + " [p1]"
    assert decide_evidence(parse_input(shared), policy).status == "answer"


def test_missing_signals_locate_a_hidden_passage_by_position_only(
    policy: NoAnswerPolicy,
) -> None:
    hidden = _passage("memo-7", SECRET, ["c1"], allowed=False, support_score=float("nan"))
    row = _row(_passage("p1", SUPPORT, ["c1"]), hidden, contradictions=[["p1", "memo-7"]])
    state = decide_evidence(row, policy)
    assert state.reason_codes == ["signal_missing"]
    assert state.missing_signals == ["passages.1.support_score: NaN"]
    assert "memo-7" not in _dump(state) and "Board" not in _dump(state)
