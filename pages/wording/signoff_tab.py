"""The "Sign-off" tab of the Wording page: every pending wording version with its word diffs,
previews, setting changes and lint findings, and the form to approve or reject it for the
people whose signature it still needs (never its author)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages import ui
from pages.wording.common import DIFF_LEGEND, SIGNED, WordingContext, findings_view
from review.admin import users
from review.core import clearance, readable
from review.core.identity import Role
from review.core.terms import VersionStatus
from review.policy import display as policy_display
from review.policy import signoff
from review.wording import display, signing, versions
from review.wording.messages import preview
from review.wording.signing import VersionReview


def _changes(r: VersionReview) -> None:
    """The word diff and example preview of each changed message, the setting changes."""
    st.caption(DIFF_LEGEND)
    for c in r.changes:
        if c.status == "unchanged":
            continue
        st.caption(ui.plain(display.change_caption(c, for_signing=True)))
        st.code(c.diff or "(empty)", language=None, wrap_lines=True)
        if c.new_text:
            with ui.reported():
                ui.text(preview(c.new_text), label="Preview with example values")
    if r.settings:
        st.dataframe(
            pd.DataFrame(r.settings, columns=["setting", "change"]),
            hide_index=True,
            width="stretch",
        )


def _lint(r: VersionReview) -> None:
    if not r.lint_total:
        st.success("Lint: no findings in any message of this version.")
        return
    st.warning(
        f"{readable.count(r.lint_total, 'lint finding')} in this version: approving needs a note "
        "saying why they are acceptable."
    )
    for key, fs in r.findings.items():
        if fs:
            st.caption(ui.plain(key))
            findings_view(r.wording.messages[key].text, fs)


def _sign_form(ctx: WordingContext, r: VersionReview) -> None:
    v = r.version
    roles = display.signing_roles(ctx.actor, v)
    with st.form(f"wd_sign_{v.id}"):
        role = st.selectbox(
            "Sign as",
            [x.value for x in roles],
            key=f"wd_role_{v.id}",
            format_func=readable.humanize,
        )
        note = st.text_area(
            "Note (required to reject, and to approve wording with lint findings)",
            key=f"wd_note_{v.id}",
        )
        c1, c2 = st.columns(2)
        approve = c1.form_submit_button("Approve", type="primary", key=f"wd_approve_{v.id}")
        reject = c2.form_submit_button("Reject", key=f"wd_reject_{v.id}")
    here = ui.under(f"wd_sign_{v.id}")  # what a signature did (or why not), under the form
    if approve or reject:
        with ui.reported(where=here):
            signing.sign_wording(
                ctx.engine,
                ctx.actor,
                v.id,
                "approve" if approve else "reject",
                role=Role(role),
                note=note,
            )
            done = signoff.get_version(ctx.engine, v.id)
            in_force = approve and done.status == VersionStatus.approved
            message = (
                f"Version {v.number} {'approved' if approve else 'rejected'} as "
                f"{readable.humanize(role)}"
                + (": it is the wording in force now." if in_force else ".")
            )
            # still pending: said under its form; in force or rejected, its card is gone:
            # said where the cards start
            where = f"wd_sign_{v.id}" if done.status == VersionStatus.pending else SIGNED
            ui.said(where, message)
            if in_force:
                warned = policy_display.competing_after_approval(v.number, r.competitors)
                if warned:
                    ui.said(where, warned, "warning")
            st.rerun()


def _signatures(ctx: WordingContext, r: VersionReview) -> None:
    """The signing form, or why the signed-in person does not sign."""
    v = r.version
    choice = display.sign_choice(ctx.actor, v)
    if choice == "author":
        st.info("You proposed this change: someone else must sign it.")
    elif choice == "sign":
        _sign_form(ctx, r)
    elif choice == "not_needed":
        st.caption(
            "Your signature is not needed on this version: it needs "
            f"{ui.plain(', '.join(map(readable.humanize, v.missing_roles)) or 'nothing more')}."
        )
    else:
        st.caption("Signatures come from product owners and compliance.")
    if choice != "sign":
        ui.under(f"wd_sign_{v.id}")  # what my signature did: the form is gone since


def _version(ctx: WordingContext, v: signoff.VersionView) -> None:
    r = signing.review_version(
        ctx.engine, v.id, ctx.terms, reveal_restricted=clearance.cleared(ctx.actor)
    )
    with st.container(border=True):
        st.subheader(
            f"Version {v.number:d}"
            + (f" · stale: superseded by version {r.superseded_by:d}" if r.superseded_by else "")
        )
        names = users.display_names(ctx.engine)
        by = readable.person(v.author, names)
        st.caption(f"Proposed by {ui.plain(by)} on {v.created_at:%Y-%m-%d %H:%M} UTC")
        ui.text(v.rationale, label="Rationale")
        st.caption(
            f"Compared with {ui.plain(r.parent_label)}. {ui.plain(r.compliance_reason)} Still "
            f"needed: {ui.plain(policy_display.roles_text(v.missing_roles))} · signatures so "
            f"far: {ui.plain(policy_display.signatures_text(v, names))}"
        )
        if r.stale_parent:
            ui.error(r.stale_parent)
        _changes(r)
        _lint(r)
        if r.competitors:
            st.warning(ui.plain(policy_display.competing_before_approval(v.number, r.competitors)))
        _signatures(ctx, r)


def sign_tab(ctx: WordingContext) -> None:
    ui.under(SIGNED)
    pend = versions.pending(ctx.engine)
    if not pend:
        st.info("No wording change is waiting for sign-off.")
        return
    for v in pend:
        _version(ctx, v)
