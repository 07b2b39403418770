"""Background work: the recent jobs the person may see (the kinds whose permission they hold;
an administrator sees every job and can cancel any), a page at a time from the newest
(Older / Newer: keyset pages, ``?before=N`` / ``?after=N``), how the workbench runs them (inline,
workers, auto) and the workers alive; open one (?job=N) to watch it and see its result.

Everything a job says that can come from a file (its note, its result, its error) is shown
as text, in dataframe cells or through ``ui.plain``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from pages import jobs_view, ui
from pages.traces import import_job
from review.core import readable
from review.core.identity import Actor
from review.jobs import kinds, queue, runner, trace_import
from review.jobs.queue import JobView

PAGE_SIZE = 25

MODES = {
    "inline": "Inline: a job runs in the page that starts it (one machine).",
    "workers": "Workers: every job waits for a workbench worker process to run it.",
    "auto": "Auto: jobs go to the workers while one is running, else run in the page that "
    "starts them.",
}


def _views(engine: Engine, actor: Actor) -> dict[str, tuple[jobs_view.Render, jobs_view.Render]]:
    """How each kind's result and failure are shown (the kinds without a view of their own
    show their result in the words of the kind's ``summarise``)."""
    return {
        trace_import.NAME: (import_job.result_view(engine, actor), import_job.error_view),
    }


def _summary_result(job: JobView) -> None:
    """A finished job's result in its kind's words, through the one escaper (the words can
    quote a file, a name or a remote server's message), never as the stored JSON."""
    st.success(ui.plain(f"{job.title} finished."))
    for paragraph in kinds.summary_of(job.kind, job.result).split("\n\n"):
        st.markdown(ui.plain(paragraph))


def _one(engine: Engine, actor: Actor, job_id: int) -> None:
    if st.button("← All background work"):
        st.query_params.pop("job", None)
        st.rerun()
    st.subheader(f"Job {job_id:d}")
    kind = jobs_view.read_job(engine, actor, job_id)
    render, err = _views(engine, actor).get(
        kind.kind if kind else "", (_summary_result, jobs_view.default_error)
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
        "result": kinds.summary_of(job.kind, job.result) if job.status == "done" else "",
        "started by": job.created_by,
        "created": readable.when(job.created_at),
        "finished": readable.when(job.finished_at),
        "worker": job.worker or "",
        "attempts": f"{job.attempts} of {job.max_attempts}",
    }


@dataclass(frozen=True)
class _Page:
    """One page of the list: its jobs, newest first, and whether newer or older ones exist."""

    rows: list[JobView]
    newer: bool
    older: bool


def _page(s: Session, actor: Actor) -> _Page:
    """The page the address asks for: the newest jobs; ``?before=N`` the ones older than job
    N; ``?after=N`` the ones newer than job N (keyset pages: each costs the same however
    deep it lies, and a job deleted meanwhile moves no other)."""
    before, after = ui.query_int("before"), ui.query_int("after")
    if after is not None and before is None:
        jobs = queue.recent(s, actor, after=after, limit=PAGE_SIZE + 1)
        if len(jobs) > PAGE_SIZE:
            rows = jobs[1:]  # the newest of them is the next page's
            older = bool(queue.recent(s, actor, before=rows[-1].id, limit=1))
            return _Page(rows, newer=True, older=older)
        st.query_params.pop("after", None)  # they reach the newest job: the first page
        before = None
    jobs = queue.recent(s, actor, before=before, limit=PAGE_SIZE + 1)
    rows = jobs[:PAGE_SIZE]
    newer = before is not None and bool(
        queue.recent(s, actor, after=rows[0].id if rows else before - 1, limit=1)
    )
    return _Page(rows, newer=newer, older=len(jobs) > PAGE_SIZE)


def _go(**where: int) -> None:
    """Open the page of the list ``where`` says (``before`` or ``after`` a job)."""
    for key in ("before", "after"):
        st.query_params.pop(key, None)
    for key, value in where.items():
        st.query_params[key] = str(value)


def _list(engine: Engine, actor: Actor) -> None:
    with Session(engine) as s:
        page = _page(s, actor)
        alive = queue.workers_alive(s)
    rows = page.rows
    if not rows and not page.newer:
        st.info("No background work you may see yet.")
        return
    if rows:
        st.caption(
            f"Jobs {rows[0].id:,} to {rows[-1].id:,}, newest first"
            + (" (the newest)" if not page.newer else "")
            + (" · there are no older ones" if not page.older else "")
        )
        ui.table(
            pd.DataFrame([_row(j, alive) for j in rows]),
            pin=("open", "job"),
            height=ui.table_height(len(rows)),
            column_config={
                "open": st.column_config.LinkColumn("open", display_text="open"),
                "progress": st.column_config.ProgressColumn(
                    "progress", min_value=0.0, max_value=1.0
                ),
            },
        )
    else:
        st.info("No older background work you may see.")
    # the page the person read is where they step from (a callback: the ids as drawn, not
    # as read again in the run the click starts, when jobs may have come or gone)
    left, right = st.columns(2)
    left.button(
        "← Newer",
        key="jobs_newer",
        disabled=not page.newer,
        width="stretch",
        on_click=_go,
        kwargs={"after": rows[0].id} if rows else {},
    )
    right.button(
        "Older →",
        key="jobs_older",
        disabled=not page.older,
        width="stretch",
        on_click=_go,
        kwargs={"before": rows[-1].id} if rows else {},
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
