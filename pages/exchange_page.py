"""Labels in and out: ready cases sent to Label Studio or Argilla for labeling, and the labels
made there brought back into the label history (mapped to workbench users, all or nothing)."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator

import pandas as pd
import streamlit as st
from sqlalchemy import Engine

from pages import ui
from review.admin import navigation
from review.cases import cases
from review.core import clearance, readable, uploads
from review.core.errors import WorkbenchError
from review.core.identity import Actor, Permission
from review.core.taxonomy import Taxonomy
from review.labels import imports, tools
from review.labels.external import TOOLS, ExternalLabel, Skipped

EXPORT_KEY = "exch_export"
PREVIEW_KEY = "exch_preview"


def _tool(key: str) -> str:
    picked = st.segmented_control(
        "Tool",
        list(TOOLS),
        default=TOOLS[0],
        format_func=lambda t: ui.plain(tools.NAMES[t]),
        key=key,
    )
    return str(picked or TOOLS[0])


def export_section(engine: Engine, actor: Actor, tax: Taxonomy) -> None:
    st.subheader("Send cases out for labeling")
    st.caption(
        "Ready cases as a blind annotator sees them: the question, the claims an answer must "
        "establish and the documents, forbidden ones marked; never the expected decision, the "
        "documents' roles or the author's notes."
        + (
            ""
            if clearance.may_see(actor, True)
            else " Restricted text is withheld: you have no clearance."
        )
    )
    tool = _tool("exch_out_tool")
    c1, c2 = st.columns(2)
    families = cases.family_keys(engine, ui.PICKER_LIMIT)
    family = ui.many_choice(
        c1, "Family", families, "exch_family", known=lambda k: cases.family_exists(engine, k)
    )
    slice_ = c2.selectbox(
        "Slice", ["", *tax.slices], format_func=ui.fmt_option(tax.slices), key="exch_slice"
    )
    if st.button(ui.plain(f"Prepare the files for {tools.NAMES[tool]}"), key="exch_prepare"):
        with ui.reported("Nothing was exported. "):
            st.session_state[EXPORT_KEY] = (
                tool,
                tools.export_files(
                    engine, actor, tax, tool, family=family or None, slice_=slice_ or None
                ),
            )
    ready = st.session_state.get(EXPORT_KEY)
    if ready and ready[0] == tool:
        files: tools.ExportFiles = ready[1]
        said = f"{readable.count(files.cases, 'case')} ready to download."
        if files.redacted:
            said += f" {readable.count(files.redacted, 'case')} with restricted text withheld."
        st.caption(ui.plain(said))
        cols = st.columns(len(files.files))
        for col, f in zip(cols, files.files, strict=True):
            col.download_button(
                ui.plain(f.label),
                f.data,
                file_name=f.file_name,
                mime=f.mime,
                key=f"exch_dl_{f.file_name}",
            )
        if tool == "label-studio":
            st.caption(
                "In Label Studio: create a project, paste the configuration under Settings → "
                "Labeling Interface → Code, then import the tasks file."
            )
        else:
            st.caption(
                "With Argilla's client: unzip, then rg.Dataset.from_disk(folder, client=...) "
                "creates the dataset with its fields, questions and records."
            )


def _records(tool: str, data: bytes) -> Callable[[Skipped], Iterator[ExternalLabel]]:
    """The uploaded file, read afresh by the tool's reader at each call."""
    read = tools.reader(tool)

    def records(skipped: Skipped) -> Iterator[ExternalLabel]:
        yield from read(io.BytesIO(data), skipped)

    return records


def import_section(engine: Engine, actor: Actor, tax: Taxonomy) -> None:
    st.subheader("Bring labels back")
    st.caption(
        "Label Studio's JSON or JSON-MIN export, or Argilla's records export. Only submitted "
        "annotations become labels; cancelled, skipped and draft ones, predictions and "
        "suggestions are passed over. Importing the same file again adds nothing."
    )
    tool = _tool("exch_in_tool")
    up = ui.file_upload("Export file", "labels", type=["json", "jsonl"], key="exch_file")
    if up is None:
        return
    with ui.reported("Nothing was imported. "):
        data = up.getvalue()
        uploads.check_upload(up.name, len(data), "labels")
        sha = tools.sha256_of(io.BytesIO(data))
        cached = st.session_state.get(PREVIEW_KEY)
        if not cached or cached[0] != (tool, sha):
            skipped = Skipped()
            seen = imports.preview(_records(tool, data)(skipped), skipped)
            cached = ((tool, sha), seen)
            st.session_state[PREVIEW_KEY] = cached
        seen = cached[1]
        show_preview(seen)
        if not seen.annotations:
            return
        mapping = user_mapping(engine, seen, sha)
        go = st.button("Import labels", type="primary", key="exch_import")
        slot = ui.under("exch_import")
        if go:
            missing = [u for u in seen.users if not mapping.get(u)]
            if missing:
                more = " …" if len(missing) > 5 else ""
                ui.error(
                    f"Map every annotator first: {', '.join(missing[:5])}{more} "
                    f"({readable.count(len(missing), 'user')} not mapped). Nothing was imported.",
                    where=slot,
                )
                return
            report = ui.transact(
                lambda s: imports.import_labels(
                    s,
                    actor,
                    tool,
                    _records(tool, data),
                    mapping,
                    tax,
                    file_name=up.name,
                    sha256=sha,
                ),
                prefix="Nothing was imported. ",
                where=slot,
            )
            if report is not None:
                st.cache_data.clear()
                ui.said("exch_import", imports.summary(report, tools.NAMES[tool]))
                st.rerun()


def show_preview(seen: imports.LabelFilePreview) -> None:
    said = (
        f"{readable.count(seen.annotations, 'submitted annotation')} by "
        f"{readable.count(len(seen.users), 'annotator')} on {readable.count(seen.cases, 'case')}."
    )
    if seen.skipped:
        said += f" Passed over: {imports.passed_over(seen.skipped)}."
    st.caption(ui.plain(said))


#: up to this many annotators in a file, one picker each; more are mapped as lines of text
PICKERS = 30


def user_mapping(engine: Engine, seen: imports.LabelFilePreview, sha: str) -> dict[str, str]:
    """Who each of the file's annotators is here: required for every one; an annotator whose
    tool name is the e-mail of a workbench user who labels is suggested, still to confirm."""
    suggested = imports.suggested_users(engine, seen.users)
    st.markdown("**Who is who**")
    st.caption(
        "Label Studio names annotators by user id (its Organization page lists id and e-mail); "
        "Argilla by user id (client.users lists id and username). Map each to the workbench "
        "user whose labels they are."
    )
    options = imports.labelers(engine)
    if len(seen.users) > PICKERS:
        lines = "\n".join(f"{u} = {suggested.get(u, '')}" for u in seen.users)
        text = st.text_area(
            "One line per annotator: tool user = workbench e-mail", lines, key="exch_map_text"
        )
        try:
            return {k: v for k, v in imports.parse_user_map(text).items()}
        except WorkbenchError as exc:
            ui.show_error(exc)
            return {}
    out: dict[str, str] = {}
    for i, (tool_user, n) in enumerate(seen.users.items()):
        pick = st.selectbox(
            ui.plain(f"{tool_user} ({readable.count(n, 'annotation')})"),
            options,
            index=options.index(suggested[tool_user]) if tool_user in suggested else None,
            placeholder="Choose a workbench user",
            key=f"exch_map_{sha[:12]}_{i}",
        )
        if pick:
            out[tool_user] = pick
    return out


def history_section(engine: Engine) -> None:
    rows = imports.imports_list(engine)
    if rows:
        st.subheader("Imports")
        ui.table(pd.DataFrame(rows))


def main() -> None:
    engine = ui.engine()
    actor = ui.actor()
    tax = ui.tax()
    st.title("Labels in and out")
    if not actor.can(Permission.exchange_labels):
        ui.not_for_you(
            "Sending cases to Label Studio or Argilla and importing their labels",
            navigation.holders(Permission.exchange_labels),
            actor,
        )
        return
    export_section(engine, actor, tax)
    import_section(engine, actor, tax)
    history_section(engine)


if __name__ == "__main__":
    main()
