"""The "Sign-off" tab of the Thresholds page: every pending proposal (the one a link names,
``?version=N``, first) with its headline (coverage, false-refusal and unsupported-answer rates
in force, proposed and targeted, pass/fail), its diff against the policy in force and its
figures on the calibration source it records (the run and split, or the audited batches its
author calibrated on), with the figures the author saw beside the current ones when that data
changed since; and the form to approve or reject it for a product owner or compliance who did
not propose it. Approving a change that fails a target needs a reason and a confirmation
(review/thresholds/signing.py enforces it). The figures are stored with the signature. A
proposal whose parent is no longer the policy in force says why it can no longer be approved
(it can still be rejected)."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from pages.thresholds import cached, headline_view
from review.admin import users
from review.core import readable
from review.core.identity import Actor, Permission, Role
from review.core.taxonomy import Taxonomy
from review.core.terms import VersionStatus
from review.evaluation import evalruns
from review.policy import display as policy_display
from review.policy import inforce, signoff
from review.policy.inforce import PolicyInForce
from review.thresholds import display, signing, thresholds
from review.thresholds.evidence import SignoffEvidence
from review.thresholds.signing import ProposalReview

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
        st.dataframe(display.figures_table(evidence.proposed_ops), hide_index=True, width="stretch")
    a = evidence.analysis
    if a is None:
        return
    lead = "Now: reported" if evidence.data_changed else "Reported"
    st.caption(
        ui.plain(
            f"{lead} on the {a.report_on} split ({a.n_report} outcomes) · mode {evidence.mode}"
        )
    )
    ops = display.figures_table(a.ops[a.ops["split"] == a.report_on])
    st.dataframe(ops, hide_index=True, width="stretch")
    if not a.targets.empty:
        st.dataframe(display.figures_table(a.targets), hide_index=True, width="stretch")


def _sign_form(
    engine: Engine, actor: Actor, tax: Taxonomy, review: ProposalReview, *, stale: bool
) -> None:
    """Approve or reject; a stale proposal (its parent is no longer in force) can only be
    rejected, so it is offered no Approve button."""
    v = review.version
    roles = display.signing_roles(actor, v)
    with st.form(f"thr_sign_{v.id}"):
        role = st.selectbox("Sign as", [r.value for r in roles], format_func=readable.humanize)
        if review.confirmation and not stale:
            st.warning(ui.plain(f"Version {v.number:d}: {review.confirmation}"))
            note = st.text_area(
                "Reason (required to approve a change that fails a target, and to reject)",
                key=f"thr_sign_note_{v.id}",
            )
            confirmed = st.checkbox(
                "I approve this change although it fails these targets",
                key=f"thr_sign_confirm_{v.id}",
            )
        else:
            note = st.text_area("Note (required to reject)", key=f"thr_sign_note_{v.id}")
            confirmed = False
        c1, c2 = st.columns(2)
        approve = False if stale else c1.form_submit_button("Approve", type="primary")
        reject = c2.form_submit_button("Reject", type="primary" if stale else "secondary")
    here = ui.under(f"thr_sign_{v.id}")  # what a signature did (or why not), under the form
    if approve or reject:
        with ui.reported(where=here):
            signing.sign_thresholds(
                engine,
                actor,
                tax,
                v.id,
                "approve" if approve else "reject",
                role=Role(role),
                note=note,
                confirm_failing_targets=confirmed,
            )
            message, moved = _signed_message(engine, v, approve, role)
            if moved:
                # rejected (no longer pending) or put in force (the page's caption, the
                # Calibrate tab and every other proposal's parent change): the whole page
                st.session_state[FLASH] = message
                st.rerun(scope="app")
            # one signature of several: only this proposal changes (its signatures and what
            # it still needs), so only its box is drawn again, not the other proposals
            st.session_state[f"{FLASH}_{v.id}"] = True  # read the proposal again
            ui.said(f"thr_sign_{v.id}", message)
            ui.rerun_here()


def _signed_message(
    engine: Engine, v: signoff.VersionView, approve: bool, role: str
) -> tuple[str, bool]:
    """What to say after a signature, and whether it changed more than this proposal (a
    rejection, or an approval that put it in force)."""
    role = readable.humanize(role)
    if not approve:
        return f"Version {v.number} rejected as {role}.", True
    done = signoff.get_version(engine, v.id)
    if done.status == VersionStatus.approved:
        return f"Version {v.number} approved as {role}: it is the policy in force now.", True
    waits = policy_display.roles_text(done.missing_roles)
    return f"Version {v.number} approved as {role}; it still needs: {waits}.", False


@st.fragment
def _proposal(
    engine: Engine,
    actor: Actor,
    tax: Taxonomy,
    pif: PolicyInForce,
    v: signoff.VersionView,
    focused: bool,
    newest_run: int | None = None,
) -> None:
    """One pending proposal, a fragment: an approval that leaves it waiting for another
    signature draws this proposal again, not the page and every other proposal."""
    signed = st.session_state.pop(f"{FLASH}_{v.id}", None)
    if signed or ui.in_fragment_run():  # ``v`` is as the page last read it: read it again
        v = signoff.get_version(engine, v.id)
    with st.container(border=True, key=f"thr_proposal_{v.number}"):
        names = users.display_names(engine)
        by = readable.person(v.author, names)
        stale = signoff.stale_parent(engine, v)
        current = signoff.current_approved(engine, inforce.KIND) if stale else None
        st.subheader(
            f"Version {v.number:d} · proposed by {ui.plain(by)}"
            + (f" · stale: superseded by version {current.number:d}" if current else "")
        )
        if focused:
            st.caption("Opened from a link to this proposal.")
        ui.text(v.rationale, label="Rationale")
        if stale:
            ui.error(stale)
        else:
            others = [x.number for x in signoff.competing(signoff.versions(engine, v.kind), v)]
            if others:
                st.warning(ui.plain(policy_display.competing_before_approval(v.number, others)))
        if signoff.needs_override(v.tuned_on_split):
            ui.error(display.override_message(v))
            if v.override_note:
                st.text(v.override_note)
        st.caption(
            f"Needs: {ui.plain(policy_display.roles_text(v.missing_roles))} · signatures so far: "
            + ui.plain(policy_display.signatures_text(v, names))
        )
        # the policy in force of this run and the outputs kept per data stamp (the copy the
        # Calibrate tab reads): a proposal's figures without reading its run again
        review = signing.review_proposal(
            engine, tax, v, pif=pif, outputs=lambda run_id: cached.outputs(engine, tax, run_id)[0]
        )
        changed = policy_display.changed_values(pif.text, v.yaml_text)
        if changed is not None:
            ui.text(
                "\n".join(changed) or "(no value changes)",
                label="The values it changes, against the policy in force",
            )
        st.markdown("**What the change does**")
        if review.headline is not None:
            source = (v.snapshot or {}).get("source")
            basis = display.gate_basis(source if isinstance(source, dict) else {}, newest_run)
            headline_view.show(review.headline, key=str(v.number), basis=basis)
            with st.expander("The change and all its figures"):
                st.code(thresholds.diff(pif.text, v.yaml_text), language="diff")
                _figures(review.evidence)
        else:
            st.code(thresholds.diff(pif.text, v.yaml_text), language="diff")
            _figures(review.evidence)
        if actor.email == v.author:
            st.info(
                f"You proposed this change: someone else must sign it (it waits for "
                f"{ui.plain(policy_display.waiting_roles(v.missing_roles))})."
            )
        elif display.signing_roles(actor, v) and actor.can(Permission.approve_policy):
            _sign_form(engine, actor, tax, review, stale=stale is not None)
            return
        else:
            st.caption("Signatures come from a product owner and compliance.")
        ui.under(f"thr_sign_{v.id}")  # what my signature did: the form is gone since


def _newest_run_id(engine: Engine) -> int | None:
    """The run the Monthly review's release gate is on (the newest)."""
    runs = evalruns.list_runs(engine)
    return runs[0].id if runs else None


def _focus() -> int | None:
    """The version a link asks for (``?version=N``), if any."""
    return ui.query_int("version")


def sign_tab(engine: Engine, actor: Actor, tax: Taxonomy, pif: PolicyInForce) -> None:
    flash = st.session_state.pop(FLASH, None)
    if flash:
        st.success(ui.plain(flash))
    everything = signoff.versions(engine, inforce.KIND)
    pending = [v for v in everything if v.status == VersionStatus.pending]
    wanted = _focus()
    if wanted is not None and wanted not in {v.number for v in pending}:
        asked = next((v for v in everything if v.number == wanted), None)
        st.info(ui.plain(display.not_pending_message(wanted, asked, pif.version)))
    if not pending:
        st.info(
            "Nothing is proposed: no change is waiting for sign-off. The figures of the "
            "policy in force are on the Calibrate and propose tab."
        )
    newest = _newest_run_id(engine) if pending else None
    # the linked proposal first
    for v in sorted(pending, key=lambda x: x.number != wanted):
        _proposal(engine, actor, tax, pif, v, v.number == wanted, newest)
