"""Overview: the counts that matter and what needs my attention, each linking to its page."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st
from sqlalchemy import Engine

from pages import ui
from pages.labeling import cached
from review.core import clearance
from review.core.identity import Permission
from review.core.taxonomy import Taxonomy
from review.evaluation import execution
from review.monthly.overview import (
    Attention,
    CaseFigures,
    Overview,
    build_overview,
    case_figures,
)


def counts(ov: Overview) -> None:
    c1, c2, c3, c4 = st.columns(4)
    c1.metric(
        "Documents (current)",
        ov.documents_current,
        help=f"{ov.document_versions:d} versions in all",
    )
    c2.metric("Cases", ov.cases_total, help="All statuses")
    c3.metric("Counterfactual families", ov.families)
    c4.metric(
        "Expect no answer",
        "—" if ov.unanswerable_share is None else f"{ov.unanswerable_share:.0%}",
        help="Share of ready cases whose expected decision is not an answer (aim for ≥ 25%)",
    )


def first_step(step: Attention) -> None:
    """The one next step of a workbench that is not set up yet, above everything else."""
    with st.container(border=True):
        st.subheader("First step", anchor=False)
        st.markdown(ui.plain(step.text))
        st.page_link(
            f"pages/{step.page}_page.py",
            label=f"Open {ui.plain(step.page.title())}",
            icon=":material/arrow_forward:",
            query_params=step.params or None,
        )


def attention(ov: Overview) -> None:
    st.subheader("Needs your attention")
    if not ov.attention:
        st.success("Nothing needs your attention right now.")
    for item in ov.attention:
        with st.container(border=True):
            st.markdown(ui.plain(item.text))
            st.page_link(
                f"pages/{item.page}_page.py",
                label=f"Open {ui.plain(item.page.title())}"
                + (f": {ui.plain(item.opens)}" if item.opens else ""),
                icon=":material/arrow_forward:",
                query_params=item.params or None,
            )


def bar_chart(df: pd.DataFrame, y: str) -> alt.Chart:
    chart: alt.Chart = (
        alt.Chart(df)
        .mark_bar()
        .encode(
            x=alt.X("cases:Q", title="cases"),
            # long slice names read whole: no label is cut to "Near-neighbour d…"
            y=alt.Y(f"{y}:N", sort="-x", title=None, axis=alt.Axis(labelLimit=400)),
            tooltip=[y, "cases"],
        )
    )
    return chart


def ready_cases(ov: Overview, tax: Taxonomy) -> None:
    left, right = st.columns(2)
    with left:
        st.subheader("Ready cases by expected decision")
        by_decision = pd.DataFrame(
            [
                {"decision": tax.decisions[k].label if k in tax.decisions else k, "cases": v}
                for k, v in sorted(ov.cases_by_decision.items())
            ]
        )
        if by_decision.empty:
            st.info("No ready cases yet.")
        else:
            st.altair_chart(bar_chart(by_decision, "decision"), width="stretch")
    with right:
        st.subheader("Ready cases by slice")
        by_slice = pd.DataFrame(
            [
                {"slice": term.label, "cases": ov.cases_by_slice.get(key, 0)}
                for key, term in tax.slices.items()
            ]
        )
        st.altair_chart(bar_chart(by_slice, "slice"), width="stretch")
    st.caption(
        "Split of ready cases: "
        + ", ".join(f"{ui.plain(k)} {v:d}" for k, v in sorted(ov.cases_by_split.items()))
        + f" · {ov.users:d} active users"
    )


@st.cache_data(ttl=600, show_spinner=False, max_entries=4)
def _case_figures(_engine: Engine, url: str, stamp: tuple[int, int, int]) -> CaseFigures:
    return case_figures(_engine)


def cases_now(engine: Engine) -> CaseFigures:
    """The cases' counts (0.4 s at 500,000 cases), kept until a case is added or edited
    (execution.choices_stamp, index look-ups)."""
    return _case_figures(engine, str(engine.url), execution.choices_stamp(engine))


def main() -> None:
    actor = ui.actor()
    tax = ui.tax()
    engine = ui.engine()
    left = cached.queue_progress(engine, actor)[1] if actor.can(Permission.label) else None
    ov = build_overview(engine, actor, tax, labels_left=left, cases=cases_now(engine))
    st.title("Overview")
    st.caption(
        f"Signed in as {ui.plain(actor.name)} "
        f"({ui.plain(', '.join(r.replace('_', ' ') for r in sorted(actor.roles)))})"
        + (" · clearance for restricted content" if clearance.cleared(actor) else "")
    )
    if ov.first_step is not None:
        first_step(ov.first_step)
    counts(ov)
    if ov.attention or ov.first_step is None:
        attention(ov)
    if ov.cases_total:
        ready_cases(ov, tax)


if __name__ == "__main__":
    main()
