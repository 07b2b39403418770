"""The scale benchmark: every page and the heavy services on a team-sized database.

    .venv/bin/python benchmarks/scale.py [--traces 1000000] [--cases 50000] [--labels 200000]
                                         [--out benchmarks/out] [--workdir DIR] [--keep]
                                         [--build-only]
                                         [--database-url URL | --pg-server]
                                         [--record [PATH]] [--compare PATH]
    .venv/bin/python benchmarks/scale.py --table RECORD [RECORD ...]

1. Builds a database (a SQLite file in a temporary folder; ``--database-url`` (alias ``--url``)
   names an empty PostgreSQL database instead, and ``--pg-server`` starts a throwaway server
   (tests/helpers/pgserver.py) with a database made for the run, stopped at the end unless
   ``--keep``): the Brightwave demo (users, corpus, cases, labels, runs, policies, demo traces,
   audits, reviews) through ``review.demo.fixtures.build_demo``, then bulk inserts of N
   production traces with 5 chunks each, the cases (claims, documents, slices, families) and
   the labels (with revisions and adjudications), in batches of one transaction each. Values
   come from the taxonomy and the demo documents' real passages.
2. Measures the references of the run: one full read of the traces table (every column of
   every row streamed through the driver, median of 3), which the database figures are scaled
   by; the import's floor and scikit-learn are measured beside the import and the sweep.
3. Renders the default view of every page registered in app.py with AppTest through the real
   router, one child process per page (so its memory is its own): first view (cold data
   caches, warm imports and engine) and a rerun, with the peak resident memory during the
   page and the Python heap peak (tracemalloc) of another cold open.
4. Times the audit sampling (``count_population``, ``create_plan`` and ``draw_plan`` of 400
   traces from all traces), the Thresholds page's replay of a proposal over the logged
   signals of every trace (``replay_traces``), then the trace import
   (``review.traces.importer.import_file`` of a generated canonical JSONL file of
   ``--import-traces`` traces, default 1,000,000 with 5 chunks each, into the large database,
   and again to show the duplicate check, beside the floor: plain sqlite3 executemany, or
   ``COPY`` on PostgreSQL, of the same rows into the same database in one transaction, rolled
   back, measured first), and the risk-coverage sweep over 1,000,000 outcomes
   (``review.policy.selective``) beside scikit-learn's ``precision_recall_curve`` on the same
   data: the curve, the full sweep (the DataFrame of every column included) and scikit-learn
   each run five times in turn in one process, and each figure is the run of median wall
   time. (Until December 2026 each was timed once, the curve first and cold, so one busy
   moment or the first touch of fresh memory could double a ratio; the work timed is the
   same.) The import runs last of the database steps: it grows the database.
5. Every step records wall time (``perf_counter``) and CPU time (``process_time`` of the
   process doing the work: on SQLite the SQL is in it, on PostgreSQL the server's CPU is not).
   Prints the regressions against the recorded figures of the same engine
   (``benchmarks/recorded/scale-ENGINE.json``, or ``--compare PATH``) by ratio to the
   reference of each run, then the improvements, then one Markdown table with the machine,
   sizes, references and each figure's wall, CPU, ratio, target and whether it is met
   (``benchmarks/figures.py``), with the slowest SQL statements of every page over a second;
   writes it to ``OUT/scale.md``, the raw figures to ``OUT/scale.json`` and the run's record
   to ``OUT/scale-ENGINE.json``.
   ``--record`` writes the run's figures to the engine's record; ``--table`` renders recorded
   runs (SQLite and PostgreSQL) side by side in one table.

Figures are printed, never asserted. ``--workdir DIR --keep`` keeps the built SQLite database
(with ``--pg-server``, the PostgreSQL cluster, in ``DIR/pg``), and a later run with the same
``--workdir`` and sizes reuses it (skipping the build). ``--build-only`` stops once the database
is built (or brought to this commit's schema): a 10M PostgreSQL build takes an hour or more, so
it is made once and measured by later runs.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import datetime as dt
import functools
import json
import os
import platform
import random
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import IO, Any, cast

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sqlalchemy import Engine, Table, func, insert, select, text  # noqa: E402

from benchmarks import figures  # noqa: E402
from review.cases.agreed import rebuild_agreed  # noqa: E402
from review.core.taxonomy import Taxonomy, load_taxonomy  # noqa: E402
from review.labels.agreement_rollup import rebuild_rollup  # noqa: E402
from review.policy import inforce  # noqa: E402
from storage import partitions  # noqa: E402
from storage.db import make_engine, migrate, run_write, write_session  # noqa: E402
from storage.models import (  # noqa: E402
    Adjudication,
    Case,
    CaseClaim,
    CaseDocument,
    CaseFamily,
    CaseSlice,
    Document,
    Label,
    Trace,
    TraceChunk,
    TraceImport,
    User,
    trace_sample_key,
)

ADMIN = "ada.admin@brightwave.example"
REVIEWER = "ravi.menon@brightwave.example"
DEMO_ANNOTATORS = (
    "ines.duarte@brightwave.example",
    "tom.becker@brightwave.example",
    "ravi.menon@brightwave.example",
)
EXTRA_ANNOTATORS = 9  # a team of twelve annotators
DOCS_DIR = ROOT / "review" / "demo" / "docs"
CASES_FILE = ROOT / "review" / "demo" / "cases.jsonl"
BATCH_TRACES = 10_000  # traces per transaction of the bulk load (50,000 rows with chunks)
BATCH_ROWS = 20_000  # rows per transaction for cases and labels
SQLITE_TS = "%Y-%m-%d %H:%M:%S.%f"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def rss_mib() -> float:
    """Peak resident memory of this process so far (ru_maxrss is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Clock:
    """Wall time (``time.perf_counter``) and CPU time (``time.process_time``: this process, all
    its threads) of a block. On PostgreSQL the server's CPU is not in it; on SQLite the SQL
    runs in this process and is."""

    wall: float = 0.0
    cpu: float = 0.0

    def __enter__(self) -> Clock:
        self._w0, self._c0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._w0
        self.cpu = time.process_time() - self._c0

    def put(self, out: dict[str, Any], key: str) -> None:
        """Record as ``out[key + "_s"]`` (wall) and ``out[key + "_cpu_s"]`` (CPU)."""
        out[f"{key}_s"] = self.wall
        out[f"{key}_cpu_s"] = self.cpu


# ---------------------------------------------------------------------------------------
# Bulk writer: driver executemany on SQLite, SQLAlchemy core insert() elsewhere


def _converter(col: Any) -> Callable[[Any], Any] | None:
    from sqlalchemy import JSON, Boolean, Date

    from storage.models import UTCDateTime

    t = col.type
    if isinstance(t, JSON):
        return lambda v: None if v is None else json.dumps(v)
    if isinstance(t, UTCDateTime):
        return lambda v: None if v is None else v.astimezone(dt.UTC).strftime(SQLITE_TS)
    if isinstance(t, Date):
        return lambda v: None if v is None else v.isoformat()
    if isinstance(t, Boolean):
        return lambda v: None if v is None else int(bool(v))
    return None


def _copy_converter(col: Any) -> Callable[[Any], Any] | None:
    """A value's form for PostgreSQL's COPY: JSON as its text, everything else as it is."""
    from sqlalchemy import JSON

    if isinstance(col.type, JSON):
        return lambda v: None if v is None else json.dumps(v)
    return None


class BulkWriter:
    """Insert many rows of one table per call; one transaction per call: the driver's
    executemany on SQLite, ``COPY ... FROM STDIN`` (psycopg's ``cursor.copy``) on PostgreSQL,
    other engines through SQLAlchemy's insert()."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.sqlite = engine.dialect.name == "sqlite"
        self._plans: dict[str, tuple[str, list[str], list[Callable[[Any], Any] | None]]] = {}

    def _plan(
        self, table: Table, columns: Sequence[str]
    ) -> tuple[str, list[str], list[Callable[[Any], Any] | None]]:
        key = f"{table.name}:{','.join(columns)}"
        if key not in self._plans:
            sql = (
                f"INSERT INTO {table.name} ({', '.join(columns)}) "
                f"VALUES ({', '.join('?' * len(columns))})"
            )
            self._plans[key] = (sql, list(columns), [_converter(table.c[c]) for c in columns])
        return self._plans[key]

    def write(self, parts: Sequence[tuple[Table, list[dict[str, Any]]]]) -> None:
        """Insert every (table, rows) pair in order, in one transaction."""
        with self.engine.begin() as conn:
            for table, rows in parts:
                if not rows:
                    continue
                if self.sqlite:
                    sql, cols, convs = self._plan(table, list(rows[0]))
                    params = [
                        tuple(
                            r[c] if f is None else f(r[c]) for c, f in zip(cols, convs, strict=True)
                        )
                        for r in rows
                    ]
                    conn.exec_driver_sql(sql, params)
                elif self.engine.dialect.name == "postgresql":
                    self._copy(conn, table, rows)
                else:
                    conn.execute(insert(table), rows)

    def _copy(self, conn: Any, table: Table, rows: list[dict[str, Any]]) -> None:
        """COPY the rows in the connection's transaction (the columns of the first row)."""
        cols = list(rows[0])
        convs = [_copy_converter(table.c[c]) for c in cols]
        cur = conn.connection.driver_connection.cursor()
        try:
            with cur.copy(f"COPY {table.name} ({', '.join(cols)}) FROM STDIN") as cp:
                for r in rows:
                    cp.write_row(
                        tuple(
                            r[c] if f is None else f(r[c]) for c, f in zip(cols, convs, strict=True)
                        )
                    )
        finally:
            cur.close()

    def fix_sequences(self, tables: Sequence[Table]) -> None:
        """After explicit ids on PostgreSQL, move each id sequence past the largest id."""
        if self.engine.dialect.name != "postgresql":
            return
        with self.engine.begin() as conn:
            for table in tables:
                conn.execute(
                    text(
                        f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), "
                        f"(SELECT COALESCE(MAX(id), 1) FROM {table.name}))"
                    )
                )


def _table(model: Any) -> Table:
    t = model.__table__
    assert isinstance(t, Table)
    return t


def _next_id(engine: Engine, model: Any) -> int:
    with engine.connect() as conn:
        return int(conn.scalar(select(func.coalesce(func.max(model.id), 0))) or 0) + 1


# ---------------------------------------------------------------------------------------
# Realistic values


@dataclasses.dataclass(frozen=True)
class Passage:
    chunk_id: str
    doc_id: str
    version: int
    text: str
    effective_date: dt.date | None
    restricted: bool


def load_passages(tax: Taxonomy) -> list[Passage]:
    """Paragraphs of the demo documents (the chunks production retrieval would return)."""
    from review.corpus.docformat import parse_markdown

    out: list[Passage] = []
    for path in sorted(DOCS_DIR.glob("*.md")):
        doc = parse_markdown(path.read_text(encoding="utf-8"), path.name, tax)
        for i, para in enumerate(p.strip() for p in doc.body.split("\n\n")):
            if para and not para.startswith("#"):
                out.append(
                    Passage(
                        f"{doc.doc_id}@{doc.version}#p{i}",
                        doc.doc_id,
                        doc.version,
                        para[:1500],
                        doc.effective_date,
                        doc.access_scope == "restricted",
                    )
                )
    return out


def demo_questions() -> list[str]:
    with CASES_FILE.open(encoding="utf-8") as fh:
        return [json.loads(line)["question"] for line in fh if line.strip()]


def _weighted(rng: random.Random, items: Sequence[tuple[Any, float]]) -> Any:
    return rng.choices([i for i, _ in items], weights=[w for _, w in items])[0]


TRACE_OUTCOMES: tuple[tuple[str, float], ...] = (
    ("answer", 0.58),
    ("caveat", 0.07),
    ("abstain", 0.19),
    ("clarify", 0.07),
    ("partial", 0.03),
    ("escalate", 0.05),
    ("empty", 0.01),
)
ABSTAIN_REASONS: tuple[tuple[str, float], ...] = (
    ("no_answer_bearing_evidence", 0.4),
    ("required_claim_not_covered", 0.15),
    ("support_below_threshold", 0.2),
    ("evidence_stale", 0.07),
    ("source_not_allowed", 0.1),
    ("conflicting_evidence", 0.08),
)
LANGUAGES = (("en", 0.7), ("de", 0.12), ("fr", 0.1), ("es", 0.08))
TIERS = (("starter", 0.25), ("team", 0.35), ("business", 0.25), ("enterprise", 0.15))
DOC_TYPES = ("policy", "contract", "guide", "price_list", "faq")
# the topic classifier's keys on an escalated question (restricted_topics of the policy file);
# every other trace is classified with no topic ([]), as the demo's are: a trace with no
# classification (NULL) cannot be replayed under the policy (its restricted-topic check fails
# closed)
ESCALATED_TOPICS = ("legal_dispute", "security_incident", "personal_data_request")
REFUSALS = {
    "abstain": (
        "The sources I can access do not establish this. If you tell me the contract name or "
        "the date you mean, I can look again."
    ),
    "clarify": "Do you mean the monthly or the annual plan? The answer differs between them.",
    "partial": (
        "Part of this is covered: refunds of monthly charges are possible within 14 days. The "
        "allowed sources do not establish how long the payment provider takes."
    ),
    "escalate": "This needs a person: I have passed your question to the account team.",
    "empty": "I found nothing in the sources you can access that answers this.",
}


class TraceMaker:
    """Synthetic production traces, spread evenly over ``weeks`` weeks ending now."""

    def __init__(self, tax: Taxonomy, n: int, weeks: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.n = n
        passages = load_passages(tax)
        self.open = [p for p in passages if not p.restricted]
        self.closed = [p for p in passages if p.restricted]
        self.questions = demo_questions()
        self.end = dt.datetime.now(dt.UTC).replace(microsecond=0)
        self.start = self.end - dt.timedelta(weeks=weeks)
        self.span = (self.end - self.start).total_seconds()
        self.now = dt.datetime.now(dt.UTC)

    def rows(
        self, first_pk: int, lo: int, hi: int, import_id: int
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        rng = self.rng
        traces: list[dict[str, Any]] = []
        chunks: list[dict[str, Any]] = []
        for i in range(lo, hi):
            pk = first_pk + i
            frac = i / max(1, self.n)
            at = self.start + dt.timedelta(seconds=self.span * frac + rng.random() * 30)
            kind = _weighted(rng, TRACE_OUTCOMES)
            restricted = rng.random() < 0.005
            mode = "vector" if rng.random() < 0.67 else "semantic_reranker"
            hi_band = kind in ("answer", "partial")
            if mode == "vector":
                top = rng.uniform(0.66, 0.95) if hi_band else rng.uniform(0.34, 0.7)
                if kind == "caveat":
                    top = rng.uniform(0.6, 0.66)
            else:
                top = rng.uniform(2.2, 3.9) if hi_band else rng.uniform(0.2, 2.4)
                if kind == "caveat":
                    top = rng.uniform(1.9, 2.2)
            top = round(top, 4)
            pool = self.closed if restricted else self.open
            picked = rng.sample(pool, 5) if len(pool) >= 5 else [rng.choice(pool) for _ in "12345"]
            filtered_last = not restricted and rng.random() < 0.1
            for k, p in enumerate(picked):
                filtered = k == 4 and filtered_last
                src = rng.choice(self.closed) if filtered and self.closed else p
                chunks.append(
                    {
                        "trace_pk": pk,
                        "trace_at": at,
                        "chunk_id": src.chunk_id,
                        "doc_id": src.doc_id,
                        "doc_version": src.version,
                        "rank": k + 1,
                        "score": round(top * (1 - 0.04 * k), 4),
                        "text": src.text,
                        "filtered": filtered,
                        "effective_date": src.effective_date,
                    }
                )
            sent = [c for c in chunks[-5:] if not c["filtered"]][:3]
            context = "\n\n".join(f"[{c['chunk_id']}] {c['text']}" for c in sent)
            hits = 0 if kind == "empty" else len([c for c in chunks[-5:] if not c["filtered"]])
            decision = {"caveat": "answer", "empty": "abstain"}.get(kind, kind)
            reason: str | None = {
                "answer": None,
                "caveat": "support_below_threshold",
                "clarify": "ambiguous_question",
                "partial": "required_claim_not_covered",
                "escalate": "restricted_topic",
                "empty": "no_answer_bearing_evidence",
            }.get(kind)
            if kind == "abstain":
                reason = _weighted(rng, ABSTAIN_REASONS)
            if decision != "answer" and rng.random() < 0.002:
                reason = None  # refusals logged without a reason (a monitoring alert)
            answered = decision in ("answer", "partial")
            r = rng.random()
            if answered:
                feedback = "positive" if r < 0.06 else "answer_wrong" if r < 0.075 else None
            else:
                feedback = "expected_answer" if r < 0.05 else None
            q = self.questions[rng.randrange(len(self.questions))]
            answer = (
                "You can ask for a refund of a monthly charge within 14 days of the charge date."
                if answered
                else REFUSALS[kind]
            )
            traces.append(
                {
                    "id": pk,
                    "trace_id": f"scale-{i:08d}",
                    "at": at,
                    "query": q,
                    "rewritten_query": " ".join(q.lower().split()[:8]),
                    "user_role": "legal_counsel" if restricted else "customer_admin",
                    "identity_scopes": ["public", "restricted"] if restricted else ["public"],
                    "context_sent": context,
                    "ranking_mode": mode,
                    "hits_after_filter": hits,
                    "top_score": top if hits else None,
                    "answerable": kind not in ("abstain", "empty", "escalate"),
                    "ambiguous": kind == "clarify",
                    "ungrounded": rng.random() < 0.02,
                    "topics": (
                        [ESCALATED_TOPICS[rng.randrange(len(ESCALATED_TOPICS))]]
                        if kind == "escalate"
                        else []
                    ),
                    "decision": decision,
                    "reason_code": reason,
                    "answer_text": answer,
                    "citations": (
                        [{"claim": answer, "chunk_ids": [sent[0]["chunk_id"]]}]
                        if answered and sent
                        else []
                    ),
                    "feedback": feedback,
                    "versions": {
                        "model": "gpt-4.1-mini-2025-04-14",
                        "embedding": "text-embedding-3-large",
                        "reranker": "bge-reranker-v2-m3" if mode != "vector" else "none",
                        "prompt": "support-answer@12" if frac < 0.4 else "support-answer@13",
                        "index": "kb-2025-q2" if frac < 0.7 else "kb-2025-q3-rechunked",
                        "policy": "no-answer-policy@2" if frac < 0.35 else "no-answer-policy@3",
                    },
                    "attributes": {
                        "language": _weighted(rng, LANGUAGES),
                        "customer_tier": _weighted(rng, TIERS),
                        "document_type": DOC_TYPES[rng.randrange(len(DOC_TYPES))],
                    },
                    "policy_version": "no-answer-policy@2" if frac < 0.35 else "no-answer-policy@3",
                    "model_version": "gpt-4.1-mini-2025-04-14",
                    "language": None,  # filled below from the attributes
                    "customer_tier": None,
                    "document_type": None,
                    "restricted": restricted,
                    "redactions": {},
                    "import_id": import_id,
                    "imported_at": self.now,
                    "sample_key": trace_sample_key(f"scale-{i:08d}"),
                }
            )
            row = traces[-1]
            for key in ("language", "customer_tier", "document_type"):
                row[key] = row["attributes"][key]
        return traces, chunks


def load_traces(engine: Engine, tax: Taxonomy, n: int, weeks: int, seed: int) -> None:
    if n <= 0:
        return
    w = BulkWriter(engine)
    with engine.begin() as conn:
        import_id = int(
            conn.execute(
                insert(TraceImport).returning(TraceImport.id),
                {
                    "source": "benchmark bulk load (benchmarks/scale.py)",
                    "format": "canonical",
                    "status": "done",
                    "added": n,
                    "actor": ADMIN,
                    "message": f"{n} synthetic traces",
                    "finished_at": dt.datetime.now(dt.UTC),
                },
            ).scalar_one()
        )
    maker = TraceMaker(tax, n, weeks, seed)
    with engine.begin() as conn:  # the months' partitions on PostgreSQL (storage.partitions)
        day = dt.timedelta(days=1)
        partitions.ensure_months(conn, [maker.start + day * d for d in range(0, weeks * 7 + 2)])
    from review.traces import rollup

    # a bulk load bypasses the import, so the monitoring rollup counts what it writes, as the
    # import would (the same aggregate), and adds it once at the end
    counts: dict[rollup.Key, list[int]] = {}
    first = _next_id(engine, Trace)
    t0 = time.perf_counter()
    with indexes_after(engine):
        for lo in range(0, n, BATCH_TRACES):
            hi = min(n, lo + BATCH_TRACES)
            traces, chunks = maker.rows(first, lo, hi, import_id)
            w.write([(_table(Trace), traces), (_table(TraceChunk), chunks)])
            for key, ns in rollup.aggregate(traces).items():
                got = counts.setdefault(key, [0] * len(ns))
                for k, v in enumerate(ns):
                    got[k] += v
            if (hi // BATCH_TRACES) % 10 == 0 or hi == n:
                rate = hi / (time.perf_counter() - t0)
                log(f"  traces {hi:,}/{n:,} ({rate:,.0f}/s)")
    w.fix_sequences([_table(Trace)])
    run_write(engine, lambda s: rollup.add_counts(s, counts))
    log(f"  rollup: {len(counts):,} rows counted")


@contextlib.contextmanager
def indexes_after(engine: Engine) -> Iterator[None]:
    """On PostgreSQL, load the traces and chunks without their secondary indexes, the chunks'
    foreign key and the trace id's uniqueness trigger, and make them again at the end (one
    sort per index instead of millions of insertions into each): the same schema after,
    checked as it would have been (the key validated, a trace id stored twice refused).
    Elsewhere a plain load."""
    if engine.dialect.name != "postgresql":
        yield
        return
    made: list[str] = []
    with engine.begin() as conn:
        for t in ("traces", "trace_chunks"):
            found = conn.exec_driver_sql(
                "SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x "
                "JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = %(t)s::regclass "
                "AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.oid)",
                {"t": t},
            ).all()
            for name, definition in found:
                # a partitioned table's index reads "ON ONLY traces": made so, it would be an
                # empty shell without the partitions' indexes
                made.append(str(definition).replace(" ON ONLY ", " ON ", 1))
                conn.exec_driver_sql(f"DROP INDEX {name}")
        fk = conn.exec_driver_sql(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conname = 'fk_trace_chunks_trace_pk_traces' AND conparentid = 0"
        ).scalar_one()
        conn.exec_driver_sql(
            "ALTER TABLE trace_chunks DROP CONSTRAINT fk_trace_chunks_trace_pk_traces"
        )
        conn.exec_driver_sql("ALTER TABLE traces DISABLE TRIGGER traces_unique_trace_id")
    t0 = time.perf_counter()
    try:
        yield
    finally:
        log(f"  rows written in {time.perf_counter() - t0:.0f}s; indexes ...")
        t0 = time.perf_counter()
        with engine.begin() as conn:
            conn.exec_driver_sql("SET LOCAL maintenance_work_mem = '1GB'")
            for definition in made:
                conn.exec_driver_sql(definition)
            conn.exec_driver_sql(
                f"ALTER TABLE trace_chunks ADD CONSTRAINT fk_trace_chunks_trace_pk_traces {fk}"
            )
            twice = conn.exec_driver_sql(
                "SELECT trace_id FROM traces GROUP BY trace_id HAVING count(*) > 1 LIMIT 1"
            ).scalar()
            if twice is not None:
                raise RuntimeError(f"the bulk load stored trace id {twice!r} twice")
            conn.exec_driver_sql("ALTER TABLE traces ENABLE TRIGGER traces_unique_trace_id")
        log(f"  {len(made)} indexes and the chunks' key made in {time.perf_counter() - t0:.0f}s")


def load_cases_and_labels(
    engine: Engine, tax: Taxonomy, n_cases: int, n_labels: int, seed: int
) -> None:
    """Cases with claims, documents, slices and families; labels by a team of annotators
    (about one label row in ten revises the annotator's earlier label); adjudications on a
    third of the disagreements."""
    rng = random.Random(seed + 1)
    w = BulkWriter(engine)
    now = dt.datetime.now(dt.UTC)
    annotators = [
        *DEMO_ANNOTATORS,
        *(f"annotator{k:02d}@brightwave.example" for k in range(1, EXTRA_ANNOTATORS + 1)),
    ]
    with engine.connect() as conn:
        known = set(conn.scalars(select(User.email)))
        docs = [
            (int(r[0]), str(r[1])) for r in conn.execute(select(Document.id, Document.access_scope))
        ]
    w.write(
        [
            (
                _table(User),
                [
                    {
                        "email": e,
                        "name": f"Annotator {e[9:11]}",
                        "roles": ["annotator"],
                        "clearance": False,
                        "active": True,
                        "version": 1,
                        "created_at": now,
                        "updated_at": now,
                        "updated_by": ADMIN,
                    }
                    for e in annotators
                    if e not in known
                ],
            )
        ]
    )
    if n_cases <= 0 or not docs:
        return
    questions = demo_questions()
    decisions = list(tax.decisions)
    cats = list(tax.categories)
    reasons = list(tax.reason_codes)
    slices = list(tax.slices)
    splits = list(tax.splits)
    states = list(tax.evidence_states)
    roles = list(tax.document_roles)
    first_case = _next_id(engine, Case)
    first_family = _next_id(engine, CaseFamily)
    first_label = _next_id(engine, Label)
    per_case, extra = divmod(max(0, n_labels), n_cases)
    label_id = first_label
    for lo in range(0, n_cases, BATCH_ROWS // 4):
        hi = min(n_cases, lo + BATCH_ROWS // 4)
        fam_rows: list[dict[str, Any]] = []
        case_rows: list[dict[str, Any]] = []
        claim_rows: list[dict[str, Any]] = []
        doc_rows: list[dict[str, Any]] = []
        slice_rows: list[dict[str, Any]] = []
        label_rows: list[dict[str, Any]] = []
        adj_rows: list[dict[str, Any]] = []
        for i in range(lo, hi):
            cid = first_case + i
            if i % 10 == 0:
                fam_rows.append(
                    {
                        "id": first_family + i // 10,
                        "key": f"SFAM-{i // 10:06d}",
                        "title": f"Family {i // 10}: {questions[i % len(questions)][:80]}",
                        "created_at": now,
                        "created_by": ADMIN,
                    }
                )
            cat = cats[rng.randrange(len(cats))]
            decision = tax.categories[cat].default_decision
            if rng.random() < 0.1:
                decision = decisions[rng.randrange(len(decisions))]
            answers = tax.decisions[decision].answers
            codes = (
                ([] if cat != "false_premise" else ["false_premise"])
                if answers
                else rng.sample([r for r in reasons if r != "false_premise"], rng.choice((1, 1, 2)))
            )
            status = "ready" if rng.random() < 0.85 else rng.choice(("draft", "retired"))
            case_rows.append(
                {
                    "id": cid,
                    "key": f"SC-{i + 1:06d}",
                    "question": f"{questions[rng.randrange(len(questions))]} (variant {i + 1})",
                    "identity_name": rng.choice(("customer-team-eu", "customer-enterprise-us")),
                    "identity_scopes": ["public"],
                    "expected_decision": decision,
                    "reason_codes": codes,
                    "category": cat,
                    "split": splits[rng.randrange(len(splits))],
                    "status": status,
                    "family_id": first_family + i // 10,
                    "evidence_state": states[rng.randrange(len(states))],
                    "notes": "Synthetic case of the scale benchmark.",
                    "version": 1,
                    "created_at": now,
                    "created_by": ADMIN,
                    "updated_at": now,
                    "updated_by": ADMIN,
                }
            )
            n_claims = rng.choice((1, 1, 2, 3))
            for pos in range(n_claims):
                claim_rows.append(
                    {
                        "case_id": cid,
                        "position": pos,
                        "text": f"Required claim {pos + 1} of case {i + 1}.",
                    }
                )
            for pos, (doc_id, scope) in enumerate(rng.sample(docs, min(len(docs), 3))):
                doc_rows.append(
                    {
                        "case_id": cid,
                        "document_id": doc_id,
                        "position": pos,
                        "visibility": "forbidden" if scope == "restricted" else "visible",
                        "role": roles[rng.randrange(len(roles))],
                    }
                )
            for sl in rng.sample(slices, rng.choice((0, 1, 1, 2))):
                slice_rows.append({"case_id": cid, "slice": sl})
            # labels of this case
            k = per_case + (1 if i < extra else 0)
            if k <= 0:
                continue
            who = rng.sample(annotators, min(len(annotators), k))
            given: dict[str, int] = {}
            seen: set[str] = set()
            for j in range(k):
                revise = j > 0 and j == k - 1 and rng.random() < 0.1
                person = who[0] if revise else who[j % len(who)]
                if rng.random() < 0.8:
                    d, rc = decision, codes
                else:
                    d = decisions[rng.randrange(len(decisions))]
                    rc = [] if tax.decisions[d].answers else [reasons[rng.randrange(len(reasons))]]
                seen.add(d)
                label_rows.append(
                    {
                        "id": label_id,
                        "case_id": cid,
                        "annotator": person,
                        "decision": d,
                        "reason_codes": rc,
                        "category": cat,
                        "rationale": "Clause checked against the visible documents.",
                        "claim_verdicts": [
                            {"claim": c, "verdict": "supported" if d == "answer" else "unsupported"}
                            for c in range(n_claims)
                        ],
                        "replaces_id": given.get(person),
                        "created_at": now - dt.timedelta(minutes=k - j),
                    }
                )
                given[person] = label_id
                label_id += 1
            if len(seen) > 1 and rng.random() < 0.33:
                adj_rows.append(
                    {
                        "case_id": cid,
                        "adjudicator": REVIEWER,
                        "decision": decision,
                        "reason_codes": codes,
                        "note": "Adjudicated in the weekly calibration session.",
                        "created_at": now,
                    }
                )
        w.write(
            [
                (_table(CaseFamily), fam_rows),
                (_table(Case), case_rows),
                (_table(CaseClaim), claim_rows),
                (_table(CaseDocument), doc_rows),
                (_table(CaseSlice), slice_rows),
                (_table(Label), label_rows),
                (_table(Adjudication), adj_rows),
            ]
        )
        log(f"  cases {hi:,}/{n_cases:,}, labels {label_id - first_label:,}")
    w.fix_sequences([_table(CaseFamily), _table(Case), _table(Label)])


def build(url: str, args: argparse.Namespace, tax: Taxonomy) -> dict[str, float]:
    from review.demo import fixtures

    out: dict[str, float] = {}
    engine = make_engine(url)
    migrate(engine)
    with Clock() as c:
        report = fixtures.build_demo(engine, tax)
    c.put(out, "build_demo")
    out["demo_traces"] = float(report.traces)
    log(f"demo built in {out['build_demo_s']:.1f}s")
    with Clock() as c:
        load_traces(engine, tax, args.traces, args.weeks, args.seed)
    c.put(out, "load_traces")
    with Clock() as c:
        load_cases_and_labels(engine, tax, args.cases, args.labels, args.seed)
    c.put(out, "load_cases_labels")
    # the labels went in past the labeling service: store their agreed labels once
    with Clock() as c, write_session(engine) as s:
        agreed = rebuild_agreed(s)
    c.put(out, "rebuild_agreed")
    log(f"agreed labels of {agreed:,} cases stored")
    # and the Agreement page's counts (its pairs, per label count); until then it counts them
    with Clock() as c, write_session(engine) as s:
        pairs = rebuild_rollup(s)
    c.put(out, "rebuild_agreement_rollup")
    log(f"agreement counts stored ({pairs:,} annotator-pair rows)")
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    else:
        # what autovacuum does on a server that has run a while after such a load: the
        # planner's statistics and the visibility map that index-only scans need
        log("VACUUM ANALYZE ...")
        with Clock() as c, engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE")
        c.put(out, "vacuum_analyze")
    engine.dispose()
    return out


def sizes(url: str) -> dict[str, int]:
    engine = make_engine(url)
    out: dict[str, int] = {}
    with engine.connect() as conn:
        for name in (
            "traces",
            "trace_chunks",
            "cases",
            "labels",
            "adjudications",
            "documents",
            "users",
            "audit_log",
        ):
            out[name] = int(conn.scalar(text(f"SELECT COUNT(*) FROM {name}")) or 0)
        if engine.dialect.name == "postgresql":
            out["db_bytes"] = int(
                conn.scalar(text("SELECT pg_database_size(current_database())")) or 0
            )
    engine.dispose()
    if url.startswith("sqlite:///"):
        path = Path(url.split("///", 1)[1])
        out["db_bytes"] = path.stat().st_size if path.exists() else 0
    return out


# ---------------------------------------------------------------------------------------
# Children: one process per measurement


def registered_pages() -> list[tuple[str, str, str]]:
    """(page file, title, url_path) of every page registered in app.py (its ``PageSpec`` table,
    or ``st.Page`` calls with a file), in source order."""
    tree = ast.parse((ROOT / "app.py").read_text(encoding="utf-8"))
    found: list[tuple[int, str, str, str]] = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "Page"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            path = node.args[0].value
            kw = {
                k.arg: str(k.value.value)
                for k in node.keywords
                if k.arg and isinstance(k.value, ast.Constant)
            }
            title = kw.get("title", path)
            url_path = kw.get("url_path", Path(path).stem)
            found.append((node.lineno, path, title, url_path))
        elif (  # app.py's page table: PageSpec(section, file, title, icon, url_path, ...)
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "PageSpec"
            and len(node.args) >= 5
            and all(isinstance(a, ast.Constant) for a in node.args[:5])
        ):
            _section, file, title, _icon, url_path = (
                str(cast(ast.Constant, a).value) for a in node.args[:5]
            )
            found.append((node.lineno, f"pages/{file}", title, url_path))
    return [(path, title, url_path) for _, path, title, url_path in sorted(found)]


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def reset_peak() -> float:
    """Reset the kernel's peak-RSS mark (Linux clear_refs 5); returns current RSS in MiB."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return _status_kib("VmRSS") / 1024
    except OSError:
        return rss_mib()


def peak_since_reset() -> float:
    try:
        return _status_kib("VmHWM") / 1024
    except OSError:
        return rss_mib()


class SqlTimer:
    """Time every SQL statement run while active (any engine of the process), by statement
    text. On SQLite ``execute`` returns at the first row, so an aggregation is timed whole
    and a streamed result only until its first row."""

    def __init__(self) -> None:
        self.stats: dict[str, list[float]] = {}

    def _before(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        conn.info.setdefault("wb_bench_t0", []).append(time.perf_counter())

    def _after(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        starts = conn.info.get("wb_bench_t0") or [time.perf_counter()]
        took = time.perf_counter() - starts.pop()
        entry = self.stats.setdefault(" ".join(statement.split()), [0.0, 0.0])
        entry[0] += took
        entry[1] += 1

    def __enter__(self) -> SqlTimer:
        from sqlalchemy import event

        event.listen(Engine, "before_cursor_execute", self._before)
        event.listen(Engine, "after_cursor_execute", self._after)
        return self

    def __exit__(self, *exc: object) -> None:
        from sqlalchemy import event

        event.remove(Engine, "before_cursor_execute", self._before)
        event.remove(Engine, "after_cursor_execute", self._after)

    def total(self) -> float:
        return sum(v[0] for v in self.stats.values())

    def count(self) -> int:
        return int(sum(v[1] for v in self.stats.values()))

    def top(self, n: int) -> list[dict[str, Any]]:
        real = [kv for kv in self.stats.items() if not kv[0].startswith(("BEGIN", "COMMIT"))]
        ranked = sorted(real, key=lambda kv: -kv[1][0])[:n]
        return [{"s": v[0], "n": int(v[1]), "sql": k[:600]} for k, v in ranked]


def child_page(url: str, page: str, user: str, timeout: float) -> dict[str, Any]:
    """Render one page's default view with AppTest through the real router (app.py), signed
    in as ``user`` in local mode. A first run (the default page) warms imports, the engine and
    the router; then the data caches are cleared and the page is opened (timed), run again
    (timed, caches warm), and opened once more cold under tracemalloc."""
    import importlib
    import pkgutil
    import tracemalloc

    os.environ["WORKBENCH_DATABASE_URL"] = url
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    import review
    from review.admin import users

    for mod in pkgutil.walk_packages(review.__path__, "review."):
        importlib.import_module(mod.name)
    engine = make_engine(url)
    row = users.get_by_email(engine, user)
    engine.dispose()
    if row is None:
        raise SystemExit(f"unknown user {user}")

    def session() -> AppTest:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout)
        at.session_state["wb_user_id"] = row.id
        at.run()  # the default page: warms imports, engine, router
        return at

    at = session()
    st.cache_data.clear()
    sql = SqlTimer()
    base = reset_peak()
    with sql, Clock() as first:
        at.switch_page(page).run()
    peak = peak_since_reset()
    problems = [str(e.value)[:300] for e in at.exception] + [
        f"st.error: {e.value}"[:300] for e in at.error
    ]
    title = at.title[0].value if len(at.title) else ""
    with Clock() as rerun:
        at.run()
    # the Python-heap peak of a cold open (numpy and pandas buffers included), traced apart
    # because tracing slows the page down
    at = session()
    st.cache_data.clear()
    tracemalloc.start()
    at.switch_page(page).run()
    _cur, py_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "first_s": first.wall,
        "first_cpu_s": first.cpu,
        "rerun_s": rerun.wall,
        "rerun_cpu_s": rerun.cpu,
        "rss_base_mib": base,
        "rss_peak_mib": peak,
        "rss_growth_mib": peak - base,
        "py_peak_mib": py_peak / 2**20,
        "title": title,
        "problems": problems,
        "sql_s": sql.total(),
        "sql_n": sql.count(),
        "sql_top": sql.top(3),
    }


def child_import(url: str, n: int, workdir: str) -> dict[str, Any]:
    from benchmarks import synthetic
    from review.admin import users
    from review.core.taxonomy import load_taxonomy
    from review.traces import importer

    engine = make_engine(url)
    tax = load_taxonomy()
    folder = Path(workdir)
    data = folder / "import.jsonl"
    stamp = f"{time.time_ns():x}"

    class Renamed:
        """Gives the generated trace ids a per-run prefix: a reused database imports them."""

        def __init__(self, fh: IO[str]) -> None:
            self.fh = fh

        def write(self, line: str) -> int:
            return self.fh.write(line.replace('"trace_id":"bench-', f'"trace_id":"b{stamp}-', 1))

    t0 = time.perf_counter()
    with data.open("w", encoding="utf-8") as fh:
        synthetic.write_synthetic(cast(IO[str], Renamed(fh)), n, 5, seed=11)
    gen = time.perf_counter() - t0
    # the floor first: the same rows written raw into the same database in one transaction,
    # rolled back (the database is left as it was, and the import meets the same indexes)
    floor: dict[str, Any] = {}
    if engine.dialect.name == "sqlite":
        with Clock() as c:
            rows = synthetic.sqlite_floor(
                Path(url.removeprefix("sqlite:///")), data, schema_ready=True, rollback=True
            )
    else:
        with Clock() as c:
            rows = synthetic.postgres_floor(url, data, rollback=True)
    c.put(floor, "floor")
    row = users.get_by_email(engine, ADMIN)
    assert row is not None
    actor = users.to_actor(row)
    base = reset_peak()
    with Clock() as c:
        report = importer.import_file(engine, actor, data, "canonical", tax=tax)
    secs = c.wall
    peak = peak_since_reset()
    out: dict[str, Any] = {
        "generate_s": gen,
        "import_s": secs,
        "import_cpu_s": c.cpu,
        "added": report.added,
        "rate": report.added / secs if secs else 0.0,
        "rss_peak_mib": peak,
        "rss_growth_mib": peak - base,
        "file_mib": data.stat().st_size / 2**20,
        **floor,
    }
    # importing the same file again adds nothing (the duplicate check at this size)
    with Clock() as c:
        again = importer.import_file(engine, actor, data, "canonical", tax=tax)
    c.put(out, "reimport")
    out["reimport_added"] = again.added
    dialect = engine.dialect.name
    engine.dispose()
    out["floor_kind"] = "sqlite3 executemany" if dialect == "sqlite" else "COPY"
    out["floor_rate"] = rows / out["floor_s"] if out["floor_s"] else 0.0
    data.unlink()
    return out


def child_sampling(url: str, total: int) -> dict[str, Any]:
    from review.admin import users
    from review.audits import plans, population

    engine = make_engine(url)
    row = users.get_by_email(engine, REVIEWER)
    assert row is not None
    actor = users.to_actor(row)
    flt = population.PopulationFilter()
    out: dict[str, Any] = {}
    base = reset_peak()
    with Clock() as c:
        counts = plans.count_population(engine, flt, ("decision",))
    c.put(out, "count_decision")
    out["population"] = sum(c.count for c in counts)
    out["strata"] = len(counts)
    with Clock() as c:
        counts2 = plans.count_population(engine, flt, ("decision", "attr.customer_tier"))
    c.put(out, "count_decision_tier")
    out["strata2"] = len(counts2)
    spec = plans.PlanSpec(
        name=f"Scale benchmark {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M:%S.%f}",
        filter=flt,
        strata=("decision",),
        allocation="proportional",
        total=total,
        # a new seed each run, as each plan a user draws: the same seed again would find
        # last run's 400 traces in memory and time a draw no user waits for
        seed=random.SystemRandom().randrange(1, 2**31),
    )
    out["seed"] = spec.seed
    with Clock() as c:
        plan_id = run_write(engine, partial(plans.create_plan, actor=actor, spec=spec))
    c.put(out, "create_plan")
    with Clock() as c:
        drawn = run_write(engine, partial(plans.draw_plan, actor=actor, plan_id=plan_id))
    c.put(out, "draw")
    out["drawn"] = drawn.items
    with Clock() as c:
        out["verified"] = plans.verify_sample(engine, plan_id)
    c.put(out, "verify")
    peak = peak_since_reset()
    out["rss_peak_mib"] = peak
    out["rss_growth_mib"] = peak - base
    engine.dispose()
    return out


def _timed3(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Median wall and CPU seconds of three runs of ``fn`` (and its last result)."""
    walls: list[float] = []
    cpus: list[float] = []
    out: Any = None
    for _ in range(3):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return sorted(walls)[1], sorted(cpus)[1], out


def child_traces(url: str) -> dict[str, Any]:
    """The Traces page's interactions through review.traces.browse, as the page calls them
    (the count and the first page, newest first): the default view, opening a trace, an
    exact trace id, text searches, each filter and listing by decision; for a user with
    clearance (the benchmark reviewer) and one without. Median of 3, wall and CPU."""
    from dataclasses import replace

    from review.admin import users
    from review.traces import browse

    engine = make_engine(url)
    row = users.get_by_email(engine, REVIEWER)
    assert row is not None
    cleared = users.to_actor(row)
    uncleared = replace(cleared, clearance=False)
    with engine.connect() as conn:
        n = int(conn.execute(select(func.count()).select_from(Trace)).scalar_one())
        newest = conn.execute(
            select(Trace.id).where(Trace.restricted.is_(False)).order_by(Trace.at.desc()).limit(1)
        ).scalar_one()
        middle = conn.execute(
            select(Trace.trace_id).order_by(Trace.id).offset(n // 2).limit(1)
        ).scalar_one()
    TF = browse.TraceFilter
    cases: dict[str, browse.TraceFilter] = {
        "default": TF(),
        "exact_id": TF(text=middle),
        "text_common": TF(text="refund"),
        "text_phrase": TF(text="legal hold"),
        "text_none": TF(text="zq-no-such-words"),
        "text_short": TF(text="EU"),
        "tier": TF(customer_tier="enterprise"),
        "language": TF(language="de"),
        "document_type": TF(document_type="contract"),
        "model": TF(model_version="gpt-4.1-mini-2025-04-14"),
        "ranking_mode": TF(ranking_mode="semantic_reranker"),
        "policy_version": TF(policy_version="no-answer-policy@3"),
        "version_index": TF(version_key="index", version_value="kb-2025-q3-rechunked"),
        "decision_abstain": TF(decisions=("abstain",)),
        "decisions_two": TF(decisions=("clarify", "escalate")),
        "tier_and_decision": TF(customer_tier="enterprise", decisions=("abstain",)),
    }
    out: dict[str, Any] = {"traces": n}
    for who, actor in (("cleared", cleared), ("uncleared", uncleared)):
        for name, flt in cases.items():

            def view(f: browse.TraceFilter = flt, a: Any = actor) -> int:
                total = browse.count_traces(engine, a, f)
                browse.list_traces(engine, a, f, page=1, sort="newest")
                return total

            wall, cpu, total = _timed3(view)
            out[f"{who}.{name}"] = {"wall_s": wall, "cpu_s": cpu, "matches": total}
            log(f"  {who:9} {name:18} {wall:7.3f}s wall {cpu:7.3f}s cpu  {total:,} matches")
        wall, cpu, _ = _timed3(functools.partial(browse.get_trace, engine, actor, pk=newest))
        out[f"{who}.open_trace"] = {"wall_s": wall, "cpu_s": cpu}
        log(f"  {who:9} {'open_trace':18} {wall:7.3f}s wall {cpu:7.3f}s cpu")
    engine.dispose()
    return out


def child_replay(url: str) -> dict[str, Any]:
    """The Thresholds page's replay (behind a button): the in-force policy and a proposal
    0.05 stricter on vector scores applied to the logged signals of every trace."""
    from review.admin import users
    from review.policy.policy import parse_policy, replace_thresholds
    from review.thresholds import replay as trace_replay

    engine = make_engine(url)
    row = users.get_by_email(engine, REVIEWER)
    assert row is not None
    actor = users.to_actor(row)
    pif = inforce.in_force(engine)
    current = pif.policy.thresholds_for("vector").refuse_below or 0.5
    proposed = parse_policy(
        replace_thresholds(pif.text, "vector", refuse_below=round(current + 0.05, 3)), "proposal"
    )
    base = reset_peak()
    with Clock() as c:
        replay = trace_replay.replay_traces(engine, actor, pif.policy, proposed)
    peak = peak_since_reset()
    flipped = int(replay.flips["traces"].sum()) if "traces" in replay.flips else len(replay.flips)
    engine.dispose()
    return {
        "replay_s": c.wall,
        "replay_cpu_s": c.cpu,
        "traces": replay.traces,
        "skipped": replay.not_replayable,
        "flipped": flipped,
        "rss_peak_mib": peak,
        "rss_growth_mib": peak - base,
    }


SWEEP_RUNS = 5


def child_sweep(n: int, seed: int, runs: int = SWEEP_RUNS) -> dict[str, Any]:
    """The risk-coverage curve, the full sweep and scikit-learn's precision-recall curve on the
    same ``n`` outcomes, each run ``runs`` times in turn in this one process; each figure is
    the run of median wall time (its CPU time with it). The first run of each (risk-coverage,
    then the sweep, then scikit-learn, as before) also gives its memory."""
    import statistics
    import tracemalloc

    import numpy as np
    import pandas as pd
    from sklearn.metrics import precision_recall_curve

    from review.policy import selective
    from review.policy.policy import Costs

    rng = np.random.default_rng(seed)
    answerable = rng.random(n) < 0.6
    # acceptable answers score higher on average; a few answerable items are still wrong
    acceptable = answerable & (rng.random(n) < 0.9)
    score = np.clip(rng.normal(np.where(acceptable, 0.72, 0.5), 0.12), 0.0, 1.0)
    out: dict[str, Any] = {"n": n}
    frame = pd.DataFrame({"score": score, "answerable": answerable, "acceptable": acceptable})

    def mark(key: str, base: float) -> None:
        peak = peak_since_reset()
        out[f"rss_peak_{key}_mib"] = peak
        out[f"rss_growth_{key}_mib"] = peak - base

    timed: dict[str, list[Clock]] = {"risk_coverage": [], "sweep": [], "sklearn": []}
    base = reset_peak()
    with Clock() as c:
        curve = selective.risk_coverage(score, acceptable)
    timed["risk_coverage"].append(c)
    mark("rc", base)
    out["points"] = len(curve)
    with Clock() as c:
        out["aurc"] = selective.aurc(curve)
    c.put(out, "aurc")
    base = reset_peak()
    costs = Costs(false_refusal=1.0, unsupported_answer=5.0)
    with Clock() as c:
        sw = selective.sweep(frame, costs)
    timed["sweep"].append(c)
    mark("sweep", base)
    out["sweep_points"] = len(sw)
    del sw
    base = reset_peak()
    with Clock() as c:
        precision, _recall, thresholds = precision_recall_curve(acceptable, score)
    timed["sklearn"].append(c)
    mark("sk", base)
    out["sklearn_points"] = len(thresholds)
    # the same operating points: selective risk = 1 - precision at every distinct score
    ours = curve.iloc[1:].set_index("threshold")["selective_risk"]
    theirs = pd.Series(1.0 - precision[:-1], index=thresholds)
    common = ours.index.intersection(theirs.index)
    # the other runs, in turn, so that a busy moment of the machine slows all three alike
    calls: dict[str, Callable[[], object]] = {
        "sklearn": lambda: precision_recall_curve(acceptable, score),
        "risk_coverage": lambda: selective.risk_coverage(score, acceptable),
        "sweep": lambda: selective.sweep(frame, costs),
    }
    for _ in range(runs - 1):
        for key, call in calls.items():
            with Clock() as c:
                call()
            timed[key].append(c)
    for key, clocks in timed.items():
        median = statistics.median_low([clock.wall for clock in clocks])
        next(clock for clock in clocks if clock.wall == median).put(out, key)
    out["runs"] = runs
    # Python-heap peaks (numpy buffers included), measured apart from the timings
    steps: list[tuple[str, Callable[[], object]]] = [
        ("rc", lambda: selective.risk_coverage(score, acceptable)),
        ("sweep", lambda: selective.sweep(frame, costs)),
        ("sk", lambda: precision_recall_curve(acceptable, score)),
    ]
    for key, fn in steps:
        tracemalloc.start()
        fn()
        out[f"py_peak_{key}_mib"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    out["common_points"] = len(common)
    out["max_abs_diff"] = float(np.max(np.abs(ours.loc[common].to_numpy() - theirs.loc[common])))
    return out


def child_reference(url: str, repeat: int = 3) -> dict[str, Any]:
    """The database areas' reference: one full read of the traces table (every column of
    every row streamed through the driver in batches), ``repeat`` times; the run with the
    median wall time is kept. Measured in the same run as the figures it scales, so a busy
    machine slows both."""
    engine = make_engine(url)
    with engine.connect() as conn:  # a first read opens the connection and warms the cache
        conn.exec_driver_sql("SELECT COUNT(*) FROM traces").scalar()
    runs: list[tuple[float, float, int]] = []
    for _ in range(max(1, repeat)):
        rows = 0
        with Clock() as c, engine.connect() as conn:
            if engine.dialect.name == "postgresql":
                # psycopg's own server-side cursor, 5,000 rows a fetch: SQLAlchemy's streamed
                # result over it sent FETCH FORWARD ALL, holding every row in this process
                # (the 10M run was killed for memory; the 1M runs read everything at once)
                raw = conn.connection.driver_connection
                assert raw is not None
                with raw.cursor(name="wb_scan") as cur:
                    cur.itersize = 5000
                    cur.execute("SELECT * FROM traces")
                    while part := cur.fetchmany(5000):
                        rows += len(part)
            else:
                result = conn.execution_options(stream_results=True, yield_per=5000).execute(
                    text("SELECT * FROM traces")
                )
                for part in result.partitions():
                    rows += len(part)
        runs.append((c.wall, c.cpu, rows))
    engine.dispose()
    wall, cpu, rows = sorted(runs)[len(runs) // 2]
    return {"scan_s": wall, "scan_cpu_s": cpu, "rows": rows, "runs": len(runs)}


def run_child(argv: list[str], timeout: float) -> dict[str, Any]:
    """Run this script as a child (``--child ...``); its last stdout line is JSON."""
    cmd = [sys.executable, str(Path(__file__).resolve()), *argv]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f}s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": f"exit {proc.returncode}: {' | '.join(tail)}"[:500]}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


# ---------------------------------------------------------------------------------------
# Report


def code_version() -> str:
    """The commit measured (read-only git), and whether the working tree had changes."""
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    # the recorded figures are the benchmark's output, not the code it measures
    dirty = [line for line in dirty if not line[3:].startswith("benchmarks/recorded/")]
    return head + (f" with uncommitted changes in {len(dirty)} file(s)" if dirty else "")


def machine() -> dict[str, str]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kib / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return {
        "cpus": str(os.cpu_count()),
        "cpu": cpu or platform.processor() or platform.machine(),
        "memory": mem,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "os": f"{platform.system()} {platform.release()}",
        "code": code_version(),
    }


def _mib(v: Any) -> str:
    return f"{v:,.0f}" if isinstance(v, (int, float)) else "n/a"


def _mem(r: dict[str, Any], key: str = "") -> str:
    peak, growth = r.get(f"rss_peak{key}_mib"), r.get(f"rss_growth{key}_mib")
    if peak is None:
        return ""
    return f"{_mib(peak)} (+{_mib(growth)})"


def _figure(
    raw: dict[str, Any],
    name: str,
    area: str,
    key: str,
    what: str,
    ref: str,
    target: figures.Target | None = None,
    **extra: str,
) -> figures.Figure:
    """The figure ``key`` from a child's raw result (``{name}_s`` wall, ``{name}_cpu_s`` CPU),
    or a failed figure carrying the child's error."""
    if "error" in raw:
        return figures.Figure(key, area, what, None, None, ref, target, error=str(raw["error"]))
    wall, cpu = raw.get(f"{name}_s"), raw.get(f"{name}_cpu_s")
    return figures.Figure(
        key,
        area,
        what,
        None if wall is None else float(wall),
        None if cpu is None else float(cpu),
        ref,
        target,
        **cast(dict[str, Any], extra),
    )


def scan_what(reads: int = 3) -> str:
    """What the scan reference is, with the number of reads it is the median of."""
    how = "one read" if reads == 1 else f"the median of {reads} reads"
    return (
        "one full read of the traces table (every column of every row streamed through the "
        f"driver; {how})"
    )


def collect(
    args: argparse.Namespace,
    build_figs: dict[str, Any],
    ref: dict[str, Any],
    pages: list[tuple[str, str, str, dict[str, Any]]],
    imp: dict[str, Any],
    samp: dict[str, Any],
    rep: dict[str, Any],
    sw: dict[str, Any],
    *,
    build_reused: bool = False,
) -> tuple[dict[str, figures.Reference], list[figures.Figure]]:
    """The references and figures of a run from the children's raw results. Database areas
    are scaled by the full read of the traces table, the import by its raw-insert floor and
    the risk-coverage sweep by scikit-learn. The build of a reused database was timed in an
    earlier run: shown, but with no reference of this run (so never compared)."""
    Ref, sec = figures.Reference, figures.target_s
    refs: dict[str, figures.Reference] = {}
    out: list[figures.Figure] = []
    if ref:
        refs["scan"] = Ref(
            "scan",
            scan_what(int(ref.get("runs", 3)))
            + (f", {ref['rows']:,} rows" if "rows" in ref else ""),
            ref.get("scan_s"),
            ref.get("scan_cpu_s"),
            str(ref.get("error", "")),
        )
    if build_figs.get("load_traces_s"):
        rate = args.traces / build_figs["load_traces_s"] if args.traces else 0.0
        b = build_figs
        build_ref = "" if build_reused else "scan"
        earlier = "; timed when the reused database was built" if build_reused else ""
        out += [
            _figure(
                b,
                "build_demo",
                "Build",
                "build:demo",
                f"demo data (fixtures.build_demo, {int(b.get('demo_traces', 0)):,} traces "
                "through the importer)",
                build_ref,
                notes="users, corpus, cases, labels, runs, policies, audits, reviews" + earlier,
            ),
            _figure(
                b,
                "load_traces",
                "Build",
                "build:traces",
                f"bulk insert of {args.traces:,} traces x 5 chunks",
                build_ref,
                other=f"{rate:,.0f} traces/s",
                notes=f"{BATCH_TRACES:,} traces (with chunks) per transaction{earlier}",
            ),
            _figure(
                b,
                "load_cases_labels",
                "Build",
                "build:cases_labels",
                f"bulk insert of {args.cases:,} cases and {args.labels:,} labels",
                build_ref,
                notes="with claims, documents, slices, families, adjudications" + earlier,
            ),
        ]
        if "rebuild_agreed_s" in b:
            out.append(
                _figure(
                    b,
                    "rebuild_agreed",
                    "Build",
                    "build:rebuild_agreed",
                    "agreed label of every case stored (cases.agreed.rebuild_agreed)",
                    build_ref,
                    notes="the bulk-inserted labels bypass the labeling service that keeps it "
                    "in step" + earlier,
                )
            )
        if "rebuild_agreement_rollup_s" in b:
            out.append(
                _figure(
                    b,
                    "rebuild_agreement_rollup",
                    "Build",
                    "build:rebuild_agreement_rollup",
                    "Agreement page's counts stored (labels.agreement_rollup.rebuild_rollup)",
                    build_ref,
                    notes="the bulk-inserted labels bypass the labeling service that keeps them "
                    "in step" + earlier,
                )
            )
        if "vacuum_analyze_s" in b:
            out.append(
                _figure(
                    b,
                    "vacuum_analyze",
                    "Build",
                    "build:vacuum_analyze",
                    "VACUUM ANALYZE after the bulk load (PostgreSQL)",
                    build_ref,
                    notes="statistics and visibility map, as autovacuum leaves them" + earlier,
                )
            )
    for path, title, user, r in pages:
        who = user.split("@", 1)[0]
        sql_note = f"SQL {r['sql_s']:,.2f} s in {r['sql_n']} statements" if "sql_s" in r else ""
        notes = "; ".join(x for x in [f"as {who}", sql_note, *r.get("problems", [])] if x)
        out.append(
            _figure(
                r,
                "first",
                "Page",
                f"page:{path}",
                title,
                "scan",
                sec(1.0),
                mem=_mem(r),
                py_peak=_mib(r["py_peak_mib"]) if "py_peak_mib" in r else "",
                notes=notes,
            )
        )
        out.append(
            _figure(r, "rerun", "Page", f"page:{path}:rerun", f"{title}: rerun", "scan", sec(1.0))
        )
    if samp:
        s = samp
        out += [
            _figure(
                s,
                "count_decision",
                "Audit sampling",
                "sampling:count_decision",
                "count_population, strata = decision",
                "scan",
                sec(1.0),
                other=f"{s['strata']} strata" if "strata" in s else "",
                notes=f"population {s['population']:,} traces (all)" if "population" in s else "",
            ),
            _figure(
                s,
                "count_decision_tier",
                "Audit sampling",
                "sampling:count_decision_tier",
                "count_population, strata = decision x attr.customer_tier",
                "scan",
                sec(1.0),
                other=f"{s['strata2']} strata" if "strata2" in s else "",
                notes="stratum from a trace attribute",
            ),
            _figure(
                s,
                "create_plan",
                "Audit sampling",
                "sampling:create_plan",
                "create_plan (counts again, stores the fingerprint)",
                "scan",
                sec(1.0),
            ),
            _figure(
                s,
                "draw",
                "Audit sampling",
                "sampling:draw",
                f"draw_plan: {args.sample} traces from all traces",
                "scan",
                sec(0.3),
                other=f"{s['drawn']} drawn" if "drawn" in s else "",
                mem=_mem(s),
                notes="proportional allocation by decision",
            ),
            _figure(
                s,
                "verify",
                "Audit sampling",
                "sampling:verify",
                "verify_sample (draw again and compare)",
                "scan",
                sec(1.0),
                other=f"same sample: {s['verified']}" if "verified" in s else "",
            ),
        ]
    if rep:
        out.append(
            _figure(
                rep,
                "replay",
                "Thresholds",
                "thresholds:replay",
                "replay_traces: in-force policy vs vector refuse_below + 0.05 on every trace",
                "scan",
                sec(2.0),
                other=f"{rep['traces']:,} traces" if "traces" in rep else "",
                mem=_mem(rep),
                notes=(
                    f"{rep['flipped']:,} decisions flip; {rep['skipped']:,} not replayable "
                    "(a signal missing); the Thresholds page runs it on a button"
                    if "flipped" in rep
                    else ""
                ),
            )
        )
    if imp:
        if "error" in imp:
            refs["floor"] = Ref("floor", "raw-insert floor", None, None, str(imp["error"]))
        else:
            kind = imp.get("floor_kind", "sqlite3 executemany")
            refs["floor"] = Ref(
                "floor",
                f"{kind} of the same file into the same database, one transaction rolled "
                f"back, no validation, redaction or duplicate check "
                f"({imp.get('floor_rate', 0):,.0f} traces/s)",
                imp.get("floor_s"),
                imp.get("floor_cpu_s"),
            )
        n = int(imp.get("added", args.import_traces))
        out += [
            _figure(
                imp,
                "import",
                "Import",
                "import:file",
                f"import_file of {n:,} canonical traces"
                + (f" ({imp['file_mib']:.0f} MiB JSONL)" if "file_mib" in imp else "")
                + " into the large database",
                "floor",
                figures.Target("max_ratio", 2.0, "≥ 50% of the floor's rate"),
                other=f"{imp['rate']:,.0f} traces/s" if "rate" in imp else "",
                mem=_mem(imp),
                notes="redaction on; parsed, checked and spooled, then written in batches",
            ),
            _figure(
                imp,
                "reimport",
                "Import",
                "import:again",
                "the same file again",
                "floor",
                other=f"{imp['reimport_added']:,} added" if "reimport_added" in imp else "",
                notes="every trace id already stored",
            ),
        ]
    if sw:
        if "error" in sw:
            refs["sklearn"] = Ref("sklearn", "scikit-learn", None, None, str(sw["error"]))
        else:
            refs["sklearn"] = Ref(
                "sklearn",
                f"scikit-learn precision_recall_curve on the same {sw['n']:,} outcomes "
                f"({sw['sklearn_points']:,} points; selective risk = 1 - precision at all "
                f"{sw['common_points']:,} shared thresholds, max difference "
                f"{sw['max_abs_diff']:.1e}; median of {sw.get('runs', 1)} runs)",
                sw.get("sklearn_s"),
                sw.get("sklearn_cpu_s"),
            )
        out += [
            _figure(
                sw,
                "risk_coverage",
                "Risk-coverage",
                "sweep:risk_coverage",
                f"selective.risk_coverage, {args.outcomes:,} outcomes",
                "sklearn",
                other=f"{sw['points']:,} points" if "points" in sw else "",
                mem=_mem(sw, "_rc"),
                py_peak=_mib(sw.get("py_peak_rc_mib")) if "py_peak_rc_mib" in sw else "",
                notes=f"AURC {sw['aurc']:.4f}" if "aurc" in sw else "",
            ),
            _figure(
                sw,
                "sweep",
                "Risk-coverage",
                "sweep:sweep",
                "selective.sweep (every metric, Wilson intervals, expected cost)",
                "sklearn",
                other=f"{sw['sweep_points']:,} points" if "sweep_points" in sw else "",
                mem=_mem(sw, "_sweep"),
                py_peak=_mib(sw.get("py_peak_sweep_mib")) if "py_peak_sweep_mib" in sw else "",
            ),
        ]
    return refs, out


def render(
    args: argparse.Namespace,
    url: str,
    mach: dict[str, str],
    size: dict[str, int],
    refs: dict[str, figures.Reference],
    figs: list[figures.Figure],
    pages: list[tuple[str, str, str, dict[str, Any]]],
) -> str:
    dialect = "SQLite" if url.startswith("sqlite") else "PostgreSQL"
    db_size = f"; database {size['db_bytes'] / 2**30:.2f} GiB" if size.get("db_bytes") else ""
    lines = [
        "# Scale benchmark",
        "",
        f"Machine: {mach['cpus']} CPUs ({mach['cpu']}), {mach['memory']} RAM, {mach['os']}; "
        f"Python {mach['python']}, {mach.get('database', 'SQLite ' + mach['sqlite'])}; "
        f"database: {dialect}; code: {mach['code']}.",
        "",
        f"Sizes: {size.get('traces', 0):,} traces, {size.get('trace_chunks', 0):,} trace "
        f"chunks, {size.get('cases', 0):,} cases, {size.get('labels', 0):,} labels, "
        f"{size.get('adjudications', 0):,} adjudications, {size.get('documents', 0):,} "
        f"document versions, {size.get('users', 0):,} users{db_size}. Requested: --traces "
        f"{args.traces:,} --cases {args.cases:,} --labels {args.labels:,}, traces spread over "
        f"{args.weeks} weeks; the Brightwave demo data is loaded first.",
        "",
        "Pages: the default view of every page registered in app.py, opened with AppTest "
        "through the real router in a child process each (signed in as the user named in the "
        "notes), after a first run of the default page has warmed imports, the engine and "
        "the router; then the page with st.cache_data cleared, and a rerun of the same session "
        "(caches warm). *Wall* is perf_counter, *CPU* the process_time of the process doing "
        "the work (the page's child: Streamlit, the review code and, on SQLite, the SQL; on "
        "PostgreSQL the server's CPU is not in it). *Peak RSS* is the child's resident-set "
        "high-water mark during the step and its growth over the resident set at the start; "
        "*Py peak* is the largest Python heap (tracemalloc) of another cold open of the page. "
        "One run each; printed, never asserted.",
        "",
        *figures.render_figures(figs, refs),
    ]
    slow_pages = [(t, r) for _p, t, _u, r in pages if r.get("first_s", 0) > 1.0 and "sql_top" in r]
    if slow_pages:
        lines += [
            "",
            "Slowest SQL statements of the pages over 1 s (time until the first row, summed "
            "over repeats, during the timed first view):",
            "",
        ]
        for title, r in slow_pages:
            for q in r["sql_top"]:
                text_ = q["sql"] if len(q["sql"]) <= 400 else q["sql"][:400] + " …"
                lines.append(f"- {title}: {q['s']:,.2f} s ({q['n']}x) `{text_}`")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description="Scale benchmark of the Abstention Workbench (prints figures).",
    )
    ap.add_argument("--traces", type=int, default=1_000_000)
    ap.add_argument("--cases", type=int, default=50_000)
    ap.add_argument("--labels", type=int, default=200_000)
    ap.add_argument("--weeks", type=int, default=12, help="weeks the traces are spread over")
    ap.add_argument(
        "--import-traces",
        type=int,
        default=1_000_000,
        help="traces (5 chunks each) to generate and import through the importer",
    )
    ap.add_argument("--sample", type=int, default=400, help="audit sample size")
    ap.add_argument("--outcomes", type=int, default=1_000_000, help="risk-coverage outcomes")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "out"))
    ap.add_argument(
        "--database-url",
        "--url",
        dest="url",
        default=None,
        help="an empty database, e.g. postgresql+psycopg://... (default: SQLite in --workdir)",
    )
    ap.add_argument(
        "--pg-server",
        action="store_true",
        help="start a throwaway PostgreSQL server (tests/helpers/pgserver.py), run every "
        "figure on a new database in it, and stop it at the end",
    )
    ap.add_argument(
        "--record",
        nargs="?",
        const="",
        default=None,
        metavar="PATH",
        help="write this run's figures to PATH (default benchmarks/recorded/scale-ENGINE.json)",
    )
    ap.add_argument(
        "--compare",
        default=None,
        metavar="PATH",
        help="recorded figures to compare with (default benchmarks/recorded/scale-ENGINE.json)",
    )
    ap.add_argument(
        "--table",
        nargs="+",
        default=None,
        metavar="RECORD",
        help="only print one Markdown table of recorded runs side by side (e.g. the SQLite and "
        "the PostgreSQL record) and exit",
    )
    ap.add_argument("--workdir", default=None, help="folder for the database (default: temp)")
    ap.add_argument("--keep", action="store_true", help="keep the workdir and its database")
    ap.add_argument(
        "--build-only",
        action="store_true",
        help="build (or bring to this commit's schema) the database of --workdir and stop: "
        "with --keep, a later run measures it (a 10M build takes an hour or more)",
    )
    ap.add_argument("--pages", default="", help="only pages whose file contains one of these")
    ap.add_argument("--skip", default="", help="comma list of: pages,import,sampling,replay,sweep")
    ap.add_argument("--page-timeout", type=float, default=900.0)
    ap.add_argument(
        "--scan-reads",
        type=int,
        default=3,
        help="full reads of the traces table the scan reference is the median of (one read "
        "of 10M traces takes about 8 minutes)",
    )
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--page", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--user", default=None, help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def child_main(args: argparse.Namespace) -> None:
    if args.child == "page":
        result = child_page(args.url, args.page, args.user, args.page_timeout)
    elif args.child == "import":
        result = child_import(args.url, args.import_traces, args.workdir)
    elif args.child == "sampling":
        result = child_sampling(args.url, args.sample)
    elif args.child == "replay":
        result = child_replay(args.url)
    elif args.child == "sweep":
        result = child_sweep(args.outcomes, args.seed)
    elif args.child == "reference":
        result = child_reference(args.url, args.scan_reads)
    elif args.child == "traces":
        result = child_traces(args.url)
    else:
        raise SystemExit(f"unknown child {args.child!r}")
    print(json.dumps(result, default=str))


def _marker(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "traces": args.traces,
        "cases": args.cases,
        "labels": args.labels,
        "weeks": args.weeks,
        "seed": args.seed,
    }


def engine_name(url: str) -> str:
    return url.split(":", 1)[0].split("+", 1)[0]


def default_record(engine: str) -> Path:
    return ROOT / "benchmarks" / "recorded" / f"scale-{engine}.json"


def requested(args: argparse.Namespace) -> dict[str, Any]:
    """The sizes a run was asked for: runs compare only with a record of the same."""
    return {
        **_marker(args),
        "import_traces": args.import_traces,
        "sample": args.sample,
        "outcomes": args.outcomes,
    }


def database_version(url: str) -> str:
    if url.startswith("sqlite"):
        return f"SQLite {sqlite3.sqlite_version}"
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            version = conn.exec_driver_sql("SHOW server_version").scalar()
            shown = ", ".join(
                f"{name} {conn.exec_driver_sql(f'SHOW {name}').scalar()}"
                for name in ("shared_buffers", "work_mem")
            )
            return f"PostgreSQL {version} ({shown})"
    finally:
        engine.dispose()


def comparison(args: argparse.Namespace, record: dict[str, Any]) -> str:
    """Regressions and improvements against the recorded figures (``--compare PATH``, or the
    engine's file under benchmarks/recorded/ when there is one)."""
    path = Path(args.compare) if args.compare else default_record(record["engine"])
    if not path.exists():
        return f"## Regressions\n\nNo recorded figures to compare with ({path} does not exist).\n"
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    try:
        recorded = figures.load_record(path)
        return figures.render_comparison(record, recorded, str(shown))
    except (OSError, ValueError, KeyError, TypeError) as exc:  # a damaged record: say so
        return f"## Regressions\n\nNot compared: {shown} could not be read ({exc!r}).\n"


#: the benchmark's PostgreSQL settings beyond initdb's defaults, as a team server would have
#: them for a database of several GiB (printed with the figures)
PG_SETTINGS = "-c shared_buffers=1GB -c work_mem=32MB -c max_wal_size=4GB"


def start_pg_server(folder: Path | None = None, fresh: bool = True) -> tuple[Any, str]:
    """A PostgreSQL server from Debian's binaries (tests/helpers/pgserver.py: initdb, a free
    port, fsync off) and the URL of the benchmark's database in it. With ``folder`` the cluster
    is kept there and started again by the next run; ``fresh`` empties its database first."""
    from sqlalchemy import create_engine

    from tests.helpers.pgserver import PgServer

    server = PgServer(folder, options=PG_SETTINGS)
    try:
        base = server.start()
        admin = create_engine(base, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            exists = conn.exec_driver_sql(
                "SELECT 1 FROM pg_database WHERE datname = 'wb_scale'"
            ).scalar()
            if exists and fresh:
                conn.exec_driver_sql('DROP DATABASE "wb_scale"')
            if not exists or fresh:
                conn.exec_driver_sql('CREATE DATABASE "wb_scale"')
        admin.dispose()
    except Exception:
        server.stop()
        raise
    return server, base.rsplit("/", 1)[0] + "/wb_scale"


def _reusable(args: argparse.Namespace, workdir: Path) -> bool:
    """Whether ``workdir`` holds a database built for these sizes (SQLite, or a kept
    ``--pg-server`` cluster)."""
    marker = workdir / "built.json"
    if not marker.exists():
        return False
    try:
        return bool(json.loads(marker.read_text()).get("sizes") == _marker(args))
    except (OSError, ValueError):
        return False


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.child:
        child_main(args)
        return
    if args.table:
        paths = [Path(p) for p in args.table]
        print(figures.render_engines([figures.load_record(p) for p in paths], args.table))
        return
    server = None
    if args.pg_server:
        if args.url:
            raise SystemExit("--pg-server starts its own database: leave out --database-url")
        kept = Path(args.workdir) / "pg" if args.workdir and args.keep else None
        fresh = kept is None or not _reusable(args, Path(args.workdir))
        server, args.url = start_pg_server(kept, fresh=fresh)
        args.pg_reuse = not fresh
        log(f"PostgreSQL server ({'kept in ' + str(kept) if kept else 'throwaway'}): {args.url}")
    try:
        run_benchmark(args)
    finally:
        if server is not None:
            server.stop()


def _database(
    args: argparse.Namespace, workdir: Path, url: str, tax: Taxonomy, marker: Path
) -> tuple[bool, dict[str, Any]]:
    """The database measured: the one built before when it has the sizes asked for (brought
    to this commit's schema), else a new one. Returns whether it was reused, and the
    figures of its build."""
    reused = (args.url is None or getattr(args, "pg_reuse", False)) and _reusable(args, workdir)
    if reused:
        build_figs: dict[str, Any] = json.loads(marker.read_text()).get("build", {})
        log(f"reusing the database in {workdir}")
        # built by an older commit: bring it to this commit's schema (backfills included)
        built = make_engine(url)
        migrate(built)
        built.dispose()
        return True, build_figs
    if args.url is None:
        for p in workdir.glob("scale.db*"):
            p.unlink()
    log(f"building {url} ...")
    build_figs = build(url, args, tax)
    marker.write_text(json.dumps({"sizes": _marker(args), "build": build_figs}))
    return False, build_figs


def _page_figures(
    args: argparse.Namespace, common: list[str]
) -> list[tuple[str, str, str, dict[str, Any]]]:
    """Each registered page (those ``--pages`` names), opened in a child process."""
    pages: list[tuple[str, str, str, dict[str, Any]]] = []
    wanted = [p.strip() for p in args.pages.split(",") if p.strip()]
    for path, title, _url in registered_pages():
        if wanted and not any(w in path for w in wanted):
            continue
        user = ADMIN if "admin" in path else REVIEWER
        log(f"page {title} ({path}) as {user} ...")
        r = run_child(
            ["--child", "page", "--page", path, "--user", user, *common],
            args.page_timeout * 2 + 120,
        )
        pages.append((path, title, user, r))
        log(f"  {json.dumps(r)}")
    return pages


def run_benchmark(args: argparse.Namespace) -> None:
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    made_tmp = args.workdir is None
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="wb-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    url = args.url or f"sqlite:///{workdir / 'scale.db'}"
    tax = load_taxonomy()
    mach = machine()  # the code measured is the code at the start
    mach["database"] = database_version(url)
    marker = workdir / "built.json"
    try:
        reused, build_figs = _database(args, workdir, url, tax, marker)
        size = sizes(url)
        log(f"sizes: {size}")
        if args.build_only:
            log(f"built: {json.dumps(build_figs)}")
            return
        common = ["--url", url, "--seed", str(args.seed), "--page-timeout", str(args.page_timeout)]
        log("reference: full reads of the traces table ...")
        ref = run_child(
            ["--child", "reference", "--scan-reads", str(args.scan_reads), *common], 3600
        )
        log(f"  {json.dumps(ref)}")

        pages = [] if "pages" in skip else _page_figures(args, common)
        samp: dict[str, Any] = {}
        if "sampling" not in skip:
            log("audit sampling ...")
            samp = run_child(["--child", "sampling", "--sample", str(args.sample), *common], 3600)
            log(f"  {json.dumps(samp)}")
        rep: dict[str, Any] = {}
        if "replay" not in skip:
            log("threshold replay over every trace ...")
            rep = run_child(["--child", "replay", *common], 3600)
            log(f"  {json.dumps(rep)}")
        # the import comes after every figure over the database, which it grows
        imp: dict[str, Any] = {}
        if "import" not in skip and args.import_traces > 0:
            log(f"import of {args.import_traces:,} traces ...")
            imp = run_child(
                [
                    "--child",
                    "import",
                    "--import-traces",
                    str(args.import_traces),
                    "--workdir",
                    str(workdir),
                    *common,
                ],
                7200,
            )
            log(f"  {json.dumps(imp)}")
        sw: dict[str, Any] = {}
        if "sweep" not in skip:
            log(f"risk-coverage over {args.outcomes:,} outcomes ...")
            sw = run_child(["--child", "sweep", "--outcomes", str(args.outcomes), *common], 3600)
            log(f"  {json.dumps(sw)}")
        final_size = sizes(url)
        refs, figs = collect(args, build_figs, ref, pages, imp, samp, rep, sw, build_reused=reused)
        table = render(args, url, mach, size, refs, figs, pages)
        code_now = code_version()
        if code_now != mach["code"]:
            table += f"\nThe checkout changed during the run (now {code_now}).\n"
        if final_size.get("traces", 0) != size.get("traces", 0):
            table += (
                f"\nAfter the import the database holds {final_size['traces']:,} traces (every "
                "other figure ran before it).\n"
            )
        record = figures.make_record(
            engine=engine_name(url),
            machine=mach,
            requested=requested(args),
            sizes=size,
            references=refs.values(),
            figures=figs,
            recorded_at=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        )
        report = comparison(args, record) + "\n" + table
        print(report)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "scale.md").write_text(report, encoding="utf-8")
        figures.save_record(out / f"scale-{record['engine']}.json", record)
        if args.record is not None:
            record_path = Path(args.record) if args.record else default_record(record["engine"])
            figures.save_record(record_path, record)
            log(f"recorded: {record_path}")
        raw = {
            "machine": mach,
            "sizes": size,
            "build": build_figs,
            "reference": ref,
            "pages": [{"page": p, "title": t, "user": u, **r} for p, t, u, r in pages],
            "import": imp,
            "sampling": samp,
            "replay": rep,
            "sweep": sw,
        }
        (out / "scale.json").write_text(json.dumps(raw, indent=2, default=str), encoding="utf-8")
        log(f"written: {out / 'scale.md'}")
    finally:
        if made_tmp and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        elif made_tmp:
            log(f"kept: {workdir}")


if __name__ == "__main__":
    main()
