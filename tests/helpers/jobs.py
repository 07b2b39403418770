"""A job's row as the tests read it back."""

from __future__ import annotations

from sqlalchemy import Engine

from storage.db import read_session
from storage.models import Job


def job_row(engine: Engine, job_id: int) -> Job:
    """Job ``job_id`` as stored now (it must exist)."""
    with read_session(engine) as s:
        job = s.get(Job, job_id)
        assert job is not None, f"no job {job_id}"
        return job
