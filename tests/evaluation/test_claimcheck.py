"""Answers whose stated figures contradict a required claim (note 000, issue 15 item 3;
issue 30 item 6: figures read the way people write them, and a correct answer is never
counted as contradicting)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from review.evaluation import claimcheck, runmetrics
from tests.evaluation.figure_answers import ALL, CONTRADICTING, CORRECT, FigureAnswer
from tests.helpers import docs

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
        # issue 30 item 6: as people write them
        ("30,00 €", {(Decimal(30), "EUR")}),
        ("1.234,56 EUR", {(Decimal("1234.56"), "EUR")}),
        ("€1,234.56", {(Decimal("1234.56"), "EUR")}),
        ("1 200 EUR", {(Decimal(1200), "EUR")}),
        ("USD 12", {(Decimal(12), "USD")}),
        ("US$12 and GBP 45", {(Decimal(12), "USD"), (Decimal(45), "GBP")}),
        ("12 USD", {(Decimal(12), "USD")}),
        ("99,95 %", {(Decimal("99.95"), "percent")}),
        ("within the next five days", {(Decimal(5), "day")}),
        ("forty-five days", {(Decimal(45), "day")}),
        ("two hundred and fifty seats", {(Decimal(250), "seat")}),
        ("one thousand seats", {(Decimal(1000), "seat")}),
        ("3-5 days", {(Decimal(3), "day"), (Decimal(5), "day")}),
        ("between 10 and 20 days", {(Decimal(10), "day"), (Decimal(20), "day")}),
        ("14 or 30 days", {(Decimal(14), "day"), (Decimal(30), "day")}),
        ("two weeks", {(Decimal(14), "day")}),
        ("within a fortnight", {(Decimal(14), "day")}),
        ("for a year", {(Decimal(12), "month")}),
        ("48h", {(Decimal(48), "hour")}),
        ("on 1 April 2025 and 30 days later", {(Decimal(30), "day")}),
        ("Sunday 02:00-06:00, 24/7 chat, clause 2.1.3", set()),
    ],
)  # fmt: skip
def test_quantities(text: str, expected: set[tuple[Decimal, str]]) -> None:
    assert claimcheck.quantities(text) == expected


def test_a_leaked_neighbour_figure_contradicts() -> None:
    found = claimcheck.contradictions("You can ask within 30 days of the charge date.", [CLAIM])
    assert [(c.claimed, c.unit, c.stated) for c in found] == [(Decimal(14), "day", (Decimal(30),))]
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


def test_countdowns_elapsed_and_negated_figures_are_told_apart() -> None:
    roles = {
        "you still have 3 days": "countdown",
        "3 days left": "countdown",
        "within the next five days": "countdown",
        "the window closes in 2 days": "countdown",
        "23 days ago": "elapsed",
        "it has been 10 days": "elapsed",
        "ten days have already passed": "elapsed",
        "3 more days": "increment",
        "not 30 days": "negated",
        "not limited to 14 days": "negated",
        "within 30 days": "stated",
        "not more than 30 days": "stated",  # a bound, not a denial
    }
    for text, role in roles.items():
        assert [f.role for f in claimcheck.figures(text)] == [role], text


# --- issue 30 item 6: each example of the issue -------------------------------------------


@pytest.mark.parametrize(
    ("answer", "claim"),
    [
        ("You were charged 11 days ago, so you still have 3 days.", CLAIM),
        ("You can still export everything within the next five days.",
         "Customers can export their content for 45 days after the subscription ends."),
        ("Pro rata: 3 months used, 9 months refunded.",
         "An annual subscription runs for 12 months; unused months are refunded pro rata."),
        ("The Starter plan is 30,00 € a month.", "The Starter plan costs 30 EUR per month."),
        ("The Team plan costs USD 12 per user per month.",
         "The Team plan costs 12 USD per user per month."),
    ],
)  # fmt: skip
def test_the_issue_s_correct_answers_do_not_contradict(answer: str, claim: str) -> None:
    assert claimcheck.contradictions(answer, [claim]) == []


def test_a_decimal_comma_is_read_as_a_decimal_comma() -> None:
    """30,00 € was read as 0 EUR: a correct price contradicted, a wrong one passed."""
    claim = "The Starter plan costs 30,00 € per month."
    assert claimcheck.contradictions("It is €30 a month.", [claim]) == []
    found = claimcheck.contradictions("It is 35,00 € a month.", [claim])
    assert found[0].describe() == "the claim says 30 EUR, the answer says 35 EUR"


def test_an_amount_after_its_currency_code_is_read() -> None:
    """ "USD 12" was not a figure, so "USD 15" against it passed unseen."""
    claim = "The Team plan costs USD 12 per user per month."
    found = claimcheck.contradictions("The Team plan costs USD 15 per user per month.", [claim])
    assert found[0].describe() == "the claim says 12 USD, the answer says 15 USD"
    assert claimcheck.contradicts("It is $15 per user.", [claim])
    assert not claimcheck.contradicts("It is US$12 per user.", [claim])


def test_genuine_contradictions_are_still_caught() -> None:
    assert claimcheck.contradicts("Refunds within 30 days.", [CLAIM])
    assert claimcheck.contradicts("You have four weeks.", [CLAIM])  # 28 days
    assert claimcheck.contradicts("The window is 30 days, so you still have 19 days.", [CLAIM])
    # a sum that does not add up is no pro-rata split
    term = "An annual subscription runs for 12 months."
    assert claimcheck.contradicts("3 months used, 10 months refunded.", [term])
    # a range that does not hold the claimed value
    assert claimcheck.contradicts("Requests are accepted for 20-30 days.", [CLAIM])
    got = claimcheck.contradictions(
        "Refunds reach the card in 2-3 business days.",
        ["Approved refunds reach the card within 5 to 10 business days."],
    )
    assert (
        got[0].describe() == "the claim says 5-10 business days, the answer says 2-3 business days"
    )


# --- issue 30 item 6: precision and recall on written answers -----------------------------


def _flagged(a: FigureAnswer) -> bool:
    return claimcheck.contradicts(a.answer, list(a.claims))


def test_the_written_answers_cover_what_the_issue_names() -> None:
    assert len(ALL) >= 100 and len(CORRECT) >= 50 and len(CONTRADICTING) >= 40
    kinds = {a.kind for a in CORRECT}
    for kind in (
        "countdown",
        "elapsed",
        "range",
        "sum",
        "decimal comma",
        "code before",
        "symbol before",
        "number words",
        "thousands point",
        "thousands comma",
    ):
        assert kind in kinds, kind  # fmt: skip


def test_precision_and_recall_of_the_contradiction_flag(capsys: pytest.CaptureFixture[str]) -> None:
    """Precision must be 1: no correct answer counted as contradicting (an answer flagged
    here is scored -1 and lowers the supported-answer rate). Recall has a floor of 0.9: the
    misses the module accepts by design (marked ``miss``: units that do not convert exactly,
    multipliers in words, values inside a claimed range) are 4 of 59, and the check is a
    lower bound, so the floor leaves room for such kinds, not for others: any miss not
    marked is a regression, whatever the ratio.
    On the written answers the check before issue 30 had precision 42/77 (0.55) and recall
    42/59 (0.71)."""
    flagged = [a for a in ALL if _flagged(a)]
    tp = sum(a.contradicts for a in flagged)
    false_flags = [a.answer for a in flagged if not a.contradicts]
    missed = [a for a in CONTRADICTING if not _flagged(a)]
    precision = tp / len(flagged)
    recall = tp / len(CONTRADICTING)
    with capsys.disabled():
        print(
            f"\nfigure check on {len(ALL)} written answers: precision {tp}/{len(flagged)} = "
            f"{precision:.3f}, recall {tp}/{len(CONTRADICTING)} = {recall:.3f}"
        )
    readme = docs.flat("metrics")
    assert f"On {len(ALL)} answers written for the test" in readme
    assert f"{tp} of {len(CONTRADICTING)} contradictions are found" in readme
    assert false_flags == []
    assert precision == 1.0
    assert recall >= 0.9
    assert [a.answer for a in missed] == [a.answer for a in CONTRADICTING if a.miss]


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


def test_figures_are_capped() -> None:
    text = " ".join(f"{i} days" for i in range(5_000))
    found = claimcheck.figures(text)
    assert 0 < len(found) <= claimcheck.MAX_FIGURES
    assert all(f.end <= claimcheck.MAX_CHARS for f in found)
    assert isinstance(claimcheck.contradicts(text, [CLAIM, text]), bool)


_PIECES = st.sampled_from(
    ["1", "14", "30,00", "1.234,56", "1,000", "1 000", "99.95", "2.1.3", "five", "forty-five",
     "a", "an", "hundred", "thousand", "dozen", "and", "or", "to", "-", "–", "/", " ", ",", ".",
     "€", "$", "£", "USD", "EUR", "US$", "%", "days", "day", "weeks", "a fortnight", "months",
     "year", "hours", "h", "business days", "seats", "GB", "per cent", "still have", "left",
     "next", "ago", "not", "between", "more", "within", "\n", "'", ":"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_PIECES, st.text(max_size=8)), max_size=40), st.text(max_size=60))
def test_the_parser_never_raises_and_is_bounded(pieces: list[str], claim: str) -> None:
    text = " ".join(pieces)
    found = claimcheck.figures(text)
    assert len(found) <= claimcheck.MAX_FIGURES
    for f in found:
        assert 0 <= f.start < f.end <= min(len(text), claimcheck.MAX_CHARS)
        assert f.readings and all(lo <= hi for lo, hi in f.readings)
    assert isinstance(claimcheck.contradicts(text, [claim, text]), bool)
    # an answer never contradicts a claim that is itself
    assert claimcheck.contradictions(text, [text]) == []
