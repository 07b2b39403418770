"""Moving through the queue: next, previous (my last label, to change it), skip, the queue's
filters and progress, and the keys overlay. Buttons run callbacks bound to the case they were
drawn for, so a key pressed while the page is busy is applied to that case or refused with a
message, never lost (the keys themselves go through pages/keyboard.py's queue)."""

from __future__ import annotations

import streamlit as st

from pages import keyboard, ui
from pages.labeling import cached
from review.cases.cases import family_exists
from review.core import readable
from review.core.database import database_url
from review.core.taxonomy import Taxonomy
from review.labels import keys, labeling, queue

ANY = ""
# No category filter on the page: a case's category is the author's suggestion, and picking
# cases by it would tell a blind annotator that suggestion before they label (item 2 over
# item 5 of issue 17). The queue service still filters by category for other callers.
FILTERS = ("family", "slice", "split")
FILTER_LABELS = {"family": "Family", "slice": "Slice", "split": "Split"}


def queue_filter() -> queue.QueueFilter:
    s = st.session_state
    return queue.QueueFilter(**{f: s.get(f"lab_f_{f}") or None for f in FILTERS})


def open_case(case_id: int | None) -> None:
    """Show ``case_id`` (None: no case), its form starting from my current label."""
    st.session_state["lab_case"] = case_id
    st.session_state.pop("lab_msg", None)
    if case_id is None:
        st.query_params.pop("case", None)
        return
    # the form starts again from my current label: drop what was left of an earlier visit
    for key in [k for k in st.session_state if str(k).endswith(f"_{case_id}")]:
        if str(key).startswith("lab_"):
            del st.session_state[key]
    st.query_params["case"] = str(case_id)


def load_next(*, exclude_current: bool) -> None:
    current = st.session_state.get("lab_case")
    skipped = list(st.session_state.setdefault("lab_skipped", []))
    if exclude_current and current is not None:
        skipped.append(current)
    engine, actor, part = ui.engine(), ui.actor(), queue_filter()
    nxt = labeling.next_case(engine, actor, exclude=skipped, queue=part)
    open_case(nxt)
    if nxt is None:
        st.session_state["lab_msg"] = labeling.empty_queue_message(
            engine, actor, part, skipped=skipped
        )


def refuse(key: str, case_id: int) -> None:
    """A key that arrived for a case no longer open: say so, change nothing."""
    st.session_state["lab_msg"] = (
        "error",
        f"The key {key} was pressed for a case that is no longer open (id {case_id}); "
        "nothing was changed. Press it again on this case if you meant it.",
    )


def _bound(case_id: int | None, key: str) -> bool:
    if st.session_state.get("lab_case") != case_id:
        refuse(key, case_id or 0)
        return False
    return True


def _previous(case_id: int | None) -> None:
    if not _bound(case_id, "P"):
        return
    prev = queue.previous_case(ui.engine(), ui.actor(), case_id)
    if prev is None:
        st.session_state["lab_msg"] = ("error", "There is no earlier label of yours to go back to.")
        return
    open_case(prev)


def _next(case_id: int | None) -> None:
    if _bound(case_id, "N"):
        load_next(exclude_current=True)


def _skip(case_id: int) -> None:
    if not _bound(case_id, "S"):
        return
    labeling.release(ui.engine(), ui.actor(), case_id)
    st.session_state.setdefault("lab_skipped", []).append(case_id)
    load_next(exclude_current=True)


def buttons(case_id: int | None, *, labeled: bool) -> None:
    st.button(
        "Previous", key="lab_prev", shortcut=keys.PREVIOUS, on_click=_previous, args=(case_id,)
    )
    st.button(
        "Next case",
        key="lab_next",
        shortcut=keys.NEXT,
        on_click=_next,
        args=(case_id,),
        type="primary" if case_id is None else "secondary",
    )
    if case_id is not None and not labeled:
        st.button("Skip", key="lab_skip", shortcut=keys.SKIP, on_click=_skip, args=(case_id,))


@st.dialog("Keys of the Label page", width="large")
def keys_dialog(tax: Taxonomy) -> None:
    keyboard.key_list(
        [keyboard.Shown(k.shows, k.does) for k in keys.label_keys(tax)]
        + [keyboard.Shown(k, d) for k, d in keys.reason_lines(tax)]
    )


def _facet_label(name: str, tax: Taxonomy):  # type: ignore[no-untyped-def]
    def f(v: str) -> str:
        if v == ANY:
            return "(any)"
        section = {"slice": "slices", "split": "splits"}.get(name)
        return ui.plain(readable.term(tax, section, v) if section else v)

    return f


@st.cache_data(ttl=60, show_spinner=False, max_entries=8)
def _facets(url: str) -> queue.QueueFacets:
    """The filters' values (ready cases change rarely: read at most once a minute)."""
    return queue.queue_facets(ui.engine())


def filters(tax: Taxonomy) -> None:
    facets = _facets(database_url())
    values = {
        "family": facets.families,
        "slice": facets.slices,
        "split": facets.splits,
    }
    for name in FILTERS:
        if name == "family":  # tens of thousands: a field to type the key in
            ui.many_choice(
                st,
                FILTER_LABELS[name],
                values[name],
                f"lab_f_{name}",
                format_func=_facet_label(name, tax),
                known=lambda k: family_exists(ui.engine(), k),
            )
            continue
        st.selectbox(
            ui.plain(FILTER_LABELS[name]),
            [ANY, *values[name]],
            key=f"lab_f_{name}",
            format_func=_facet_label(name, tax),
        )
    st.caption(
        "The next case comes from the cases that match; the open one stays open. There is no "
        "category filter: it would tell you the author's suggested category before you label."
    )


def active_filters() -> int:
    """How many queue filters are set."""
    return sum(1 for f in FILTERS if st.session_state.get(f"lab_f_{f}"))


def bar(tax: Taxonomy) -> None:
    """Progress (mine and the team's, within the filters), filters and the keys button."""
    prog, left = cached.queue_progress(ui.engine(), ui.actor(), queue_filter())
    with st.container(horizontal=True, gap="small", vertical_alignment="center"):
        if prog.ready_cases == 0:
            progress = "No ready cases to label" + (
                " match the filters." if active_filters() else "."
            )
        else:
            mine = readable.count_rate(prog.mine, prog.ready_cases)
            team = readable.count_rate(prog.complete_cases, prog.ready_cases)
            progress = (
                f"My queue: {ui.plain(readable.number(left))} to label · "
                f"labeled by me: {ui.plain(mine)} · "
                f"team: {ui.plain(team)} have {prog.overlap:d} labels "
                f"({ui.plain(readable.number(prog.labels))} labels)"
            )
        st.caption(progress, width="stretch")
        active = active_filters()
        with st.popover(f"Queue filters ({active:d} on)" if active else "Queue filters"):
            filters(tax)
        if keyboard.help_button("label", shortcut=keys.HELP):
            keys_dialog(tax)
    keyboard.install()
