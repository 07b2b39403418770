"""A plan's population check after traces were only added counts just the new traces and adds
them to the stored counts: the same check (counts, id sums, rank sums, fingerprint) as a count
of every trace, on SQLite and PostgreSQL; a purge, a deleted trace, a new stratum or a stamp
stored before purges were part of it count every trace again."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from sqlalchemy import Engine, event, insert, inspect, text, update
from sqlalchemy.orm import Session

from review.audits import plans as audit_plans
from review.audits import popcount
from review.audits.plans import PlanSpec
from review.audits.population import PopulationFilter
from review.traces import retention
from storage.db import read_session, run_write, write_session
from storage.models import SamplingPlan, Trace
from tests.helpers.actors import REVIEWER, make_actor
from tests.helpers.transact import write

ADMIN = make_actor("admin", clearance=True, uid=1)
START = dt.datetime(2025, 6, 1, tzinfo=dt.UTC)


def _traces(
    engine: Engine, n: int, prefix: str, start: dt.datetime = START, tier: str = ""
) -> None:
    rows = [
        {
            "trace_id": f"{prefix}-{i:05d}",
            "at": start + dt.timedelta(minutes=i),
            "query": f"q {i}",
            "decision": ("answer", "abstain", "clarify", "answer", "escalate")[i % 5],
            "identity_scopes": ["public"],
            "citations": [],
            "versions": {},
            "attributes": {"customer_tier": tier or ("team", "business")[i % 2]},
            "customer_tier": tier or ("team", "business")[i % 2],
            "restricted": False,
            "redactions": {},
        }
        for i in range(n)
    ]

    def work(s: Session) -> None:
        s.execute(insert(Trace), rows)

    run_write(engine, work)


def _full(engine: Engine, plan_id: int) -> audit_plans.PopulationCheck:
    """The reference: every trace counted again."""
    with read_session(engine) as s:
        plan = s.get(SamplingPlan, plan_id)
        assert plan is not None
        spec = audit_plans.spec_of(plan)
        current = audit_plans.count_strata(
            s, spec.filter, spec.strata, audit_plans.sampling_algorithm(plan)
        )
        return audit_plans.compare_counts(audit_plans.stored_counts(plan), current)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many extra conditions each count of the check had (1: only the new traces)."""
    calls: list[int] = []
    real = audit_plans.count_strata

    def spy(s: Session, flt: Any, strata: Any, algorithm: int = 2, *extra: Any) -> Any:
        calls.append(len(extra))
        return real(s, flt, strata, algorithm, *extra)

    monkeypatch.setattr(audit_plans, "count_strata", spy)
    return calls


def _plans(engine: Engine, counted: list[int], tag: str = "") -> list[int]:
    """Four plans (counted as they are made; the spy's record starts after them)."""
    window = PopulationFilter(date_from=START.date(), date_to=START.date())  # June 1 only
    pids = [
        write(
            engine,
            audit_plans.create_plan,
            REVIEWER,
            PlanSpec(name=n + tag, total=20, seed=5, **kw),
        )
        for n, kw in (
            ("by decision", {"strata": ("decision",)}),
            ("by decision and tier", {"strata": ("decision", "attr.customer_tier")}),
            ("in a window", {"strata": ("decision",), "filter": window}),
            ("no strata", {"strata": ()}),
        )
    ]
    counted.clear()
    return pids


def test_added_traces_are_counted_alone_and_give_the_full_check(
    any_engine: Engine, counted: list[int]
) -> None:
    _traces(any_engine, 400, "a")
    pids = _plans(any_engine, counted)
    for pid in pids:  # nothing changed: no count at all
        assert not audit_plans.check_population(any_engine, pid).changed
    assert counted == []
    _traces(any_engine, 150, "b", START + dt.timedelta(hours=30))
    for pid in pids:
        got = audit_plans.check_population(any_engine, pid)
        assert got == _full(any_engine, pid)
    # every check counted only the new traces (the reference counts every trace: 0 extra)
    assert counted == [1, 0] * len(pids)
    assert audit_plans.check_population(any_engine, pids[0]).changed  # and it shows
    # the new traces fall outside the window plan's days: its population is the one counted
    assert not audit_plans.check_population(any_engine, pids[2]).changed


def test_a_new_stratum_a_purge_or_a_deleted_trace_count_every_trace(
    any_engine: Engine, counted: list[int]
) -> None:
    _traces(any_engine, 300, "a")
    pid = _plans(any_engine, counted, "1")[1]  # by decision and tier
    _traces(any_engine, 10, "n", tier="enterprise")  # a tier the plan never saw
    assert audit_plans.check_population(any_engine, pid) == _full(any_engine, pid)
    assert counted[-3:] == [1, 0, 0]  # tried the new traces, found a new stratum, counted all
    # a purge ran since the count (the stamp's purge counter moved), even if it deleted nothing
    pid = _plans(any_engine, counted, "2")[0]
    retention.purge_older_than(any_engine, ADMIN, retention.MAX_RETENTION_DAYS)
    _traces(any_engine, 5, "p")
    counted.clear()
    assert audit_plans.check_population(any_engine, pid) == _full(any_engine, pid)
    assert counted == [0, 0]
    # a trace deleted past the app, another added: the rows added are not the new ids
    pid = _plans(any_engine, counted, "3")[0]
    with write_session(any_engine) as s:
        s.execute(text("DELETE FROM traces WHERE trace_id = 'a-00007'"))
    _traces(any_engine, 3, "d")
    counted.clear()
    got = audit_plans.check_population(any_engine, pid)
    assert got == _full(any_engine, pid) and got.changed
    assert counted == [0, 0]
    # the newest trace deleted past the app and one written in its place: it takes the same
    # id (SQLite reuses the highest), so only the trace now holding that id tells
    pid = _plans(any_engine, counted, "4")[0]
    with write_session(any_engine) as s:
        s.execute(text("DELETE FROM traces WHERE id = (SELECT max(id) FROM traces)"))
    _traces(any_engine, 2, "r")
    counted.clear()
    got = audit_plans.check_population(any_engine, pid)
    assert got == _full(any_engine, pid)
    assert counted == [0, 0]


def test_a_stamp_of_three_figures_still_skips_an_unchanged_count(
    any_engine: Engine, counted: list[int]
) -> None:
    _traces(any_engine, 200, "a")
    pid = _plans(any_engine, counted)[0]

    def old_stamp(s: Session) -> None:
        plan = s.get(SamplingPlan, pid)
        assert plan is not None
        population = dict(plan.population or {})
        population["traces_stamp"] = population["traces_stamp"][:3]  # as stored before
        s.execute(update(SamplingPlan).where(SamplingPlan.id == pid).values(population=population))

    run_write(any_engine, old_stamp)
    assert not audit_plans.check_population(any_engine, pid).changed
    assert counted == []
    _traces(any_engine, 20, "b")
    assert audit_plans.check_population(any_engine, pid) == _full(any_engine, pid)
    assert counted == [0, 0]  # no purge figure stored: every trace is counted


def test_on_sqlite_the_added_traces_are_read_from_the_narrow_index(
    engine: Engine, counted: list[int]
) -> None:
    """The statements of a check after an import read the new traces from ``ix_traces_added``
    (migration 0024: the id first, then the key and the usual strata and filters), not from
    the table's rows with their texts; PostgreSQL has no such index."""
    _traces(engine, 200, "a")
    pids = _plans(engine, counted)
    _traces(engine, 50, "b")
    seen: list[tuple[str, Any]] = []

    def spy(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if "traces.id >" in statement:
            seen.append((statement, params))

    event.listen(engine, "before_cursor_execute", spy)
    try:
        for pid in pids[:2]:
            audit_plans.check_population(engine, pid)
    finally:
        event.remove(engine, "before_cursor_execute", spy)
    assert counted == [1, 1] and len(seen) >= 4  # the check that only traces were added, counts
    with engine.connect() as c:
        for statement, params in seen:
            plan = " ".join(
                r[3] for r in c.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", params)
            )
            assert "COVERING INDEX ix_traces_added (id>?)" in plan, plan


def test_the_narrow_index_is_made_on_sqlite_only(any_engine: Engine) -> None:
    names = {ix["name"] for ix in inspect(any_engine).get_indexes("traces")}
    assert ("ix_traces_added" in names) == (any_engine.dialect.name == "sqlite")


def test_after_a_bulk_load_the_groups_count_the_population_not_the_added_traces(
    any_engine: Engine, counted: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan counted before millions of traces were loaded: reading every added trace would
    cost as much as counting them all, so the population groups count the whole population
    when they hold its filter and strata (the Audit page's check took 2.4 s at ten million
    traces); the same check as a count of every trace."""
    monkeypatch.setattr(audit_plans, "GROUPS_OVER_ADDED", 100)
    _traces(any_engine, 300, "a")
    pids = _plans(any_engine, counted)
    specs = []
    with read_session(any_engine) as s:
        for pid in pids:
            plan = s.get(SamplingPlan, pid)
            assert plan is not None
            specs.append(audit_plans.spec_of(plan))
    answered = [popcount.groups_answer(p.filter, p.strata) for p in specs]
    assert any(answered)
    _traces(any_engine, 101, "few", START + dt.timedelta(hours=30))
    for pid in pids:  # 101 added: more than the bound, the groups count when they can
        assert audit_plans.check_population(any_engine, pid) == _full(any_engine, pid)
    assert counted == [x for ok in answered for x in ([0, 0] if ok else [1, 0])]
    # a new plan like a counted one takes its counts from the groups too, the same figures
    counted.clear()
    again = write(
        any_engine,
        audit_plans.create_plan,
        REVIEWER,
        PlanSpec(name="by decision again", total=20, seed=5, strata=("decision",)),
    )
    assert counted == [0]
    with read_session(any_engine) as s:
        new = s.get(SamplingPlan, again)
        assert new is not None
        assert new.fingerprint == _full(any_engine, pids[0]).current_fingerprint
