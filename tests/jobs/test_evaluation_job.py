"""An evaluation run as a job on the demo database: a worker runs the bundled pipeline on a
subset, the run is stored once with its job in its configuration, a take-over after the run
was stored finds it instead of storing a second one, and a bad pipeline name fails clearly."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, func, select, update

from review.evaluation import execution
from review.jobs import catalog, evaluation_run, queue, runner
from storage.db import read_session, run_write
from storage.models import Case, CaseFamily, EvalRun, Job
from tests.helpers.actors import make_actor
from tests.helpers.jobs import job_row

PAULA = make_actor("product_owner", "paula.kim@brightwave.example", uid=5)


def _subset(engine: Engine) -> execution.CaseSubset:
    with read_session(engine) as s:
        family = s.scalar(
            select(func.min(CaseFamily.key)).where(
                CaseFamily.id.in_(select(Case.family_id).where(Case.status == "ready"))
            )
        )
    return execution.CaseSubset(family=family)


def test_a_worker_stores_the_run_once(demo_engine: Engine) -> None:
    assert "evaluation_run" in catalog.kinds.REGISTRY
    subset = _subset(demo_engine)
    n = execution.subset_size(demo_engine, subset)
    assert n > 0
    params = evaluation_run.params("Reference pipeline", "job run", 2, False, subset)
    job_id = run_write(demo_engine, lambda s: queue.submit(s, PAULA, "evaluation_run", params))
    assert runner.run_worker(demo_engine, name="w", once=True) == 1
    job = job_row(demo_engine, job_id)
    assert job.status == "done", job.error
    assert job.done == job.total == 2 * n
    with read_session(demo_engine) as s:
        run = s.scalar(select(EvalRun).where(EvalRun.name == "job run"))
        assert run is not None and run.config["job"] == job_id
        assert run.config["subset"] == {"family": subset.family}
    assert job.result["run_id"] == run.id

    # as if its worker died after storing the run: the next worker finds it
    with demo_engine.begin() as c:
        c.execute(
            update(Job)
            .where(Job.id == job_id)
            .values(status="running", lease_until=job.created_at, worker="gone")
        )
    assert runner.run_worker(demo_engine, name="heir", once=True) == 1
    again = job_row(demo_engine, job_id)
    assert again.status == "done" and again.attempts == 2
    assert again.result["run_id"] == run.id
    with read_session(demo_engine) as s:
        assert s.scalar(select(func.count()).where(EvalRun.name == "job run")) == 1


def test_an_unknown_pipeline_is_refused(demo_engine: Engine) -> None:
    with pytest.raises(Exception, match="unknown pipeline"):
        evaluation_run.params("Mine", "x", 1, False, execution.CaseSubset())
    bad = {"pipeline": "Mine", "name": "x", "repeats": 1, "perturb": False, "subset": {}}
    job_id = run_write(demo_engine, lambda s: queue.submit(s, PAULA, "evaluation_run", bad))
    runner.run_worker(demo_engine, name="w", once=True)
    job = job_row(demo_engine, job_id)
    assert job.status == "failed" and job.error == "unknown pipeline 'Mine'"
