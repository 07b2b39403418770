"""The "Edit and propose" tab, bottom half: the session's draft as a validated wording file,
its changed messages with their lint counts, who must sign, and the form that proposes it
(product owners and compliance)."""

from __future__ import annotations

import streamlit as st

from pages import ui
from pages.wording.common import BASE, PROPOSED, WordingContext, clear_draft, drop_saved_draft
from review.core import readable
from review.core.errors import WorkbenchError
from review.core.identity import Permission
from review.policy import display as policy_display
from review.policy import signoff
from review.wording import drafts, editing, signing, versions


def _summary(ctx: WordingContext, edits: dict[str, drafts.MessageDraft]) -> None:
    """The draft's changes, or why it is not a valid wording file yet."""
    try:
        draft_text = drafts.draft_yaml(ctx.current.text, edits, source="your draft")
    except WorkbenchError as exc:
        ui.error("The draft is not valid yet:")
        st.code(str(exc), language=None)
        return
    summary = editing.summarize_draft(ctx.current, draft_text, ctx.terms)
    st.dataframe(summary.changes, hide_index=True, width="stretch")
    st.caption(ui.plain(summary.compliance_reason))
    if summary.lint_total:
        st.warning(
            f"{readable.count(summary.lint_total, 'lint finding')} in the draft. You may still "
            "propose it: the "
            "findings are stored with the proposal and shown to the approvers, and approving "
            "needs a note saying why they are acceptable."
        )


def _base(ctx: WordingContext) -> str:
    """The version a new proposal changes, in words."""
    v = ctx.current.version
    return "the shipped file" if v is None else f"version {v.number}"


def _propose_form(ctx: WordingContext, edits: dict[str, drafts.MessageDraft]) -> None:
    waiting = [
        v.number for v in versions.pending(ctx.engine) if v.parent_id == ctx.current.version_id
    ]
    if waiting:
        st.warning(ui.plain(policy_display.competing_draft(waiting, _base(ctx))))
    with st.form("wd_propose"):
        rationale = st.text_area(
            "Why this change (goes into the change record)", key="wd_rationale"
        )
        go = st.form_submit_button("Submit for approval", type="primary", key="wd_submit")
    here = ui.under("wd_propose")  # a refused proposal, under the button
    if go:
        with ui.reported(where=here):
            vid = signing.propose_edits(
                ctx.engine, ctx.actor, edits, rationale, based_on=st.session_state.get(BASE)
            )
            v = signoff.get_version(ctx.engine, vid)
            if not drop_saved_draft(ctx.actor, here):
                ui.said(
                    PROPOSED,
                    "A newer draft saved in another tab was kept: it opens when you reload "
                    "the page.",
                    "warning",
                )
            clear_draft()
            ui.said(
                PROPOSED,
                f"Proposed as version {v.number}. "
                f"Needs: {', '.join(map(readable.humanize, v.missing_roles))} (not you).",
            )
            others = signing.competing_numbers(ctx.engine, vid)
            warned = policy_display.competing_on_propose(v.number, others, _base(ctx))
            if warned:
                ui.said(PROPOSED, warned, "warning")
            st.rerun()


def draft_section(ctx: WordingContext) -> None:
    st.subheader("Your draft")
    ui.under(PROPOSED)  # what the last proposal did: the draft (and its button) is gone
    if not ctx.draft:
        st.caption(
            "No edits yet: change a message above. Each edit is saved as your draft (kept "
            "while you switch keys, and when you come back later)."
        )
        return
    edits = editing.draft_edits(ctx.draft)
    _summary(ctx, edits)
    if st.button("Discard my draft", key="wd_discard") and drop_saved_draft(
        ctx.actor, ui.under("wd_discard")
    ):
        clear_draft()
        st.rerun()
    if not ctx.actor.can(Permission.propose_policy):
        st.info(
            "Proposals come from product owners and compliance; you can still try wording and "
            "see the lint here."
        )
        return
    _propose_form(ctx, edits)
