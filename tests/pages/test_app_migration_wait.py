"""A server that cannot migrate because another process holds the migration lock past
WORKBENCH_MIGRATE_WAIT shows a page that says so (with the lock's holder), not a traceback;
once the lock is free, a reload opens the workbench."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command

from storage.db import alembic_config, make_engine
from storage.migrating import migration_lock
from tests.helpers.pages import app


def test_a_held_migration_lock_shows_a_page_that_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = make_engine(url)
    command.upgrade(alembic_config(engine), "0025")
    monkeypatch.setenv("WORKBENCH_MIGRATE_WAIT", "0")
    with migration_lock(engine, wait=0):
        at = app(url, monkeypatch).run()
        assert not at.exception
        assert [e.value for e in at.error] == ["The workbench cannot open its database yet\\."]
        assert "migration lock" in at.code[0].value
    at.run()
    assert not at.exception
    assert not at.error
    engine.dispose()
