"""Bulk synthetic traces for the benchmarks, and the raw-insert floor the importer is measured
against (plain sqlite3 executemany of the same rows; COPY on PostgreSQL)."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from review.demo.tracedemo import WEEKS, demo_weeks
from storage.models import trace_sample_key

__all__ = ["postgres_floor", "postgres_floor_database", "sqlite_floor", "write_synthetic"]


# ---------------------------------------------------------------------------------------
# Benchmark data


def write_synthetic(fh: IO[str], n: int, chunks: int = 5, seed: int = 7) -> int:
    """Write ``n`` canonical JSONL traces with ``chunks`` chunks each (spread over 12 weeks)."""
    rng = random.Random(seed)
    starts = demo_weeks()
    span = WEEKS * 7 * 86400
    decisions = ("answer", "answer", "answer", "abstain", "abstain", "clarify", "escalate")
    reasons = {
        "answer": None,
        "abstain": "no_answer_bearing_evidence",
        "clarify": "ambiguous_question",
        "escalate": "restricted_topic",
    }
    text = (
        "2.1 A customer may ask for a refund of a monthly subscription charge within 14 days "
        "of the charge date. Refunds go back to the original payment method."
    )
    for i in range(n):
        at = starts[0] + dt.timedelta(seconds=int(span * i / max(1, n)))
        decision = decisions[rng.randrange(len(decisions))]
        score = round(rng.uniform(0.34, 0.95), 3)
        cs = [
            {
                "chunk_id": f"DOC-{rng.randrange(500):03d}@1#p{k}",
                "doc_id": f"DOC-{rng.randrange(500):03d}",
                "doc_version": 1,
                "rank": k + 1,
                "score": round(score - 0.03 * k, 3),
                "text": text,
                "filtered": k == chunks - 1 and rng.random() < 0.1,
                "effective_date": "2025-03-01",
            }
            for k in range(chunks)
        ]
        rec: dict[str, Any] = {
            "trace_id": f"bench-{i:08d}",
            "time": at.isoformat().replace("+00:00", "Z"),
            "query": f"How many days do we have to ask for a refund? (request {i})",
            "rewritten_query": "refund window monthly",
            "user_role": "customer_admin",
            "identity_scopes": ["public"],
            "chunks": cs,
            "context_sent": text,
            "ranking_mode": "vector" if i % 3 else "semantic_reranker",
            "hits_after_filter": chunks - sum(1 for c in cs if c["filtered"]),
            "top_score": score,
            "answerable": decision == "answer",
            "ambiguous": decision == "clarify",
            "ungrounded": rng.random() < 0.03,
            "decision": decision,
            "reason_code": reasons[decision],
            "answer_text": "You can ask within 14 days of the charge date.",
            "citations": [{"claim": "Refunds within 14 days.", "chunk_ids": [cs[0]["chunk_id"]]}],
            "feedback": "expected_answer" if rng.random() < 0.03 else None,
            "versions": {"model": "m-1", "index": f"kb-{i * 12 // max(1, n)}", "policy": "p@3"},
            "attributes": {"language": "en", "customer_tier": "team", "document_type": "policy"},
        }
        fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
    return n


_TRACE_COLS = (
    "id", "trace_id", "at", "query", "rewritten_query", "user_role", "identity_scopes",
    "context_sent", "ranking_mode", "hits_after_filter", "top_score", "answerable", "ambiguous",
    "ungrounded", "decision", "reason_code", "answer_text", "citations", "feedback", "versions",
    "attributes", "policy_version", "model_version", "language", "customer_tier",
    "document_type", "restricted", "redactions", "import_id", "imported_at", "sample_key",
)  # fmt: skip


_CHUNK_COLS = (
    "trace_pk", "trace_at", "chunk_id", "doc_id", "doc_version", "rank", "score", "text",
    "filtered", "effective_date",
)  # fmt: skip


def _floor_rows(
    d: dict[str, Any], n: int, at: Any, now: Any, import_id: int | None = None
) -> tuple[tuple[Any, ...], list[tuple[Any, ...]]]:
    """The traces row (columns ``_TRACE_COLS``, primary key ``n``, the import ``import_id``)
    and the trace_chunks rows (``_CHUNK_COLS``) of one canonical JSONL trace, JSON columns as
    text."""
    v, a = d.get("versions") or {}, d.get("attributes") or {}
    trow = (
        n, d["trace_id"], at, d["query"], d.get("rewritten_query"),
        d.get("user_role"), json.dumps(d.get("identity_scopes") or []),
        d.get("context_sent") or "", d.get("ranking_mode"),
        d.get("hits_after_filter"), d.get("top_score"), d.get("answerable"),
        d.get("ambiguous"), d.get("ungrounded"), d.get("decision"),
        d.get("reason_code"), d.get("answer_text") or "",
        json.dumps(d.get("citations") or []), d.get("feedback"), json.dumps(v),
        json.dumps(a), v.get("policy"), v.get("model"), a.get("language"),
        a.get("customer_tier"), a.get("document_type"), False, "{}", import_id, now,
        trace_sample_key(d["trace_id"]),
    )  # fmt: skip
    crows = [_chunk_row(n, at, c) for c in d.get("chunks") or []]
    return trow, crows


def _chunk_row(n: int, at: Any, c: dict[str, Any]) -> tuple[Any, ...]:
    return (
        n, at, c["chunk_id"], c.get("doc_id"), c.get("doc_version"), c.get("rank"),
        c.get("score"), c.get("text") or "", bool(c.get("filtered")),
        c.get("effective_date"),
    )  # fmt: skip


def sqlite_floor(
    db_path: Path,
    jsonl: Path,
    batch: int = 5000,
    *,
    schema_ready: bool = False,
    rollback: bool = False,
) -> int:
    """Insert the traces of a canonical JSONL file into a database with the workbench schema
    using plain sqlite3 ``executemany`` in one transaction, without validation, redaction or
    duplicate checks: the speed floor for the importer. Returns traces written.
    ``schema_ready``: the caller has already migrated ``db_path`` (so a timing of this call
    holds the writing only). ``rollback``: the rows go into a database that holds traces
    already (ids after its highest) and the transaction is rolled back, so the floor is the
    writing of the same rows into the same database, which is left as it was. The rows name
    the newest import (``traces.import_id``, checked against ``trace_imports`` as every
    imported trace's is); foreign keys are checked, as on the workbench's own connections."""
    from storage.db import make_engine, migrate

    if not schema_ready:
        engine = make_engine(f"sqlite:///{db_path}")
        migrate(engine)
        engine.dispose()
    con = sqlite3.connect(db_path, isolation_level=None)
    # the pragmas of the workbench's own connections (storage.db), foreign keys included
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    con.execute("PRAGMA foreign_keys=ON")
    tq = (
        f"INSERT INTO traces ({', '.join(_TRACE_COLS)}) "
        f"VALUES ({', '.join('?' * len(_TRACE_COLS))})"
    )
    cq = (
        f"INSERT INTO trace_chunks ({', '.join(_CHUNK_COLS)}) "
        f"VALUES ({', '.join('?' * len(_CHUNK_COLS))})"
    )
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    n = 0
    trows: list[tuple[Any, ...]] = []
    crows: list[tuple[Any, ...]] = []
    con.execute("BEGIN")
    start = int(con.execute("SELECT coalesce(max(id), 0) FROM traces").fetchone()[0])
    imp = con.execute("SELECT max(id) FROM trace_imports").fetchone()[0]
    with jsonl.open(encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            n += 1
            at = dt.datetime.fromisoformat(d["time"]).strftime("%Y-%m-%d %H:%M:%S.%f")
            trow, chunk_rows = _floor_rows(d, start + n, at, now, imp)
            trows.append(trow)
            crows.extend(chunk_rows)
            if len(trows) >= batch:
                con.executemany(tq, trows)
                con.executemany(cq, crows)
                trows, crows = [], []
    if trows:
        con.executemany(tq, trows)
        con.executemany(cq, crows)
    con.execute("ROLLBACK" if rollback else "COMMIT")
    con.close()
    return n


@contextlib.contextmanager
def postgres_floor_database(url: str) -> Iterator[str]:
    """A fresh database with the workbench schema beside the database of ``url`` on the same
    PostgreSQL server (its user needs CREATEDB), dropped on exit; yields its URL."""
    from sqlalchemy import create_engine, make_url, text

    from storage.db import make_engine, migrate

    target = make_url(url)
    name = f"{target.database or 'workbench'}_floor"[:60]
    admin = create_engine(target.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
            c.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            floor_url = target.set(database=name).render_as_string(hide_password=False)
            engine = make_engine(floor_url)
            migrate(engine)
            engine.dispose()
            yield floor_url
        finally:
            with admin.connect() as c:
                c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


def postgres_floor(
    floor_url: str,
    jsonl: Path,
    batch: int = 5000,
    *,
    rollback: bool = False,
) -> int:
    """The PostgreSQL floor for the importer: the traces of a canonical JSONL file written with
    ``COPY ... FROM STDIN`` (psycopg's ``cursor.copy``) into the database ``floor_url`` (an
    empty one: :func:`postgres_floor_database`), in one transaction, without validation,
    redaction or duplicate checks. Returns traces written. ``rollback``: the database holds
    traces already (ids after its highest) and the transaction is rolled back (the writing of
    the same rows into the same database, which is left as it was). The rows name the newest
    import (``traces.import_id``, checked against ``trace_imports`` as every imported trace's
    is)."""
    import psycopg
    from sqlalchemy import make_url

    conninfo = make_url(floor_url).set(drivername="postgresql")
    tq = f"COPY traces ({', '.join(_TRACE_COLS)}) FROM STDIN"
    cq = f"COPY trace_chunks ({', '.join(_CHUNK_COLS)}) FROM STDIN"
    now = dt.datetime.now(dt.UTC)
    n = 0
    trows: list[tuple[Any, ...]] = []
    crows: list[tuple[Any, ...]] = []
    with (
        psycopg.connect(conninfo.render_as_string(hide_password=False)) as con,
        con.cursor() as cur,
    ):

        def flush() -> None:
            with cur.copy(tq) as cp:
                for r in trows:
                    cp.write_row(r)
            with cur.copy(cq) as cp:
                for r in crows:
                    cp.write_row(r)
            trows.clear()
            crows.clear()

        cur.execute("SELECT coalesce(max(id), 0) FROM traces")
        row = cur.fetchone()
        start = int(row[0]) if row else 0
        cur.execute("SELECT max(id) FROM trace_imports")
        got = cur.fetchone()
        imp = got[0] if got else None
        with jsonl.open(encoding="utf-8") as fh:
            for line in fh:
                d = json.loads(line)
                n += 1
                at = dt.datetime.fromisoformat(d["time"])
                trow, chunk_rows = _floor_rows(d, start + n, at, now, imp)
                trows.append(trow)
                crows.extend(chunk_rows)
                if len(trows) >= batch:
                    flush()
        if trows:
            flush()
        if rollback:
            con.rollback()
        else:
            con.commit()
    return n
