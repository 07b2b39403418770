"""The Export tab's push to Phoenix: on a closed batch, a reviewer or an administrator sends
its verdicts, failed stages and claim judgments back to the traces' root spans in Phoenix
(review.audits.pushback); what the push did is said under the button."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from pages import job_controls, ui
from review.audits.plans import PlanView
from review.core.identity import Actor
from review.core.terms import PlanStatus
from review.traces.live import push

KEY = "aud_push"


def render(engine: Engine, actor: Actor, plan: PlanView) -> None:
    """The button and what its last press did; nothing for a user who may not push."""
    if not push.may_push(actor):
        return
    st.subheader("Back to Phoenix")
    if plan.status != PlanStatus.closed:
        st.caption(
            "When the batch is closed, its verdicts can be sent back to the traces in Phoenix "
            "as span annotations."
        )
        return
    st.caption(
        "Writes each verdict, failed stage and claim judgment to the trace's root span in "
        "Phoenix (annotator HUMAN, the reviewer as identifier). Sending again writes only what "
        "changed or failed; traces imported from files have no Phoenix span."
    )
    pressed = st.button("Send the verdicts to Phoenix", key=KEY)
    here = ui.under(KEY)
    if pressed:
        with ui.reported("Nothing was sent. ", here), st.spinner("Sending to Phoenix…"):
            job_controls.start(
                engine, actor, KEY, "phoenix_push", {"plan_id": plan.id}, job_controls.result_text
            )
            st.rerun()
    job_controls.watch(engine, actor, KEY, "phoenix_push", job_controls.result_text, where=here)
