"""The daily rollup behind monitoring: kept in step by import and purge, equal to counting the
traces directly, filled by its migration exactly as the import fills it, on both databases."""

from __future__ import annotations

import datetime as dt
import random
import sqlite3
from typing import Any

import pytest
from alembic import command
from sqlalchemy import Engine, case, delete, func, select

from review.core.identity import SYSTEM
from review.core.taxonomy import Taxonomy
from review.traces import browse, monitoring, retention, rollup
from review.traces.model import NEGATIVE_FEEDBACK, Trace
from storage.db import alembic_config, make_engine, read_session
from storage.models import Trace as TraceRow
from storage.models import TraceRollup
from tests.helpers.traces import chunk, import_traces, make_trace

UTC = dt.UTC
START = dt.date(2025, 5, 5)  # a Monday


def varied_traces(n: int, seed: int = 7) -> list[Trace]:
    """Traces over six weeks with every signal, segment values (some missing), and times
    near midnight in other time zones (the day is the UTC day)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        local = dt.timezone(dt.timedelta(hours=rng.choice([-8, 0, 5, 9])))
        day = START + dt.timedelta(days=rng.randrange(42))
        when = dt.datetime(
            day.year, day.month, day.day, rng.choice([0, 1, 12, 23]), 30, tzinfo=local
        )
        decision = rng.choice(
            ["answer", "answer", "abstain", "clarify", "escalate", "partial", None]
        )
        reason = rng.choice([None, "support_below_threshold", "no_evidence", "ambiguous_query"])
        versions = {"model": rng.choice(["m1", "m2"]), "policy": "p1"}
        if rng.random() < 0.8:
            versions["index"] = rng.choice(["idx-1", "idx-2", "idx-3"])
        if rng.random() < 0.5:
            versions["prompt"] = "prompt-" + rng.choice("ab")
        attributes: dict[str, Any] = {}
        if rng.random() < 0.7:
            attributes["language"] = rng.choice(["en", "de", "fr"])
        out.append(
            make_trace(
                f"r{seed}-{i}",
                when,
                decision=decision,
                reason=reason,
                chunks=[chunk(f"c{i}")],
                hits_after_filter=rng.choice([0, 1, 3, None]),
                ungrounded=rng.choice([True, False, None]),
                feedback=rng.choice(
                    [None, None, "negative", "expected_answer", "answer_wrong", "positive"]
                ),
                versions=versions,
                attributes=attributes,
                ranking_mode=rng.choice(["hybrid", "dense", None]),
                reformulated=rng.choice([None, True, False]),
                citation_opened=rng.choice([None, True, False]),
            )
        )
    return out


def reference_weekly(
    engine: Engine, tax: Taxonomy, dim: str | None, value: str | None
) -> dict[dt.date, tuple[int, ...]]:
    """The weekly counts straight from the traces table (SQL, independent of the rollup)."""
    no_answer = monitoring.no_answer_decisions(tax)

    def n(cond: Any) -> Any:
        return func.coalesce(func.sum(case((cond, 1), else_=0)), 0)

    cols = [
        func.count(),
        n(TraceRow.decision.in_(no_answer)),
        n(browse.caveat_condition()),
        n(TraceRow.decision == "clarify"),
        n(TraceRow.decision == "escalate"),
        n(TraceRow.hits_after_filter == 0),
        n(TraceRow.ungrounded.is_(True)),
        n(TraceRow.feedback.in_(sorted(NEGATIVE_FEEDBACK))),
        n(browse.missing_reason_condition()),
        n(TraceRow.reformulated.is_not(None)),
        n(TraceRow.reformulated.is_(True)),
        n(TraceRow.citation_opened.is_not(None)),
        n(TraceRow.citation_opened.is_(True)),
    ]
    stmt = select(TraceRow.at, *cols).group_by(TraceRow.at)
    if dim is not None:
        col = (
            TraceRow.versions[dim.split(".", 1)[1]].as_string()
            if dim.startswith("version.")
            else getattr(TraceRow, dim)
        )
        stmt = stmt.where(col == value)
    out: dict[dt.date, list[int]] = {}
    with read_session(engine) as s:
        for at, *counts in s.execute(stmt):
            week = monitoring.week_start(at)
            got = out.setdefault(week, [0] * len(counts))
            for i, c in enumerate(counts):
                got[i] += int(c)
    return {w: tuple(c) for w, c in out.items()}


def shown(frame: Any) -> dict[dt.date, tuple[int, ...]]:
    return {
        w: tuple(int(frame.loc[i, c]) for c in monitoring.COUNT_COLUMNS)
        for i, w in enumerate(frame["week"])
        if int(frame.loc[i, "traces"])
    }


def rollup_rows(engine: Engine) -> dict[tuple[Any, ...], tuple[int, ...]]:
    r = TraceRollup
    counts = [
        r.traces,
        r.caveat,
        r.empty_retrieval,
        r.ungrounded,
        r.negative_feedback,
        r.missing_reason,
        r.reformulation_logged,
        r.reformulated,
        r.citation_logged,
        r.citation_opened,
    ]
    with read_session(engine) as s:
        return {
            (row[0], row[1], row[2], row[3]): tuple(row[4:])
            for row in s.execute(select(r.dim, r.value, r.day, r.decision, *counts))
        }


def test_weekly_signals_from_the_rollup_equal_counting_the_traces(
    any_engine: Engine, tax: Taxonomy
) -> None:
    import_traces(any_engine, varied_traces(400))
    end = START + dt.timedelta(weeks=8)
    got = shown(monitoring.weekly_signals(any_engine, tax, START - dt.timedelta(weeks=1), end))
    assert got == reference_weekly(any_engine, tax, None, None)
    assert sum(v[0] for v in got.values()) == 400
    for dim, value in [
        ("version.index", "idx-2"),
        ("language", "de"),
        ("model_version", "m1"),
        ("ranking_mode", "dense"),
    ]:
        first = START - dt.timedelta(weeks=1)
        seg = shown(monitoring.weekly_signals(any_engine, tax, first, end, (dim, value)))
        assert seg == reference_weekly(any_engine, tax, dim, value), dim
        assert seg, dim
    top = monitoring.segment_values(any_engine, "version.index", START - dt.timedelta(weeks=1), end)
    idx = TraceRow.versions["index"].as_string().label("idx")
    with read_session(any_engine) as s:
        direct: dict[str, int] = dict(
            s.execute(select(idx, func.count()).where(idx.is_not(None)).group_by(idx)).all()
        )
    assert dict(top) == direct and [v for v, _ in top] == sorted(
        direct, key=lambda k: (-direct[k], k)
    )


def test_purge_and_rebuild_keep_the_rollup_equal_to_the_traces(
    any_engine: Engine, tax: Taxonomy
) -> None:
    import_traces(any_engine, varied_traces(300, seed=3))
    incremental = rollup_rows(any_engine)
    assert rollup.rebuild(any_engine) == 300
    assert rollup_rows(any_engine) == incremental
    # importing the same file again adds nothing, to the traces or to the rollup
    import_traces(any_engine, varied_traces(300, seed=3))
    assert rollup_rows(any_engine) == incremental
    now = dt.datetime.combine(START + dt.timedelta(days=21), dt.time(), tzinfo=UTC)
    report = retention.purge_older_than(any_engine, SYSTEM, 0, now=now, batch=37)
    assert report.deleted > 0
    after = rollup_rows(any_engine)
    assert (
        rollup.stored_total(any_engine) == browse.total_traces(any_engine) == 300 - report.deleted
    )
    assert all(day >= now.date() for (_, _, day, _) in after)
    assert all(v[0] > 0 for v in after.values())  # emptied rows are removed, not left at zero
    rollup.rebuild(any_engine)
    assert rollup_rows(any_engine) == after
    end = START + dt.timedelta(weeks=8)
    assert shown(
        monitoring.weekly_signals(any_engine, tax, START - dt.timedelta(weeks=1), end)
    ) == reference_weekly(any_engine, tax, None, None)


def test_a_rebuild_lets_others_write_while_it_reads_and_counts_what_they_wrote(
    any_engine: Engine,
) -> None:
    """The rebuild reads without the write lock: an import and another write made while it
    reads (from its progress callback, as a job's heartbeat writes) go through at once, even
    with no wait allowed, and the new rollup counts the imported traces as an incremental
    import would. A purge meanwhile makes it read again; either way the rollup equals one
    rebuilt afterwards from the traces alone."""
    import_traces(any_engine, varied_traces(250, seed=5))
    wrote: list[int] = []

    def meanwhile(n: int) -> None:
        if wrote:
            return
        if any_engine.dialect.name == "sqlite":
            # a connection of its own that does not wait: a held write lock fails it at once
            own = sqlite3.connect(str(any_engine.url.database), timeout=0, isolation_level=None)
            try:
                own.execute("BEGIN IMMEDIATE")
                own.execute("UPDATE trace_rollup SET traces = traces WHERE 1 = 0")
                own.execute("COMMIT")
            finally:
                own.close()
        else:
            with any_engine.begin() as c:
                c.exec_driver_sql("SET LOCAL lock_timeout = '100ms'")
                c.exec_driver_sql("UPDATE trace_rollup SET traces = traces + 0")
        wrote.append(import_traces(any_engine, varied_traces(40, seed=6)).added)

    assert rollup.rebuild(any_engine, batch=50, progress=meanwhile) == 290
    assert wrote == [40]
    built = rollup_rows(any_engine)
    assert sum(v[0] for (dim, _, _, _), v in built.items() if dim == "") == 290
    rollup.rebuild(any_engine)
    assert rollup_rows(any_engine) == built

    # a purge while it reads: the traces are read again, and the purged ones are not counted
    purged: list[int] = []

    def purge_once(n: int) -> None:
        if not purged:
            now = dt.datetime.combine(START + dt.timedelta(days=14), dt.time(), tzinfo=UTC)
            purged.append(retention.purge_older_than(any_engine, SYSTEM, 0, now=now).deleted)

    left = rollup.rebuild(any_engine, batch=50, progress=purge_once)
    assert purged and purged[0] > 0 and left == 290 - purged[0]
    assert rollup.stored_total(any_engine) == browse.total_traces(any_engine) == left
    after = rollup_rows(any_engine)
    rollup.rebuild(any_engine)
    assert rollup_rows(any_engine) == after


def test_the_migration_fills_the_rollup_as_the_import_does(any_url: str) -> None:
    eng = make_engine(any_url)
    cfg = alembic_config(eng)
    command.upgrade(cfg, "head")
    import_traces(eng, varied_traces(250, seed=11))
    # the counts migration 0005 knows; the interaction columns (0014) go with the downgrade
    before = {k: v[:6] for k, v in rollup_rows(eng).items()}
    command.downgrade(cfg, "0004")
    command.upgrade(cfg, "head")
    after = rollup_rows(eng)
    assert {k: v[:6] for k, v in after.items()} == before
    assert all(v[6:] == (0, 0, 0, 0) for v in after.values())
    eng.dispose()


def test_rebuild_rollup_command(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from review.cli.main import main

    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", url)
    eng = make_engine(url)
    command.upgrade(alembic_config(eng), "head")
    import_traces(eng, varied_traces(50, seed=5))
    with eng.begin() as c:
        c.execute(delete(TraceRollup))
    assert rollup.stored_total(eng) == 0
    result = CliRunner().invoke(main, ["rebuild-rollup"])
    assert result.exit_code == 0, result.output
    assert "50 traces" in result.output
    assert rollup.stored_total(eng) == 50
    eng.dispose()


def test_audit_filter_values_from_the_rollup_equal_the_distinct_trace_values(
    any_engine: Engine,
) -> None:
    from review.audits import plans, population

    import_traces(any_engine, varied_traces(200, seed=2))
    for dim in population.DIMENSIONS:
        col = population.stratum_column(dim)
        with read_session(any_engine) as s:
            found = s.scalars(select(col).distinct()).all()
        expected = sorted(str(v) for v in found if v is not None)
        if None in found:
            expected = [population.NONE, *expected]
        assert plans.dimension_values(any_engine, dim) == expected, dim
