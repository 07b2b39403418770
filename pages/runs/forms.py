"""The forms of the Runs page (pages/runs_page.py, the one registered page): importing a
run's outputs, running a bundled pipeline on the chosen cases, and the LLM-judge labels of a
run with the judge's agreement with the experts. What is not layout lives in
review/evaluation (evalruns, execution, judges), where it is unit-tested."""

from __future__ import annotations

import pandas as pd
import streamlit as st
from sqlalchemy import Engine

from pages import job_controls, ui
from pages.runs import cached
from review.cases.cases import family_exists
from review.core import readable, uploads
from review.core.errors import InputError
from review.core.identity import Actor, Permission
from review.core.taxonomy import Taxonomy
from review.evaluation import evalruns, execution, judges, refpipeline
from review.jobs import evaluation_run

BUNDLED = refpipeline.BUNDLED


def import_run_form(engine: Engine, actor: Actor, tax: Taxonomy) -> None:
    with st.form("runs_import", clear_on_submit=True):
        up = ui.file_upload(
            "Outputs JSONL (case, decision, score, text, cited_ids, repeat, versions, error)",
            "run",
            type=["jsonl"],
        )
        c1, c2 = st.columns(2)
        name = c1.text_input("Run name")
        version = c2.text_input("System version")
        go = st.form_submit_button("Import run")
    here = ui.under("runs_import")  # what the import did, right under the form
    if go:
        with ui.reported("Nothing was imported. ", where=here):
            if up is None:
                raise InputError("choose a file")
            text = uploads.read_text(up.name, up.getvalue(), "run")
            items = list(evalruns.iter_outputs(text.splitlines(), up.name, tax))
            evalruns.import_run(engine, actor, name, version, items, up.name)
            ui.said("runs_import", f"Run {name!r} imported.")
            st.rerun()


ALL = "(all)"
SUBSET_LABELS = {
    "split": "Split",
    "slice": "Slice",
    "family": "Question family",
    "category": "Category",
    "import_batch": "Import batch",
    "document": "Cases using document",
    "language": "Question language",
}


def execute_form(engine: Engine, actor: Actor, tax: Taxonomy) -> None:
    choices = cached.subset_choices(engine)
    with st.form("runs_execute"):
        c1, c2, c3 = st.columns([2, 2, 1])
        which = c1.selectbox("Pipeline", list(BUNDLED))
        run_name = c2.text_input("Run name", key="runs_exec_name")
        repeats = c3.number_input("Repeats", 1, 10, 1)
        st.caption("On which cases (every ready case unless narrowed; all choices apply)")
        cols = st.columns(len(SUBSET_LABELS))
        picked = {
            field: (
                ui.many_choice(  # tens of thousands: a field to type the key in
                    col,
                    label,
                    choices[field],
                    f"runs_subset_{field}",
                    empty=ALL,
                    format_func=str,
                    known=lambda k: family_exists(engine, k),
                )
                if field == "family"
                else col.selectbox(
                    ui.plain(label), [ALL, *choices[field]], key=f"runs_subset_{field}"
                )
            )
            for col, (field, label) in zip(cols, SUBSET_LABELS.items(), strict=True)
        }
        k1, k2 = st.columns(2)
        mentions = k1.text_input(
            "Cases mentioning (an entity or term, in the question or a required claim)",
            key="runs_subset_mentions",
        )
        keys = k2.text_input(
            "Or these case keys (separated by spaces or commas)", key="runs_subset_keys"
        )
        perturb = st.checkbox(
            "Also re-run each case perturbed (irrelevant documents reordered, a "
            "high-overlap distractor added) for the metamorphic checks",
            value=True,
        )
        ex = st.form_submit_button("Run on the chosen cases")
    here = ui.under("runs_execute")  # what the run did, right under the form
    if ex:
        chosen = {f: (None if v == ALL else v) for f, v in picked.items()}
        subset = execution.CaseSubset(
            keys=tuple(k for k in keys.replace(",", " ").split() if k) or None,
            mentions=mentions.strip() or None,
            **chosen,
        )
        with ui.reported(where=here):
            with here, st.spinner("Running…"):
                params = evaluation_run.params(which, run_name, int(repeats), perturb, subset)
                job_controls.start(
                    engine,
                    actor,
                    "runs_execute",
                    "evaluation_run",
                    params,
                    job_controls.result_text,
                )
            st.rerun()
    job_controls.watch(
        engine, actor, "runs_execute", "evaluation_run", job_controls.result_text, where=here
    )


def judge_section(
    engine: Engine, tax: Taxonomy, run: evalruns.RunRow, frame: pd.DataFrame | None = None
) -> None:
    """LLM-judge labels of this run and how far each judge agrees with the experts (``frame``:
    the run's outputs frame, when the caller has it)."""
    st.subheader("LLM judge vs experts")
    table = judges.agreement(engine, run.id, tax, frame)
    if table.empty:
        st.caption(
            "No judge labels for this run. Import them (JSONL: case, repeat, judge, decision, "
            "reason_codes, output_acceptable) to see, per field, how far the judge agrees with "
            "the experts' agreed labels before trusting it with more."
        )
    else:
        st.dataframe(judges.display_table(table), hide_index=True, width="stretch")
    actor = ui.actor()
    if not actor.can(Permission.run_evaluations):
        return
    with st.form(f"runs_judge_{run.id}", clear_on_submit=True):
        up = ui.file_upload("Judge labels JSONL", "judge", type=["jsonl"])
        go = st.form_submit_button("Import judge labels")
    here = ui.under(f"runs_judge_{run.id}")
    if go:
        with ui.reported("Nothing was imported. ", where=here):
            if up is None:
                raise InputError("choose a file")
            text = uploads.read_text(up.name, up.getvalue(), "judge")
            items = list(judges.iter_judge_labels(text.splitlines(), up.name, tax))
            n = judges.import_judge_labels(engine, actor, run.id, items, up.name)
            ui.said(f"runs_judge_{run.id}", f"{readable.count(n, 'judge label')} imported.")
            st.rerun()
