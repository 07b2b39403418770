"""Answers whose stated figures contradict a required claim (note 000, issue 15 item 3)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from review.evaluation import claimcheck, runmetrics

CLAIM = "A refund of a monthly plan charge must be requested within 14 days of the charge date."


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("within 14 days", {(Decimal(14), "day")}),
        ("a 14-day window", {(Decimal(14), "day")}),
        ("fourteen days", {(Decimal(14), "day")}),
        ("10 business days", {(Decimal(10), "business day")}),
        ("99.95% uptime", {(Decimal("99.95"), "percent")}),
        ("40 percent off", {(Decimal(40), "percent")}),
        ("up to €50 or $50 or £45", {(Decimal(50), "EUR"), (Decimal(50), "USD"),
                                     (Decimal(45), "GBP")}),
        ("50 EUR", {(Decimal(50), "EUR")}),
        ("1,000 seats", {(Decimal(1000), "seat")}),
        ("within 48 hours", {(Decimal(48), "hour")}),
        ("section 2.1 of the policy", set()),
        ("version 14daysx", set()),
    ],
)  # fmt: skip
def test_quantities(text: str, expected: set[tuple[Decimal, str]]) -> None:
    assert claimcheck.quantities(text) == expected


def test_a_leaked_neighbour_figure_contradicts() -> None:
    found = claimcheck.contradictions("You can ask within 30 days of the charge date.", [CLAIM])
    assert [(c.claimed, c.unit, c.stated) for c in found] == [(14, "day", (30,))]
    assert found[0].describe() == "the claim says 14 days, the answer says 30 days"


@pytest.mark.parametrize(
    "answer",
    [
        "Within 14 days of the charge date.",
        # the claim's own value stated: another figure of the unit does not contradict it
        "Within 14 days; the annual plan allows 30 days.",
        # another unit (business days) is another quantity
        "Within 14 days; the money reaches the card in 5 to 10 business days.",
        "Yes, ask support for a refund.",  # no figure: not checkable, not contradicted
        "",
    ],
)
def test_no_contradiction(answer: str) -> None:
    assert claimcheck.contradictions(answer, [CLAIM]) == []


def test_giving_one_of_two_claimed_figures_omits_and_does_not_contradict() -> None:
    claims = [
        "Monthly plans: within 14 days of the charge date.",
        "Annual plans: within 30 days of the start of the first annual term.",
    ]
    assert claimcheck.contradictions("Within 14 days of the charge date.", claims) == []
    got = claimcheck.contradictions("Within 21 days.", claims)
    assert [c.claimed for c in got] == [14, 30]


def test_hostile_input_is_bounded() -> None:
    text = "1" * 500_000 + " days " + "9 " * 200_000
    assert claimcheck.quantities(text) == set()  # read up to MAX_CHARS only


def test_a_contradicting_answer_is_counted_and_not_acceptable(demo_engine: Any, tax: Any) -> None:
    """On the demo the naive pipeline answers from superseded documents: its answers state
    the old figures (30 instead of 14 days, 72 instead of 48 hours, 90 instead of 60 days) and
    are not acceptable; the reference run has no such answer on a case expecting one."""
    from review.evaluation import evalruns

    runs = {r.name.split()[0]: r for r in evalruns.list_runs(demo_engine)}
    naive = evalruns.outputs_frame(demo_engine, runs["naive-v0"].id, tax)
    bad = naive[naive["contradicts_claim"]]
    assert {"CASE-003", "CASE-021", "CASE-034"} <= set(bad["key"])
    assert not bad["answer_ok"].any()
    m = runmetrics.summarize(naive)["answers_contradicting_claim"]
    assert m.k == len(bad) and m.n == int(naive["answered"].sum())
    ref = evalruns.outputs_frame(demo_engine, runs["reference-v1"].id, tax)
    assert not (ref["contradicts_claim"] & (ref["gold"] == "answer")).any()
