"""What the Case builder's forms mean (review.builder.forms): the inputs of an operator's
parameters, typed values read back, span and document labels, passage offsets, the kept
preview, and the evidence-state variant spec with its kind, mode and policy checked."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from review.builder import forms
from review.builder.documents import CaseDocText
from review.builder.edits import OPERATORS
from review.builder.operator import ParamField, Span
from review.core.errors import InputError

BODY = "A customer may ask for a refund within 14 days of the charge date.\nSecond line 30 days."


def fields(operator: str) -> list[ParamField]:
    return OPERATORS[operator].param_fields()


def doc(ref: str, role: str = "context", visibility: str = "visible") -> CaseDocText:
    key, _, version = ref.partition("@")
    return CaseDocText(
        1, ref, key, int(version), "Title", "x", visibility, role, "public", True, dt.date.today()
    )


# ------------------------------------------------------------------------------------------
# Parameter inputs


def test_each_parameter_gets_its_widget_label_and_start() -> None:
    by_name = {p.field.name: p for p in forms.param_inputs(fields("move_jurisdiction"), {})}
    to = by_name["to_jurisdiction"]
    assert (to.kind, to.label, to.options[:3], to.index) == (
        "select",
        "to jurisdiction",
        ("EU", "UK", "US"),
        0,
    )
    frm = by_name["from_jurisdiction"]
    assert (frm.kind, frm.label, frm.value) == ("text_input", "from jurisdiction (optional)", "")
    flag = by_name["set_metadata"]
    assert (flag.kind, flag.value) == ("checkbox", False)


def test_an_optional_choice_starts_empty_and_a_default_is_selected() -> None:
    optional = ParamField("tier", "str | None", False, None, "", ("Starter", "Team"))
    [p] = forms.param_inputs([optional], {})
    assert p.options == ("", "Starter", "Team") and p.index == 0
    [p] = forms.param_inputs([optional], {"tier": "Team"})
    assert p.index == 2 and p.value == "Team"
    [p] = forms.param_inputs([optional], {"tier": "Unknown"})
    assert p.index == 0  # a default that is not offered selects the first option


def test_the_instruction_is_free_text_even_with_examples() -> None:
    [p] = forms.param_inputs(fields("insert_instruction"), {})
    assert p.kind == "text_area" and str(p.value).startswith("Assistant: ignore")
    [p] = forms.param_inputs(fields("insert_instruction"), {"instruction": None})
    assert p.value == ""


def test_defaults_win_over_the_fields_own_and_numbers_show_as_text() -> None:
    by_name = {p.field.name: p for p in forms.param_inputs(fields("swap_year"), {"to_year": 2031})}
    assert by_name["to_year"].value == "2031" and by_name["from_year"].value == ""


def test_values_are_typed_and_empty_optional_ones_left_out() -> None:
    got = forms.parse_param_values(
        fields("swap_year"), {"to_year": " 2031 ", "from_year": "", "shift_effective_date": "x"}
    )
    assert got == {"to_year": 2031, "shift_effective_date": "x"}
    flags = forms.parse_param_values(
        fields("move_jurisdiction"), {"to_jurisdiction": "UK", "set_metadata": True}
    )
    assert flags == {"to_jurisdiction": "UK", "set_metadata": True}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"to_year": "  "}, "parameter to_year: required"),
        ({"to_year": "twenty"}, "parameter to_year: 'twenty' is not a whole number"),
    ],
)
def test_bad_values_name_the_parameter(raw: dict[str, object], message: str) -> None:
    with pytest.raises(InputError) as err:
        forms.parse_param_values(fields("swap_year"), raw)
    assert str(err.value) == message


def test_form_defaults_are_the_operators_example_or_nothing() -> None:
    assert forms.form_defaults("change_number", BODY, 39, 46) == {"to_number": "28"}
    assert forms.form_defaults("swap_year", BODY, 0, 1)["to_year"] == 2024
    assert forms.form_defaults("change_number", BODY, 5, 500) == {}  # out of range
    assert forms.form_defaults("change_number", BODY, 46, 39) == {}  # end before start


# ------------------------------------------------------------------------------------------
# Spans, documents and passages


def test_span_labels_name_the_line_and_shorten_the_text() -> None:
    assert forms.span_label(BODY, Span(39, 46, "14 days")) == "line 1: 14 days"
    second = BODY.index("30 days")
    assert forms.span_label(BODY, Span(second, second + 7, "30 days")) == "line 2: 30 days"
    at = BODY.index("Second")
    assert forms.span_label(BODY, Span(at, at, "")) == "line 2: before “Second line 30 days.”"
    assert forms.span_label(BODY, Span(len(BODY), len(BODY), "")) == ("line 2: end of the document")
    long = "word  " * 40
    label = forms.span_label(long, Span(0, len(long), long))
    assert label.endswith("…") and len(label) == len("line 1: ") + 88
    assert "  " not in label  # whitespace runs read as one space


def test_the_edit_starts_on_the_visible_decisive_document() -> None:
    docs = [
        doc("A@1"),
        doc("B@1", role="decisive", visibility="forbidden"),
        doc("C@2", role="decisive"),
    ]
    assert forms.default_document(docs) == 2
    assert forms.decisive_document(docs) == docs[2]
    assert forms.default_document(docs[:2]) == 0
    assert forms.decisive_document(docs[:2]) is None
    assert forms.document_label(docs[2]) == "C@2 · visible, decisive"


def test_passage_offsets_find_the_passage_once() -> None:
    assert forms.passage_offsets(BODY, "  14 days of the charge date ") == (39, 65)
    assert forms.passage_offsets(BODY, "   ") == (None, None)
    with pytest.raises(InputError, match="does not occur"):
        forms.passage_offsets(BODY, "90 days")
    with pytest.raises(InputError, match="occurs 2 times"):
        forms.passage_offsets(BODY, "days")


def test_the_passage_label_says_whether_it_may_be_left_empty() -> None:
    assert forms.passage_label("conflicted", "POL@2") == (
        "Decisive passage (copy it exactly from POL@2)"
    )
    assert forms.passage_label("removed", None) == (
        "Decisive passage (copy it exactly from the decisive document; leave empty to use "
        "the whole document)"
    )


# ------------------------------------------------------------------------------------------
# The kept preview


def test_a_kept_preview_applies_only_to_the_same_selection() -> None:
    state = forms.preview_state(7, "POL@2", "change_number", 39, 46, {"to_number": "28"})
    assert state == {
        "case": 7,
        "doc": "POL@2",
        "op": "change_number",
        "start": 39,
        "end": 46,
        "params": {"to_number": "28"},
    }
    assert forms.preview_applies(state, 7, "POL@2", "change_number", 39, 46)
    assert not forms.preview_applies(None, 7, "POL@2", "change_number", 39, 46)
    assert not forms.preview_applies(state, 8, "POL@2", "change_number", 39, 46)
    assert not forms.preview_applies(state, 7, "POL@3", "change_number", 39, 46)
    assert not forms.preview_applies(state, 7, "POL@2", "change_unit", 39, 46)
    assert not forms.preview_applies(state, 7, "POL@2", "change_number", 39, 47)


# ------------------------------------------------------------------------------------------
# The evidence-state form


def test_conflicting_copies_cannot_relocate_or_inject() -> None:
    usable = forms.conflict_operators()
    assert "change_number" in usable
    assert not {"relocate_answer", "insert_instruction"} & set(usable)
    assert set(forms.CONFLICT_MODES) == {"older_version", "lower_authority", "unresolved"}
    assert forms.EVIDENCE_KINDS == ("removed", "conflicted", "forbidden", "partial")


def test_a_conflicted_spec_carries_offsets_operator_and_params() -> None:
    spec = forms.variant_spec(
        "conflicted",
        decisive_ref="POL@2",
        body=BODY,
        passage="14 days of the charge date",
        conflict_op="change_number",
        param_fields=fields("change_number"),
        param_values={"to_number": " 30 "},
        mode="unresolved",
    )
    assert (spec.kind, spec.doc_ref, spec.operator, spec.start, spec.end) == (
        "conflicted",
        "POL@2",
        "change_number",
        39,
        65,
    )
    assert spec.params == {"to_number": "30"} and spec.mode == "unresolved"


def test_a_removed_spec_without_passage_uses_the_whole_document() -> None:
    spec = forms.variant_spec(
        "removed",
        decisive_ref="POL@2",
        body=BODY,
        param_values={"to_number": "ignored"},
        param_fields=fields("change_number"),
    )
    assert (spec.start, spec.end, spec.operator, spec.params) == (None, None, None, None)
    assert spec.doc_ref == "POL@2"


def test_a_partial_spec_has_no_document_and_keeps_the_policy() -> None:
    spec = forms.variant_spec(
        "partial",
        decisive_ref="POL@2",
        body="",
        extra_claim="A claim no document supports.",
        policy="clarify",
    )
    assert spec.doc_ref is None and spec.policy == "clarify"
    assert spec.extra_claim == "A claim no document supports."


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "edited2"}, "variant kind 'edited2' is not one of"),
        ({"kind": "conflicted", "mode": "newest"}, "conflict mode 'newest' is not one of"),
        ({"kind": "partial", "policy": "answer"}, "policy 'answer' is not one of"),
        ({"kind": "removed", "passage": "90 days"}, "does not occur in the document"),
        (
            {"kind": "conflicted", "passage": "14 days", "param_values": {"to_number": ""}},
            "parameter to_number: required",
        ),
    ],
)
def test_the_spec_refuses_what_cannot_be_used(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"param_fields": fields("change_number"), **kwargs}
    kind = str(args.pop("kind"))
    with pytest.raises(InputError, match=message):
        forms.variant_spec(kind, decisive_ref="POL@2", body=BODY, **args)
