"""Importing production traces: idempotent, batched, redacted.
:func:`import_file` (a path), :func:`import_bytes` (an upload) and :func:`import_items` (any
iterable of parsed items or :class:`~review.traces.model.Trace` objects, used by the demo
builder) share one code path. The source is read once, in two phases:

1. **Check.** Every record is parsed and validated. The valid traces are looked up by id,
   :data:`ID_WINDOW` at a time: those already stored are counted as skipped and go no
   further (so re-importing a stored file costs little more than reading it); the others are
   redacted and turned into rows (:mod:`review.traces.tracerows`), which are spooled to a
   temporary file in batches (constant memory; the spool is about as large as the new part
   of the input and is deleted afterwards). Nothing is written to the database in this phase: by
   default the first malformed record stops the import with ``file: line N: field F:
   reason``. With ``skip_bad=True`` every rejected record is written to the rejects file (JSON
   lines ``{"line", "reason", "raw"}``) and counted. Besides the parsers' checks this phase
   refuses values longer than their database column (PostgreSQL enforces them) and lines that
   are not UTF-8 text. It also counts the traces, so the progress bar knows its total.
2. **Write.** The spooled batches (``batch_size`` traces, 500 by default) are written one
   transaction each: a trace and its chunks are always in the same transaction, so a killed
   import never leaves half a trace. Trace ids already in the database (stored meanwhile, or
   repeated in the file: the first occurrence wins) are skipped, so importing the same file
   twice adds nothing and re-running a killed import completes it. The rows are written by
   the database driver (SQLite ``executemany``, PostgreSQL ``COPY``; see
   :mod:`review.traces.tracerows`).

The ``trace_imports`` row is created when the write pass starts (status ``running``, with the
traces found stored while checking as skipped), updated with the counts of every committed
batch, and closed as ``done`` (or ``failed``) with the
redaction totals. The audit log records the run as it goes (:mod:`storage.runs`): a ``start``
entry with the plan (source, format, size and sha256 of a file or upload, mode, traces to
write) in the transaction that creates the import row, a ``progress`` entry with the counts so
far in the transaction of every batch, and the closing ``import`` entry. A killed import thus
shows as interrupted with the counts of its last committed batch; re-running it names the
interrupted import of the same file (same sha256, or same source when there is no file) in its
start entry's ``resumes``.

Redaction (``policies/redaction.yaml``) is applied to every trace before it is stored; the
counts per detector are stored on the trace and summed on the import row. Importing without
redaction needs clearance."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import json
import pickle
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, BinaryIO

from sqlalchemy import (
    Engine,
    select,
    update,
)
from sqlalchemy.orm import Session

from review.core.errors import InputError, PermissionDenied
from review.core.identity import Actor, Permission, require
from review.core.taxonomy import Taxonomy
from review.core.terms import ImportStatus
from review.traces import rollup, tracerows
from review.traces.formats import FORMATS, detect_format, iter_traces
from review.traces.importlog import RUN_ENTITY, ImportRow, recent_imports, same_work
from review.traces.model import (
    ParsedTrace,
    Rejected,
    Trace,
    TraceItem,
    TraceVocabulary,
)
from review.traces.redaction import RedactionPolicy, load_redaction_policy, redact
from review.traces.restricted import flag_rows, lock_flags
from storage import changes, runs
from storage.db import read_session, run_write
from storage.models import Trace as TraceRow
from storage.models import TraceImport, utcnow

__all__ = [
    "BATCH_SIZE",
    "ImportReport",
    "ImportRow",
    "import_bytes",
    "import_file",
    "import_items",
    "recent_imports",
]


BATCH_SIZE = 500


MAX_LINE_BYTES = 64 * 2**20  # a longer line is refused without being held in memory


MAX_PROBLEMS = 20  # rejected lines listed in the report (all are in the rejects file)


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


def _insert_chunks(s: Session, rows: list[tuple[Any, ...]]) -> None:
    """Insert one batch's chunk rows (tuples in ``tracerows.CHUNK_COLUMNS`` order)."""
    tracerows.insert_chunk_rows(s.connection(), rows)


def _unwrap(item: TraceItem | Trace, index: int) -> tuple[Trace, int] | Rejected:
    if isinstance(item, Trace):
        return item, index
    if isinstance(item, ParsedTrace):
        return item.trace, item.line_no
    return item


#: One spooled trace: its row values (in the order of the batch's keys), its chunk tuples
#: (``tracerows.CHUNK_COLUMNS`` order) and its redaction counts.
_Prepared = tuple[tuple[Any, ...], list[tuple[Any, ...]], dict[str, int]]

#: Traces whose ids are looked up together while checking (stored ones are not spooled).
ID_WINDOW = 1000

#: Positions of the chunk texts that repeat from trace to trace (shared in the spool).
_SHARED_CHUNK_TEXTS = tuple(
    tracerows.CHUNK_COLUMNS.index(c) for c in ("chunk_id", "doc_id", "text")
)


def _stored_ids(engine: Engine, ids: list[str]) -> set[str]:
    """Which of ``ids`` are in the traces table (one indexed lookup)."""
    if not ids:
        return set()
    with read_session(engine) as s:
        tracerows.custom_plans(s.connection())
        return set(s.scalars(select(TraceRow.trace_id).where(TraceRow.trace_id.in_(ids))))


class _Check:
    """Phase 1 (module docs): every record is validated (refused or rejected with its line);
    the valid traces are looked up by id a window at a time, and only those not stored yet
    are redacted, turned into rows and spooled. Stored ones are counted as skipped."""

    def __init__(
        self,
        engine: Engine,
        source: str,
        skip_bad: bool,
        rej_fh: IO[str] | None,
        redactor: _Redactor | None,
        batch_size: int,
        spool: IO[bytes],
        report: ImportReport,
        progress: ProgressFn | None,
    ) -> None:
        self.engine = engine
        self.source = source
        self.skip_bad = skip_bad
        self.rej_fh = rej_fh
        self.redactor = redactor
        self.batch_size = batch_size
        self.spool = spool
        self.report = report
        self.progress = progress
        self.window: list[Trace] = []
        self.batch: list[_Prepared] = []
        self.keys: tuple[str, ...] = ()
        self.stored = 0  # valid traces already in the database
        self.memo: dict[str, str] = {}  # texts of the batch's chunks (shared)

    def item(self, got: tuple[Trace, int] | Rejected) -> None:
        if isinstance(got, Rejected):
            self.reject(got)
            return
        t, line = got
        why = _fit_problem(t)
        if why is not None:
            if not self.skip_bad:
                raise InputError(f"{self.source}: line {line}: {why}")
            self.reject(Rejected(line, json.dumps({"trace_id": t.trace_id}), why))
            return
        self.window.append(t)
        self.report.traces += 1
        if self.progress is not None and self.report.traces % 1000 == 0:
            self.progress("checking", self.report.traces, None)
        if len(self.window) >= ID_WINDOW:
            self.flush_window()

    def reject(self, problem: Rejected) -> None:
        report = self.report
        report.rejected += 1
        if len(report.problems) < MAX_PROBLEMS:
            report.problems.append(problem.message(self.source))
        _write_rejected(self.rej_fh, problem)

    def flush_window(self) -> None:
        stored = _stored_ids(self.engine, [t.trace_id for t in self.window])
        redactor = self.redactor
        for t in self.window:
            if t.trace_id in stored:
                self.stored += 1
                continue
            counts: dict[str, int] = {}
            if redactor is not None:
                t, counts = redactor.trace(t)
            # the restricted flag is set in the write transaction (_write_batch)
            values = tracerows.trace_values(t, counts)
            if not self.keys:
                self.keys = tuple(values)
            chunks = [self.shared(c) for c in tracerows.chunk_values(t)]
            self.batch.append((tuple(values.values()), chunks, counts))
            if len(self.batch) >= self.batch_size:
                self.dump()
        self.window = []

    def shared(self, chunk: tuple[Any, ...]) -> tuple[Any, ...]:
        """``chunk`` with its texts replaced by an equal text seen before in the batch, so
        that a chunk retrieved again and again is spooled once (pickle writes an object it
        has written before as a reference)."""
        memo = self.memo
        vals = list(chunk)
        for i in _SHARED_CHUNK_TEXTS:
            v = vals[i]
            if v is not None:
                vals[i] = memo.setdefault(v, v)
        return tuple(vals)

    def dump(self) -> None:
        pickle.dump((self.keys, self.batch), self.spool, protocol=pickle.HIGHEST_PROTOCOL)
        self.batch = []
        self.memo = {}

    def finish(self) -> None:
        if self.window:
            self.flush_window()
        if self.batch:
            self.dump()


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
    origin: dict[str, Any] | None = None,
) -> ImportReport:
    """Import parsed traces, rejected records (from a parser with ``skip_bad``) or Trace
    objects (numbered 1, 2, ... in messages), read once, in two phases (module docs).

    ``origin`` (``{"bytes": ..., "sha256": ...}`` of a file or upload) goes into the audit
    log's start entry and identifies the interrupted import a re-run resumes."""
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
            check = _Check(
                engine, source, skip_bad, rej_fh, redactor, batch_size, spool, report, progress
            )
            for i, item in enumerate(items, start=1):
                check.item(_unwrap(item, i))
            check.finish()
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
                status=ImportStatus.running,
                rejected=report.rejected,
                rejects_file=report.rejects_file,
                actor=actor.email,
                redactions={} if pol is None else dict(report.redactions),
                skipped=check.stored,
            )
            s.add(row)
            s.flush()
            plan = _plan(report, origin or {}, skip_bad, batch_size)
            resumes = [
                r.entity_id for r in runs.interrupted(s, RUN_ENTITY) if same_work(r.plan, plan)
            ]
            runs.started(s, actor.email, RUN_ENTITY, row.id, plan, resumes)
            return row.id

        import_id = run_write(engine, start)
        report.import_id = import_id
        report.skipped = check.stored
        spool.seek(0)
        try:
            while True:
                try:
                    keys, prepared = pickle.load(spool)
                except EOFError:
                    break
                _write_batch(engine, actor, import_id, keys, prepared, report)
                if progress is not None:
                    progress("writing", report.added + report.skipped, report.traces)
        except BaseException as exc:
            message = str(exc) or f"stopped by {type(exc).__name__}"
            _close_import(engine, actor, import_id, report, "failed", message[:2000])
            raise
    _close_import(engine, actor, import_id, report, "done", report.summary())
    return report


def _plan(
    report: ImportReport, origin: dict[str, Any], skip_bad: bool, batch_size: int
) -> dict[str, Any]:
    """What an import will do, for the audit log's start entry."""
    return {
        "source": report.source,
        "format": report.format,
        **{k: origin[k] for k in ("bytes", "sha256") if k in origin},
        "traces": report.traces,
        "rejected": report.rejected,
        "skip_bad": skip_bad,
        "redacted": report.redacted,
        "batch_size": batch_size,
    }


def _write_batch(
    engine: Engine,
    actor: Actor,
    import_id: int,
    keys: tuple[str, ...],
    prepared: list[_Prepared],
    report: ImportReport,
) -> None:
    """One transaction: the batch's new traces with all their chunks, the import's counts and
    the audit log's progress entry. Trace ids already stored (or repeated in the batch) are
    skipped; the check is exact, as trace inserts hold a lock (tracerows module docs)."""
    now = utcnow()
    rows = [dict(zip(keys, p[0], strict=True)) for p in prepared]

    def work(s: Session) -> tuple[int, int, dict[str, int]]:
        conn = s.connection()
        tracerows.lock_trace_inserts(conn)
        ids = [r["trace_id"] for r in rows]
        existing = set(s.scalars(select(TraceRow.trace_id).where(TraceRow.trace_id.in_(ids))))
        fresh: list[tuple[dict[str, Any], list[tuple[Any, ...]], dict[str, int]]] = []
        for row, (_, chunks, counts) in zip(rows, prepared, strict=True):
            tid = row["trace_id"]
            if tid not in existing:
                existing.add(tid)
                fresh.append((row, chunks, counts))
        # the restricted rule against the corpus as this transaction sees it, so that a
        # document made restricted meanwhile is never missed (review.corpus.restricted_traces)
        lock_flags(s, exclusive=False)
        doc, filtered = tracerows.CHUNK_DOC_ID, tracerows.CHUNK_FILTERED
        flags = flag_rows(
            s,
            [(r, [{"doc_id": c[doc], "filtered": c[filtered]} for c in ch]) for r, ch, _ in fresh],
        )
        for (row, _, _), flag in zip(fresh, flags, strict=True):
            row["restricted"] = flag
        pks = tracerows.insert_trace_rows(conn, [f[0] for f in fresh], import_id, now)
        rollup.add_rows(s, (f[0] for f in fresh))
        added_counts: dict[str, int] = {}
        for _, _, counts in fresh:
            for k, v in counts.items():
                added_counts[k] = added_counts.get(k, 0) + v
        restricted_n = sum(flags)
        _insert_chunks(
            s, [(pk, *c[1:]) for pk, (_, ch, _) in zip(pks, fresh, strict=True) for c in ch]
        )
        added, skipped = len(pks), len(prepared) - len(pks)
        s.execute(
            update(TraceImport)
            .where(TraceImport.id == import_id)
            .values(added=TraceImport.added + added, skipped=TraceImport.skipped + skipped)
        )
        runs.progressed(
            s,
            actor.email,
            RUN_ENTITY,
            import_id,
            {
                "added": report.added + added,
                "skipped": report.skipped + skipped,
                "restricted": report.restricted + restricted_n,
                "of": report.traces,
            },
        )
        return added, restricted_n, added_counts

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
        if status != ImportStatus.done:
            after["message"] = message
        changes.record(s, actor.email, "import", RUN_ENTITY, import_id, None, after)

    try:
        run_write(engine, work)
    except Exception:
        if status == ImportStatus.done:
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
    with path.open("rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    origin = {"bytes": path.stat().st_size, "sha256": digest}

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
        origin=origin,
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
        origin={"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()},
    )
