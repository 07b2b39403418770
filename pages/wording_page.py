"""Wording: edit refusal messages with live preview and lint, propose, sign off, compare
versions, history, and the production check of what the assistant actually said.

The tabs live in pages/wording/; this page reads the wording in force and the session's
draft once per run and hands them to each tab."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from pages import integrity, ui
from pages.wording.common import BASE, DRAFT, FLASH, WordingContext
from pages.wording.compare_tab import compare_tab
from pages.wording.editor import edit_tab
from pages.wording.history_tab import history_tab
from pages.wording.production_tab import production_tab
from pages.wording.signoff_tab import sign_tab
from review.core import clearance
from review.core.errors import WorkbenchError
from review.core.identity import Actor
from review.wording import display, editing, versions
from review.wording import terms as wording_terms
from review.wording.versions import WordingInForce

TABS = ["Edit and propose", "Sign-off", "Compare versions", "History", "Production check"]


def _in_force(engine: Engine) -> WordingInForce | None:
    """The wording in force (None, and why, when it cannot be read)."""
    try:
        current = versions.in_force(engine)
    except WorkbenchError as exc:
        ui.error("The refusal wording in force cannot be read.")
        st.code(str(exc), language=None)
        return None
    return current


def _context(engine: Engine, actor: Actor, current: WordingInForce) -> WordingContext:
    """Where the wording in force comes from, the last action's message, and the page's
    context; the session's draft starts from the version in force."""
    terms = wording_terms.corpus_terms(engine)
    if current.version is None:
        st.warning(
            "No refusal wording has been signed in this workbench yet: the shipped file "
            "policies/refusal-wording.yaml is in force."
        )
    else:
        st.caption(ui.plain(display.in_force_caption(current.version)))
    flash = st.session_state.pop(FLASH, None)
    if flash:
        st.success(ui.plain(flash))
    st.session_state.setdefault(DRAFT, {})
    draft: dict[str, dict[str, str]] = st.session_state[DRAFT]
    if not draft:
        st.session_state[BASE] = current.version_id
    live = editing.live_lint(current, terms, clearance.cleared(actor))
    return WordingContext(engine, actor, current, terms, live, draft)


def main() -> None:
    engine, actor = ui.engine(), ui.actor()
    st.title("Wording")
    integrity.chain_banner(engine)
    current = _in_force(engine)
    if current is None:
        return
    ctx = _context(engine, actor, current)
    tab_edit, tab_sign, tab_cmp, tab_hist, tab_prod = st.tabs(TABS)
    with tab_edit:
        edit_tab(ctx)
    with tab_sign:
        sign_tab(ctx)
    with tab_cmp:
        compare_tab(ctx)
    with tab_hist:
        history_tab(ctx)
    with tab_prod:
        production_tab(ctx)


if __name__ == "__main__":
    main()
