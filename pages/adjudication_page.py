"""Adjudicate: cases whose labels disagree; see every label side by side and set the gold."""

from __future__ import annotations

import pandas as pd
import streamlit as st
from sqlalchemy import Engine

from pages import ui
from review.cases import cases
from review.core.identity import Actor, Permission
from review.core.taxonomy import Taxonomy
from review.labels import labeling

LIMIT = 200


def pick_case(engine: Engine) -> int | None:
    """The case to adjudicate: the deep link's, else the picker's (first disagreement)."""
    queue = labeling.disagreements(engine, limit=LIMIT)
    shown = f"The first {LIMIT:d} cases" if len(queue) >= LIMIT else f"{len(queue):d} case(s)"
    st.caption(f"{shown} whose current labels disagree and have no newer gold label.")
    picked = ui.query_int("case")
    if picked is None and queue:
        picked = queue[0][0]
    if not queue:
        return picked
    keys = {cid: f"{key} ({n} labels)" for cid, key, n in queue}
    options = list(keys)
    if picked not in keys:
        options = [picked, *options] if picked is not None else options
    choice: int = st.selectbox(
        "Case",
        options,
        index=options.index(picked) if picked in options else 0,
        format_func=lambda c: keys.get(c, f"case {c}"),
        key="adj_pick",
    )
    return choice


def side_by_side(engine: Engine, case_id: int, tax: Taxonomy) -> None:
    current = labeling.current_labels(engine, case_id)
    st.caption("Labels side by side")
    if not current:
        st.info("No labels on this case yet.")
        return
    cols = st.columns(len(current))
    for col, lab in zip(cols, current, strict=True):
        with col.container(border=True):
            st.text(lab.annotator)
            st.metric("decision", tax.decisions[lab.decision].label)
            st.text("reasons: " + (", ".join(lab.reason_codes) or "—"))
            st.caption("rationale")
            st.text(lab.rationale or "—")


def gold_form(
    engine: Engine,
    actor: Actor,
    view: cases.CaseView,
    gold: list[labeling.GoldView],
    tax: Taxonomy,
) -> None:
    with st.form(f"adj_form_{view.id}"):
        decisions = list(tax.decisions)
        default = gold[-1].decision if gold else view.expected_decision
        decision = st.selectbox(
            "Gold decision",
            decisions,
            index=decisions.index(default),
            format_func=lambda k: tax.decisions[k].label,
        )
        reasons = st.multiselect(
            "Gold reason codes",
            list(tax.case_reason_codes()),
            default=list(gold[-1].reason_codes if gold else view.reason_codes),
            format_func=lambda k: tax.reason_codes[k].label,
        )
        note = st.text_area("Note (why this is the gold label)")
        ok = st.form_submit_button("Set gold label", type="primary")
    if ok:
        with ui.reported():
            labeling.adjudicate(engine, actor, view.id, decision, reasons, note, tax)
            st.session_state["adj_flash"] = f"Gold label set on {view.key}."
            st.query_params.pop("case", None)
            st.rerun()


def gold_history(gold: list[labeling.GoldView]) -> None:
    st.caption("Gold label history (newest last; the newest is what metrics use)")
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "when": g.created_at,
                    "by": g.adjudicator,
                    "decision": g.decision,
                    "reasons": ", ".join(g.reason_codes),
                    "note": g.note,
                }
                for g in gold
            ]
        ),
        hide_index=True,
        width="stretch",
    )


def main() -> None:
    engine = ui.engine()
    actor = ui.actor()
    tax = ui.tax()
    st.title("Adjudicate")
    if not actor.can(Permission.adjudicate):
        st.info("Adjudication is for reviewers. Your roles do not include it.")
        return
    picked = pick_case(engine)
    if picked is None:
        st.success("No disagreements to adjudicate.")
        return
    view = cases.get_case(engine, case_id=picked)
    if view is None:
        st.error(f"Case {picked:d} does not exist.")
        return
    st.subheader(f"Case {ui.plain(view.key)}")
    ui.text(view.question, label="Question")
    st.caption(
        f"Expected decision on the case: {ui.plain(view.expected_decision)} · reasons: "
        f"{ui.plain(', '.join(view.reason_codes) or '—')} · documents: "
        + ui.plain(", ".join(f"{d.ref} ({d.visibility}, {d.role})" for d in view.documents) or "—")
    )
    if labeling.still_blind(engine, actor, view.id):
        st.info(
            "You may still label this case, so its labels stay hidden from you (blind "
            "labeling). Label it first, or adjudicate it once it has the labels it needs."
        )
        st.link_button("Label this case", ui.link("label", case=view.id))
        return
    side_by_side(engine, view.id, tax)
    gold = labeling.gold_history(engine, view.id)
    gold_form(engine, actor, view, gold, tax)
    flash = st.session_state.pop("adj_flash", None)
    if flash:
        st.success(ui.plain(flash))
    if gold:
        gold_history(gold)


if __name__ == "__main__":
    main()
