"""A Phoenix sync as a job, against a real Phoenix: a worker reads the project and the job
keeps what the sync did (spans read, the words the page shows, which its kind's summary
gives); run again, it reads nothing new. A source that is paused fails the job with the
reason."""

from __future__ import annotations

import pytest

from review.jobs import catalog, kinds, queue, runner
from review.traces.live import sources
from storage.db import make_engine, run_write
from tests.helpers.actors import make_actor
from tests.helpers.jobs import job_row
from tests.helpers.pages import ADA
from tests.live.phoenix_server import (
    PHOENIX_GROUP,
    PhoenixServer,
    phoenix,  # noqa: F401  (the module-scoped fixture)
    rag_traces,
    send_rag_traces,
    wait_for_spans,
)

pytestmark = [pytest.mark.timeout(1800), PHOENIX_GROUP]

ADMIN = make_actor("admin", ADA, clearance=True, uid=1)


def test_a_worker_syncs_a_phoenix_source(
    phoenix: PhoenixServer,  # noqa: F811
    trace_demo_url: str,
) -> None:
    assert "phoenix_sync" in catalog.kinds.REGISTRY
    project = "sync-job"
    sent = rag_traces(3, seed=5, tag="-syncjob")
    send_rag_traces(phoenix.traces_url, sent, project=project)
    wait_for_spans(phoenix.base_url, project, 3 * len(sent))
    engine = make_engine(trace_demo_url)
    src = sources.add_source(
        engine, ADMIN, kind="phoenix", name="Phoenix job", url=phoenix.base_url, project=project
    )
    first = run_write(
        engine, lambda s: queue.submit(s, ADMIN, "phoenix_sync", {"source_id": src.id})
    )
    assert runner.run_worker(engine, name="w", once=True) == 1
    job = job_row(engine, first)
    assert job.status == "done", job.error
    assert job.result["spans_read"] == 9 and job.result["error"] is None
    assert job.result["summary"].startswith("Read 9 spans (9 new) in 1 page")
    # the Background work page says it in the sync's own words
    assert kinds.summary_of("phoenix_sync", job.result) == job.result["summary"]
    assert sources.get_source(engine, src.id).spans_read == 9

    again = run_write(
        engine, lambda s: queue.submit(s, ADMIN, "phoenix_sync", {"source_id": src.id})
    )
    runner.run_worker(engine, name="w", once=True)
    # the overlap window reads the newest spans again; none of them is new
    assert " (0 new) " in job_row(engine, again).result["summary"]

    sources.set_status(engine, ADMIN, src.id, "paused")
    paused = run_write(
        engine, lambda s: queue.submit(s, ADMIN, "phoenix_sync", {"source_id": src.id})
    )
    runner.run_worker(engine, name="w", once=True)
    job = job_row(engine, paused)
    assert job.status == "failed" and job.error is not None and "paused" in job.error
    engine.dispose()
