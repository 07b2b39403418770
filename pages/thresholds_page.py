"""Thresholds: calibrate on validation, see what a change buys and costs, propose, sign off.

The tabs live in pages/thresholds/; this page reads the policy in force once per run and hands
it to each tab. A link opens a tab: ``?tab=signoff`` (calibrate, signoff, history, gate), and
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


def main() -> None:
    engine, actor, tax = ui.engine(), ui.actor(), ui.tax()
    st.title("Thresholds")
    integrity.chain_banner(engine)
    pif = _in_force(engine)
    if pif is None:
        return
    asked = st.query_params.get("tab")
    tab_cal, tab_sign, tab_hist, tab_gate = st.tabs(TABS, default=TAB_OF.get(asked or ""))
    with tab_cal:
        calibrate(engine, actor, tax, pif)
    with tab_sign:
        sign_tab(engine, actor, tax, pif)
    with tab_hist:
        history_tab(engine, actor, pif)
    with tab_gate:
        evidence_tab(engine, actor, pif)


if __name__ == "__main__":
    main()
