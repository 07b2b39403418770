"""The "Evidence-state variant" tab of a base case: preview, then build, a removed, conflicted,
forbidden or partial variant of the family from the decisive documents (all, or a chosen set)."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from pages.builder.nav import focus_variant, go, leave_message
from pages.builder.params import param_widgets
from pages.builder.preview import show_variant_preview
from review.builder import documents, forms, tables, variants
from review.builder.edits import OPERATORS
from review.builder.operator import ParamField, operator_label
from review.cases import cases
from review.core.identity import Actor, Permission
from review.core.taxonomy import Taxonomy


def family_tab(
    engine: Engine,
    actor: Actor,
    tax: Taxonomy,
    view: cases.CaseView,
    docs: list[documents.CaseDocText],
) -> None:
    if not actor.can(Permission.edit_cases):
        st.info("Building variants needs a role that may edit cases.")
        return
    decisive = forms.decisive_document(docs)
    kind = st.radio(
        "Evidence state",
        list(forms.EVIDENCE_KINDS),
        horizontal=True,
        format_func=lambda k: ui.plain(tax.evidence_states[k].label),
        key=f"bld_kind_{view.id}",
    )
    st.caption(ui.plain(tax.evidence_states[kind].definition))
    conflict_op, mode = "change_number", "older_version"
    if kind == "conflicted":
        usable = forms.conflict_operators()
        c1, c2 = st.columns(2)
        conflict_op = c1.selectbox(
            "Operator for the conflicting copy",
            usable,
            index=usable.index("change_number"),
            format_func=operator_label,
            key=f"bld_conflict_op_{view.id}",
        )
        mode = c2.selectbox(
            "How the conflict reads",
            list(forms.CONFLICT_MODES),
            format_func=lambda m: forms.CONFLICT_MODES[m],
            key=f"bld_conflict_mode_{view.id}",
        )
    several = forms.decisive_documents(docs)
    more: list[documents.CaseDocText] = []
    if kind != "partial" and len(several) > 1:
        picked = chosen_documents(view, kind, mode, several)
        if not picked:
            return
        decisive, more = picked[0], picked[1:]
    if kind != "partial" and (decisive is None or not decisive.readable):
        st.info("This case has no visible decisive document you may read.")
        return
    body = decisive.body if decisive is not None and decisive.body is not None else ""
    fields: list[ParamField] = []
    values: dict[str, object] = {}
    with st.form(f"bld_family_form_{view.id}_{kind}_{conflict_op}"):
        passage = ""
        policy = "partial"
        extra_claim = extra_question = question = ""
        if kind in ("removed", "conflicted", "forbidden"):
            passage = st.text_area(
                ui.plain(forms.passage_label(kind, decisive.ref if decisive else None)), height=80
            )
        more_passages = [
            (
                d.ref,
                d.body or "",
                st.text_area(ui.plain(forms.passage_label(kind, d.ref)), height=80),
            )
            for d in more
        ]
        if kind == "conflicted":
            fields = OPERATORS[conflict_op].param_fields()
            values = param_widgets(fields, {}, f"bld_conf_{conflict_op}")
        if kind == "partial":
            st.caption("Current required claims")
            for i, c in enumerate(view.required_claims, 1):
                st.text(f"{i}. {c}")
            extra_claim = st.text_input("New required claim that no document supports")
            extra_question = st.text_input(
                "Second part of the question (joined to the current question with 'and')"
            )
            question = st.text_input("…or the whole new question (replaces the question)")
            policy = st.selectbox(
                "Product policy for partial support",
                list(forms.PARTIAL_POLICIES),
                format_func=lambda k: tables.decision_label(tax, k),
            )
        c3, c4 = st.columns(2)
        previewed = c3.form_submit_button("Preview the variant")
        submitted = c4.form_submit_button("Build and save the variant", type="primary")
    if not (submitted or previewed):
        return
    with ui.reported("Nothing changed. " if previewed else "Nothing was saved. "):
        spec = forms.variant_spec(
            kind,
            decisive_ref=decisive.ref if decisive is not None else None,
            body=body,
            passage=passage,
            conflict_op=conflict_op,
            param_fields=fields,
            param_values=values,
            mode=mode,
            extra_claim=extra_claim,
            extra_question=extra_question,
            question=question,
            policy=policy,
            also=more_passages,
        )
        if previewed:
            show_variant_preview(variants.preview_variant(engine, actor, view.id, spec), tax)
            return
        saved = ui.transact(lambda s: variants.build_variant(s, actor, tax, view.id, spec))
        if saved is None:
            return
        leave_message(
            f"Saved {saved.key} (draft; {tables.evidence_state_label(tax, saved.evidence_state)}; "
            f"suggested {tables.decision_label(tax, saved.suggested_decision)}). Confirm its "
            "label below."
        )
        focus_variant(saved.case_id)
        go(family=view.family or "")


def chosen_documents(
    view: cases.CaseView, kind: str, mode: str, several: list[documents.CaseDocText]
) -> list[documents.CaseDocText]:
    """The decisive documents an evidence-state variant works on (default: every one the
    user may read), saying what leaving some out does; empty (after a message) when none."""
    readable = [d for d in several if d.readable]
    hidden = [d.ref for d in several if not d.readable]
    chosen = st.multiselect(
        ui.plain(forms.chosen_label(kind)),
        [d.ref for d in readable],
        default=[d.ref for d in readable],
        key=f"bld_{kind}_docs_{view.id}",
    )
    kept = [d.ref for d in several if d.ref not in chosen]
    if hidden:
        st.info(
            f"{ui.plain(', '.join(hidden))} also carry the answer but are restricted: only a "
            "user with clearance can change them in a variant."
        )
    if not chosen:
        st.info("Choose at least one decisive document.")
        return []
    warning = forms.left_out_warning(kind, kept, mode)
    if warning:
        st.warning(ui.plain(warning))
    return [d for d in readable if d.ref in chosen]
