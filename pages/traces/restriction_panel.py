"""Restricted status on the pages: on a trace's page, why it is restricted (by the rule and the
corpus as they are now) and, for admins with clearance, a person's mark (restricted by hand,
the unknown documents cleared, or the mark removed); on the Admin page, whether a trace citing
a document the corpus has never seen is restricted. Every write is audited."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from review.core import clearance, readable
from review.core.errors import WorkbenchError
from review.core.identity import Actor, Permission
from review.traces import restricted

FLASH = "traces_restriction_flash"

_CHOICES = {
    restricted.MARK_RESTRICTED: "Mark restricted by hand (whatever the documents say)",
    restricted.MARK_CLEARED: "Clear the unknown documents (checked by a person)",
    None: "Remove the mark (the rule alone decides)",
}


def _can_mark(actor: Actor) -> bool:
    return actor.can(Permission.restrict_traces) and clearance.cleared(actor)


def restriction_panel(engine: Engine, actor: Actor, pk: int) -> None:
    """Why trace ``pk`` is restricted, and the admins' marks."""
    flash = st.session_state.pop(FLASH, None)
    if flash:
        st.success(ui.plain(flash))
    try:
        why = restricted.restriction(engine, actor, pk)
    except WorkbenchError:
        return  # the trace itself is not shown to this user either
    if why is None:
        return
    if not why.reasons and why.mark is None and not _can_mark(actor):
        return
    st.caption("Restricted status")
    st.text(why.summary())
    if why.mark is not None:
        st.text(why.mark_text())
    if not _can_mark(actor):
        return
    options: list[str | None] = [
        m
        for m in (restricted.MARK_RESTRICTED, restricted.MARK_CLEARED, None)
        if m != why.mark and (m != restricted.MARK_CLEARED or why.unknown)
    ]
    with st.expander("Mark this trace (admins)"):
        if why.unknown:
            st.text("Documents the corpus has never seen: " + "; ".join(why.unknown))
        with st.form(f"traces_mark_{pk}", clear_on_submit=True):
            choice = st.radio(
                "Change",
                options,
                format_func=lambda m: ui.plain(_CHOICES[m]),
                key=f"traces_mark_pick_{pk}",
            )
            note = st.text_input("Why (kept in the audit log)", max_chars=restricted.MAX_NOTE)
            save = st.form_submit_button("Save the mark")
        st.caption(
            "A clear lifts only the unknown-document reason: a restricted document, scope, "
            "title or attribute keeps the trace restricted."
        )
    if save:
        with ui.reported("Nothing was saved. "):
            flips = restricted.mark_trace(engine, actor, pk, choice, note)
            now = "restricted" if flips.restricted else "open" if flips.opened else "unchanged"
            st.session_state[FLASH] = f"Mark saved; the trace is {now}."
            st.rerun()


def unknown_documents_form(engine: Engine, actor: Actor) -> None:
    """The Admin page's setting: do unknown documents make a trace restricted?"""
    st.subheader("Traces citing unknown documents")
    cfg = restricted.get_unknown_setting(engine)
    st.caption(
        "A trace whose context holds a chunk of a document the corpus has never seen (or of "
        "no named document) is restricted until an admin clears it on the trace's page, or "
        "the document is added to the corpus. Turning this off opens such traces to every "
        "viewer of the Traces page."
    )
    if cfg.updated_by:
        st.caption(ui.plain(f"Last changed by {cfg.updated_by}."))
    if not (actor.can(Permission.restrict_traces) and clearance.cleared(actor)):
        st.text(f"Currently {'on' if cfg.on else 'off'}. Changing it needs clearance.")
        return
    st.session_state.setdefault("admin_unknown_opened", cfg.version)
    with st.form("admin_unknown_documents"):
        on = st.checkbox("Traces citing unknown documents are restricted", value=cfg.on)
        save = st.form_submit_button("Save the setting")
    here = ui.under("admin_unknown_documents")  # what the form did, right under it
    if save:
        # a stale save is refused and the form reopens on the version saved meanwhile
        opened = int(st.session_state.pop("admin_unknown_opened"))
        with ui.reported("Nothing was saved. ", where=here):
            _, flips = restricted.set_unknown_documents(engine, actor, on, opened)
            ui.said(
                "admin_unknown_documents",
                f"Setting saved: {readable.count(flips.restricted, 'trace')} became restricted, "
                f"{flips.opened} became open.",
            )
            st.rerun()
