"""The traces list: the filter widgets (set once per distinct deep link, e.g. from a
monitoring alert), the "Clear filters" button and one page of matching traces. The widget
values live in session state under :data:`P`; review.traces.listing reads the links and
builds the filter."""

from __future__ import annotations

from typing import Any

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from pages.traces import cached
from review.core import clearance
from review.core.errors import InputError
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy
from review.traces import browse, display, listing
from review.traces.model import feedback_label

P = "traces_"  # session-state prefix of the Traces page
PAGE_SIZE = 25
KEEP = frozenset({f"{P}report", f"{P}applied"})  # kept when the filters reset


#: Each filter widget's empty value. Clearing sets these rather than deleting the keys: the
#: browser keeps a widget's last value while its key is merely gone, shows it still, and sends
#: it back with the next change of any filter (a cleared search came back).
EMPTY: dict[str, Any] = {
    "q": "", "from": None, "to": None, "sort": next(iter(browse.SORTS)), "decisions": [],
    "reason": "", "feedback": "", "ranking_mode": "", "policy_version": "",
    "model_version": "", "vkey": "", "vval": "", "language": "", "customer_tier": "",
    "document_type": "", "user_role": "", "smin": None, "smax": None, "ungrounded": False,
    "empty": False, "missing": False, "caveat": False, "restricted": False,
}  # fmt: skip


def reset_filters() -> None:
    """Forget every filter value (the import report and the applied link stay):
    the widgets are set to their empty values, everything else under :data:`P` goes."""
    for k in list(st.session_state):
        if isinstance(k, str) and k.startswith(P) and k not in KEEP:
            if k[len(P) :] in EMPTY:
                st.session_state[k] = EMPTY[k[len(P) :]]
            else:
                del st.session_state[k]


def init_from_query(tax: Taxonomy) -> None:
    """Deep links (e.g. from a monitoring alert) set the filters, once per distinct link."""
    query = st.query_params.to_dict()
    link = listing.link_key(query)
    if st.session_state.get(f"{P}applied") == link:
        return
    st.session_state[f"{P}applied"] = link
    if not link:
        return
    reset_filters()
    for name, value in listing.values_from_query(query, tax.decisions, tax.reason_codes).items():
        st.session_state[f"{P}{name}"] = value


def _clear() -> None:
    reset_filters()
    for name in listing.FILTER_PARAMS:
        if name in st.query_params:
            del st.query_params[name]
    st.session_state[f"{P}applied"] = ()


def clear_button() -> None:
    """The "Clear filters" button: the widgets and the link's parameters go. It clears in its
    callback, before the widgets of the next run exist (a widget's value may be set only
    then)."""
    st.button("Clear filters", key=f"{P}clear", on_click=_clear)


def _select(label: str, key: str, values: list[str], col: Any) -> str | None:
    options = listing.picker_options(values, st.session_state.get(f"{P}{key}"))
    value = col.selectbox(
        ui.plain(label), options, key=f"{P}{key}", format_func=lambda v: v or "(any)"
    )
    return value or None


def _more_filters(
    engine: Engine, actor: Actor, facets: dict[str, list[str]], stamp: str
) -> dict[str, Any]:
    """The expander of version, slice, score and flag filters; their values by widget name."""
    vkeys = cached.version_keys(engine, stamp)
    v: dict[str, Any] = {}
    with st.expander("More filters: versions, slices, scores, flags"):
        c0, c1, c2, c3 = st.columns(4)
        v["policy_version"] = _select(
            "Policy version", "policy_version", facets["policy_version"], c0
        )
        v["model_version"] = _select("Model", "model_version", facets["model_version"], c1)
        v["vkey"] = _select("Other version", "vkey", list(vkeys), c2)
        v["vval"] = _select("… with value", "vval", vkeys.get(v["vkey"] or "", []), c3)
        c0, c1, c2, c3 = st.columns(4)
        v["language"] = _select("Language", "language", facets["language"], c0)
        v["customer_tier"] = _select("Customer tier", "customer_tier", facets["customer_tier"], c1)
        v["document_type"] = _select("Document type", "document_type", facets["document_type"], c2)
        v["user_role"] = _select("User role", "user_role", facets["user_role"], c3)
        c0, c1, _ = st.columns([1, 1, 2])
        v["smin"] = c0.number_input("Top score at least", value=None, key=f"{P}smin")
        v["smax"] = c1.number_input("Top score at most", value=None, key=f"{P}smax")
        c0, c1, c2, c3, c4 = st.columns(5)
        v["ungrounded"] = c0.checkbox("Ungrounded", key=f"{P}ungrounded")
        v["empty"] = c1.checkbox("Empty retrieval", key=f"{P}empty")
        v["missing"] = c2.checkbox("No logged reason", key=f"{P}missing")
        v["caveat"] = c3.checkbox("Caveat answers", key=f"{P}caveat")
        v["restricted"] = (
            c4.checkbox("Restricted only", key=f"{P}restricted")
            if clearance.cleared(actor)
            else False
        )
    return v


def filters(engine: Engine, actor: Actor, tax: Taxonomy) -> tuple[browse.TraceFilter, str]:
    """The filter widgets; returns the filter they describe and the chosen sort."""
    stamp = browse.data_stamp(engine)
    facets = cached.facets(engine, stamp)
    v: dict[str, Any] = {}
    with st.container(border=True):
        c0, c1, c2, c3 = st.columns([3, 1, 1, 1])
        v["q"] = c0.text_input(
            "Search question, answer or trace id",
            key=f"{P}q",
            help=(
                "Finds any part of the question or the answer, in any letter case (words, "
                "parts of words, punctuation, all taken as plain text), or an exact trace id. "
                "Three characters or more (two alone on SQLite) are looked up in the search "
                "index; shorter text reads every trace."
            ),
        )
        v["from"] = c1.date_input("From", value=None, key=f"{P}from")
        v["to"] = c2.date_input("To (inclusive)", value=None, key=f"{P}to")
        sort = c3.selectbox(
            "Sort", list(browse.SORTS), format_func=browse.SORTS.__getitem__, key=f"{P}sort"
        )
        c0, c1, c2, c3 = st.columns([2, 1, 1, 1])
        v["decisions"] = c0.multiselect(
            "Decision",
            [*tax.decisions, listing.NO_DECISION],
            key=f"{P}decisions",
            format_func=lambda d: tax.decisions[d].label if d in tax.decisions else "(not logged)",
            select_all=False,
        )
        v["reason"] = c1.selectbox(
            "Reason code",
            ["", *tax.reason_codes],
            key=f"{P}reason",
            format_func=ui.fmt_option(tax.reason_codes),
        )
        v["feedback"] = c2.selectbox(
            "Feedback",
            listing.feedback_options(facets.get("feedback", [])),
            key=f"{P}feedback",
            format_func=lambda x: feedback_label(x) or "(any)",
        )
        v["ranking_mode"] = _select("Ranking mode", "ranking_mode", facets["ranking_mode"], c3)
        v |= _more_filters(engine, actor, facets, stamp)
    return listing.build_filter(v), sort


def _count(engine: Engine, actor: Actor, flt: browse.TraceFilter) -> browse.MatchCount:
    """The matches: a text search's count stops after browse.COUNT_LIMIT, unless the user
    asked for every match to be counted (the button, remembered for this filter)."""
    if st.session_state.get(f"{P}count_all") == flt:
        return browse.MatchCount(browse.count_traces(engine, actor, flt))
    count = browse.count_for_page(engine, actor, flt)
    if count.more and st.button(
        "Count every match",
        key=f"{P}count_all_button",
        help="Counting every match of a common text reads each matching trace: seconds.",
    ):
        st.session_state[f"{P}count_all"] = flt
        st.rerun()
    return count


def trace_list(engine: Engine, actor: Actor, tax: Taxonomy) -> None:
    """The filters and one page of the traces that match them."""
    flt, sort = filters(engine, actor, tax)
    if listing.dates_reversed(flt):
        ui.error("The “From” date is after the “To” date.")
        return
    # the page first: when it is the last one it gives the count (a search with few matches
    # is then counted without reading the traces again)
    asked = ui.requested_page("traces")
    try:  # a search too short for the indexes is stopped past its time bound, and says so
        rows = browse.list_traces(engine, actor, flt, asked, PAGE_SIZE, sort)
        count = browse.count_from_listing(asked, PAGE_SIZE, len(rows)) or _count(engine, actor, flt)
        page = ui.paginate(count.n, "traces", PAGE_SIZE, more=count.more)
        if page != asked:
            rows = browse.list_traces(engine, actor, flt, page, PAGE_SIZE, sort)
    except InputError as exc:
        ui.show_error(exc)
        return
    if not rows:
        if browse.total_traces(engine) == 0:
            st.info("No production traces yet: import a file above.")
        else:
            st.info("No traces match these filters.")
        return
    ui.table(
        display.listing_frame(rows, lambda pk: ui.link("traces", trace=pk), tax),
        pin=("open", "time (UTC)"),
        hide_index=True,
        width="stretch",
        height=ui.table_height(len(rows)),
        column_config={
            "open": st.column_config.LinkColumn("open", display_text="open"),
            "top score": st.column_config.NumberColumn(format="%.3f"),
            "question": st.column_config.TextColumn(width="large"),
        },
    )
    if not clearance.cleared(actor):
        st.caption("Restricted traces are left out: they are shown only to users with clearance.")
