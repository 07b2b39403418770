"""Agreement: how far annotators agree, per field, pair and group, with the items behind it."""

from __future__ import annotations

import altair as alt
import streamlit as st

from pages import ui
from review.labels import agreement, agreement_sql, labeling

engine = ui.engine()
actor = ui.actor()
tax = ui.tax()

st.title("Agreement")


@st.cache_data(show_spinner="Computing agreement ...", max_entries=16)
def _report(
    url: str, stamp: tuple[int, int], slice_: str, category: str, group_by: str
) -> agreement.AgreementReport | None:
    """Computed in the database from aggregates (never every label in memory); cached on the
    labels' stamp and the filters: a new label recomputes, widget changes reuse it."""
    return agreement_sql.agreement_report_sql(
        engine,
        list(tax.decisions),
        list(tax.reason_codes),
        slice_=slice_,
        category=category,
        group_by=group_by,
    )


stamp = labeling.labels_stamp(engine)
url = engine.url.render_as_string(hide_password=True)
if stamp[0] == 0:
    st.info(
        "No labels yet: agreement appears once at least two annotators label the same "
        "cases on the Label page."
    )
    st.stop()

c1, c2 = st.columns(2)
slice_ = c1.selectbox(
    "Slice", ["", *tax.slices], format_func=ui.fmt_option(tax.slices), key="agr_slice"
)
category = c2.selectbox(
    "Category", ["", *tax.categories], format_func=ui.fmt_option(tax.categories), key="agr_category"
)
group_by = st.segmented_control("Group by", ["slice", "category"], default="slice", key="agr_group")
report = _report(url, stamp, slice_ or "", category or "", group_by or "slice")
if report is None:
    st.info("No labels in this group.")
    st.stop()

st.caption(
    f"{report.cases} case(s), {report.annotators} "
    f"annotator(s), {report.labels} current label(s). Kappa per pair, Krippendorff's alpha "
    "(nominal) across everyone; raw agreement beside each, with the items behind it. "
    "A statistic is undefined (blank, with the reason) when one rater is constant or "
    "nothing is shared."
)
cols = {
    "n_items": st.column_config.NumberColumn("items"),
    "n_annotators": st.column_config.NumberColumn("annotators"),
    "raw_agreement": st.column_config.NumberColumn("raw agreement", format="%.3f"),
    "cohen_kappa": st.column_config.NumberColumn("Cohen's kappa", format="%.3f"),
    "krippendorff_alpha": st.column_config.NumberColumn("Krippendorff's alpha", format="%.3f"),
}

st.subheader("Expected decision")
st.dataframe(report.decision, hide_index=True, width="stretch", column_config=cols)

pairs = report.decision_pairs
if not pairs.empty:
    st.caption("Decision pairs given by two annotators on the same case")
    st.altair_chart(
        alt.Chart(pairs)
        .mark_rect()
        .encode(
            x=alt.X("value_a:N", title="annotator A", sort=list(tax.decisions)),
            y=alt.Y("value_b:N", title="annotator B", sort=list(tax.decisions)),
            color=alt.Color("pairs:Q", scale=alt.Scale(scheme="oranges")),
            tooltip=["value_a", "value_b", "pairs"],
        )
        + alt.Chart(pairs)
        .mark_text()
        .encode(
            x=alt.X("value_a:N", sort=list(tax.decisions)),
            y=alt.Y("value_b:N", sort=list(tax.decisions)),
            text="pairs:Q",
        ),
        width="stretch",
    )

st.subheader("Reason codes (each present or absent)")
rc = report.reasons
overall = rc[rc["scope"] == "all"].drop(columns=["annotator_a", "annotator_b"])
st.dataframe(overall, hide_index=True, width="stretch", column_config=cols)
with st.expander("Per annotator pair, per reason code"):
    st.dataframe(rc[rc["scope"] == "pair"], hide_index=True, width="stretch", column_config=cols)

st.subheader(f"By {group_by or 'slice'}")
st.dataframe(
    report.groups,
    hide_index=True,
    width="stretch",
    column_config={
        "raw agreement": st.column_config.NumberColumn(format="%.3f"),
        "alpha": st.column_config.NumberColumn(format="%.3f"),
    },
)
