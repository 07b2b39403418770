"""Wording: edit refusal messages with live preview and lint, propose, sign off, compare
versions, history, and the production check of what the assistant actually said.

The tabs live in pages/wording/; this page reads the wording in force and the person's draft
(saved in the database at each edit, so it opens on any server) once per run and hands them
to each tab; the Production check tab is drawn only while
it is open (its count reads every trace)."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from pages import integrity, ui
from pages.wording.common import DRAFT, WordingContext, open_draft
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
#: The session key of the open tab (its label).
TAB_KEY = "wd_tab"
#: The value widgets of the Production check tab (drawn only while open): the rule, the
#: page and the trace picked.
KEPT = ("wd_prod_rule", "wd_prod_page", "wd_prod_trace")


def _keep_widget_state() -> None:
    """Streamlit forgets the state of a widget a run does not draw: set here again, the
    Production check's picks are as the person left them when they come back to its tab."""
    for key in [k for k in st.session_state if k in KEPT]:
        st.session_state[key] = st.session_state[key]


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
    context; the person's saved draft is loaded when the page opens (a new draft starts from
    the version in force)."""
    terms = wording_terms.corpus_terms(engine)
    if current.version is None:
        st.warning(
            "No refusal wording has been signed in this workbench yet: the shipped file "
            "policies/refusal-wording.yaml is in force."
        )
    else:
        st.caption(ui.plain(display.in_force_caption(current.version)))
    open_draft(engine, actor, current.version_id)
    draft: dict[str, dict[str, str]] = st.session_state[DRAFT]
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
    _keep_widget_state()
    # the production check counts the refusal texts of every trace (an aggregate over the
    # traces: the largest part of a run at 1M traces): drawn only while its tab is open
    tab_edit, tab_sign, tab_cmp, tab_hist, tab_prod = st.tabs(TABS, key=TAB_KEY, on_change="rerun")
    with tab_edit:
        edit_tab(ctx)
    with tab_sign:
        sign_tab(ctx)
    with tab_cmp:
        compare_tab(ctx)
    with tab_hist:
        history_tab(ctx)
    if tab_prod.open:
        with tab_prod:
            production_tab(ctx)


if __name__ == "__main__":
    main()
