"""The "History" tab of the Wording page: every version with its signatures, the change in
force (the version in force against the version it replaced, message by message), the check
of the sign-off chain, and the approved file to download (with clearance: it lists restricted
titles; only while the sign-off record verifies), the chain head in its first line."""

from __future__ import annotations

import streamlit as st

from pages import ui
from pages.wording.common import WordingContext
from pages.wording.compare_tab import show_diff
from review.admin import users
from review.core import clearance
from review.policy import display as policy_display
from review.policy import signoff
from review.wording import display, versions


def history_tab(ctx: WordingContext) -> None:
    allv = versions.versions(ctx.engine)
    if not allv:
        st.info("No wording version has been proposed yet.")
        return
    ui.table(
        display.history_frame(allv, ctx.current.version_id, users.display_names(ctx.engine)),
        hide_index=True,
        width="stretch",
    )
    change = policy_display.in_force_change(allv, ctx.current.version_id)
    if change is not None:
        before, after = change
        st.subheader("The change in force")
        st.caption(
            ui.plain(
                policy_display.change_caption(
                    before,
                    after,
                    ctx.current.version_id,
                    shipped=display.SHIPPED,
                    versions=allv,
                )
            )
        )
        show_diff(ctx, before.id if before else None, after.id, {v.id: v for v in allv})
    problems = signoff.verify_chain(ctx.engine)
    if problems:
        ui.error(display.chain_message(problems))
    else:
        st.success(ui.plain(display.chain_message(problems)))
    current = ctx.current
    if current.version is not None and not clearance.cleared(ctx.actor):
        st.caption(
            "The approved file lists titles of restricted documents: downloading it needs "
            "clearance."
        )
    elif current.version is not None and not problems:
        st.download_button(
            f"Download the approved wording (version {current.version.number:d}, YAML)",
            signoff.with_chain_head(ctx.engine, current.text),
            file_name="refusal-wording.yaml",
            mime="application/yaml",
            key="wd_download",
        )
