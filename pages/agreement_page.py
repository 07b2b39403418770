"""Agreement: how far annotators agree, per field, pair and group, with the items behind it."""

from __future__ import annotations

from typing import Any

import streamlit as st

from pages import ui
from review.admin import users
from review.charts.pairs import pairs_heatmap
from review.core import readable
from review.core.taxonomy import Taxonomy
from review.labels import agreement, agreement_sql, display, labeling

COLUMNS: dict[str, Any] = {
    "annotator_a": st.column_config.TextColumn("annotator A"),
    "annotator_b": st.column_config.TextColumn("annotator B"),
    "n_items": st.column_config.NumberColumn("items"),
    "n_annotators": st.column_config.NumberColumn("annotators"),
    "raw_agreement": st.column_config.NumberColumn("raw agreement", format="percent"),
    "cohen_kappa": st.column_config.NumberColumn("Cohen's kappa", format="%.3f"),
    "krippendorff_alpha": st.column_config.NumberColumn("Krippendorff's alpha", format="%.3f"),
}


@st.cache_data(show_spinner="Computing agreement ...", max_entries=16)
def _report(
    url: str, stamp: tuple[int, int], slice_: str, category: str, group_by: str
) -> agreement.AgreementReport | None:
    """Computed in the database from aggregates (never every label in memory); cached on the
    labels' stamp and the filters: a new label recomputes, widget changes reuse it."""
    tax = ui.tax()
    return agreement_sql.agreement_report_sql(
        ui.engine(),
        list(tax.decisions),
        list(tax.reason_codes),
        slice_=slice_,
        category=category,
        group_by=group_by,
    )


def filters(tax: Taxonomy) -> tuple[str, str, str]:
    c1, c2 = st.columns(2)
    slice_ = c1.selectbox(
        "Slice", ["", *tax.slices], format_func=ui.fmt_option(tax.slices), key="agr_slice"
    )
    category = c2.selectbox(
        "Category",
        ["", *tax.categories],
        format_func=ui.fmt_option(tax.categories),
        key="agr_category",
    )
    group_by = st.segmented_control(
        "Group by",
        ["slice", "category"],
        default="slice",
        format_func=lambda g: ui.plain(readable.humanize(g)),
        key="agr_group",
    )
    return slice_ or "", category or "", group_by or "slice"


def show_report(
    report: agreement.AgreementReport, tax: Taxonomy, group_by: str, names: dict[str, str]
) -> None:
    st.caption(
        f"{readable.count(report.cases, 'case')}, "
        f"{readable.count(report.annotators, 'annotator')}, "
        f"{readable.count(report.labels, 'current label')}. Kappa per pair, Krippendorff's alpha "
        "(nominal) across everyone; raw agreement beside each, with the items behind it. "
        "A statistic is undefined (blank, with the reason) when one rater is constant or "
        "nothing is shared."
    )
    st.subheader("Expected decision")
    decision = display.agreement_frame(report.decision, tax, names)
    ui.table(decision, pin=True, column_config=COLUMNS)
    if not report.decision_pairs.empty:
        st.caption("Decision pairs given by two annotators on the same case")
        labels = {k: t.label for k, t in tax.decisions.items()}
        heatmap = pairs_heatmap(report.decision_pairs, list(tax.decisions), labels)
        st.altair_chart(heatmap, width="stretch")

    st.subheader("Reason codes (each present or absent)")
    rc = display.agreement_frame(report.reasons, tax, names, "reason_codes")
    overall = rc[rc["scope"] == "all"].drop(columns=["annotator_a", "annotator_b"])
    ui.table(overall, pin=True, column_config=COLUMNS)
    with st.expander("Per annotator pair, per reason code"):
        ui.table(rc[rc["scope"] == "pair"], pin=True, column_config=COLUMNS)

    st.subheader(f"By {ui.plain(group_by)}")
    ui.table(
        display.groups_frame(report.groups, tax, group_by),
        pin=True,
        column_config={
            "raw agreement": st.column_config.NumberColumn(format="percent"),
            "alpha": st.column_config.NumberColumn(format="%.3f"),
        },
    )


def main() -> None:
    engine = ui.engine()
    ui.actor()
    tax = ui.tax()
    st.title("Agreement")
    stamp = labeling.labels_stamp(engine)
    if stamp[0] == 0:
        st.info(
            "No labels yet: agreement appears once at least two annotators label the same "
            "cases on the Label page."
        )
        return
    slice_, category, group_by = filters(tax)
    url = engine.url.render_as_string(hide_password=True)
    report = _report(url, stamp, slice_, category, group_by)
    if report is None:
        st.info("No labels in this group.")
        return
    show_report(report, tax, group_by, users.display_names(engine))


if __name__ == "__main__":
    main()
