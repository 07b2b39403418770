"""The Admin page's Maintenance tab: an admin rebuilds the restricted flags and the monitoring
rollup; each is a job, said under its button when it ran in the page, shown with its progress
and outcome under it when a worker runs it; nobody else has the tab."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine
from streamlit.testing.v1 import AppTest

from review.jobs import runner
from tests.helpers.pages import ADA, RAVI, app, no_exception, readable
from tests.helpers.placement import leaves, said_under

ADMIN = "pages/admin_page.py"
ROLLUP = "Rebuild the monitoring rollup"
FLAGS = "Rebuild the restricted flags"


def _open(url: str, monkeypatch: pytest.MonkeyPatch, who: str = ADA) -> AppTest:
    at = app(url, monkeypatch, who).run()
    at.switch_page(ADMIN).run()
    no_exception(at)
    return at


def _after(at: AppTest, label: str, n: int = 3) -> list[str]:
    """The texts of the ``n`` elements right after the button ``label``."""
    shown = list(leaves(at.main))
    i = next(i for i, e in enumerate(shown) if getattr(e, "label", None) == label)
    return [readable(e) for e in shown[i + 1 : i + 1 + n]]


def test_an_admin_rebuilds_both_in_the_page(
    trace_demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_JOBS", "inline")
    at = _open(trace_demo_url, monkeypatch)
    next(b for b in at.button if b.label == ROLLUP).click().run()
    no_exception(at)
    said = said_under(at, ROLLUP)
    assert len(said) == 1 and said[0].startswith("The monitoring rollup was rebuilt from "), said
    next(b for b in at.button if b.label == FLAGS).click().run()
    said = said_under(at, FLAGS)
    assert len(said) == 1 and " traces checked: " in said[0], said


def test_with_workers_the_rebuild_waits_then_says_its_outcome(
    trace_demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from storage.db import make_engine

    monkeypatch.setenv("WORKBENCH_JOBS", "workers")
    at = _open(trace_demo_url, monkeypatch)
    next(b for b in at.button if b.label == ROLLUP).click().run()
    no_exception(at)
    shown = _after(at, ROLLUP)
    assert shown[0].startswith("Rebuild of the monitoring rollup · job ")
    assert any(t.startswith("Waiting for a worker") for t in shown), shown
    engine: Engine = make_engine(trace_demo_url)
    assert runner.run_worker(engine, name="w", once=True) == 1
    at.run()
    no_exception(at)
    shown = _after(at, ROLLUP)
    assert shown[1].startswith("The monitoring rollup was rebuilt from "), shown
    engine.dispose()


def test_a_reviewer_has_no_maintenance(demo_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = _open(demo_url, monkeypatch, RAVI)
    assert not [b for b in at.button if b.label in (ROLLUP, FLAGS)]
