"""The "Sign-off" tab of the Thresholds page: every pending proposal with its diff against
the policy in force and its figures on the calibration source it records (the run and split,
or the audited batches its author calibrated on), with the figures the author saw beside the
current ones when that data changed since; and the form to approve or reject it for a product
owner or compliance who did not propose it. The figures are stored with the signature. A
proposal whose parent is no longer the policy in force says why it can no longer be approved
(it can still be rejected)."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from review.core.identity import Actor, Permission, Role
from review.core.taxonomy import Taxonomy
from review.core.terms import VersionStatus
from review.policy import signoff
from review.policy.policy import parse_policy
from review.thresholds import display, thresholds
from review.thresholds.evidence import SignoffEvidence, signoff_evidence
from review.thresholds.thresholds import PolicyInForce

FLASH = "thr_flash"


def _figures(evidence: SignoffEvidence) -> None:
    """The proposal's operating points and targets on its calibration source's report split,
    and the figures the author saw when they differ."""
    if evidence.note:
        st.warning(ui.plain(evidence.note))
    if evidence.source:
        st.caption(ui.plain(f"Figures on {evidence.source}"))
    if evidence.data_changed:
        st.warning(
            "The data of this source changed after the proposal: the figures its author saw "
            "are shown first, the current ones below. Both are stored with your signature."
        )
    if evidence.proposed_ops is not None:
        st.caption("When proposed")
        st.dataframe(evidence.proposed_ops, hide_index=True, width="stretch")
    a = evidence.analysis
    if a is None:
        return
    lead = "Now: reported" if evidence.data_changed else "Reported"
    st.caption(
        ui.plain(
            f"{lead} on the {a.report_on} split ({a.n_report} outcomes) · mode {evidence.mode}"
        )
    )
    st.dataframe(a.ops[a.ops["split"] == a.report_on], hide_index=True, width="stretch")
    if not a.targets.empty:
        st.dataframe(a.targets, hide_index=True, width="stretch")


def _sign_form(
    engine: Engine, actor: Actor, v: signoff.VersionView, evidence: SignoffEvidence
) -> None:
    roles = display.signing_roles(actor, v)
    with st.form(f"thr_sign_{v.id}"):
        role = st.selectbox("Sign as", [r.value for r in roles])
        note = st.text_area("Note (required to reject)")
        c1, c2 = st.columns(2)
        approve = c1.form_submit_button("Approve", type="primary")
        reject = c2.form_submit_button("Reject")
    if approve or reject:
        with ui.reported():
            signoff.sign(
                engine,
                actor,
                v.id,
                "approve" if approve else "reject",
                role=Role(role),
                note=note,
                data_fingerprint=evidence.fingerprint,
                metrics_snapshot=evidence.snapshot,
                lock_case_ids=evidence.case_ids,
            )
            st.session_state[FLASH] = (
                f"Version {v.number} {'approved' if approve else 'rejected'} as {role}."
            )
            st.rerun()


def _proposal(
    engine: Engine, actor: Actor, tax: Taxonomy, pif: PolicyInForce, v: signoff.VersionView
) -> None:
    with st.container(border=True):
        st.subheader(f"Version {v.number:d} · proposed by {ui.plain(v.author)}")
        ui.text(v.rationale, label="Rationale")
        stale = signoff.stale_parent(engine, v)
        if stale:
            st.error(ui.plain(stale))
        if signoff.needs_override(v.tuned_on_split):
            st.error(ui.plain(display.override_message(v)))
            if v.override_note:
                st.text(v.override_note)
        st.caption(
            f"Needs: {ui.plain(', '.join(v.missing_roles) or 'nothing')} · signatures so far: "
            + ui.plain(display.signatures_text(v))
        )
        st.code(thresholds.diff(pif.text, v.yaml_text), language="diff")
        proposed = parse_policy(v.yaml_text, f"version {v.number}")
        evidence = signoff_evidence(engine, tax, pif.policy, proposed, v.snapshot)
        _figures(evidence)
        if actor.email == v.author:
            st.info("You proposed this change: someone else must sign it.")
        elif display.signing_roles(actor, v) and actor.can(Permission.approve_policy):
            _sign_form(engine, actor, v, evidence)
        else:
            st.caption("Signatures come from a product owner and compliance.")


def sign_tab(engine: Engine, actor: Actor, tax: Taxonomy, pif: PolicyInForce) -> None:
    pending = [
        v for v in signoff.versions(engine, thresholds.KIND) if v.status == VersionStatus.pending
    ]
    if not pending:
        st.info("No proposal is waiting for sign-off.")
    for v in pending:
        _proposal(engine, actor, tax, pif, v)
    flash = st.session_state.pop(FLASH, None)
    if flash:
        st.success(ui.plain(flash))
