"""The "Edit a document" tab of a base case: pick a document, an operator and a span, preview
the edit, then save it as a variant of the family or as an edited document only."""

from __future__ import annotations

from typing import Any

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from pages.builder.nav import focus_variant, go, leave_message
from pages.builder.params import param_widgets
from pages.builder.preview import show_group_preview
from review.builder import diffs, documents, forms, suggestions, tables, variants
from review.builder.edits import OPERATORS
from review.builder.operator import Suggestion, operator_label
from review.cases import cases
from review.core.errors import WorkbenchError
from review.core.identity import Actor, Permission
from review.core.taxonomy import Taxonomy
from review.policy import inforce

PREVIEW_KEY = "bld_preview"


SAVED_DOCS = "bld_save_doc"  # the "save the edited documents only" button


def pick_span(
    view: cases.CaseView,
    doc: documents.CaseDocText,
    op_name: str,
    *,
    label: str = "Candidate spans",
    reference: str | None = None,
) -> tuple[int, int, str] | None:
    """The span to edit: a candidate of the operator or offsets typed by hand; None (after
    an error) when the offsets cannot be used. ``reference``: the span chosen in the first
    document, for the picker of another decisive document to start on a similar one."""
    body = doc.body or ""
    spans = OPERATORS[op_name].candidates(body)[: forms.MAX_CANDIDATES]
    labels = forms.span_labels(body, spans)  # each different: told apart by their context
    if not spans:
        st.warning(ui.plain(forms.no_candidates(op_name, doc.ref)))
    start_on = forms.default_candidate(body, spans, reference) if reference and spans else 0
    suffix = "" if reference is None else "_also"
    choice = st.selectbox(
        f"{ui.plain(label)} ({len(spans):d} found by {ui.plain(operator_label(op_name))})",
        [*range(len(spans)), forms.CUSTOM],
        index=start_on,
        format_func=lambda i: "Custom offsets…" if i == forms.CUSTOM else labels[i],
        key=f"bld_span_{view.id}_{doc.ref}_{op_name}{suffix}",
    )
    if choice == forms.CUSTOM:
        c3, c4 = st.columns(2)
        where = "" if reference is None else " in " + ui.plain(doc.ref)
        start = int(
            c3.number_input(
                "Start offset" + where, 0, len(body), 0, key=f"bld_custom_start{suffix}_{doc.ref}"
            )
        )
        end = int(
            c4.number_input(
                "End offset" + where, 0, len(body), 0, key=f"bld_custom_end{suffix}_{doc.ref}"
            )
        )
        if end < start:
            ui.error(f"The end offset{where} must not be before the start offset.")
            return None
        return start, end, body[start:end]
    sp = spans[int(choice)]
    return sp.start, sp.end, sp.text


def more_documents(
    view: cases.CaseView,
    docs: list[documents.CaseDocText],
    doc: documents.CaseDocText,
    op_name: str,
    reference: str,
) -> list[tuple[documents.CaseDocText, int, int]] | None:
    """The other decisive documents the same edit works on (default: all the user may read),
    each with its span; None (after an error) when a span cannot be used."""
    others, hidden = forms.decisive_group(docs, doc.ref)
    if hidden:
        st.info(
            f"{ui.plain(', '.join(hidden))} also carry the answer but are restricted: you may "
            "not read or edit them, so a variant made here keeps the evidence there. A user "
            "with clearance can edit them."
        )
    if not others:
        return []
    op = OPERATORS[op_name]
    found = [d.ref for d in others if op.candidates(d.body or "")]
    if len(found) < len(others):
        missing = ", ".join(d.ref for d in others if d.ref not in found)
        st.warning(
            f"{ui.plain(op.label)} finds no {ui.plain(op.finds)} in {ui.plain(missing)}: left "
            "out of the edit to start with, so the answer stays there unless you add them and "
            "type their offsets."
        )
    chosen = st.multiselect(
        "Also take it out of these decisive documents (one edit: one diff and one provenance "
        "record each; the answer stays in any left out)",
        [d.ref for d in others],
        default=found,
        key=f"bld_also_{view.id}_{doc.ref}_{op_name}",
    )
    out: list[tuple[documents.CaseDocText, int, int]] = []
    for d in others:
        if d.ref not in chosen:
            continue
        picked = pick_span(view, d, op_name, label=f"Span in {d.ref}", reference=reference)
        if picked is None:
            return None
        out.append((d, picked[0], picked[1]))
    return out


def edit_tab(
    engine: Engine,
    actor: Actor,
    tax: Taxonomy,
    view: cases.CaseView,
    docs: list[documents.CaseDocText],
) -> None:
    readable = [d for d in docs if d.readable]
    if not readable:
        st.info("You may not read any document of this case (restricted; needs clearance).")
        return
    c1, c2 = st.columns([1, 1])
    doc = c1.selectbox(
        "Document to edit",
        readable,
        index=forms.default_document(readable),
        format_func=forms.document_label,
        key=f"bld_doc_{view.id}",
    )
    op_name = c2.selectbox(
        "Operator", list(OPERATORS), format_func=operator_label, key=f"bld_op_{view.id}"
    )
    op = OPERATORS[op_name]
    st.caption(ui.plain(op.description))
    body = doc.body or ""
    picked = pick_span(view, doc, op_name)
    if picked is None:
        return
    start, end, sel_text = picked
    st.caption("Selected span (verbatim)")
    st.code(sel_text if sel_text else "(a position between blocks)", language=None, wrap_lines=True)
    more = more_documents(view, docs, doc, op_name, sel_text)
    if more is None:
        return
    also = [(d.ref, a, b) for d, a, b in more]
    items = [(doc.ref, body, start, end)] + [(d.ref, d.body or "", a, b) for d, a, b in more]
    others = [r for r in forms.other_decisive(docs, doc.ref) if r not in {a[0] for a in also}]
    defaults = forms.form_defaults(op_name, body, start, end)
    form_key = f"bld_params_{view.id}_{doc.ref}_{op_name}_{start}_{end}"
    fields = op.param_fields()
    with st.form(form_key):
        values = param_widgets(fields, defaults, form_key)
        go_preview = st.form_submit_button("Preview the edit", type="primary")
    # "Save the edited documents only" sits under the preview, which the save closes: what
    # it saved is said here, where the preview and its button were
    ui.under(SAVED_DOCS)
    if go_preview:
        try:
            params = forms.parse_param_values(fields, values)
            diffs.preview_group(items, op_name, params, other_decisive=others)
        except WorkbenchError as exc:
            st.session_state.pop(PREVIEW_KEY, None)
            ui.show_error(exc, "Nothing changed. ")
        else:
            st.session_state[PREVIEW_KEY] = forms.preview_state(
                view.id, doc.ref, op_name, start, end, params, also
            )
    state = st.session_state.get(PREVIEW_KEY)
    if state is None or not forms.preview_applies(
        state, view.id, doc.ref, op_name, start, end, also
    ):
        return
    group = diffs.preview_group(items, op_name, state["params"], other_decisive=others)
    show_group_preview(group, tax, _freshness(engine, view, doc.ref, group.suggestion))
    if not actor.can(Permission.edit_cases):
        st.info("Saving variants needs a role that may edit cases (annotator, reviewer, admin).")
        return
    save_buttons(engine, actor, tax, view, doc, state)


def _freshness(
    engine: Engine, view: cases.CaseView, ref: str, suggestion: Suggestion
) -> str | None:
    """The policy's age limits for the edited document, when the edit suggests stale evidence
    (read only then: the policy in force is not needed for other previews)."""
    if "evidence_stale" not in suggestion.reason_codes:
        return None
    authority = next((d.authority for d in view.documents if d.ref == ref), None)
    try:
        policy = inforce.in_force(engine).policy
    except WorkbenchError:
        return None  # no verified policy: the Thresholds page says why
    return suggestions.freshness_note(policy, authority, suggestion, view.claim_kinds)


def save_buttons(
    engine: Engine,
    actor: Actor,
    tax: Taxonomy,
    view: cases.CaseView,
    doc: documents.CaseDocText,
    state: dict[str, Any],
) -> None:
    """Save the previewed edit as a variant of the family, or (for corpus editors) as an
    edited document only."""
    several = bool(state.get("also"))
    as_version = st.checkbox(
        "Save each derived document as the next version of its document instead of a new "
        "document -CF-n"
        if several
        else f"Save the derived document as the next version of {ui.plain(doc.doc_key)} "
        f"instead of a new document {ui.plain(doc.doc_key)}-CF-n",
        key="bld_as_version",
        help="Only from the newest version of each; the new versions become current in the "
        "corpus. One version not the newest, and none is saved.",
    )
    c5, c6 = st.columns(2)
    if c5.button(
        f"Save as a variant of {ui.plain(view.family or 'the family')}",
        type="primary",
        key="bld_save",
    ):
        spec = variants.VariantSpec(
            "edited",
            doc_ref=doc.ref,
            operator=state["op"],
            start=state["start"],
            end=state["end"],
            params=state["params"],
            as_new_version=as_version,
            also=tuple(variants.MoreDoc(r, a, b) for r, a, b in state.get("also", [])),
        )
        saved = ui.transact(lambda s: variants.build_variant(s, actor, tax, view.id, spec))
        if saved is not None:
            st.session_state.pop(PREVIEW_KEY, None)
            leave_message(
                f"Saved {saved.key} (draft; "
                f"{tables.evidence_state_label(tax, saved.evidence_state)}; suggested "
                f"{tables.decision_label(tax, saved.suggested_decision)}) with "
                f"{', '.join(saved.documents) or 'no new document'}. Confirm its label below."
            )
            focus_variant(saved.case_id)
            go(family=view.family or "")
    if actor.can(Permission.edit_corpus) and c6.button(
        "Save the edited documents only" if several else "Save the edited document only",
        key="bld_save_doc",
    ):
        spans = [(doc.ref, state["start"], state["end"])]
        spans += [(r, a, b) for r, a, b in state.get("also", [])]
        saved_docs = ui.transact(
            lambda s: documents.save_edits(
                s, actor, tax, spans, state["op"], state["params"], as_new_version=as_version
            )
        )
        if saved_docs is not None:
            st.session_state.pop(PREVIEW_KEY, None)
            ui.said(SAVED_DOCS, tables.saved_documents_message(saved_docs))
            st.rerun()
