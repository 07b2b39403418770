"""Corpus: search and filter documents, view one as text and tables, import, add a version."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from review.admin import users
from review.core import clearance, readable, uploads
from review.core.errors import WorkbenchError
from review.core.identity import Actor, Permission
from review.core.taxonomy import Taxonomy
from review.corpus import corpus
from review.corpus.docformat import DocumentIn

OPEN = {"open": st.column_config.LinkColumn("open", display_text="open")}


def show_document(engine: Engine, actor: Actor, tax: Taxonomy, doc_pk: int) -> None:
    try:
        doc = corpus.get_document(engine, actor, doc_pk)
    except WorkbenchError as exc:
        ui.show_error(exc)
        return
    st.subheader(f"Document {ui.plain(doc.ref)}")
    ui.text(doc.title, label="Title")
    if not doc.is_current:
        st.warning("This is not the current version of this document.")
    left, right = st.columns([3, 1])
    with right:
        st.caption("Metadata")
        st.dataframe(
            corpus.metadata_frame(doc, tax, users.display_names(engine)),
            hide_index=True,
            width="stretch",
        )
        st.caption("Versions")
        hist = corpus.version_history(engine, actor, doc.doc_key)
        st.dataframe(
            corpus.versions_frame(hist, lambda pk: ui.link("corpus", doc=pk)),
            hide_index=True,
            width="stretch",
            column_config=OPEN,
        )
    with left:
        tab_struct, tab_raw = st.tabs(["Structured", "Raw text"])
        with tab_struct:
            ui.document_body(doc.body)
        with tab_raw:
            st.code(doc.body, language=None, wrap_lines=True)
    if actor.can(Permission.edit_corpus):
        with st.expander("Add a new version (the current one is kept)"):
            new_version_form(engine, actor, tax, doc)


def _index(options: list[str], value: str) -> int:
    return options.index(value) if value in options else 0


def new_version_form(engine: Engine, actor: Actor, tax: Taxonomy, doc: corpus.DocumentView) -> None:
    latest = corpus.find_document(engine, actor, doc.doc_key)
    if latest is None:
        return
    if latest.id != doc.id:
        st.info(f"Editing starts from the current version {latest.version:d}.")
    with st.form(f"newver_{doc.doc_key}"):
        title = st.text_input("Title", latest.title)
        eff = st.date_input("Effective date", latest.effective_date)
        c1, c2, c3 = st.columns(3)
        scopes = list(tax.access_scopes)
        scope = c1.selectbox("Access scope", scopes, index=scopes.index(latest.access_scope))
        auths = list(tax.authorities)
        authority = c2.selectbox("Authority", auths, index=_index(auths, latest.authority))
        jurs = list(tax.jurisdictions)
        jurisdiction = c3.selectbox("Jurisdiction", jurs, index=_index(jurs, latest.jurisdiction))
        owner = st.text_input("Owner", latest.owner)
        body = st.text_area(
            "Body (Markdown-shaped text: headings, tables, footnotes)", latest.body, height=300
        )
        submitted = st.form_submit_button("Save as new version", type="primary")
    if not submitted:
        return
    try:
        new = DocumentIn(
            doc_id=latest.doc_key,
            version=latest.version + 1,
            title=title,
            effective_date=eff,
            authority=authority,
            owner=owner,
            access_scope=scope,
            jurisdiction=jurisdiction,
            body=body,
        )
        saved = corpus.add_version(engine, actor, latest.doc_key, latest.version, new)
    except WorkbenchError as exc:
        ui.show_error(exc)
    except ValueError as exc:
        ui.show_error(exc, "Invalid input: ")
    else:
        st.success(f"Saved {ui.plain(saved.ref)}. The previous version is kept in the history.")
        st.query_params["doc"] = str(saved.id)
        st.rerun()


def import_panel(engine: Engine, actor: Actor, tax: Taxonomy) -> None:
    """The import form; open from the start while the corpus is empty (the first step of a
    new workbench, which Overview links here)."""
    empty = corpus.count_documents(engine, actor, corpus.DocFilter(current_only=False)) == 0
    with st.expander("Import documents", expanded=empty):
        st.caption(
            "Markdown or text files with YAML front matter (doc_id, version, title, "
            "effective_date, superseded_by, authority, owner, access_scope, "
            "jurisdiction), or a JSONL file with the same fields plus body. All files "
            "land together, or nothing is written."
        )
        with st.form("doc_import", clear_on_submit=True):
            files = ui.file_upload(
                "Files",
                "documents",
                type=["md", "markdown", "txt", "jsonl"],
                accept_multiple_files=True,
            )
            go = st.form_submit_button("Import")
        if not go:
            return
        if not files:
            ui.error("Choose at least one file.")
            return
        total = sum(f.size for f in files)
        with (
            ui.reported("Nothing was imported. "),
            st.spinner(f"Importing {readable.count(len(files), 'file')} ({total:,} bytes)…"),
        ):
            docs = []
            for f in files:
                text = uploads.read_text(f.name, f.getvalue(), "documents")
                docs.extend(corpus.parse_upload(f.name, text, tax))
            report = corpus.import_documents(
                engine,
                actor,
                docs,
                len(files),
                source="upload: " + ", ".join(f.name for f in files),
            )
            st.success(ui.plain(report.summary()))


def filters(engine: Engine, tax: Taxonomy) -> corpus.DocFilter:
    facets = corpus.facet_values(engine)
    with st.container(border=True):
        c0, c1, c2, c3, c4 = st.columns([3, 1, 1, 1, 1])
        text = c0.text_input("Search title, id or text", key="corpus_q")
        authority = c1.selectbox(
            "Authority",
            ["", *facets["authority"]],
            key="corpus_auth",
            format_func=ui.fmt_option(tax.authorities),
        )
        scope = c2.selectbox(
            "Access",
            ["", *facets["access_scope"]],
            key="corpus_scope",
            format_func=ui.fmt_option(tax.access_scopes),
        )
        jur = c3.selectbox(
            "Jurisdiction",
            ["", *facets["jurisdiction"]],
            key="corpus_jur",
            format_func=ui.fmt_option(tax.jurisdictions),
        )
        all_versions = c4.toggle("All versions", key="corpus_allv")
    return corpus.DocFilter(
        text=text,
        authority=authority or None,
        access_scope=scope or None,
        jurisdiction=jur or None,
        current_only=not all_versions,
    )


def document_list(engine: Engine, actor: Actor, tax: Taxonomy, flt: corpus.DocFilter) -> None:
    total = corpus.count_documents(engine, actor, flt)
    page = ui.paginate(total, "corpus")
    rows = corpus.search_documents(engine, actor, flt, page=page)
    if not rows:
        filtered = any([flt.text, flt.authority, flt.access_scope, flt.jurisdiction])
        if total == 0 and not filtered:
            st.info(
                "The corpus is empty. Import Markdown/JSONL documents above, or run "
                "`workbench import-docs PATH`."
            )
        else:
            st.info("No document matches these filters.")
        return
    df = corpus.results_frame(rows, lambda pk: ui.link("corpus", doc=pk), tax)
    event = st.dataframe(
        df,
        hide_index=True,
        width="stretch",
        height=ui.table_height(len(df)),
        on_select="rerun",
        selection_mode="single-row",
        key="corpus_table",
        column_config=OPEN,
    )
    picked = event.selection.rows if event is not None else []
    if picked:
        st.query_params["doc"] = str(rows[picked[0]].id)
        st.rerun()
    st.caption("Select a row to open the document.")


def main() -> None:
    engine = ui.engine()
    actor = ui.actor()
    tax = ui.tax()
    st.title("Corpus")
    doc_param = ui.query_int("doc")
    if doc_param is not None:
        if st.button("← All documents"):
            del st.query_params["doc"]
            st.rerun()
        show_document(engine, actor, tax, doc_param)
        return
    if actor.can(Permission.edit_corpus):
        import_panel(engine, actor, tax)
    document_list(engine, actor, tax, filters(engine, tax))
    if not clearance.cleared(actor):
        st.caption("Restricted documents are hidden: they are shown only to users with clearance.")


if __name__ == "__main__":
    main()
