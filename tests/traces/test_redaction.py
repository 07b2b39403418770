"""Redaction: what is replaced, what is kept, the policy file, and whole traces."""

from __future__ import annotations

import datetime as dt
import re
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from review.core.errors import PolicyFileError
from review.traces.formats.canonical import iter_canonical_jsonl
from review.traces.model import Chunk, Citation, ParsedTrace, Trace
from review.traces.redaction import (
    RedactionPolicy,
    iban_valid,
    load_redaction_policy,
    luhn_valid,
    parse_redaction_policy,
    redact,
    redact_trace,
)
from tests.helpers.paths import ROOT
from tests.helpers.paths import TRACE_DATA as DATA

ALL_ON = """\
version: 1
detectors:
  email: {enabled: true, replacement: "[email]"}
  phone: {enabled: true, replacement: "[phone]"}
  card: {enabled: true, replacement: "[card]"}
  iban: {enabled: true, replacement: "[iban]"}
"""


@pytest.fixture(scope="module")
def policy() -> RedactionPolicy:
    return parse_redaction_policy(ALL_ON, "all-on.yaml")


def test_project_policy_file_loads() -> None:
    p = load_redaction_policy(ROOT / "policies" / "redaction.yaml")
    assert p.enabled_names() == ("billing_account", "support_pin", "card", "email", "phone")
    text, counts = redact("Account BWA-20250603, support PIN: 4821, mail ops@example.com", p)
    assert text == "Account [billing account], support PIN [pin], mail [email]"
    assert counts == {
        "billing_account": 1,
        "support_pin": 1,
        "card": 0,
        "email": 1,
        "phone": 0,
    }


# ---------------------------------------------------------------------------------------
# What is redacted


@pytest.mark.parametrize(
    "email",
    [
        "jana.novak@halvorsen-freight.no",
        "j.smith+billing@brightwave.example.com",
        "ANNA_O'NEIL@example.co.uk".replace("'", ""),
        "ops-team@mail.example.org",
    ],
)
def test_emails_are_redacted(policy: RedactionPolicy, email: str) -> None:
    text, counts = redact(f"Please reply to {email}, thanks.", policy)
    assert text == "Please reply to [email], thanks."
    assert counts["email"] == 1


@pytest.mark.parametrize(
    "phone",
    [
        "+47 912 34 567",
        "+44 20 7946 0958",
        "+1 (415) 555-0132",
        "+1-415-555-0132",
        "+4930901820",
        "+49 (0)30 901820",
        "(415) 555-0132",
        "415-555-0132",
        "415.555.0132",
        "020 7946 0958",
        "030 1234 5678",
        "0800 123 456",
    ],
)
def test_phone_numbers_are_redacted(policy: RedactionPolicy, phone: str) -> None:
    text, counts = redact(f"Call me on {phone} after 5.", policy)
    assert text == "Call me on [phone] after 5."
    assert counts["phone"] == 1


@pytest.mark.parametrize(
    "card",
    [
        "4111 1111 1111 1111",  # published test numbers of the card networks
        "4111111111111111",
        "5555-5555-5555-4444",
        "3782 822463 10005",
        "378282246310005",
        "6011 1111 1111 1117",
        "4000 0566 5566 5556",
    ],
)
def test_card_numbers_passing_luhn_are_redacted(policy: RedactionPolicy, card: str) -> None:
    text, counts = redact(f"I paid with {card}.", policy)
    assert text == "I paid with [card]."
    assert counts == {"iban": 0, "card": 1, "email": 0, "phone": 0}


@pytest.mark.parametrize(
    "iban",
    [
        "GB82 WEST 1234 5698 7654 32",
        "GB82WEST12345698765432",
        "DE89 3704 0044 0532 0130 00",
        "FR14 2004 1010 0505 0001 3M02 606",
        "NL91 ABNA 0417 1643 00",
    ],
)
def test_ibans_are_redacted_when_enabled(policy: RedactionPolicy, iban: str) -> None:
    text, counts = redact(f"Refund to {iban} please", policy)
    assert text == "Refund to [iban] please"
    assert counts["iban"] == 1


def test_iban_detector_is_off_in_the_project_policy() -> None:
    p = load_redaction_policy(ROOT / "policies" / "redaction.yaml")
    text, _ = redact("Refund to GB82 WEST 1234 5698 7654 32 please", p)
    assert "GB82 WEST" in text


# ---------------------------------------------------------------------------------------
# What is kept (precision)


@pytest.mark.parametrize(
    "text",
    [
        "The 2025 price list replaced the one from 2023.",
        "Order 4471923 was refunded.",
        "Order #100234567 and invoice INV-2025-000123 are linked.",
        "Ticket BW-2025-004417 is closed.",
        "Upgrade the desktop client to version 2.1.3 or 10.4.12.",
        "Enterprise uptime is 99.9% or 99.95% per month.",
        "The policy is effective from 2025-03-01 (03.06.2025 in the German notice).",
        "The job ran at 09:14:22 on 1,250,000 files worth 12 500 EUR.",
        "The probe at 192.168.10.20 reported 0,99 seconds.",
        "Card 4111 1111 1111 1112 failed the check digit.",  # not Luhn-valid
        "Ask for the refund within 14 days; credits are capped at 30%.",
        "Call extension 4471 or room 555-0132.",  # too short for a phone number
        "GB82 WEST 1234 5698 7654 33 has a wrong check sum.",
        "Clause 4.2 and section 3.1.1 apply; see footnote [^2].",
        "Write to the billing team at brightwave (dot) example.",
        "Revenue for 2029 2030 2031 2032 2033 2034 is projected.",  # Luhn-valid windows inside
        "Mixed grouping 4111-1111 1111-1111 is not how cards are written.",
        "Retina logo: logo 2x, 1024 768 pixels, 3 4 5 6 7 8 9 1 2 3 4 5 6.",
    ],
)
def test_ordinary_numbers_and_text_are_not_redacted(policy: RedactionPolicy, text: str) -> None:
    out, counts = redact(text, policy)
    assert out == text
    assert sum(counts.values()) == 0


def test_values_next_to_each_other_are_all_found(policy: RedactionPolicy) -> None:
    """A failed candidate spanning two values must not hide the real one inside it."""
    text, counts = redact("Call +44 20 7946 0958 4111 1111 1111 1111", policy)
    assert text == "Call [phone] [card]"
    text, counts = redact("Order 4471923 4111 1111 1111 1111; 4111 1111 1111 1112", policy)
    assert text == "Order 4471923 [card]; 4111 1111 1111 1112"
    assert counts["card"] == 1


@settings(max_examples=200)
@given(st.integers(1900, 2095), st.integers(2, 8), st.sampled_from([" ", "-", ", "]))
def test_year_sequences_are_never_redacted(first: int, n: int, sep: str) -> None:
    policy = parse_redaction_policy(ALL_ON, "p")
    text = "Figures for " + sep.join(str(y) for y in range(first, first + n)) + "."
    assert redact(text, policy) == (text, {"iban": 0, "card": 0, "email": 0, "phone": 0})


# ---------------------------------------------------------------------------------------
# The checksums, against published examples and their defining property


def test_luhn_published_examples() -> None:
    assert luhn_valid("79927398713")  # the worked example of the Luhn algorithm
    assert not luhn_valid("79927398710")
    assert luhn_valid("4111111111111111") and luhn_valid("378282246310005")
    assert not luhn_valid("4111111111111112")


@given(st.text(alphabet="0123456789", min_size=1, max_size=25))
def test_luhn_exactly_one_check_digit_fits(payload: str) -> None:
    assert sum(luhn_valid(payload + d) for d in "0123456789") == 1


@given(
    st.sampled_from(["GB82WEST12345698765432", "DE89370400440532013000", "NL91ABNA0417164300"]),
    st.data(),
)
def test_iban_check_catches_any_single_digit_change(iban: str, data: st.DataObject) -> None:
    """Mod 97 catches every one-digit substitution: it shifts the number by d * 10^k, 0<|d|<10."""
    assert iban_valid(iban)
    i = data.draw(st.sampled_from([k for k, ch in enumerate(iban) if ch.isdigit()]))
    new = data.draw(st.sampled_from([d for d in "0123456789" if d != iban[i]]))
    assert not iban_valid(iban[:i] + new + iban[i + 1 :])


def test_iban_structure_is_checked() -> None:
    assert not iban_valid("GBD2WEST12345698765432")  # check digits must be digits
    assert not iban_valid("1282WEST12345698765432")  # the country code is two letters
    assert not iban_valid("GB82WEST1234")  # too short


# ---------------------------------------------------------------------------------------
# Properties


NO_CUSTOM = ALL_ON


@settings(max_examples=300)
@given(
    st.text(
        alphabet=st.characters(blacklist_characters="@", blacklist_categories=["Cs"]),
        max_size=200,
    ).filter(lambda s: sum(ch.isdigit() for ch in s) < 8)
)
def test_text_with_no_at_sign_and_few_digits_is_never_changed(text: str) -> None:
    policy = parse_redaction_policy(NO_CUSTOM, "p")
    out, counts = redact(text, policy)
    assert out == text and sum(counts.values()) == 0


PII = [
    "jana.novak@halvorsen-freight.no",
    "+44 20 7946 0958",
    "(415) 555-0132",
    "4111 1111 1111 1111",
    "GB82 WEST 1234 5698 7654 32",
]
FILLER = st.sampled_from(
    ["Refunds take 5 days.", "See clause 2.1.", "Uptime 99.9%.", "In 2025,", "order 4471923", " "]
)


@settings(max_examples=200)
@given(st.lists(st.sampled_from(PII) | FILLER, max_size=12))
def test_redaction_removes_every_planted_value_and_is_idempotent(parts: list[str]) -> None:
    policy = parse_redaction_policy(ALL_ON, "p")
    text = " ".join(parts)
    out, counts = redact(text, policy)
    for value in PII:
        assert value not in out
    assert sum(counts.values()) == sum(p in PII for p in parts)
    again, counts2 = redact(out, policy)
    assert again == out and sum(counts2.values()) == 0


# ---------------------------------------------------------------------------------------
# The policy file


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "redaction.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_invalid_regex_is_refused_with_its_key(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        ALL_ON
        + """\
custom_patterns:
  - name: account
    regex: 'BWA-(\\d{8}'
    replacement: "[account]"
""",
    )
    with pytest.raises(PolicyFileError) as err:
        load_redaction_policy(path)
    # named by its file name: the message reaches the pages, which never show a server path
    assert str(err.value).startswith(f"{path.name}: custom_patterns.0.regex: not a valid regular")
    assert "missing ), unterminated subpattern at position 4" in str(err.value)


@pytest.mark.parametrize(
    ("custom", "message"),
    [
        (
            "  - {name: blank, regex: 'x*', replacement: '[x]'}\n",
            "custom_patterns.0.regex: matches empty text",
        ),
        (
            "  - {name: email, regex: 'x', replacement: '[x]'}\n",
            "custom_patterns.0.name: 'email' is a built-in detector's name",
        ),
        (
            "  - {name: acct, regex: 'a', replacement: '[a]'}\n"
            "  - {name: acct, regex: 'b', replacement: '[b]'}\n",
            "custom_patterns.1.name: 'acct' is already used by custom_patterns.0",
        ),
        (
            "  - {name: Account-No, regex: 'a', replacement: '[a]'}\n",
            "custom_patterns.0.name: 'Account-No': use lowercase letters",
        ),
        (
            "  - {name: acct, regex: 'a', replacement: ''}\n",
            "custom_patterns.0.replacement: String should have at least 1 character",
        ),
        (
            "  - {name: acct, regex: 'a', replacement: '[a]', flags: i}\n",
            "custom_patterns.0.flags: unknown key",
        ),
    ],
)
def test_bad_custom_patterns_are_refused(custom: str, message: str) -> None:
    with pytest.raises(PolicyFileError) as err:
        parse_redaction_policy(ALL_ON + "custom_patterns:\n" + custom, "redaction.yaml")
    assert f"redaction.yaml: {message}" in str(err.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (ALL_ON.replace("email: {enabled: true", "email: {enabeld: true"), "detectors.email"),
        (
            ALL_ON.replace(
                'enabled: true, replacement: "[card]"', "enabled: 'yes', replacement: \"[card]\""
            ),
            "detectors.card.enabled: Input should be a valid boolean",
        ),
        (ALL_ON.replace("  phone:", "  email:"), "duplicate key 'email'"),
        (ALL_ON.replace("version: 1", "version: 0"), "version: Input should be greater than"),
        ("- just a list\n", "(top level): expected a mapping"),
    ],
)
def test_malformed_policy_files_are_refused(text: str, message: str) -> None:
    with pytest.raises(PolicyFileError, match=re.escape(message)):
        parse_redaction_policy(text, "redaction.yaml")


def test_replacement_is_literal_and_custom_patterns_run_first() -> None:
    policy = parse_redaction_policy(
        ALL_ON
        + "custom_patterns:\n"
        + "  - {name: hotline, regex: '\\+44 20 7946 (\\d{4})', replacement: 'hotline \\1'}\n",
        "p",
    )
    text, counts = redact("Call +44 20 7946 0958 or +44 20 7946 0000.", policy)
    assert text == "Call hotline \\1 or hotline \\1."
    assert counts["hotline"] == 2 and counts["phone"] == 0


def test_counts_cover_every_enabled_detector_and_count_each_hit(policy: RedactionPolicy) -> None:
    text, counts = redact("a@example.com, b@example.com and +44 20 7946 0958", policy)
    assert text == "[email], [email] and [phone]"
    assert counts == {"iban": 0, "card": 0, "email": 2, "phone": 1}
    assert redact("", policy) == ("", {"iban": 0, "card": 0, "email": 0, "phone": 0})


def test_disabled_detector_leaves_its_values() -> None:
    off = parse_redaction_policy(
        ALL_ON.replace("email: {enabled: true", "email: {enabled: false"), "p"
    )
    text, counts = redact("mail a@example.com", off)
    assert text == "mail a@example.com" and "email" not in counts


# ---------------------------------------------------------------------------------------
# Whole traces


def test_redact_trace_covers_every_free_text_field(policy: RedactionPolicy) -> None:
    mail = "jana.novak@halvorsen-freight.no"
    trace = Trace(
        trace_id="bw-1",
        time=dt.datetime(2025, 6, 3, tzinfo=dt.UTC),
        query=f"I'm {mail}, can you refund card 4111 1111 1111 1111?",
        rewritten_query=f"refund for {mail}",
        chunks=(
            Chunk("c1", "SUP-GUIDE-REFUNDS", 1, 1, 0.8, f"Escalations go to {mail}."),
            Chunk("c2", "SUP-HOURS", 1, 2, 0.5, "Phone support: +44 20 7946 0958."),
        ),
        context_sent=f"[c1] Escalations go to {mail}.",
        answer_text="Call +44 20 7946 0958 within 14 days.",
        citations=(Citation(f"Escalations go to {mail}.", ("c1",)),),
        versions={"model": "m@2.1.3"},
        attributes={"customer_tier": "team"},
    )
    out, counts = redact_trace(trace, policy)
    assert out.query == "I'm [email], can you refund card [card]?"
    assert out.rewritten_query == "refund for [email]"
    assert [c.text for c in out.chunks] == ["Escalations go to [email].", "Phone support: [phone]."]
    assert out.context_sent == "[c1] Escalations go to [email]."
    assert out.answer_text == "Call [phone] within 14 days."
    assert out.citations == (Citation("Escalations go to [email].", ("c1",)),)
    assert counts == {"iban": 0, "card": 1, "email": 5, "phone": 2}
    # ids, scores, versions and attributes are untouched; the input trace is not modified
    assert [c.chunk_id for c in out.chunks] == ["c1", "c2"] and out.chunks[0].score == 0.8
    assert out.versions == trace.versions and out.attributes == trace.attributes
    assert mail in trace.query


def test_redact_trace_counts_equal_field_by_field_redaction(policy: RedactionPolicy) -> None:
    with (DATA / "canonical.jsonl").open(encoding="utf-8") as fh:
        sample = [i.trace for i in iter_canonical_jsonl(fh, "c") if isinstance(i, ParsedTrace)]
    for trace in sample:
        out, counts = redact_trace(trace, policy)
        fields = [trace.query, trace.rewritten_query or "", trace.context_sent, trace.answer_text]
        fields += [c.text for c in trace.chunks] + [c.claim for c in trace.citations]
        expected: dict[str, int] = {}
        for f in fields:
            for k, v in redact(f, policy)[1].items():
                expected[k] = expected.get(k, 0) + v
        assert counts == expected
    pii = next(t for t in sample if t.trace_id == "bw-2025-06-05-000003")
    out, counts = redact_trace(pii, policy)
    assert out.query.startswith("Hi, I'm [email] ([phone]). What is the refund policy")
    assert counts["email"] == 1 and counts["phone"] == 1
