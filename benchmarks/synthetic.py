"""Bulk synthetic traces for the benchmarks, and the raw-insert floors the importer is measured
against: plain sqlite3 executemany of the same rows on SQLite, psycopg COPY on PostgreSQL."""

from __future__ import annotations

import datetime as dt
import json
import random
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from review.demo.tracedemo import WEEKS, demo_weeks

__all__ = ["postgres_floor", "sqlite_floor", "write_synthetic"]


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
    "document_type", "restricted", "redactions", "import_id", "imported_at",
)  # fmt: skip


_CHUNK_COLS = (
    "trace_pk", "chunk_id", "doc_id", "doc_version", "rank", "score", "text", "filtered",
    "effective_date",
)  # fmt: skip


def _floor_rows(
    jsonl: Path, now: Any, at: Any, batch: int
) -> Iterator[tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]]:
    """The rows of the floor, ``batch`` traces at a time: (trace rows, chunk rows)."""
    n = 0
    trows: list[tuple[Any, ...]] = []
    crows: list[tuple[Any, ...]] = []
    with jsonl.open(encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            n += 1
            v, a = d.get("versions") or {}, d.get("attributes") or {}
            trows.append(
                (
                    n, d["trace_id"], at(d["time"]), d["query"], d.get("rewritten_query"),
                    d.get("user_role"), json.dumps(d.get("identity_scopes") or []),
                    d.get("context_sent") or "", d.get("ranking_mode"),
                    d.get("hits_after_filter"), d.get("top_score"), d.get("answerable"),
                    d.get("ambiguous"), d.get("ungrounded"), d.get("decision"),
                    d.get("reason_code"), d.get("answer_text") or "",
                    json.dumps(d.get("citations") or []), d.get("feedback"), json.dumps(v),
                    json.dumps(a), v.get("policy"), v.get("model"), a.get("language"),
                    a.get("customer_tier"), a.get("document_type"), False, "{}", None, now,
                )
            )  # fmt: skip
            for c in d.get("chunks") or []:
                crows.append(
                    (
                        n, c["chunk_id"], c.get("doc_id"), c.get("doc_version"), c.get("rank"),
                        c.get("score"), c.get("text") or "", bool(c.get("filtered")),
                        c.get("effective_date"),
                    )
                )  # fmt: skip
            if len(trows) >= batch:
                yield trows, crows
                trows, crows = [], []
    if trows:
        yield trows, crows


def postgres_floor(url: str, jsonl: Path, batch: int = 5000) -> tuple[int, float, float]:
    """The PostgreSQL floor: the same rows as :func:`sqlite_floor` written with psycopg's
    ``COPY`` in one transaction into a fresh database (created beside the one ``url`` names,
    dropped afterwards) with the workbench schema. Returns (traces written, wall seconds, CPU
    seconds) of reading the file and writing it, not of making the empty database."""
    import psycopg
    from sqlalchemy.engine import make_url

    from storage.db import make_engine, migrate

    base = make_url(url)
    name = f"wb_floor_{dt.datetime.now(dt.UTC):%H%M%S%f}"
    admin = base.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as con:
        con.execute(f"CREATE DATABASE {name}")
    try:
        engine = make_engine(base.set(database=name).render_as_string(hide_password=False))
        migrate(engine)
        engine.dispose()
        target = base.set(drivername="postgresql", database=name)
        now = dt.datetime.now(dt.UTC)
        n = 0
        t0, c0 = time.perf_counter(), time.process_time()
        with psycopg.connect(target.render_as_string(hide_password=False)) as con:
            with con.cursor() as cur:
                for trows, crows in _floor_rows(jsonl, now, dt.datetime.fromisoformat, batch):
                    with cur.copy(f"COPY traces ({', '.join(_TRACE_COLS)}) FROM STDIN") as cp:
                        for r in trows:
                            cp.write_row(r)
                    with cur.copy(f"COPY trace_chunks ({', '.join(_CHUNK_COLS)}) FROM STDIN") as cp:
                        for r in crows:
                            cp.write_row(r)
                    n += len(trows)
            con.commit()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        with psycopg.connect(admin, autocommit=True) as con:
            con.execute(f"DROP DATABASE IF EXISTS {name}")
    return n, wall, cpu


def sqlite_floor(db_path: Path, jsonl: Path, batch: int = 5000) -> tuple[int, float, float]:
    """Insert the traces of a canonical JSONL file into a fresh database with the workbench
    schema using plain sqlite3 ``executemany`` in one transaction, without validation,
    redaction or duplicate checks: the speed floor for the importer. Returns (traces written,
    wall seconds, CPU seconds) of reading the file and writing it, not of making the empty
    database."""
    from storage.db import make_engine, migrate

    engine = make_engine(f"sqlite:///{db_path}")
    migrate(engine)
    engine.dispose()
    con = sqlite3.connect(db_path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    tq = (
        f"INSERT INTO traces ({', '.join(_TRACE_COLS)}) "
        f"VALUES ({', '.join('?' * len(_TRACE_COLS))})"
    )
    cq = (
        f"INSERT INTO trace_chunks ({', '.join(_CHUNK_COLS)}) "
        f"VALUES ({', '.join('?' * len(_CHUNK_COLS))})"
    )
    t0, c0 = time.perf_counter(), time.process_time()
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")

    def at(text: str) -> str:
        return dt.datetime.fromisoformat(text).strftime("%Y-%m-%d %H:%M:%S.%f")

    n = 0
    con.execute("BEGIN")
    for trows, crows in _floor_rows(jsonl, now, at, batch):
        con.executemany(tq, trows)
        con.executemany(cq, crows)
        n += len(trows)
    con.execute("COMMIT")
    con.close()
    return n, time.perf_counter() - t0, time.process_time() - c0
