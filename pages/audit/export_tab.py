"""The Export tab: the selected batch with its plan, its sample in queue order and the current
verdicts, prepared on demand as JSONL and CSV downloads (restricted text left out for a user
without clearance), and, for a closed batch, its verdicts sent back to Phoenix (push_box)."""

from __future__ import annotations

import io

import streamlit as st
from sqlalchemy import Engine

from pages.audit import push_box
from review.audits import display, export
from review.audits.plans import PlanView
from review.core import clearance
from review.core.identity import Actor


def render(engine: Engine, actor: Actor, plan: PlanView | None) -> None:
    """The whole tab; ``plan`` is the batch selected above the tabs."""
    if plan is None:
        st.info("Nothing to export yet.")
        return
    st.caption(
        "The batch with its plan (filter, strata, allocation, seed, population counts, "
        "fingerprint), the sample in queue order and the current verdicts."
        + ("" if clearance.cleared(actor) else " Text of restricted traces is left out for you.")
    )
    stem = display.export_stem(plan.name)
    if st.button("Prepare the export files", key="aud_export"):
        jsonl, csv_buf = io.StringIO(), io.StringIO()
        export.export_jsonl(engine, actor, plan.id, jsonl)
        export.export_csv(engine, actor, plan.id, csv_buf)
        st.session_state["aud_export_files"] = (plan.id, jsonl.getvalue(), csv_buf.getvalue())
    files = st.session_state.get("aud_export_files")
    if files and files[0] == plan.id:
        c1, c2 = st.columns(2)
        c1.download_button("Download JSONL", files[1], f"audit-{stem}.jsonl", "application/jsonl")
        c2.download_button("Download CSV", files[2], f"audit-{stem}.csv", "text/csv")
    push_box.render(engine, actor, plan)
