"""The family view of the Case builder (?family=KEY): the variants, the consistency checks
(optionally against another passage), confirming suggested labels, and each variant's required
claims and recorded edits."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import streamlit as st
from sqlalchemy import Engine

from pages import ui
from pages.builder.nav import SAVED, take_focus
from review.builder import blinding, replay, suggestions, tables
from review.builder import family_view as builder_family_view
from review.builder.family_view import FamilyView, VariantRow
from review.cases import form as case_form
from review.core import clearance, readable
from review.core.identity import Actor, Permission
from review.core.taxonomy import Taxonomy
from review.labels import blind

CONFIRM = "bld_confirm"  # the confirm form's control: what it did is said right under it


def passage_key(family: str) -> str:
    """Where the passage to check against (not saved) is kept for the family."""
    return f"bld_check_passage_{family}"


def family_view(engine: Engine, actor: Actor, tax: Taxonomy, key: str) -> None:
    checked_passage = st.session_state.get(passage_key(key))
    fam = builder_family_view.family_view(engine, actor, key, passage=checked_passage)
    if fam is None:
        ui.error(f"Family {key} does not exist.")
        return
    fam = blinding.family(engine, blind.sight(engine, actor), fam)
    st.subheader(f"Family {ui.plain(fam.key)}")
    ui.text(fam.title, label="Question of the family")
    rows = tables.variants_table(fam, lambda case_id: ui.link("cases", case=case_id), tax)
    st.dataframe(
        pd.DataFrame(rows),
        hide_index=True,
        width="stretch",
        height=ui.table_height(len(rows)),
        column_config={
            "open": st.column_config.LinkColumn("open", display_text="open"),
            "documents": st.column_config.TextColumn("documents", width="large"),
        },
        key="bld_family_table",
    )
    checks(fam, key)
    confirm(engine, actor, tax, fam, key)
    st.markdown("**Variants in detail**")
    for v in fam.variants:
        with st.expander(ui.plain(tables.variant_label(v, tax, with_status=True))):
            variant_detail(engine, actor, tax, v, fam.person)


def checks(fam: FamilyView, key: str) -> None:
    """The consistency checks and the form to run them against another passage."""
    st.markdown("**Consistency checks**")
    if fam.blind:
        st.info(
            f"{readable.count(fam.blind, 'variant')} of this family still "
            f"{readable.plural(fam.blind, 'waits', 'wait')} for your label: their "
            "evidence state, expected decision, document roles and edits, and the family's "
            "checks and decisive passage, stay hidden until you label them (blind labeling)."
        )
        return
    for note in tables.check_notes(fam):
        if note.level == "error":
            ui.error(note.text)
        else:
            {"warning": st.warning, "success": st.success}[note.level](note.text)
    st.dataframe(
        tables.checks_table(fam.checks),
        hide_index=True,
        width="stretch",
        height=ui.table_height(len(fam.checks), 12),
        key="bld_checks_table",
    )
    st.caption(f"Decisive passage used by the checks: {ui.plain(fam.passage_source)}")
    if fam.passage is not None:
        st.code(fam.passage, language=None, wrap_lines=True)
    elif fam.hidden:
        st.caption(ui.plain(clearance.REDACTED))
    with st.form(f"bld_check_form_{key}"):
        other = st.text_area("Check against another passage (not saved)", height=68)
        c1, c2 = st.columns(2)
        run = c1.form_submit_button("Run the checks with this passage")
        reset = c2.form_submit_button("Use the recorded passage")
    if run:
        if other.strip():
            st.session_state[passage_key(key)] = other.strip()
        else:
            ui.error("Give a passage to check against.")
        st.rerun()
    if reset:
        st.session_state.pop(passage_key(key), None)
        st.rerun()


def confirm(engine: Engine, actor: Actor, tax: Taxonomy, fam: FamilyView, key: str) -> None:
    """Confirm (or change) the suggested label of a variant."""
    pending = tables.pending_variants(fam)
    st.markdown("**Confirm a suggested label**")
    ui.under(SAVED)  # a variant just saved is said here, above the form that confirms it
    if not pending:
        st.caption("Every suggestion in this family is confirmed.")
        ui.under(CONFIRM)
        return
    if not actor.can(Permission.edit_cases):
        st.info("Confirming labels needs a role that may edit cases.")
        return
    by_id = {v.case_id: v for v in pending}
    pick_key = f"bld_confirm_pick_{key}"
    focus = take_focus()
    if focus in by_id:  # a variant was just saved: the form opens on it
        st.session_state[pick_key] = focus
    elif st.session_state.get(pick_key) not in by_id:  # confirmed meanwhile: the next one
        st.session_state[pick_key] = pending[0].case_id
    picked = st.selectbox(
        "Variant",
        list(by_id),
        format_func=lambda cid: tables.variant_label(by_id[cid], tax),
        key=pick_key,
    )
    target = by_id[picked]
    ui.text(target.question, label="Question of the variant")
    st.markdown(
        f"**Evidence state:** {ui.plain(tables.evidence_state_label(tax, target.evidence_state))}"
    )
    if target.evidence_state in tax.evidence_states:
        st.caption(ui.plain(tax.evidence_states[target.evidence_state].definition))
    index, start_reasons = tables.confirm_start(target, tax)
    with st.form(f"bld_confirm_{target.case_id}"):
        source = tables.suggestion_source_label(tax, target.suggestion_source)
        said = tables.with_reasons(tax, target.suggested_decision, target.suggested_reasons)
        st.caption(f"Suggested by {ui.plain(source)}: {ui.plain(said)}")
        decision = st.selectbox(
            "Expected decision",
            list(tax.decisions),
            index=index,
            format_func=lambda k: tables.decision_label(tax, k),
        )
        reasons = st.multiselect(
            "Reason codes (why the evidence is insufficient)",
            list(tax.case_reason_codes()),
            default=start_reasons,
            format_func=lambda k: tax.reason_codes[k].label,
        )
        note = st.text_input("Note (why you changed the suggestion, if you did)")
        make_ready = st.checkbox("Mark the case ready (labeling queue and metrics)", True)
        ok = st.form_submit_button("Confirm", type="primary")
    here = ui.under(CONFIRM)
    if not ok:
        return
    res = ui.transact(
        lambda s: suggestions.confirm_suggestion(
            s,
            actor,
            target.case_id,
            decision,
            reasons,
            tax=tax,
            expected_version=target.version,
            note=note,
            make_ready=make_ready,
        ),
        where=here,
    )
    if res is not None:
        # when other drafts wait, the form moves on to one of them: say it above the form,
        # not under a Confirm button that now confirms another variant
        ui.said(
            SAVED if len(pending) > 1 else CONFIRM,
            f"{target.key}: {'changed' if res.changed else 'confirmed'} as "
            f"{tables.decision_label(tax, decision)}; status {res.status}.",
        )
        st.rerun()


def variant_detail(
    engine: Engine, actor: Actor, tax: Taxonomy, v: VariantRow, person: Callable[[str], str]
) -> None:
    """A variant's question, required claims (editable) and recorded edits with replay."""
    ui.text(v.question, label="Question")
    st.caption("Required claims (for a partial variant: which claims lose support)")
    st.dataframe(tables.claims_table(v.claims, tax), hide_index=True, width="stretch")
    if actor.can(Permission.edit_cases):
        with st.form(f"bld_claims_{v.case_id}"):
            text = st.text_area(
                "Required claims, one per line (compound questions have several)",
                case_form.claim_lines(
                    [c.text for c in v.claims], {c.text: c.kind for c in v.claims}
                ),
                height=100,
            )
            st.caption(ui.plain(case_form.kinds_help(tax)))
            save = st.form_submit_button("Save the claims")
        here = ui.under(f"bld_claims_{v.case_id}")
        if save:
            claims, kinds = case_form.parse_claim_lines(text)
            version = ui.transact(
                lambda s: suggestions.set_required_claims(
                    s, actor, tax, v.case_id, v.version, claims, kinds
                ),
                where=here,
            )
            if version is not None:
                ui.said(f"bld_claims_{v.case_id}", f"Saved the required claims of {v.key}.")
                st.rerun()
    if v.edits:
        st.caption("Recorded edits (provenance)")
    for line in tables.edit_groups(v.edits, person):
        st.text(line)
    for e in v.edits:
        st.text(tables.edit_line(e, person))
        if e.before is None:
            st.caption(ui.plain(clearance.REDACTED))
        else:
            c1, c2 = st.columns(2)
            c1.code(e.before or "(empty)", language=None, wrap_lines=True)
            c2.code(e.after or "(empty)", language=None, wrap_lines=True)
        if st.button("Replay this edit", key=f"bld_replay_{e.id}"):
            check = replay.replay_check(engine, e.id)
            if check.ok:
                st.success(ui.plain(check.detail))
            else:
                ui.error(check.detail)
