"""Thresholds: calibrate on validation, see what a change buys and costs, propose, sign off.

The tabs live in pages/thresholds/; this page reads the policy in force once per run and hands
it to the open tab (only the open tab is drawn: the others cost nothing until opened). A link
opens a tab: ``?tab=signoff`` (calibrate, signoff, history, gate), and
on the Sign-off tab ``&version=N`` puts that proposal first."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from pages import integrity, ui
from pages.thresholds.calibrate_tab import calibrate
from pages.thresholds.evidence_tab import evidence_tab
from pages.thresholds.history_tab import history_tab
from pages.thresholds.signoff_tab import sign_tab
from review.core.errors import WorkbenchError
from review.policy import inforce
from review.policy.inforce import PolicyInForce
from review.thresholds import display

TABS = ["Calibrate and propose", "Sign-off", "History", "Evidence gate"]
#: The tab a link opens (``?tab=signoff``): query value -> tab label.
TAB_OF = dict(zip(("calibrate", "signoff", "history", "gate"), TABS, strict=True))
#: The session key of the open tab (its label).
TAB_KEY = "thr_tab"


def _in_force(engine: Engine) -> PolicyInForce | None:
    """The policy in force, with a line on where it comes from (None: it cannot be read)."""
    try:
        pif = inforce.in_force(engine)
    except WorkbenchError as exc:
        ui.error("The policy in force cannot be read.")
        st.code(str(exc), language=None)
        return None
    if pif.version is None:
        st.warning(
            "No policy has been signed in this workbench yet: the figures use the shipped "
            "file policies/no-answer-policy.yaml."
        )
    else:
        st.caption(ui.plain(display.in_force_caption(pif.version)))
    return pif


#: The value widgets of the tabs (key prefixes): the pickers and sliders of Calibrate, the
#: versions compared and the rollback on History, a signer's note and confirmation, the case
#: of the Evidence gate. Buttons, downloads and the data editor are not listed: their state
#: cannot be set.
KEPT = (
    "thr_run",
    "thr_mode",
    "thr_split",
    "thr_proposed_",
    "thr_caveat_",
    "thr_sweeps",
    "thr_hist_",
    "thr_rollback_",
    "thr_sign_note_",
    "thr_sign_confirm_",
    "thr_gate_case",
    "thr_gate_asof",
    "thr_gate_pairs_",
)


def _keep_widget_state() -> None:
    """Only the open tab is drawn, and Streamlit forgets the state of a widget a run does not
    draw: set here again, the values of the closed tabs' widgets (a slider moved before
    looking at the Sign-off tab) are as the person left them when they come back."""
    for key in [k for k in st.session_state if str(k).startswith(KEPT)]:
        st.session_state[key] = st.session_state[key]


def main() -> None:
    engine, actor, tax = ui.engine(), ui.actor(), ui.tax()
    st.title("Thresholds")
    integrity.chain_banner(engine)
    pif = _in_force(engine)
    if pif is None:
        return
    _keep_widget_state()
    asked = st.query_params.get("tab")
    # lazy tabs: switching tabs reruns the page, and only the open tab is computed (the
    # sign-off figures, the history and the evidence gate cost nothing while not shown)
    tab_cal, tab_sign, tab_hist, tab_gate = st.tabs(
        TABS, default=TAB_OF.get(asked or ""), key=TAB_KEY, on_change="rerun"
    )
    if tab_cal.open:
        with tab_cal:
            calibrate(engine, actor, tax, pif)
    if tab_sign.open:
        with tab_sign:
            sign_tab(engine, actor, tax, pif)
    if tab_hist.open:
        with tab_hist:
            history_tab(engine, actor, pif)
    if tab_gate.open:
        with tab_gate:
            evidence_tab(engine, actor, pif)


if __name__ == "__main__":
    main()
