"""Every kind of job, given parameters that are missing, unknown, mistyped or out of range
(Hypothesis): the job ends failed with an error that names what is wrong, never done on a
guess, never an internal error, and the worker goes on to the next job."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, insert

from review.jobs import queue, runner
from review.jobs.kinds import REGISTRY
from storage.db import make_engine, migrate, read_session, run_write
from storage.models import Job, User
from tests.helpers.actors import make_actor

ADMIN = make_actor("admin", "adm@test.example", clearance=True, uid=1)
NAMES = sorted(
    {"file_name", "fmt", "skip_bad", "redact", "pipeline", "name", "repeats", "perturb"}
    | {"subset", "source_id", "max_pages", "plan_id", "n", "kind"}
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**40), max_value=2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
PARAMS = st.dictionaries(st.sampled_from(NAMES) | st.text(max_size=8), VALUES, max_size=6)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    path: Path = tmp_path_factory.mktemp("fuzzjobs") / "jobs.db"
    eng = make_engine(f"sqlite:///{path}")
    migrate(eng)
    with eng.begin() as c:
        c.execute(insert(User).values(id=1, email=ADMIN.email, name="Adm", roles=["admin"]))
    yield eng
    eng.dispose()


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(kind=st.sampled_from(sorted(REGISTRY)), params=PARAMS)
def test_a_job_with_bad_parameters_fails_with_why(
    engine: Engine, kind: str, params: dict[str, object]
) -> None:
    assert {"trace_import", "evaluation_run", "phoenix_sync"} <= set(REGISTRY)
    job_id = run_write(engine, lambda s: queue.submit(s, ADMIN, kind, params))
    assert runner.run_one(engine, "fuzz", job_id=job_id) == job_id
    with read_session(engine) as s:
        job = s.get(Job, job_id)
        assert job is not None
    assert job.status in ("done", "failed"), (job.status, job.error)
    if job.status == "failed":
        assert job.error and not job.error.startswith("internal error"), (kind, params, job.error)
    # the worker is not stuck on it: nothing is left running
    assert job.lease_until is None
