"""Storage: migrations, constraints, concurrency and stale writes, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading

import pytest
from alembic import command
from sqlalchemy import Engine, inspect, select, text
from sqlalchemy.exc import IntegrityError

from storage import changes
from storage.db import alembic_config, read_session, run_write, write_session
from storage.models import AuditLog, Base, Case, Counter, Document, User


def test_migrations_create_every_table_and_match_the_models(any_engine: Engine) -> None:
    tables = set(inspect(any_engine).get_table_names())
    assert set(Base.metadata.tables) <= tables
    assert "alembic_version" in tables
    # `alembic check`: the models and the migrations agree (no pending autogenerate diff)
    command.check(alembic_config(any_engine))


def test_upgrade_head_twice_is_a_no_op(any_engine: Engine) -> None:
    command.upgrade(alembic_config(any_engine), "head")
    with any_engine.connect() as c:
        assert c.execute(text("select count(*) from alembic_version")).scalar_one() == 1


def test_foreign_keys_are_enforced(any_engine: Engine) -> None:
    with pytest.raises(IntegrityError), write_session(any_engine) as s:
        s.add(
            Case(
                key="C-1",
                question="q?",
                identity_name="x",
                identity_scopes=[],
                expected_decision="answer",
                reason_codes=[],
                category="in_scope",
                split="test",
                status="ready",
                family_id=424242,
            )
        )
        s.flush()


def test_unique_document_versions(any_engine: Engine) -> None:
    def add(s):
        for _ in range(2):
            s.add(
                Document(
                    doc_key="D",
                    version=1,
                    title="t",
                    body="b",
                    authority="policy",
                    owner="o",
                    access_scope="public",
                    jurisdiction="global",
                    sha256="x",
                )
            )
        s.flush()

    with pytest.raises(IntegrityError):
        run_write(any_engine, add)


def test_concurrent_read_modify_write_loses_nothing(any_engine: Engine) -> None:
    """4 threads x 100 increments of one row, each a read then a write: the total is exact."""
    run_write(any_engine, lambda s: s.add(Counter(name="hits", value=0, version=1)))
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(100):

                def bump(s):
                    row = s.get(Counter, "hits", with_for_update=True, populate_existing=True)
                    row.value = row.value + 1

                run_write(any_engine, bump)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    with read_session(any_engine) as s:
        assert s.get(Counter, "hits").value == 400  # type: ignore[union-attr]


def _user(s, email: str = "u@example.org") -> int:
    u = User(
        email=email,
        name="U",
        roles=["annotator"],
        clearance=False,
        active=True,
        updated_by="setup@example.org",
    )
    s.add(u)
    s.flush()
    return int(u.id)


def test_stale_write_is_refused_naming_who_changed_it(any_engine: Engine) -> None:
    uid = run_write(any_engine, _user)
    # Alice and Bob both open version 1; Alice saves first.
    run_write(
        any_engine,
        lambda s: changes.versioned_update(
            s, User, uid, 1, {"name": "Alice's edit"}, "alice@example.org", "user"
        ),
    )
    with pytest.raises(changes.StaleWriteError) as info:
        run_write(
            any_engine,
            lambda s: changes.versioned_update(
                s, User, uid, 1, {"name": "Bob's edit"}, "bob@example.org", "user"
            ),
        )
    assert "alice@example.org" in str(info.value)
    assert "Nothing was saved" in str(info.value)
    with read_session(any_engine) as s:
        row = s.get(User, uid)
        assert row is not None and row.name == "Alice's edit" and row.version == 2


def test_every_change_is_audited_with_before_and_after(any_engine: Engine) -> None:
    uid = run_write(any_engine, _user)
    run_write(
        any_engine,
        lambda s: changes.versioned_update(
            s, User, uid, 1, {"name": "Renamed"}, "admin@example.org", "user"
        ),
    )
    with read_session(any_engine) as s:
        entry = s.scalars(select(AuditLog).where(AuditLog.entity == "user")).one()
    assert entry.actor == "admin@example.org"
    assert entry.before is not None and entry.before["name"] == "U"
    assert entry.after is not None and entry.after["name"] == "Renamed"
    assert entry.after["version"] == 2


def test_failed_unit_of_work_writes_nothing(any_engine: Engine) -> None:
    def work(s):
        _user(s, "first@example.org")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        run_write(any_engine, work)
    with read_session(any_engine) as s:
        assert s.scalars(select(User)).all() == []


def test_sqlite_connections_use_wal_foreign_keys_and_busy_timeout(engine: Engine) -> None:
    with engine.connect() as c:
        assert c.exec_driver_sql("PRAGMA journal_mode").scalar_one() == "wal"
        assert c.exec_driver_sql("PRAGMA foreign_keys").scalar_one() == 1
        assert c.exec_driver_sql("PRAGMA busy_timeout").scalar_one() >= 5000


def test_sqlite_write_sessions_take_the_write_lock_at_begin(engine: Engine) -> None:
    """BEGIN IMMEDIATE: a second writer waits instead of reading stale data then failing."""
    with write_session(engine) as s:
        s.execute(select(1))
        other = engine.raw_connection()
        try:
            cur = other.cursor()
            cur.execute("PRAGMA busy_timeout=50")
            with pytest.raises(Exception, match="locked"):
                cur.execute("BEGIN IMMEDIATE")
        finally:
            other.close()


def test_a_database_from_the_first_migration_upgrades_with_its_data(any_url: str) -> None:
    from storage.db import make_engine

    eng = make_engine(any_url)
    cfg = alembic_config(eng)
    command.upgrade(cfg, "0001")
    with eng.begin() as c:
        c.execute(
            text(
                "insert into users (email, name, roles, clearance, active, version, created_at, "
                "updated_at) values ('old@example.org', 'Old', '[\"admin\"]', true, true, 1, "
                "'2025-01-01 00:00:00+00:00', '2025-01-01 00:00:00+00:00')"
            )
        )
    command.upgrade(cfg, "head")
    with read_session(eng) as s:
        row = s.scalars(select(User)).one()
        assert row.email == "old@example.org" and row.roles == ["admin"]
    command.check(cfg)
    eng.dispose()
