"""Controls whose work is a job, with workers in charge (WORKBENCH_JOBS=workers): pressing
"Run on the chosen cases" queues an evaluation run and says, under the button, that it waits
for a worker; a worker runs it; the page (here and in a second session, as on another server)
says the run was stored, under the button and on the Background work page. Inline, a refused
run is said under the button as before ("a run named ... already exists")."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, func, select
from streamlit.testing.v1 import AppTest

from review.jobs import runner
from storage.db import read_session
from storage.models import EvalRun, Job
from tests.helpers.pages import INES, app, no_exception, readable
from tests.helpers.placement import leaves, said_under

RUNS = "pages/runs_page.py"
BUTTON = "Run on the chosen cases"


def _execute(at: AppTest, name: str) -> None:
    at.text_input(key="runs_exec_name").input(name)
    at.selectbox(key="runs_subset_split").set_value("test")
    next(c for c in at.checkbox if c.label.startswith("Also re-run")).uncheck()
    next(b for b in at.button if b.label == BUTTON).click().run()
    no_exception(at)


def right_under(at: AppTest, label: str, n: int = 3) -> list[str]:
    """The texts of the ``n`` elements right after the button ``label`` (the job's view)."""
    shown = list(leaves(at.main))
    i = next(i for i, e in enumerate(shown) if getattr(e, "label", None) == label)
    return [readable(e) for e in shown[i + 1 : i + 1 + n]]


def test_a_queued_run_is_said_under_its_button_until_a_worker_stored_it(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_JOBS", "workers")
    at = app(demo_url, monkeypatch, INES).run()
    at.switch_page(RUNS).run()
    _execute(at, "queued run")
    waiting = right_under(at, BUTTON)
    assert waiting[0].startswith("Evaluation run · job "), waiting
    assert any(t.startswith("Waiting for a worker") for t in waiting), waiting
    with read_session(demo_engine) as s:
        assert s.scalar(select(func.count()).where(EvalRun.name == "queued run")) == 0
        job = s.scalar(select(Job).where(Job.kind == "evaluation_run"))
        assert job is not None and job.status == "queued"
    assert runner.run_worker(demo_engine, name="w", once=True) == 1
    at.run()
    no_exception(at)
    done = right_under(at, BUTTON, 2)
    assert done[0].startswith("Evaluation run · job ") and done[1] == "Run 'queued run' stored.", (
        done
    )
    with read_session(demo_engine) as s:
        assert s.scalar(select(func.count()).where(EvalRun.name == "queued run")) == 1

    # another session (another server) sees it on the Background work page
    other = app(demo_url, monkeypatch, INES, job=str(job.id)).run()
    other.switch_page("pages/jobs_page.py").run()
    no_exception(other)
    assert any("Evaluation run" in c.value for c in other.caption), [c.value for c in other.caption]


def test_a_refused_run_is_said_under_the_button_inline(
    demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_JOBS", "inline")
    at = app(demo_url, monkeypatch, INES).run()
    at.switch_page(RUNS).run()
    _execute(at, "twice")
    assert "Run 'twice' stored." in said_under(at, BUTTON)
    _execute(at, "twice")
    refused = said_under(at, BUTTON)
    assert any("already exists" in t for t in refused), refused
