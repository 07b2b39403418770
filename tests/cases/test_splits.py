"""Split assignment: stratified, reproducible from the seed, and locked cases never move."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, text

from review.cases import cases, splits
from review.core.errors import PermissionDenied
from review.policy import signoff
from storage.db import make_engine, migrate
from tests.helpers.actors import make_actor

INES = make_actor("annotator", "ines@example.org")


def test_reassignment_is_reproducible_and_stratified(demo_engine: Engine) -> None:
    with demo_engine.begin() as c:  # no sign-off has used these cases yet
        c.execute(text("delete from split_locks"))
    a = splits.plan(demo_engine, seed=11, keep_existing=False)
    b = splits.plan(demo_engine, seed=11, keep_existing=False)
    other = splits.plan(demo_engine, seed=12, keep_existing=False)
    assert list(a.cases["proposed"]) == list(b.cases["proposed"])
    assert list(a.cases["proposed"]) != list(other.cases["proposed"])
    # every stratum follows 40/30/30 within rounding (largest remainder)
    for _, row in a.counts.iterrows():
        n = row.sum()
        assert abs(row.get("train", 0) - 0.4 * n) < 1
        assert abs(row.get("test", 0) - 0.3 * n) < 1


def test_keep_existing_places_nothing_new_when_all_cases_have_a_split(demo_engine: Engine) -> None:
    p = splits.plan(demo_engine, seed=1, keep_existing=True)
    assert p.moves.empty


def test_locked_cases_never_move_and_the_seed_is_recorded(demo_engine: Engine) -> None:
    locked = set(signoff.locked_case_ids(demo_engine, range(1, 200)))
    assert locked, "the demo sign-offs lock the cases they used"
    p = splits.plan(demo_engine, seed=99, keep_existing=False)
    moved_ids = set(p.moves["case_id"])
    assert not moved_ids & locked
    n = splits.apply(demo_engine, INES, seed=99, keep_existing=False)
    assert n == len(p.moves) > 0
    rec = splits.last_assignment(demo_engine)
    assert rec is not None and rec["seed"] == 99 and rec["by"] == INES.email
    after = {
        r.id: r.split
        for r in cases.list_cases(demo_engine, cases.CaseFilter(status="ready"), page_size=500)
    }
    for m in p.moves.itertuples():
        assert after[m.case_id] == m.proposed
    with pytest.raises(PermissionDenied):
        splits.apply(demo_engine, make_actor("compliance"), seed=1)


def test_the_cases_in_scope_of_a_split_larger_than_a_statements_parameters(pg_url: str) -> None:
    """70,000 ready test cases (PostgreSQL takes at most 65,535 parameters in a statement):
    every one is in scope with its slices, as the release gate and the monthly review need
    (the Monthly review page failed on a database of 500,000 cases)."""
    pg_engine = make_engine(pg_url)
    migrate(pg_engine)
    n = 70_000
    with pg_engine.begin() as c:
        c.execute(
            text(
                "INSERT INTO cases (key, question, identity_name, identity_scopes, "
                "expected_decision, reason_codes, category, split, status, notes, version, "
                "created_at, updated_at) "
                "SELECT 'K' || lpad(g::text, 6, '0'), 'q', 'i', '[]', 'abstain', '[]', 'c', "
                "CASE WHEN g % 10 = 0 THEN 'train' ELSE 'test' END, 'ready', '', 1, now(), "
                "now() "
                "FROM generate_series(1, :n) g"
            ),
            {"n": n},
        )
        c.execute(
            text(
                "INSERT INTO case_slices (case_id, slice) SELECT id, 'every' FROM cases "
                "UNION ALL SELECT id, 'third' FROM cases WHERE id % 3 = 0"
            )
        )
        ids: dict[str, int] = dict(c.execute(text("SELECT key, id FROM cases")).all())
    scope = splits.cases_in_scope(pg_engine, "test")
    assert len(scope) == n - n // 10
    assert list(scope["key"]) == sorted(scope["key"])
    for key, sl in zip(scope["key"], scope["slices"], strict=True):
        assert sl == (["every", "third"] if ids[key] % 3 == 0 else ["every"]), key
    assert len(splits.cases_in_scope(pg_engine, "all")) == n
    pg_engine.dispose()
