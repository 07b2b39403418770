"""Overview: the counts that matter and what needs my attention, each linking to its page."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from pages import ui
from review.monthly.overview import build_overview

actor = ui.actor()
tax = ui.tax()
ov = build_overview(ui.engine(), actor, tax)

st.title("Overview")
st.caption(
    f"Signed in as {actor.name} ({', '.join(sorted(actor.roles))})"
    + (" · clearance for restricted content" if actor.clearance else "")
)

c1, c2, c3, c4 = st.columns(4)
c1.metric(
    "Documents (current)", ov.documents_current, help=f"{ov.document_versions} versions in all"
)
c2.metric("Cases", ov.cases_total, help="All statuses")
c3.metric("Counterfactual families", ov.families)
c4.metric(
    "Expect no answer",
    "—" if ov.unanswerable_share is None else f"{ov.unanswerable_share:.0%}",
    help="Share of ready cases whose expected decision is not an answer (aim for ≥ 25%)",
)

st.subheader("Needs your attention")
if not ov.attention:
    st.success("Nothing needs your attention right now.")
for item in ov.attention:
    with st.container(border=True):
        st.markdown(ui.plain(item.text))
        st.page_link(
            f"pages/{item.page}_page.py",
            label=f"Open {item.page.title()}",
            icon=":material/arrow_forward:",
            query_params=item.params or None,
        )

if ov.cases_total:
    left, right = st.columns(2)
    with left:
        st.subheader("Ready cases by expected decision")
        df = pd.DataFrame(
            [
                {"decision": tax.decisions[k].label if k in tax.decisions else k, "cases": v}
                for k, v in sorted(ov.cases_by_decision.items())
            ]
        )
        if df.empty:
            st.info("No ready cases yet.")
        else:
            st.altair_chart(
                alt.Chart(df)
                .mark_bar()
                .encode(
                    x=alt.X("cases:Q", title="cases"),
                    y=alt.Y("decision:N", sort="-x", title=None),
                    tooltip=["decision", "cases"],
                ),
                width="stretch",
            )
    with right:
        st.subheader("Ready cases by slice")
        df = pd.DataFrame(
            [
                {"slice": term.label, "cases": ov.cases_by_slice.get(key, 0)}
                for key, term in tax.slices.items()
            ]
        )
        st.altair_chart(
            alt.Chart(df)
            .mark_bar()
            .encode(
                x=alt.X("cases:Q", title="cases"),
                y=alt.Y("slice:N", sort="-x", title=None),
                tooltip=["slice", "cases"],
            ),
            width="stretch",
        )
    st.caption(
        "Split of ready cases: "
        + ", ".join(f"{k} {v}" for k, v in sorted(ov.cases_by_split.items()))
        + f" · {ov.users} active users"
    )
else:
    st.info(
        "No cases yet. Import the corpus on the Corpus page, then build cases on the "
        "Cases page, or load the demo company with `workbench seed-demo`."
    )
