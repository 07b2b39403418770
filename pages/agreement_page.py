"""Agreement: how far annotators agree, per field, pair and group, with the items behind it."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from pages import ui
from review import agreement, labeling

engine = ui.engine()
actor = ui.actor()
tax = ui.tax()

st.title("Agreement")
labels = labeling.labels_frame(engine)
if labels.empty:
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
if slice_:
    labels = labels[[slice_ in s for s in labels["slices"]]]
if category:
    labels = labels[labels["case_category"] == category]
if labels.empty:
    st.info("No labels in this group.")
    st.stop()

st.caption(
    f"{labels['case_id'].nunique()} case(s), {labels['annotator'].nunique()} "
    f"annotator(s), {len(labels)} current label(s). Kappa per pair, Krippendorff's alpha "
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
dec = agreement.agreement_table(labels, "decision", item="case_id", value="decision")
st.dataframe(dec, hide_index=True, width="stretch", column_config=cols)

pairs = agreement.confusion_pairs(
    labels, list(tax.decisions), mirror=True, item="case_id", value="decision"
)
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
reasons = labels.explode("reason_codes").rename(columns={"reason_codes": "reason_code"})
rc = agreement.reason_code_tables(reasons, codes=list(tax.reason_codes), item="case_id")
overall = rc[rc["scope"] == "all"].drop(columns=["annotator_a", "annotator_b"])
st.dataframe(overall, hide_index=True, width="stretch", column_config=cols)
with st.expander("Per annotator pair, per reason code"):
    st.dataframe(rc[rc["scope"] == "pair"], hide_index=True, width="stretch", column_config=cols)

st.subheader("By group")
group_by = st.segmented_control("Group by", ["slice", "category"], default="slice", key="agr_group")
rows = []
if group_by == "category":
    groups = labels.groupby("case_category")
else:
    groups = labels.explode("slices").dropna(subset=["slices"]).groupby("slices")
for name, g in groups:
    t = agreement.agreement_table(g, "decision", item="case_id", value="decision")
    allrow = t[t["scope"] == "all"]
    if allrow.empty:
        continue
    r = allrow.iloc[0]
    rows.append(
        {
            "group": name,
            "items": r["n_items"],
            "annotators": r["n_annotators"],
            "raw agreement": r["raw_agreement"],
            "alpha": r["krippendorff_alpha"],
            "note": r["note"],
        }
    )
st.dataframe(
    pd.DataFrame(rows),
    hide_index=True,
    width="stretch",
    column_config={
        "raw agreement": st.column_config.NumberColumn(format="%.3f"),
        "alpha": st.column_config.NumberColumn(format="%.3f"),
    },
)
