"""Label: my queue of cases, blind labels with keyboard shortcuts, progress, history."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st
from sqlalchemy import Engine

from pages import ui
from review.cases import cases, display
from review.core import terms
from review.core.identity import Actor, Permission
from review.core.taxonomy import Taxonomy
from review.corpus import corpus
from review.labels import labeling

NOT_JUDGED = "(not judged)"
NO_DOC = "(none)"


def progress_panel(prog: labeling.Progress) -> None:
    c1, c2, c3 = st.columns(3)
    c1.metric("Labeled by me", f"{prog.mine} / {prog.ready_cases}")
    c1.progress(prog.mine / prog.ready_cases if prog.ready_cases else 0.0)
    c2.metric(f"Cases with {prog.overlap:d} labels", f"{prog.complete_cases} / {prog.ready_cases}")
    c2.progress(prog.complete_cases / prog.ready_cases if prog.ready_cases else 0.0)
    c3.metric(
        "Labels in all", prog.labels, help=f"Each case needs {prog.overlap:d} independent labels"
    )


def load_next(engine: Engine, actor: Actor) -> None:
    nxt = labeling.next_case(engine, actor, exclude=st.session_state["lab_skipped"])
    st.session_state["lab_case"] = nxt
    st.session_state.pop("lab_decision", None)
    if nxt is None:
        st.query_params.pop("case", None)
    else:
        st.query_params["case"] = str(nxt)


def idle(engine: Engine, actor: Actor, prog: labeling.Progress) -> None:
    """No case open: start (or go on) labeling, bring skipped cases back."""
    if st.button("Start labeling: next case", type="primary", shortcut="n"):
        load_next(engine, actor)
        st.rerun()
    if st.session_state["lab_skipped"]:
        st.caption(f"{len(st.session_state['lab_skipped'])} case(s) skipped this session.")
        if st.button("Bring skipped cases back"):
            st.session_state["lab_skipped"] = []
            st.rerun()
    if prog.mine >= prog.ready_cases and prog.ready_cases:
        st.success("You have labeled every ready case.")


def case_header(view: cases.CaseView) -> None:
    st.subheader(f"Case {ui.plain(view.key)}")
    st.caption(
        f"Deep link: ?case={view.id:d} · category suggested by the case: "
        + ui.plain(view.category)
        + (
            f" · family {ui.plain(view.family)} ({ui.plain(view.evidence_state or '—')})"
            if view.family
            else ""
        )
    )
    ui.text(view.question, label="Question")
    if view.required_claims:
        st.caption("Required claims")
        for i, claim in enumerate(view.required_claims, 1):
            st.text(f"{i}. {claim}")


def evidence(engine: Engine, actor: Actor, view: cases.CaseView) -> None:
    st.caption(
        f"Evidence exactly as the identity “{ui.plain(view.identity_name)}” gets it "
        f"(may see: {ui.plain(', '.join(view.identity_scopes)) or 'nothing'})"
    )
    if not view.documents:
        st.info("Retrieval returns nothing for this identity (empty retrieval).")
    for d in view.documents:
        forbidden = d.visibility == "forbidden"
        restricted = d.access_scope == "restricted"
        title = d.title if (not restricted or actor.clearance) else "(restricted title hidden)"
        label = (
            f"{'FORBIDDEN to this identity · ' if forbidden else ''}"
            f"{ui.plain(d.ref)} · {ui.plain(d.role)}"
        )
        with st.expander(label, expanded=not forbidden and d.role == "decisive"):
            st.text(title)
            if forbidden and not actor.clearance:
                st.warning(
                    "Forbidden to this identity. Its text is shown only to users with clearance."
                )
                continue
            if restricted and not actor.clearance:
                st.warning("Restricted document: shown only to users with clearance.")
                continue
            doc = corpus.get_document(engine, actor, d.document_id)
            st.caption(
                ui.plain(
                    f"effective {doc.effective_date or '—'} · {doc.authority} · "
                    f"{doc.jurisdiction} · {doc.access_scope}"
                )
                + (" · forbidden: the identity must not get this text" if forbidden else "")
            )
            st.code(doc.body, language=None, wrap_lines=True)


def decision_buttons(tax: Taxonomy, mine: labeling.LabelView | None) -> str | None:
    keys = {d: str(i + 1) for i, d in enumerate(tax.decisions)}
    decisions = list(tax.decisions)
    st.session_state.setdefault("lab_decision", mine.decision if mine else None)
    cols = st.columns(len(decisions))
    for col, d in zip(cols, decisions, strict=True):
        term = tax.decisions[d]
        chosen = st.session_state["lab_decision"] == d
        if col.button(
            f"{ui.plain(term.label)} \\[{ui.plain(keys[d])}\\]",
            key=f"lab_btn_{d}",
            type="primary" if chosen else "secondary",
            shortcut=keys[d],
            help=ui.plain(term.definition),
            width="stretch",
        ):
            st.session_state["lab_decision"] = d
            st.rerun()
    decision: str | None = st.session_state["lab_decision"]
    st.caption(
        f"Decision: {ui.plain(tax.decisions[decision].label)}"
        if decision
        else "Pick a decision (keys 1–5)."
    )
    return decision


def claim_verdicts(view: cases.CaseView, mine: labeling.LabelView | None) -> list[dict[str, Any]]:
    verdicts: list[dict[str, Any]] = []
    if not view.required_claims:
        return verdicts
    st.caption("Support for each required claim")
    doc_refs = [NO_DOC, *[d.ref for d in view.documents]]
    previous = {v.get("claim"): v for v in (mine.claim_verdicts if mine else ())}
    opts = [NOT_JUDGED, *terms.CLAIM_VERDICTS]
    for i, _claim in enumerate(view.required_claims):
        c1, c2 = st.columns([1, 1])
        prev = previous.get(i, {})
        verdict = c1.selectbox(
            f"Claim {i + 1:d}",
            opts,
            index=opts.index(prev.get("verdict", NOT_JUDGED)),
            key=f"lab_claim_{view.id}_{i}",
        )
        prev_doc = prev.get("doc", NO_DOC)
        doc = c2.selectbox(
            f"by document (claim {i + 1:d})",
            doc_refs,
            index=doc_refs.index(prev_doc) if prev_doc in doc_refs else 0,
            key=f"lab_claimdoc_{view.id}_{i}",
        )
        if verdict != NOT_JUDGED:
            verdicts.append(
                {"claim": i, "verdict": verdict, **({"doc": doc} if doc != NO_DOC else {})}
            )
    return verdicts


def label_fields(
    tax: Taxonomy, view: cases.CaseView, mine: labeling.LabelView | None
) -> tuple[list[str], str, str]:
    """Reason codes, category and rationale of the label being written."""
    reasons = st.multiselect(
        "Why the evidence is insufficient (reason codes)",
        list(tax.case_reason_codes()),
        default=list(mine.reason_codes) if mine else [],
        format_func=lambda k: tax.reason_codes[k].label,
        key=f"lab_reasons_{view.id}",
        help=display.terms_help(tax.case_reason_codes()),
    )
    with st.expander("Reason code definitions"):
        st.dataframe(
            pd.DataFrame(
                [
                    {"code": t.label, "definition": t.definition}
                    for t in tax.case_reason_codes().values()
                ]
            ),
            hide_index=True,
            width="stretch",
        )
    cats = list(tax.categories)
    if mine and mine.category:
        start = mine.category
    else:
        start = view.category if view.category in cats else cats[0]
    category: str = st.selectbox(
        "Category",
        cats,
        index=cats.index(start),
        format_func=lambda k: tax.categories[k].label,
        key=f"lab_cat_{view.id}",
    )
    rationale = st.text_area(
        "Rationale", mine.rationale if mine else "", key=f"lab_why_{view.id}", height=80
    )
    return list(reasons), category, rationale


def after_labeling(engine: Engine, actor: Actor, view: cases.CaseView) -> None:
    """Once I have labeled the case: the next case, everyone's labels, my history."""
    if st.button("Next case [N]", shortcut="n", type="primary"):
        load_next(engine, actor)
        st.rerun()
    others = labeling.visible_labels(engine, actor, view.id) or []
    st.caption("All current labels on this case (visible because you have labeled it)")
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "annotator": o.annotator,
                    "decision": o.decision,
                    "reasons": ", ".join(o.reason_codes),
                    "rationale": o.rationale,
                    "when": o.created_at,
                }
                for o in others
            ]
        ),
        hide_index=True,
        width="stretch",
    )
    with st.expander("My label history on this case"):
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "label": h.id,
                        "decision": h.decision,
                        "reasons": ", ".join(h.reason_codes),
                        "when": h.created_at,
                        "replaces": h.replaces_id,
                    }
                    for h in labeling.history(engine, view.id)
                    if h.annotator == actor.email
                ]
            ),
            hide_index=True,
            width="stretch",
        )


def label_case(engine: Engine, actor: Actor, tax: Taxonomy, view: cases.CaseView) -> None:
    mine = labeling.my_label(engine, actor, view.id)
    case_header(view)
    evidence(engine, actor, view)
    st.divider()
    st.subheader("Your label" + (" (edit)" if mine else ""))
    decision = decision_buttons(tax, mine)
    reasons, category, rationale = label_fields(tax, view, mine)
    verdicts = claim_verdicts(view, mine)
    b1, b2, _ = st.columns([1, 1, 3])
    submit = b1.button(
        "Submit label [Ctrl+Enter]",
        type="primary",
        shortcut="ctrl+enter",
        disabled=decision is None,
    )
    skip = b2.button("Skip [S]", shortcut="s")
    if skip:
        labeling.release(engine, actor, view.id)
        st.session_state["lab_skipped"].append(view.id)
        load_next(engine, actor)
        st.rerun()
    if submit and decision is not None:
        with ui.reported():
            labeling.submit(
                engine,
                actor,
                view.id,
                labeling.LabelIn(decision, tuple(reasons), category, rationale, tuple(verdicts)),
                mine.id if mine else None,
                tax,
            )
            st.session_state["lab_flash"] = f"Saved your label on {view.key}."
            st.rerun()
    flash = st.session_state.pop("lab_flash", None)
    if flash:
        st.success(ui.plain(flash))
    if mine is not None:
        after_labeling(engine, actor, view)
    else:
        st.caption("Blind labeling: other people's labels on this case appear after you submit.")


def main() -> None:
    engine = ui.engine()
    actor = ui.actor()
    tax = ui.tax()
    st.title("Label")
    if not actor.can(Permission.label):
        st.info(
            "Labeling is for annotators. Your roles do not include it; the Agreement and "
            "Adjudicate pages show the labels."
        )
        return
    st.session_state.setdefault("lab_skipped", [])
    st.session_state.setdefault("lab_case", None)
    prog = labeling.progress(engine, actor)
    progress_panel(prog)
    deep = ui.query_int("case")
    if deep is not None and st.session_state["lab_case"] != deep:
        with ui.reported():
            labeling.reserve(engine, actor, deep)
            st.session_state["lab_case"] = deep
    case_id = st.session_state["lab_case"]
    if case_id is None:
        idle(engine, actor, prog)
        return
    view = cases.get_case(engine, case_id=case_id)
    if view is None:
        st.error(f"Case {ui.plain(case_id)} does not exist.")
        return
    label_case(engine, actor, tax, view)


if __name__ == "__main__":
    main()
