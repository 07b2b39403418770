"""The label form: decision keys, reasons (only for decisions that need them), the optional
category, rationale and claim support, and the submit/previous/next/skip row.

Keys never corrupt a label: reasons are pills (no "select all" for Ctrl+Enter to hit), the
submit reads the form and changes none of it, and every button runs a callback bound to the
case it was drawn for: a key that arrives for a case no longer open is refused with a message,
never applied to another case or dropped. Submit is never disabled (a disabled button's key
would be dropped): without a decision, or a reason it needs, it says so at the form.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from pages import keyboard, ui
from pages.labeling import nav
from review.core import readable, terms
from review.core.errors import WorkbenchError
from review.core.taxonomy import Taxonomy
from review.labels import keys, labeling
from review.labels.blind import LabelingCase

NOT_JUDGED = "(not judged)"
NO_DOC = "(none)"


def _k(case_id: int, what: str) -> str:
    return f"lab_{what}_{case_id}"


def prefill(case: LabelingCase, mine: labeling.LabelView | None) -> None:
    """The form's fields start from my current label (editing it), else empty; blind, the
    category does not start from the case's suggestion."""
    s = st.session_state
    s.setdefault(_k(case.id, "dec"), mine.decision if mine else None)
    s.setdefault(_k(case.id, "reasons"), list(mine.reason_codes) if mine else [])
    s.setdefault(_k(case.id, "cat"), (mine.category if mine else None) or case.suggested_category)
    s.setdefault(_k(case.id, "why"), mine.rationale if mine else "")
    previous = {v.get("claim"): v for v in (mine.claim_verdicts if mine else ())}
    refs = [d.ref for d in case.documents]
    for i in range(len(case.required_claims)):
        prev = previous.get(i, {})
        s.setdefault(_k(case.id, f"claim{i}"), prev.get("verdict", NOT_JUDGED))
        doc = prev.get("doc", NO_DOC)
        s.setdefault(_k(case.id, f"claimdoc{i}"), doc if doc in refs else NO_DOC)


def _pick(case_id: int, key: str, decision: str) -> None:
    if st.session_state.get("lab_case") != case_id:
        nav.refuse(key, case_id)
        return
    st.session_state[_k(case_id, "dec")] = decision
    st.session_state.pop("lab_msg", None)


def decisions(tax: Taxonomy, case: LabelingCase) -> str | None:
    by_key = keys.decision_keys(tax)
    chosen: str | None = st.session_state.get(_k(case.id, "dec"))
    with st.container(horizontal=True, gap="small"):
        for d, key in by_key.items():
            term = tax.decisions[d]
            st.button(
                ui.plain(term.label),
                key=f"lab_btn_{d}",
                type="primary" if chosen == d else "secondary",
                shortcut=key,
                help=ui.plain(term.definition),
                on_click=_pick,
                args=(case.id, key, d),
            )
    return chosen


def reasons(tax: Taxonomy, case: LabelingCase, decision: str | None) -> None:
    if not labeling.needs_reasons(tax, decision):
        return
    codes = tax.case_reason_codes()
    by_key = keys.reason_keys(tax)
    with keyboard.options(list(by_key.values()), "reasons"):
        st.pills(
            f"Why {ui.plain(readable.term(tax, 'decisions', decision))}? (one or more reasons)",
            list(codes),
            selection_mode="multi",
            format_func=lambda k: ui.plain(
                keyboard.option_label(by_key.get(k, ""), codes[k].label)
            ),
            key=_k(case.id, "reasons"),
            help=ui.plain(
                "Click or press its letter to pick or unpick; Ctrl+Enter submits and changes "
                "none of them."
            ),
        )


def _follow(case: LabelingCase) -> None:
    """In a rerun of a fragment alone: if a callback of this rerun opened another case (a
    Ctrl+Enter in the rationale both commits the text, a fragment rerun, and submits), the
    whole page follows; otherwise the page would keep showing the case just saved."""
    if st.session_state.get("lab_case") != case.id:
        st.rerun(scope="app")


@st.fragment
def details(tax: Taxonomy, case: LabelingCase) -> None:
    """Category, rationale and support per claim: optional, folded away."""
    _follow(case)
    with st.expander("Category, rationale and claim support (optional)"):
        st.selectbox(
            "Category",
            list(tax.categories),
            format_func=lambda k: ui.plain(tax.categories[k].label),
            key=_k(case.id, "cat"),
            index=None,
            placeholder="Pick a category",
        )
        st.text_area("Rationale", key=_k(case.id, "why"), height=68)
        refs = [NO_DOC, *[d.ref for d in case.documents]]
        for i in range(len(case.required_claims)):
            c1, c2 = st.columns(2)
            c1.selectbox(
                f"Claim {i + 1:d}",
                [NOT_JUDGED, *terms.CLAIM_VERDICTS],
                key=_k(case.id, f"claim{i}"),
            )
            c2.selectbox(f"by document (claim {i + 1:d})", refs, key=_k(case.id, f"claimdoc{i}"))


@st.fragment
def fields(tax: Taxonomy, case: LabelingCase) -> None:
    """Decision and reasons: a key or a click here reruns only this."""
    _follow(case)
    decision = decisions(tax, case)
    if decision is None:
        st.caption("Pick a decision (keys 1–5).")
    reasons(tax, case, decision)
    message()  # at the form, right above Submit; a decision picked here clears it


def _label_in(tax: Taxonomy, case_id: int, n_claims: int) -> labeling.LabelIn | str:
    """The label the form holds, or what is missing from it."""
    s = st.session_state
    decision = s.get(_k(case_id, "dec"))
    if decision is None:
        return "Pick a decision first (keys 1–5); nothing was saved."
    picked = s.get(_k(case_id, "reasons")) or []
    codes = labeling.label_reasons(tax, decision, picked)
    if labeling.needs_reasons(tax, decision) and not codes:
        name = readable.term(tax, "decisions", decision)
        return f"Say why: {name} needs at least one reason; nothing was saved."
    verdicts: list[dict[str, Any]] = []
    for i in range(n_claims):
        verdict = s.get(_k(case_id, f"claim{i}"), NOT_JUDGED)
        doc = s.get(_k(case_id, f"claimdoc{i}"), NO_DOC)
        if verdict != NOT_JUDGED:
            verdicts.append(
                {"claim": i, "verdict": verdict, **({"doc": doc} if doc != NO_DOC else {})}
            )
    return labeling.LabelIn(
        decision, codes, s.get(_k(case_id, "cat")), s.get(_k(case_id, "why")) or "", tuple(verdicts)
    )


def _submit(case_id: int, case_key: str, n_claims: int, based_on: int | None) -> None:
    if st.session_state.get("lab_case") != case_id:
        nav.refuse("Ctrl+Enter", case_id)
        return
    tax = ui.tax()
    label = _label_in(tax, case_id, n_claims)
    if isinstance(label, str):
        st.session_state["lab_msg"] = ("error", label)
        return
    try:
        labeling.submit(ui.engine(), ui.actor(), case_id, label, based_on, tax)
    except WorkbenchError as exc:
        st.session_state["lab_msg"] = ("error", f"Nothing was saved. {exc}")
        return
    decision = readable.term(tax, "decisions", label.decision)
    edited = " (changed; the earlier label stays in the history)" if based_on else ""
    nav.load_next(exclude_current=False)
    st.session_state["lab_msg"] = (
        "success",
        f"Saved your label on {case_key}: {decision}{edited}.",
    )


def actions(case: LabelingCase, mine: labeling.LabelView | None) -> None:
    """Submit, previous, next, skip: always on screen under the form; messages right here."""
    with st.container(horizontal=True, gap="small"):
        st.button(
            "Submit label" if mine is None else "Change my label",
            key="lab_submit",
            type="primary",
            shortcut=keys.SUBMIT,
            on_click=_submit,
            args=(case.id, case.key, len(case.required_claims), mine.id if mine else None),
        )
        nav.buttons(case.id, labeled=mine is not None)
    details(ui.tax(), case)


def message() -> None:
    msg = st.session_state.get("lab_msg")
    if msg:
        kind, text = msg
        if kind == "success":
            st.success(ui.plain(text))
        elif kind == "info":
            st.info(ui.plain(text))
        else:
            ui.error(text)
