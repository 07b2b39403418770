"""Every kind of job says its result in words (``Kind.summarise``, read through
``kinds.summary_of``), on real finished jobs run by a worker: the two rebuilds, an
evaluation run, a trace import and a push of verdicts to a Phoenix that is down (the sync,
which needs a real Phoenix, is in tests/live/test_sync_job.py). The Background work page
shows those words through its escaper, never the stored JSON: a run or a source named in
Markdown and HTML reads as typed. A result a kind cannot read says so."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, insert
from streamlit.testing.v1 import AppTest

from review.admin import users
from review.core.identity import SYSTEM, Actor
from review.evaluation import execution
from review.jobs import catalog, evaluation_run, kinds, queue, runner, trace_import
from storage.db import make_engine, migrate, run_write
from storage.models import User
from tests.helpers.actors import REVIEWER, make_actor
from tests.helpers.audits import add_trace
from tests.helpers.jobs import job_row
from tests.helpers.pages import live_markdown, markdown_shown, no_exception, page_app, readable
from tests.helpers.paths import ROOT
from tests.helpers.pushing import CORRECT, UNSUPPORTED, closed_batch, phoenix_source, root_span
from tests.helpers.traces import import_traces, make_trace

JOBS = "pages/jobs_page.py"
HOSTILE = "**run** <b>x</b> ![i](https://evil.example/x.png) [l](javascript:alert(1))"
ADMIN = make_actor("admin", "adm@sum.example", clearance=True, uid=1)
REV = make_actor("reviewer", "r@sum.example", uid=2)
PAULA = make_actor("product_owner", "paula.kim@brightwave.example", uid=5)


def _finished(engine: Engine, job_id: int) -> dict[str, object]:
    assert runner.run_worker(engine, name="w", once=True) == 1
    job = job_row(engine, job_id)
    assert job.status == "done", job.error
    return dict(job.result)


def _opened(url: str, monkeypatch: pytest.MonkeyPatch, user: str, job_id: int) -> AppTest:
    """Job ``job_id`` opened on the Background work page: its words shown, no JSON, nothing
    live in the Markdown."""
    at = page_app(url, monkeypatch, JOBS, user, job=str(job_id)).run()
    no_exception(at)
    assert not at.get("json")
    assert {t: f for t in markdown_shown(at) if (f := live_markdown(t))} == {}
    return at


def _shown(at: AppTest) -> str:
    return "\n".join(readable(m) for m in at.markdown)


@pytest.fixture
def engine(any_engine: Engine) -> Iterator[Engine]:
    with any_engine.begin() as c:
        for a in (ADMIN, REV):
            role = next(iter(a.roles)).value
            c.execute(insert(User).values(id=a.id, email=a.email, name=a.name, roles=[role]))
    import_traces(any_engine, [make_trace(f"s-{i}", query=f"q {i}") for i in range(7)])
    yield any_engine


def test_the_rebuilds_say_what_they_did(engine: Engine) -> None:
    rollup = run_write(engine, lambda s: queue.submit(s, ADMIN, "rollup_rebuild", {}))
    result = _finished(engine, rollup)
    assert kinds.summary_of("rollup_rebuild", result) == (
        "The monitoring rollup was rebuilt from 7 traces."
    )
    flags = run_write(engine, lambda s: queue.submit(s, ADMIN, "restricted_rebuild", {}))
    result = _finished(engine, flags)
    assert kinds.summary_of("restricted_rebuild", result) == (
        f"7 traces checked: {result['restricted']:,} became restricted, "
        f"{result['opened']:,} became open."
    )


def test_an_evaluation_run_names_its_run_and_the_page_shows_it_as_typed(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    subset = execution.CaseSubset(keys=("CASE-001",))
    params = evaluation_run.params("Reference pipeline", HOSTILE, 1, False, subset)
    job_id = run_write(demo_engine, lambda s: queue.submit(s, PAULA, "evaluation_run", params))
    result = _finished(demo_engine, job_id)
    said = kinds.summary_of("evaluation_run", result)
    assert said == (
        f"Run {HOSTILE} stored as run {result['run_id']}: its figures are on the Runs page."
    )
    at = _opened(demo_url, monkeypatch, PAULA.email, job_id)
    assert "Evaluation run finished." in [readable(s) for s in at.success]
    assert said in _shown(at)
    listing = page_app(demo_url, monkeypatch, JOBS, PAULA.email).run()
    frame = next(d.value for d in listing.dataframe if "attempts" in d.value.columns)
    assert frame.loc[frame["job"] == job_id, "result"].tolist() == [said]


def _reviewer(engine: Engine, email: str) -> Actor:
    row = users.get_by_email(engine, email)
    assert row is not None
    return users.to_actor(row)


def test_a_trace_import_says_what_it_added(engine: Engine) -> None:
    sample = (ROOT / "tests" / "data" / "traces" / "canonical.jsonl").read_bytes()
    p = trace_import.params("canonical.jsonl", "auto", skip_bad=False, redact=True)
    job_id = run_write(
        engine, lambda s: queue.submit(s, REV, "trace_import", p, files={"traces": sample})
    )
    result = _finished(engine, job_id)
    said = kinds.summary_of("trace_import", result)
    assert said == result["summary"] and f"{result['added']}" in said
    # without the report's words (a result stored by an older release): its counts
    counts = {"added": result["added"], "rejected": 0}
    assert (
        kinds.summary_of("trace_import", counts) == f"{result['added']} traces added, 0 rejected."
    )


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_a_push_to_a_phoenix_that_is_down_says_what_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'push.db'}"
    eng = make_engine(url)
    migrate(eng)
    ravi = users.add_user(eng, SYSTEM, "ravi@sum.example", "Ravi", ["reviewer"], True)
    tids = [f"{i:032x}" for i in (1, 2, 3)]
    for tid in tids:
        add_trace(eng, tid)
    source = phoenix_source(eng, HOSTILE, _dead_url())
    root_span(eng, source, tids[0], "00000000000000a1")
    root_span(eng, source, tids[1], "00000000000000a2")
    pid = closed_batch(eng, [REVIEWER], [UNSUPPORTED, CORRECT], name="June batch")
    actor = _reviewer(eng, ravi.email)
    job_id = run_write(eng, lambda s: queue.submit(s, actor, "phoenix_push", {"plan_id": pid}))
    result = _finished(eng, job_id)
    said = kinds.summary_of("phoenix_push", result)
    assert said == result["summary"] and result["failed"]
    assert "unreachable" in said and "imported from a file" in said, said
    at = _opened(url, monkeypatch, ravi.email, job_id)
    assert "Verdicts sent to Phoenix finished." in [readable(s) for s in at.success]
    for paragraph in said.split("\n\n"):
        assert paragraph in _shown(at)
    eng.dispose()


def test_a_result_a_kind_cannot_read_says_so() -> None:
    assert set(catalog.kinds.REGISTRY) >= {
        "rollup_rebuild", "restricted_rebuild", "evaluation_run", "trace_import",
        "phoenix_sync", "phoenix_push",
    }  # fmt: skip
    for name in catalog.kinds.REGISTRY:
        assert kinds.summary_of(name, {}) == kinds.UNREADABLE
        assert kinds.summary_of(name, {"summary": 3, "traces": True}) == kinds.UNREADABLE
    assert kinds.summary_of("gone_kind", {"summary": "x"}).startswith(
        "A job of a kind this workbench no longer knows ('gone_kind')."
    )
    assert kinds.summary_of("phoenix_sync", {"spans_read": 9, "imported": 2, "error": "boom"}) == (
        "Read 9 spans; 2 traces imported. The sync stopped: boom"
    )
    assert kinds.summary_of("phoenix_push", {"pushed": 1, "failed": 0}) == (
        "1 annotation sent to Phoenix, 0 failed."
    )
