"""Cases: filter and page through cases, open one (?case=ID), create, edit, import, export."""

from __future__ import annotations

import io

import pandas as pd
import streamlit as st

from pages import ui
from review.cases import cases, splits
from review.core import uploads
from review.core.errors import WorkbenchError
from review.core.identity import Permission
from review.core.terms import CaseStatus

engine = ui.engine()
actor = ui.actor()
tax = ui.tax()
can_edit = actor.can(Permission.edit_cases)


def case_form(key: str, start: dict[str, object], submit_label: str) -> cases.CaseIn | None:
    """The create/edit form; returns a validated CaseIn when submitted and valid."""
    decisions = list(tax.decisions)
    with st.form(key):
        question = st.text_area("Question", str(start.get("question", "")), height=80)
        claims = st.text_area(
            "Required claims (one per line: each atomic claim the answer must establish)",
            "\n".join(start.get("required_claims", []) or []),  # type: ignore[arg-type]
            height=100,
        )
        ident = start.get("identity") or {"name": "customer", "scopes": ["public"]}
        c1, c2 = st.columns(2)
        ident_name = c1.text_input("Test identity", ident["name"])  # type: ignore[index]
        ident_scopes = c2.multiselect(
            "Identity may see", list(tax.access_scopes), default=ident["scopes"]
        )  # type: ignore[index]
        st.caption("Documents available to retrieval (reference as ID@VERSION).")
        docs = pd.DataFrame(
            start.get("documents") or [], columns=["doc_id", "version", "visibility", "role"]
        )
        docs_df = st.data_editor(
            docs,
            num_rows="dynamic",
            hide_index=True,
            width="stretch",
            key=f"{key}_docs",
            column_config={
                "doc_id": st.column_config.TextColumn("document id", required=True),
                "version": st.column_config.NumberColumn(
                    "version", min_value=1, step=1, required=True
                ),
                "visibility": st.column_config.SelectboxColumn(
                    "visibility", options=["visible", "forbidden"], required=True
                ),
                "role": st.column_config.SelectboxColumn(
                    "role", options=list(tax.document_roles), required=True
                ),
            },
        )
        c1, c2, c3 = st.columns(3)
        decision = c1.selectbox(
            "Expected decision",
            decisions,
            index=decisions.index(str(start.get("expected_decision", "answer"))),
            format_func=lambda k: tax.decisions[k].label,
            help="\n".join(f"- **{t.label}**: {t.definition}" for t in tax.decisions.values()),
        )
        cats = list(tax.categories)
        category = c2.selectbox(
            "Category",
            cats,
            index=cats.index(str(start.get("category", "in_scope")))
            if start.get("category") in cats
            else 0,
            format_func=lambda k: tax.categories[k].label,
            help="\n".join(f"- **{t.label}**: {t.definition}" for t in tax.categories.values()),
        )
        splits = list(tax.splits)
        split = c3.selectbox(
            "Split",
            splits,
            index=splits.index(str(start.get("split", "train")))
            if start.get("split") in splits
            else 0,
        )
        reasons = st.multiselect(
            "Reason codes (why the evidence is insufficient)",
            list(tax.reason_codes),
            default=list(start.get("reason_codes", []) or []),  # type: ignore[call-overload]
            format_func=lambda k: tax.reason_codes[k].label,
            help="\n".join(f"- **{t.label}**: {t.definition}" for t in tax.reason_codes.values()),
        )
        slices = st.multiselect(
            "Slices",
            list(tax.slices),
            default=list(start.get("slices", []) or []),  # type: ignore[call-overload]
            format_func=lambda k: tax.slices[k].label,
            help="\n".join(f"- **{t.label}**: {t.definition}" for t in tax.slices.values()),
        )
        c1, c2, c3 = st.columns(3)
        family = c1.text_input("Family key (optional)", str(start.get("family") or ""))
        states = ["", *tax.evidence_states]
        evidence_state = c2.selectbox(
            "Evidence state",
            states,
            index=states.index(str(start.get("evidence_state") or "")),
            format_func=lambda k: tax.evidence_states[k].label if k else "(none)",
        )
        statuses = list(tax.case_statuses)
        status = c3.selectbox(
            "Status", statuses, index=statuses.index(str(start.get("status", CaseStatus.draft)))
        )
        notes = st.text_area("Notes for labelers", str(start.get("notes", "")), height=68)
        submitted = st.form_submit_button(submit_label, type="primary")
    if not submitted:
        return None
    doc_rows = []
    for i, row in docs_df.reset_index(drop=True).iterrows():
        if pd.isna(row["doc_id"]) or not str(row["doc_id"]).strip():
            continue
        ref = str(row["doc_id"]).strip()
        version = row["version"]
        if "@" in ref and pd.isna(version):
            ref, _, v = ref.partition("@")
            version = v
        if pd.isna(version):
            st.error(f"Document row {int(str(i)) + 1}: give the version of {ref}.")
            return None
        doc_rows.append(
            {
                "doc_id": ref.partition("@")[0],
                "version": int(version),
                "visibility": row["visibility"] or "visible",
                "role": row["role"] or "context",
            }
        )
    data = {
        "key": start.get("key"),
        "question": question,
        "required_claims": [c for c in (x.strip() for x in claims.splitlines()) if c],
        "identity": {"name": ident_name, "scopes": ident_scopes},
        "documents": doc_rows,
        "expected_decision": decision,
        "reason_codes": reasons,
        "category": category,
        "slices": slices,
        "split": split,
        "family": family or None,
        "evidence_state": evidence_state or None,
        "status": status,
        "notes": notes,
    }
    try:
        return cases.validate_case(data, "form", 1, tax)
    except WorkbenchError as exc:
        st.error(ui.plain(str(exc).removeprefix("form: line 1: ")))
        return None


def show_case(case_id: int) -> None:
    view = cases.get_case(engine, case_id=case_id)
    if view is None:
        st.error(f"Case {case_id} does not exist.")
        return
    st.subheader(f"Case `{view.key}`")
    edit_key = f"cases_edit_{view.id}"
    if st.session_state.get(edit_key) is not None:
        opened_version = int(st.session_state[edit_key])
        st.info(
            f"Editing version {opened_version}. If someone saves meanwhile, your save is "
            "refused and nothing is overwritten."
        )
        result = case_form(f"case_edit_form_{view.id}", view.record, "Save changes")
        if st.button("Cancel editing"):
            st.session_state[edit_key] = None
            st.rerun()
        if result is not None:
            with ui.reported():
                new_version = cases.update_case(engine, actor, view.id, opened_version, result, tax)
                st.session_state[edit_key] = None
                st.session_state["cases_flash"] = f"Saved {view.key} (version {new_version})."
                st.rerun()
        return
    flash = st.session_state.pop("cases_flash", None)
    if flash:
        st.success(flash)
    ui.text(view.question, label="Question")
    left, right = st.columns([2, 1])
    with left:
        st.caption("Required claims")
        if view.required_claims:
            for i, claim in enumerate(view.required_claims, 1):
                st.text(f"{i}. {claim}")
        else:
            st.text("(none)")
        st.caption(
            f"Documents available to retrieval for identity “{ui.plain(view.identity_name)}” "
            f"(may see: {ui.plain(', '.join(view.identity_scopes)) or 'nothing'})"
        )
        if view.documents:
            st.dataframe(
                pd.DataFrame(
                    [
                        {
                            "open": ui.link("corpus", doc=d.document_id),
                            "document": d.ref,
                            "title": d.title
                            if (d.access_scope != "restricted" or actor.clearance)
                            else "(restricted title hidden)",
                            "visibility": d.visibility,
                            "role": d.role,
                            "access": d.access_scope,
                            "effective": d.effective_date,
                            "current version": d.is_current,
                        }
                        for d in view.documents
                    ]
                ),
                hide_index=True,
                width="stretch",
                column_config={"open": st.column_config.LinkColumn("open", display_text="open")},
            )
        else:
            st.text("(no documents: empty retrieval)")
    with right:
        dec = tax.decisions.get(view.expected_decision)
        st.metric("Expected decision", dec.label if dec else view.expected_decision)
        st.caption("Reason codes")
        st.text(
            "\n".join(f"{c}: {tax.definition('reason_codes', c)}" for c in view.reason_codes)
            or "(none)"
        )
        meta = pd.DataFrame(
            [
                ("category", view.category),
                ("slices", ", ".join(view.slices) or "—"),
                ("split", view.split),
                ("status", view.status),
                ("family", view.family or "—"),
                ("evidence state", view.evidence_state or "—"),
                ("version", str(view.version)),
                ("last change", f"{view.updated_at:%Y-%m-%d %H:%M} by {view.updated_by or '—'}"),
            ],
            columns=["field", "value"],
        )
        st.dataframe(meta, hide_index=True, width="stretch")
        if view.notes:
            ui.text(view.notes, label="Notes")
    if view.family:
        fam_rows = cases.list_cases(engine, cases.CaseFilter(family=view.family), page_size=50)
        st.caption(f"Family {view.family}: {len(fam_rows)} variant(s)")
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "open": ui.link("cases", case=r.id),
                        "case": r.key,
                        "evidence state": r.evidence_state,
                        "expected": r.expected_decision,
                        "question": r.question,
                    }
                    for r in fam_rows
                ]
            ),
            hide_index=True,
            width="stretch",
            column_config={"open": st.column_config.LinkColumn("open", display_text="open")},
        )
    if can_edit and st.button("Edit this case", type="primary"):
        st.session_state[edit_key] = view.version
        st.rerun()


def import_export_panel() -> None:
    with st.expander("Import and export (canonical JSONL)"):
        if can_edit:
            with st.form("cases_import", clear_on_submit=True):
                up = st.file_uploader(
                    "Cases JSONL", type=["jsonl"], max_upload_size=uploads.widget_limit_mb()
                )
                go = st.form_submit_button("Import cases")
            if go:
                if up is None:
                    st.error("Choose a file.")
                else:
                    with ui.reported("Nothing was imported. "):
                        text = uploads.read_text(up.name, up.getvalue())
                        items = list(cases.iter_cases_jsonl(text.splitlines(), up.name, tax))
                        report = cases.import_cases(engine, actor, items, up.name)
                        st.success(report.summary())
        if st.button("Prepare export of the filtered cases"):
            buf = io.StringIO()
            n = cases.export_cases(engine, buf, flt)
            st.session_state["cases_export"] = (n, buf.getvalue())
        if st.session_state.get("cases_export"):
            n, data = st.session_state["cases_export"]
            st.download_button(
                f"Download {n} case(s) as JSONL",
                data,
                file_name="cases.jsonl",
                mime="application/jsonl",
            )


st.title("Cases")
case_param = ui.query_int("case")
if case_param is not None:
    if st.button("← All cases"):
        del st.query_params["case"]
        st.rerun()
    show_case(case_param)
    st.stop()

for param, skey in (
    ("status", "cases_status"),
    ("slice", "cases_slice"),
    ("decision", "cases_decision"),
    ("family", "cases_family"),
):
    if param in st.query_params and skey not in st.session_state:
        st.session_state[skey] = st.query_params[param]

with st.container(border=True):
    c0, c1, c2, c3 = st.columns([3, 1, 1, 1])
    text = c0.text_input("Search question or key", key="cases_q")
    decision = c1.selectbox(
        "Expected decision",
        ["", *tax.decisions],
        key="cases_decision",
        format_func=ui.fmt_option(tax.decisions),
    )
    category = c2.selectbox(
        "Category",
        ["", *tax.categories],
        key="cases_category",
        format_func=ui.fmt_option(tax.categories),
    )
    slice_ = c3.selectbox(
        "Slice", ["", *tax.slices], key="cases_slice", format_func=ui.fmt_option(tax.slices)
    )
    c4, c5, c6, _ = st.columns([1, 1, 1, 3])
    split = c4.selectbox(
        "Split", ["", *tax.splits], key="cases_split", format_func=ui.fmt_option(tax.splits)
    )
    status = c5.selectbox(
        "Status",
        ["", *tax.case_statuses],
        key="cases_status",
        format_func=ui.fmt_option(tax.case_statuses),
    )
    fams = cases.family_keys(engine)
    family = c6.selectbox(
        "Family", ["", *fams], key="cases_family", format_func=lambda v: v or "(any)"
    )

flt = cases.CaseFilter(
    text=text,
    expected_decision=decision or None,
    category=category or None,
    slice=slice_ or None,
    split=split or None,
    status=status or None,
    family=family or None,
)

import_export_panel()

if can_edit:
    with st.expander("New case"):
        new = case_form("case_new_form", {"status": CaseStatus.draft}, "Create case")
        if new is not None:
            with ui.reported():
                new_id = cases.create_case(engine, actor, new, tax)
                st.query_params["case"] = str(new_id)
                st.session_state["cases_flash"] = "Case created."
                st.rerun()

if can_edit:
    with st.expander("Assign train / validation / test splits"):
        last = splits.last_assignment(engine)
        st.caption(
            "Stratified by expected decision and slice, reproducible from the seed. Cases whose "
            "split a threshold sign-off relied on never move."
            + (
                f" Last assignment: seed {last['seed']} by {last['by']} at {last['at'][:16]}, "
                f"{last['moved']} case(s) moved."
                if last
                else ""
            )
        )
        split_flash = st.session_state.pop("cases_split_flash", None)
        if split_flash:
            st.success(split_flash)
        c1, c2 = st.columns(2)
        seed = int(
            c1.number_input(
                "Seed",
                min_value=0,
                value=int(last["seed"]) if last else 7,
                step=1,
                key="cases_split_seed",
            )
        )
        keep = c2.toggle(
            "Keep every case where it is (only place new cases)", value=True, key="cases_split_keep"
        )
        # The preview reads every ready case and its slices: computed only when asked for
        # (issue 11), kept for these inputs until they change or the assignment is applied.
        if st.button("Preview the split", key="cases_split_preview_btn"):
            try:
                sp = splits.plan(engine, seed, keep_existing=keep)
            except WorkbenchError as exc:
                st.session_state.pop("cases_split_preview", None)
                st.info(ui.plain(exc))
            else:
                st.session_state["cases_split_preview"] = {
                    "seed": seed,
                    "keep": keep,
                    "counts": sp.counts,
                    "moves": sp.moves,
                    "locked": int(sp.cases["locked"].sum()),
                }
        preview = st.session_state.get("cases_split_preview")
        if preview is not None and (preview["seed"], preview["keep"]) != (seed, keep):
            st.session_state.pop("cases_split_preview", None)
            preview = None
        if preview is None:
            st.caption("Preview the split to see what an assignment with this seed would do.")
        else:
            moves = preview["moves"]
            st.dataframe(preview["counts"], width="stretch")
            st.caption(
                f"{len(moves)} case(s) would change split; "
                f"{preview['locked']} locked case(s) stay put."
            )
            if len(moves):
                st.dataframe(
                    moves,
                    hide_index=True,
                    width="stretch",
                    height=ui.table_height(len(moves), 10),
                )
            if st.button("Apply this assignment", disabled=moves.empty):
                with ui.reported():
                    n = splits.apply(engine, actor, seed, keep_existing=keep)
                    st.session_state.pop("cases_split_preview", None)
                    st.session_state["cases_split_flash"] = (
                        f"{n} case(s) moved; seed {seed} recorded."
                        + (
                            f" The cases changed after the preview, which showed {len(moves)} "
                            "move(s)."
                            if n != len(moves)
                            else ""
                        )
                    )
                    st.rerun()

total = cases.count_cases(engine, flt)
page = ui.paginate(total, "cases")
rows = cases.list_cases(engine, flt, page=page)
if not rows:
    st.info(
        "No cases match these filters."
        if total == 0 and cases.count_cases(engine, cases.CaseFilter())
        else "No cases yet: create one above or import a JSONL file."
    )
else:
    df = pd.DataFrame(
        [
            {
                "open": ui.link("cases", case=r.id),
                "case": r.key,
                "question": r.question,
                "expected": r.expected_decision,
                "category": r.category,
                "slices": ", ".join(r.slices),
                "split": r.split,
                "status": r.status,
                "family": r.family or "",
                "evidence": r.evidence_state or "",
                "docs": r.documents,
            }
            for r in rows
        ]
    )
    event = st.dataframe(
        df,
        hide_index=True,
        width="stretch",
        height=ui.table_height(len(df)),
        on_select="rerun",
        selection_mode="single-row",
        key="cases_table",
        column_config={
            "open": st.column_config.LinkColumn("open", display_text="open"),
            "question": st.column_config.TextColumn("question", width="large"),
        },
    )
    picked = event.selection.rows if event is not None else []
    if picked:
        st.query_params["case"] = str(rows[picked[0]].id)
        st.rerun()
    st.caption("Select a row to open the case.")
