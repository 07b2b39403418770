"""Refusal wording: the signed message file, rendering, and the wording lint.

The lint is checked three ways: per-rule unit tests (each rule fires on what it is for and stays
quiet on near misses), a precision corpus of realistic good and bad messages
(tests/data/wording_corpus.yaml, table printed with ``pytest -s``), and hypothesis properties.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from review.core.errors import InputError, PolicyFileError
from review.core.identity import Role
from review.wording.findings import KEY_ONLY_RULES, RULES, Finding, excerpt
from review.wording.lint import lint, lint_frame, lint_message, lint_set
from review.wording.messages import (
    EXAMPLE_VALUES,
    REQUIRED_KEYS,
    Message,
    WordingSet,
    load_wording,
    needs_compliance,
    parse_wording,
    placeholders_in,
    preview,
    render,
    signoff_roles,
)
from tests.helpers.paths import ROOT

SHIPPED = ROOT / "policies" / "refusal-wording.yaml"
GOOD_TEXT = SHIPPED.read_text(encoding="utf-8")
CORPUS = yaml.safe_load((ROOT / "tests" / "data" / "wording_corpus.yaml").read_text("utf-8"))
CONTEXT: dict[str, list[str]] = CORPUS["context"]
DEMO_DOC_IDS = sorted({p.stem.split("@")[0] for p in (ROOT / "review/demo/docs").glob("*.md")})


def check(text: str, key: str | None = None) -> list[Finding]:
    return lint(
        text,
        key=key,
        restricted_titles=CONTEXT["restricted_titles"],
        allowed_contacts=CONTEXT["allowed_contacts"],
        doc_ids=CONTEXT["doc_ids"],
        company_names=CONTEXT["company_names"],
    )


def rules_of(text: str, key: str | None = None) -> set[str]:
    return {f.rule for f in check(text, key)}


def flagged(text: str, rule: str, key: str | None = None) -> list[str]:
    return [excerpt(text, f) for f in check(text, key) if f.rule == rule]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "refusal-wording.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def good_data() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(GOOD_TEXT)
    return data


# ---------------------------------------------------------------------------------------------
# The shipped wording file
# ---------------------------------------------------------------------------------------------


def test_shipped_file_has_the_six_required_messages() -> None:
    ws = load_wording(SHIPPED)
    assert set(REQUIRED_KEYS) <= set(ws.messages)
    assert ws.locale == "en-GB"
    assert "the Support team" in ws.allowed_contacts
    assert "support@brightwave.example" in ws.allowed_contacts
    for key, msg in ws.messages.items():
        assert msg.description.strip(), key
        assert set(placeholders_in(msg.text)) == set(msg.placeholders)
        assert ws.locale_for(key) == "en-GB"


def test_shipped_messages_pass_their_own_lint_as_templates_and_as_previews() -> None:
    ws = load_wording(SHIPPED)
    assert lint_set(ws, doc_ids=DEMO_DOC_IDS) == {key: [] for key in ws.messages}
    for key in ws.messages:
        assert lint_message(ws, key, values=EXAMPLE_VALUES, doc_ids=DEMO_DOC_IDS) == [], key


def test_every_shipped_placeholder_has_a_preview_value() -> None:
    ws = load_wording(SHIPPED)
    for msg in ws.messages.values():
        shown = preview(msg)
        assert "{" not in shown and "[" not in shown
        for name in msg.placeholders:
            assert EXAMPLE_VALUES[name] in shown


def test_shipped_restricted_titles_are_the_restricted_demo_documents() -> None:
    ws = load_wording(SHIPPED)
    restricted = set()
    for path in (ROOT / "review/demo/docs").glob("*.md"):
        meta = yaml.safe_load(path.read_text("utf-8").split("---")[1])
        if meta["access_scope"] == "restricted":
            restricted.add(meta["title"])
    assert set(ws.restricted_titles) == restricted


def test_the_escalation_message_points_to_a_role_not_a_person() -> None:
    ws = load_wording(SHIPPED)
    e1 = render(ws.message("E1"), {"role": "the Privacy Operations team"})
    assert "the Privacy Operations team" in e1
    assert lint(e1, key="E1", allowed_contacts=ws.allowed_contacts) == []
    named = render(ws.message("E1"), {"role": "Sarah Whitfield"})
    assert "escalation_names_person" in {f.rule for f in lint(named, key="E1")}


# ---------------------------------------------------------------------------------------------
# Malformed wording files
# ---------------------------------------------------------------------------------------------


def refused(tmp_path: Path, data: dict[str, Any] | str) -> str:
    text = data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False)
    with pytest.raises(PolicyFileError) as info:
        load_wording(write(tmp_path, text))
    message = str(info.value)
    assert "refusal-wording.yaml" in message
    return message


def test_undeclared_placeholder_is_refused_naming_key_and_placeholder(tmp_path: Path) -> None:
    data = good_data()
    data["messages"]["R1"]["text"] += " Or ask {contact_person}."
    msg = refused(tmp_path, data)
    assert "messages.R1.text: placeholder {contact_person} is used but not declared" in msg


def test_declared_but_unused_placeholder_is_refused(tmp_path: Path) -> None:
    data = good_data()
    data["messages"]["F1"]["placeholders"].append("region")
    msg = refused(tmp_path, data)
    assert "messages.F1.placeholders: 'region' is declared but {region} never appears" in msg


def test_missing_r1_is_refused(tmp_path: Path) -> None:
    data = good_data()
    del data["messages"]["R1"]
    msg = refused(tmp_path, data)
    assert "messages.R1: required message is missing" in msg


def test_all_missing_required_keys_are_listed_at_once(tmp_path: Path) -> None:
    data = good_data()
    for key in ("R2", "E1"):
        del data["messages"][key]
    msg = refused(tmp_path, data)
    assert "messages.R2: required message is missing" in msg
    assert "messages.E1: required message is missing" in msg
    assert len(msg.splitlines()) == 2


def test_unknown_key_inside_a_message_is_refused(tmp_path: Path) -> None:
    data = good_data()
    data["messages"]["C1"]["tone"] = "friendly"
    msg = refused(tmp_path, data)
    assert "messages.C1.tone: unknown key" in msg


def test_unknown_top_level_key_is_refused(tmp_path: Path) -> None:
    data = good_data()
    data["alowed_contacts"] = ["the Support team"]
    assert "alowed_contacts: unknown key" in refused(tmp_path, data)


def test_duplicate_key_is_refused_with_its_line(tmp_path: Path) -> None:
    text = GOOD_TEXT.replace(
        "  R2:\n", "  R1:\n    description: again\n    text: again\n  R2:\n", 1
    )
    msg = refused(tmp_path, text)
    assert "duplicate key 'R1'" in msg and "line" in msg


def test_custom_keys_are_allowed_but_must_look_like_keys(tmp_path: Path) -> None:
    data = good_data()
    data["messages"]["R2_BILLING"] = {
        "description": "Billing questions that the sources do not answer.",
        "text": "The documents available to you do not settle this. Which invoice is it?",
    }
    ws = load_wording(write(tmp_path, yaml.safe_dump(data)))
    assert ws.message("R2_BILLING").placeholders == []
    assert not needs_compliance("R2_BILLING")

    data["messages"]["refund-note"] = data["messages"].pop("R2_BILLING")
    assert "messages.refund-note: message keys use capital letters" in refused(tmp_path, data)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda d: d["messages"]["F1"].update(placeholders=["Missing Item"]),
            "messages.F1.placeholders.0: 'Missing Item' is not a placeholder name",
        ),
        (
            lambda d: d["messages"]["F1"].update(placeholders=["missing_item", "missing_item"]),
            "messages.F1.placeholders.1: 'missing_item' is declared twice",
        ),
        (
            lambda d: d["messages"]["C1"].update(text="Check {Document} first."),
            "messages.C1.text: has a brace that is not part of a placeholder",
        ),
        (
            lambda d: d["messages"]["F1"].update(placeholders="missing_item"),
            "messages.F1.placeholders: Input should be a valid list",
        ),
        (lambda d: d["messages"]["R3"].update(text="   "), "messages.R3.text: must not be blank"),
        (lambda d: d.update(locale="English"), "locale: 'English' is not a locale"),
        (
            lambda d: d["messages"]["R1"].update(locale="gb_EN"),
            "messages.R1.locale: 'gb_EN' is not a locale",
        ),
        (
            lambda d: d["allowed_contacts"].append("The Support  Team"),
            "is listed twice (first at 0)",
        ),
        (lambda d: d.update(allowed_contacts=[]), "allowed_contacts: list at least one"),
        (lambda d: d.pop("messages"), "messages: required key is missing"),
        (lambda d: d.update(version=0), "version: Input should be greater than or equal to 1"),
    ],
)
def test_malformed_file_is_refused_with_a_clear_line(
    tmp_path: Path, change: Any, expected: str
) -> None:
    data = good_data()
    change(data)
    assert expected in refused(tmp_path, data)


def test_parse_wording_names_the_source_it_was_given() -> None:
    with pytest.raises(PolicyFileError, match=r"^draft by ana: line \d+"):
        parse_wording("version: 1\nmessages: [unclosed", "draft by ana")
    with pytest.raises(PolicyFileError, match=r"draft: .*expected a mapping"):
        parse_wording("- just a list", "draft")
    ws = parse_wording(GOOD_TEXT, "draft")
    assert ws == load_wording(SHIPPED)


def test_missing_file_is_reported_by_name(tmp_path: Path) -> None:
    with pytest.raises(PolicyFileError, match=r"nowhere\.yaml: cannot be read"):
        load_wording(tmp_path / "nowhere.yaml")


def test_load_wording_uses_the_policies_dir_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = good_data()
    data["version"] = 7
    write(tmp_path, yaml.safe_dump(data))
    monkeypatch.setenv("WORKBENCH_POLICIES_DIR", str(tmp_path))
    assert load_wording().version == 7


def test_unknown_message_key_is_an_input_error() -> None:
    ws = load_wording(SHIPPED)
    with pytest.raises(InputError, match=r"unknown message key 'R9' \(known: C1, E1, F1"):
        ws.message("R9")


def test_a_message_can_override_the_locale() -> None:
    data = good_data()
    data["messages"]["F1"]["locale"] = "de-DE"
    ws = WordingSet.model_validate(data)
    assert ws.locale_for("F1") == "de-DE"
    assert ws.locale_for("R1") == "en-GB"


# ---------------------------------------------------------------------------------------------
# Rendering and sign-off
# ---------------------------------------------------------------------------------------------


def test_render_fills_every_placeholder() -> None:
    msg = Message(
        text="I could not find {topic}. Could you tell me {missing_item}?",
        placeholders=["topic", "missing_item"],
        description="test message",
    )
    out = render(msg, {"topic": "the refund rule", "missing_item": "the plan", "extra": "x"})
    assert out == "I could not find the refund rule. Could you tell me the plan?"


def test_render_with_missing_values_names_them_all() -> None:
    msg = Message(
        text="Passed to {role} about {topic}.", placeholders=["role", "topic"], description="x y"
    )
    with pytest.raises(InputError) as info:
        render(msg, {})
    assert "{role}" in str(info.value) and "{topic}" in str(info.value)
    with pytest.raises(InputError, match=r"\{role\}"):
        render(msg, {"role": "   ", "topic": "refunds"})
    with pytest.raises(InputError, match=r"\{topic\}"):
        render(msg, {"role": "the Legal team", "topic": None})


def test_render_inserts_values_literally() -> None:
    assert render("Ask {role}.", {"role": "{topic} {0.__class__}"}) == "Ask {topic} {0.__class__}."
    assert render("No placeholders here.", {}) == "No placeholders here."


def test_preview_uses_examples_and_shows_unknown_names() -> None:
    assert preview("Could you tell me {missing_item}?") == "Could you tell me the contract name?"
    assert preview("Ask {role} about {ticket_ref}.") == "Ask the Legal team about [ticket ref]."
    assert preview("Ask {role}.", {"role": "the Billing team"}) == "Ask the Billing team."


def test_compliance_signs_r3_and_e1_only() -> None:
    assert [k for k in REQUIRED_KEYS if needs_compliance(k)] == ["R3", "E1"]
    assert signoff_roles("E1") == (Role.product_owner.value, Role.compliance.value)
    assert signoff_roles("R1") == (Role.product_owner.value,)
    assert signoff_roles("CUSTOM_1") == (Role.product_owner.value,)


# ---------------------------------------------------------------------------------------------
# Lint: per rule
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "span"),
    [
        ("There is no refund for annual plans.", "There is no"),
        ("That discount doesn’t exist any more.", "doesn’t exist"),
        ("We do not offer a free tier.", "We do not offer"),
        ("No such policy.", "No such"),
        ("Moving data between regions is not possible.", "is not possible"),
        ("No refunds of any kind are available for annual plans.", None),
        ("Brightwave never offers credits for Starter.", "Brightwave never offers"),
        ("Annual plans aren't refundable.", "aren't refundable"),
    ],
)
def test_universal_negative_fires(text: str, span: str | None) -> None:
    found = flagged(text, "universal_negative")
    assert found, text
    if span is not None:
        assert found[0] == span


def test_company_names_come_from_the_wording_not_the_rules() -> None:
    """The deployment's names are configuration (the wording file's ``company_names``): the
    demo's "Brightwave never offers" is a universal negative only where Brightwave is listed,
    and another deployment's name works the same way."""
    text = "Acme Cloud never offers credits for Starter."
    assert "universal_negative" not in {f.rule for f in lint(text)}
    found = lint(text, company_names=["Acme  Cloud"])
    assert [text[f.start : f.end] for f in found if f.rule == "universal_negative"] == [
        "Acme Cloud never offers"
    ]
    assert "universal_negative" not in {f.rule for f in lint("Brightwave never offers credits.")}
    assert load_wording().company_names == ["Brightwave"]


@pytest.mark.parametrize(
    "text",
    [
        "I could not find a refund rule for annual plans in the documents available to you.",
        "There is no mention of this in the sources you can access.",
        "In the documents you have access to, there is nothing about SSO pricing.",
        "It is not possible for me to confirm this from your documents.",
        "There is no need to send the file again.",
        "No problem, which plan are you on?",
        "The documents available to you do not say whether refunds exist for annual plans.",
    ],
)
def test_universal_negative_is_quiet_on_scoped_wording(text: str) -> None:
    assert "universal_negative" not in rules_of(text)


def test_scope_in_an_earlier_clause_does_not_excuse_a_universal_claim() -> None:
    text = "I searched the documents you can access, and there is no refund for annual plans."
    assert flagged(text, "universal_negative") == ["there is no"]


@pytest.mark.parametrize(
    ("text", "span"),
    [
        ("Nothing relevant (similarity score 0.42).", "similarity"),
        ("My confidence is 73% on this.", "confidence is 7"),
        ("The retrieval returned nothing.", "retrieval"),
        ("The reranker dropped it.", "reranker"),
        ("Your question's embedding matched nothing.", "embedding"),
        ("None of the top-k results helped.", "top-k"),
        ("The best chunk was about refunds.", "chunk"),
        ("See POL-REFUND@2 for details.", "POL-REFUND@2"),
        ("It is in SUP-ESCALATION, which is internal.", "SUP-ESCALATION"),
        ("That is covered by the LEGAL HOLD   procedure.", "LEGAL HOLD   procedure"),
        ("See the Memo: list price changes for 2026.", "Memo: list price changes for 2026"),
        ("This concerns Halvorsen Freight AS v Brightwave Software.", None),
    ],
)
def test_leaked_internal_fires(text: str, span: str | None) -> None:
    found = flagged(text, "leaked_internal")
    assert found, text
    if span is not None:
        assert span in found


@pytest.mark.parametrize(
    "text",
    [
        "I can't say with confidence whether this applies to you.",
        "Your plan's uptime commitment is 99.9% according to the service level agreement.",
        "Please write to support@brightwave.example.",
        "This is about the legal hold on your data, which the Legal team handles.",
        "Refunds for annual plans are described in the annual refund policy.",
        "We scored well in the 2025 customer survey.",
    ],
)
def test_leaked_internal_is_quiet_on_ordinary_words(text: str) -> None:
    assert "leaked_internal" not in rules_of(text)


@pytest.mark.parametrize(
    ("text", "span"),
    [
        ("Email legal@brightwave.example for help.", "legal@brightwave.example"),
        ("Call 0800 555 0199 now.", "0800 555 0199"),
        ("Call +1 (415) 555-0134.", "+1 (415) 555-0134"),
        ("See https://community.brightwave.example/forum.", None),
        ("Try brightwave-status.io for updates.", "brightwave-status.io"),
        ("Please contact Maria Svensson about it.", "Maria Svensson"),
        ("Please ask John about it.", "John"),
    ],
)
def test_unlisted_contact_fires(text: str, span: str | None) -> None:
    found = flagged(text, "unlisted_contact")
    assert found, text
    if span is not None:
        assert found == [span]


@pytest.mark.parametrize(
    "text",
    [
        "Please email support@brightwave.example or privacy@brightwave.example.",
        "Visit https://help.brightwave.example/articles/refunds for the steps.",
        "Visit www.help.brightwave.example for the steps.",
        "Call the Support team on +44-20-7946-0321.",
        "Please contact the Legal team, or contact Billing.",
        "Please contact Customer Success through a support ticket.",
        "The policy took effect on 2025-03-01 and was revised on 01.07.2025.",
        "The Enterprise price is £1 200 000 for the group.",
    ],
)
def test_unlisted_contact_is_quiet_on_approved_contacts_roles_and_dates(text: str) -> None:
    assert "unlisted_contact" not in rules_of(text)


@pytest.mark.parametrize(
    "text",
    [
        "I cannot confirm this, but enterprise customers usually have 60 days.",
        "I can't find the refund window. Typically it's 30 days.",
        "The sources do not state the notice period, but it is generally three months.",
        "I'm not sure, but I think SSO is included.",
        "I couldn't find it in your sources; the usual answer is 60 days.",
        "I can't confirm that. However, annual plans renew automatically.",
        "I'm not sure, but the Billing team usually approves refunds within 30 days.",
        "I can't confirm this, but I can check again. Usually refunds take 30 days.",
    ],
)
def test_claim_after_refusal_fires(text: str) -> None:
    found = [f for f in check(text) if f.rule == "claim_after_refusal"]
    assert len(found) == 1, text
    # the span runs from the refusal phrase to the end of the claim
    span = excerpt(text, found[0])
    assert text.startswith(span) or text.endswith(span)
    assert span.rstrip(".").endswith(text.rstrip(".")[-8:])
    assert span.split()[0] in {"I", "I'm", "do"}


@pytest.mark.parametrize(
    "text",
    [
        "I cannot confirm this, but if you tell me your plan I will check again.",
        "I can't help with this here, but your account manager can.",
        "I could not confirm the notice period. Please check clause 12 of your order form.",
        "I couldn't find that in your documents. Could you share the 2024 order form?",
        "I found documents on refunds, but none of them say whether annual plans qualify.",
        "I can't confirm this. The Billing team can look at your invoice.",
        "Refunds are usually processed within 5 days, according to the monthly refund policy.",
        "I'm not able to answer that from the documents you can access, so I won't guess.",
    ],
)
def test_claim_after_refusal_is_quiet_on_requests_pointers_and_answers(text: str) -> None:
    assert "claim_after_refusal" not in rules_of(text)


@pytest.mark.parametrize(
    ("text", "span"),
    [
        ("Your question is unclear.", "Your question is unclear"),
        ("You asked the wrong question.", "You asked the wrong"),
        ("You did not provide a contract name.", "You did not provide"),
        ("You should have said which plan.", "You should have said"),
        ("You failed to mention the region.", "You failed to mention"),
        ("That request is invalid.", "That request is invalid"),
        ("As I already said, the plan matters.", "As I already said"),
        ("Your question doesn't make sense.", "Your question doesn't make sense"),
    ],
)
def test_blames_user_fires(text: str, span: str) -> None:
    assert flagged(text, "blames_user") == [span]


@pytest.mark.parametrize(
    "text",
    [
        "Could you tell me which contract you mean?",
        "You should have received a confirmation email.",
        "If you did not provide a date, I will use the current policy.",
        "It looks like the contract name wasn't included; which one do you mean?",
        "Your question covers two plans; which one matters most?",
    ],
)
def test_blames_user_is_quiet_on_neutral_requests(text: str) -> None:
    assert "blames_user" not in rules_of(text)


@pytest.mark.parametrize(
    "text",
    [
        "I need more information.",
        "This depends on the plan.",
        "There are several contracts that might apply, and they say different things.",
    ],
)
def test_followup_without_request_fires_for_f1(text: str) -> None:
    found = [f for f in check(text, "F1") if f.rule == "followup_without_request"]
    assert [excerpt(text, f) for f in found] == [text]
    assert "followup_without_request" not in rules_of(text, "R1")
    assert "followup_without_request" not in rules_of(text)


@pytest.mark.parametrize(
    "text",
    [
        "Which plan are you on?",
        "Please tell me the effective date of your contract.",
        "Let me know the jurisdiction your company is in.",
        "To answer this, could you tell me {missing_item}",
        "Share the name of the contract and I will look again.",
    ],
)
def test_followup_with_a_request_passes(text: str) -> None:
    assert "followup_without_request" not in rules_of(text, "F1")


@pytest.mark.parametrize(
    ("text", "span"),
    [
        ("I've passed this to Dr. Okafor.", "Dr. Okafor"),
        ("Please ask John in Legal.", "John"),
        ("Sarah Whitfield will call you back.", "Sarah Whitfield"),
        ("This has been escalated to Ms Patel.", "Ms Patel"),
    ],
)
def test_escalation_names_person_fires_for_e1(text: str, span: str) -> None:
    assert flagged(text, "escalation_names_person", "E1") == [span]
    assert "escalation_names_person" not in rules_of(text, "R1")


@pytest.mark.parametrize(
    "text",
    [
        "I've passed this to the Legal team.",
        "The Privacy Operations team will reply through your support ticket.",
        "Our Data Protection Officer reviews every deletion request.",
        "I'll hand this to Customer Success.",
        "This concerns Halvorsen Freight AS, so the Legal team will reply.",
        "Please ask {role} for help.",
    ],
)
def test_escalation_to_roles_passes(text: str) -> None:
    assert "escalation_names_person" not in rules_of(text, "E1")


def test_findings_are_sorted_and_explained_in_one_sentence() -> None:
    text = (
        "Your question is unclear. There is no such plan (similarity 0.2). Email "
        "bob@elsewhere.example, but usually it costs £4."
    )
    found = check(text)
    assert [f.start for f in found] == sorted(f.start for f in found)
    assert {f.rule for f in found} == {
        "blames_user",
        "universal_negative",
        "leaked_internal",
        "unlisted_contact",
    }
    for f in found:
        assert f.rule in RULES
        assert 0 <= f.start < f.end <= len(text)
        assert f.explanation.endswith(".") and "\n" not in f.explanation
        assert excerpt(text, f).strip() in f.explanation or f.rule == "claim_after_refusal"


def test_long_texts_are_checked_sentence_by_sentence() -> None:
    # a pasted table or a long trace: every sentence is still judged on its own
    text = "I can't find it, but usually 5 days. Which plan? " * 500 + "a." * 5000
    found = check(text)
    assert [f.rule for f in found] == ["claim_after_refusal"] * 500
    assert check("There is no refund, " * 400 + "x@" * 2000)[-1].rule == "universal_negative"


def test_lint_can_run_selected_rules_and_refuses_unknown_ones() -> None:
    text = "There is no refund. Your question is unclear."
    assert {f.rule for f in lint(text, rules=["blames_user"])} == {"blames_user"}
    with pytest.raises(InputError, match="unknown wording rule"):
        lint(text, rules=["rudeness"])


def test_key_only_rules_are_documented() -> None:
    assert KEY_ONLY_RULES == {"followup_without_request": "F1", "escalation_names_person": "E1"}
    assert set(KEY_ONLY_RULES) <= set(RULES)


def test_lint_frame_gives_one_row_per_finding_with_the_text_label() -> None:
    texts = pd.Series(
        ["Which plan are you on?", "There is no refund.", "I need more information."],
        index=[10, 11, 12],
    )
    frame = lint_frame(texts, keys=["F1", None, "F1"])
    assert list(frame.columns) == ["row", "rule", "start", "end", "excerpt", "explanation"]
    assert frame[["row", "rule", "excerpt"]].values.tolist() == [
        [11, "universal_negative", "There is no"],
        [12, "followup_without_request", "I need more information."],
    ]
    assert lint_frame([]).empty
    with pytest.raises(InputError, match="2 keys given for 3 texts"):
        lint_frame(texts, keys=["F1", "F1"])


# ---------------------------------------------------------------------------------------------
# The precision corpus
# ---------------------------------------------------------------------------------------------


def test_corpus_is_big_and_well_formed() -> None:
    assert len(CORPUS["good"]) >= 45
    assert len(CORPUS["bad"]) >= 45
    for item in CORPUS["good"] + CORPUS["bad"]:
        assert item.get("key") in (None, *REQUIRED_KEYS)
        assert item["text"].strip()
    for item in CORPUS["bad"]:
        assert item["rules"] and set(item["rules"]) <= set(RULES)
    per_rule = Counter(r for item in CORPUS["bad"] for r in item["rules"])
    assert all(per_rule[r] >= 5 for r in RULES), per_rule


def test_corpus_precision_and_recall_per_rule() -> None:
    caught: Counter[str] = Counter()
    missed: Counter[str] = Counter()
    false_alarms: Counter[str] = Counter()
    extra: Counter[str] = Counter()
    details: list[str] = []
    for item in CORPUS["good"]:
        for f in check(item["text"], item.get("key")):
            false_alarms[f.rule] += 1
            details.append(
                f"false alarm {f.rule}: {excerpt(item['text'], f)!r} in {item['text']!r}"
            )
    for item in CORPUS["bad"]:
        got = {f.rule for f in check(item["text"], item.get("key"))}
        for rule in item["rules"]:
            if rule in got:
                caught[rule] += 1
            else:
                missed[rule] += 1
                details.append(f"missed {rule}: {item['text']!r}")
        for rule in got - set(item["rules"]):
            extra[rule] += 1
            details.append(f"unexpected {rule} on a bad message: {item['text']!r}")

    lines = [
        f"wording lint on {len(CORPUS['good'])} good and {len(CORPUS['bad'])} bad messages",
        f"{'rule':<26}{'expected':>9}{'caught':>8}{'missed':>8}{'false alarms':>14}{'extra':>7}",
    ]
    for rule in RULES:
        expected = caught[rule] + missed[rule]
        lines.append(
            f"{rule:<26}{expected:>9}{caught[rule]:>8}{missed[rule]:>8}"
            f"{false_alarms[rule]:>14}{extra[rule]:>7}"
        )
    lines.append(
        f"{'total':<26}{caught.total() + missed.total():>9}{caught.total():>8}"
        f"{missed.total():>8}{false_alarms.total():>14}{extra.total():>7}"
    )
    print("\n" + "\n".join(lines + details))

    assert false_alarms.total() == 0, details
    assert missed.total() <= 2, details


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------

_WORDS = st.sampled_from(
    [
        "I",
        "cannot",
        "confirm",
        "there",
        "is",
        "no",
        "refund",
        "but",
        "usually",
        "60",
        "days",
        "Your",
        "question",
        "unclear",
        "Sarah",
        "Lee",
        "contact",
        "support@brightwave.example",
        "the",
        "Legal",
        "team",
        "score",
        "0.4",
        ".",
        ",",
        "?",
        "\n",
        "don’t",
        "exist",
        "POL-A@2",
        "+44",
        "20",
        "7946",
        "0321",
        "https://x.example/a",
        "{role}",
        "Dr.",
        "Okafor",
    ]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_WORDS, max_size=40).map(" ".join), st.sampled_from([None, *REQUIRED_KEYS]))
def test_lint_never_fails_and_spans_are_inside_the_text(text: str, key: str | None) -> None:
    found = check(text, key)
    assert found == sorted(found, key=lambda f: (f.start, f.end, f.rule))
    for f in found:
        assert 0 <= f.start < f.end <= len(text)
        assert f.rule in RULES
        if f.rule in KEY_ONLY_RULES:
            assert key == KEY_ONLY_RULES[f.rule]


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_lint_never_fails_on_arbitrary_text(text: str) -> None:
    for f in lint(text, key="E1"):
        assert 0 <= f.start < f.end <= len(text)


@settings(max_examples=100, deadline=None)
@given(st.lists(_WORDS, max_size=30).map(" ".join))
def test_curly_and_straight_apostrophes_give_the_same_findings(text: str) -> None:
    curly = text.replace("'", "\u2019")
    straight = text.replace("\u2019", "'")
    assert [(f.rule, f.start, f.end) for f in check(curly)] == [
        (f.rule, f.start, f.end) for f in check(straight)
    ]


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(CONTEXT["allowed_contacts"]))
def test_any_approved_contact_can_be_named(contact: str) -> None:
    text = f"I could not find that in your documents. Please contact {contact}."
    assert check(text, "E1") == []


_VALUE = st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=20).filter(
    lambda v: v.strip() != ""
)


@settings(max_examples=100, deadline=None)
@given(_VALUE, _VALUE)
def test_render_puts_each_value_in_exactly_once(topic: str, item: str) -> None:
    msg = load_wording(SHIPPED).message("R1")
    out = render(msg, {"topic": topic, "missing_item": item})
    prefix, _, suffix = msg.text.partition("{topic}")
    assert out.startswith(prefix + topic)
    assert out.endswith(suffix.split("{missing_item}")[-1])
    assert "{topic}" not in out.replace(topic, "").replace(item, "")


@settings(max_examples=50, deadline=None)
@given(st.lists(_WORDS, max_size=25).map(" ".join))
def test_lint_frame_matches_lint_text_by_text(text: str) -> None:
    texts = [text, "There is no refund.", text + " Your question is unclear."]
    frame = lint_frame(texts, keys=["F1", None, "E1"], **CONTEXT)
    expected = [
        (row, f.rule, f.start, f.end)
        for row, (t, k) in enumerate(zip(texts, ["F1", None, "E1"], strict=True))
        for f in check(t, k)
    ]
    assert list(frame[["row", "rule", "start", "end"]].itertuples(index=False, name=None)) == (
        expected
    )


def test_a_refusal_text_of_a_long_run_of_stops_is_checked_like_any_other() -> None:
    """Production refusal texts are imported: a run of '?' before a letter is read once by
    the sentence splitter (it was n² steps), and the rules still see both sentences."""
    findings = lint("We cannot help" + "?" * 100_000 + "a. Call +1 415 555 0132.", key="R1")
    assert [f.rule for f in findings] == [
        f.rule for f in lint("We cannot help?a. Call +1 415 555 0132.", key="R1")
    ]
