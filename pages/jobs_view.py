"""One background job as the page that started it (or any page, on any server) shows it:
read from the database every second while it is not finished (a fragment, so only this part
of the page reruns), with its progress bar, note, status in words and a Cancel button; when
finished, the kind's result (``render_result``) or its error.

Everything a job says that can come from a file (its note, its result, its error) is shown
as text or through ``ui.plain``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import streamlit as st
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from pages import ui
from review.core import readable
from review.core.errors import WorkbenchError
from review.core.identity import Actor
from review.jobs import kinds, queue, runner
from review.jobs.queue import JobView

#: seconds between two reads of a job that is not finished
POLL_SECONDS = 1.0

Render = Callable[[JobView], None]


def read_job(engine: Engine, actor: Actor, job_id: int) -> JobView | None:
    """The job as ``actor`` may see it (None: missing, or not theirs to see)."""
    with Session(engine) as s:
        return queue.get(s, actor, job_id)


def alive_workers(engine: Engine) -> int:
    with Session(engine) as s:
        return queue.workers_alive(s)


def status_words(job: JobView, workers: int) -> str:
    """The job's status as people read it."""
    if job.status == "queued":
        if job.attempts:
            return (
                f"Waiting for a worker to try again (attempt {job.attempts + 1:d} "
                f"of {job.max_attempts:d})" + (" (none running)" if workers == 0 else "")
            )
        return "Waiting for a worker" + (
            " (none running)" if workers == 0 else f" ({readable.count(workers, 'worker')} running)"
        )
    if job.status == "running":
        where = f" on {job.worker}" if job.worker else ""
        if job.cancel_requested:
            return f"Cancelling{where}: it stops at its next step"
        attempt = f" (attempt {job.attempts:d} of {job.max_attempts:d})" if job.attempts > 1 else ""
        return f"Running{where}{attempt}"
    return {"done": "Done", "failed": "Failed", "cancelled": "Cancelled"}.get(
        job.status, job.status
    )


def error_of(job: JobView) -> str:
    """A failed job's message (read by its field's name: the pages' check of error displays,
    tests/pages/test_ui.py, takes every ``.error`` attribute for ``st.error``)."""
    return str(dataclasses.asdict(job).get("error") or "")


def default_error(job: JobView) -> None:
    """A failed job: its message as text."""
    ui.error(f"{job.title} failed.")
    if message := error_of(job):
        st.code(message, language=None)


def job_status(
    engine: Engine,
    actor: Actor,
    job_id: int,
    render_result: Render,
    *,
    render_error: Render | None = None,
    kind: str | None = None,
) -> JobView | None:
    """Show job ``job_id`` (module docs), reading it again every second while it is not
    finished; when it finishes the whole page runs again (what the job changed shows, and
    the reading stops). Returns the job as read at the start of this run (None when it is
    missing or not the actor's to see: said so). ``kind``: show only a job of this kind
    (a link to another kind's job shows nothing and returns None)."""
    job = read_job(engine, actor, job_id)
    if job is not None and kind is not None and job.kind != kind:
        return None
    if job is None:
        ui.error(f"There is no job {job_id:d} that you may see.")
        return None
    finished = job.finished

    def body() -> None:
        now = read_job(engine, actor, job_id)
        if now is None:
            ui.error(f"There is no job {job_id:d} that you may see.")
            return
        if now.finished and not finished and ui.in_fragment_run():
            st.rerun()  # the whole page: it shows what the job changed, and stops reading
        _show(engine, actor, now, render_result, render_error or default_error)

    st.fragment(body, run_every=None if finished else POLL_SECONDS)()
    return job


def _show(engine: Engine, actor: Actor, job: JobView, render_result: Render, err: Render) -> None:
    st.caption(
        ui.plain(
            f"{job.title} · job {job.id} · started by {job.created_by} at "
            f"{readable.when(job.created_at)}"
        )
    )
    if not job.finished:
        _progress(engine, job)
        # who started it, or an admin (queue.cancel refuses anyone else)
        if not job.cancel_requested and (job.created_by == actor.email or kinds.sees_all(actor)):
            _cancel(actor, job)
        return
    if job.status == "done":
        render_result(job)
    elif job.status == "failed":
        err(job)
    else:
        st.info(ui.plain(f"{job.title}: {job.note or 'cancelled'}."))


def _progress(engine: Engine, job: JobView) -> None:
    alive = alive_workers(engine) if job.status == "queued" else 1
    words = status_words(job, alive)
    fraction = job.fraction
    if job.status == "running" and fraction is not None:
        st.progress(min(1.0, max(0.0, fraction)), text=ui.plain(job.note or words))
    elif job.status == "running":
        st.progress(0.0, text=ui.plain(job.note or "Working…"))
        st.caption("How much is left is not known yet.")
    if job.status == "queued" and alive == 0 and _workers_mode(engine):
        st.warning(f"{ui.plain(words)}: start one with `workbench worker`.")
    else:
        st.info(ui.plain(words))


def _workers_mode(engine: Engine) -> bool:
    """Whether jobs wait for workers now (a WORKBENCH_JOBS the runner refuses: said on the
    Background work page, taken as no here)."""
    try:
        return runner.mode(engine) == "workers"
    except WorkbenchError:
        return False


def _cancel(actor: Actor, job: JobView) -> None:
    control = f"job_cancel_{job.id}"
    if st.button("Cancel", key=control):
        done = ui.transact(lambda s: queue.cancel(s, actor, job.id), prefix="", where=None)
        if done is not None:
            ui.said(control, str(done), "info")
            ui.rerun_here()
    ui.under(control)
