"""Shared fixtures: temp-file SQLite databases, a throwaway PostgreSQL, the demo data."""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text

from review.admin import users
from review.core.identity import SYSTEM, Actor
from review.core.taxonomy import Taxonomy, load_taxonomy
from review.demo import fixtures, tracedemo
from storage.db import dispose_engines, make_engine, migrate
from tests.helpers.actors import make_actor
from tests.helpers.paths import ROOT
from tests.helpers.pgserver import PgServer

TEST_TRACES = 2_400  # the demo's trace generator at test size (seed-demo makes 20,000)


# The modules whose tests take longest (browser journeys, the clearance sweeps, the 8-process
# concurrency tests, PostgreSQL backups, every page degraded, large random comparisons), in
# about the order of their longest test. `make test` runs the tests in parallel workers that
# take one test at a time from the front of the list (`--dist loadgroup --maxschedchunk 1`; a
# group, such as the modules that start a Phoenix, goes to one worker whole): with the long
# ones first, the workers finish together instead of one running a journey while the other
# is idle. The order of the tests within a module, and of the other modules, is kept.
LONG_FIRST = (
    "tests/browser/",
    "tests/deploy/",
    "tests/jobs/test_worker_killed.py",
    "tests/storage/test_migrate_together.py",
    "tests/live/test_phoenix_sync.py",
    "tests/live/test_push_phoenix.py",
    "tests/labels/test_labelstudio_live.py",
    "tests/storage/test_concurrency.py",
    "tests/test_access.py",
    "tests/admin/test_backup.py",
    "tests/pages/test_degraded_pages.py",
    "tests/pages/test_pages.py",
    "tests/audits/test_audits.py",
    "tests/labels/test_agreement_sql.py",
    "tests/evaluation/test_evalruns.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.nodeid
        for i, prefix in enumerate(LONG_FIRST):
            if path.startswith(prefix):
                return i
        return len(LONG_FIRST)

    items.sort(key=rank)  # stable: the order inside each group stays as collected


@pytest.fixture(scope="session")
def tax() -> Taxonomy:
    return load_taxonomy(ROOT / "policies" / "taxonomy.yaml")


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'wb.db'}"


@pytest.fixture
def engine(sqlite_url: str) -> Iterator[Engine]:
    eng = make_engine(sqlite_url)
    migrate(eng)
    yield eng
    eng.dispose()


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory: pytest.TempPathFactory, tax: Taxonomy) -> Path:
    """The demo database built once; tests get a copy."""
    path = tmp_path_factory.mktemp("demo") / "demo.db"
    eng = make_engine(f"sqlite:///{path}")
    migrate(eng)
    fixtures.build_demo(eng, tax, trace_count=TEST_TRACES)
    with eng.connect() as c:
        c.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    eng.dispose()
    return path


@pytest.fixture(scope="session")
def demo_base_template(tmp_path_factory: pytest.TempPathFactory, tax: Taxonomy) -> Path:
    """The demo without the case-builder variants (for tests that build their own)."""
    path = tmp_path_factory.mktemp("demo_base") / "demo.db"
    eng = make_engine(f"sqlite:///{path}")
    migrate(eng)
    fixtures.build_demo(eng, tax, variants=False, with_traces=False)
    with eng.connect() as c:
        c.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    eng.dispose()
    return path


@pytest.fixture(scope="session")
def demo_notraces_template(tmp_path_factory: pytest.TempPathFactory, tax: Taxonomy) -> Path:
    """The demo without production traces (and so without audits), for tests that add their
    own traces and count them."""
    path = tmp_path_factory.mktemp("demo_notraces") / "demo.db"
    eng = make_engine(f"sqlite:///{path}")
    migrate(eng)
    fixtures.build_demo(eng, tax, with_traces=False)
    with eng.connect() as c:
        c.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    eng.dispose()
    return path


@pytest.fixture
def demo_url(tmp_path: Path, demo_template: Path) -> str:
    target = tmp_path / "demo.db"
    shutil.copy(demo_template, target)
    return f"sqlite:///{target}"


@pytest.fixture
def demo_engine(demo_url: str) -> Iterator[Engine]:
    eng = make_engine(demo_url)
    yield eng
    eng.dispose()


@pytest.fixture(autouse=True)
def _no_cached_engines() -> Iterator[None]:
    yield
    dispose_engines()


# --- PostgreSQL ----------------------------------------------------------------------

_pg_counter = itertools.count()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    if os.environ.get("WORKBENCH_SKIP_POSTGRES"):
        pytest.skip("WORKBENCH_SKIP_POSTGRES is set")
    try:
        server = PgServer()
    except FileNotFoundError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required in CI: {exc}")
        pytest.skip(f"PostgreSQL tests skipped: {exc} (apt-get install postgresql)")
    try:
        url = server.start()
    except Exception as exc:
        server.stop()
        pytest.fail(f"could not start a throwaway PostgreSQL: {exc}")
    yield url
    server.stop()


@pytest.fixture
def pg_url(pg_server: str) -> str:
    name = f"wb_test_{os.getpid()}_{next(_pg_counter)}"
    admin = create_engine(pg_server, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return pg_server.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture(params=["sqlite", "postgresql"])
def any_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'any.db'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def any_engine(any_url: str) -> Iterator[Engine]:
    eng = make_engine(any_url)
    migrate(eng)
    yield eng
    eng.dispose()


# --- actors ----------------------------------------------------------------------------


@pytest.fixture
def admin() -> Actor:
    return make_actor("admin", clearance=True, uid=1)


@pytest.fixture
def annotator() -> Actor:
    return make_actor("annotator", uid=2)


@pytest.fixture
def empty_url(tmp_path: Path) -> str:
    """A database with one admin and nothing else."""
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    eng = make_engine(url)
    migrate(eng)
    users.add_user(eng, SYSTEM, "solo@example.org", "Solo Admin", ["admin", "annotator"], True)
    eng.dispose()
    return url


@pytest.fixture(scope="session")
def trace_demo_template(
    demo_template: Path, tmp_path_factory: pytest.TempPathFactory, tax: Taxonomy
) -> Path:
    path = tmp_path_factory.mktemp("tracedemo") / "demo.db"
    shutil.copy(demo_template, path)
    eng = make_engine(f"sqlite:///{path}")
    tracedemo.build_demo_traces(eng, tax)
    with eng.connect() as c:
        c.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    eng.dispose()
    return path


@pytest.fixture
def trace_demo_url(tmp_path: Path, trace_demo_template: Path) -> str:
    target = tmp_path / "tracedemo.db"
    shutil.copy(trace_demo_template, target)
    return f"sqlite:///{target}"


@pytest.fixture
def trace_demo_engine(trace_demo_url: str) -> Iterable[Engine]:
    eng = make_engine(trace_demo_url)
    yield eng
    eng.dispose()
