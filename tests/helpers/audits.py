"""Production traces for the audit tests, written straight through the storage models.

``bulk_traces`` inserts many bare traces fast (a Core executemany in batches);
``realistic_traces`` writes a small month-and-a-half of Brightwave-like traces with chunks,
citations, feedback, filtered chunks and a few restricted traces.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Engine, insert
from sqlalchemy.orm import Session

from review.traces import rollup
from storage.db import run_write
from storage.models import Trace, TraceChunk, trace_sample_key

START = dt.datetime(2025, 6, 1, 8, 0, tzinfo=dt.UTC)
DECISIONS = ("answer", "abstain", "clarify", "partial", "escalate")


def bulk_traces(
    engine: Engine,
    n: int,
    *,
    decide: Callable[[int], str | None] = lambda i: DECISIONS[i % len(DECISIONS)],
    feedback: Callable[[int], str | None] = lambda i: None,
    restricted: Callable[[int], bool] = lambda i: False,
    versions: Callable[[int], dict[str, str]] = lambda i: {},
    start: dt.datetime = START,
    prefix: str = "t",
    batch: int = 20_000,
) -> None:
    """Insert ``n`` traces numbered from 0, one minute apart."""
    for lo in range(0, n, batch):
        rows = [
            {
                "trace_id": f"{prefix}-{i:07d}",
                "at": start + dt.timedelta(minutes=i),
                "query": f"question {i}",
                "decision": decide(i),
                "reason_code": None if decide(i) == "answer" else "support_below_threshold",
                "feedback": feedback(i),
                "restricted": restricted(i),
                "identity_scopes": ["public"],
                "citations": [],
                "versions": versions(i),
                "attributes": {},
                "redactions": {},
            }
            for i in range(lo, min(n, lo + batch))
        ]

        def work(s: Session, rows: Sequence[dict[str, Any]] = rows) -> None:
            s.execute(insert(Trace), rows)
            rollup.add_counts(s, rollup.aggregate(rows))  # as the import keeps it

        run_write(engine, work)


def add_trace(
    engine: Engine,
    trace_id: str,
    *,
    at: dt.datetime = START,
    query: str = "How long do we have to ask for a refund on a monthly plan?",
    decision: str | None = "answer",
    reason_code: str | None = None,
    answer_text: str = "",
    citations: Sequence[dict[str, Any]] = (),
    chunks: Sequence[dict[str, Any]] = (),
    feedback: str | None = None,
    restricted: bool = False,
    **fields: Any,
) -> int:
    """One trace with its chunks; returns its primary key."""

    def work(s: Session) -> int:
        row = Trace(
            trace_id=trace_id,
            at=at,
            query=query,
            decision=decision,
            reason_code=reason_code,
            answer_text=answer_text,
            citations=list(citations),
            feedback=feedback,
            restricted=restricted,
            identity_scopes=fields.pop("identity_scopes", ["public"]),
            **fields,
        )
        s.add(row)
        s.flush()
        rollup.add_counts(
            s, rollup.aggregate([{c.key: getattr(row, c.key) for c in Trace.__table__.columns}])
        )
        for i, c in enumerate(chunks, start=1):
            s.add(
                TraceChunk(
                    trace_pk=row.id,
                    trace_at=row.at,
                    chunk_id=c["chunk_id"],
                    doc_id=c.get("doc_id"),
                    doc_version=c.get("doc_version"),
                    rank=c.get("rank", i),
                    score=c.get("score"),
                    text=c.get("text", ""),
                    filtered=c.get("filtered", False),
                )
            )
        return row.id

    return run_write(engine, work)


REFUND: dict[str, Any] = {
    "chunk_id": "POL-REFUND-MONTHLY@2#2.1",
    "doc_id": "POL-REFUND-MONTHLY",
    "doc_version": 2,
    "score": 0.83,
    "text": "2.1 A monthly plan charge can be refunded if asked for within 14 days of the charge.",
}
PLANS: dict[str, Any] = {
    "chunk_id": "PROD-PLANS@2#tiers",
    "doc_id": "PROD-PLANS",
    "doc_version": 2,
    "score": 0.71,
    "text": "The Team plan includes 20 seats; Enterprise seats are negotiated per contract.",
}
CONTRACT: dict[str, Any] = {
    "chunk_id": "CTR-MSA-ENT@2#7.2",
    "doc_id": "CTR-MSA-ENT",
    "doc_version": 2,
    "score": 0.66,
    "text": "7.2 Enterprise customers receive a pro-rated credit for unused prepaid months.",
    "filtered": True,
}
SLA: dict[str, Any] = {
    "chunk_id": "SLA-TEAM@1#uptime",
    "doc_id": "SLA-TEAM",
    "doc_version": 1,
    "score": 0.58,
    "text": "The Team plan targets 99.9 % monthly uptime, measured per calendar month.",
}

QUESTIONS = (
    "How many days do we have to ask for a refund of a monthly charge?",
    "Does the Team plan include more than 20 seats?",
    "What credit do Enterprise customers get when they cancel early?",
    "What uptime does the Team plan promise?",
    "Can you tell me the private pricing memo for 2026?",
    "Is the refund window the same in France?",
)


def realistic_traces(engine: Engine, n: int = 120, seed: int = 3) -> int:
    """A month and a half of traces: answers with inline citations, refusals, feedback, some
    filtered chunks and restricted traces. Returns how many were written."""
    rnd = random.Random(seed)
    rows: list[dict[str, Any]] = []
    chunk_rows: list[tuple[int, list[dict[str, Any]]]] = []
    for i in range(n):
        at = START + dt.timedelta(hours=9 * i + rnd.randint(0, 5))
        roll = rnd.random()
        decision = (
            "answer"
            if roll < 0.5
            else "abstain"
            if roll < 0.75
            else "partial"
            if roll < 0.85
            else "clarify"
            if roll < 0.93
            else "escalate"
        )
        q = QUESTIONS[i % len(QUESTIONS)]
        chunks = [dict(REFUND), dict(PLANS)] if i % 2 == 0 else [dict(SLA), dict(CONTRACT)]
        if i % 9 == 4:
            chunks = []
        answer = ""
        citations: list[dict[str, Any]] = []
        if decision in ("answer", "partial") and chunks:
            first = chunks[0]["chunk_id"]
            answer = (
                f"You can ask for it within 14 days of the charge date [{first}]. "
                "Refunds go back to the original payment method."
            )
            citations = [{"claim": "Refund within 14 days of the charge.", "chunk_ids": [first]}]
        elif decision in ("answer", "partial"):
            decision = "abstain"
        if decision not in ("answer", "partial"):
            answer = (
                "The sources available to you do not establish this. Could you name the "
                "contract or the plan?"
            )
        feedback = rnd.choice(
            [None, None, None, "positive", "negative", "expected_answer", "answer_wrong"]
        )
        if decision in ("answer", "partial") and feedback == "expected_answer":
            feedback = "answer_wrong"
        if decision not in ("answer", "partial") and feedback == "answer_wrong":
            feedback = "expected_answer"
        rows.append(
            {
                "trace_id": f"bw-{at:%Y-%m-%d}-{i:05d}",
                "at": at,
                "query": q,
                "decision": decision,
                "reason_code": (
                    None
                    if decision in ("answer", "partial")
                    else rnd.choice(["no_answer_bearing_evidence", "support_below_threshold"])
                ),
                "answer_text": answer,
                "citations": citations,
                "feedback": feedback,
                "restricted": i % 15 == 7,
                "identity_scopes": ["public"],
                "language": rnd.choice(["en", "en", "de", "fr"]),
                "customer_tier": rnd.choice(["team", "team", "enterprise", "free"]),
                "policy_version": "no-answer-policy@2" if i < n // 2 else "no-answer-policy@3",
                "model_version": "gpt-4.1-mini",
                "hits_after_filter": sum(1 for c in chunks if not c.get("filtered")),
                "top_score": max((c["score"] for c in chunks), default=None),
                "ranking_mode": "cosine",
                "ungrounded": feedback == "answer_wrong",
                "versions": {"policy": "no-answer-policy@2"},
                "attributes": {"slice": "access_filtered_answer"} if i % 2 else {},
            }
        )
        chunk_rows.append((i, chunks))

    def work(s: Session) -> int:
        ids = []
        for r in rows:
            t = Trace(**r)
            s.add(t)
            s.flush()
            ids.append(t.id)
        for i, chunks in chunk_rows:
            for rank, c in enumerate(chunks, start=1):
                s.add(
                    TraceChunk(
                        trace_pk=ids[i],
                        chunk_id=c["chunk_id"],
                        doc_id=c["doc_id"],
                        doc_version=c["doc_version"],
                        rank=rank,
                        score=c["score"],
                        text=c["text"],
                        filtered=bool(c.get("filtered", False)),
                    )
                )
        return len(ids)

    return run_write(engine, work)


def sql_bulk_traces(engine: Engine, n: int, strata: int = 5) -> None:
    """``n`` bare traces generated inside SQLite by one INSERT ... SELECT (a recursive CTE):
    decision cycles through ``DECISIONS[:strata]``, every 13th trace has feedback; their
    sampling keys are written afterwards, as every trace writer fills them."""
    assert engine.dialect.name == "sqlite"
    decisions = " ".join(f"WHEN {i} THEN '{d}'" for i, d in enumerate(DECISIONS[:strata]))
    sql = f"""
        WITH RECURSIVE seq(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i < {n - 1})
        INSERT INTO traces (trace_id, at, query, identity_scopes, context_sent, decision,
                            answer_text, citations, feedback, versions, attributes, restricted,
                            redactions, imported_at)
        SELECT printf('bulk-%08d', i),
               datetime('2025-06-01 00:00:00', printf('+%d seconds', i * 7)) || '.000000',
               'question ' || i, '["public"]', '',
               CASE i % {strata} {decisions} END,
               '', '[]', CASE WHEN i % 13 = 0 THEN 'expected_answer' END, '{{}}', '{{}}', 0,
               '{{}}', '2025-07-01 00:00:00.000000'
        FROM seq
    """
    with engine.begin() as conn:
        conn.exec_driver_sql(sql)
        keys = [
            (trace_sample_key(tid), pk)
            for pk, tid in conn.exec_driver_sql(
                "SELECT id, trace_id FROM traces WHERE sample_key IS NULL"
            )
        ]
        conn.exec_driver_sql("UPDATE traces SET sample_key = ? WHERE id = ?", keys)
    rollup.rebuild(engine)
