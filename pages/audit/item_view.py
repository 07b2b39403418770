"""One audit item on the My queue tab: the trace as the reviewer reads it (query, answer,
signals, retrieved chunks), the wording rules a refusal breaks, and the claim editor that cuts
the answer into claims with the chunks each cites."""

from __future__ import annotations

from typing import Any

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from review.audits import display, forms, items, verdicts
from review.core.identity import Actor
from review.wording import production


def next_uid() -> int:
    """A widget-key id for a claim row that stays unique across reruns of this session."""
    st.session_state["aud_uid"] = int(st.session_state.get("aud_uid", 0)) + 1
    return int(st.session_state["aud_uid"])


def show_item(view: items.ItemView, plan_items: int | None) -> None:
    """The trace: where it sits, what was asked and said, its signals and its chunks."""
    st.subheader(f"Trace {ui.plain(view.trace_id)}")
    st.caption(ui.plain(display.item_caption(view, plan_items)))
    ui.text(view.query, label="Query")
    if view.rewritten_query:
        ui.text(view.rewritten_query, label="Rewritten query")
    ui.text(view.answer_text or "(no text)", label="What the assistant said")
    signals = display.signals_frame(view)
    st.dataframe(
        signals,
        hide_index=True,
        width="stretch",
        height=ui.table_height(len(signals), 8),
    )
    st.caption(f"Retrieved chunks ({len(view.chunks)}; {len(view.context_ids)} reached the model)")
    if view.chunks:
        st.dataframe(
            display.chunks_frame(view.chunks),
            hide_index=True,
            width="stretch",
            height=ui.table_height(len(view.chunks), 10),
        )
    else:
        st.info("Retrieval returned nothing for this request.")


def wording_check(engine: Engine, actor: Actor, view: items.ItemView) -> None:
    """The wording rules the trace's final text breaks (nothing when it breaks none)."""
    wording = production.trace_findings(engine, actor, view.trace_pk)
    if not wording.findings:
        return
    with st.container(border=True):
        st.markdown("**Refusal wording check** (the wording in force)")
        st.caption(
            "The final text breaks these wording rules; if they hold, the verdict is a wording "
            "violation."
        )
        st.dataframe(display.findings_frame(wording.findings), hide_index=True, width="stretch")


def claims_key(item_id: int) -> str:
    return f"aud_claims_{item_id}"


def start_claims(view: items.ItemView, mine: verdicts.VerdictView | None) -> None:
    """Fill the claim editor: the reviewer's saved claims, else the answer split again."""
    st.session_state[claims_key(view.id)] = forms.claim_rows(view, mine, next_uid)


def claim_editor(view: items.ItemView) -> list[items.ClaimDraft]:
    """The claims of the answer, editable, with the check of their citations; returns them."""
    key = claims_key(view.id)
    rows: list[dict[str, Any]] = st.session_state[key]
    st.caption(
        "Each claim with the chunk ids it cites (comma-separated). The answer passes only if "
        "every claim is supported by a chunk that was in the context."
    )
    drafts: list[items.ClaimDraft] = []
    remove: int | None = None
    for n, row in enumerate(rows, start=1):
        uid = row["uid"]
        c1, c2, c3, c4 = st.columns([6, 3, 2, 1])
        row["text"] = c1.text_area(
            f"Claim {n:d}", row["text"], key=f"aud_ct_{view.id}_{uid}", height=68
        )
        row["cited"] = c2.text_input(
            f"Cites (claim {n:d})", row["cited"], key=f"aud_cc_{view.id}_{uid}"
        )
        chosen = c3.selectbox(
            f"Verdict (claim {n:d})",
            forms.claim_verdict_options(),
            index=forms.claim_verdict_index(row["verdict"]),
            key=f"aud_cv_{view.id}_{uid}",
        )
        row["verdict"] = forms.verdict_of_choice(chosen)
        if c4.button("✕", key=f"aud_cr_{view.id}_{uid}", help=f"Remove claim {n:d}"):
            remove = uid
        drafts.append(forms.draft_of_row(row))
    if remove is not None:
        st.session_state[key] = [r for r in rows if r["uid"] != remove]
        st.rerun()
    b1, b2, _ = st.columns([1, 1, 3])
    if b1.button("Add a claim", key=f"aud_add_{view.id}"):
        rows.append(forms.claim_row(next_uid()))
        st.rerun()
    if b2.button("Split the answer again", key=f"aud_resplit_{view.id}"):
        start_claims(view, None)
        st.rerun()
    if drafts and all(d.text.strip() for d in drafts):
        report = items.check_claims(drafts, view.context_ids)
        frame = report.to_frame()
        st.dataframe(
            frame, hide_index=True, width="stretch", height=ui.table_height(len(frame), 10)
        )
        st.caption(ui.plain(display.claims_summary(report)))
    return drafts
