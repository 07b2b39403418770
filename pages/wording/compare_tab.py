"""The "Compare versions" tab of the Wording page: any two versions (or the shipped file)
message by message with word diffs, their setting changes and, with clearance, the line diff
of the two YAML files."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages import ui
from pages.wording.common import DIFF_LEGEND, WordingContext
from review.core import clearance
from review.core.errors import WorkbenchError
from review.wording import compare, display, versions


def compare_tab(ctx: WordingContext) -> None:
    allv = versions.versions(ctx.engine)
    views = {v.id: v for v in allv}
    options: list[int | None] = [None, *[v.id for v in reversed(allv)]]
    in_force_at = options.index(ctx.current.version_id)
    c1, c2 = st.columns(2)
    a = c1.selectbox(
        "Compare",
        options,
        index=in_force_at,
        key="wd_cmp_a",
        format_func=lambda x: display.version_label(x, views),
    )
    b = c2.selectbox(
        "with",
        options,
        index=len(options) - 1,
        key="wd_cmp_b",
        format_func=lambda x: display.version_label(x, views),
    )
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
                    display.version_label(a, views),
                    display.version_label(b, views),
                )
                or "(identical)",
                language="diff",
            )
    else:
        st.caption(
            "The line diff of the YAML files lists the titles of restricted documents: it needs "
            "clearance. The message changes above are complete."
        )
