"""What the evidence gate decides on a case: the input built from the case, completed by a
reviewer, decided by the same code as `workbench decide` with the policy in force."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from sqlalchemy import Engine

from review.core.clearance import REDACTED
from review.core.errors import InputError
from review.policy import inforce
from review.policy.evidence import EvidenceInput, decide_evidence, parse_input
from review.thresholds import casegate
from tests.helpers.actors import make_actor

PO = make_actor("product_owner")
CLEARED = make_actor("compliance", clearance=True)


def _rows(inp: EvidenceInput, **scores: float) -> list[dict[str, object]]:
    rows = casegate.passage_rows(inp)
    for r in rows:
        if r["id"] in scores:
            r["support_score"] = scores[str(r["id"])]
    return rows


def test_a_case_becomes_the_gate_input_it_describes(demo_engine: Engine) -> None:
    inp = casegate.case_input(demo_engine, PO, "CASE-001")
    assert inp.id == "CASE-001" and [c.id for c in inp.required_claims] == ["c1"]
    by_id = {p.id: p for p in inp.passages}
    decisive, distractor = by_id["POL-REFUND-MONTHLY@2"], by_id["POL-REFUND-ANNUAL@1"]
    assert decisive.supports == ["c1"] and distractor.supports == []
    assert decisive.allowed is True and decisive.superseded is False
    assert decisive.effective_date == dt.date(2025, 3, 1)
    assert decisive.support_score is None  # the reviewer's to give: the gate fails closed
    assert "14 days" in decisive.text
    pif = inforce.in_force(demo_engine)
    unscored = casegate.decide_case(inp, pif.policy)
    assert unscored.status != "answer" and unscored.rule == "signal_missing"
    assert any("support_score" in m for m in unscored.missing_signals)


def test_completed_input_decides_like_workbench_decide(demo_engine: Engine) -> None:
    pif = inforce.in_force(demo_engine)
    inp = casegate.case_input(demo_engine, PO, "CASE-001")
    rows = _rows(inp, **{"POL-REFUND-MONTHLY@2": 0.9, "POL-REFUND-ANNUAL@1": 0.2})
    done = casegate.input_from_rows(inp, rows, as_of=dt.date(2025, 6, 1))
    state = casegate.decide_case(done, pif.policy)
    assert state.status == "answer" and state.supporting_passage_ids == ["POL-REFUND-MONTHLY@2"]
    # the same line through the parser of `workbench decide` gives the same state
    again = decide_evidence(parse_input(done.model_dump(mode="json")), pif.policy)
    assert again.as_json() == state.as_json()
    # a year and a half later the passage is older than max_age_days: stale
    late = casegate.input_from_rows(inp, rows, as_of=dt.date(2026, 12, 1))
    assert "evidence_stale" in casegate.decide_case(late, pif.policy).reason_codes
    # weak support, or a contradiction, and the gate abstains with every failed predicate
    weak = casegate.input_from_rows(
        inp, _rows(inp, **{"POL-REFUND-MONTHLY@2": 0.3}), as_of=dt.date(2025, 6, 1)
    )
    assert "support_below_threshold" in casegate.decide_case(weak, pif.policy).reason_codes
    both = _rows(inp, **{"POL-REFUND-MONTHLY@2": 0.9, "POL-REFUND-ANNUAL@1": 0.9})
    both[1]["supports"] = "c1"
    split = casegate.input_from_rows(
        inp,
        both,
        casegate.parse_pairs("POL-REFUND-MONTHLY@2 | POL-REFUND-ANNUAL@1"),
        as_of=dt.date(2025, 6, 1),
    )
    conflicted = casegate.decide_case(split, pif.policy)
    assert conflicted.status != "answer"
    assert "conflicting_evidence" in conflicted.reason_codes
    assert {r["predicate"] for r in casegate.state_rows(conflicted)} == set(conflicted.predicates)


def test_a_forbidden_document_is_not_allowed_and_restricted_text_stays_hidden(
    demo_engine: Engine,
) -> None:
    pif = inforce.in_force(demo_engine)
    inp = casegate.case_input(demo_engine, PO, "CASE-045")
    memo = next(p for p in inp.passages if p.id.startswith("MEMO-PRICING-2026"))
    assert memo.allowed is False
    assert memo.text == REDACTED and memo.source == REDACTED
    # the case's own text quotes the memo: its question and claims are hidden too
    assert inp.question == REDACTED and {c.text for c in inp.required_claims} == {REDACTED}
    cleared = casegate.case_input(demo_engine, CLEARED, "CASE-045")
    memo_c = next(p for p in cleared.passages if p.id.startswith("MEMO-PRICING-2026"))
    assert memo_c.text != REDACTED and memo_c.source != REDACTED
    assert cleared.question != REDACTED and REDACTED not in {
        c.text for c in cleared.required_claims
    }
    rows = _rows(cleared, **{memo_c.id: 0.95})
    state = casegate.decide_case(
        casegate.input_from_rows(cleared, rows, as_of=dt.date(2025, 9, 1)), pif.policy
    )
    assert state.status != "answer" and "source_not_allowed" in state.reason_codes
    assert memo_c.id not in state.supporting_passage_ids and memo_c.text not in state.answer


def test_bad_input_is_named(demo_engine: Engine) -> None:
    with pytest.raises(InputError, match="no case with key 'NOPE'"):
        casegate.case_input(demo_engine, PO, " NOPE ")
    with pytest.raises(InputError, match="write two passage ids"):
        casegate.parse_pairs("A | B; C")
    inp = casegate.case_input(demo_engine, PO, "CASE-001")
    # a score outside 0..1 is a signal the gate did not get: it fails closed, never answers
    rows = _rows(inp, **{"POL-REFUND-MONTHLY@2": 1.5, "POL-REFUND-ANNUAL@1": 0.1})
    out = casegate.decide_case(
        casegate.input_from_rows(inp, rows, as_of=dt.date(2025, 6, 1)),
        inforce.in_force(demo_engine).policy,
    )
    assert out.status != "answer" and out.rule == "signal_missing"
    rows = _rows(inp)
    rows[0]["supports"] = "c9"
    with pytest.raises(InputError, match="c9"):
        casegate.input_from_rows(inp, rows)


def test_a_restricted_document_that_contradicts_blocks_without_being_named(
    demo_engine: Engine,
) -> None:
    pif = inforce.in_force(demo_engine)
    inp = casegate.case_input(demo_engine, PO, "CASE-045")
    memo = next(p for p in inp.passages if p.id.startswith("MEMO-PRICING-2026"))
    plans = next(p for p in inp.passages if p.id.startswith("PROD-PLANS"))
    assert memo.allowed is False and plans.allowed is True
    # the reviewer says the public plans page supports the claim and the memo contradicts it
    rows = _rows(inp, **{memo.id: 0.95, plans.id: 0.9})
    for r in rows:
        r["supports"] = "c1" if r["id"] == plans.id else ""
    for memo_supports in ("", "c1"):  # the memo refutes only, or states a rival value
        rows[[r["id"] for r in rows].index(memo.id)]["supports"] = memo_supports
        done = casegate.input_from_rows(
            inp, rows, casegate.parse_pairs(f"{plans.id} | {memo.id}"), as_of=dt.date(2025, 9, 1)
        )
        state = casegate.decide_case(done, pif.policy)
        assert state.status == "abstain" and state.reason_codes == ["conflicting_evidence"]
        assert f"({plans.id})" in state.next_step
        assert "MEMO" not in json.dumps(state.as_json()) and REDACTED not in state.next_step


def test_a_claim_kind_picks_its_freshness_rule_and_the_stale_reason_names_it(
    demo_engine: Engine,
) -> None:
    """Issue 35, item 3: the reviewer gives a claim its kind; a settled fact is not stale."""
    pif = inforce.in_force(demo_engine)
    gate = pif.policy.evidence_gate
    assert gate is not None and gate.limit_for("historical", None).max_age_days is None
    inp = casegate.case_input(demo_engine, PO, "CASE-001")
    decisive = next(p for p in inp.passages if p.id == "POL-REFUND-MONTHLY@2")
    assert decisive.category == "policy"  # the document's authority
    assert [r["kind"] for r in casegate.claim_rows(inp)] == [None]
    assert casegate.claim_kinds(pif.policy) == ["current_price", "historical"]
    assert casegate.freshness_summary(pif.policy).endswith(
        "claim kind 'historical': no age limit; claim kind 'current_price': 30 days; "
        "otherwise (global max_age_days): 365 days."
    )
    rows = _rows(inp, **{"POL-REFUND-MONTHLY@2": 0.9, "POL-REFUND-ANNUAL@1": 0.2})
    late = dt.date(2026, 12, 1)  # the passage is more than 365 days old by then
    plain = casegate.decide_case(casegate.input_from_rows(inp, rows, as_of=late), pif.policy)
    assert plain.reason_codes == ["evidence_stale"]
    assert casegate.freshness_rows(inp, plain) == [
        {
            "claim": "c1",
            "kind": "(none)",
            "why not current": "POL-REFUND-MONTHLY@2 is older than 365 days "
            "(rule: global max_age_days)",
        }
    ]
    settled = casegate.input_from_rows(
        inp, rows, as_of=late, claims=[{"id": "c1", "text": "", "kind": " historical "}]
    )
    assert settled.required_claims[0].kind == "historical"
    assert casegate.decide_case(settled, pif.policy).status == "answer"
    price = casegate.input_from_rows(
        inp, rows, as_of=dt.date(2025, 6, 1), claims=[{"id": "c1", "kind": "current_price"}]
    )
    stale = casegate.decide_case(price, pif.policy)
    assert stale.status == "abstain"
    assert casegate.freshness_rows(price, stale)[0]["kind"] == "current_price"
    assert "(rule: claim kind 'current_price')" in stale.next_step
    # an emptied kind or category cell is "not given"
    blank = casegate.input_from_rows(
        inp,
        [{**r, "category": ""} for r in rows],
        as_of=late,
        claims=[{"id": "c1", "kind": float("nan")}],
    )
    assert blank.required_claims[0].kind is None and blank.passages[0].category is None
    # the line downloaded for `workbench decide` carries the kind and decides the same
    again = decide_evidence(parse_input(json.loads(json.dumps(settled.model_dump(mode="json")))),
                            pif.policy)  # fmt: skip
    assert again.status == "answer"
