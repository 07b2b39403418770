"""The Wording page's draft as plain data: the keys offered, new keys refused with a reason,
edits kept only while they differ, example values, the live lint without clearance, and the
summary of a draft before it is proposed."""

from __future__ import annotations

from sqlalchemy import Engine

from review.wording import drafts, editing, versions
from review.wording import terms as wording_terms
from review.wording.findings import Finding
from review.wording.messages import EXAMPLE_VALUES, load_wording

TERMS = wording_terms.CorpusTerms(
    restricted_titles=("Project Falcon acquisition memo",),
    restricted_doc_ids=("MA-FALCON",),
    doc_ids=("MA-FALCON", "POL-REFUND"),
)


def test_key_meanings_and_the_keys_offered() -> None:
    ws = load_wording()
    assert editing.key_meaning("R3") == "answer blocked as ungrounded"
    assert editing.key_meaning("R2_BILLING") == "custom message"
    keys = editing.message_keys(ws, {"R2": {}, "R2_BILLING": {}})
    assert keys == [*ws.messages, "R2_BILLING"]


def test_a_new_key_is_refused_with_the_reason() -> None:
    keys = ["R1", "R2"]
    assert "capital letters, digits and _" in str(editing.new_key_problem("bad key", keys))
    assert "capital letters" in str(editing.new_key_problem("2FA", keys))
    assert editing.new_key_problem("R2", keys) == ("R2 exists already: pick it in the list above.")
    assert editing.new_key_problem("R2_BILLING", keys) is None


def test_the_editor_opens_with_the_draft_else_the_wording_in_force() -> None:
    base = load_wording().messages["R2"]
    assert editing.start_values({}, "R2", base) == (base.text, base.description)
    draft = {"R2": {"text": "edited", "description": "why"}}
    assert editing.start_values(draft, "R2", base) == ("edited", "why")
    assert editing.start_values({}, "NEW", None) == ("", "")


def test_the_draft_keeps_only_real_changes() -> None:
    base = load_wording().messages["R2"]
    draft: dict[str, dict[str, str]] = {}
    editing.record_edit(draft, "R2", "new text", base.description, base)
    assert draft == {"R2": {"text": "new text", "description": base.description}}
    editing.record_edit(draft, "R2", base.text, base.description, base)  # edited back
    assert draft == {}
    editing.record_edit(draft, "NEW", "", "", None)  # a new key stays, even empty
    assert draft == {"NEW": {"text": "", "description": ""}}


def test_example_values_fall_back_to_the_placeholder_name() -> None:
    assert editing.example_value("role") == EXAMPLE_VALUES["role"]
    assert editing.example_value("order_number") == "[order number]"


def test_the_live_lint_without_clearance_leaves_out_restricted_names(engine: Engine) -> None:
    current = versions.in_force(engine)
    text = "See the Project Falcon acquisition memo (MA-FALCON) or POL-REFUND@v2."
    cleared = editing.live_lint(current, TERMS, clearance=True)
    plain = editing.live_lint(current, TERMS, clearance=False)
    assert "Project Falcon acquisition memo" in cleared.restricted_titles
    assert cleared.doc_ids == ("MA-FALCON", "POL-REFUND")
    assert plain.restricted_titles == () and plain.doc_ids == ("POL-REFUND",)
    assert plain.allowed_contacts == tuple(current.wording.allowed_contacts)
    excerpts = {text[f.start : f.end] for f in cleared.lint(text, "R1")}
    assert "Project Falcon acquisition memo" in excerpts
    assert not any("Falcon" in text[f.start : f.end] for f in plain.lint(text, "R1"))


def test_the_preview_reports_only_rules_the_template_does_not_trip() -> None:
    a = Finding("universal_negative", 0, 5, "x")
    b = Finding("unlisted_contact", 6, 9, "y")
    c = Finding("universal_negative", 10, 12, "z")
    assert editing.preview_only_findings([a], [b, c]) == [b]
    assert editing.preview_only_findings([], [c]) == [c]


def test_draft_edits_keep_the_old_description_when_left_blank() -> None:
    edits = editing.draft_edits(
        {"R2": {"text": "t", "description": "  "}, "R9": {"text": "u", "description": "d"}}
    )
    assert edits == {"R2": drafts.MessageDraft("t", None), "R9": drafts.MessageDraft("u", "d")}


def test_the_draft_summary_lists_changes_lint_and_who_signs(engine: Engine) -> None:
    current = versions.in_force(engine)
    draft_text = drafts.draft_yaml(
        current.text, {"R2": drafts.MessageDraft("There is no such discount for {topic}.")}
    )
    summary = editing.summarize_draft(current, draft_text, TERMS)
    assert summary.changes[["key", "status"]].values.tolist() == [["R2", "changed"]]
    assert list(summary.changes["lint findings"]) == [summary.lint_total] != [0]
    # the shipped file has no signed parent: compliance signs the first version
    assert summary.compliance_reason.startswith("Compliance signs too: this is the first")
