"""Servers, workers and commands started together on one database: exactly one migrates under
the migration lock (PostgreSQL's advisory lock, SQLite's lock file), the others wait and start
on the migrated schema, none fails, and every migration runs once (issue 33, item 1).

The processes are real: the ``workbench migrate`` command of this virtual environment, started
N at a time, released together by a start file, or queued behind a lock this test holds until
every one of them says it waits; and two ``serve.py`` servers opened at the same moment. What
each did is read from its output ("migrated from X to Y" / "schema at head (Y)") and its log
lines on the ``workbench.migrate`` logger.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, text

from review.core.errors import WorkbenchError
from storage import migrating
from storage.db import alembic_config, make_engine, migrate
from storage.models import Base
from tests.helpers.browser import chromium_page, streamlit_server, wait_idle
from tests.helpers.paths import ROOT

N = 4
OLD = "0025"  # an older revision the "old database" tests start from
DEADLINE_S = 180.0  # generous: four processes importing the app on a busy 2-core machine

WORKBENCH = Path(sys.executable).parent / "workbench"

# One process of the "started together" tests: import everything, say it is ready, wait for
# the start file, then run `workbench migrate` (the same entry point as the console script).
# A process that holds the migration lock (as one migrating does) until it is killed.
HOLDER = """
import sys, pathlib, time
from storage import migrating
from storage.db import make_engine
url, ready = sys.argv[1], pathlib.Path(sys.argv[2])
with migrating.migration_lock(make_engine(url), wait=0):
    ready.touch()
    time.sleep(3600)
"""

TOGETHER = """
import sys, time, pathlib
ready, go = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
from review.cli.main import main
ready.touch()
deadline = time.monotonic() + 300
while not go.exists():
    if time.monotonic() > deadline:
        sys.exit("no start signal")
    time.sleep(0.005)
main(["migrate"], prog_name="workbench")
"""


def head() -> str:
    cfg = alembic_config(make_engine("sqlite://"))
    heads = ScriptDirectory.from_config(cfg).get_heads()
    assert len(heads) == 1
    return str(heads[0])


@dataclass
class Run:
    proc: subprocess.Popen[bytes]
    out: Path
    err: Path

    def stdout(self) -> str:
        return self.out.read_text(encoding="utf-8", errors="replace")

    def stderr(self) -> str:
        return self.err.read_text(encoding="utf-8", errors="replace")


@contextlib.contextmanager
def processes(cmds: list[list[str]], tmp_path: Path, **env: str) -> Iterator[list[Run]]:
    """Start every command (stdout and stderr to files); kill whatever still runs at the end."""
    runs: list[Run] = []
    environ = dict(os.environ, **env)
    tmp_path.mkdir(parents=True, exist_ok=True)
    try:
        for i, cmd in enumerate(cmds):
            out, err = tmp_path / f"p{i}.out", tmp_path / f"p{i}.err"
            with out.open("wb") as o, err.open("wb") as e:
                proc = subprocess.Popen(cmd, cwd=ROOT, env=environ, stdout=o, stderr=e)
            runs.append(Run(proc, out, err))
        yield runs
    finally:
        for run in runs:
            if run.proc.poll() is None:
                run.proc.kill()
            run.proc.wait()


def wait_until(what: str, check: object, runs: list[Run], deadline_s: float = DEADLINE_S) -> None:
    """Poll ``check()`` until true; fail (with every process's output) after the deadline or
    when a process ends before it."""
    assert callable(check)
    deadline = time.monotonic() + deadline_s
    while not check():
        ended = [r for r in runs if r.proc.poll() is not None]
        if ended or time.monotonic() > deadline:
            pytest.fail(f"{what}: {'a process ended' if ended else 'timed out'}\n{report(runs)}")
        time.sleep(0.05)


def finish(runs: list[Run]) -> None:
    for run in runs:
        try:
            run.proc.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"a migrate process did not finish\n{report(runs)}")


def report(runs: list[Run]) -> str:
    return "\n".join(
        f"--- process {i} (exit {r.proc.poll()})\n{r.stdout()}{r.stderr()}"
        for i, r in enumerate(runs)
    )


def revisions(url: str) -> list[str]:
    eng = make_engine(url)
    try:
        with eng.connect() as c:
            if not inspect(c).has_table("alembic_version"):
                return []
            return [str(v) for v in c.scalars(text("SELECT version_num FROM alembic_version"))]
    finally:
        eng.dispose()


def tables(url: str) -> set[str]:
    eng = make_engine(url)
    try:
        with eng.connect() as c:
            return set(inspect(c).get_table_names())
    finally:
        eng.dispose()


def start_at(url: str, revision: str | None) -> None:
    """An empty database (None) or one an older workbench migrated to ``revision``."""
    if revision is None:
        return
    eng = make_engine(url)
    try:
        command.upgrade(alembic_config(eng), revision)
    finally:
        eng.dispose()


def check_once(runs: list[Run], url: str, before: str | None) -> None:
    """Every process came up; exactly one migrated (from ``before`` to head, once), the others
    found the schema at head; the schema is whole and at head."""
    h = head()
    assert all(r.proc.returncode == 0 for r in runs), report(runs)
    start = before or "an empty database"
    migrated = [r for r in runs if f"migrated from {start} to {h}" in r.stdout()]
    at_head = [r for r in runs if f"schema at head ({h})" in r.stdout()]
    assert len(migrated) == 1 and len(at_head) == N - 1, report(runs)
    # the migration ran once: one process's log says it started one
    logs = "".join(r.stderr() for r in runs)
    assert logs.count(f"migrating from {start} to {h}") == 1, report(runs)
    assert "Traceback" not in logs, report(runs)
    assert revisions(url) == [h]
    assert set(Base.metadata.tables) <= tables(url)


# --- holding the lock the way a migrating process does ------------------------------------


@contextlib.contextmanager
def lock_held(url: str) -> Iterator[str]:
    """Hold the migration lock of ``url``'s database; yields how a waiter names the holder."""
    if url.startswith("postgresql"):
        eng = create_engine(url, isolation_level="AUTOCOMMIT")
        try:
            with eng.connect() as c:
                c.execute(text("SELECT pg_advisory_lock(:k)"), {"k": migrating.MIGRATION_LOCK_KEY})
                pid = c.scalar(text("SELECT pg_backend_pid()"))
                yield f"pid {pid} (a PostgreSQL backend"
                c.execute(
                    text("SELECT pg_advisory_unlock(:k)"), {"k": migrating.MIGRATION_LOCK_KEY}
                )
        finally:
            eng.dispose()
        return
    eng = make_engine(url)
    path = migrating.lock_file(eng)
    eng.dispose()
    assert path is not None
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        holder = f"pid {os.getpid()} on {socket.gethostname()} (the test)"
        os.ftruncate(fd, 0)
        os.pwrite(fd, holder.encode(), 0)
        yield holder
    finally:
        os.close(fd)


def waiting(run: Run) -> bool:
    return "waiting for the migration lock held by" in run.stderr()


# --- N processes at once ------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.parametrize("before", [None, OLD], ids=["empty", "old"])
def test_processes_started_together_migrate_once(
    any_url: str, before: str | None, tmp_path: Path
) -> None:
    start_at(any_url, before)
    go = tmp_path / "go"
    ready = [tmp_path / f"ready{i}" for i in range(N)]
    cmds = [[sys.executable, "-c", TOGETHER, str(r), str(go)] for r in ready]
    with processes(cmds, tmp_path, WORKBENCH_DATABASE_URL=any_url) as runs:
        wait_until("every process ready", lambda: all(r.exists() for r in ready), runs)
        go.touch()  # all four migrate at the same moment
        finish(runs)
    check_once(runs, any_url, before)


@pytest.mark.postgres
def test_processes_queued_behind_the_lock_wait_and_one_migrates(
    any_url: str, tmp_path: Path
) -> None:
    """The lock is held (as by a process migrating) while N ``workbench migrate`` commands
    start on an old database: each says whom it waits for; released, exactly one migrates,
    the others wait for it and find the schema at head. (From an empty database the same
    code runs: the test above.)"""
    before = OLD
    assert WORKBENCH.exists(), f"no workbench command beside {sys.executable}"
    start_at(any_url, before)
    with contextlib.ExitStack() as held:
        holder = held.enter_context(lock_held(any_url))
        cmds = [[str(WORKBENCH), "migrate"]] * N
        with processes(cmds, tmp_path, WORKBENCH_DATABASE_URL=any_url) as runs:
            wait_until("every process waiting", lambda: all(waiting(r) for r in runs), runs)
            for run in runs:
                assert f"waiting for the migration lock held by {holder}" in run.stderr()
            # nobody went past the lock
            assert revisions(any_url) == [before]
            held.close()  # the lock is let go: the waiters go on
            finish(runs)
    check_once(runs, any_url, before)
    outs = [r.stdout() for r in runs]
    assert sum("after waiting for the migration lock" in o for o in outs) == N, outs


@pytest.mark.postgres
def test_a_holder_that_dies_lets_the_waiter_migrate(any_url: str, tmp_path: Path) -> None:
    """A process killed while it holds the lock (SIGKILL: no clean-up of its own) frees it:
    PostgreSQL ends its session, the OS its file lock; the waiting ``workbench migrate``
    then migrates."""
    ready = tmp_path / "holding"
    holder_cmd = [sys.executable, "-c", HOLDER, any_url, str(ready)]
    with processes([holder_cmd], tmp_path / "holder") as holder:
        wait_until("the holder holds the lock", ready.exists, holder)
        with processes(
            [[str(WORKBENCH), "migrate"]], tmp_path, WORKBENCH_DATABASE_URL=any_url
        ) as runs:
            wait_until("the migrate waits", lambda: waiting(runs[0]), runs)
            assert revisions(any_url) == []
            holder[0].proc.kill()
            finish(runs)
    (run,) = runs
    assert run.proc.returncode == 0, report(runs)
    said = f"migrated from an empty database to {head()}, after waiting for the migration lock"
    assert said in run.stdout(), report(runs)
    assert revisions(any_url) == [head()]


@pytest.mark.postgres
def test_a_waiter_gives_up_at_its_deadline_naming_the_lock_and_its_holder(
    any_url: str, tmp_path: Path
) -> None:
    start_at(any_url, OLD)
    old_tables = tables(any_url)
    with (
        lock_held(any_url) as holder,
        processes(
            [[str(WORKBENCH), "migrate"]],
            tmp_path,
            WORKBENCH_DATABASE_URL=any_url,
            WORKBENCH_MIGRATE_WAIT="1",
        ) as runs,
    ):
        finish(runs)
    (run,) = runs
    assert run.proc.returncode == 1, report(runs)
    err = run.stderr()
    assert "error: the schema migration lock" in err, err
    if any_url.startswith("postgresql"):
        assert f"PostgreSQL advisory lock {migrating.MIGRATION_LOCK_KEY}" in err, err
    else:
        assert ".migrate-lock" in err, err
    assert f"still held by {holder}" in err and "WORKBENCH_MIGRATE_WAIT" in err, err
    assert "nothing was changed" in err and "Traceback" not in err, err
    # nothing half-done: still at the old revision, no table of a later migration
    assert revisions(any_url) == [OLD]
    assert tables(any_url) == old_tables


# --- two app servers -------------------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.postgres
def test_two_servers_opened_at_the_same_moment_on_an_empty_database(
    pg_url: str, tmp_path: Path
) -> None:
    """Two ``serve.py`` servers on one empty PostgreSQL database, each opened by a browser at
    the same moment: a server migrates when its first page runs (``pages/ui.py``'s engine),
    so both first runs reach the migration together. Both show the first-run page (create the
    first administrator), neither an error; one server's log says it migrated, the other's
    that the schema was at head; the schema is at head once."""
    h = head()
    with (
        streamlit_server(ROOT / "app.py", tmp_path, WORKBENCH_DATABASE_URL=pg_url) as one,
        streamlit_server(ROOT / "app.py", tmp_path, WORKBENCH_DATABASE_URL=pg_url) as two,
        chromium_page() as first,
    ):
        assert revisions(pg_url) == []  # a server does not migrate before a page runs
        second = first.context.browser.new_context().new_page()  # type: ignore[union-attr]
        first.goto(one, wait_until="commit")
        second.goto(two, wait_until="commit")
        for page in (first, second):
            wait_idle(page)
            page.get_by_text("The database has no users yet").wait_for(timeout=120_000)
            assert not page.locator("[data-testid='stException']").count()
        logs = [
            (tmp_path / f"streamlit-{base.rsplit(':', 1)[1]}.log").read_text(encoding="utf-8")
            for base in (one, two)
        ]
    said = "\n".join(logs)
    assert said.count(f"migrated from an empty database to {h}") == 1, said
    assert said.count(f"schema at head ({h})") == 1, said
    assert "Traceback" not in said, said
    assert revisions(pg_url) == [h]
    assert set(Base.metadata.tables) <= tables(pg_url)


# --- in one process -------------------------------------------------------------------------


@pytest.mark.postgres
def test_migrate_says_what_it_did_and_a_database_at_head_is_left_alone(
    any_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="workbench.migrate")
    eng = make_engine(any_url)
    try:
        start_at(any_url, OLD)
        first = migrate(eng)
        assert (first.before, first.after, first.upgraded, first.waited) == (
            OLD,
            head(),
            True,
            False,
        )
        assert first.describe() == f"migrated from {OLD} to {head()}"
        again = migrate(eng)
        assert (again.before, again.after, again.upgraded, again.waited) == (
            head(),
            head(),
            False,
            False,
        )
        assert again.describe() == f"schema at head ({head()})"
    finally:
        eng.dispose()
    said = [r.getMessage() for r in caplog.records if r.name == "workbench.migrate"]
    assert said == [
        f"migrating from {OLD} to {head()}",
        f"migrated from {OLD} to {head()}",
        f"schema at head ({head()})",
    ]


@pytest.mark.postgres
def test_a_database_a_newer_workbench_migrated_is_refused_untouched(any_url: str) -> None:
    eng = make_engine(any_url)
    try:
        migrate(eng)
        with eng.begin() as c:
            c.execute(text("UPDATE alembic_version SET version_num = '9999'"))
        with pytest.raises(WorkbenchError, match="revision 9999, which this version"):
            migrate(eng)
        assert revisions(any_url) == ["9999"]
    finally:
        eng.dispose()


@pytest.mark.parametrize("value", ["soon", "-1", "nan", "inf"])
def test_a_wait_that_is_not_a_number_of_seconds_is_refused(
    value: str, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(migrating.WAIT_ENV, value)
    eng = make_engine(sqlite_url)
    try:
        with pytest.raises(
            WorkbenchError, match=f"WORKBENCH_MIGRATE_WAIT must be .* not '{value}'"
        ):
            migrate(eng)
        assert revisions(sqlite_url) == []
    finally:
        eng.dispose()


def test_an_in_memory_database_migrates_without_a_lock_file(tmp_path: Path) -> None:
    eng = make_engine("sqlite://")
    try:
        assert migrating.lock_file(eng) is None
        assert migrate(eng).upgraded
    finally:
        eng.dispose()
    file_eng = make_engine(f"sqlite:///{tmp_path / 'x.db'}")
    assert migrating.lock_file(file_eng) == tmp_path / "x.db.migrate-lock"
    file_eng.dispose()


def test_the_lock_key_is_the_documented_one(sqlite_url: str) -> None:
    key = migrating.MIGRATION_LOCK_KEY
    assert key.to_bytes(8, "big") == b"WBMIGRAT" and key < 2**63
    assert (key >> 32, key & 0xFFFFFFFF) == (1463962953, 1196573012)
    assert str(key) in (ROOT / "storage" / "migrating.py").read_text(encoding="utf-8")
