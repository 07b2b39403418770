"""Runs: evaluation runs on the labeled cases, their metrics, metamorphic checks, comparison."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from pages import integrity, ui
from pages.runs import cached
from pages.runs.forms import execute_form, import_run_form, judge_section
from review.admin import users
from review.core import readable
from review.core.errors import WorkbenchError
from review.core.identity import Actor, Permission
from review.core.taxonomy import Taxonomy
from review.evaluation import blinding, clearance, display, evalruns, runmetrics, runview
from review.labels import blind
from review.policy.inforce import in_force

PERTURBED_COLUMNS = [
    "key", "repeat", "kind", "base_decision", "decision", "passed", "why", "cited_doc_ids",
    "restricted", "text",
]  # fmt: skip
GROUPS = [
    "split", "category", "slices", "family", "evidence_state", "language", "retrieval_depth",
    "freshness",
]  # fmt: skip
OUTPUT_COLUMNS = [
    "key", "repeat", "gold", "decision", "score", "reason_code", "cited_doc_ids", "infra_error",
    "answer_ok", "contradicts_claim", "restricted", "text",
]  # fmt: skip


def _partial_allowed(engine: Engine) -> bool:
    """Whether the policy in force allows partial answers; when it cannot be read (edited in
    the database), the page says so and counts them as refusals (docs/metrics.md)."""
    try:
        return in_force(engine).policy.allows_partial_answers
    except WorkbenchError as exc:
        ui.show_error(
            exc,
            "The no-answer policy in force cannot be read, so partial answers count as "
            "refusals in these figures, as the false-refusal rate defines them: ",
        )
        return False


@st.fragment
def one_run(
    engine: Engine, actor: Actor, tax: Taxonomy, by_name: dict[str, evalruns.RunRow]
) -> None:
    """The run picked and its figures; a fragment, so that a pick or a choice within it reruns
    this tab alone, from the figures kept per data stamp (pages/runs/cached.py)."""
    pick = st.selectbox("Run", list(by_name), key="runs_pick")
    run = by_name[pick]
    partial = _partial_allowed(engine)
    stamp = runview.stamp(engine, run.id)
    view = cached.one_run(engine, tax, stamp, partial)
    df = clearance.withhold(actor, view.frame)
    if run.infra_failures:
        st.warning(
            f"{readable.count(run.infra_failures, 'infrastructure failure')}: counted apart, never "
            "as answers, and excluded from every rate."
        )
    summary = view.summary
    intervals, confusion = cached.charts(engine, tax, view, stamp, partial)
    c1, c2 = st.columns([3, 2])
    with c1:
        st.subheader("Metrics")
        ui.table(display.summary_rows(summary), hide_index=True, width="stretch")
        st.caption(
            "Rates with 95% Wilson intervals; k of n, where n counts what *over* says (the "
            "denominators docs/metrics.md defines). Infrastructure failures are excluded. A "
            "partial answer to a question expecting an answer counts as a refusal unless "
            f"the policy allows partial answers (it {'does' if partial else 'does not'}). "
            "The CRAG score counts +1 per acceptable answer (the case calls for it, it has "
            "text, cites a decisive document and states no figure a required claim "
            "contradicts), 0 per non-answer and -1 per other answer. "
            "The documentation's Metrics page (docs/metrics.md) defines each figure."
        )
    with c2:
        st.altair_chart(intervals, width="stretch")
    st.subheader("By group")
    group = st.segmented_control(
        "Group by",
        GROUPS,
        default="split",
        format_func=lambda g: ui.plain(readable.humanize(g)),
        key="runs_group",
        help="family: the counterfactual question family; evidence_state: its variant; "
        "language: the question's language as the case states it; retrieval_depth: how many "
        "documents the case's identity sees; freshness: the age of its newest decisive document.",
    )
    table = cached.by_group(engine, view, stamp, group or "split", partial)
    rates = [runmetrics.LABELS[m] for m in runmetrics.RATE_METRICS]
    ui.table(
        display.group_table(table, group or "split", tax),
        hide_index=True,
        width="stretch",
        column_config={r: st.column_config.NumberColumn(r, format="percent") for r in rates},
    )
    st.subheader("Recall of each decision state")
    ui.table(display.recall_table(view.recall, tax), hide_index=True, width="stretch")
    judge_section(engine, tax, run, view.frame)
    st.subheader("Expected vs observed decision")
    st.altair_chart(confusion, width="stretch")
    st.subheader("Metamorphic checks")
    perturbed = clearance.withhold(actor, view.perturbed)
    meta = view.checks
    if meta.empty:
        st.info("This run has no outputs on family variants and no perturbed re-runs.")
    else:
        ui.table(
            meta,
            hide_index=True,
            width="stretch",
            column_config={
                "pass_rate": st.column_config.ProgressColumn(
                    "pass rate", min_value=0.0, max_value=1.0, format="percent"
                ),
                "decision_variance": st.column_config.NumberColumn(
                    "decision variance", format="%.3f"
                ),
            },
        )
        st.caption(
            "Family checks read the outputs on counterfactual variants; perturbation checks "
            "re-run each case with its irrelevant documents reordered, or with a distractor "
            "that repeats the question and answers nothing. Pass rate is over every case and "
            "repeat (never the best run); 'varying' counts cases whose decision changed "
            "between repeats, and decision variance is 1 minus the share of a case's most "
            "frequent decision, averaged over cases."
        )
    if perturbed.empty:
        st.caption(
            "No perturbed re-runs: imported runs and runs made without perturbations have "
            "only the family checks."
        )
    else:
        failing = perturbed[perturbed["passed"].eq(False)]
        with st.expander(
            f"Perturbed answers ({len(perturbed)}, {len(failing)} failing; text shown verbatim)"
        ):
            only = st.toggle("Failing only", value=True, key="runs_pert_failing")
            shown = failing if only else perturbed
            ui.table(
                shown[PERTURBED_COLUMNS].rename(
                    columns={"base_decision": "decision before", "decision": "after"}
                ),
                hide_index=True,
                width="stretch",
            )
            cases_ = sorted(set(perturbed["key"]))
            pick_case = st.selectbox("Show what was changed for case", cases_, key="runs_pert_case")
            for kind, detail in (
                perturbed.loc[perturbed["key"] == pick_case, ["kind", "perturbation"]]
                .drop_duplicates("kind")
                .itertuples(index=False)
            ):
                if "withheld" in detail:
                    st.caption(ui.plain(str(detail["withheld"])))
                elif kind == "reorder":
                    ui.text(
                        "\n".join(detail.get("was", [])),
                        label="Visible documents in the case's order",
                    )
                    ui.text(
                        "\n".join(detail.get("order", [])), label="Reordered (irrelevant moved)"
                    )
                else:
                    ui.text(
                        str(detail.get("body", "")),
                        label=f"Distractor added first: {ui.plain(detail.get('added', ''))}",
                    )
    with st.expander("Outputs (text shown verbatim)"):
        ui.table(
            display.outputs_table(
                blinding.outputs_table(engine, blind.sight(engine, actor), df)[OUTPUT_COLUMNS], tax
            ),
            hide_index=True,
            width="stretch",
        )


@st.fragment
def compare_runs(engine: Engine, tax: Taxonomy, by_name: dict[str, evalruns.RunRow]) -> None:
    """Two runs compared; a fragment (a pick reruns this tab alone), kept per data stamp."""
    if len(by_name) < 2:
        st.info("Two runs are needed to compare.")
        return
    names = list(by_name)
    c1, c2 = st.columns(2)
    a = c1.selectbox("Run A (before)", names, index=1, key="runs_a")
    b = c2.selectbox("Run B (after)", names, index=0, key="runs_b")
    partial = _partial_allowed(engine)
    comparison = cached.compare(engine, tax, by_name[a].id, by_name[b].id, partial)
    ui.table(
        comparison.bootstrap,
        hide_index=True,
        width="stretch",
        column_config={
            c: st.column_config.NumberColumn(c, format="%.3f")
            for c in ("A", "B", "delta", "low", "high")
        },
    )
    st.caption(
        "Deltas are B − A over the cases both runs scored, with 95% paired "
        "bootstrap intervals (cases resampled with replacement, 1,000 times)."
    )
    flips = comparison.flips
    st.subheader(f"Decision flips ({len(flips)})")
    if flips.empty:
        st.info("No case changed its decision.")
    else:
        counts = flips["effect"].value_counts()
        st.caption(
            ", ".join(f"{ui.plain(k)}: {v:d}" for k, v in counts.items())
            + " (fixed = B matches the gold decision where A did not)"
        )
        seen = blind.sight(engine, ui.actor())
        ui.table(
            display.flips_table(blinding.outputs_table(engine, seen, flips), tax),
            hide_index=True,
            width="stretch",
            column_config={
                c: st.column_config.TextColumn(label) for c, label in display.FLIP_HEADERS.items()
            },
        )


@st.fragment
def drift_by_family(engine: Engine, tax: Taxonomy) -> None:
    """The families' figures over every run; a fragment (a metric or family choice reruns
    this tab alone), kept per data stamp."""
    st.subheader("Drift by question family")
    drift, stamp = cached.drift(engine, tax)
    if drift.empty:
        st.info("No run has outputs on cases of a question family yet.")
        return
    metric = st.segmented_control(
        "Metric",
        list(runmetrics.DRIFT_METRICS),
        format_func=runmetrics.DRIFT_METRICS.__getitem__,
        default="decision_accuracy",
        key="runs_drift_metric",
    )
    metric = metric or "decision_accuracy"
    families = sorted(drift["family"].unique())
    chosen = st.multiselect(
        "Question families",
        families,
        default=[],
        placeholder="All question families",
        key="runs_drift_families",
    )
    view = drift[drift["family"].isin(chosen or families)]
    chart = cached.drift_chart(engine, view, stamp, metric, tuple(chosen))
    st.altair_chart(chart, width="stretch")
    table = runmetrics.drift_table(view, metric)
    order = [c for c in table.columns if c != "family"]
    ui.table(
        table,
        hide_index=True,
        width="stretch",
        height=ui.table_height(len(table), 20),
        column_config={
            r: st.column_config.NumberColumn(r, format="percent" if metric != "flips" else "%d")
            for r in order
        },
    )
    st.caption(
        "Runs oldest first (left to right). Decision accuracy and abstention recall "
        "count every repeat; flips count the family's cases whose first-repeat "
        "decision differs from the run before (blank for the first run)."
    )
    with st.expander("Every run and family, with counts"):
        ui.table(view, hide_index=True, width="stretch")


def main() -> None:
    engine = ui.engine()
    actor = ui.actor()
    tax = ui.tax()
    st.title("Evaluation runs")
    integrity.chain_banner(engine)
    runs = evalruns.list_runs(engine)
    if actor.can(Permission.run_evaluations):
        with st.expander("Import a run or run a bundled pipeline"):
            import_run_form(engine, actor, tax)
            execute_form(engine, actor, tax)
    if not runs:
        st.info(
            "No evaluation runs yet. Import a run's outputs, run a bundled pipeline above, or "
            "use `workbench evaluate --pipeline module:function`."
        )
        return
    ui.table(
        evalruns.runs_frame(runs, users.display_names(engine)),
        pin=True,
        hide_index=True,
        width="stretch",
        height=ui.table_height(len(runs), 8),
    )
    tab_one, tab_cmp, tab_drift = st.tabs(["One run", "Compare two runs", "Drift by family"])
    by_name = {r.name: r for r in runs}
    with tab_one:
        one_run(engine, actor, tax, by_name)
    with tab_cmp:
        compare_runs(engine, tax, by_name)
    with tab_drift:
        drift_by_family(engine, tax)


if __name__ == "__main__":
    main()
