"""The "Compare versions" tab of the Wording page: any two versions (or the shipped file)
message by message with word diffs, their setting changes and, with clearance, the line diff
of the two YAML files. By default the version in force against the newest version when a
proposal waits, else the change in force (the version in force against the one it replaced).
The History tab shows the change in force with the same view (:func:`show_diff`)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages import ui
from pages.wording.common import DIFF_LEGEND, WordingContext
from review.core import clearance
from review.core.errors import WorkbenchError
from review.policy import display as policy_display
from review.policy import signoff
from review.wording import compare, display, versions


def show_diff(
    ctx: WordingContext, a: int | None, b: int | None, views: dict[int, signoff.VersionView]
) -> None:
    """Version ``a`` against version ``b`` (None: the shipped file), message by message."""
    in_force = ctx.current.version_id
    try:
        old, old_text = versions.wording_of(ctx.engine, a)
        new, new_text = versions.wording_of(ctx.engine, b)
    except WorkbenchError as exc:
        ui.show_error(exc)
        return
    changes = compare.compare(old, new)
    changed = [c for c in changes if c.status != "unchanged"]
    if not changed and not compare.setting_changes(old, new):
        st.info("The two wordings say the same thing.")
    st.dataframe(compare.compare_frame(changes), hide_index=True, width="stretch")
    if changed:
        st.caption(DIFF_LEGEND)
    for c in changed:
        st.caption(ui.plain(display.change_caption(c)))
        st.code(c.diff or "(empty)", language=None, wrap_lines=True)
    settings = compare.setting_changes(old, new, reveal_restricted=clearance.cleared(ctx.actor))
    if settings:
        st.dataframe(
            pd.DataFrame(settings, columns=["setting", "change"]), hide_index=True, width="stretch"
        )
    if clearance.cleared(ctx.actor):
        with st.expander("Line diff of the YAML files"):
            st.code(
                compare.yaml_diff(
                    old_text,
                    new_text,
                    display.version_label(a, views, in_force),
                    display.version_label(b, views, in_force),
                )
                or "(identical)",
                language="diff",
            )
    else:
        st.caption(
            "The line diff of the YAML files lists the titles of restricted documents: it needs "
            "clearance. The message changes above are complete."
        )


def _defaults(
    allv: list[signoff.VersionView], in_force: int | None
) -> tuple[int | None, int | None]:
    """The versions compared first: the version in force against the newest while the
    newest waits for sign-off on top of it; otherwise the change in force, never a proposal
    that can no longer be approved against the version in force."""
    if allv and allv[0].status == "pending" and allv[0].parent_id == in_force:
        return in_force, allv[0].id
    change = policy_display.in_force_change(allv, in_force)
    if change is None:
        return None, (allv[0].id if allv else None)
    before, after = change
    return (before.id if before else None), after.id


def compare_tab(ctx: WordingContext) -> None:
    allv = versions.versions(ctx.engine)
    views = {v.id: v for v in allv}
    in_force = ctx.current.version_id
    options: list[int | None] = [None, *[v.id for v in reversed(allv)]]
    a_default, b_default = _defaults(allv, in_force)
    c1, c2 = st.columns(2)
    a = c1.selectbox(
        "Compare",
        options,
        index=options.index(a_default),
        key="wd_cmp_a",
        format_func=lambda x: display.version_label(x, views, in_force),
    )
    b = c2.selectbox(
        "with",
        options,
        index=options.index(b_default),
        key="wd_cmp_b",
        format_func=lambda x: display.version_label(x, views, in_force),
    )
    show_diff(ctx, a, b, views)
