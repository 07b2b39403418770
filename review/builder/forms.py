"""What the Case builder's forms mean, apart from drawing them: the input each operator
parameter needs, typed values read back from what was typed, labels of candidate spans, the
document a form starts on, passage offsets, the preview a selection still matches, and the
variant spec of the evidence-state form (its kind, conflict mode and policy checked)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

from review.builder.documents import CaseDocText
from review.builder.edits import OPERATORS
from review.builder.operator import ParamField, Params, ParamValue, Span, find_span, span_at
from review.builder.variants import Kind, MoreDoc, VariantSpec
from review.core.errors import InputError

__all__ = [
    "CONFLICT_MODES",
    "CUSTOM",
    "EVIDENCE_KINDS",
    "MAX_CANDIDATES",
    "PARTIAL_POLICIES",
    "ConflictMode",
    "ParamInput",
    "PartialPolicy",
    "chosen_label",
    "conflict_operators",
    "decisive_document",
    "decisive_documents",
    "decisive_group",
    "default_candidate",
    "default_document",
    "document_label",
    "form_defaults",
    "left_out_warning",
    "no_candidates",
    "other_decisive",
    "param_inputs",
    "parse_param_values",
    "passage_label",
    "passage_offsets",
    "preview_applies",
    "preview_state",
    "span_label",
    "span_labels",
    "variant_spec",
]

MAX_CANDIDATES = 300  # candidate spans offered in the picker
CUSTOM = "custom"  # the picker's entry for offsets typed by hand

ConflictMode = Literal["older_version", "lower_authority", "unresolved"]
PartialPolicy = Literal["abstain", "clarify", "partial"]

# The evidence-state variants built by the form (an edited variant comes from the edit tab)
EVIDENCE_KINDS: tuple[Kind, ...] = ("removed", "conflicted", "forbidden", "partial")
CONFLICT_MODES: dict[ConflictMode, str] = {
    "older_version": "an older, superseded version (the current one controls)",
    "lower_authority": "a lower-authority source (the original controls)",
    "unresolved": "same date and authority (neither controls)",
}
PARTIAL_POLICIES: tuple[PartialPolicy, ...] = ("partial", "abstain", "clarify")
# Operators that cannot make the conflicting copy of a passage
_NOT_FOR_CONFLICTS = ("relocate_answer", "insert_instruction")


# ------------------------------------------------------------------------------------------
# Operator parameters: the inputs a form shows and the values read back


WidgetKind = Literal["checkbox", "select", "text_area", "text_input"]


@dataclass(frozen=True)
class ParamInput:
    """One parameter as a form input: which widget, its label and starting value."""

    field: ParamField
    kind: WidgetKind
    label: str
    value: str | bool  # a checkbox starts checked or not; every other input with text
    options: tuple[str, ...] = ()  # a select's options ("" first when optional)
    index: int = 0  # the option selected at the start


def param_inputs(
    fields: Sequence[ParamField], defaults: Mapping[str, ParamValue]
) -> list[ParamInput]:
    """The inputs for an operator's parameters, starting from ``defaults`` (else the field's
    own default). The instruction is free text even though it offers examples."""
    out: list[ParamInput] = []
    for f in fields:
        default = defaults.get(f.name, f.default)
        label = f.name.replace("_", " ") + ("" if f.required else " (optional)")
        if f.type == "bool":
            out.append(ParamInput(f, "checkbox", label, bool(default)))
        elif f.choices and f.name != "instruction":
            options = tuple(f.choices) if f.required else ("", *f.choices)
            value = str(default) if default is not None else ""
            index = options.index(value) if value in options else 0
            out.append(ParamInput(f, "select", label, value, options, index))
        elif f.name == "instruction":
            out.append(ParamInput(f, "text_area", label, str(default or "")))
        else:
            out.append(ParamInput(f, "text_input", label, "" if default is None else str(default)))
    return out


def parse_param_values(
    fields: Sequence[ParamField], raw: Mapping[str, object]
) -> dict[str, ParamValue]:
    """Typed params from what the inputs hold; InputError names the field. An empty optional
    field is left out (the operator's default applies)."""
    out: dict[str, ParamValue] = {}
    for f in fields:
        if f.name not in raw:
            continue
        value = raw[f.name]
        if f.type == "bool":
            out[f.name] = bool(value)
            continue
        text = str(value).strip()
        if not text:
            if f.required:
                raise InputError(f"parameter {f.name}: required")
            continue
        if f.type.startswith("int"):
            try:
                out[f.name] = int(text)
            except ValueError:
                raise InputError(f"parameter {f.name}: {text!r} is not a whole number") from None
        else:
            out[f.name] = text
    return out


def form_defaults(operator: str, body: str, start: int, end: int) -> dict[str, ParamValue]:
    """The operator's example params for ``body[start:end]``; empty when it has none there."""
    try:
        params: Params = OPERATORS[operator].example_params(body, span_at(body, start, end))
    except InputError:
        return {}
    return params.to_dict()


# ------------------------------------------------------------------------------------------
# Documents, spans and passages


def span_label(body: str, span: Span) -> str:
    """A candidate span as the picker lists it: its line and (shortened) text."""
    line = body.count("\n", 0, span.start) + 1
    if span.start == span.end:
        nxt = body[span.start : span.start + 50].split("\n", 1)[0]
        return f"line {line}: before “{nxt}”" if nxt else f"line {line}: end of the document"
    text = " ".join(span.text.split())
    text = text if len(text) <= 90 else text[:87] + "…"
    return f"line {line}: {text}"


_WS_RE = re.compile(r"\s+")

#: Characters of the surrounding text a short candidate's label shows on either side
LABEL_CONTEXT = 36

#: A candidate of fewer words than this (a year, a tier, a figure) is labelled with the
#: words around it: alone it reads the same as every other occurrence
SHORT_SPAN_WORDS = 6


def _around(body: str, span: Span) -> str:
    """The span inside the words around it on its line: "…final of «2018» was played…"."""
    line_start = body.rfind("\n", 0, span.start) + 1
    line_end = body.find("\n", span.end)
    line_end = len(body) if line_end < 0 else line_end
    a = max(line_start, span.start - LABEL_CONTEXT)
    b = min(line_end, span.end + LABEL_CONTEXT)
    if a > line_start:  # start on a whole word
        cut = body.find(" ", a, span.start)
        a = cut + 1 if cut >= 0 else a
    if b < line_end:
        cut = body.rfind(" ", span.end, b)
        b = cut if cut >= 0 else b
    left = _WS_RE.sub(" ", body[a : span.start])  # spacing as written: "«Starter», Team"
    right = _WS_RE.sub(" ", body[span.end : b])
    inner = " ".join(span.text.split())
    text = f"{left}«{inner}»{right}".strip()
    return ("…" if a > line_start else "") + text + ("…" if b < line_end else "")


def span_labels(body: str, spans: Sequence[Span]) -> list[str]:
    """The labels of a picker's candidate spans, each different from the others: a short
    span (a year, a figure) shows the words around it, and two that still read the same
    (the same words twice on a line) say where they start."""
    labels = [
        span_label(body, sp) + (f" · {_around(body, sp)}" if _is_short(sp) else "") for sp in spans
    ]
    seen: dict[str, int] = {}
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
    return [
        f"{label} · character {sp.start:,}" if seen[label] > 1 else label
        for label, sp in zip(labels, spans, strict=True)
    ]


def _is_short(span: Span) -> bool:
    return span.start != span.end and len(span.text.split()) < SHORT_SPAN_WORDS


def no_candidates(operator: str, doc_ref: str) -> str:
    """Why an operator offers no candidate span in a document, and what to do instead."""
    op = OPERATORS[operator]
    return (
        f"{op.label} finds no {op.finds} in {doc_ref}, so it has nothing to preview here: "
        "choose another document or operator, or type the offsets of a span by hand "
        "(Custom offsets…)."
    )


def document_label(doc: CaseDocText) -> str:
    return f"{doc.ref} · {doc.visibility}, {doc.role}"


def _is_decisive(doc: CaseDocText) -> bool:
    return doc.role == "decisive" and doc.visibility == "visible"


def default_document(docs: Sequence[CaseDocText]) -> int:
    """The index of the document an edit starts on: the first visible decisive one, else 0."""
    return next((i for i, d in enumerate(docs) if _is_decisive(d)), 0)


def decisive_document(docs: Sequence[CaseDocText]) -> CaseDocText | None:
    """The case's visible decisive document (readable or not), if it has one."""
    return next((d for d in docs if _is_decisive(d)), None)


def decisive_documents(docs: Sequence[CaseDocText]) -> list[CaseDocText]:
    """Every visible decisive document of the case (readable or not)."""
    return [d for d in docs if _is_decisive(d)]


def other_decisive(docs: Sequence[CaseDocText], doc_ref: str) -> list[str]:
    """The case's visible decisive documents other than ``doc_ref``: they still carry the
    answer whatever an edit of ``doc_ref`` does."""
    return [d.ref for d in docs if _is_decisive(d) and d.ref != doc_ref]


def decisive_group(
    docs: Sequence[CaseDocText], doc_ref: str
) -> tuple[list[CaseDocText], list[str]]:
    """What one edit of ``doc_ref`` can also take the answer out of: the case's other visible
    decisive documents the user may read, and the references of those they may not (restricted:
    they still carry the answer, and only a user with clearance can edit them). Nothing when
    ``doc_ref`` is not itself a visible decisive document."""
    if not any(d.ref == doc_ref and _is_decisive(d) for d in docs):
        return [], []
    others = [d for d in docs if _is_decisive(d) and d.ref != doc_ref]
    return [d for d in others if d.readable], [d.ref for d in others if not d.readable]


def chosen_label(kind: str) -> str:
    """The label of the evidence-state form's picker of decisive documents."""
    return {
        "removed": "Decisive documents to take the answer out of (one edit; default: all)",
        "conflicted": "Decisive documents to contest with a conflicting copy (one edit; "
        "default: all)",
        "forbidden": "Decisive documents to forbid to the identity (default: all)",
    }[kind]


def left_out_warning(kind: str, kept: Sequence[str], mode: str = "older_version") -> str | None:
    """What leaving decisive documents (``kept``) out of an evidence-state variant does; None
    when it changes nothing (a conflict the originals control leaves every one usable)."""
    if not kept:
        return None
    refs = ", ".join(kept)
    one = len(kept) == 1
    if kind == "conflicted":
        if mode != "unresolved":
            return None
        return (
            f"{refs} {'is' if one else 'are'} not contested: {'it' if one else 'they'} still "
            f"settle{'s' if one else ''} the answer alone, so the suggestion stays the base "
            "case's decision and the family check flags it."
        )
    return (
        f"{refs} still carr{'ies' if one else 'y'} the answer: a variant without "
        f"{'it' if one else 'them'} keeps the evidence, so its suggestion stays the base "
        "case's decision and the family check flags it."
    )


_WORD_RE = re.compile(r"\w+")


def default_candidate(body: str, spans: Sequence[Span], reference: str) -> int:
    """The candidate a picker starts on in another decisive document: the one sharing the
    most words with the span chosen in the first (``reference``), else the first. Only where
    the picker starts: the expert sees every document's diff before anything is saved."""
    want = {w.casefold() for w in _WORD_RE.findall(reference)}
    best, score = 0, 0
    for i, sp in enumerate(spans):
        got = len(want & {w.casefold() for w in _WORD_RE.findall(sp.text)})
        if got > score:
            best, score = i, got
    return best


def passage_offsets(body: str, passage: str) -> tuple[int | None, int | None]:
    """Where ``passage`` (stripped) occurs in ``body``: (None, None) for an empty passage;
    InputError when it does not occur exactly once."""
    if not passage.strip():
        return None, None
    span = find_span(body, passage.strip())
    return span.start, span.end


def passage_label(kind: str, decisive_ref: str | None) -> str:
    """The label of the decisive-passage box of the evidence-state form."""
    return f"Decisive passage (copy it exactly from {decisive_ref or 'the decisive document'}" + (
        ")" if kind == "conflicted" else "; leave empty to use the whole document)"
    )


# ------------------------------------------------------------------------------------------
# The preview kept between runs


def preview_state(
    case_id: int,
    doc_ref: str,
    operator: str,
    start: int,
    end: int,
    params: Mapping[str, ParamValue],
    also: Sequence[tuple[str, int, int]] = (),
) -> dict[str, Any]:
    """What is kept of a previewed edit until it is saved or the selection changes; ``also``:
    the other documents of the same edit (reference, start, end)."""
    state: dict[str, Any] = {
        "case": case_id,
        "doc": doc_ref,
        "op": operator,
        "start": start,
        "end": end,
        "params": dict(params),
    }
    if also:
        state["also"] = [list(a) for a in also]
    return state


def preview_applies(
    state: Mapping[str, Any] | None,
    case_id: int,
    doc_ref: str,
    operator: str,
    start: int,
    end: int,
    also: Sequence[tuple[str, int, int]] = (),
) -> bool:
    """Whether a kept preview is of the current selection (case, documents, operator, spans)."""
    if not state or state["case"] != case_id or state["doc"] != doc_ref:
        return False
    if [list(a) for a in also] != list(state.get("also", [])):
        return False
    return bool((state["op"], state["start"], state["end"]) == (operator, start, end))


# ------------------------------------------------------------------------------------------
# The evidence-state form


def conflict_operators() -> list[str]:
    """Operators that can make the conflicting copy of the decisive passage."""
    return [n for n in OPERATORS if n not in _NOT_FOR_CONFLICTS]


def _one_of(value: str, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise InputError(f"{what} {value!r} is not one of: {', '.join(allowed)}")
    return value


def variant_spec(
    kind: str,
    *,
    decisive_ref: str | None,
    body: str,
    passage: str = "",
    conflict_op: str = "change_number",
    param_fields: Sequence[ParamField] = (),
    param_values: Mapping[str, object] | None = None,
    mode: str = "older_version",
    extra_claim: str = "",
    extra_question: str = "",
    question: str = "",
    policy: str = "partial",
    also: Sequence[tuple[str, str, str]] = (),
) -> VariantSpec:
    """The spec of an evidence-state variant from the form: the passage's offsets in the
    decisive ``body``, the conflicting copy's params (conflicted only) and the checked kind,
    mode and policy. InputError says what cannot be used."""
    checked_kind = cast(Kind, _one_of(kind, get_args(Kind), "variant kind"))
    checked_mode = cast(ConflictMode, _one_of(mode, get_args(ConflictMode), "conflict mode"))
    checked_policy = cast(PartialPolicy, _one_of(policy, get_args(PartialPolicy), "policy"))
    start, end = passage_offsets(body, passage) if passage else (None, None)
    params = parse_param_values(param_fields, param_values or {}) if kind == "conflicted" else None
    more: list[MoreDoc] = []
    for ref, more_body, more_passage in also:  # (reference, body, passage) of each other
        try:
            a, b = passage_offsets(more_body, more_passage)
        except InputError as exc:
            raise InputError(f"{ref}: {exc}") from None
        more.append(MoreDoc(ref, a, b))
    return VariantSpec(
        checked_kind,
        doc_ref=decisive_ref if kind != "partial" else None,
        operator=conflict_op if kind == "conflicted" else None,
        start=start,
        end=end,
        params=params,
        mode=checked_mode,
        extra_claim=extra_claim,
        extra_question=extra_question,
        question=question,
        policy=checked_policy,
        also=tuple(more),
    )
