"""The grouped replay (trace_signal_groups, migration 0022) gives exactly what reading every
trace gives: the same counts, flips, not-replayable traces, examples and audited flips, for
scores on thresholds, on bin edges, out of range or not numbers, on SQLite and PostgreSQL;
and the triggers keep the groups in step with inserts, updates and deletes."""

from __future__ import annotations

import math
import random
import re
from typing import Any

import pandas as pd
import pytest
from sqlalchemy import Engine, event, func, select, text

from review.core.errors import InputError
from review.policy import inforce
from review.policy.policy import (
    NoAnswerPolicy,
    default_policy_path,
    parse_policy,
    replace_thresholds,
)
from review.thresholds import replay
from storage.db import read_session, write_session
from storage.models import SCORE_BIN_SCALE, Trace, TraceSignalGroup
from tests.helpers.actors import make_actor
from tests.helpers.traces import import_traces, make_trace

CLEARED = make_actor("reviewer", clearance=True)
PLAIN = make_actor("reviewer")
TEXT = default_policy_path().read_text(encoding="utf-8")
#: scores that sit on the default policy's thresholds, on bin edges and just beside them
EDGES = [
    0.55,
    0.65,
    0.6,
    0.5,
    128 / SCORE_BIN_SCALE,
    129 / SCORE_BIN_SCALE,
    math.nextafter(0.55, 0),
    math.nextafter(0.55, 1),
    math.nextafter(129 / SCORE_BIN_SCALE, 0),
    1.2,
    2.0,
    8.0,
    12.0,
    -0.25,
    0.0,
    1.0,
    4.0,
    40.0,
]


def _policy(name: str, **modes: tuple[float, float]) -> NoAnswerPolicy:
    out = TEXT
    for mode, (refuse, caveat) in modes.items():
        out = replace_thresholds(out, mode, refuse_below=refuse, caveat_below=caveat)
    return parse_policy(out, name)


PROPOSALS = [
    _policy("vector stricter", vector=(0.6, 0.7)),
    _policy("on a bin edge", vector=(0.5, 129 / SCORE_BIN_SCALE), semantic_reranker=(1.5, 2.25)),
    _policy("looser everywhere", vector=(0.45, 0.5), bm25=(6.0, 9.0), semantic_reranker=(1.0, 1.5)),
    parse_policy(TEXT.replace("  - legal_dispute\n", ""), "one topic less"),
    parse_policy(TEXT.replace("    topics: escalate\n", "    topics: abstain\n"), "on missing"),
]


def _random_traces(n: int, seed: int) -> list[Any]:
    rng = random.Random(seed)
    topics: list[tuple[str, ...] | None] = [
        None,
        (),
        ("billing",),
        ("legal_dispute",),
        ("billing", "security_incident"),
    ]
    items = []

    def mostly(good: object, *bad: object) -> object:  # most traces reach the score checks
        return good if rng.random() < 0.8 else rng.choice(bad)

    for i in range(n):
        mode = rng.choice(
            ["vector", "vector", "bm25", "hybrid", "semantic_reranker", None, "unknown"]
        )
        near = {"vector": (0.4, 0.75), "bm25": (4.0, 14.0)}.get(str(mode), (0.8, 2.5))
        score = (
            rng.uniform(*near)  # most scores near the thresholds of their mode
            if rng.random() < 0.6
            else rng.choice([None, rng.random(), rng.uniform(-1, 50), rng.choice(EDGES)])
        )
        items.append(
            make_trace(
                f"g{seed}-{i}",
                ranking_mode=mode,
                hits_after_filter=mostly(3, 0, 1, None),
                top_score=score,
                answerable=mostly(True, False, None),
                ambiguous=mostly(False, True, None),
                ungrounded=mostly(False, True, None),
                topics=mostly(("billing",), *topics),
                attributes={"customer_tier": rng.choice(["gold", "free"])}
                if rng.random() < 0.8
                else {},
            )
        )
    return items


def _import(engine: Engine, n: int, seed: int) -> None:
    """Random traces, about one in five marked restricted (the mark is derived from the
    documents a trace quotes: set here directly)."""
    import_traces(engine, _random_traces(n, seed))
    with write_session(engine) as s:
        s.execute(text("UPDATE traces SET restricted = (id % 5 = 2)"))


def _same(got: replay.Replay, want: replay.Replay) -> None:
    assert (got.traces, got.not_replayable) == (want.traces, want.not_replayable)
    assert got.missing_signals == want.missing_signals
    pd.testing.assert_frame_equal(got.flips, want.flips)
    # the same traces and words (a column's dtype follows the batch it was read in)
    pd.testing.assert_frame_equal(
        got.examples.reset_index(drop=True),
        want.examples.reset_index(drop=True),
        check_dtype=False,
    )
    pd.testing.assert_frame_equal(got.audited, want.audited)


def _both(engine: Engine, current: NoAnswerPolicy, proposed: NoAnswerPolicy, **kw: Any) -> None:
    for actor in (CLEARED, PLAIN):
        want = replay.replay_traces_scan(engine, actor, current, proposed, **kw)
        got = replay.replay_traces(engine, actor, current, proposed, **kw)
        _same(got, want)


def _groups_from_scratch(engine: Engine) -> dict[tuple[Any, ...], int]:
    """The groups counted in Python from the traces (the rule of migration 0022)."""
    out: dict[tuple[Any, ...], int] = {}
    with read_session(engine) as s:
        rows = s.execute(
            text(
                "SELECT ranking_mode, hits_after_filter, top_score, answerable, ambiguous, "
                "ungrounded, CAST(topics AS TEXT), customer_tier FROM traces"
            )
        ).all()
    for mode, hits, score, a, b, c, topics, tier in rows:
        if score is None:
            kind, bin_ = 0, None
        elif isinstance(score, int | float) and abs(score) < 1e15:
            kind, bin_ = 1, math.floor(score * SCORE_BIN_SCALE)
        else:
            kind, bin_ = 2, None
        key = (mode, hits, kind, bin_, _b(a), _b(b), _b(c), topics, tier)
        out[key] = out.get(key, 0) + 1
    return out


def _b(value: object) -> bool | None:
    return None if value is None else bool(value)


def _stored_groups(engine: Engine) -> dict[tuple[Any, ...], int]:
    g = TraceSignalGroup
    with read_session(engine) as s:
        rows = s.execute(select(*(getattr(g, c) for c in replay.GROUP_COLUMNS))).all()
    assert all(r[-1] > 0 for r in rows)
    return {(r[0], r[1], r[2], r[3], _b(r[4]), _b(r[5]), _b(r[6]), r[7], r[8]): r[9] for r in rows}


def test_the_demo_replays_the_same_grouped_as_trace_by_trace(trace_demo_engine: Engine) -> None:
    pif = inforce.in_force(trace_demo_engine)
    flipped = 0
    for proposed in PROPOSALS:
        _both(trace_demo_engine, pif.policy, proposed)
        _both(trace_demo_engine, pif.policy, proposed, examples=10**6)
        flipped += int(
            replay.replay_traces(trace_demo_engine, CLEARED, pif.policy, proposed)
            .flips["traces"]
            .sum()
        )
    assert flipped > 500
    # the demo has audited traces among the flips of a stricter vector threshold
    big = replay.replay_traces(trace_demo_engine, CLEARED, pif.policy, PROPOSALS[0], examples=10**6)
    assert int(big.audited["traces"].sum()) > 0


def test_random_traces_and_policies_on_both_databases(any_engine: Engine) -> None:
    _import(any_engine, 700, 22)
    assert _stored_groups(any_engine) == _groups_from_scratch(any_engine)
    current = parse_policy(TEXT, "in force")
    flips = []
    for proposed in PROPOSALS:
        _both(any_engine, current, proposed)
        _both(any_engine, current, proposed, examples=7, batch=50)
        _both(any_engine, proposed, current)
        got = replay.replay_traces(any_engine, CLEARED, current, proposed)
        assert got.traces == 700 and got.not_replayable > 0
        flips.append(int(got.flips["traces"].sum()))
    # the equalities above compared many flips (the threshold changes) and a few (a topic)
    assert min(flips[:3]) >= 10 and sum(flips) >= 100 and flips[3] >= 5, flips


def test_triggers_follow_updates_and_deletes(any_engine: Engine) -> None:
    _import(any_engine, 300, 23)
    with write_session(any_engine) as s:
        s.execute(text("UPDATE traces SET top_score = 0.55 WHERE id % 7 = 0"))
        s.execute(
            text("UPDATE traces SET ranking_mode = NULL, customer_tier = 'x' WHERE id % 11 = 0")
        )
        s.execute(text("UPDATE traces SET restricted = NOT restricted WHERE id % 5 = 0"))
        s.execute(text("DELETE FROM traces WHERE id % 13 = 0"))
    assert _stored_groups(any_engine) == _groups_from_scratch(any_engine)
    current = parse_policy(TEXT, "in force")
    _both(any_engine, current, PROPOSALS[0])
    with write_session(any_engine) as s:
        s.execute(text("DELETE FROM traces"))
    assert _stored_groups(any_engine) == {}
    assert replay.replay_traces(any_engine, CLEARED, current, PROPOSALS[0]).traces == 0


def test_scores_that_are_not_binned_are_replayed_one_by_one(any_engine: Engine) -> None:
    _import(any_engine, 200, 24)
    odd = ["1e16", "-1e300"]
    if any_engine.dialect.name == "postgresql":
        odd += ["'NaN'", "'Infinity'", "'-Infinity'"]
    else:
        odd += ["9e999", "-9e999"]  # SQLite's infinities (it stores no NaN)
    with write_session(any_engine) as s:
        for i, value in enumerate(odd):
            s.execute(
                text(
                    f"UPDATE traces SET top_score = {value}, ranking_mode = 'vector' "
                    f"WHERE id IN (SELECT id FROM traces ORDER BY id LIMIT 3 OFFSET {3 * i})"
                )
            )
    assert _stored_groups(any_engine) == _groups_from_scratch(any_engine)
    current = parse_policy(TEXT, "in force")
    for proposed in PROPOSALS[:2]:
        _both(any_engine, current, proposed)
    got = replay.replay_traces(any_engine, CLEARED, current, PROPOSALS[0])
    assert got.missing_signals.get("top_score", 0) >= 3 * len(odd)


def test_a_number_column_holding_text_is_refused_as_before(tmp_path: Any) -> None:
    from storage.db import make_engine, migrate

    engine = make_engine(f"sqlite:///{tmp_path / 't.db'}")
    migrate(engine)
    _import(engine, 50, 25)
    with write_session(engine) as s:
        s.execute(text("UPDATE traces SET top_score = 'high' WHERE id = 3"))
    current = parse_policy(TEXT, "in force")
    with pytest.raises(InputError, match="top_score"):
        replay.replay_traces_scan(engine, CLEARED, current, PROPOSALS[0])
    with pytest.raises(InputError, match="top_score"):
        replay.replay_traces(engine, CLEARED, current, PROPOSALS[0])
    engine.dispose()


def test_groups_out_of_step_fall_back_to_reading_every_trace(
    any_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    _import(any_engine, 120, 26)
    current = parse_policy(TEXT, "in force")
    calls: list[int] = []
    scan = replay.replay_traces_scan

    def counted(*a: Any, **kw: Any) -> replay.Replay:
        calls.append(1)
        return scan(*a, **kw)

    monkeypatch.setattr(replay, "replay_traces_scan", counted)
    replay.replay_traces(any_engine, CLEARED, current, PROPOSALS[0])
    assert calls == []  # in step: the groups are read
    with write_session(any_engine) as s:  # a writer past the triggers
        s.execute(
            text(
                "DELETE FROM trace_signal_groups "
                "WHERE k IN (SELECT min(k) FROM trace_signal_groups)"
            )
        )
    with read_session(any_engine) as s:
        groups = int(s.scalar(select(func.sum(TraceSignalGroup.n))) or 0)
        stored = int(s.scalar(select(func.count()).select_from(Trace)) or 0)
    assert groups < stored
    monkeypatch.setattr(replay, "replay_traces_scan", scan)
    want = replay.replay_traces_scan(any_engine, CLEARED, current, PROPOSALS[0])
    monkeypatch.setattr(replay, "replay_traces_scan", counted)
    _same(replay.replay_traces(any_engine, CLEARED, current, PROPOSALS[0]), want)
    assert calls == [1]


def test_the_migration_backfills_the_groups_and_its_downgrade_removes_them(
    any_engine: Engine,
) -> None:
    from alembic import command
    from sqlalchemy import inspect

    from storage.db import alembic_config

    _import(any_engine, 150, 27)
    cfg = alembic_config(any_engine)
    command.downgrade(cfg, "0021")
    assert "trace_signal_groups" not in inspect(any_engine).get_table_names()
    # traces changed while no trigger is in place: the upgrade's backfill counts them as they are
    with write_session(any_engine) as s:
        s.execute(text("UPDATE traces SET top_score = 0.5 WHERE id % 3 = 0"))
        s.execute(text("DELETE FROM traces WHERE id % 10 = 0"))
    command.upgrade(cfg, "head")
    assert _stored_groups(any_engine) == _groups_from_scratch(any_engine)
    _import(any_engine, 40, 28)  # the triggers are back
    assert _stored_groups(any_engine) == _groups_from_scratch(any_engine)
    _both(any_engine, parse_policy(TEXT, "in force"), PROPOSALS[0])


def test_the_replay_stamp_moves_with_the_traces(any_engine: Engine) -> None:
    """The page keeps a replay per stamp: traces added (or removed) move it; reading does not."""
    empty = replay.replay_stamp(any_engine)
    _import(any_engine, 30, 24)
    stamp = replay.replay_stamp(any_engine)
    assert stamp != empty and stamp[0] == 30
    assert replay.replay_stamp(any_engine) == stamp
    with write_session(any_engine) as s:
        s.execute(text("DELETE FROM traces WHERE id = (SELECT max(id) FROM traces)"))
    assert replay.replay_stamp(any_engine) != stamp


def test_the_replay_and_its_stamp_never_count_the_traces_table(any_engine: Engine) -> None:
    """The number of traces comes from the counter the triggers keep with the groups (a
    count(*) took 1-2 s at ten million traces): no statement of the replay or its stamp
    counts the table, and the figures are those of the traces (30 here, one deleted later)."""
    _import(any_engine, 30, 24)
    current = parse_policy(TEXT, "in force")
    seen: list[str] = []

    def listen(_c: Any, _cur: Any, statement: str, *_a: Any) -> None:
        seen.append(" ".join(statement.split()).lower())

    event.listen(any_engine, "before_cursor_execute", listen)
    try:
        got = replay.replay_traces(any_engine, CLEARED, current, PROPOSALS[0])
        stamp = replay.replay_stamp(any_engine)
    finally:
        event.remove(any_engine, "before_cursor_execute", listen)
    assert got.traces == 30 and stamp[0] == 30
    counted = [q for q in seen if re.search(r"count\([^()]*\)( as \w+)? from traces\b", q)]
    assert counted == []
    with write_session(any_engine) as s:
        s.execute(text("DELETE FROM traces WHERE id = (SELECT min(id) FROM traces)"))
    assert replay.replay_stamp(any_engine)[0] == 29
    assert replay.replay_traces(any_engine, CLEARED, current, PROPOSALS[0]).traces == 29


def test_on_postgresql_the_traces_read_one_by_one_come_from_the_score_index_alone(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay reads the traces of the score bins that hold a threshold one statement per
    bin, and every column it reads is in ``ix_traces_top_score`` (migration 0042): with the
    other ways of reading turned off, PostgreSQL plans each as an index-only scan. A bitmap
    scan of the rows read 80,000 random pages a bin at ten million traces (4.8 s from disk)."""
    from storage import db

    engine = db.make_engine(pg_url)
    db.migrate(engine)
    _import(engine, 200, 5)
    seen: list[Any] = []
    plain = db.plain_rows

    def recording(s: Any, stmt: Any) -> list[tuple[Any, ...]]:
        seen.append(stmt)
        return plain(s, stmt)

    monkeypatch.setattr(db, "plain_rows", recording)
    current = parse_policy(TEXT, "in force")
    got = replay.replay_traces(engine, CLEARED, current, PROPOSALS[0])
    monkeypatch.undo()
    _same(got, replay.replay_traces_scan(engine, CLEARED, current, PROPOSALS[0]))
    with engine.connect() as conn:
        conn.exec_driver_sql("SET enable_seqscan = off")
        conn.exec_driver_sql("SET enable_bitmapscan = off")
        plans = []
        for stmt in seen:
            compiled = stmt.compile(conn, compile_kwargs={"render_postcompile": True})
            sql = str(compiled)
            if "top_score >=" not in sql or "ORDER BY" in sql:
                continue  # the groups, and the examples read in id order
            plans.append(
                "\n".join(
                    str(r[0])
                    for r in conn.exec_driver_sql("EXPLAIN " + sql, compiled.construct_params())
                )
            )
    engine.dispose()
    # two bins or more, a statement each (one statement of every bin is a walk of the whole
    # index with a filter, or a bitmap scan of the rows)
    assert len(plans) >= 2, plans
    for plan in plans:
        assert "Index Only Scan using" in plan and "top_score" in plan, plan
        assert "Index Scan using" not in plan, plan
