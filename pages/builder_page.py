"""Case builder: controlled edits of a base case's documents saved as family variants, and the
family view (?family=KEY) with consistency checks, suggestions to confirm and required claims.

Document text is untrusted: it is shown with st.code and dataframe cells only; diffs are
escaped before their changes are marked with [-removed-] and {+added+}.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from pages import ui
from review.builder import diffs, documents, replay, suggestions, variants
from review.builder import family_view as builder_family_view
from review.builder.edits import OPERATORS
from review.builder.operator import ParamField, ParamValue, find_span, span_at
from review.cases import cases
from review.core.errors import InputError, PermissionDenied, StaleWriteError, WorkbenchError
from review.core.identity import Permission

engine = ui.engine()
actor = ui.actor()
tax = ui.tax()
can_edit = actor.can(Permission.edit_cases)
can_corpus = actor.can(Permission.edit_corpus)
ERRORS = (InputError, PermissionDenied, StaleWriteError)
CHANGE_COLOURS = {"changed": "#fff3cd", "removed": "#f8d7da", "added": "#d1e7dd", "same": ""}
MAX_CANDIDATES = 300


def go(**params: str) -> None:
    """Switch view by query parameters, keeping the others (such as ``as``)."""
    for k in ("case", "family"):
        if k in st.query_params and k not in params:
            del st.query_params[k]
    for k, v in params.items():
        st.query_params[k] = v
    st.rerun()


def flash() -> None:
    msg = st.session_state.pop("bld_flash", None)
    if msg:
        st.success(msg)


def with_reasons(decision: str | None, reasons: tuple[str, ...]) -> str:
    return f"{decision} ({', '.join(reasons)})" if reasons else str(decision)


def decision_label(key: str | None) -> str:
    if key is None:
        return "—"
    term = tax.decisions.get(key)
    return term.label if term else key


# ------------------------------------------------------------------------------------------
# Parameter form built from the operator's param_fields


def param_widgets(fields: list[ParamField], defaults: dict[str, ParamValue], key: str) -> Any:
    """Widgets inside a form; returns a callable that reads them into a params dict."""
    readers: dict[str, Any] = {}
    for f in fields:
        wkey = f"{key}_{f.name}"
        default = defaults.get(f.name, f.default)
        label = f.name.replace("_", " ") + ("" if f.required else " (optional)")
        if f.type == "bool":
            readers[f.name] = (f, st.checkbox(label, value=bool(default), help=f.help, key=wkey))
        elif f.choices and f.name != "instruction":
            options = list(f.choices) if f.required else ["", *f.choices]
            value = str(default) if default is not None else ""
            index = options.index(value) if value in options else 0
            readers[f.name] = (
                f,
                st.selectbox(label, options, index=index, help=f.help, key=wkey),
            )
        elif f.name == "instruction":
            readers[f.name] = (
                f,
                st.text_area(label, str(default or ""), help=f.help, key=wkey, height=80),
            )
        else:
            readers[f.name] = (
                f,
                st.text_input(
                    label, "" if default is None else str(default), help=f.help, key=wkey
                ),
            )
    return readers


def read_params(readers: dict[str, Any]) -> dict[str, ParamValue]:
    """Typed params from the widget values; InputError names the field."""
    out: dict[str, ParamValue] = {}
    for name, (f, raw) in readers.items():
        if f.type == "bool":
            out[name] = bool(raw)
            continue
        text = str(raw).strip()
        if not text:
            if f.required:
                raise InputError(f"parameter {name}: required")
            continue
        if f.type.startswith("int"):
            try:
                out[name] = int(text)
            except ValueError:
                raise InputError(f"parameter {name}: {text!r} is not a whole number") from None
        else:
            out[name] = text
    return out


# ------------------------------------------------------------------------------------------
# Preview


def show_preview(pv: diffs.Preview, doc_ref: str) -> None:
    sug = pv.suggestion
    st.caption(
        "Changes are marked `[-removed-]` and `{+added+}`; the text is escaped first, so "
        "marks already in a document show as `[\\-` or `{\\+`."
    )
    left, right = st.columns(2)
    with left:
        st.caption(f"Before: {doc_ref}")
        st.code(pv.before_excerpt or "(empty)", language=None, wrap_lines=True)
    with right:
        st.caption("After (the derived document)")
        st.code(pv.after_excerpt or "(empty)", language=None, wrap_lines=True)
    frame = pd.DataFrame(
        [
            {
                "line before": "" if r.line_before is None else str(r.line_before),
                "line after": "" if r.line_after is None else str(r.line_after),
                "change": r.change,
                "before": r.before,
                "after": r.after,
            }
            for r in pv.rows
        ]
    )
    if not frame.empty:
        styled = frame.style.apply(
            lambda row: [f"background-color: {CHANGE_COLOURS.get(row['change'], '')}"] * len(row),
            axis=1,
        )
        st.dataframe(
            styled,
            hide_index=True,
            width="stretch",
            height=ui.table_height(len(frame), 12),
            key="bld_diff_table",
        )
    if pv.metadata:
        st.caption("Metadata of the derived document")
        st.dataframe(
            pd.DataFrame(
                [{"field": k, "new value": v} for k, v in pv.metadata.items()],
            ),
            hide_index=True,
        )
    for title, scope, body in pv.extra_documents:
        st.caption(f"New document in scope {scope!r}, forbidden to the case's identity")
        st.text(title)
        st.code(body, language=None, wrap_lines=True)
    st.caption("Suggested label (an expert confirms it in the family view; it is not a label)")
    st.dataframe(
        pd.DataFrame(
            [
                ("decision", decision_label(sug.decision) if sug.decision else "keep the base's"),
                ("reasons", ", ".join(sug.reason_codes) or "—"),
                ("slices", ", ".join(sug.slices) or "—"),
                ("evidence state", sug.evidence_state or "—"),
                ("why", sug.note),
            ],
            columns=["", "suggestion"],
        ),
        hide_index=True,
        width="stretch",
    )


# ------------------------------------------------------------------------------------------
# Builder view (?case=ID)


def candidate_label(body: str, span: Any) -> str:
    line = body.count("\n", 0, span.start) + 1
    if span.start == span.end:
        nxt = body[span.start : span.start + 50].split("\n", 1)[0]
        return f"line {line}: before “{nxt}”" if nxt else f"line {line}: end of the document"
    text = " ".join(span.text.split())
    text = text if len(text) <= 90 else text[:87] + "…"
    return f"line {line}: {text}"


def edit_tab(view: cases.CaseView, docs: list[documents.CaseDocText]) -> None:
    readable = [d for d in docs if d.readable]
    if not readable:
        st.info("You may not read any document of this case (restricted; needs clearance).")
        return
    default = next(
        (i for i, d in enumerate(readable) if d.role == "decisive" and d.visibility == "visible"),
        0,
    )
    c1, c2 = st.columns([1, 1])
    doc = c1.selectbox(
        "Document to edit",
        readable,
        index=default,
        format_func=lambda d: f"{d.ref} · {d.visibility}, {d.role}",
        key=f"bld_doc_{view.id}",
    )
    names = list(OPERATORS)
    op_name = c2.selectbox("Operator", names, key=f"bld_op_{view.id}")
    op = OPERATORS[op_name]
    st.caption(op.description)
    body = doc.body or ""
    spans = op.candidates(body)[:MAX_CANDIDATES]
    custom = "custom"
    choice = st.selectbox(
        f"Candidate spans ({len(spans)} found by {op_name})",
        [*range(len(spans)), custom],
        format_func=lambda i: "Custom offsets…" if i == custom else candidate_label(body, spans[i]),
        key=f"bld_span_{view.id}_{doc.ref}_{op_name}",
    )
    if choice == custom:
        c3, c4 = st.columns(2)
        start = int(c3.number_input("Start offset", 0, len(body), 0, key="bld_custom_start"))
        end = int(c4.number_input("End offset", 0, len(body), 0, key="bld_custom_end"))
        if end < start:
            st.error("The end offset must not be before the start offset.")
            return
        sel_text = body[start:end]
    else:
        sp = spans[int(choice)]
        start, end, sel_text = sp.start, sp.end, sp.text
    st.caption("Selected span (verbatim)")
    st.code(sel_text if sel_text else "(a position between blocks)", language=None, wrap_lines=True)
    try:
        defaults = op.example_params(body, span_at(body, start, end)).to_dict()
    except InputError:
        defaults = {}
    form_key = f"bld_params_{view.id}_{doc.ref}_{op_name}_{start}_{end}"
    with st.form(form_key):
        readers = param_widgets(op.param_fields(), defaults, form_key)
        go_preview = st.form_submit_button("Preview the edit", type="primary")
    if go_preview:
        try:
            params = read_params(readers)
            pv = diffs.preview(body, op_name, start, end, params, doc_ref=doc.ref)
        except WorkbenchError as exc:
            st.session_state.pop("bld_preview", None)
            st.error("Nothing changed. " + ui.plain(exc))
        else:
            st.session_state["bld_preview"] = {
                "case": view.id,
                "doc": doc.ref,
                "op": op_name,
                "start": start,
                "end": end,
                "params": params,
            }
    state = st.session_state.get("bld_preview")
    if not state or state["case"] != view.id or state["doc"] != doc.ref:
        return
    if (state["op"], state["start"], state["end"]) != (op_name, start, end):
        return
    pv = diffs.preview(body, op_name, start, end, state["params"], doc_ref=doc.ref)
    show_preview(pv, doc.ref)
    if not can_edit:
        st.info("Saving variants needs a role that may edit cases (annotator, reviewer, admin).")
        return
    as_version = st.checkbox(
        f"Save the derived document as the next version of {doc.doc_key} instead of a new "
        f"document {doc.doc_key}-CF-n",
        key="bld_as_version",
        help="Only from the newest version. The new version becomes current in the corpus.",
    )
    c5, c6 = st.columns(2)
    if c5.button(
        f"Save as a variant of {view.family or 'the family'}", type="primary", key="bld_save"
    ):
        spec = variants.VariantSpec(
            "edited",
            doc_ref=doc.ref,
            operator=op_name,
            start=start,
            end=end,
            params=state["params"],
            as_new_version=as_version,
        )
        try:
            saved = variants.build_variant(engine, actor, tax, view.id, spec)
        except ERRORS as exc:
            st.error("Nothing was saved. " + ui.plain(exc))
        else:
            st.session_state.pop("bld_preview", None)
            st.session_state["bld_flash"] = (
                f"Saved {saved.key} (draft, suggested {saved.suggested_decision}) with "
                f"{', '.join(saved.documents) or 'no new document'}. Confirm its label here."
            )
            go(family=view.family or "")
    if can_corpus and c6.button("Save the edited document only", key="bld_save_doc"):
        try:
            doc_saved = documents.save_edit(
                engine,
                actor,
                tax,
                doc.ref,
                op_name,
                start,
                end,
                state["params"],
                as_new_version=as_version,
            )
        except ERRORS as exc:
            st.error("Nothing was saved. " + ui.plain(exc))
        else:
            st.session_state.pop("bld_preview", None)
            extra = f" and {', '.join(doc_saved.extra_refs)}" if doc_saved.extra_refs else ""
            st.session_state["bld_flash"] = (
                f"Saved {doc_saved.ref}{extra} with provenance record {doc_saved.edit_id}."
            )
            st.rerun()


def passage_offsets(body: str, passage: str) -> tuple[int | None, int | None]:
    if not passage.strip():
        return None, None
    span = find_span(body, passage.strip())
    return span.start, span.end


def family_tab(view: cases.CaseView, docs: list[documents.CaseDocText]) -> None:
    if not can_edit:
        st.info("Building variants needs a role that may edit cases.")
        return
    decisive = next((d for d in docs if d.role == "decisive" and d.visibility == "visible"), None)
    kind = st.radio(
        "Evidence state",
        ["removed", "conflicted", "forbidden", "partial"],
        horizontal=True,
        format_func=lambda k: tax.evidence_states[k].label,
        key=f"bld_kind_{view.id}",
    )
    st.caption(tax.evidence_states[kind].definition)
    if kind != "partial" and (decisive is None or not decisive.readable):
        st.info("This case has no visible decisive document you may read.")
        return
    body = decisive.body if decisive is not None and decisive.body is not None else ""
    conflict_op = "change_number"
    if kind == "conflicted":
        usable = [n for n in OPERATORS if n not in ("relocate_answer", "insert_instruction")]
        conflict_op = st.selectbox(
            "Operator for the conflicting copy",
            usable,
            index=usable.index("change_number"),
            key=f"bld_conflict_op_{view.id}",
        )
    with st.form(f"bld_family_form_{view.id}_{kind}_{conflict_op}"):
        passage = ""
        readers: dict[str, Any] = {}
        mode = "older_version"
        policy = "partial"
        extra_claim = extra_question = question = ""
        if kind in ("removed", "conflicted", "forbidden"):
            passage = st.text_area(
                "Decisive passage (copy it exactly from "
                f"{decisive.ref if decisive else 'the decisive document'}"
                + (")" if kind == "conflicted" else "; leave empty to use the whole document)"),
                height=80,
            )
        if kind == "conflicted":
            mode = st.selectbox(
                "How the conflict reads",
                ["older_version", "lower_authority", "unresolved"],
                format_func=lambda m: {
                    "older_version": "an older, superseded version (the current one controls)",
                    "lower_authority": "a lower-authority source (the original controls)",
                    "unresolved": "same date and authority (neither controls)",
                }[m],
            )
            readers = param_widgets(
                OPERATORS[conflict_op].param_fields(), {}, f"bld_conf_{conflict_op}"
            )
        if kind == "partial":
            st.caption("Current required claims")
            for i, c in enumerate(view.required_claims, 1):
                st.text(f"{i}. {c}")
            extra_claim = st.text_input("New required claim that no document supports")
            extra_question = st.text_input(
                "Second part of the question (joined to the current question with 'and')"
            )
            question = st.text_input("…or the whole new question (replaces the question)")
            policy = st.selectbox(
                "Product policy for partial support",
                ["partial", "abstain", "clarify"],
                format_func=decision_label,
            )
        submitted = st.form_submit_button("Build and save the variant", type="primary")
    if not submitted:
        return
    try:
        start, end = passage_offsets(body, passage) if passage else (None, None)
        params = read_params(readers) if kind == "conflicted" else None
        spec = variants.VariantSpec(
            kind,
            doc_ref=decisive.ref if decisive is not None and kind != "partial" else None,
            operator=conflict_op if kind == "conflicted" else None,
            start=start,
            end=end,
            params=params,
            mode=mode,
            extra_claim=extra_claim,
            extra_question=extra_question,
            question=question,
            policy=policy,
        )
        saved = variants.build_variant(engine, actor, tax, view.id, spec)
    except ERRORS as exc:
        st.error("Nothing was saved. " + ui.plain(exc))
        return
    st.session_state["bld_flash"] = (
        f"Saved {saved.key} ({saved.evidence_state}, suggested {saved.suggested_decision}). "
        "Confirm its label in the family view."
    )
    go(family=view.family or "")


def passage_tab(view: cases.CaseView) -> None:
    if view.evidence_state != "present":
        st.info("The decisive passage is marked on the evidence-present case of a family.")
        return
    st.caption(
        "The family checks compare every variant with this passage: the removed variant must "
        "no longer show it, the forbidden variant must not leak it."
    )
    if not can_edit:
        return
    with st.form(f"bld_mark_{view.id}"):
        passage = st.text_area("Decisive passage (exact text of a visible document)", height=80)
        ok = st.form_submit_button("Mark as decisive")
    if ok:
        try:
            ref = suggestions.mark_passage(engine, actor, view.id, passage)
        except ERRORS as exc:
            st.error("Nothing was saved. " + ui.plain(exc))
        else:
            st.success(f"Marked the decisive passage in {ref}.")


def builder_view(case_id: int) -> None:
    view = cases.get_case(engine, case_id=case_id)
    if view is None:
        st.error(f"Case {case_id} does not exist.")
        return
    c1, c2 = st.columns([3, 1])
    c1.subheader(f"Base case {view.key}")
    if view.family and c2.button("Open the family view", key="bld_to_family"):
        go(family=view.family)
    ui.text(view.question, label="Question")
    st.caption(
        f"Expected {decision_label(view.expected_decision)} · evidence state "
        f"{view.evidence_state or '—'} · family {view.family or '—'} · identity "
        f"{ui.plain(view.identity_name)} ({', '.join(view.identity_scopes)})"
    )
    if view.evidence_state not in (None, "present") or view.expected_decision != "answer":
        st.warning(
            "Variants are derived from the evidence-present case of a family (expected "
            "decision: answer). Open the family view to find it."
        )
        return
    if not view.family:
        st.warning("This case has no family key: edit the case on the Cases page to set one.")
        return
    docs = documents.case_documents(engine, actor, view.id)
    t1, t2, t3 = st.tabs(["Edit a document", "Evidence-state variant", "Decisive passage"])
    with t1:
        edit_tab(view, docs)
    with t2:
        family_tab(view, docs)
    with t3:
        passage_tab(view)


# ------------------------------------------------------------------------------------------
# Family view (?family=KEY)


def family_view(key: str) -> None:
    checked_passage = st.session_state.get(f"bld_check_passage_{key}")
    fam = builder_family_view.family_view(engine, actor, key, passage=checked_passage)
    if fam is None:
        st.error(f"Family {key} does not exist.")
        return
    st.subheader(f"Family {fam.key}")
    ui.text(fam.title, label="Question of the family")
    rows = []
    for v in fam.variants:
        pending = v.has_suggestion and v.confirmed_by is None
        rows.append(
            {
                "open": ui.link("cases", case=v.case_id),
                "case": v.key,
                "evidence state": v.evidence_state or "—",
                "status": v.status,
                "expected": "awaiting confirmation"
                if pending
                else with_reasons(v.expected_decision, v.reason_codes),
                "suggested": "—"
                if not v.has_suggestion
                else with_reasons(v.suggested_decision, v.suggested_reasons),
                "confirmed": "—"
                if not v.has_suggestion
                else (f"by {v.confirmed_by}" if v.confirmed_by else "no"),
                "documents": "; ".join(
                    f"{d.ref} ({d.visibility}, {d.role}, {d.access_scope})" for d in v.documents
                )
                or "(none: empty retrieval)",
                "identity may see": ", ".join(v.identity_scopes),
            }
        )
    st.dataframe(
        pd.DataFrame(rows),
        hide_index=True,
        width="stretch",
        height=ui.table_height(len(rows)),
        column_config={
            "open": st.column_config.LinkColumn("open", display_text="open"),
            "documents": st.column_config.TextColumn("documents", width="large"),
        },
        key="bld_family_table",
    )
    st.markdown("**Consistency checks**")
    if fam.failed:
        st.error(f"{len(fam.failed)} of {len(fam.checks)} checks fail.")
    if fam.unverified:
        st.warning(
            f"{len(fam.unverified)} check(s) cannot be verified: no decisive passage is "
            "recorded. Mark it on the evidence-present case (Decisive passage tab) or check "
            "against a passage below."
        )
    if not fam.failed and not fam.unverified:
        st.success(f"All {len(fam.checks)} checks pass.")
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "result": "pass" if c.passed else "FAIL",
                    "check": c.name,
                    "variant": c.variant or "(family)",
                    "detail": c.detail,
                }
                for c in sorted(fam.checks, key=lambda c: c.passed)
            ]
        ),
        hide_index=True,
        width="stretch",
        height=ui.table_height(len(fam.checks), 12),
        key="bld_checks_table",
    )
    st.caption(f"Decisive passage used by the checks: {fam.passage_source}")
    if fam.passage is not None:
        st.code(fam.passage, language=None, wrap_lines=True)
    elif fam.hidden:
        st.caption("(restricted text hidden: it is shown only to users with clearance)")
    with st.form(f"bld_check_form_{key}"):
        other = st.text_area("Check against another passage (not saved)", height=68)
        c1, c2 = st.columns(2)
        run = c1.form_submit_button("Run the checks with this passage")
        reset = c2.form_submit_button("Use the recorded passage")
    if run:
        if other.strip():
            st.session_state[f"bld_check_passage_{key}"] = other.strip()
        else:
            st.error("Give a passage to check against.")
        st.rerun()
    if reset:
        st.session_state.pop(f"bld_check_passage_{key}", None)
        st.rerun()

    pending = [v for v in fam.variants if v.has_suggestion and v.confirmed_by is None]
    st.markdown("**Confirm a suggested label**")
    if not pending:
        st.caption("Every suggestion in this family is confirmed.")
    elif not can_edit:
        st.info("Confirming labels needs a role that may edit cases.")
    else:
        target = st.selectbox(
            "Variant",
            pending,
            format_func=lambda v: f"{v.key} · {v.evidence_state or '—'}",
            key=f"bld_confirm_pick_{key}",
        )
        ui.text(target.question, label="Question of the variant")
        decisions = list(tax.decisions)
        with st.form(f"bld_confirm_{target.case_id}"):
            st.caption(
                f"Suggested by {target.suggestion_source}: "
                f"{decision_label(target.suggested_decision)} "
                f"[{', '.join(target.suggested_reasons) or 'no reason'}]"
            )
            decision = st.selectbox(
                "Expected decision",
                decisions,
                index=decisions.index(target.suggested_decision or "abstain"),
                format_func=decision_label,
            )
            reasons = st.multiselect(
                "Reason codes (why the evidence is insufficient)",
                list(tax.reason_codes),
                default=[r for r in target.suggested_reasons if r in tax.reason_codes],
                format_func=lambda k: tax.reason_codes[k].label,
            )
            note = st.text_input("Note (why you changed the suggestion, if you did)")
            make_ready = st.checkbox("Mark the case ready (labeling queue and metrics)", True)
            ok = st.form_submit_button("Confirm", type="primary")
        if ok:
            try:
                res = suggestions.confirm_suggestion(
                    engine,
                    actor,
                    target.case_id,
                    decision,
                    reasons,
                    tax=tax,
                    expected_version=target.version,
                    note=note,
                    make_ready=make_ready,
                )
            except ERRORS as exc:
                st.error("Nothing was saved. " + ui.plain(exc))
            else:
                st.session_state["bld_flash"] = (
                    f"{target.key}: {'changed' if res.changed else 'confirmed'} as "
                    f"{decision_label(decision)}; status {res.status}."
                )
                st.rerun()

    st.markdown("**Variants in detail**")
    for v in fam.variants:
        with st.expander(f"{v.key} · {v.evidence_state or '—'} · {v.status}"):
            ui.text(v.question, label="Question")
            st.caption("Required claims (for a partial variant: which claims lose support)")
            st.dataframe(
                pd.DataFrame([{"claim": c.text, "support": c.status} for c in v.claims])
                if v.claims
                else pd.DataFrame(columns=["claim", "support"]),
                hide_index=True,
                width="stretch",
            )
            if can_edit:
                with st.form(f"bld_claims_{v.case_id}"):
                    text = st.text_area(
                        "Required claims, one per line (compound questions have several)",
                        "\n".join(c.text for c in v.claims),
                        height=100,
                    )
                    save = st.form_submit_button("Save the claims")
                if save:
                    try:
                        suggestions.set_required_claims(
                            engine, actor, tax, v.case_id, v.version, text.splitlines()
                        )
                    except ERRORS as exc:
                        st.error("Nothing was saved. " + ui.plain(exc))
                    else:
                        st.session_state["bld_flash"] = f"Saved the required claims of {v.key}."
                        st.rerun()
            if v.edits:
                st.caption("Recorded edits (provenance)")
            for e in v.edits:
                st.text(
                    f"#{e.id} {e.operator} on {e.source} at {e.start}-{e.end} → "
                    f"{e.result or '—'} by {e.author}, {e.created_at:%Y-%m-%d %H:%M} UTC; "
                    f"params {e.params}"
                )
                if e.before is None:
                    st.caption("(before and after hidden: the source is restricted)")
                else:
                    c1, c2 = st.columns(2)
                    c1.code(e.before or "(empty)", language=None, wrap_lines=True)
                    c2.code(e.after or "(empty)", language=None, wrap_lines=True)
                if st.button("Replay this edit", key=f"bld_replay_{e.id}"):
                    check = replay.replay_check(engine, e.id)
                    (st.success if check.ok else st.error)(check.detail)


# ------------------------------------------------------------------------------------------
# Landing: pick a base case or a family


def landing() -> None:
    st.caption(
        "Pick an evidence-present case to derive hard variants from, or open a family to see "
        "its variants, checks and suggestions."
    )
    text = st.text_input("Search base cases (question or key)", key="bld_q")
    total = documents.count_base_cases(engine, text)
    page = ui.paginate(total, "bld_base", page_size=25)
    base = documents.list_base_cases(engine, text, page=page, page_size=25)
    if not base:
        st.info(
            "No evidence-present cases yet. Create a case with a family key, evidence state "
            "'present' and expected decision 'answer' on the Cases page."
        )
    else:
        picked = st.dataframe(
            pd.DataFrame(
                [{"case": b.key, "family": b.family or "—", "question": b.question} for b in base]
            ),
            hide_index=True,
            width="stretch",
            height=ui.table_height(len(base)),
            on_select="rerun",
            selection_mode="single-row",
            key="bld_base_table",
        )
        rows = picked.selection.rows if picked is not None else []
        if rows:
            go(case=str(base[rows[0]].id))
        st.caption("Select a row to start building from that case.")
    st.markdown("**Families**")
    nfam = builder_family_view.count_families(engine)
    fpage = ui.paginate(nfam, "bld_fam", page_size=25)
    fams = builder_family_view.list_families(engine, page=fpage, page_size=25)
    if fams:
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "open": ui.link("builder", family=f.key),
                        "family": f.key,
                        "variants": f.variants,
                        "awaiting confirmation": f.unconfirmed,
                        "evidence states": f.states,
                        "question": f.title,
                    }
                    for f in fams
                ]
            ),
            hide_index=True,
            width="stretch",
            height=ui.table_height(len(fams)),
            column_config={"open": st.column_config.LinkColumn("open", display_text="open")},
            key="bld_families_table",
        )
    else:
        st.caption("No families yet.")


st.title("Case builder")
flash()
family_param = st.query_params.get("family")
case_param = ui.query_int("case")
if (family_param or case_param is not None) and st.button(
    "← All base cases and families", key="bld_back"
):
    go()
if family_param:
    family_view(family_param)
elif case_param is not None:
    builder_view(case_param)
else:
    landing()
