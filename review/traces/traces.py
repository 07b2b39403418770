"""Production traces: import (idempotent, batched, redacted), browse safely, retention.

Import
------
:func:`import_file` (a path), :func:`import_bytes` (an upload) and :func:`import_items` (any
iterable of parsed items or :class:`~review.traces.model.Trace` objects, used by the demo
builder) share one code path. The source is read once, in two phases:

1. **Check.** Every record is parsed and validated, redacted and turned into rows, which are
   spooled to a temporary file in batches (constant memory; the spool is about as large as
   the input and is deleted afterwards). Nothing is written to the database in this phase: by
   default the first malformed record stops the import with ``file: line N: field F:
   reason``. With ``skip_bad=True`` every rejected record is written to the rejects file (JSON
   lines ``{"line", "reason", "raw"}``) and counted. Besides the parsers' checks this phase
   refuses values longer than their database column (PostgreSQL enforces them) and lines that
   are not UTF-8 text. It also counts the traces, so the progress bar knows its total.
2. **Write.** The spooled batches (``batch_size`` traces, 500 by default) are written one
   transaction each: a trace and its chunks are always in the same transaction, so a killed
   import never leaves half a trace. Trace ids already in the database (or repeated in the
   file: the first occurrence wins) are skipped, so importing the same file twice adds
   nothing and re-running a killed import completes it.

The ``trace_imports`` row is created when the write pass starts (status ``running``), updated
with the counts of every committed batch, and closed as ``done`` (or ``failed``) with the
redaction totals; the import is written to the audit log.

Redaction (``policies/redaction.yaml``) is applied to every trace before it is stored; the
counts per detector are stored on the trace and summed on the import row. Importing without
redaction needs clearance.

A trace is stored as **restricted** (shown only to users with clearance) when its
``attributes.restricted`` is true, when its identity scopes include ``restricted``, when a
chunk that was *not* filtered by authorization comes from a document whose access scope in the
corpus is ``restricted`` (its text then reached the context), or when the answer or the context
names the title of a restricted document (a leak: the trace itself is now restricted content).

Who may see traces
------------------
Browsing traces needs one of the roles reviewer, product_owner, compliance or admin
(:data:`VIEW_ROLES`); annotators build cases and do not see production data. Restricted
traces are left out of every list and count for users without clearance and refused when
opened; chunks that authorization filtered out are hidden from them (only their number is
shown) and citations of such chunks are masked. Importing needs ``Permission.import_traces``
(reviewers, admins). Retention (the ``retention`` setting and purging) needs
``Permission.manage_users`` (admins).

Caveats and missing reasons
---------------------------
A *caveat answer* is a trace with decision ``answer`` and reason code
``support_below_threshold`` (the gate's caveat rule: evidence exists but its support is
thin). A decision *without a logged reason* is a trace with no decision at all, or with any
decision other than ``answer`` that carries no reason code.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import io
import json
import pickle
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, BinaryIO

from sqlalchemy import (
    ColumnElement,
    Engine,
    Select,
    Table,
    and_,
    delete,
    exists,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from review.core.errors import InputError, PermissionDenied, StaleWriteError
from review.core.identity import Actor, Permission, Role, require
from review.core.taxonomy import Taxonomy
from review.traces import rollup
from review.traces.formats import FORMATS, detect_format, iter_traces
from review.traces.model import (
    NEGATIVE_FEEDBACK,
    ParsedTrace,
    Rejected,
    Trace,
    TraceItem,
    TraceVocabulary,
)
from review.traces.redaction import RedactionPolicy, load_redaction_policy, redact
from storage import changes
from storage.db import read_session, run_write
from storage.models import AuditItem, Document, Setting, TraceChunk, TraceImport, utcnow
from storage.models import Trace as TraceRow

if TYPE_CHECKING:
    pass

__all__ = [
    "BATCH_SIZE",
    "CAVEAT_REASON",
    "COLUMN_FILTERS",
    "HIDDEN_CHUNK",
    "SORTS",
    "VIEW_ROLES",
    "ChunkView",
    "CitationView",
    "ImportReport",
    "ImportRow",
    "PurgeReport",
    "RestrictedCorpus",
    "Retention",
    "TraceFilter",
    "TraceListRow",
    "TraceView",
    "apply_retention",
    "can_view",
    "caveat_condition",
    "count_traces",
    "data_stamp",
    "facet_values",
    "get_retention",
    "get_trace",
    "import_bytes",
    "import_file",
    "import_items",
    "is_restricted",
    "list_traces",
    "missing_reason_condition",
    "purge_older_than",
    "recent_imports",
    "require_view",
    "restricted_corpus",
    "set_retention",
    "total_traces",
    "version_keys",
]

BATCH_SIZE = 500
MAX_LINE_BYTES = 64 * 2**20  # a longer line is refused without being held in memory
MAX_PROBLEMS = 20  # rejected lines listed in the report (all are in the rejects file)
CAVEAT_REASON = rollup.CAVEAT_REASON
RETENTION_KEY = "retention"
MAX_RETENTION_DAYS = 10 * 366

VIEW_ROLES: frozenset[Role] = frozenset(
    {Role.reviewer, Role.product_owner, Role.compliance, Role.admin}
)

#: (phase, done, total): phase "checking" (total unknown, None) then "writing" (total known).
ProgressFn = Callable[[str, int, int | None], None]

# Column widths of storage.models.Trace/TraceChunk that a parsed value must fit.
_FITS: tuple[tuple[str, int], ...] = (
    ("user_role", 120),
    ("ranking_mode", 40),
    ("feedback", 60),
)
_ATTR_COLUMNS: tuple[tuple[str, int], ...] = (
    ("language", 20),
    ("customer_tier", 60),
    ("document_type", 60),
)


# ---------------------------------------------------------------------------------------
# Access


def can_view(actor: Actor) -> bool:
    """Whether ``actor`` may browse production traces (see the module docs)."""
    return bool(actor.roles & VIEW_ROLES)


def require_view(actor: Actor) -> None:
    if not can_view(actor):
        holders = ", ".join(sorted(r.value for r in VIEW_ROLES))
        raise PermissionDenied(
            f"{actor.name} ({', '.join(sorted(actor.roles)) or 'no role'}) may not browse "
            f"production traces; this needs one of the roles: {holders}."
        )


# ---------------------------------------------------------------------------------------
# Reading sources


def _decoded_lines(fh: BinaryIO, source: str, skip_bad: bool, bad: list[Rejected]) -> Iterator[str]:
    """Lines of a binary file as text. A line that is not UTF-8 (or longer than
    MAX_LINE_BYTES) raises InputError, or with ``skip_bad`` is put in ``bad`` and replaced
    by an empty line, so the parsers' line numbers stay right."""
    n = 0
    while True:
        raw = fh.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        n += 1
        reason: str | None = None
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):  # drop the rest of the line
                raw = fh.readline(MAX_LINE_BYTES)
            reason = f"the line is longer than {MAX_LINE_BYTES // 2**20} MiB"
            shown = "(not kept: too long)"
        else:
            try:
                yield raw.decode("utf-8")
                continue
            except UnicodeDecodeError as exc:
                reason = (
                    f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at byte {exc.start + 1} "
                    "of the line)"
                )
                shown = raw.decode("utf-8", "backslashreplace").rstrip("\r\n")
        if not skip_bad:
            raise InputError(f"{source}: line {n}: {reason}")
        bad.append(Rejected(n, shown, reason))
        yield "\n"


def _first_line(fh: BinaryIO) -> str:
    for _ in range(1000):
        raw = fh.readline(MAX_LINE_BYTES)
        if not raw:
            break
        text = raw.decode("utf-8", "replace").strip()
        if text:
            return text
    return ""


def _resolve_format(fmt: str, first: str, name: str) -> str:
    if fmt == "auto":
        if not first:
            raise InputError(f"{name}: the file is empty")
        return detect_format(first, name)
    if fmt not in FORMATS:
        raise InputError(f"{name}: unknown trace format {fmt!r} (one of {', '.join(FORMATS)})")
    return fmt


def _parse_binary(
    open_fh: Callable[[], BinaryIO],
    source: str,
    fmt: str,
    skip_bad: bool,
    vocab: TraceVocabulary,
) -> Iterator[TraceItem]:
    with open_fh() as fh:
        bad: list[Rejected] = []
        lines = _decoded_lines(fh, source, skip_bad, bad)
        for item in iter_traces(lines, source, fmt, skip_bad, vocab=vocab):
            if bad:
                yield from bad
                bad.clear()
            yield item
        yield from bad


# ---------------------------------------------------------------------------------------
# Import


@dataclass
class ImportReport:
    """What an import did. ``traces`` counts the valid traces in the source."""

    import_id: int | None
    source: str
    format: str
    traces: int = 0
    added: int = 0
    skipped: int = 0
    rejected: int = 0
    restricted: int = 0
    redacted: bool = True
    redactions: dict[str, int] = field(default_factory=dict)
    rejects_file: str | None = None
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        parts = [
            f"{self.added} trace(s) added",
            f"{self.skipped} already present or repeated in the file",
        ]
        if self.rejected:
            where = f" (see {self.rejects_file})" if self.rejects_file else ""
            parts.append(f"{self.rejected} rejected{where}")
        if self.restricted:
            parts.append(f"{self.restricted} restricted")
        if not self.redacted:
            parts.append("redaction was switched off")
        else:
            found = {k: v for k, v in self.redactions.items() if v}
            if found:
                parts.append("redacted: " + ", ".join(f"{v} {k}" for k, v in sorted(found.items())))
            else:
                parts.append("nothing needed redaction")
        return f"{self.source}: " + "; ".join(parts) + "."


class _Redactor:
    """Applies a redaction policy field by field, exactly like
    :func:`review.traces.redaction.redact_trace`, but faster: a text in which no rule can match (one
    search of all patterns combined) is left as it is, results for repeated texts (chunks are
    retrieved again and again) are remembered, and unchanged parts are not copied."""

    _FLAGS = ((re.IGNORECASE, "i"), (re.MULTILINE, "m"), (re.DOTALL, "s"), (re.VERBOSE, "x"))
    _NONE: tuple[tuple[str, int], ...] = ()

    def __init__(self, policy: RedactionPolicy, cache_size: int = 8192) -> None:
        self.policy = policy
        parts: list[str] = []
        for rule in policy.rules():
            flags = "".join(ch for fl, ch in self._FLAGS if rule.pattern.flags & fl)
            parts.append(f"(?{flags}:{rule.pattern.pattern})" if flags else rule.pattern.pattern)
        self.any: re.Pattern[str] | None
        try:
            self.any = re.compile("|".join(f"(?:{p})" for p in parts)) if parts else None
        except re.error:  # pragma: no cover - fall back to running every rule
            self.any = None
        self.nothing = not parts
        self.cached = functools.lru_cache(maxsize=cache_size)(self._redact)

    def _redact(self, text: str) -> tuple[str, tuple[tuple[str, int], ...]]:
        if self.any is not None and not self.any.search(text):
            return text, self._NONE
        out, counts = redact(text, self.policy)
        return out, tuple((k, v) for k, v in counts.items() if v)

    def text(self, text: str, counts: dict[str, int]) -> str:
        if not text or self.nothing:
            return text
        out, found = self.cached(text) if len(text) <= 8192 else self._redact(text)
        for k, v in found:
            counts[k] = counts.get(k, 0) + v
        return out

    def trace(self, t: Trace) -> tuple[Trace, dict[str, int]]:
        counts: dict[str, int] = {}
        r = self.text
        chunks = t.chunks
        new_texts = [r(c.text, counts) for c in chunks]
        if any(n != c.text for n, c in zip(new_texts, chunks, strict=True)):
            chunks = tuple(
                c if n == c.text else dataclasses.replace(c, text=n)
                for n, c in zip(new_texts, chunks, strict=True)
            )
        claims = [r(c.claim, counts) for c in t.citations]
        citations = t.citations
        if any(n != c.claim for n, c in zip(claims, citations, strict=True)):
            citations = tuple(
                c if n == c.claim else dataclasses.replace(c, claim=n)
                for n, c in zip(claims, citations, strict=True)
            )
        query = r(t.query, counts)
        rewritten = None if t.rewritten_query is None else r(t.rewritten_query, counts)
        context = r(t.context_sent, counts)
        answer = r(t.answer_text, counts)
        if not counts:
            return t, counts
        redacted = dataclasses.replace(
            t,
            query=query,
            rewritten_query=rewritten,
            chunks=chunks,
            context_sent=context,
            answer_text=answer,
            citations=citations,
        )
        return redacted, counts


def _fit_problem(t: Trace) -> str | None:
    """A value longer than its database column (None when everything fits)."""
    for name, width in _FITS:
        value = getattr(t, name)
        if value is not None and len(value) > width:
            return f"field {name}: longer than {width} characters"
    for key in ("policy", "model"):
        v = t.versions.get(key)
        if v is not None and len(v) > 200:
            return f"field versions.{key}: longer than 200 characters"
    for name, width in _ATTR_COLUMNS:
        a = t.attributes.get(name)
        if a is not None and len(str(a)) > width:
            return f"field attributes.{name}: longer than {width} characters"
    for i, c in enumerate(t.chunks):
        if len(c.chunk_id) > 300:
            return f"field chunks.{i}.chunk_id: longer than 300 characters"
        if c.doc_id is not None and len(c.doc_id) > 120:
            return f"field chunks.{i}.doc_id: longer than 120 characters"
    return None


def _truthy(v: object) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        return v.strip().lower() in ("true", "yes", "1")
    return isinstance(v, int) and v == 1


@dataclass(frozen=True)
class RestrictedCorpus:
    """Restricted documents of the corpus: their ids and (lower-cased) titles."""

    doc_ids: frozenset[str] = frozenset()
    titles: tuple[str, ...] = ()


def is_restricted(t: Trace, corpus: RestrictedCorpus) -> bool:
    """The restricted rule of the module docs."""
    if _truthy(t.attributes.get("restricted")):
        return True
    if "restricted" in t.identity_scopes:
        return True
    if any(not c.filtered and c.doc_id in corpus.doc_ids for c in t.chunks):
        return True
    if corpus.titles:
        said = f"{t.answer_text}\n{t.context_sent}".lower()
        return any(title in said for title in corpus.titles)
    return False


def _attr_text(t: Trace, name: str) -> str | None:
    v = t.attributes.get(name)
    return None if v is None else str(v)


def _trace_row(t: Trace, restricted: bool, redactions: dict[str, int]) -> dict[str, Any]:
    return {
        "trace_id": t.trace_id,
        "at": t.time,
        "query": t.query,
        "rewritten_query": t.rewritten_query,
        "user_role": t.user_role,
        "identity_scopes": list(t.identity_scopes),
        "context_sent": t.context_sent,
        "ranking_mode": t.ranking_mode,
        "hits_after_filter": t.hits_after_filter,
        "top_score": t.top_score,
        "answerable": t.answerable,
        "ambiguous": t.ambiguous,
        "ungrounded": t.ungrounded,
        "decision": t.decision,
        "reason_code": t.reason_code,
        "answer_text": t.answer_text,
        "citations": [{"claim": c.claim, "chunk_ids": list(c.chunk_ids)} for c in t.citations],
        "feedback": t.feedback,
        "versions": dict(t.versions),
        "attributes": dict(t.attributes),
        "policy_version": t.versions.get("policy"),
        "model_version": t.versions.get("model"),
        "language": _attr_text(t, "language"),
        "customer_tier": _attr_text(t, "customer_tier"),
        "document_type": _attr_text(t, "document_type"),
        "restricted": restricted,
        "redactions": {k: v for k, v in redactions.items() if v},
        "import_id": None,  # set when written
    }


def _chunk_rows(t: Trace) -> list[dict[str, Any]]:
    return [
        {
            "chunk_id": c.chunk_id,
            "doc_id": c.doc_id,
            "doc_version": c.doc_version,
            "rank": c.rank,
            "score": c.score,
            "text": c.text,
            "filtered": c.filtered,
            "effective_date": c.effective_date,
        }
        for c in t.chunks
    ]


def _insert_traces(s: Session, rows: list[dict[str, Any]]) -> dict[str, int]:
    """Insert trace rows, ignoring ids that exist already; returns trace_id -> primary key.

    Core statements on the session's connection: one multi-row INSERT ... RETURNING per
    thousand rows (the ORM bulk path runs much slower with RETURNING)."""
    if not rows:
        return {}
    table: Table = TraceRow.__table__  # type: ignore[assignment]
    dialect = s.get_bind().dialect.name
    if dialect == "sqlite":
        stmt: Any = sqlite.insert(table).on_conflict_do_nothing(index_elements=["trace_id"])
    elif dialect == "postgresql":
        stmt = postgresql.insert(table).on_conflict_do_nothing(index_elements=["trace_id"])
    else:  # pragma: no cover - other databases: the pre-check in the caller is the guard
        stmt = insert(table)
    result = s.connection().execute(stmt.returning(table.c.id, table.c.trace_id), rows)
    return {str(tid): int(pk) for pk, tid in result}


_CHUNK_COLUMNS = (
    "trace_pk",
    "chunk_id",
    "doc_id",
    "doc_version",
    "rank",
    "score",
    "text",
    "filtered",
    "effective_date",
)
_SQLITE_CHUNK_INSERT = (
    f"INSERT INTO trace_chunks ({', '.join(_CHUNK_COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(_CHUNK_COLUMNS))})"
)


def _insert_chunks(s: Session, rows: list[dict[str, Any]]) -> None:
    """Insert chunk rows. On SQLite the driver's executemany is used directly (chunks are
    most of the rows of an import; dates are stored as SQLAlchemy stores them, YYYY-MM-DD)."""
    if not rows:
        return
    conn = s.connection()
    if conn.dialect.name == "sqlite":
        params = [
            (
                r["trace_pk"],
                r["chunk_id"],
                r["doc_id"],
                r["doc_version"],
                r["rank"],
                r["score"],
                r["text"],
                1 if r["filtered"] else 0,
                r["effective_date"].isoformat() if r["effective_date"] is not None else None,
            )
            for r in rows
        ]
        conn.exec_driver_sql(_SQLITE_CHUNK_INSERT, params)
        return
    table: Table = TraceChunk.__table__  # type: ignore[assignment]
    conn.execute(insert(table), rows)


def restricted_corpus(engine: Engine) -> RestrictedCorpus:
    """The restricted documents of the corpus (every version counts)."""
    with read_session(engine) as s:
        rows = s.execute(
            select(Document.doc_key, Document.title).where(Document.access_scope == "restricted")
        ).all()
    titles = {r.title.strip().lower() for r in rows if len(r.title.strip()) >= 8}
    return RestrictedCorpus(frozenset(r.doc_key for r in rows), tuple(sorted(titles)))


def _unwrap(item: TraceItem | Trace, index: int) -> tuple[Trace, int] | Rejected:
    if isinstance(item, Trace):
        return item, index
    if isinstance(item, ParsedTrace):
        return item.trace, item.line_no
    return item


_Prepared = tuple[dict[str, Any], list[dict[str, Any]], dict[str, int]]


def _write_rejected(fh: IO[str] | None, problem: Rejected) -> None:
    if fh is not None:
        record = {"line": problem.line_no, "reason": problem.reason, "raw": problem.raw_line}
        fh.write(json.dumps(record, ensure_ascii=False) + "\n")


def import_items(
    engine: Engine,
    actor: Actor,
    items: Iterable[TraceItem | Trace],
    *,
    source: str,
    fmt: str = "canonical",
    skip_bad: bool = False,
    rejects_path: Path | None = None,
    redact: bool = True,
    policy: RedactionPolicy | None = None,
    batch_size: int = BATCH_SIZE,
    progress: ProgressFn | None = None,
) -> ImportReport:
    """Import parsed traces, rejected records (from a parser with ``skip_bad``) or Trace
    objects (numbered 1, 2, ... in messages), read once, in two phases (module docs)."""
    require(actor, Permission.import_traces)
    if not redact and not actor.clearance:
        raise PermissionDenied(
            "Importing traces without redaction needs clearance: unredacted traces can hold "
            "personal data."
        )
    if not 1 <= batch_size <= 10_000:
        raise InputError("batch_size must be between 1 and 10,000 traces")
    pol = (policy or load_redaction_policy()) if redact else None
    redactor = _Redactor(pol) if pol is not None else None
    corpus = restricted_corpus(engine)
    report = ImportReport(None, source[:500], fmt, redacted=redact)
    if pol is not None:
        report.redactions = dict.fromkeys(pol.enabled_names(), 0)

    with tempfile.TemporaryFile(prefix="wb-traces-") as spool:
        # 1. check: parse, validate, redact and spool every trace; nothing touches the database
        rej_fh: IO[str] | None = None
        if skip_bad and rejects_path is not None:
            rejects_path.parent.mkdir(parents=True, exist_ok=True)
            rej_fh = rejects_path.open("w", encoding="utf-8")
            report.rejects_file = str(rejects_path)
        try:
            batch: list[_Prepared] = []
            for i, item in enumerate(items, start=1):
                got = _unwrap(item, i)
                if isinstance(got, Rejected):
                    problem = got
                else:
                    t, line = got
                    why = _fit_problem(t)
                    if why is None:
                        counts: dict[str, int] = {}
                        if redactor is not None:
                            t, counts = redactor.trace(t)
                        row = _trace_row(t, is_restricted(t, corpus), counts)
                        batch.append((row, _chunk_rows(t), counts))
                        if len(batch) >= batch_size:
                            pickle.dump(batch, spool, protocol=pickle.HIGHEST_PROTOCOL)
                            batch = []
                        report.traces += 1
                        if progress is not None and report.traces % 1000 == 0:
                            progress("checking", report.traces, None)
                        continue
                    if not skip_bad:
                        raise InputError(f"{source}: line {line}: {why}")
                    problem = Rejected(line, json.dumps({"trace_id": t.trace_id}), why)
                report.rejected += 1
                if len(report.problems) < MAX_PROBLEMS:
                    report.problems.append(problem.message(source))
                _write_rejected(rej_fh, problem)
            if batch:
                pickle.dump(batch, spool, protocol=pickle.HIGHEST_PROTOCOL)
        finally:
            if rej_fh is not None:
                rej_fh.close()
        if progress is not None:
            progress("checking", report.traces, report.traces)

        # 2. write the spooled batches, one transaction each
        def start(s: Session) -> int:
            row = TraceImport(
                source=report.source,
                format=fmt,
                status="running",
                rejected=report.rejected,
                rejects_file=report.rejects_file,
                actor=actor.email,
                redactions={} if pol is None else dict(report.redactions),
            )
            s.add(row)
            s.flush()
            return row.id

        import_id = run_write(engine, start)
        report.import_id = import_id
        spool.seek(0)
        try:
            while True:
                try:
                    prepared: list[_Prepared] = pickle.load(spool)
                except EOFError:
                    break
                _write_batch(engine, import_id, prepared, report)
                if progress is not None:
                    progress("writing", report.added + report.skipped, report.traces)
        except BaseException as exc:
            _close_import(engine, actor, import_id, report, "failed", str(exc)[:2000])
            raise
    _close_import(engine, actor, import_id, report, "done", report.summary())
    return report


def _write_batch(
    engine: Engine, import_id: int, prepared: list[_Prepared], report: ImportReport
) -> None:
    """One transaction: the batch's new traces with all their chunks, and the import's counts.
    Trace ids already stored (or repeated in the batch) are skipped."""
    now = utcnow()
    for row, _, _ in prepared:
        row["import_id"] = import_id
        row["imported_at"] = now

    def work(s: Session) -> tuple[int, int, dict[str, int]]:
        ids = [p[0]["trace_id"] for p in prepared]
        existing = set(s.scalars(select(TraceRow.trace_id).where(TraceRow.trace_id.in_(ids))))
        fresh: list[_Prepared] = []
        for p in prepared:
            tid = p[0]["trace_id"]
            if tid not in existing:
                existing.add(tid)
                fresh.append(p)
        pks = _insert_traces(s, [p[0] for p in fresh])
        chunk_rows: list[dict[str, Any]] = []
        added_counts: dict[str, int] = {}
        restricted_n = 0
        rollup.add_rows(s, (p[0] for p in fresh if p[0]["trace_id"] in pks))
        for row, chunks, counts in fresh:
            pk = pks.get(row["trace_id"])
            if pk is None:  # inserted meanwhile by a concurrent import
                continue
            restricted_n += bool(row["restricted"])
            for k, v in counts.items():
                added_counts[k] = added_counts.get(k, 0) + v
            chunk_rows.extend({**c, "trace_pk": pk} for c in chunks)
        _insert_chunks(s, chunk_rows)
        s.execute(
            update(TraceImport)
            .where(TraceImport.id == import_id)
            .values(
                added=TraceImport.added + len(pks),
                skipped=TraceImport.skipped + (len(prepared) - len(pks)),
            )
        )
        return len(pks), restricted_n, added_counts

    added, restricted_n, added_counts = run_write(engine, work)
    report.added += added
    report.skipped += len(prepared) - added
    report.restricted += restricted_n
    for k, v in added_counts.items():
        report.redactions[k] = report.redactions.get(k, 0) + v


def _close_import(
    engine: Engine, actor: Actor, import_id: int, report: ImportReport, status: str, message: str
) -> None:
    def work(s: Session) -> None:
        row = s.get(TraceImport, import_id)
        if row is None:
            return
        row.status = status
        row.finished_at = utcnow()
        row.message = message
        row.redactions = dict(report.redactions) if report.redacted else {}
        after = {
            "source": report.source,
            "format": report.format,
            "status": status,
            "added": row.added,
            "skipped": row.skipped,
            "rejected": report.rejected,
            "redactions": row.redactions,
            "redacted": report.redacted,
        }
        changes.record(s, actor.email, "import", "trace_import", import_id, None, after)

    try:
        run_write(engine, work)
    except Exception:
        if status == "done":
            raise  # a failed import re-raises its own error instead


def import_file(
    engine: Engine,
    actor: Actor,
    path: Path,
    fmt: str = "auto",
    *,
    tax: Taxonomy | None = None,
    skip_bad: bool = False,
    rejects_path: Path | None = None,
    redact: bool = True,
    policy: RedactionPolicy | None = None,
    batch_size: int = BATCH_SIZE,
    progress: ProgressFn | None = None,
) -> ImportReport:
    """Import a trace file (canonical, otlp, langfuse, csv, or ``auto`` to detect it).

    With ``skip_bad`` and no ``rejects_path`` the rejects go to ``FILE.rejects.jsonl``.
    """
    require(actor, Permission.import_traces)  # before the file is looked at
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    with path.open("rb") as fh:
        first = _first_line(fh)
    resolved = _resolve_format(fmt, first, path.name)
    vocab = TraceVocabulary.from_taxonomy(tax) if tax is not None else TraceVocabulary()
    if skip_bad and rejects_path is None:
        rejects_path = path.with_name(path.name + ".rejects.jsonl")

    return import_items(
        engine,
        actor,
        _parse_binary(lambda: path.open("rb"), str(path), resolved, skip_bad, vocab),
        source=str(path),
        fmt=resolved,
        skip_bad=skip_bad,
        rejects_path=rejects_path,
        redact=redact,
        policy=policy,
        batch_size=batch_size,
        progress=progress,
    )


def import_bytes(
    engine: Engine,
    actor: Actor,
    data: bytes,
    name: str,
    fmt: str = "auto",
    *,
    tax: Taxonomy | None = None,
    skip_bad: bool = False,
    rejects_path: Path | None = None,
    redact: bool = True,
    policy: RedactionPolicy | None = None,
    batch_size: int = BATCH_SIZE,
    progress: ProgressFn | None = None,
) -> ImportReport:
    """Import an uploaded file held in memory (same rules as :func:`import_file`)."""
    require(actor, Permission.import_traces)  # before the upload is read
    resolved = _resolve_format(fmt, _first_line(io.BytesIO(data)), name)
    vocab = TraceVocabulary.from_taxonomy(tax) if tax is not None else TraceVocabulary()

    return import_items(
        engine,
        actor,
        _parse_binary(lambda: io.BytesIO(data), name, resolved, skip_bad, vocab),
        source=name,
        fmt=resolved,
        skip_bad=skip_bad,
        rejects_path=rejects_path,
        redact=redact,
        policy=policy,
        batch_size=batch_size,
        progress=progress,
    )


@dataclass(frozen=True)
class ImportRow:
    id: int
    source: str
    format: str
    status: str
    added: int
    skipped: int
    rejected: int
    redactions: dict[str, Any]
    actor: str
    started_at: dt.datetime
    finished_at: dt.datetime | None
    message: str


def recent_imports(engine: Engine, limit: int = 10) -> list[ImportRow]:
    with read_session(engine) as s:
        rows = s.scalars(select(TraceImport).order_by(TraceImport.id.desc()).limit(limit))
        return [
            ImportRow(
                r.id,
                r.source,
                r.format,
                r.status,
                r.added,
                r.skipped,
                r.rejected,
                dict(r.redactions or {}),
                r.actor,
                r.started_at,
                r.finished_at,
                r.message,
            )
            for r in rows
        ]


# ---------------------------------------------------------------------------------------
# Browsing

SORTS: dict[str, str] = {
    "newest": "Newest first",
    "oldest": "Oldest first",
    "score_desc": "Top score, high to low",
    "score_asc": "Top score, low to high",
}

#: Filterable columns (exact match) of the traces table.
COLUMN_FILTERS = (
    "ranking_mode",
    "policy_version",
    "model_version",
    "language",
    "customer_tier",
    "document_type",
    "user_role",
)


@dataclass(frozen=True)
class TraceFilter:
    """Filters of the traces list. ``date_to`` is inclusive; ``decisions`` empty = any;
    ``version_key``/``version_value`` match one entry of ``versions`` (e.g. index)."""

    date_from: dt.date | None = None
    date_to: dt.date | None = None
    decisions: tuple[str, ...] = ()
    reason_code: str | None = None
    feedback: str | None = None
    negative_feedback: bool = False
    ranking_mode: str | None = None
    policy_version: str | None = None
    model_version: str | None = None
    language: str | None = None
    customer_tier: str | None = None
    document_type: str | None = None
    user_role: str | None = None
    version_key: str | None = None
    version_value: str | None = None
    score_min: float | None = None
    score_max: float | None = None
    text: str = ""
    ungrounded: bool = False
    empty_retrieval: bool = False
    missing_reason: bool = False
    caveat: bool = False
    restricted_only: bool = False
    import_id: int | None = None


def _day_start(d: dt.date) -> dt.datetime:
    return dt.datetime(d.year, d.month, d.day, tzinfo=dt.UTC)


def missing_reason_condition() -> ColumnElement[bool]:
    """No decision, or a decision other than answer without a reason code."""
    return or_(
        TraceRow.decision.is_(None),
        and_(TraceRow.decision != "answer", TraceRow.reason_code.is_(None)),
    )


def caveat_condition() -> ColumnElement[bool]:
    return and_(TraceRow.decision == "answer", TraceRow.reason_code == CAVEAT_REASON)


def _like(text: str) -> str:
    esc = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{esc}%"


def _conditions(
    actor: Actor, f: TraceFilter, *, for_listing: bool = False
) -> list[ColumnElement[bool]]:
    conds: list[ColumnElement[bool]] = []
    if not actor.clearance:
        if for_listing:
            # Wrapped so that SQLite does not pick the restricted index and then sort every
            # unrestricted trace: restricted traces are rare, so walking the time index
            # and skipping them is the fast plan for "newest first, 25 per page".
            conds.append(func.coalesce(TraceRow.restricted, False).is_(False))
        else:  # a count: the restricted index covers it
            conds.append(TraceRow.restricted.is_(False))
    elif f.restricted_only:
        conds.append(TraceRow.restricted.is_(True))
    if f.date_from is not None:
        conds.append(TraceRow.at >= _day_start(f.date_from))
    if f.date_to is not None:
        conds.append(TraceRow.at < _day_start(f.date_to + dt.timedelta(days=1)))
    if f.decisions:
        named = [d for d in f.decisions if d != "(none)"]
        parts: list[ColumnElement[bool]] = []
        if named:
            parts.append(TraceRow.decision.in_(named))
        if "(none)" in f.decisions:
            parts.append(TraceRow.decision.is_(None))
        conds.append(or_(*parts))
    if f.reason_code:
        conds.append(TraceRow.reason_code == f.reason_code)
    if f.feedback:
        conds.append(TraceRow.feedback == f.feedback)
    if f.negative_feedback:
        conds.append(TraceRow.feedback.in_(sorted(NEGATIVE_FEEDBACK)))
    for name in COLUMN_FILTERS:
        value = getattr(f, name)
        if value:
            conds.append(getattr(TraceRow, name) == value)
    if f.version_key and f.version_value:
        conds.append(TraceRow.versions[f.version_key].as_string() == f.version_value)
    if f.score_min is not None:
        conds.append(TraceRow.top_score >= f.score_min)
    if f.score_max is not None:
        conds.append(TraceRow.top_score <= f.score_max)
    text = f.text.strip()
    if text:
        like = _like(text)
        conds.append(
            or_(
                TraceRow.trace_id == text,
                TraceRow.query.ilike(like, escape="\\"),
                TraceRow.answer_text.ilike(like, escape="\\"),
            )
        )
    if f.ungrounded:
        conds.append(TraceRow.ungrounded.is_(True))
    if f.empty_retrieval:
        conds.append(TraceRow.hits_after_filter == 0)
    if f.missing_reason:
        conds.append(missing_reason_condition())
    if f.caveat:
        conds.append(caveat_condition())
    if f.import_id is not None:
        conds.append(TraceRow.import_id == f.import_id)
    return conds


@dataclass(frozen=True)
class TraceListRow:
    id: int
    trace_id: str
    at: dt.datetime
    query: str
    decision: str | None
    reason_code: str | None
    top_score: float | None
    ranking_mode: str | None
    hits_after_filter: int | None
    feedback: str | None
    policy_version: str | None
    restricted: bool


PREVIEW_CHARS = 200


def count_traces(engine: Engine, actor: Actor, f: TraceFilter) -> int:
    """How many traces match (restricted ones only count for users with clearance)."""
    require_view(actor)
    with read_session(engine) as s:
        stmt = select(func.count()).select_from(TraceRow).where(*_conditions(actor, f))
        return int(s.scalar(stmt) or 0)


def total_traces(engine: Engine) -> int:
    """All stored traces (a count, no text: for empty-state messages and the overview)."""
    with read_session(engine) as s:
        return int(s.scalar(select(func.count()).select_from(TraceRow)) or 0)


def data_stamp(engine: Engine) -> str:
    """Changes whenever traces are added or purged (cheap: index lookups); a cache key."""
    with read_session(engine) as s:
        lo, hi = s.execute(select(func.min(TraceRow.id), func.max(TraceRow.id))).one()
        imports = s.scalar(select(func.max(TraceImport.id)))
    return f"{lo}-{hi}-{imports}"


def _order(sort: str) -> list[Any]:
    if sort == "oldest":
        return [TraceRow.at.asc(), TraceRow.id.asc()]
    if sort == "score_desc":
        return [TraceRow.top_score.desc().nulls_last(), TraceRow.id.desc()]
    if sort == "score_asc":
        return [TraceRow.top_score.asc().nulls_last(), TraceRow.id.asc()]
    if sort != "newest":
        raise InputError(f"unknown sort {sort!r} (one of {', '.join(SORTS)})")
    return [TraceRow.at.desc(), TraceRow.id.desc()]


def list_traces(
    engine: Engine,
    actor: Actor,
    f: TraceFilter,
    page: int = 1,
    page_size: int = 25,
    sort: str = "newest",
) -> list[TraceListRow]:
    """One page of matching traces (server-side: LIMIT/OFFSET on indexed columns)."""
    require_view(actor)
    page = max(1, page)
    page_size = max(1, min(page_size, 500))
    stmt: Select[Any] = (
        select(
            TraceRow.id,
            TraceRow.trace_id,
            TraceRow.at,
            func.substr(TraceRow.query, 1, PREVIEW_CHARS),
            TraceRow.decision,
            TraceRow.reason_code,
            TraceRow.top_score,
            TraceRow.ranking_mode,
            TraceRow.hits_after_filter,
            TraceRow.feedback,
            TraceRow.policy_version,
            TraceRow.restricted,
        )
        .where(*_conditions(actor, f, for_listing=True))
        .order_by(*_order(sort))
        .limit(page_size)
        .offset((page - 1) * page_size)
    )
    with read_session(engine) as s:
        out: list[TraceListRow] = []
        for r in s.execute(stmt):
            out.append(
                TraceListRow(
                    r[0],
                    r[1],
                    _aware(r[2]),
                    r[3] or "",
                    r[4],
                    r[5],
                    r[6],
                    r[7],
                    r[8],
                    r[9],
                    r[10],
                    bool(r[11]),
                )
            )
        return out


def _aware(v: dt.datetime) -> dt.datetime:
    return v if v.tzinfo is not None else v.replace(tzinfo=dt.UTC)


#: Filterable columns with an index of their own: their values are read from the whole table.
_INDEXED_FACETS = ("policy_version", "feedback")


def facet_values(engine: Engine, limit: int = 200, sample: int = 20_000) -> dict[str, list[str]]:
    """Values offered in the filter pickers: every value of the indexed columns, and for the
    others the values of the newest ``sample`` traces (a full scan per column would take
    seconds at a million traces; an older value can still be reached by a link)."""
    out: dict[str, list[str]] = {}
    with read_session(engine) as s:
        newest = (
            select(*(getattr(TraceRow, n) for n in COLUMN_FILTERS))
            .order_by(TraceRow.at.desc())
            .limit(sample)
            .subquery()
        )
        for name in (*COLUMN_FILTERS, "feedback"):
            col = getattr(TraceRow, name) if name in _INDEXED_FACETS else newest.c[name]
            stmt = select(col).where(col.is_not(None)).distinct().order_by(col).limit(limit)
            out[name] = [str(v) for v in s.scalars(stmt)]
    return out


def version_keys(engine: Engine, sample: int = 1000) -> dict[str, list[str]]:
    """Component names in ``versions`` and their values, from the newest ``sample`` traces."""
    keys: dict[str, set[str]] = {}
    with read_session(engine) as s:
        for versions in s.scalars(
            select(TraceRow.versions).order_by(TraceRow.at.desc()).limit(sample)
        ):
            for k, v in (versions or {}).items():
                keys.setdefault(str(k), set()).add(str(v))
    return {k: sorted(v) for k, v in sorted(keys.items())}


@dataclass(frozen=True)
class ChunkView:
    chunk_id: str
    doc_id: str | None
    doc_version: int | None
    rank: int | None
    score: float | None
    text: str
    filtered: bool
    effective_date: dt.date | None
    in_context: bool | None  # None: the trace logged no context text
    cited: bool


@dataclass(frozen=True)
class CitationView:
    claim: str
    chunk_ids: tuple[str, ...]  # hidden ones shown as "(filtered chunk)"
    valid: bool  # every cited chunk was retrieved, not filtered, and (if known) in the context
    problems: tuple[str, ...]


@dataclass(frozen=True)
class TraceView:
    id: int
    trace_id: str
    at: dt.datetime
    query: str
    rewritten_query: str | None
    user_role: str | None
    identity_scopes: tuple[str, ...]
    context_sent: str
    ranking_mode: str | None
    hits_after_filter: int | None
    top_score: float | None
    answerable: bool | None
    ambiguous: bool | None
    ungrounded: bool | None
    decision: str | None
    reason_code: str | None
    answer_text: str
    citations: tuple[CitationView, ...]
    feedback: str | None
    versions: dict[str, Any]
    attributes: dict[str, Any]
    restricted: bool
    redactions: dict[str, Any]
    chunks: tuple[ChunkView, ...]
    hidden_chunks: int  # filtered chunks hidden from a viewer without clearance
    import_source: str | None
    imported_at: dt.datetime

    @property
    def caveat(self) -> bool:
        return self.decision == "answer" and self.reason_code == CAVEAT_REASON

    @property
    def missing_reason(self) -> bool:
        return self.decision is None or (self.decision != "answer" and not self.reason_code)


HIDDEN_CHUNK = "(filtered chunk)"


def get_trace(
    engine: Engine, actor: Actor, pk: int | None = None, trace_id: str | None = None
) -> TraceView | None:
    """One trace with its chunks, as ``actor`` may see it (None when it does not exist).

    A restricted trace raises PermissionDenied for a user without clearance; filtered chunks
    are left out for such a user (``hidden_chunks`` counts them) and their ids masked in the
    citations.
    """
    require_view(actor)
    with read_session(engine) as s:
        if pk is not None:
            row = s.get(TraceRow, pk)
        elif trace_id is not None:
            row = s.scalar(select(TraceRow).where(TraceRow.trace_id == trace_id))
        else:
            raise InputError("give a trace number or a trace id")
        if row is None:
            return None
        if row.restricted and not actor.clearance:
            raise PermissionDenied(
                f"Trace {row.id} is restricted: it is shown only to users with clearance."
            )
        chunk_rows = list(
            s.scalars(
                select(TraceChunk)
                .where(TraceChunk.trace_pk == row.id)
                .order_by(TraceChunk.rank.asc().nulls_last(), TraceChunk.id)
            )
        )
        source = None
        if row.import_id is not None:
            source = s.scalar(select(TraceImport.source).where(TraceImport.id == row.import_id))
    context = row.context_sent or ""
    cited_ids = {cid for c in row.citations or [] for cid in c.get("chunk_ids", [])}
    visible = [c for c in chunk_rows if actor.clearance or not c.filtered]
    hidden_ids = {c.chunk_id for c in chunk_rows if c.filtered and not actor.clearance}
    chunks = tuple(
        ChunkView(
            c.chunk_id,
            c.doc_id,
            c.doc_version,
            c.rank,
            c.score,
            c.text,
            c.filtered,
            c.effective_date,
            None if not context else (not c.filtered and c.chunk_id in context),
            c.chunk_id in cited_ids,
        )
        for c in visible
    )
    by_id = {c.chunk_id: c for c in chunk_rows}
    citations: list[CitationView] = []
    for c in row.citations or []:
        ids = [str(x) for x in c.get("chunk_ids", [])]
        problems: list[str] = []
        for cid in ids:
            shown = HIDDEN_CHUNK if cid in hidden_ids else cid
            ch = by_id.get(cid)
            if ch is None:
                problems.append(f"{shown} was not retrieved")
            elif ch.filtered:
                problems.append(f"{shown} was removed by authorization")
            elif context and cid not in context:
                problems.append(f"{shown} is not in the context sent")
        if not ids:
            problems.append("cites nothing")
        citations.append(
            CitationView(
                str(c.get("claim", "")),
                tuple(HIDDEN_CHUNK if cid in hidden_ids else cid for cid in ids),
                not problems,
                tuple(problems),
            )
        )
    return TraceView(
        id=row.id,
        trace_id=row.trace_id,
        at=_aware(row.at),
        query=row.query,
        rewritten_query=row.rewritten_query,
        user_role=row.user_role,
        identity_scopes=tuple(row.identity_scopes or ()),
        context_sent=context,
        ranking_mode=row.ranking_mode,
        hits_after_filter=row.hits_after_filter,
        top_score=row.top_score,
        answerable=row.answerable,
        ambiguous=row.ambiguous,
        ungrounded=row.ungrounded,
        decision=row.decision,
        reason_code=row.reason_code,
        answer_text=row.answer_text,
        citations=tuple(citations),
        feedback=row.feedback,
        versions=dict(row.versions or {}),
        attributes=dict(row.attributes or {}),
        restricted=row.restricted,
        redactions=dict(row.redactions or {}),
        chunks=chunks,
        hidden_chunks=len(chunk_rows) - len(visible),
        import_source=source,
        imported_at=_aware(row.imported_at),
    )


# ---------------------------------------------------------------------------------------
# Retention


@dataclass(frozen=True)
class Retention:
    days: int | None  # None: keep traces until someone purges them
    version: int  # 0 when never set
    updated_by: str | None
    updated_at: dt.datetime | None


def get_retention(engine: Engine) -> Retention:
    with read_session(engine) as s:
        row = s.get(Setting, RETENTION_KEY)
        if row is None:
            return Retention(None, 0, None, None)
        days = (row.value or {}).get("days")
        return Retention(
            int(days) if isinstance(days, int) else None,
            row.version,
            row.updated_by,
            row.updated_at,
        )


def set_retention(
    engine: Engine, actor: Actor, days: int | None, expected_version: int
) -> Retention:
    """Set (or clear, with None) how many days traces are kept. Version-checked, audited."""
    require(actor, Permission.manage_users)
    if days is not None and not 1 <= days <= MAX_RETENTION_DAYS:
        raise InputError(f"retention must be between 1 and {MAX_RETENTION_DAYS} days")

    def work(s: Session) -> Retention:
        row = s.get(Setting, RETENTION_KEY, with_for_update=True)
        current = row.version if row else 0
        if current != expected_version:
            raise StaleWriteError(
                f"the retention setting was changed by {row.updated_by if row else '?'} "
                f"(now version {current}, you opened version {expected_version}); nothing was "
                "saved: reload and try again"
            )
        before = dict(row.value) if row else None
        value = {"days": days}
        now = utcnow()
        if row is None:
            row = Setting(key=RETENTION_KEY, value=value, version=1, updated_by=actor.email)
            row.updated_at = now
            s.add(row)
        else:
            row.value = value
            row.version += 1
            row.updated_at = now
            row.updated_by = actor.email
        s.flush()
        changes.record(s, actor.email, "update", "setting", RETENTION_KEY, before, value)
        return Retention(days, row.version, actor.email, now)

    return run_write(engine, work)


@dataclass(frozen=True)
class PurgeReport:
    cutoff: dt.datetime
    deleted: int
    kept_in_audits: int

    def summary(self) -> str:
        kept = (
            f"; {self.kept_in_audits} older trace(s) kept because they are in an audit sample"
            if self.kept_in_audits
            else ""
        )
        return (
            f"{self.deleted} trace(s) from before {self.cutoff:%Y-%m-%d %H:%M} UTC deleted "
            f"with their chunks{kept}."
        )


def purge_older_than(
    engine: Engine,
    actor: Actor,
    days: int,
    *,
    now: dt.datetime | None = None,
    batch: int = 2000,
    progress: Callable[[int], None] | None = None,
) -> PurgeReport:
    """Delete traces (and their chunks) recorded more than ``days`` days ago, in batches.

    Traces in an audit sample are kept (deleting them would delete the verdicts); the report
    counts them. The purge is written to the audit log.
    """
    require(actor, Permission.manage_users)
    if not 0 <= days <= MAX_RETENTION_DAYS:
        raise InputError(f"days must be between 0 and {MAX_RETENTION_DAYS}")
    cutoff = (now or utcnow()) - dt.timedelta(days=days)
    in_audit = exists().where(AuditItem.trace_pk == TraceRow.id)
    deleted = 0

    def work(s: Session) -> int:
        ids = list(
            s.scalars(select(TraceRow.id).where(TraceRow.at < cutoff, ~in_audit).limit(batch))
        )
        if ids:
            rollup.subtract_ids(s, ids)
            s.execute(delete(TraceChunk).where(TraceChunk.trace_pk.in_(ids)))
            s.execute(delete(TraceRow).where(TraceRow.id.in_(ids)))
        return len(ids)

    while True:
        n = run_write(engine, work)
        deleted += n
        if progress is not None and n:
            progress(deleted)
        if n < batch:
            break

    def finish(s: Session) -> int:
        kept = int(
            s.scalar(
                select(func.count()).select_from(TraceRow).where(TraceRow.at < cutoff, in_audit)
            )
            or 0
        )
        changes.record(
            s,
            actor.email,
            "purge",
            "traces",
            f"before {cutoff.isoformat()}",
            {"older_than_days": days, "cutoff": cutoff.isoformat()},
            {"deleted": deleted, "kept_in_audits": kept},
        )
        return kept

    kept = run_write(engine, finish)
    return PurgeReport(cutoff, deleted, kept)


def apply_retention(
    engine: Engine, actor: Actor, *, now: dt.datetime | None = None
) -> PurgeReport | None:
    """Purge by the retention setting; None when no retention is set."""
    require(actor, Permission.manage_users)
    r = get_retention(engine)
    if r.days is None:
        return None
    return purge_older_than(engine, actor, r.days, now=now)
