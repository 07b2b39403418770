"""Agreement: how far annotators agree, per field, pair, group and annotator, with the items
behind each figure, every table downloadable as CSV (through the safe CSV writer)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from pages import ui
from review.admin import users
from review.cases.cases import family_exists
from review.charts import downloads
from review.charts.pairs import pairs_heatmap
from review.core import readable
from review.core.taxonomy import Taxonomy
from review.labels import agreement, agreement_sql, annotator_figures, counts, display

COLUMNS: dict[str, Any] = {
    "annotator_a": st.column_config.TextColumn("annotator A"),
    "annotator_b": st.column_config.TextColumn("annotator B"),
    "n_items": st.column_config.NumberColumn("items"),
    "n_annotators": st.column_config.NumberColumn("annotators"),
    "raw_agreement": st.column_config.NumberColumn("raw agreement", format="percent"),
    "cohen_kappa": st.column_config.NumberColumn("Cohen's kappa", format="%.3f"),
    "krippendorff_alpha": st.column_config.NumberColumn("Krippendorff's alpha", format="%.3f"),
    "labels_per_case": st.column_config.TextColumn("labels per case"),
    "n_left_out": st.column_config.NumberColumn("items left out"),
    "observed_agreement": st.column_config.NumberColumn("observed agreement (P)", format="%.3f"),
    "chance_agreement": st.column_config.NumberColumn("chance agreement (Pₑ)", format="%.3f"),
    "fleiss_kappa": st.column_config.NumberColumn("Fleiss' kappa", format="%.3f"),
}

ANNOTATOR_COLUMNS: dict[str, Any] = {
    "cases_labelled": st.column_config.NumberColumn("cases labelled"),
    "n_compared": st.column_config.NumberColumn(
        "compared", help="Cases with a reference (their label not counted towards it)"
    ),
    "n_adjudicated": st.column_config.NumberColumn(
        "adjudicated", help="Of the cases compared, those whose reference is an adjudication"
    ),
    "agreement_with_reference": st.column_config.NumberColumn(
        "agreement", format="percent", help="Share of the cases compared that match the reference"
    ),
    "kappa_vs_reference": st.column_config.NumberColumn(
        "Cohen's kappa", format="%.3f", help="Cohen's kappa against the reference"
    ),
    "queue_labelled": st.column_config.NumberColumn("labelled in the queue"),
    "queue_cases": st.column_config.NumberColumn("queue"),
}

#: What the per-annotator reference is, said once under the table.
REFERENCE_TEXT = (
    "The reference of an annotator's label is the case's adjudicated decision; without one, "
    "the decision every other annotator on the case gave (at least one other, all the same). "
    "Their own label never counts towards it, so this is not the stored agreed label (which "
    "their vote helps make). Cases without a reference are not compared. The queue is the "
    "ready cases under the filters above."
)

FLEISS_TEXT = (
    "Fleiss' kappa across all annotators, over the cases with two labels or more (cases with "
    "one label are left out and counted). With the same number of labels on every case it "
    "is Fleiss (1971) exactly; when the numbers differ, the first row is Gwet's (2014) "
    "generalisation (each case's agreement and value shares over its own labels, averaged "
    "over the cases) and each label count follows with its own exact Fleiss figure."
)


@st.cache_data(show_spinner="Computing agreement ...", max_entries=16)
def _report(
    url: str, stamp: tuple[int, ...], scope: dict[str, Any], group_by: str
) -> agreement.AgreementReport | None:
    """Computed in the database from aggregates (never every label in memory); cached on a
    stamp of the labels and the cases' edits (a case moved to another slice or category
    moves the group table) and the filters: widget changes reuse it."""
    tax = ui.tax()
    return agreement_sql.agreement_report_sql(
        ui.engine(), list(tax.decisions), list(tax.reason_codes), group_by=group_by, **scope
    )


@st.cache_data(show_spinner="Counting per annotator ...", max_entries=16)
def _annotators(url: str, stamp: tuple[int, ...], scope: dict[str, Any]) -> pd.DataFrame:
    """Per-annotator figures, cached on a stamp that also moves with adjudications and case
    edits (the audit log: the reference and the queue depend on them)."""
    return annotator_figures.annotator_figures(ui.engine(), list(ui.tax().decisions), **scope)


@st.cache_data(max_entries=4)
def _choices(url: str, stamp: tuple[int, ...]) -> tuple[list[str], list[str], dict[int, str]]:
    """The values the filters offer: families, sources and import batches with labels."""
    engine = ui.engine()
    batches = {
        i: f"#{i} {tool}: {name} ({at})"
        for i, tool, name, at in agreement_sql.import_choices(engine)
    }
    families = agreement_sql.family_keys(engine, ui.PICKER_LIMIT)
    return families, agreement_sql.source_choices(engine), batches


def csv_button(frame: pd.DataFrame, table: str, scope: dict[str, Any]) -> None:
    """A download of ``frame`` as shown (names, labels), written by the safe CSV writer."""
    st.download_button(
        "Download CSV",
        downloads.csv_text(frame),
        display.csv_name(table, scope),
        "text/csv",
        key=f"agr_csv_{table}",
        icon=":material/download:",
    )


SOURCE_NAMES = {"workbench": "made here", "label-studio": "Label Studio", "argilla": "Argilla"}


def filters(
    tax: Taxonomy, choices: tuple[list[str], list[str], dict[int, str]]
) -> tuple[dict[str, Any], str]:
    families, sources, batches = choices
    c1, c2, c3 = st.columns(3)
    slice_ = c1.selectbox(
        "Slice", ["", *tax.slices], format_func=ui.fmt_option(tax.slices), key="agr_slice"
    )
    category = c2.selectbox(
        "Category",
        ["", *tax.categories],
        format_func=ui.fmt_option(tax.categories),
        key="agr_category",
    )
    family = ui.many_choice(
        c3, "Case family", families, "agr_family", known=lambda k: family_exists(ui.engine(), k)
    )
    c4, c5 = st.columns([1, 2])
    source = c4.selectbox(
        "Labels made",
        ["", *sources],
        format_func=lambda v: SOURCE_NAMES.get(v, v) if v else "(anywhere)",
        key="agr_source",
    )
    batch = c5.selectbox(
        "Import batch",
        [0, *batches],
        format_func=lambda i: batches.get(i, "(any)") if i else "(any)",
        key="agr_import",
        disabled=not batches,
    )
    group_by = st.segmented_control(
        "Group by",
        ["slice", "category"],
        default="slice",
        format_func=lambda g: ui.plain(readable.humanize(g)),
        key="agr_group",
    )
    scope: dict[str, Any] = {
        "slice_": slice_ or "",
        "category": category or "",
        "family": family or "",
        "source": source or "",
        "import_id": int(batch) if batch else None,
    }
    return scope, group_by or "slice"


def show_report(
    report: agreement.AgreementReport,
    tax: Taxonomy,
    group_by: str,
    names: dict[str, str],
    scope: dict[str, Any],
) -> None:
    st.caption(
        f"{readable.count(report.cases, 'case')}, "
        f"{readable.count(report.annotators, 'annotator')}, "
        f"{readable.count(report.labels, 'current label')}. Cohen's kappa per pair; "
        "Krippendorff's alpha (nominal) and Fleiss' kappa across everyone; raw agreement "
        "beside each, with the items behind it. A statistic is undefined (a dash, with the "
        "reason in its note) when one rater is constant or nothing is shared."
    )
    st.subheader("Expected decision")
    decision = display.agreement_frame(report.decision, tax, names)
    ui.table(decision, pin=True, column_config=COLUMNS)
    csv_button(decision, "decision", scope)
    fleiss = report.fleiss
    decision_fleiss = display.fleiss_frame(fleiss[fleiss["field"] == "decision"], tax)
    st.caption(FLEISS_TEXT)
    ui.table(decision_fleiss, pin=True, column_config=COLUMNS)
    csv_button(decision_fleiss, "decision-fleiss", scope)
    if not report.decision_pairs.empty:
        st.caption("Decision pairs given by two annotators on the same case")
        labels = {k: t.label for k, t in tax.decisions.items()}
        heatmap = pairs_heatmap(report.decision_pairs, list(tax.decisions), labels)
        st.altair_chart(heatmap, width="stretch")
        grid = report.decision_pairs.assign(
            value_a=[labels.get(v, v) for v in report.decision_pairs["value_a"]],
            value_b=[labels.get(v, v) for v in report.decision_pairs["value_b"]],
        )
        csv_button(grid, "decision-pairs", scope)

    st.subheader("Reason codes (each present or absent)")
    rc = display.agreement_frame(report.reasons, tax, names, "reason_codes")
    overall = rc[rc["scope"] == "all"].drop(columns=["annotator_a", "annotator_b"])
    ui.table(overall, pin=True, column_config=COLUMNS)
    csv_button(overall, "reason-codes", scope)
    code_fleiss = display.fleiss_frame(fleiss[fleiss["field"] != "decision"], tax, "reason_codes")
    with st.expander("Fleiss' kappa per reason code"):
        ui.table(code_fleiss, pin=True, column_config=COLUMNS)
        csv_button(code_fleiss, "reason-codes-fleiss", scope)
    with st.expander("Per annotator pair, per reason code"):
        pairs = rc[rc["scope"] == "pair"]
        ui.table(pairs, pin=True, column_config=COLUMNS)
        csv_button(pairs, "reason-code-pairs", scope)

    st.subheader(f"By {ui.plain(group_by)}")
    groups = display.groups_frame(report.groups, tax, group_by)
    ui.table(
        groups,
        pin=True,
        column_config={
            "raw agreement": st.column_config.NumberColumn(format="percent"),
            "alpha": st.column_config.NumberColumn(format="%.3f"),
            "fleiss kappa": st.column_config.NumberColumn("Fleiss' kappa", format="%.3f"),
        },
    )
    csv_button(groups, f"by-{group_by}", scope)


def show_annotators(figures: pd.DataFrame, names: dict[str, str], scope: dict[str, Any]) -> None:
    st.subheader("Per annotator")
    st.caption(REFERENCE_TEXT)
    shown = display.annotators_frame(figures, names)
    ui.table(shown, pin=True, column_config=ANNOTATOR_COLUMNS)
    csv_button(shown, "annotators", scope)


def main() -> None:
    engine = ui.engine()
    ui.actor()
    tax = ui.tax()
    st.title("Agreement")
    stamp = counts.stamp(engine)  # label rows first
    if stamp[0] == 0:
        st.info(
            "No labels yet: agreement appears once at least two annotators label the same "
            "cases on the Label page."
        )
        return
    url = engine.url.render_as_string(hide_password=True)
    scope, group_by = filters(tax, _choices(url, stamp))
    report = _report(url, stamp, scope, group_by)
    if report is None:
        st.info("No labels in this group.")
        return
    names = users.display_names(engine)
    show_report(report, tax, group_by, names, scope)
    if stamp[0] <= annotator_figures.EAGER_LABELS or st.toggle(
        "Per-annotator figures",
        key="agr_per_annotator",
        help="Counted on request on a large label set: they take a pass over every label.",
    ):
        show_annotators(_annotators(url, stamp, scope), names, scope)


if __name__ == "__main__":
    main()
