"""The stored per-trace sampling key (traces.sample_key, revision 0020) and audit plans of
sampling algorithm 2 that draw by it: every writer fills the key, the migration backfills it
the same on both databases, the draw is the in-memory reference (exactly, in queue order),
keeps each stratum's allocation, is uniform within a stratum, is the same on SQLite and
PostgreSQL, and plans drawn by algorithm 1 before the key existed still verify."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any, cast

import numpy as np
import pytest
from alembic import command
from sqlalchemy import Engine, delete, func, insert, select, text, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from review.audits import plans as audit_plans
from review.audits.plans import PlanSpec
from review.audits.population import PopulationFilter
from review.core.errors import InputError
from review.core.identity import SYSTEM
from review.core.sampling import (
    KEY_SPACE,
    draw_sample,
    draw_sample_by_key,
    key_offset,
    population_fingerprint,
)
from review.traces import importer
from storage import partitions
from storage.db import alembic_config, make_engine, migrate, read_session, run_write
from storage.models import SAMPLE_KEY_BITS, AuditItem, SamplingPlan, Trace, trace_sample_key
from tests.helpers.actors import REVIEWER
from tests.helpers.audits import add_trace, bulk_traces
from tests.helpers.traces import make_trace
from tests.helpers.transact import write

TIERS = ("team", "business", "enterprise", "starter")


def _strata(rows: Sequence[Any]) -> list[Any]:
    """The stratum (the decision) of each (id, decision) row, in order."""
    return [r[1] for r in rows]


def tiered(engine: Engine, n: int = 900, prefix: str = "k") -> None:
    """``n`` traces: decisions cycling over five values, tiers skewed (every 29th trace is
    'internal', a small stratum), the tier also in the attributes JSON as the importer
    writes it."""

    def tier(i: int) -> str:
        return "internal" if i % 29 == 0 else TIERS[(i * 7 + i // 5) % 4]

    rows = [
        {
            "trace_id": f"{prefix}-{i:06d}",
            "at": dt.datetime(2025, 6, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=i),
            "query": f"q {i}",
            "decision": ("answer", "abstain", "clarify", "answer", "escalate")[i % 5],
            "feedback": "expected_answer" if i % 11 == 0 else None,
            "identity_scopes": ["public"],
            "citations": [],
            "versions": {},
            "attributes": {"customer_tier": tier(i)},
            "customer_tier": tier(i),
            "restricted": False,
            "redactions": {},
        }
        for i in range(n)
    ]

    def work(s: Session) -> None:
        s.execute(insert(Trace), rows)

    run_write(engine, work)


def plan(engine: Engine, name: str = "p", **kw: Any) -> int:
    return write(engine, audit_plans.create_plan, REVIEWER, PlanSpec(name=name, **kw))


def drawn(engine: Engine, plan_id: int) -> list[tuple[int, str]]:
    with read_session(engine) as s:
        return [
            (int(t), str(st))
            for t, st in s.execute(
                select(AuditItem.trace_pk, AuditItem.stratum)
                .where(AuditItem.plan_id == plan_id)
                .order_by(AuditItem.position)
            )
        ]


def reference(engine: Engine, plan_id: int) -> list[int]:
    """The plan's draw computed in plain Python from every trace's row."""
    view = audit_plans.get_plan(engine, plan_id)
    assert view is not None
    with read_session(engine) as s:
        rows = s.execute(
            select(Trace.id, Trace.sample_key, Trace.decision, Trace.customer_tier)
        ).all()
    strata_of = {
        ("decision",): lambda d, t: d or "(none)",
        ("decision", "attr.customer_tier"): lambda d, t: f"{d or '(none)'} · {t or '(none)'}",
    }[view.spec.strata]
    return draw_sample_by_key(
        view.spec.seed,
        [r[0] for r in rows],
        [cast("int", r[1]) for r in rows],
        [strata_of(r[2], r[3]) for r in rows],
        view.allocation,
    )


# --- the key ---------------------------------------------------------------------------------


def test_the_key_is_a_62_bit_hash_of_the_trace_id_filled_by_every_writer(
    any_engine: Engine,
) -> None:
    assert SAMPLE_KEY_BITS == 62 and KEY_SPACE == 2**SAMPLE_KEY_BITS
    # a fixed value: the same id has the same key on every database, in every writer
    assert trace_sample_key("t-0000001") == trace_sample_key("t-0000001") < KEY_SPACE
    assert trace_sample_key("t-0000001") != trace_sample_key("t-0000002")
    bulk_traces(any_engine, 30)  # Core executemany: the column default
    add_trace(any_engine, "orm-one")  # the ORM
    importer.import_items(any_engine, SYSTEM, [make_trace("imported-one")], source="test")
    with read_session(any_engine) as s:
        rows = s.execute(select(Trace.trace_id, Trace.sample_key)).all()
    assert len(rows) == 32
    assert all(k == trace_sample_key(tid) for tid, k in rows)
    # keys above 2**32 survive the round trip (BIGINT on PostgreSQL)
    assert max(cast("int", k) for _t, k in rows) > 2**40


def test_keys_are_uniform() -> None:
    keys = np.array([trace_sample_key(f"t-{i:07d}") for i in range(16_000)], dtype=np.uint64)
    counts = np.bincount((keys >> np.uint64(58)).astype(np.int64), minlength=16)
    expected = len(keys) / 16
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 37.7  # 15 degrees of freedom, p = 0.001


def test_the_migration_backfills_the_key_the_same_on_both_databases(any_url: str) -> None:
    eng = make_engine(any_url)
    cfg = alembic_config(eng)
    command.upgrade(cfg, "0017")
    with eng.begin() as c:
        for i, tid in enumerate(("old-a", "old-b", "scale-00000042")):
            c.execute(
                text(
                    "insert into traces (trace_id, at, query, identity_scopes, context_sent, "
                    "answer_text, citations, versions, attributes, restricted, redactions, "
                    "imported_at, decision) values (:t, :at, 'q', '[]', '', '', '[]', '{}', "
                    "'{}', false, '{}', :at, 'answer')"
                ),
                {"t": tid, "at": dt.datetime(2025, 6, 1, i, tzinfo=dt.UTC)},
            )
    command.upgrade(cfg, "head")
    with read_session(eng) as s:
        got = {t: k for t, k in s.execute(select(Trace.trace_id, Trace.sample_key))}
    assert got == {t: trace_sample_key(t) for t in ("old-a", "old-b", "scale-00000042")}
    command.check(cfg)
    eng.dispose()


# --- drawing by the key ------------------------------------------------------------------------


@pytest.mark.parametrize("allocation", ["proportional", "equal"])
def test_the_draw_is_the_reference_and_keeps_each_allocation(
    any_engine: Engine, allocation: str
) -> None:
    tiered(any_engine)
    strata = ("decision", "attr.customer_tier")
    pid = plan(any_engine, strata=strata, total=120, seed=31, allocation=allocation)
    view = audit_plans.get_plan(any_engine, pid)
    assert view is not None
    sizes = {c.stratum: c.count for c in view.population}
    assert sizes["answer · internal"] > 0  # a small stratum: read by a scan, not a key range
    result = write(any_engine, audit_plans.draw_plan, REVIEWER, pid)
    got = drawn(any_engine, pid)
    assert [t for t, _st in got] == reference(any_engine, pid)  # same traces, same queue order
    assert dict(Counter(st for _t, st in got)) == {k: v for k, v in view.allocation.items() if v}
    assert result.by_stratum == dict(Counter(st for _t, st in got))
    assert audit_plans.verify_sample(any_engine, pid) is True
    again = plan(any_engine, "again", strata=strata, total=120, seed=31, allocation=allocation)
    write(any_engine, audit_plans.draw_plan, REVIEWER, again)
    assert drawn(any_engine, again) == got  # reproducible
    other = plan(any_engine, "other", strata=strata, total=120, seed=32, allocation=allocation)
    write(any_engine, audit_plans.draw_plan, REVIEWER, other)
    assert {t for t, _s in drawn(any_engine, other)} != {t for t, _s in got}


def test_a_plan_without_strata_draws_by_the_key(any_engine: Engine) -> None:
    tiered(any_engine, 400)
    flt = PopulationFilter(decisions=("answer", "abstain"))
    pid = plan(any_engine, filter=flt, total=25, seed=11)
    write(any_engine, audit_plans.draw_plan, REVIEWER, pid)
    got = drawn(any_engine, pid)
    with read_session(any_engine) as s:
        rows = s.execute(
            select(Trace.id, Trace.sample_key).where(Trace.decision.in_(["answer", "abstain"]))
        ).all()
    ids, keys = [r[0] for r in rows], [cast("int", r[1]) for r in rows]
    assert [t for t, _st in got] == draw_sample_by_key(
        11, ids, keys, ["all"] * len(ids), {"all": 25}
    )
    assert {st for _t, st in got} == {"all"}


def test_a_window_that_falls_short_reads_every_key(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    tiered(engine, 600)
    pid = plan(engine, strata=("decision",), total=60, seed=5)
    expected = reference(engine, pid)
    # windows far too narrow: every stratum falls short and is read again over every key
    monkeypatch.setattr(
        audit_plans, "key_windows", lambda alloc, sizes: {k: 1 for k, v in alloc.items() if v}
    )
    assert [t for t, _st in audit_plans.preview_sample(engine, pid)] == expected


def test_the_draw_is_uniform_within_a_stratum() -> None:
    """Over 300 seeds, 40 of 3,000 traces each: every tenth of the stratum (by id) is picked
    about equally often, and every trace's inclusion count is binomial."""
    ids = list(range(1, 3001))
    keys = [trace_sample_key(f"scale-{i:08d}") for i in ids]
    strata = ["s"] * len(ids)
    picks = Counter[int]()
    for seed in range(300):
        picks.update(draw_sample_by_key(seed, ids, keys, strata, {"s": 40}))
    assert sum(picks.values()) == 12_000
    tenths = np.bincount([(t - 1) // 300 for t in picks.elements()], minlength=10)
    chi2 = float(((tenths - 1200) ** 2 / 1200).sum())
    assert chi2 < 27.9  # 9 degrees of freedom, p = 0.001
    # inclusion counts: mean 4 per trace; the spread of a binomial(300, 40/3000)
    per_trace = np.array([picks.get(i, 0) for i in ids])
    assert abs(per_trace.mean() - 4.0) < 1e-9
    assert 0.8 < per_trace.var() / (300 * (40 / 3000) * (1 - 40 / 3000)) < 1.2


def test_draw_sample_by_key_checks_its_input() -> None:
    with pytest.raises(InputError, match="differ in length"):
        draw_sample_by_key(1, [1, 2], [5], ["a", "a"], {"a": 1})
    with pytest.raises(InputError, match="holds only 2"):
        draw_sample_by_key(1, [1, 2], [5, 6], ["a", "a"], {"a": 3})
    with pytest.raises(InputError, match=r"not in \[0, 2\*\*62\)"):
        draw_sample_by_key(1, [1], [KEY_SPACE], ["a"], {"a": 1})
    assert 0 <= key_offset(7) < KEY_SPACE and key_offset(7) != key_offset(8)


@pytest.fixture
def pg_engine(pg_url: str) -> Iterator[Engine]:
    eng = make_engine(pg_url)
    migrate(eng)
    yield eng
    eng.dispose()


def test_sqlite_and_postgresql_draw_the_same_sample(engine: Engine, pg_engine: Engine) -> None:
    samples = []
    for eng in (engine, pg_engine):
        tiered(eng, 700)
        pid = plan(eng, strata=("decision", "attr.customer_tier"), total=80, seed=2026)
        write(eng, audit_plans.draw_plan, REVIEWER, pid)
        with read_session(eng) as s:
            samples.append(
                s.execute(
                    select(Trace.trace_id, AuditItem.stratum)
                    .join(Trace, Trace.id == AuditItem.trace_pk)
                    .where(AuditItem.plan_id == pid)
                    .order_by(AuditItem.position)
                ).all()
            )
    assert len(samples[0]) == 80 and samples[0] == samples[1]


# --- plans of algorithm 1 ----------------------------------------------------------------------


def as_algorithm_1(engine: Engine, plan_id: int) -> None:
    """Rewrite a planned plan as the code before revision 0020 stored it: counts with the
    seeded-rank fingerprint and no algorithm in the population record."""

    def work(s: Session) -> None:
        row = s.get(SamplingPlan, plan_id)
        assert row is not None
        spec = audit_plans.spec_of(row)
        counts = audit_plans.count_strata(s, spec.filter, spec.strata, 1)
        population = dict(row.population)
        population.pop("algorithm")
        population["strata"] = [c.summary_row() for c in counts]
        row.population = population
        row.fingerprint = population_fingerprint(population["strata"])

    run_write(engine, work)


def test_a_plan_drawn_by_algorithm_1_before_the_key_still_verifies(any_engine: Engine) -> None:
    tiered(any_engine, 500)
    pid = plan(any_engine, strata=("decision",), total=40, seed=77)
    as_algorithm_1(any_engine, pid)
    view = audit_plans.get_plan(any_engine, pid)
    assert view is not None
    with read_session(any_engine) as s:
        rows = s.execute(select(Trace.id, Trace.decision)).all()
    # the draw of the code before 0020 (its SQL equals this in-memory draw), stored as it
    # stored it: queue order by (rank, id)
    old = draw_sample(77, [r[0] for r in rows], _strata(rows), view.allocation)
    decision = dict(rows)

    def store(s: Session) -> None:
        from review.core.sampling import sample_rank

        order = sorted(old.tolist(), key=lambda t: (int(sample_rank(77, [t])[0]), t))
        s.execute(
            insert(AuditItem),
            [
                {"plan_id": pid, "trace_pk": t, "stratum": decision[t], "position": i}
                for i, t in enumerate(order, start=1)
            ],
        )
        s.execute(update(SamplingPlan).where(SamplingPlan.id == pid).values(status="open"))

    run_write(any_engine, store)
    assert audit_plans.verify_sample(any_engine, pid) is True
    # a new trace moves the stamp: the population is re-counted by algorithm 1 and the
    # change is seen (a different draw is expected: verify says so)
    add_trace(any_engine, "late", decision="answer")
    check = audit_plans.check_population(any_engine, pid)
    assert check.changed and "answer: " in check.message() and "(+1 traces)" in check.message()
    assert audit_plans.verify_sample(any_engine, pid) is None
    # the same plan by algorithm 2 draws other traces: the record decides
    new = plan(any_engine, "new", strata=("decision",), total=40, seed=77)
    write(any_engine, audit_plans.draw_plan, REVIEWER, new)
    assert {t for t, _s in drawn(any_engine, new)} != set(old.tolist())


def test_a_planned_algorithm_1_plan_recounts_and_draws_by_algorithm_1(engine: Engine) -> None:
    tiered(engine, 300)
    pid = plan(engine, strata=("decision",), total=30, seed=3)
    as_algorithm_1(engine, pid)
    add_trace(engine, "late", decision="abstain")
    assert write(engine, audit_plans.recount_plan, REVIEWER, pid).changed is True
    with read_session(engine) as s:
        row = s.get(SamplingPlan, pid)
        assert row is not None and audit_plans.sampling_algorithm(row) == 1
        rows = s.execute(select(Trace.id, Trace.decision)).all()
    write(engine, audit_plans.draw_plan, REVIEWER, pid)
    view = audit_plans.get_plan(engine, pid)
    assert view is not None
    old = draw_sample(3, [r[0] for r in rows], _strata(rows), view.allocation)
    assert sorted(t for t, _s in drawn(engine, pid)) == sorted(old.tolist())
    assert audit_plans.verify_sample(engine, pid) is True


def test_a_population_with_traces_without_a_key_is_not_counted(engine: Engine) -> None:
    tiered(engine, 50)

    def drop_key(s: Session) -> None:
        s.execute(update(Trace).where(Trace.trace_id == "k-000007").values(sample_key=None))

    run_write(engine, drop_key)
    with pytest.raises(InputError, match=r"1 trace of the population has no sampling key"):
        audit_plans.count_population(engine, PopulationFilter(), ("decision",))
    flt = PopulationFilter(decisions=("abstain",))  # k-000007 is 'clarify': left out
    assert sum(c.count for c in audit_plans.count_population(engine, flt, ())) == 10


def test_an_unknown_algorithm_is_refused(engine: Engine) -> None:
    tiered(engine, 20)
    pid = plan(engine, strata=("decision",), total=5)

    def bump(s: Session) -> None:
        row = s.get(SamplingPlan, pid)
        assert row is not None
        row.population = {**row.population, "algorithm": 9}

    run_write(engine, bump)
    with pytest.raises(InputError, match="sampling algorithm 9 is unknown"):
        audit_plans.preview_sample(engine, pid)


@pytest.mark.parametrize("prefetch", ["0", "8"])
def test_a_postgresql_draw_locks_its_traces_and_leaves_the_settings_as_they_were(
    pg_engine: Engine, prefetch: str
) -> None:
    """The draw locks its traces in one statement with the planner set for it (see
    plans._lock_drawn); the rest of the transaction runs with the settings it had, and a
    server that turned prefetching off (or cannot prefetch) keeps it off."""
    tiered(pg_engine, 300)
    pid = plan(pg_engine, strata=("decision",), total=40, seed=11)
    names = ("effective_io_concurrency", "enable_indexscan", "enable_indexonlyscan")
    with Session(pg_engine) as s, s.begin():
        s.execute(text(f"SET LOCAL effective_io_concurrency = {prefetch}"))
        result = audit_plans.draw_plan(s, REVIEWER, pid)
        after = tuple(s.execute(select(*(func.current_setting(n) for n in names))).one())
        first = s.execute(
            select(AuditItem.trace_pk).where(AuditItem.plan_id == pid).limit(1)
        ).scalar_one()
        with pg_engine.connect() as other:
            other.execute(text("SET lock_timeout = '200ms'"))
            # the lock is the key check's: a trace's flags can still change (a restricted-flag
            # rebuild does not wait for the draw), the trace cannot go
            other.execute(update(Trace).where(Trace.id == first).values(feedback="reviewed"))
            with pytest.raises(OperationalError, match="lock timeout"):
                other.execute(delete(Trace).where(Trace.id == first))
    assert result.items == 40
    assert after == (prefetch, "on", "on")


def _key_check_indexes(engine: Engine, plan_id: int) -> list[str]:
    """The indexes the foreign-key checks of a draw's items read in the traces, from the
    server's own plans of them (auto_explain, nested statements)."""
    notices: list[str] = []
    with Session(engine) as s, s.begin():
        conn = s.connection().connection.driver_connection
        assert conn is not None
        conn.add_notice_handler(lambda d: notices.append(str(d.message_primary)))
        for sql in (
            "LOAD 'auto_explain'",
            "SET LOCAL auto_explain.log_min_duration = 0",
            "SET LOCAL auto_explain.log_nested_statements = on",
            "SET LOCAL auto_explain.log_format = json",
            "SET LOCAL auto_explain.log_level = notice",
            "SET LOCAL client_min_messages = notice",
        ):
            s.execute(text(sql))
        audit_plans.draw_plan(s, REVIEWER, plan_id)
        s.rollback()

    def walk(node: dict[str, Any]) -> Iterator[str]:
        if "Index Name" in node:
            yield str(node["Index Name"])
        for child in node.get("Plans", []):
            yield from walk(child)

    found: list[str] = []
    for message in notices:
        body = message[message.find("{") :]
        if '"SELECT 1 FROM \\"public\\".\\"traces\\"' not in body:
            continue
        found.extend(walk(json.loads(body)["Plan"]))
    return found


def test_a_postgresql_key_check_of_a_drawn_trace_reads_the_primary_key(pg_engine: Engine) -> None:
    """The items' key checks look each trace up by ``id = $1 AND at = $2``; they read the
    primary key, whose leaves the draw's lock has just read, and not one of the indexes that
    begin with ``at`` (storage.partitions.COLUMN_OPTIONS, migration 0043). Without the
    setting they read the newest of those (asserted, so the test can tell). The traces'
    month is a partition made as the import makes one (partitions.create_month)."""
    june = dt.date(2025, 6, 1)
    with pg_engine.begin() as c:
        assert partitions.ensure_months(c, [dt.datetime(2025, 6, 2, tzinfo=dt.UTC)]) == [june]
    tiered(pg_engine, 600)
    pid = plan(pg_engine, strata=("decision",), total=30, seed=5)
    with pg_engine.begin() as c:
        c.execute(text("ANALYZE traces"))
    used = _key_check_indexes(pg_engine, pid)
    assert len(used) == 30
    assert all(name.endswith("_pkey") for name in used), Counter(used)

    with pg_engine.begin() as c:
        month = partitions.partition_name("traces", june)
        c.execute(text(f"ALTER TABLE {month} ALTER COLUMN at RESET (n_distinct)"))
        c.execute(text("ANALYZE traces"))
    pg_engine.dispose()  # the checks' plans are kept by each connection
    without = _key_check_indexes(pg_engine, pid)
    assert len(without) == 30
    assert not any(name.endswith("_pkey") for name in without), Counter(without)
