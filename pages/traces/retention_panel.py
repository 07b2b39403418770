"""The retention expander of the Traces page (admins): the rule in force, the form that sets
it (refused when someone else saved a rule since the form was opened) and "Purge now"."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from pages.traces import cached
from pages.traces.trace_list import P
from review.core import readable
from review.core.errors import WorkbenchError
from review.core.identity import Actor, Permission
from review.traces import display, retention


def _purge(engine: Engine, actor: Actor, days: int) -> None:
    sure = st.checkbox(
        f"I understand that traces older than {readable.count(days, 'day')} will be deleted "
        "(traces in audit samples are kept)",
        key=f"{P}purge_sure",
    )
    asked = st.button("Purge now", disabled=not sure, key=f"{P}purge")
    here = ui.under(f"{P}purge")  # what the purge did, right under its button
    if asked:
        with ui.reported(where=here):
            result = retention.apply_retention(engine, actor)
            if result is not None:
                ui.said(f"{P}purge", result.summary())
            cached.forget_facets()
            st.rerun()


def retention_panel(engine: Engine, actor: Actor) -> None:
    """Shown to those who may manage users (admins) only."""
    if not actor.can(Permission.manage_users):
        return
    with st.expander("Retention"):
        r = retention.get_retention(engine)
        # the version the form was opened at: a save after someone else's is refused
        opened = int(st.session_state.setdefault(f"{P}retention_version", r.version))
        st.caption(ui.plain(display.retention_caption(r)))
        with st.form("traces_retention"):
            days = st.number_input(
                "Keep traces for (days; 0 = no rule)",
                min_value=0,
                max_value=retention.MAX_RETENTION_DAYS,
                value=r.days or 0,
                step=1,
            )
            save = st.form_submit_button("Save retention rule")
        here = ui.under("traces_retention")  # what the form did, right under it
        if save:
            try:
                retention.set_retention(engine, actor, int(days) or None, opened)
            except WorkbenchError as exc:
                ui.show_error(exc, where=here)
                st.session_state[f"{P}retention_version"] = r.version  # now showing theirs
            else:
                st.session_state.pop(f"{P}retention_version", None)
                ui.said("traces_retention", "Retention rule saved.")
                st.rerun()
        if r.days is not None:
            _purge(engine, actor, r.days)
