"""The audit population summed from the population groups (storage.population_groups,
review.audits.popcount) equals the count of every trace, on SQLite and PostgreSQL: for
Hypothesis-generated filters, strata and time ranges that start and end mid-day, with traces
written by ORM and core inserts, by the importer (COPY on PostgreSQL), deleted one by one,
moved by a restricted-flag update, removed by the purge, and with NULL decisions and reasons;
the groups and the traces counter stay equal to a recount from the traces throughout, and
``subtract_rows`` uncounts a detached copy of traces exactly."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Connection, Engine, insert, select, text
from sqlalchemy.orm import Session

from review.audits import plans as audit_plans
from review.audits import popcount
from review.audits.plans import PlanSpec
from review.audits.population import NONE, PopulationFilter
from review.core.errors import InputError
from review.core.identity import SYSTEM
from review.traces import importer, retention
from storage import population_groups
from storage.db import read_session, run_write, write_session
from storage.models import Counter, Trace, trace_sample_key
from tests.helpers.actors import REVIEWER, make_actor
from tests.helpers.traces import canonical_lines, make_trace, write_jsonl
from tests.helpers.transact import write

ADMIN = make_actor("admin", clearance=True, uid=1)
START = dt.datetime(2025, 6, 1)  # naive UTC, as stored
DAYS = 5

DECISIONS = ("answer", "abstain", "clarify", None)
REASONS = (None, "support_below_threshold", "no_answer_bearing_evidence")
FEEDBACK = (None, "expected_answer", "thumbs_down")
TIERS = (None, "team", "business")
LANGUAGES = (None, "en", "de")
DOCTYPES = (None, "policy", "faq")
GROUPED = ("decision", "reason_code", "feedback", "customer_tier", "language", "document_type")
# strata the groups hold (attr.* of a promoted attribute reads its column) and two they do not
STRATA = (*GROUPED, "attr.customer_tier", "attr.language", "policy_version", "version.index")


def _row(rng: random.Random, tag: str, i: int, start: dt.datetime = START) -> dict[str, Any]:
    tier, lang, doc = rng.choice(TIERS), rng.choice(LANGUAGES), rng.choice(DOCTYPES)
    attrs = {k: v for k, v in (("customer_tier", tier), ("language", lang)) if v is not None}
    trace_id = f"{tag}-{i:05d}"
    return {
        "trace_id": trace_id,
        "at": start + dt.timedelta(seconds=rng.randrange(DAYS * 86400)),
        "query": f"q {i}",
        "decision": rng.choice(DECISIONS),
        "reason_code": rng.choice(REASONS),
        "feedback": rng.choice(FEEDBACK),
        "identity_scopes": ["public"],
        "citations": [],
        "versions": {"index": rng.choice(("i1", "i2"))},
        "attributes": attrs,
        "customer_tier": tier,
        "language": lang,
        "document_type": doc,
        "policy_version": rng.choice(("p1", "p2", None)),
        "restricted": rng.random() < 0.2,
        "redactions": {},
        "sample_key": trace_sample_key(trace_id),
    }


def _insert(engine: Engine, rows: Sequence[dict[str, Any]], orm: int = 3) -> None:
    """The first ``orm`` rows as ORM objects (one INSERT each), the rest in one core insert."""

    def work(s: Session) -> None:
        for r in rows[:orm]:
            s.add(Trace(**r))
        s.flush()
        if rows[orm:]:
            s.execute(insert(Trace), list(rows[orm:]))

    run_write(engine, work)


def _group_rows(c: Connection) -> dict[str, tuple[Any, ...]]:
    return {
        r[0]: tuple(r[1:])
        for r in c.execute(
            text(
                "SELECT k, day, n, id_sum, key_sum, unkeyed, min_id, max_id, stale "
                "FROM trace_population_groups"
            )
        )
    }


def assert_in_step(engine: Engine) -> None:
    """The groups equal a regrouping of the traces (min/max where not stale), and the
    counter the number of traces."""
    with engine.connect() as c:
        kept = _group_rows(c)
        counter = c.scalar(select(Counter.value).where(Counter.name == population_groups.COUNTER))
        n = c.scalar(text("SELECT count(*) FROM traces"))
        population_groups.rebuild(c)
        fresh = _group_rows(c)
        c.rollback()
    assert counter == n
    assert set(kept) == set(fresh)
    for k, got in kept.items():
        want = fresh[k]
        assert str(got[0])[:10] == str(want[0])[:10]
        assert got[1:5] == want[1:5], k
        if not got[7]:
            assert got[5:7] == want[5:7], k


def _at(t: dt.datetime | None) -> list[Any]:
    return [] if t is None else [t]


def _reference(
    engine: Engine,
    flt: PopulationFilter,
    strata: Sequence[str],
    start: dt.datetime | None,
    end: dt.datetime | None,
) -> list[tuple[str, int, int, int, int, int]]:
    """The count of every trace (an extra condition keeps count_strata on the traces)."""
    conds = [Trace.id > 0]
    if start is not None:
        conds.append(Trace.at >= start)
    if end is not None:
        conds.append(Trace.at < end)
    with read_session(engine) as s:
        counts = audit_plans.count_strata(s, flt, strata, 2, *conds)
    return [(c.stratum, c.count, c.min_id, c.max_id, c.id_sum, c.rank_sum) for c in counts]


def _fast(
    engine: Engine,
    flt: PopulationFilter,
    strata: Sequence[str],
    start: dt.datetime | None = None,
    end: dt.datetime | None = None,
) -> list[tuple[str, int, int, int, int, int]] | None:
    with read_session(engine) as s:
        return popcount.stratum_terms(s, flt, strata, start, end)


def _check(
    engine: Engine,
    flt: PopulationFilter,
    strata: Sequence[str],
    start: dt.datetime | None = None,
    end: dt.datetime | None = None,
) -> None:
    got = _fast(engine, flt, strata, start, end)
    if popcount.groups_answer(flt, strata):
        assert got is not None
        f_start, f_end = flt.time_range()
        lo = max((t for t in (start, f_start) if t is not None), default=None)
        hi = min((t for t in (end, f_end) if t is not None), default=None)
        assert got == _reference(engine, flt, strata, lo, hi)
    else:
        assert got is None
    if start is None and end is None:  # what a plan counts: the same either way
        with read_session(engine) as s:
            counts = audit_plans.count_strata(s, flt, strata)
        assert [
            (c.stratum, c.count, c.min_id, c.max_id, c.id_sum, c.rank_sum) for c in counts
        ] == _reference(engine, flt, strata, *flt.time_range())


FIXED = (
    (PopulationFilter(), ("decision",)),
    (PopulationFilter(), ()),
    (PopulationFilter(decisions=(NONE, "abstain")), ("reason_code", "attr.customer_tier")),
    (PopulationFilter(include_restricted=False, reason_codes=(NONE,)), ("language",)),
    (PopulationFilter(date_from=START.date() + dt.timedelta(days=1)), ("decision", "feedback")),
    (PopulationFilter(policy_versions=("p1",)), ("decision",)),  # not in the groups
)


def _check_fixed(engine: Engine) -> None:
    assert_in_step(engine)
    for flt, strata in FIXED:
        _check(engine, flt, strata)
    mid = START + dt.timedelta(days=1, hours=7, minutes=13)
    _check(engine, PopulationFilter(), ("decision",), mid, mid + dt.timedelta(days=2, hours=5))
    _check(engine, PopulationFilter(), ("decision",), mid, mid + dt.timedelta(hours=5))


def _values(options: Sequence[str | None]) -> st.SearchStrategy[tuple[str, ...]]:
    names = [NONE if v is None else v for v in options]
    return st.lists(st.sampled_from(names), unique=True, max_size=2).map(tuple)


_moments = st.one_of(
    st.none(),
    st.integers(min_value=-86400, max_value=(DAYS + 1) * 86400).map(
        lambda s: START + dt.timedelta(seconds=s)
    ),
    st.integers(min_value=-1, max_value=DAYS + 1).map(lambda d: START + dt.timedelta(days=d)),
)
_days = st.one_of(
    st.none(),
    st.integers(min_value=-1, max_value=DAYS).map(lambda d: START.date() + dt.timedelta(days=d)),
)


@st.composite
def _filters(draw: st.DrawFn) -> PopulationFilter:
    d1, d2 = draw(_days), draw(_days)
    if d1 and d2 and d1 > d2:
        d1, d2 = d2, d1
    return PopulationFilter(
        date_from=d1,
        date_to=d2,
        decisions=draw(_values(DECISIONS)),
        reason_codes=draw(_values(REASONS)),
        feedback=draw(_values(FEEDBACK)),
        customer_tiers=draw(_values(TIERS)),
        languages=draw(_values(LANGUAGES)),
        document_types=draw(_values(DOCTYPES)),
        policy_versions=draw(st.sampled_from(((), (), (), ("p1",)))),
        attributes=draw(st.sampled_from(((), (), (), (("language", ("en",)),)))),
        include_restricted=draw(st.booleans()),
    )


@pytest.fixture
def populated(any_engine: Engine) -> Engine:
    rng = random.Random(11)
    rows = [_row(rng, "orm", i) for i in range(300)]
    # twins of the first 150 (another id, the same day and values): groups of several traces
    twins = [
        {**r, "trace_id": f"twin-{i:05d}", "sample_key": trace_sample_key(f"twin-{i:05d}")}
        for i, r in enumerate(rows[:150])
    ]
    _insert(any_engine, rows + twins)
    # some deleted one by one: the smallest ids of groups that keep their twins (stale groups)
    with write_session(any_engine) as s:
        s.execute(text("DELETE FROM traces WHERE id IN (1, 5, 17, 33, 41, 299, 300, 450)"))
    with read_session(any_engine) as s:
        assert s.scalar(text("SELECT count(*) FROM trace_population_groups WHERE stale")) > 0
    return any_engine


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    flt=_filters(),
    strata=st.lists(st.sampled_from(STRATA), unique=True, max_size=3).map(tuple),
    start=_moments,
    end=_moments,
)
def test_generated_filters_and_mid_day_ranges_give_the_count_of_every_trace(
    populated: Engine,
    flt: PopulationFilter,
    strata: tuple[str, ...],
    start: dt.datetime | None,
    end: dt.datetime | None,
) -> None:
    _check(populated, flt, strata, start, end)


def test_every_writer_keeps_the_groups_in_step(any_engine: Engine, tmp_path: Path) -> None:
    rng = random.Random(3)
    _insert(any_engine, [_row(rng, "orm", i) for i in range(300)])
    _check_fixed(any_engine)
    # the importer (COPY on PostgreSQL), with a NULL decision and reason among them
    items = [
        make_trace(
            f"imp-{i}",
            START + dt.timedelta(days=i % DAYS, hours=i % 24, minutes=i),
            decision=(None, "abstain", "answer")[i % 3],
            reason=(None, "no_answer_bearing_evidence")[i % 2] if i % 3 else None,
        )
        for i in range(60)
    ]
    path = write_jsonl(tmp_path / "t.jsonl", canonical_lines(items))
    report = importer.import_file(any_engine, SYSTEM, path, "canonical", batch_size=17)
    assert report.added == 60
    _check_fixed(any_engine)
    # a restricted-flag update moves traces between groups
    with write_session(any_engine) as s:
        s.execute(text("UPDATE traces SET restricted = NOT restricted WHERE id % 7 = 0"))
    _check_fixed(any_engine)
    # deletes of single traces (the smallest and largest ids of their groups among them)
    with write_session(any_engine) as s:
        s.execute(text("DELETE FROM traces WHERE id % 11 = 0 OR id IN (1, 2, 3)"))
    _check_fixed(any_engine)
    with any_engine.begin() as c:
        assert population_groups.refresh_stale(c) > 0
    _check_fixed(any_engine)
    with read_session(any_engine) as s:
        assert not s.scalar(text("SELECT count(*) FROM trace_population_groups WHERE stale"))
    # the purge (the first two days go, whole and by a mid-day cutoff)
    now = (START + dt.timedelta(days=31, hours=9)).replace(tzinfo=dt.UTC)
    purged = retention.purge_older_than(any_engine, ADMIN, 30, now=now)
    assert purged.deleted > 0
    _check_fixed(any_engine)
    with read_session(any_engine) as s:
        assert s.scalar(text("SELECT count(*) FROM traces")) > 0


def test_a_plan_counted_from_the_groups_is_the_plan_counted_from_the_traces(
    any_engine: Engine,
) -> None:
    rng = random.Random(5)
    _insert(any_engine, [_row(rng, "p", i) for i in range(250)])
    spec = PlanSpec(name="by decision", strata=("decision", "attr.customer_tier"), total=30)
    pid = write(any_engine, audit_plans.create_plan, REVIEWER, spec)
    plan = audit_plans.get_plan(any_engine, pid)
    assert plan is not None
    want = _reference(any_engine, spec.filter, spec.strata, None, None)
    assert [
        (c.stratum, c.count, c.min_id, c.max_id, c.id_sum, c.rank_sum) for c in plan.population
    ] == want
    assert not audit_plans.check_population(any_engine, pid).changed
    _insert(any_engine, [_row(rng, "q", i) for i in range(10)], orm=0)
    assert audit_plans.check_population(any_engine, pid).changed


def test_subtract_rows_uncounts_a_detached_copy(any_engine: Engine) -> None:
    rng = random.Random(9)
    _insert(any_engine, [_row(rng, "s", i) for i in range(200)])
    gone = "traces_detached_test"
    cut = START + dt.timedelta(days=2, hours=3)
    with any_engine.begin() as c:
        if c.dialect.name == "postgresql":
            c.exec_driver_sql(f"CREATE TABLE {gone} (LIKE traces)")
            c.exec_driver_sql(f"INSERT INTO {gone} SELECT * FROM traces WHERE at < %s", (cut,))
        else:
            c.exec_driver_sql(f"CREATE TABLE {gone} AS SELECT * FROM traces WHERE at < ?", (cut,))
        # as the purge of a partition: uncount, then the rows go without their triggers
        population_groups.subtract_rows(c, gone)
        for statement in population_groups.drop_statements(c.dialect.name):
            c.exec_driver_sql(statement)
        c.execute(text("DELETE FROM traces WHERE at < :cut"), {"cut": cut})
        for statement in population_groups.install_statements(c.dialect.name):
            c.exec_driver_sql(statement)
        c.exec_driver_sql(f"DROP TABLE {gone}")
    _check_fixed(any_engine)
    with pytest.raises(ValueError, match="plain table name"), any_engine.begin() as c:
        population_groups.subtract_rows(c, "traces; DROP TABLE traces")


def test_too_many_stale_days_or_unkeyed_traces_count_the_traces(
    populated: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    flt = PopulationFilter()
    with read_session(populated) as s:
        assert s.scalar(text("SELECT count(*) FROM trace_population_groups WHERE stale")) > 0
    monkeypatch.setattr(popcount, "MAX_STALE_DAYS", 0)
    assert _fast(populated, flt, ("decision",)) is None
    _check_counts_alike(populated, flt)
    monkeypatch.undo()
    # a trace written past the trace writers, without a sampling key: the count says so
    with write_session(populated) as s:
        s.execute(text("UPDATE traces SET sample_key = NULL WHERE id = 7"))
    assert_in_step(populated)
    assert _fast(populated, flt, ("decision",)) is None
    with read_session(populated) as s, pytest.raises(InputError, match="no sampling key"):
        audit_plans.count_strata(s, flt, ("decision",))


def _check_counts_alike(engine: Engine, flt: PopulationFilter) -> None:
    with read_session(engine) as s:
        counts = audit_plans.count_strata(s, flt, ("decision",))
    got = [(c.stratum, c.count, c.min_id, c.max_id, c.id_sum, c.rank_sum) for c in counts]
    assert got == _reference(engine, flt, ("decision",), None, None)
