"""Adjudicate: cases whose labels disagree; the evidence (question, claims, documents) beside
every label, the gold form, and next/previous through the reviewer's list. A reviewer does not
adjudicate a case they labeled unless an admin allows it (review/labels/adjudication.py)."""

from __future__ import annotations

import pandas as pd
import streamlit as st
from sqlalchemy import Engine
from streamlit.delta_generator import DeltaGenerator

from pages import keyboard, ui
from review.admin import navigation, users
from review.cases import cases, display, sight
from review.core import readable
from review.core.identity import Actor, Permission
from review.core.taxonomy import Taxonomy
from review.labels import adjudication, blind, keys, labeling

LIMIT = 200
CASE_KEY = "adj_case"  # the case on screen (the source of truth)
PICK_KEY = "adj_pick"  # the picker's widget state
GOTO_KEY = "adj_goto"  # a case to switch to on the next run (set after the picker is drawn)
DEEP_KEY = "adj_deep"  # the case the address (?case=) named on the last run
FLASH_KEY = "adj_flash"  # what the last gold label did, shown under the form's button


def reasons_text(codes: tuple[str, ...], tax: Taxonomy) -> str:
    """Reason codes as their labels, comma-separated; a dash for none."""
    return ", ".join(readable.term(tax, "reason_codes", c) for c in codes) or "—"


def _go(case_id: int | None) -> None:
    """Switch to ``case_id`` (a button callback: runs before the picker is drawn)."""
    st.session_state[CASE_KEY] = case_id
    st.session_state[PICK_KEY] = case_id


def current_case(queue: adjudication.ReviewerQueue) -> int | None:
    """The case to show: a pending switch, else the deep link on first opening, else the one
    on screen, else the first of the list."""
    if GOTO_KEY in st.session_state:
        _go(st.session_state.pop(GOTO_KEY))
    deep = ui.query_case()
    if CASE_KEY not in st.session_state:
        _go(deep if deep is not None else (queue.ids()[0] if queue.entries else None))
    elif deep is not None and deep != st.session_state.get(DEEP_KEY):
        _go(deep)  # the address was changed to another case
    picked = st.session_state.get(CASE_KEY)
    if picked is None and queue.entries:
        picked = queue.ids()[0]
        _go(picked)
    return int(picked) if picked is not None else None


def list_caption(queue: adjudication.ReviewerQueue) -> str:
    shown = (
        f"The first {readable.number(len(queue.entries))} cases"
        if queue.limited
        else f"{readable.count(len(queue.entries), 'case')}"
    )
    text = f"{shown} whose current labels disagree and have no newer gold label."
    if queue.hidden:
        text += (
            f" {readable.number(queue.hidden)} more you labeled yourself wait for another "
            "reviewer (an admin can allow self-adjudication on the Admin page)."
        )
    return text


def picker(queue: adjudication.ReviewerQueue, picked: int) -> bool:
    """The case picker with previous/next (keys P and N) through the list, and the button of
    the key list (whether it was pressed)."""
    st.caption(ui.plain(list_caption(queue)))
    entries = {e.case_id: e for e in queue.entries}
    options = queue.ids()
    if picked not in entries:
        options = [picked, *options]

    def label(cid: int) -> str:
        e = entries.get(cid)
        if e is None:
            return f"case {cid:d} (not in your list)"
        return f"{e.key} · {e.labels:d} labels" + (" · you labeled this" if e.mine else "")

    st.session_state[PICK_KEY] = picked
    prev_id, next_id = queue.neighbours(picked)
    c1, c2, c3, c4 = st.columns([4, 1.5, 1.5, 1.5], vertical_alignment="bottom")
    c1.selectbox(
        "Case",
        options,
        format_func=label,
        key=PICK_KEY,
        on_change=lambda: _go(st.session_state[PICK_KEY]),
    )
    c2.button(
        "Previous",
        shortcut="p",
        disabled=prev_id is None,
        on_click=_go,
        args=(prev_id,),
        width="stretch",
    )
    c3.button(
        "Next",
        shortcut="n",
        disabled=next_id is None,
        on_click=_go,
        args=(next_id,),
        width="stretch",
    )
    with c4:
        asked = keyboard.help_button("adjudicate")
    place = queue.position(picked)
    if place is not None:
        st.caption(f"Case {place:d} of {len(queue.entries):d} in your list.")
    return asked


def evidence(engine: Engine, actor: Actor, view: cases.CaseView, tax: Taxonomy) -> None:
    """The question, required claims and documents (clearance-checked), scrolling."""
    ui.text(view.question, label="Question")
    st.caption("Required claims")
    if view.required_claims:
        for i, claim in enumerate(view.required_claims, 1):
            st.text(f"{i}. {claim}")
    else:
        st.text("No required claims are written for this case.")
    if view.blind:
        st.info(ui.plain(sight.BLIND_NOTE))
    else:
        expected = readable.term(tax, "decisions", view.expected_decision)
        reasons = reasons_text(view.reason_codes, tax)
        st.caption(
            f"Expected decision on the case: {ui.plain(expected)} · reasons: {ui.plain(reasons)}"
        )
    st.caption(
        f"Documents available to retrieval for identity “{ui.plain(view.identity_name)}” "
        f"(may see: {ui.plain(', '.join(view.identity_scopes)) or 'nothing'})"
    )
    if not view.documents:
        st.text("(no documents: empty retrieval)")
        return
    # roles and access read as the taxonomy's words; the title gets the room (it was cut to a
    # few letters beside seven narrow columns) and the link and reference stay in view
    ui.table(
        display.documents_table(
            view.documents, actor, lambda doc_id: ui.link("corpus", doc=doc_id), tax
        ),
        pin=("open", "document"),
        column_config={
            "open": st.column_config.LinkColumn("open", display_text="open"),
            "title": st.column_config.TextColumn("title", width="large"),
        },
        key="adj_documents",
    )
    with st.container(height=480, key="adj_docs"):
        for d in adjudication.case_evidence(engine, actor, view):
            forbidden = "FORBIDDEN to this identity · " if d.visibility == "forbidden" else ""
            with st.expander(
                f"{forbidden}{ui.plain(d.ref)} · {ui.plain(d.role)}",
                expanded=d.role == "decisive" and not forbidden,
            ):
                st.text(d.title)
                if d.body is None:
                    st.warning(ui.plain(d.withheld or "Not shown."))
                else:
                    ui.document_body(d.body)


def side_by_side(current: list[labeling.LabelView], tax: Taxonomy, names: dict[str, str]) -> None:
    """Every current label, side by side above the evidence (up to three a row), each
    compact: the decision and who, then the reasons and the rationale. Above the evidence
    rather than above the gold form, so the form stays in view at 1280x720."""
    st.caption("Labels side by side")
    if not current:
        st.info("No labels on this case yet.")
        return
    per_row = min(len(current), 3)
    with st.container(key="adj_labels"):
        cols = st.columns(per_row)
        for i, lab in enumerate(current):
            with cols[i % per_row].container(border=True, gap=None):
                decision = readable.term(tax, "decisions", lab.decision)
                who = names.get(lab.annotator, lab.annotator)
                st.markdown(f"**{ui.plain(decision)}**")
                st.text(who)
                st.text(
                    "reasons: "
                    + reasons_text(lab.reason_codes, tax)
                    + "\nrationale: "
                    + (lab.rationale or "—")
                )


def gold_form(
    engine: Engine,
    actor: Actor,
    view: cases.CaseView,
    tax: Taxonomy,
    queue: adjudication.ReviewerQueue,
) -> None:
    """The gold label: it starts empty (nothing is saved by accident), keys pick the decision
    (digits) and reasons (letters) and Ctrl+Enter sets it; what happened is said right under
    the button."""
    decision_keys = keys.decision_keys(tax)
    reason_keys = keys.reason_keys(tax)
    codes = tax.case_reason_codes()
    with st.form(f"adj_form_{view.id}", border=True):
        with keyboard.options(list(decision_keys.values()), "gold_decision"):
            decision = st.pills(
                "Gold decision",
                list(tax.decisions),
                selection_mode="single",
                default=None,
                key=f"adj_gold_dec_{view.id}",
                format_func=lambda k: ui.plain(
                    keyboard.option_label(decision_keys[k], tax.decisions[k].label)
                ),
            )
        with keyboard.options(list(reason_keys.values()), "gold_reasons"):
            reasons = st.pills(
                "Gold reason codes",
                list(codes),
                selection_mode="multi",
                default=None,
                key=f"adj_gold_reasons_{view.id}",
                format_func=lambda k: ui.plain(
                    keyboard.option_label(reason_keys.get(k, ""), codes[k].label)
                ),
            )
        note = st.text_area("Note (why this is the gold label)", height=68)
        ok = st.form_submit_button("Set gold label", type="primary", shortcut="ctrl+enter")
    here = st.container()  # what the button did, right under it
    show_flash(here)
    if not ok:
        return
    if decision is None:
        first, *_, last = decision_keys.values()
        ui.error(
            f"Pick a gold decision first (keys {first}–{last}); nothing was saved.", where=here
        )
        return
    with ui.reported(where=here):
        labeling.adjudicate(engine, actor, view.id, decision, list(reasons or ()), note, tax)
        _, next_id = queue.neighbours(view.id)
        st.session_state[FLASH_KEY] = f"Gold label set on {view.key}."
        st.session_state[GOTO_KEY] = next_id
        st.rerun()


def show_flash(where: DeltaGenerator) -> None:
    """What the last gold label did (it moved on to this case), once."""
    flash = st.session_state.pop(FLASH_KEY, None)
    if flash:
        where.success(ui.plain(flash))


@st.dialog("Keys of the Adjudicate page", width="large")
def keys_dialog(tax: Taxonomy) -> None:
    lines = [
        keyboard.Shown(k, f"Gold decision: {tax.decisions[d].label}")
        for d, k in keys.decision_keys(tax).items()
    ]
    lines += [keyboard.Shown(k, d) for k, d in keys.reason_lines(tax)]
    lines += [
        keyboard.Shown("Ctrl+Enter", "Set the gold label and go to the next case"),
        keyboard.Shown("P / N", "Previous / next case of the list"),
        keyboard.Shown("?", "Show these keys"),
    ]
    keyboard.key_list(lines)


def gold_history(gold: list[labeling.GoldView], tax: Taxonomy, names: dict[str, str]) -> None:
    st.caption("Gold label history (newest last; the newest is what metrics use)")
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "when": readable.when(g.created_at),
                    "by": names.get(g.adjudicator, g.adjudicator),
                    "decision": readable.term(tax, "decisions", g.decision),
                    "reasons": reasons_text(g.reason_codes, tax),
                    "note": g.note,
                }
                for g in gold
            ]
        ),
        hide_index=True,
        width="stretch",
    )


def gold_side(
    engine: Engine,
    actor: Actor,
    view: cases.CaseView,
    tax: Taxonomy,
    queue: adjudication.ReviewerQueue,
    names: dict[str, str],
) -> None:
    """The gold form (or why this reviewer does not set it), then the gold history."""
    refusal = adjudication.self_adjudication_refusal(engine, actor, view.id)
    if refusal is None:
        gold_form(engine, actor, view, tax, queue)
    else:
        show_flash(st.container())
        st.warning(ui.plain(refusal[:1].upper() + refusal[1:] + "."))
    gold = labeling.gold_history(engine, view.id)
    if gold:
        gold_history(gold, tax, names)


def blind_note(view: cases.CaseView) -> None:
    """Why a case the reviewer may still label shows no labels and no gold form."""
    show_flash(st.container())
    st.info(
        "You may still label this case, so its labels stay hidden from you (blind "
        "labeling). Label it first, or adjudicate it once it has the labels it needs."
    )
    st.link_button("Label this case", ui.link("label", case=view.id))


def main() -> None:
    engine = ui.engine()
    actor = ui.actor()
    tax = ui.tax()
    ui.compact()
    st.title("Adjudicate")
    if not actor.can(Permission.adjudicate):
        ui.not_for_you("Adjudication", navigation.holders(Permission.adjudicate), actor)
        return
    keyboard.install()
    found = labeling.disagreements(engine, limit=LIMIT)
    queue = adjudication.reviewer_queue(engine, actor, found, LIMIT)
    picked = current_case(queue)
    if picked is None:
        st.caption(ui.plain(list_caption(queue)))
        show_flash(st.container())
        st.success("No disagreements to adjudicate.")
        return
    if picker(queue, picked):
        keys_dialog(tax)
    st.query_params["case"] = str(picked)
    st.session_state[DEEP_KEY] = picked
    view = sight.get_case(engine, blind.sight(engine, actor), picked, viewer=actor)
    if view is None:
        ui.error(f"Case {picked:d} does not exist.")
        return
    st.subheader(f"Case {ui.plain(view.key)}")
    blind_to_me = labeling.still_blind(engine, actor, view.id)
    names = {u.email: u.name for u in users.list_users(engine, include_inactive=True)}
    left, right = st.columns([3, 2], gap="large")
    with left:
        if not blind_to_me:
            side_by_side(labeling.current_labels(engine, view.id), tax, names)
        evidence(engine, actor, view, tax)
    with right:  # the gold form at the top of its column: in view when the case opens
        if blind_to_me:
            blind_note(view)
        else:
            gold_side(engine, actor, view, tax, queue, names)


if __name__ == "__main__":
    main()
