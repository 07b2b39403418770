"""Background work: the recent jobs the person may see (the kinds whose permission they hold;
an administrator sees every job and can cancel any), how the workbench runs them (inline,
workers, auto) and the workers alive; open one (?job=N) to watch it and see its result.

Everything a job says that can come from a file (its note, its result, its error) is shown
as text, in dataframe cells or through ``ui.plain``."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from pages import jobs_view, ui
from pages.traces import import_job
from review.core import readable
from review.core.identity import Actor
from review.jobs import queue, runner, trace_import
from review.jobs.queue import JobView

PAGE_SIZE = 25

MODES = {
    "inline": "Inline: a job runs in the page that starts it (one machine).",
    "workers": "Workers: every job waits for a workbench worker process to run it.",
    "auto": "Auto: jobs go to the workers while one is running, else run in the page that "
    "starts them.",
}


def _views(engine: Engine, actor: Actor) -> dict[str, tuple[jobs_view.Render, jobs_view.Render]]:
    """How each kind's result and failure are shown (the kinds without their own view show
    their result as data)."""
    return {
        trace_import.NAME: (import_job.result_view(engine, actor), import_job.error_view),
    }


def _plain_result(job: JobView) -> None:
    st.success(ui.plain(f"{job.title} finished."))
    if job.result:
        st.json(job.result, expanded=False)


def _one(engine: Engine, actor: Actor, job_id: int) -> None:
    if st.button("← All background work"):
        st.query_params.pop("job", None)
        st.rerun()
    st.subheader(f"Job {job_id:d}")
    kind = jobs_view.read_job(engine, actor, job_id)
    render, err = _views(engine, actor).get(
        kind.kind if kind else "", (_plain_result, jobs_view.default_error)
    )
    jobs_view.job_status(engine, actor, job_id, render, render_error=err)


def _workers(engine: Engine) -> None:
    with Session(engine) as s:
        seen = queue.workers(s)  # those with a heartbeat within queue.ALIVE
    alive = len(seen)
    with ui.reported("WORKBENCH_JOBS: "):
        setting = runner.mode_setting()
        st.caption(ui.plain(f"Mode (WORKBENCH_JOBS={setting}): {MODES[setting]}"))
        if setting == "auto":
            st.caption(
                "A job started now goes to the workers."
                if alive
                else "A job started now runs in the page that starts it."
            )
    if alive:
        st.caption(f"{readable.count(alive, 'worker')} running.")
    else:
        st.caption("No worker is running.")
    if seen:
        ui.table(
            pd.DataFrame(
                [
                    {
                        "worker": w.name,
                        "started": readable.when(w.started_at),
                        "last heartbeat": readable.when(w.seen_at),
                        "running job": w.job_id,
                    }
                    for w in seen
                ]
            )
        )


def _row(job: JobView, alive: int) -> dict[str, Any]:
    return {
        "open": ui.link("jobs", job=job.id),
        "job": job.id,
        "kind": job.title,
        "status": jobs_view.status_words(job, alive),
        "progress": job.fraction,
        "note": job.note,
        "started by": job.created_by,
        "created": readable.when(job.created_at),
        "finished": readable.when(job.finished_at),
        "worker": job.worker or "",
        "attempts": f"{job.attempts} of {job.max_attempts}",
    }


def _list(engine: Engine, actor: Actor) -> None:
    # read up to the page after the one asked for (and one more job, to know whether there
    # are more), so the picker reaches the next page
    reach = (ui.requested_page("jobs") + 1) * PAGE_SIZE
    with Session(engine) as s:
        jobs = queue.recent(s, actor, limit=reach + 1)
        alive = queue.workers_alive(s)
    page = ui.paginate(min(len(jobs), reach), "jobs", PAGE_SIZE, more=len(jobs) > reach)
    rows = jobs[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
    if not rows:
        st.info("No background work you may see yet.")
        return
    ui.table(
        pd.DataFrame([_row(j, alive) for j in rows]),
        pin=("open", "job"),
        height=ui.table_height(len(rows)),
        column_config={
            "open": st.column_config.LinkColumn("open", display_text="open"),
            "progress": st.column_config.ProgressColumn("progress", min_value=0.0, max_value=1.0),
        },
    )


def main() -> None:
    engine, actor = ui.engine(), ui.actor()
    st.title("Background work")
    job_id = ui.query_int("job")
    if job_id is not None:
        _one(engine, actor, job_id)
        return
    _workers(engine)
    _list(engine, actor)


if __name__ == "__main__":
    main()
