"""The "Live sources" expander of the Traces page: the sources traces arrive from while the
workbench runs (a Phoenix project it syncs, the OTLP/HTTP receiver), each with its status,
last sync, lag, counts and last error, and how to connect it; and the receiver started beside
the app (serve.py), listening or stopped with why. Everyone who may see traces
reads it; admins (``Permission.manage_sources``) add a source, pause or resume one and remove
one after a confirmation that says how many waiting spans it drops. What a control did is said
under it. The words are :mod:`review.traces.live.display`'s."""

from __future__ import annotations

import datetime as dt

import streamlit as st
from sqlalchemy import Engine

from pages import job_controls, ui
from pages.traces.trace_list import P
from review.core.identity import Actor, Permission
from review.traces.live import beside, display, sources
from review.traces.live.beside import BesideStatus
from review.traces.live.sources import SourceView

K = f"{P}src_"  # session-state prefix of the panel
ADD = f"{K}add"  # the add form's key (its messages are said under it)
FIELDS = ("kind", "name", "url", "project", "secret", "grace")

SECRET_CAPTION = (
    "Secret name: the name of an environment variable or of a key in .streamlit/secrets.toml "
    "that holds Phoenix's API key or the receiver's bearer token. The secret itself is read "
    "from there when a sync or the receiver runs; it is never stored or shown here."
)


def _details(engine: Engine, actor: Actor, rows: list[SourceView], now: dt.datetime) -> None:
    """One source picked: how to connect it, its last error in full, and (admins) pause,
    resume and remove."""
    by_id = {s.id: s for s in rows}
    if st.session_state.get(f"{K}pick") not in by_id:
        st.session_state.pop(f"{K}pick", None)  # removed meanwhile: the first one instead
    picked = st.selectbox(
        "Source",
        list(by_id),
        format_func=lambda i: display.source_label(by_id[i]),
        key=f"{K}pick",
    )
    src = by_id[int(picked)]
    how = display.connect(src)
    st.caption(ui.plain(how.intro))
    st.code(how.commands, language="bash")
    if how.warning:
        st.warning(ui.plain(how.warning))
    if src.secret_name:
        st.caption(
            ui.plain(
                f"Secret name: {src.secret_name} (read from the environment or "
                ".streamlit/secrets.toml when it runs; never stored here)."
            )
        )
    st.caption(
        ui.plain(
            f"Grace period: {display.duration(dt.timedelta(seconds=src.grace_seconds))} "
            f"after a trace's newest span · added {display.ago(src.created_at, now)}"
        )
    )
    answered = display.requests_text(src.requests, now)
    if answered is not None:
        st.caption(ui.plain(f"Requests: {answered}."))
    if src.last_error:
        st.caption(ui.plain(f"Last error, {display.ago(src.last_error_at, now, 'at a time')}"))
        st.code(src.last_error, language=None)
    if actor.can(Permission.manage_sources):
        if src.kind == "phoenix":
            _sync_control(engine, actor, src)
        _status_control(engine, actor, src)
        _remove_control(engine, actor, src)


def _sync_control(engine: Engine, actor: Actor, src: SourceView) -> None:
    """Read the Phoenix project now (at most display.SYNC_NOW_PAGES pages) and say what the
    sync did under the button."""
    pressed = st.button(
        "Sync now",
        key=f"{K}sync",
        disabled=src.status != "active",
        help="Reads the new spans of this Phoenix project and imports the complete traces.",
    )
    here = ui.under(f"{K}sync")
    if pressed:
        with ui.reported("Nothing was read. ", where=here), st.spinner("Reading Phoenix…"):
            params = {"source_id": src.id, "max_pages": display.SYNC_NOW_PAGES}
            job_controls.start(
                engine, actor, f"{K}sync", "phoenix_sync", params, job_controls.result_text
            )
            st.rerun()
    job_controls.watch(
        engine, actor, f"{K}sync", "phoenix_sync", job_controls.result_text, where=here
    )


def _status_control(engine: Engine, actor: Actor, src: SourceView) -> None:
    paused = src.status == "paused"
    pressed = st.button("Resume" if paused else "Pause", key=f"{K}status")
    here = ui.under(f"{K}status")
    if pressed:
        with ui.reported("Nothing was changed. ", where=here):
            done = sources.set_status(engine, actor, src.id, "active" if paused else "paused")
            ui.said(f"{K}status", display.paused_text(done))
            st.rerun()


def _remove_control(engine: Engine, actor: Actor, src: SourceView) -> None:
    sure = st.checkbox(
        ui.plain(f"Remove this source? {display.removal_warning(src)}"),
        key=f"{K}sure_{src.id}",
    )
    pressed = st.button("Remove source", disabled=not sure, key=f"{K}remove")
    here = ui.under(f"{K}remove")
    if pressed:
        with ui.reported("Nothing was removed. ", where=here):
            dropped = sources.remove_source(engine, actor, src.id)
            st.session_state.pop(f"{K}sure_{src.id}", None)
            st.session_state.pop(f"{K}pick", None)
            ui.said(f"{K}remove", display.removed_text(src.name, dropped))
            st.rerun()


def _add_form(engine: Engine, actor: Actor) -> None:
    st.markdown("**Add a source**")
    with st.form(ADD):
        c1, c2 = st.columns(2)
        kind = c1.selectbox(
            "Kind",
            list(sources.KINDS),
            format_func=display.KIND_LABELS.__getitem__,
            key=f"{K}kind",
        )
        name = c2.text_input("Name", max_chars=200, key=f"{K}name")
        url = c1.text_input(
            "URL (Phoenix: its address; receiver: where exporters reach it, optional)",
            max_chars=500,
            key=f"{K}url",
        )
        project = c2.text_input("Project (Phoenix only)", max_chars=200, key=f"{K}project")
        secret = c1.text_input("Secret name (optional)", max_chars=200, key=f"{K}secret")
        grace = c2.number_input(
            "Grace period (seconds)",
            min_value=0,
            max_value=int(sources.MAX_GRACE_SECONDS),
            value=int(sources.DEFAULT_GRACE_SECONDS),
            step=5,
            key=f"{K}grace",
            help="A trace is imported once its root span arrived and no span of it came for "
            "this long.",
        )
        st.caption(ui.plain(SECRET_CAPTION))
        add = st.form_submit_button("Add source", type="primary")
    here = ui.under(ADD)  # what the form did, right under it
    if add:
        with ui.reported("Nothing was added. ", where=here):
            src = sources.add_source(
                engine,
                actor,
                kind=str(kind),
                name=name,
                url=url,
                project=project,
                secret_name=secret or None,
                grace_seconds=float(grace),
            )
            for field in FIELDS:
                st.session_state.pop(f"{K}{field}", None)
            st.session_state[f"{K}pick"] = src.id
            ui.said(ADD, display.added_text(src))
            st.rerun()


def _beside(status: BesideStatus, now: dt.datetime) -> None:
    """The receiver started beside the app (serve.py): where it listens, or that it stopped,
    how, and its last lines."""
    text, kind = display.beside_text(status, now)
    if kind == "error":
        ui.error(text)
        if status.last_lines:
            st.code("\n".join(status.last_lines), language=None)
    elif kind == "warning":
        st.warning(ui.plain(text))
    else:
        st.info(ui.plain(text))


def sources_panel(engine: Engine, actor: Actor) -> None:
    """Shown to everyone who may see traces; the controls to admins only."""
    rows = sources.list_sources(engine)
    now = dt.datetime.now(dt.UTC)
    started = beside.current()
    status = started.status() if started is not None else None
    down = status is not None and status.state == "restarting"
    with st.expander(ui.plain(display.panel_label(rows, down)), key=f"{K}panel"):
        st.caption(ui.plain(display.panel_note(rows)))
        if status is not None:
            _beside(status, now)
        if rows:
            wide = st.column_config.TextColumn(width="large")
            ui.table(
                display.sources_frame(rows, now),
                pin=True,
                column_config={"Lag": wide, "Last error": wide, "Requests": wide},
            )
            _details(engine, actor, rows, now)
        else:
            ui.under(f"{K}remove")  # a removal of the last source is said where it was
        if actor.can(Permission.manage_sources):
            _add_form(engine, actor)
