"""Claim segmentation of realistic RAG answers, and claim-by-claim citation checks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from review.audits.claims import (
    VERDICTS,
    Claim,
    citation_validity,
    claims_with_citations,
    extract_citations,
    split_claims,
)
from review.core.errors import InputError


def texts(answer: str) -> list[str]:
    return [c.text for c in split_claims(answer)]


REFUND_ANSWER = """\
Monthly plans can be refunded within 14 days of purchase [POL-REFUND]. Annual plans are \
not refundable after the first 30 days, e.g. the Pro annual tier [POL-REFUND, TERMS-4]. \
Refunds are paid to the original payment method within 5-7 business days.[2]

Exceptions:
- Customers in the U.S. may request a prorated refund under Sec. 4.2 of the terms. [TERMS-4]
- Accounts suspended for abuse (i.e. a breach of No. 7 of the policy) get no refund.
"""


def test_realistic_answer_is_cut_into_its_claims() -> None:
    assert texts(REFUND_ANSWER) == [
        "Monthly plans can be refunded within 14 days of purchase [POL-REFUND].",
        "Annual plans are not refundable after the first 30 days, e.g. the Pro annual tier "
        "[POL-REFUND, TERMS-4].",
        "Refunds are paid to the original payment method within 5-7 business days.[2]",
        "Exceptions:",
        "Customers in the U.S. may request a prorated refund under Sec. 4.2 of the terms. "
        "[TERMS-4]",
        "Accounts suspended for abuse (i.e. a breach of No. 7 of the policy) get no refund.",
    ]


def test_spans_point_into_the_original_answer() -> None:
    for claim in split_claims(REFUND_ANSWER):
        assert REFUND_ANSWER[claim.start : claim.end] == claim.text


@pytest.mark.parametrize(
    "sentence",
    [
        "Use a supported format, e.g. CSV or JSON, for the export.",
        "The limit applies per workspace, i.e. All members share it.",
        "Dr. Alvarez signed the data processing addendum.",
        "The service is hosted in the U.S. and the EU.",
        "See clause No. 12 for the termination rules.",
        "Availability is 99.9 % for the Business plan.",
        "Version 2.1.3 introduced single sign-on for all tiers.",
        "The fee rose from $4.50 to $5.00 per seat.",
        "Pricing differs for Brightwave vs. Acme contracts.",
        "Backups run at 3 a.m. UTC every day.",
        "The Berlin office (Mr. Koch) handles EU requests.",
        "The rule changed on Jan. 5 this year.",
        "The retention period is 30 days... unless legal hold applies.",
    ],
)
def test_abbreviations_decimals_and_versions_do_not_cut_a_sentence(sentence: str) -> None:
    assert texts(sentence) == [sentence]
    two = sentence + " A second claim follows here."
    assert texts(two) == [sentence, "A second claim follows here."]


def test_sentence_ends_are_still_found() -> None:
    answer = (
        "Is the SLA credit automatic? No. You must file a ticket within 30 days! "
        'The policy says "credits expire." Ask your account manager. It costs $5. 30 seats '
        "are included. Exports include CSV, JSON, etc. The archive keeps 12 months."
    )
    assert texts(answer) == [
        "Is the SLA credit automatic?",
        "No.",
        "You must file a ticket within 30 days!",
        'The policy says "credits expire."',
        "Ask your account manager.",
        "It costs $5.",
        "30 seats are included.",
        "Exports include CSV, JSON, etc.",
        "The archive keeps 12 months.",
    ]


def test_list_bullets_and_numbering_are_not_claims_themselves() -> None:
    answer = (
        "To cancel:\n"
        "1. Open Billing.\n"
        "2) Choose Cancel plan.\n"
        "(3) Confirm by e-mail.\n"
        "* Refunds follow the policy.\n"
        "• Data stays for 30 days.\n"
        "a) Exports stay available.\n"
    )
    claims = split_claims(answer)
    assert [c.text for c in claims] == [
        "To cancel:",
        "Open Billing.",
        "Choose Cancel plan.",
        "Confirm by e-mail.",
        "Refunds follow the policy.",
        "Data stays for 30 days.",
        "Exports stay available.",
    ]
    assert all(answer[c.start : c.end] == c.text for c in claims)


def test_wrapped_lines_headings_tables_and_code_are_handled() -> None:
    answer = (
        "## Data retention\r\n"
        "\r\n"
        "Logs are kept for 90 days and\r\n"
        "then deleted.\r\n"
        "\r\n"
        "| Plan | Retention |\r\n"
        "|------|-----------|\r\n"
        "| Pro  | 90 days   |\r\n"
        "\r\n"
        "```\r\n"
        "retention_days = 90. # not prose\r\n"
        "```\r\n"
        "---\r\n"
    )
    claims = split_claims(answer)
    assert [c.text for c in claims] == [
        "Logs are kept for 90 days and\r\nthen deleted.",
        "| Plan | Retention |",
        "| Pro  | 90 days   |",
    ]
    assert all(answer[c.start : c.end] == c.text for c in claims)


def test_empty_and_punctuation_only_text_has_no_claims() -> None:
    assert split_claims("") == []
    assert split_claims("  \n\n ... \n- \n***") == []


def test_non_text_is_refused() -> None:
    with pytest.raises(InputError, match="must be a string"):
        split_claims(None)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(),
        st.lists(
            st.sampled_from(
                [
                    "Refund",
                    " ",
                    "\n",
                    "\r\n",
                    ".",
                    "?",
                    "!",
                    "…",
                    "e.g.",
                    "U.S.",
                    "No.",
                    "7",
                    "2.1",
                    "- ",
                    "1. ",
                    "## ",
                    "```",
                    "|",
                    "[2]",
                    '"',
                    ")",
                    "\t",
                    "a",
                    "Z",
                ]
            )
        ).map("".join),
    )
)
def test_claims_are_exact_ordered_non_empty_spans_of_any_text(answer: str) -> None:
    claims = split_claims(answer)
    last_end = 0
    for claim in claims:
        assert answer[claim.start : claim.end] == claim.text
        assert claim.start >= last_end and claim.end > claim.start
        assert claim.text == claim.text.strip()
        assert any(ch.isalnum() for ch in claim.text)
        last_end = claim.end


SENTENCES = [
    "Monthly plans renew on the 1st.",
    "Annual plans renew on the signing date.",
    "Refunds need a ticket.",
    "Is the Pro tier eligible?",
    "The EU region stores data in Frankfurt!",
    "Version 3.2 adds audit logs.",
]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(SENTENCES), st.sampled_from([" ", "  ", "\n", "\n\n", "\n- "])),
        min_size=1,
        max_size=8,
    )
)
def test_known_sentences_come_back_one_claim_each(parts: list[tuple[str, str]]) -> None:
    answer = "".join(sentence + sep for sentence, sep in parts)
    assert texts(answer) == [sentence for sentence, _ in parts]


# --- citations -------------------------------------------------------------------------------


def test_citation_markers_are_read_and_links_ignored() -> None:
    assert extract_citations("Refunds take 14 days [2][5].") == ["2", "5"]
    assert extract_citations("See [POL-REFUND, TERMS-4] and [^7].") == [
        "POL-REFUND",
        "TERMS-4",
        "7",
    ]
    assert extract_citations("Read [the guide](https://example.com/guide).") == []
    assert extract_citations("No citation here.") == []
    pairs = claims_with_citations(REFUND_ANSWER)
    assert [ids for _, ids in pairs] == [
        ["POL-REFUND"],
        ["POL-REFUND", "TERMS-4"],
        ["2"],
        [],
        ["TERMS-4"],
        [],
    ]
    assert isinstance(pairs[0][0], Claim)


CONTEXT = ["POL-REFUND", "TERMS-4", "2"]


def test_answer_passes_only_when_every_claim_is_supported_by_cited_context() -> None:
    pairs = claims_with_citations(REFUND_ANSWER)
    verdicts = ["supported", "supported", "supported", "not_a_claim", "supported", "supported"]
    report = citation_validity(pairs, CONTEXT, verdicts)
    assert report.answer_passes is True
    assert report.citations_valid is True
    assert report.counts["claims"] == 5 and report.counts["not_a_claim"] == 1
    assert report.counts["uncited"] == 1

    verdicts[5] = "unsupported"
    report = citation_validity(pairs, CONTEXT, verdicts)
    assert report.answer_passes is False
    assert report.claims[5].status == "fail" and "unsupported" in report.claims[5].problems[0]
    assert report.citations_valid is True  # the failing claim cites nothing


def test_a_cited_id_missing_from_the_context_is_invalid() -> None:
    pairs = [
        ("Monthly plans can be refunded within 14 days.", ["POL-REFUND"]),
        ("Enterprise contracts can be terminated after an acquisition.", ["CONTRACT-9"]),
    ]
    report = citation_validity(pairs, ["POL-REFUND"], ["supported", "supported"])
    assert report.invalid_ids == ("CONTRACT-9",)
    assert report.claims[1].passes is False
    assert report.claims[1].problems == ("cites 'CONTRACT-9', which was not in the context",)
    assert report.answer_passes is False and report.citations_valid is False
    # ids are compared as text, so numeric chunk ids match their string form
    numeric = citation_validity([("Fact.", [17])], ["17"], ["supported"])
    assert numeric.answer_passes is True


def test_contradicted_and_unreviewed_claims() -> None:
    pairs = [("A.", ["2"]), ("B.", ["2"]), ("C.", [])]
    pending = citation_validity(pairs, CONTEXT, ["supported", None, None])
    assert pending.answer_passes is None and pending.citations_valid is None
    assert pending.counts["unreviewed"] == 2
    contradicted = citation_validity(pairs, CONTEXT, {0: "supported", 1: "contradicted"})
    assert contradicted.answer_passes is False and contradicted.citations_valid is False
    assert contradicted.claims[2].status == "unreviewed"


def test_require_citation_fails_uncited_claims() -> None:
    pairs: list[tuple[str, list[str]]] = [("Refunds take 14 days.", [])]
    assert citation_validity(pairs, CONTEXT, ["supported"]).answer_passes is True
    strict = citation_validity(pairs, CONTEXT, ["supported"], require_citation=True)
    assert strict.answer_passes is False and strict.claims[0].problems == ("no citation",)


def test_refusal_with_only_non_claims_passes_and_frame_is_readable() -> None:
    refusal = "I can't confirm this from the sources you can access. Which contract do you mean?"
    pairs = claims_with_citations(refusal)
    report = citation_validity(pairs, [], ["not_a_claim", "not_a_claim"])
    assert report.answer_passes is True and report.counts["claims"] == 0
    frame = report.to_frame()
    assert list(frame["claim"]) == [1, 2]
    assert list(frame["status"]) == ["not_a_claim", "not_a_claim"]


def test_malformed_verdicts_are_refused() -> None:
    pairs = [("A.", ["2"]), ("B.", [])]
    with pytest.raises(InputError, match="2 claims"):
        citation_validity(pairs, CONTEXT, ["supported"])
    with pytest.raises(InputError, match="claim 2: 'maybe'"):
        citation_validity(pairs, CONTEXT, ["supported", "maybe"])
    with pytest.raises(InputError, match="claim number 5 does not exist"):
        citation_validity(pairs, CONTEXT, {5: "supported"})
    assert set(VERDICTS) == {"supported", "unsupported", "contradicted", "not_a_claim"}


def test_a_long_run_of_stops_is_read_once() -> None:
    """A run of '?' before a letter, or of many short sentences, in an imported answer: the
    sentence boundary pattern reads each run once and the claims come out as before."""
    assert [c.text for c in split_claims("Why" + "?" * 100_000 + "a")] == [
        "Why" + "?" * 100_000 + "a"
    ]
    many = split_claims("Is it? " * 30_000)
    assert len(many) == 30_000 and many[-1].text == "Is it?"
    assert [c.text for c in split_claims("See e.g. the table. Yes!!! No?! Fine.")] == [
        "See e.g. the table.",
        "Yes!!!",
        "No?!",
        "Fine.",
    ]
