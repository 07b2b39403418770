"""A new plan of a population a plan counted before takes those counts, brought up to the traces
now (unchanged, or the added traces counted alone and added), instead of counting every trace:
the same counts, allocation and fingerprint as a plan counted in full, on SQLite and
PostgreSQL. A filter leaving restricted traces out, another filter, other strata or traces
changed otherwise are counted in full."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from sqlalchemy import Engine, text

from review.audits import plans as audit_plans
from review.audits.plans import PlanSpec
from review.audits.population import PopulationFilter
from storage.db import read_session, write_session
from storage.models import SamplingPlan
from tests.helpers.actors import REVIEWER
from tests.helpers.audits import START, bulk_traces
from tests.helpers.transact import write

WINDOW = PopulationFilter(date_from=START.date(), date_to=START.date())


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many extra conditions each count had (1: only the traces added since)."""
    calls: list[int] = []
    real = audit_plans.count_strata

    def spy(s: Any, flt: Any, strata: Any, algorithm: int = 2, *extra: Any) -> Any:
        calls.append(len(extra))
        return real(s, flt, strata, algorithm, *extra)

    monkeypatch.setattr(audit_plans, "count_strata", spy)
    return calls


def _create(engine: Engine, name: str, **kw: Any) -> int:
    return write(
        engine, audit_plans.create_plan, REVIEWER, PlanSpec(name=name, total=30, seed=3, **kw)
    )


def _record(engine: Engine, pid: int) -> tuple[Any, ...]:
    """What the plan stored of its population (the time of the count aside)."""
    with read_session(engine) as s:
        plan = s.get(SamplingPlan, pid)
        assert plan is not None
        pop = dict(plan.population or {})
        pop.pop("counted_at")
        return pop, plan.fingerprint


def _counted_in_full(engine: Engine, pid: int, **kw: Any) -> tuple[Any, ...]:
    """The reference: the same plan created with every trace counted."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(audit_plans, "counted_before", lambda *_: None)
        ref = _create(engine, f"reference {pid}", **kw)
    return _record(engine, ref)


def test_a_population_counted_before_is_taken_and_brought_up_to_date(
    any_engine: Engine, counted: list[int]
) -> None:
    bulk_traces(any_engine, 300, restricted=lambda i: i % 7 == 0)
    by_decision = {"strata": ("decision",)}
    first = _create(any_engine, "first", **by_decision)
    assert counted == [0]
    again = _create(any_engine, "again", **by_decision)  # nothing changed: no count at all
    assert counted == [0]
    assert _record(any_engine, again) == _record(any_engine, first)
    bulk_traces(any_engine, 40, prefix="b", start=START + dt.timedelta(days=2))
    grown = _create(any_engine, "grown", **by_decision)
    assert counted == [0, 1]  # only the added traces
    assert _record(any_engine, grown) == _counted_in_full(any_engine, grown, **by_decision)
    # other strata, another filter, restricted traces left out: counted in full
    counted.clear()
    _create(any_engine, "no strata")
    _create(any_engine, "window", filter=WINDOW, **by_decision)
    cleared = PopulationFilter(include_restricted=False)
    no_restricted = _create(any_engine, "no restricted", filter=cleared, **by_decision)
    _create(any_engine, "no restricted again", filter=cleared, **by_decision)
    assert counted == [0, 0, 0, 0]
    assert _record(any_engine, no_restricted) == _counted_in_full(
        any_engine, no_restricted, filter=cleared, **by_decision
    )


def test_traces_deleted_since_count_every_trace(any_engine: Engine, counted: list[int]) -> None:
    bulk_traces(any_engine, 200)
    _create(any_engine, "first", strata=("decision",))
    with write_session(any_engine) as s:
        s.execute(text("DELETE FROM traces WHERE trace_id = 't-0000007'"))
    bulk_traces(any_engine, 3, prefix="d")
    counted.clear()
    pid = _create(any_engine, "after a delete", strata=("decision",))
    assert counted == [0]
    assert _record(any_engine, pid) == _counted_in_full(any_engine, pid, strata=("decision",))
