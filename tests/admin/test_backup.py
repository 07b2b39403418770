"""Backup and restore (`workbench backup FILE`, `workbench restore FILE`): an exact round trip
of every table on SQLite and PostgreSQL, a backup taken while the app writes, and every
refusal (not a backup, the other database kind, a newer schema, a database holding data)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import Engine, MetaData, create_engine, select, text

from review.admin import backup
from review.cli.main import main
from review.core.errors import InputError, StaleWriteError
from review.core.taxonomy import Taxonomy
from review.demo import fixtures
from review.labels import labeling
from review.policy import signoff
from storage.backup import known_revisions
from storage.db import make_engine, migrate, read_session
from storage.models import AuditLog, Case, Label, SignOff
from tests.helpers.actors import make_actor

DEMO_TRACES = 300


def cli(url: str, *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"WORKBENCH_DATABASE_URL": url})


def dump(url: str) -> dict[str, list[dict[str, Any]]]:
    """Every row of every table (alembic_version included), ordered by primary key."""
    eng = create_engine(url)
    try:
        meta = MetaData()
        meta.reflect(eng)
        out: dict[str, list[dict[str, Any]]] = {}
        with eng.connect() as conn:
            for name, tbl in sorted(meta.tables.items()):
                order = list(tbl.primary_key.columns) or list(tbl.columns)
                out[name] = [dict(r._mapping) for r in conn.execute(select(tbl).order_by(*order))]
        return out
    finally:
        eng.dispose()


def demo_at(url: str, tax: Taxonomy) -> None:
    eng = make_engine(url)
    migrate(eng)
    fixtures.build_demo(eng, tax, trace_count=DEMO_TRACES)
    eng.dispose()


@pytest.fixture
def other_url(any_url: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A second, empty database of the same kind as ``any_url``."""
    if any_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path / 'restored' / 'wb.db'}"
    server: str = request.getfixturevalue("pg_server")
    name = any_url.rsplit("/", 1)[1] + "_restored"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return server.rsplit("/", 1)[0] + f"/{name}"


def test_round_trip_is_exact_and_the_signoff_chain_verifies(
    any_url: str, other_url: str, tmp_path: Path, tax: Taxonomy
) -> None:
    demo_at(any_url, tax)
    before = dump(any_url)
    # the comparison is not vacuous: the history tables hold rows
    for name in ("audit_log", "signoffs", "labels", "policy_versions", "traces", "cases"):
        assert before[name], name
    assert before["alembic_version"][0]["version_num"] == known_revisions()[0]

    file = tmp_path / "wb.backup"
    made = cli(any_url, "backup", str(file))
    assert made.exit_code == 0, made.output
    assert "backup written to" in made.output
    kind = "sqlite" if any_url.startswith("sqlite") else "pgdump"
    assert backup.inspect_file(file) == (kind, known_revisions()[0])

    done = cli(other_url, "restore", str(file))
    assert done.exit_code == 0, done.output
    assert "sign-off chain intact" in done.output
    after = dump(other_url)
    assert after.keys() == before.keys()
    for name in before:
        assert after[name] == before[name], f"table {name} differs after the round trip"
    assert dump(any_url) == before  # the backup changed nothing in the source
    verified = cli(other_url, "verify-signoffs")
    assert verified.exit_code == 0 and "chain intact" in verified.output

    # the restored database is a working workbench: ids continue, writes land
    eng = make_engine(other_url)
    try:
        case_id = labeling.next_case(eng, make_actor("annotator", "new@example.org"))
        assert case_id is not None
        labeling.submit(
            eng,
            make_actor("annotator", "new@example.org"),
            case_id,
            labeling.LabelIn("answer"),
            None,
            tax,
        )
        assert signoff.verify_chain(eng) == []
    finally:
        eng.dispose()


def test_restore_refuses_a_database_with_data_unless_forced(
    any_url: str, other_url: str, tmp_path: Path, tax: Taxonomy
) -> None:
    demo_at(any_url, tax)
    file = tmp_path / "wb.backup"
    assert cli(any_url, "backup", str(file)).exit_code == 0
    # the target holds its own, different data
    eng = make_engine(other_url)
    migrate(eng)
    fixtures.build_demo(eng, tax, with_traces=False, variants=False)
    eng.dispose()
    theirs = dump(other_url)

    refused = cli(other_url, "restore", str(file))
    assert refused.exit_code == 1
    assert "already holds data" in refused.output and "--force" in refused.output
    assert dump(other_url) == theirs  # nothing written

    forced = cli(other_url, "restore", "--force", str(file))
    assert forced.exit_code == 0, forced.output
    assert "replaced the existing data" in forced.output
    assert dump(other_url) == dump(any_url)


def test_a_migrated_but_empty_database_accepts_a_restore(
    any_url: str, other_url: str, tmp_path: Path, tax: Taxonomy
) -> None:
    """The app migrates on start: an empty schema is not 'data' and needs no --force."""
    demo_at(any_url, tax)
    file = tmp_path / "wb.backup"
    assert cli(any_url, "backup", str(file)).exit_code == 0
    eng = make_engine(other_url)
    migrate(eng)
    eng.dispose()
    done = cli(other_url, "restore", str(file))
    assert done.exit_code == 0, done.output
    assert dump(other_url) == dump(any_url)


def test_files_that_are_not_workbench_backups_are_refused(tmp_path: Path) -> None:
    target = f"sqlite:///{tmp_path / 'target.db'}"
    text_file = tmp_path / "notes.txt"
    text_file.write_text("hello, I am not a database\n", encoding="utf-8")
    empty = tmp_path / "empty.bak"
    empty.write_bytes(b"")
    foreign = tmp_path / "foreign.db"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE things (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute("INSERT INTO things (name) VALUES ('x')")
    con.commit()
    con.close()
    truncated = tmp_path / "truncated.bak"
    truncated.write_bytes(b"SQLite format 3\x00" + b"\x00" * 80)

    cases_ = [
        (text_file, "is not a workbench backup: it is neither a SQLite database"),
        (empty, "is not a workbench backup"),
        (foreign, "is not a workbench backup: it has no workbench schema"),
        (truncated, "not a"),
        (tmp_path / "missing.bak", "no such file"),
    ]
    for path, message in cases_:
        result = cli(target, "restore", str(path))
        assert result.exit_code == 1, (path, result.output)
        assert message in result.output, (path, result.output)
    assert not (tmp_path / "target.db").exists() or not dump(target).get("cases")


def test_a_backup_from_a_newer_workbench_is_refused(
    engine: Engine, sqlite_url: str, tmp_path: Path
) -> None:
    file = tmp_path / "wb.backup"
    assert cli(sqlite_url, "backup", str(file)).exit_code == 0
    con = sqlite3.connect(file)
    con.execute("UPDATE alembic_version SET version_num = '9999_from_the_future'")
    con.commit()
    con.close()
    result = cli(f"sqlite:///{tmp_path / 'new.db'}", "restore", str(file))
    assert result.exit_code == 1
    assert "'9999_from_the_future' is not one of this version's migrations" in result.output


def test_backup_of_a_missing_or_foreign_database_writes_nothing(tmp_path: Path) -> None:
    file = tmp_path / "wb.backup"
    result = cli(f"sqlite:///{tmp_path / 'nothing.db'}", "backup", str(file))
    assert result.exit_code == 1 and "there is no database" in result.output
    foreign = tmp_path / "foreign.db"
    sqlite3.connect(foreign).close()
    result = cli(f"sqlite:///{foreign}", "backup", str(file))
    assert result.exit_code == 1 and "no workbench schema" in result.output
    assert not file.exists()
    assert not list(tmp_path.glob("*.partial"))


def test_a_backup_of_the_other_database_kind_is_refused(
    pg_url: str, tmp_path: Path, tax: Taxonomy
) -> None:
    eng = make_engine(pg_url)
    migrate(eng)
    eng.dispose()
    pg_file = tmp_path / "pg.backup"
    assert cli(pg_url, "backup", str(pg_file)).exit_code == 0
    sqlite_target = f"sqlite:///{tmp_path / 'wb.db'}"
    result = cli(sqlite_target, "restore", str(pg_file))
    assert result.exit_code == 1
    assert "is a PostgreSQL backup and the configured database is SQLite" in result.output

    demo_at(sqlite_target, tax)
    lite_file = tmp_path / "lite.backup"
    assert cli(sqlite_target, "backup", str(lite_file)).exit_code == 0
    result = cli(pg_url, "restore", str(lite_file))
    assert result.exit_code == 1
    assert "is a SQLite backup and the configured database is PostgreSQL" in result.output


def test_sqlite_backup_while_the_app_writes_is_a_consistent_snapshot(
    sqlite_url: str, tmp_path: Path, tax: Taxonomy
) -> None:
    demo_at(sqlite_url, tax)
    eng = make_engine(sqlite_url)
    people = [make_actor("annotator", f"w{i}@example.org") for i in range(3)]
    stop = threading.Event()
    errors: list[BaseException] = []
    written = [0]

    def writer() -> None:
        try:
            while not stop.is_set():
                for who in people:
                    case_id = labeling.next_case(eng, who)
                    if case_id is None:
                        return
                    mine = labeling.my_label(eng, who, case_id)
                    try:
                        labeling.submit(
                            eng,
                            who,
                            case_id,
                            labeling.LabelIn("answer"),
                            mine.id if mine else None,
                            tax,
                        )
                    except StaleWriteError:
                        continue
                    written[0] += 1
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        files = []
        for n in range(4):
            while written[0] < 5 * (n + 1) and thread.is_alive():
                stop.wait(0.01)
            f = tmp_path / f"live-{n}.backup"
            backup.backup(sqlite_url, f)
            files.append(f)
    finally:
        stop.set()
        thread.join(timeout=60)
        eng.dispose()
    assert not errors, errors
    assert written[0] >= 20

    counts = []
    for f in files:
        # a standalone file: no -wal beside it, opens read-only, passes the integrity check
        assert not Path(str(f) + "-wal").exists()
        con = sqlite3.connect(f"file:{f}?mode=ro", uri=True)
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert con.execute("PRAGMA journal_mode").fetchone() == ("delete",)
        con.close()
        url = f"sqlite:///{tmp_path / f.stem}.db"
        backup.restore(url, f)
        restored = make_engine(url)
        try:
            with read_session(restored) as s:
                labels = s.execute(
                    select(Label.id, Case.key).join(Case, Case.id == Label.case_id)
                ).all()
                logged = {
                    (a.entity_id, (a.after or {}).get("id"))
                    for a in s.scalars(select(AuditLog).where(AuditLog.action == "label"))
                }
                # every label in the snapshot has its audit row, and no audit row lacks its label
                assert {(key, lid) for lid, key in labels} == logged
                assert s.scalar(select(SignOff.id).limit(1)) is not None
            assert signoff.verify_chain(restored) == []
            counts.append(len(labels))
        finally:
            restored.dispose()
    assert counts == sorted(counts) and counts[-1] > counts[0]


def test_restore_is_refused_onto_the_database_file_itself(sqlite_url: str, engine: Engine) -> None:
    path = sqlite_url.split("///", 1)[1]
    with pytest.raises(InputError, match="is the database itself"):
        backup.restore(sqlite_url, Path(path), force=True)


def _damage_the_middle(file: Path) -> None:
    """Flip bytes in the middle of a valid SQLite file: the header and cell pointers of the
    b-tree page nearest its middle (so it is damaged data, not unused space)."""
    data = bytearray(file.read_bytes())
    page_size = int.from_bytes(data[16:18], "big") or 65536
    pages = len(data) // page_size
    middle = pages // 2
    for n in sorted(range(1, pages), key=lambda p: abs(p - middle)):
        at = n * page_size
        if data[at] in (0x02, 0x05, 0x0A, 0x0D):  # a b-tree page
            for i in range(at + 1, at + 40):
                data[i] ^= 0xFF
            file.write_bytes(bytes(data))
            return
    raise AssertionError("no b-tree page to damage")


def test_a_damaged_sqlite_backup_is_refused_and_the_live_database_is_unchanged(
    demo_url: str, sqlite_url: str, tmp_path: Path, tax: Taxonomy
) -> None:
    file = tmp_path / "wb.backup"
    assert cli(demo_url, "backup", str(file)).exit_code == 0
    assert backup.inspect_file(file)[0] == "sqlite"
    _damage_the_middle(file)
    # the live database holds its own data and is to be replaced (--force)
    eng = make_engine(sqlite_url)
    migrate(eng)
    fixtures.build_demo(eng, tax, with_traces=False, variants=False)
    eng.dispose()
    theirs = dump(sqlite_url)
    refused = cli(sqlite_url, "restore", "--force", str(file))
    assert refused.exit_code == 1, refused.output
    assert "integrity_check" in refused.output and "Nothing was restored" in refused.output
    assert dump(sqlite_url) == theirs  # nothing written
    target = Path(sqlite_url.removeprefix("sqlite:///"))
    assert not target.with_name(target.name + ".restoring").exists()
    with pytest.raises(InputError, match="integrity_check"):
        backup.inspect_file(file)


def test_the_staged_copy_is_checked_before_it_replaces_the_database(
    demo_url: str, sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file that changes between the first check and the copy (or a copy that goes wrong)
    is caught on the staged copy: the live database is untouched."""
    from storage import backup as store

    file = tmp_path / "wb.backup"
    assert cli(demo_url, "backup", str(file)).exit_code == 0
    eng = make_engine(sqlite_url)
    migrate(eng)
    eng.dispose()
    before = dump(sqlite_url)
    real = store.sqlite_integrity
    calls: list[Path] = []

    def damaged_on_the_copy(path: Path) -> list[str]:
        calls.append(path)
        return (
            ["*** in database main *** Page 7: btreeInitPage() returns error code 11"]
            if (path.name.endswith(".restoring"))
            else real(path)
        )

    monkeypatch.setattr(store, "sqlite_integrity", damaged_on_the_copy)
    with pytest.raises(InputError, match="the restored copy is damaged"):
        backup.restore(sqlite_url, file)
    assert [p.name for p in calls] == ["wb.backup", "wb.db.restoring"]
    assert dump(sqlite_url) == before


@pytest.mark.postgres
def test_a_damaged_pg_dump_is_refused_and_the_live_database_is_unchanged(
    pg_url: str, request: pytest.FixtureRequest, tmp_path: Path, tax: Taxonomy
) -> None:
    eng = make_engine(pg_url)
    migrate(eng)
    fixtures.build_demo(eng, tax, with_traces=False, variants=False)
    eng.dispose()
    file = tmp_path / "wb.backup"
    assert cli(pg_url, "backup", str(file)).exit_code == 0
    data = file.read_bytes()
    server: str = request.getfixturevalue("pg_server")
    name = pg_url.rsplit("/", 1)[1] + "_target"  # a second database, with its own data
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    target = server.rsplit("/", 1)[0] + f"/{name}"
    eng = make_engine(target)
    migrate(eng)
    fixtures.build_demo(eng, tax, with_traces=False, variants=False)
    with eng.begin() as c:
        c.execute(text("update users set name = 'kept' where id = 1"))
    eng.dispose()
    theirs = dump(target)

    # cut short: pg_restore --list cannot read the archive, so nothing is tried
    cut = tmp_path / "cut.backup"
    cut.write_bytes(data[: len(data) // 50])
    refused = cli(target, "restore", "--force", str(cut))
    assert refused.exit_code == 1, refused.output
    assert "is not a readable workbench backup: pg_restore failed" in refused.output
    assert dump(target) == theirs

    # bytes flipped in the middle third (the table data): the listing reads, the
    # one-transaction restore fails on the data and rolls back (64 bytes at the very middle
    # sometimes fell where a restore reads them without noticing, as the demo's rows vary)
    flipped = bytearray(data)
    for i in range(len(data) // 3, 2 * len(data) // 3):
        flipped[i] ^= 0xFF
    bad = tmp_path / "flipped.backup"
    bad.write_bytes(bytes(flipped))
    refused = cli(target, "restore", "--force", str(bad))
    assert refused.exit_code == 1, refused.output
    assert "pg_restore failed" in refused.output
    assert dump(target) == theirs

    # cut near its end: the listing reads and pg_restore writes most of the SQL (the schema
    # dropped and made again, most tables' rows) before it fails; psql has been given all that
    # in one transaction and must roll it back, not commit what it got
    for keep in (0.6, 0.9, 0.99):
        late = tmp_path / f"late-{keep}.backup"
        late.write_bytes(data[: int(len(data) * keep)])
        refused = cli(target, "restore", "--force", str(late))
        assert refused.exit_code == 1, (keep, refused.output)
        assert "pg_restore failed" in refused.output
        assert dump(target) == theirs
