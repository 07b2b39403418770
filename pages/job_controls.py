"""A button whose work is a background job (a sync, a push, an evaluation run, a rebuild):
pressing it starts the job (:func:`review.jobs.runner.start`), and what the job did is said
right under the button, as for any other control.

Where jobs run in the page (one machine, no worker: ``WORKBENCH_JOBS`` inline or auto), the
press runs it to its end and its outcome is said under the button, as before jobs existed; a
job that failed is shown as the control's refusal ("Nothing was read. " and why). Where workers
run them, the job is queued: its progress, a Cancel button and, when it ends, its outcome are
shown under the button (:func:`pages.jobs_view.job_status`) on whatever server the person's
next request reaches, and from the Background work page by anyone who may see it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from pages.jobs_view import error_of, job_status, read_job
from review.core.errors import InputError
from review.core.identity import Actor
from review.jobs import runner
from review.jobs.queue import JobView

#: what a finished job says: its text and its kind (success, warning, info)
Summary = Callable[[JobView], tuple[str, str]]


def _key(control: str) -> str:
    return f"{control}__job"


def start(
    engine: Engine,
    actor: Actor,
    control: str,
    kind: str,
    params: Mapping[str, Any],
    summary: Summary,
) -> None:
    """Start a job of ``kind`` for a press of ``control``; call it inside ``ui.reported`` (a
    refusal, or a job that failed while it ran here, is raised as an InputError for it), then
    ``st.rerun()``."""
    st.session_state.pop(_key(control), None)
    job_id = runner.start(engine, actor, kind, params)
    job = read_job(engine, actor, job_id)
    if job is None:
        raise InputError(f"job {job_id} cannot be read back")
    if job.status == "failed":
        raise InputError(error_of(job) or "the job failed")
    if job.status == "done":
        text, how = summary(job)
        ui.said(control, text, how)
    elif job.status == "cancelled":
        ui.said(control, f"{job.title} was cancelled.", "info")
    else:
        st.session_state[_key(control)] = job_id


def watch(
    engine: Engine, actor: Actor, control: str, kind: str, summary: Summary, where: Any = None
) -> None:
    """Under ``control``: the job its last press queued, while it runs and once it ended."""
    job_id = st.session_state.get(_key(control))
    if not isinstance(job_id, int):
        return

    def result(job: JobView) -> None:
        text, how = summary(job)
        getattr(st, how if how in ("success", "warning", "info") else "info")(ui.plain(text))

    with where or st.container():
        job_status(engine, actor, job_id, result, kind=kind)


def result_text(job: JobView) -> tuple[str, str]:
    """The outcome of a kind whose result carries ``summary`` (and ``kind``)."""
    text = str(job.result.get("summary") or f"{job.title} finished.")
    how = str(job.result.get("kind") or "success")
    return text, how
