"""The "Evidence gate" tab of the Thresholds page: what the evidence gate (docs/evidence-gate.md)
decides on a case with the policy in force. The input is built from the case (review.thresholds.
casegate) and completed here; the state comes from the same code as ``workbench decide``."""

from __future__ import annotations

import datetime as dt
import json

import pandas as pd
import streamlit as st
from sqlalchemy import Engine

from pages import ui
from review.core.errors import WorkbenchError
from review.core.identity import Actor
from review.policy.evidence import EvidenceInput, EvidenceState
from review.policy.inforce import PolicyInForce
from review.thresholds import casegate


def _state(inp: EvidenceInput, state: EvidenceState) -> None:
    st.metric("Status", state.status)
    st.caption(
        ui.plain(
            f"Rule: {state.rule} · reason codes: {', '.join(state.reason_codes) or 'none'} · "
            f"missing claims: {', '.join(state.missing_claims) or 'none'}"
            + (
                f" · signals missing: {', '.join(state.missing_signals)}"
                if state.missing_signals
                else ""
            )
        )
    )
    st.dataframe(pd.DataFrame(casegate.state_rows(state)), hide_index=True, width="stretch")
    if state.stale_evidence:
        st.caption("Stale evidence: the freshness rule that applied to each claim")
        st.dataframe(
            pd.DataFrame(casegate.freshness_rows(inp, state)),
            hide_index=True,
            width="stretch",
        )
    ui.text(state.next_step, label="Next step")
    if state.answer:
        ui.text(state.answer, label="Answer from the supporting passages")


def evidence_tab(engine: Engine, actor: Actor, pif: PolicyInForce) -> None:
    st.caption(
        "What the evidence gate (docs/evidence-gate.md: answer-bearing evidence, claim "
        "coverage, support strength, source policy, freshness, agreement) decides on a case "
        "with the policy in force. The passages come from the case's documents; fill in "
        "each one's support score (0 to 1) from your retriever or judge: an empty score is a "
        "signal the gate did not get, and it fails closed on it."
    )
    c1, c2 = st.columns([2, 1])
    key = c1.text_input("Case key", key="thr_gate_case", placeholder="CASE-001")
    as_of = c2.date_input("As of", value=dt.date.today(), key="thr_gate_asof")
    if not key.strip():
        st.info("Type a case key to see what the evidence gate decides on it.")
        return
    try:
        inp = casegate.case_input(engine, actor, key)
    except WorkbenchError as exc:
        ui.show_error(exc)
        return
    ui.text(inp.question, label="Question")
    kinds = casegate.claim_kinds(pif.policy, inp)
    st.caption(
        "Required claims, each with the kind the case gives it: the policy's freshness rule "
        "for that kind applies (change it here to try another); without one, the rule for "
        "the passage's category (its document's authority) or the policy's max_age_days does. "
        + ui.plain(casegate.freshness_summary(pif.policy))
    )
    kind_column = (
        st.column_config.SelectboxColumn("kind", options=kinds)
        if kinds
        else st.column_config.TextColumn("kind")
    )
    claims = st.data_editor(
        pd.DataFrame(casegate.claim_rows(inp), columns=casegate.CLAIM_COLUMNS),
        hide_index=True,
        width="stretch",
        key=f"thr_gate_claims_{inp.id}",
        disabled=["id", "text"],
        column_config={"kind": kind_column},
    )
    rows = st.data_editor(
        pd.DataFrame(casegate.passage_rows(inp), columns=casegate.PASSAGE_COLUMNS),
        hide_index=True,
        width="stretch",
        key=f"thr_gate_rows_{inp.id}",
        disabled=["id", "source"],
        column_config={
            "supports": st.column_config.TextColumn("supports (claim ids)"),
            "support_score": st.column_config.NumberColumn(min_value=0.0, max_value=1.0),
            "allowed": st.column_config.CheckboxColumn(),
            "effective_date": st.column_config.DateColumn(),
            "superseded": st.column_config.CheckboxColumn(),
            "category": st.column_config.TextColumn("category (authority)"),
        },
    )
    pairs = st.text_input("Contradictions (A | B; C | D)", key=f"thr_gate_pairs_{inp.id}")
    with ui.reported():
        done = casegate.input_from_rows(
            inp,
            rows.to_dict(orient="records"),
            casegate.parse_pairs(pairs),
            as_of if isinstance(as_of, dt.date) else None,
            claims.to_dict(orient="records"),
        )
        state = casegate.decide_case(done, pif.policy)
        _state(done, state)
        line = json.dumps(done.model_dump(mode="json"), ensure_ascii=False)
        st.download_button(
            "Download the input line (for workbench decide)",
            line + "\n",
            file_name=f"{inp.id}.jsonl",
            mime="application/jsonl",
            key="thr_gate_download",
        )
