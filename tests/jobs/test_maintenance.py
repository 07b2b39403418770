"""The two rebuilds as jobs (restricted flags, monitoring rollup): run by a worker, their
progress and result on the job, only admins may start them, and a cancelled rollup rebuild
keeps the old rollup whole."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine, delete, insert, select

from review.cases import agreement_groups
from review.cli.main import main
from review.core.errors import PermissionDenied
from review.core.taxonomy import Taxonomy
from review.jobs import catalog, kinds, queue, runner
from review.jobs.context import Cancelled
from review.labels import labeling
from review.labels.agreement_rollup import reference_counts, stored_counts
from review.traces import rollup
from storage.db import read_session, run_write
from storage.models import CaseSlice, TraceRollup, User
from tests.helpers.actors import make_actor
from tests.helpers.jobs import job_row
from tests.helpers.labeling import add_cases, insert_labels_past_service
from tests.helpers.traces import import_traces, make_trace

ADMIN = make_actor("admin", "adm@test.example", clearance=True, uid=1)
REVIEWER = make_actor("reviewer", "rev@test.example", uid=2)


@pytest.fixture
def engine(any_engine: Engine) -> Iterator[Engine]:
    with any_engine.begin() as c:
        for a in (ADMIN, REVIEWER):
            c.execute(
                insert(User).values(
                    id=a.id, email=a.email, name=a.name, roles=[next(iter(a.roles)).value]
                )
            )
    import_traces(any_engine, [make_trace(f"m-{i}", query=f"q {i}") for i in range(7)])
    yield any_engine


def test_the_rollup_is_rebuilt_by_a_worker(engine: Engine) -> None:
    assert "rollup_rebuild" in catalog.kinds.REGISTRY
    run_write(engine, lambda s: s.execute(delete(TraceRollup)))
    assert rollup.stored_total(engine) == 0
    job_id = run_write(engine, lambda s: queue.submit(s, ADMIN, "rollup_rebuild", {}))
    assert runner.run_worker(engine, name="w", once=True) == 1
    job = job_row(engine, job_id)
    assert job.status == "done", job.error
    assert job.result["traces"] == 7 and job.done == job.total == 7
    assert rollup.stored_total(engine) == 7


def test_the_restricted_flags_are_rebuilt_by_a_worker(engine: Engine) -> None:
    job_id = run_write(engine, lambda s: queue.submit(s, ADMIN, "restricted_rebuild", {}))
    runner.run_worker(engine, name="w", once=True)
    job = job_row(engine, job_id)
    assert job.status == "done", job.error
    assert job.result["checked"] == 7
    assert job.result["summary"].startswith("7 traces checked")


@pytest.mark.parametrize("kind", ["rollup_rebuild", "restricted_rebuild", "agreement_rebuild"])
def test_only_admins_start_a_rebuild(engine: Engine, kind: str) -> None:
    with pytest.raises(PermissionDenied):
        run_write(engine, lambda s: queue.submit(s, REVIEWER, kind, {}))


def test_a_cancelled_rollup_rebuild_keeps_the_old_rollup(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    with read_session(engine) as s:
        before = sorted(map(tuple, s.execute(select(TraceRollup.__table__)).all()))

    calls: list[object] = []

    def cancelled_inside(*a: object, **k: object) -> None:
        calls.append(a)
        if len(calls) > 1:
            raise Cancelled("asked")

    # the report after the first batch, inside the rebuild's transaction, is where it lands
    monkeypatch.setattr("review.jobs.context.JobContext.progress", cancelled_inside)
    job_id = runner.start(engine, ADMIN, "rollup_rebuild", {})
    assert job_row(engine, job_id).status == "cancelled"
    assert len(calls) == 2
    with read_session(engine) as s:
        assert sorted(map(tuple, s.execute(select(TraceRollup.__table__)).all())) == before


def test_the_agreement_figures_are_rebuilt_by_a_worker_and_from_the_command_line(
    engine: Engine, tax: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Labels and a slice written past the services leave the stored agreement figures
    behind (the page counts from the labels); the admin's rebuild, as a job or as
    ``workbench labels rebuild-agreement``, brings them back in step."""
    case_ids = add_cases(engine, 4, tax, "AGR", grouped=True)
    insert_labels_past_service(
        engine, case_ids, random.Random(1), lambda r: labeling.LabelIn("answer"), "agr.example"
    )
    with read_session(engine) as s:
        assert stored_counts(s) != reference_counts(s).nonzero()
    job_id = run_write(engine, lambda s: queue.submit(s, ADMIN, "agreement_rebuild", {}))
    assert runner.run_worker(engine, name="w", once=True) == 1
    job = job_row(engine, job_id)
    assert job.status == "done", job.error
    n = labeling.labels_stamp(engine)[0]
    assert n > 0 and job.result["labels"] == n
    assert kinds.summary_of("agreement_rebuild", job.result) == (
        f"The agreement figures were rebuilt from {n} label{'s' if n != 1 else ''}."
    )
    with read_session(engine) as s:
        assert stored_counts(s) == reference_counts(s).nonzero()
        stamp, now = s.execute(select(*agreement_groups.stamp_columns())).one()
        assert stamp == now
    # written past the service again: the command line rebuilds as well
    run_write(engine, lambda s: s.execute(delete(CaseSlice)))
    with read_session(engine) as s:
        stamp, now = s.execute(select(*agreement_groups.stamp_columns())).one()
        assert stamp != now
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", engine.url.render_as_string(False))
    out = CliRunner().invoke(main, ["labels", "rebuild-agreement"])
    assert out.exit_code == 0, out.output
    assert f"agreement figures rebuilt from {n} labels" in out.output
    with read_session(engine) as s:
        assert stored_counts(s) == reference_counts(s).nonzero()
        stamp, now = s.execute(select(*agreement_groups.stamp_columns())).one()
        assert stamp == now
