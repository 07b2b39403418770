"""The bulk import path (review.traces.tracerows, the stored-id look-up while checking, the
parsers' fast paths): what it stores equals a core insert of the same rows, and re-imports,
partial overlaps and bad lines among stored traces report and write what they did before."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select, text

from review.core.errors import InputError
from review.core.identity import SYSTEM
from review.traces import importcheck, importer, rollup, tracerows
from review.traces.formats.fields import BadField, plain_chunk, read_chunk
from storage.db import make_engine, migrate, read_session
from storage.models import AuditLog, TraceImport, TraceRollup, trace_sample_key
from tests.helpers.traces import import_traces, make_trace, write_jsonl

_DECISIONS = ("answer", "abstain", "clarify", "escalate", "partial", None)
_REASONS = {
    "answer": (None, "support_below_threshold"),
    "abstain": ("no_answer_bearing_evidence", None),
    "clarify": ("ambiguous_question",),
    "escalate": ("restricted_topic",),
    "partial": (None,),
    None: (None,),
}


def _chunk_record(rng: random.Random, k: int) -> dict[str, Any]:
    rec: dict[str, Any] = {"chunk_id": f"DOC-{rng.randrange(30):02d}@1#p{k}"}
    doc = rng.choice(["POL-REFUND-MONTHLY", f"DOC-{rng.randrange(9)}", None, "", " X-1 "])
    if doc is not None or rng.random() < 0.5:
        rec["doc_id"] = doc
    for name, values in (
        ("doc_version", [1, 2, None, "3", 7.0]),
        ("rank", [k + 1, None, str(k + 1)]),
        ("score", [round(rng.uniform(0, 1), 3), None, "0.5", 1, 0.0]),
        ("text", ["plain text", "", "  ", "mail anne@example.com now", "é ünïcode \t tab", None]),
        ("filtered", [False, True, None, "yes", 0]),
        ("effective_date", ["2025-03-01", None, "2024-12-31T10:00:00Z", " 2025-01-02 "]),
    ):
        if rng.random() < 0.85:
            rec[name] = rng.choice(values)
    return rec


def random_records(n: int, seed: int, prefix: str = "r") -> list[dict[str, Any]]:
    """Canonical records with the variety a real export has: absent and null fields,
    numbers as text, text that redaction changes, restricted attributes and scopes."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for i in range(n):
        decision = rng.choice(_DECISIONS)
        chunks = [_chunk_record(rng, k) for k in range(rng.randrange(0, 5))]
        rec: dict[str, Any] = {
            "trace_id": f"{prefix}-{i:05d}",
            "time": f"2025-0{rng.randrange(1, 7)}-1{rng.randrange(10)}T0{rng.randrange(10)}"
            f":1{rng.randrange(10)}:00{rng.choice(['Z', '+02:00', '', '.5Z'])}",
            "query": rng.choice(["Refund?", "Call me at +1 415 555 0100 please", "ünï"]),
            "chunks": chunks,
            "decision": decision,
            "reason_code": rng.choice(_REASONS[decision]),
        }
        optional: dict[str, list[Any]] = {
            "rewritten_query": ["refund window", None, ""],
            "user_role": ["customer_admin", None, 12],
            "identity_scopes": [["public"], ["public", "restricted"], [], None, '["a"]'],
            "context_sent": ["ctx anne@example.com", "", None],
            "ranking_mode": ["Vector", "semantic_reranker", None],
            "hits_after_filter": [0, 3, None, "2"],
            "top_score": [0.83, None, "0.5", 1],
            "answerable": [True, False, None, "yes"],
            "ambiguous": [True, False, None],
            "ungrounded": [True, False, None, 1],
            "topics": [["refunds"], [], None, "billing, refunds"],
            "answer_text": ["Yes.", "", None],
            "citations": [[{"claim": "c", "chunk_ids": ["x"]}], [], None],
            "feedback": ["positive", "expected_answer", None],
            "reformulated": [True, False, None],
            "citation_opened": [True, None],
            "versions": [{"model": "m-1", "policy": "p@3", "index": f"kb-{i % 3}"}, {}, None],
            "attributes": [
                {"language": "en", "customer_tier": "team", "document_type": "policy"},
                {"language": "de", "restricted": True, "n": 3, "x": 1.5},
                {},
                None,
            ],
        }
        for name, values in optional.items():
            if rng.random() < 0.8:
                rec[name] = rng.choice(values)
        out.append(rec)
    return out


def _lines(records: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(r, ensure_ascii=False) for r in records]


def _renamed(records: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    return [{**r, "trace_id": f"{prefix}{r['trace_id']}"} for r in records]


# sample_key is a hash of the trace id (checked against it in stored(), then set aside so
# traces stored under another id prefix compare equal)
_SKIP = {"id", "import_id", "imported_at", "trace_id", "sample_key"}


def stored(engine: Engine, like: str = "%") -> dict[str, Any]:
    """The stored rows of the traces whose id is LIKE ``like``, as the driver returns them
    (so JSON and timestamps compare as stored text), keyed by trace id without prefix."""
    with engine.connect() as conn:
        cols = list(conn.execute(text("SELECT * FROM traces LIMIT 0")).keys())
        keep = [c for c in cols if c not in _SKIP]
        traces = {
            tid.split(":", 1)[-1]: row
            for tid, *row in conn.exec_driver_sql(
                f"SELECT trace_id, {', '.join(keep)} FROM traces WHERE trace_id LIKE "
                f"{'?' if engine.dialect.name == 'sqlite' else '%(p)s'} ORDER BY trace_id",
                (like,) if engine.dialect.name == "sqlite" else {"p": like},
            )
        }
        keys = conn.execute(
            text("SELECT trace_id, sample_key FROM traces WHERE trace_id LIKE :p"), {"p": like}
        ).all()
        assert all(key == trace_sample_key(tid) for tid, key in keys)
        chunks: dict[str, list[Any]] = {}
        rows = conn.execute(
            text(
                "SELECT t.trace_id, c.chunk_id, c.doc_id, c.doc_version, c.rank, c.score, "
                "c.text, c.filtered, CAST(c.effective_date AS VARCHAR(20)) FROM trace_chunks c "
                "JOIN traces t ON t.id = c.trace_pk WHERE t.trace_id LIKE :p ORDER BY c.id"
            ),
            {"p": like},
        )
        for tid, *row in rows:
            chunks.setdefault(tid.split(":", 1)[-1], []).append(tuple(row))
    return {"traces": traces, "chunks": chunks}


def rollup_rows(engine: Engine) -> list[tuple[Any, ...]]:
    with read_session(engine) as s:
        return [
            tuple(r)
            for r in s.execute(
                select(*TraceRollup.__table__.c).order_by(
                    TraceRollup.dim, TraceRollup.value, TraceRollup.day, TraceRollup.decision
                )
            )
        ]


def counts(engine: Engine) -> tuple[int, int, int]:
    with read_session(engine) as s:
        return (
            int(s.scalar(text("SELECT count(*) FROM traces")) or 0),
            int(s.scalar(text("SELECT count(*) FROM trace_chunks")) or 0),
            int(s.scalar(select(func.count()).select_from(TraceImport)) or 0),
        )


# ---------------------------------------------------------------------------------------
# The driver writers store what a core insert stores


@pytest.mark.parametrize("seed", [1, 2])
def test_the_driver_writers_store_what_a_core_insert_stores(
    any_engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    records = random_records(120, seed)
    fast = write_jsonl(tmp_path / "fast.jsonl", _lines(_renamed(records, "fast:")))
    ref = write_jsonl(tmp_path / "ref.jsonl", _lines(_renamed(records, "ref:")))
    got = importer.import_file(any_engine, SYSTEM, fast, "canonical", batch_size=7)
    with monkeypatch.context() as m:
        m.setattr(tracerows, "FAST_DIALECTS", ())
        want = importer.import_file(any_engine, SYSTEM, ref, "canonical", batch_size=7)
    assert (got.added, got.skipped, got.restricted, got.redactions) == (
        want.added,
        want.skipped,
        want.restricted,
        want.redactions,
    )
    assert got.added == len(records) and got.restricted > 0 and sum(got.redactions.values()) > 0
    assert stored(any_engine, "fast:%") == stored(any_engine, "ref:%")
    # the rollup counted both imports as a rebuild from the traces does
    kept = rollup_rows(any_engine)
    rollup.rebuild(any_engine)
    assert rollup_rows(any_engine) == kept


def test_the_plain_chunk_path_reads_what_the_full_reader_reads() -> None:
    rng = random.Random(5)
    plain = 0
    for i in range(3000):
        item = _chunk_record(rng, i % 4)
        try:
            want: Any = read_chunk(item, "chunks.0")
        except BadField as exc:
            want = exc
        got = plain_chunk(item)
        if got is not None:
            plain += 1
            assert got == want, item
    assert plain > 100


# ---------------------------------------------------------------------------------------
# Stored traces are skipped while checking


def test_a_file_imported_twice_gives_the_same_database_and_skips_every_trace(
    any_engine: Engine, tmp_path: Path
) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", _lines(random_records(60, 3)))
    first = importer.import_file(any_engine, SYSTEM, path, "canonical", batch_size=9)
    assert (first.traces, first.added, first.skipped) == (60, 60, 0)
    before, roll, n = stored(any_engine), rollup_rows(any_engine), counts(any_engine)
    again = importer.import_file(any_engine, SYSTEM, path, "canonical", batch_size=9)
    assert (again.traces, again.added, again.skipped, again.rejected) == (60, 0, 60, 0)
    assert again.restricted == 0 and not any(again.redactions.values())
    assert "0 traces added; 60 already present or repeated in the file" in again.summary()
    assert stored(any_engine) == before and rollup_rows(any_engine) == roll
    assert counts(any_engine) == (n[0], n[1], n[2] + 1)
    row = importer.recent_imports(any_engine)[0]
    assert (row.status, row.added, row.skipped) == ("done", 0, 60)
    with read_session(any_engine) as s:
        closing = s.scalars(
            select(AuditLog)
            .where(AuditLog.entity == "trace_import", AuditLog.entity_id == str(row.id))
            .order_by(AuditLog.id.desc())
        ).first()
    assert closing is not None and closing.after is not None and closing.after["skipped"] == 60


def test_a_bad_line_among_stored_traces_is_refused_with_its_line_and_writes_nothing(
    any_engine: Engine, tmp_path: Path
) -> None:
    records = random_records(30, 4)
    importer.import_file(
        any_engine, SYSTEM, write_jsonl(tmp_path / "a.jsonl", _lines(records)), "canonical"
    )
    before, roll, n = stored(any_engine), rollup_rows(any_engine), counts(any_engine)
    # the stored traces again, new ones after them, and one stored trace's line made bad
    lines = _lines(records + random_records(10, 5, prefix="new"))
    bad = {**records[17], "decision": "shrug"}
    lines[17] = json.dumps(bad)
    path = write_jsonl(tmp_path / "b.jsonl", lines)
    with pytest.raises(InputError, match=r"line 18: field decision: unknown decision 'shrug'"):
        importer.import_file(any_engine, SYSTEM, path, "canonical", batch_size=4)
    assert stored(any_engine) == before and rollup_rows(any_engine) == roll
    assert counts(any_engine) == n
    # a value longer than its column, on a stored trace's line, is refused the same way
    lines[17] = json.dumps({**records[17], "ranking_mode": "x" * 41})
    write_jsonl(path, lines)
    with pytest.raises(InputError, match=r"line 18: field ranking_mode: longer than 40"):
        importer.import_file(any_engine, SYSTEM, path, "canonical", batch_size=4)
    assert counts(any_engine) == n
    # with skip_bad the bad line is rejected and the rest imported: only the new traces
    report = importer.import_file(
        any_engine, SYSTEM, path, "canonical", skip_bad=True, rejects_path=tmp_path / "r.jsonl"
    )
    assert (report.traces, report.added, report.skipped, report.rejected) == (39, 10, 29, 1)
    assert report.problems[0].startswith(f"{path}: line 18: field ranking_mode")


def test_a_half_stored_file_imports_exactly_the_new_half(
    any_engine: Engine, tmp_path: Path
) -> None:
    records = random_records(80, 6)
    whole = write_jsonl(tmp_path / "whole.jsonl", _lines(records))
    half = write_jsonl(tmp_path / "half.jsonl", _lines(records[::2]))
    first = importer.import_file(any_engine, SYSTEM, half, "canonical", batch_size=6)
    assert first.added == 40
    report = importer.import_file(any_engine, SYSTEM, whole, "canonical", batch_size=6)
    assert (report.traces, report.added, report.skipped) == (80, 40, 40)
    got = stored(any_engine)
    assert sorted(got["traces"]) == sorted(r["trace_id"] for r in records)
    # the same rows as one import of the whole file into a second set of ids
    again = write_jsonl(tmp_path / "again.jsonl", _lines(_renamed(records, "x:")))
    importer.import_file(any_engine, SYSTEM, again, "canonical")
    assert stored(any_engine, "r-%") == stored(any_engine, "x:%")
    kept = rollup_rows(any_engine)
    rollup.rebuild(any_engine)
    assert rollup_rows(any_engine) == kept


def test_a_trace_repeated_in_the_file_is_added_once(any_engine: Engine, tmp_path: Path) -> None:
    records = random_records(12, 7)
    lines = _lines(records + records[3:5] + records[:1])
    report = importer.import_file(
        any_engine, SYSTEM, write_jsonl(tmp_path / "t.jsonl", lines), "canonical", batch_size=5
    )
    assert (report.traces, report.added, report.skipped) == (15, 12, 3)
    assert counts(any_engine)[0] == 12


def test_traces_stored_between_the_check_and_the_write_are_skipped_and_counted_once(
    any_engine: Engine, tmp_path: Path
) -> None:
    """Each batch is staged ahead (rows, the restricted rule's facts, the rollup's counts of
    every trace in it); a batch that finds some of its traces stored meanwhile (another
    import) writes and counts only the others, with the others' flags."""
    records = random_records(40, 11)
    path = write_jsonl(tmp_path / "t.jsonl", _lines(records))
    every_third = write_jsonl(tmp_path / "third.jsonl", _lines(records[::3]))
    other: list[importer.ImportReport] = []

    def meanwhile(phase: str, done: int, total: int | None) -> None:
        if phase == "writing" and not other:  # after the first batch, before the others
            other.append(importer.import_file(any_engine, SYSTEM, every_third, "canonical"))

    report = importer.import_file(
        any_engine, SYSTEM, path, "canonical", batch_size=6, progress=meanwhile
    )
    first_batch = records[:6]
    stored_meanwhile = len(records[6::3]) + len([r for r in records[::3] if r in first_batch])
    assert other[0].added == len(records[::3]) - len(first_batch[::3])
    assert (report.traces, report.added) == (40, 40 - len(records[6::3]))
    assert report.skipped == len(records[6::3]) and stored_meanwhile >= report.skipped
    assert counts(any_engine)[0] == 40
    kept = rollup_rows(any_engine)
    rollup.rebuild(any_engine)
    assert rollup_rows(any_engine) == kept
    reference = write_jsonl(tmp_path / "ref.jsonl", _lines(_renamed(records, "ref:")))
    importer.import_file(any_engine, SYSTEM, reference, "canonical")
    assert stored(any_engine, "r-%") == stored(any_engine, "ref:%")


def test_the_rollup_counts_alike_rows_as_counting_each_row_does() -> None:
    """rollup.aggregate groups alike rows; the reference adds every row to each of its keys."""
    import datetime as dt

    rng = random.Random(8)
    rows: list[dict[str, Any]] = []
    for _ in range(2000):
        decision = rng.choice(_DECISIONS)
        rows.append(
            {
                "at": dt.datetime(2025, 6, rng.randrange(1, 4), rng.randrange(24), tzinfo=dt.UTC),
                "decision": decision,
                "reason_code": rng.choice(_REASONS[decision]),
                "hits_after_filter": rng.choice([0, 1, None]),
                "ungrounded": rng.choice([True, False, None]),
                "feedback": rng.choice(["negative", "positive", None]),
                "reformulated": rng.choice([True, False, None]),
                "citation_opened": rng.choice([True, None]),
                "versions": rng.choice([{"index": "kb-1", "prompt": "p@1"}, {}, {"index": 2}]),
                "policy_version": rng.choice(["p@3", None]),
                "model_version": "m-1",
                "ranking_mode": rng.choice(["vector", "semantic_reranker", None]),
                "language": rng.choice(["en", "de", None]),
                "customer_tier": None,
                "document_type": "policy",
                "user_role": rng.choice(["customer_admin", None]),
            }
        )
    want: dict[Any, list[int]] = {}
    for row in rows:
        flags = rollup.row_flags(row)
        for dim, value in rollup.segment_values(row):
            key = (dim, value, rollup.utc_day(row["at"]), row["decision"] or "")
            got = want.setdefault(key, [0] * len(flags))
            for i, f in enumerate(flags):
                got[i] += f
    assert rollup.aggregate(rows) == want


# ---------------------------------------------------------------------------------------
# PostgreSQL plans each id look-up for its ids, and nothing else


def test_the_copies_run_with_postgres_default_plans_and_the_id_lookups_with_custom_ones(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """force_custom_plan, set for the whole write transaction, made PostgreSQL plan again the
    foreign-key check of every chunk the COPY wrote (the chunks' COPY took 3x the floor's);
    it is now set around the stored-id look-ups only."""
    engine = make_engine(pg_url)
    migrate(engine)
    seen: list[tuple[str, str]] = []
    copy, lookup = tracerows.copy_rows, importcheck.stored_ids

    def spy_copy(conn: Any, table: str, *rest: Any) -> None:
        seen.append((table, str(conn.exec_driver_sql("SHOW plan_cache_mode").scalar())))
        copy(conn, table, *rest)

    monkeypatch.setattr(tracerows, "copy_rows", spy_copy)
    records = random_records(12, 5)
    path = write_jsonl(tmp_path / "t.jsonl", _lines(records))
    report = importer.import_file(engine, SYSTEM, path, "canonical", batch_size=5)
    assert report.added == 12
    assert [t for t, _ in seen].count("traces") == 3 and ("trace_chunks", "auto") in seen
    assert {mode for _, mode in seen} == {"auto"}
    with engine.begin() as conn:
        with tracerows.custom_plans(conn):
            inside = conn.exec_driver_sql("SHOW plan_cache_mode").scalar()
        after = conn.exec_driver_sql("SHOW plan_cache_mode").scalar()
    assert (inside, after) == ("force_custom_plan", "auto")
    first = records[0]["trace_id"]
    assert lookup(engine, [first, "nope"]) == {first}
    engine.dispose()


def test_postgres_autovacuums_the_traces_after_every_10000_inserts(any_engine: Engine) -> None:
    """Migration 0025: the audit counts are index-only scans, which also read the rows of
    pages vacuum has not marked visible; PostgreSQL's default waits for inserts of 20% of the
    table (340,000 at 1.7M traces). Its downgrade puts the default back. Since migration
    0036 the traces are partitioned by month there: every partition holds the settings (the
    default one, and a month's made by an import), as a partitioned table holds none."""
    from alembic import command

    from storage.db import alembic_config

    def options() -> set[str]:
        if any_engine.dialect.name != "postgresql":
            return set()
        with any_engine.connect() as c:
            got = c.execute(
                text(
                    "SELECT c.relname, c.reloptions FROM pg_class c WHERE c.relname = 'traces' "
                    "OR c.oid IN (SELECT inhrelid FROM pg_inherits "
                    "WHERE inhparent = 'traces'::regclass)"
                )
            ).all()
        partitioned = len(got) > 1
        each = {
            name: frozenset(opts or []) for name, opts in got if name != "traces" or not partitioned
        }
        assert len(set(each.values())) == 1, each
        return set(next(iter(each.values())))

    want = {
        "autovacuum_vacuum_insert_threshold=10000",
        "autovacuum_vacuum_insert_scale_factor=0",
    }
    assert options() == (want if any_engine.dialect.name == "postgresql" else set())
    import_traces(any_engine, [make_trace("m", "2026-03-02T10:00:00Z")])  # a month's partition
    assert options() == (want if any_engine.dialect.name == "postgresql" else set())
    cfg = alembic_config(any_engine)
    command.downgrade(cfg, "0024")
    assert options() == set()
    command.upgrade(cfg, "head")
    assert options() == (want if any_engine.dialect.name == "postgresql" else set())
