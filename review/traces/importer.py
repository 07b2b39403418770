"""Importing production traces: idempotent, batched, redacted.
:func:`import_file` (a path), :func:`import_bytes` (an upload) and :func:`import_items` (any
iterable of parsed items or :class:`~review.traces.model.Trace` objects, used by the demo
builder) share one code path. The source is read once, in two phases (the first in
:mod:`review.traces.importcheck`):

1. **Check.** Every record is parsed and validated. The valid traces are looked up by id,
   ``ID_WINDOW`` at a time: those already stored are counted as skipped and go no
   further (so re-importing a stored file costs little more than reading it); the others are
   redacted and turned into rows (:mod:`review.traces.tracerows`), which are spooled to a
   temporary file in batches (constant memory; the spool is about as large as the new part
   of the input and is deleted afterwards). Nothing is written to the database in this phase: by
   default the first malformed record stops the import with ``file: line N: field F:
   reason``. With ``skip_bad=True`` every rejected record is written to the rejects file (JSON
   lines ``{"line", "reason", "raw"}``) and counted. Besides the parsers' checks this phase
   refuses values longer than their database column (PostgreSQL enforces them) and lines that
   are not UTF-8 text. It also counts the traces, so the progress bar knows its total.
2. **Write.** The spooled batches (``batch_size`` traces, 2,000 by default) are written one
   transaction each: a trace and its chunks are always in the same transaction, so a killed
   import never leaves half a trace. Trace ids already in the database (stored meanwhile, or
   repeated in the file: the first occurrence wins) are skipped, so importing the same file
   twice adds nothing and re-running a killed import completes it. The rows are written by
   the database driver (SQLite ``executemany``, PostgreSQL ``COPY``; see
   :mod:`review.traces.tracerows`). What the next batch needs that reads no database (its
   rows, the restricted rule's facts, the rollup's counts) is made while PostgreSQL writes
   this batch's traces on its own core.

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

A live source imports every few seconds (:mod:`review.traces.live.staging`), which would make
thousands of import log entries a day. It imports with ``fold=True``: an import of the same
source and format that this process completed within the current hour (UTC) is reopened and
this one's counts are added to it, so the import log keeps one entry per live source and hour.
The audit log still records every pass: a ``progress`` entry that reopens the run (this pass's
plan, and its number), the pass's batch entries, and a closing ``import`` entry with the run's
totals and the pass's own counts (:mod:`storage.runs` reads the newest closing entry). An
import another process started, or one that did not complete, is never reopened.

Redaction (``policies/redaction.yaml``) is applied to every trace before it is stored; the
counts per detector are stored on the trace and summed on the import row. Importing without
redaction needs clearance."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import io
import os
import pickle
import socket
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any, NamedTuple

from sqlalchemy import (
    Engine,
    select,
    update,
)
from sqlalchemy.orm import Session

from review.core import clearance, readable
from review.core.errors import InputError, PermissionDenied
from review.core.identity import Actor, Permission, require
from review.core.taxonomy import Taxonomy
from review.core.terms import ImportStatus
from review.traces import importparts, rollup, tracerows
from review.traces.importcheck import (
    ImportReport,
    Prepared,
    ProgressFn,
    Redactor,
    TraceCheck,
    first_line,
    parse_binary,
    resolve_format,
)
from review.traces.importlog import RUN_ENTITY, ImportRow, recent_imports, same_work
from review.traces.model import (
    Trace,
    TraceItem,
    TraceVocabulary,
)
from review.traces.redaction import RedactionPolicy, load_redaction_policy
from review.traces.restricted import Reason, TraceFacts, lock_flags, new_trace_facts, reasons_of
from storage import changes, partitions, runs, statistics
from storage.db import one_of, run_write
from storage.models import Trace as TraceRow
from storage.models import TraceImport, utcnow

__all__ = [
    "BATCH_SIZE",
    "ImportReport",
    "ImportRow",
    "import_bytes",
    "import_file",
    "import_items",
    "insert_chunks",
    "recent_imports",
]


#: Traces per write transaction. Each transaction costs about 30 ms besides its rows on
#: PostgreSQL (its look-ups, the rollup, the audit log, two COPY statements and their
#: triggers): 2,000 rather than 500 took a 100,000-trace import from 33 s to 30 s, and a
#: transaction still ends within about half a second on either database.
BATCH_SIZE = 2000


def insert_chunks(s: Session, rows: list[tuple[Any, ...]]) -> None:
    """Insert one batch's chunk rows (tuples in ``tracerows.CHUNK_COLUMNS`` order)."""
    tracerows.insert_chunk_rows(s.connection(), rows)


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
    parts: importparts.Parts | None = None,
    fold: bool = False,
) -> ImportReport:
    """Import parsed traces, rejected records (from a parser with ``skip_bad``) or Trace
    objects (numbered 1, 2, ... in messages), read once, in two phases (module docs).

    ``origin`` (``{"bytes": ..., "sha256": ...}`` of a file or upload) goes into the audit
    log's start entry and identifies the interrupted import a re-run resumes. ``parts``: the
    file ``items`` reads the first part of, whose other parts are checked by other processes
    meanwhile (:mod:`review.traces.importparts`). ``fold``: add this import to the import of
    the same source this process completed this hour, if any (module docs)."""
    require(actor, Permission.import_traces)
    if not redact and not clearance.cleared(actor):
        raise PermissionDenied(
            "Importing traces without redaction needs clearance: unredacted traces can hold "
            "personal data."
        )
    if not 1 <= batch_size <= 10_000:
        raise InputError("batch_size must be between 1 and 10,000 traces")
    pol = (policy or load_redaction_policy()) if redact else None
    redactor = Redactor(pol) if pol is not None else None
    report = ImportReport(None, source[:500], fmt, redacted=redact)
    if pol is not None:
        report.redactions = dict.fromkeys(pol.enabled_names(), 0)

    with tempfile.TemporaryFile(prefix="wb-traces-") as spool, contextlib.ExitStack() as stack:
        # 1. check: parse, validate, redact and spool every trace; nothing touches the database
        rej_fh: IO[str] | None = None
        if skip_bad and rejects_path is not None:
            rejects_path.parent.mkdir(parents=True, exist_ok=True)
            rej_fh = rejects_path.open("w", encoding="utf-8")
            report.rejects_file = str(rejects_path)
        spools: list[IO[bytes]] = [spool]
        try:
            # the other parts of a large file are checked by other processes meanwhile
            workers: importparts.PartWorkers | None = None
            if parts is not None:
                workers = stack.enter_context(
                    importparts.checked_parts(
                        parts, source, skip_bad, pol, batch_size, rej_fh is not None
                    )
                )
            check = TraceCheck(
                engine,
                source,
                skip_bad,
                rej_fh,
                redactor,
                batch_size,
                spool,
                report,
                _with_parts(progress, workers),
            )
            check.run(items)
            if workers is not None:
                results = workers.results()
                check.stored += importparts.merge(report, results, rej_fh)
                spools += [stack.enter_context(open(r.spool, "rb")) for r in results]
        finally:
            if rej_fh is not None:
                rej_fh.close()
        if progress is not None:
            progress("checking", report.traces, report.traces)

        # 2. write the spooled batches, one transaction each
        folded: _Folded | None = None

        def start(s: Session) -> int:
            nonlocal folded
            plan = _plan(report, origin or {}, skip_bad, batch_size)
            folded = _reopen(s, actor, report, check.stored, plan) if fold else None
            if folded is not None:
                return folded.import_id
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
            ahead = _Ahead(_spooled(spools))
            while (staged := ahead.take()) is not None:
                _write_batch(engine, actor, import_id, staged, report, ahead.stage_next, folded)
                if progress is not None:
                    progress("writing", report.added + report.skipped, report.traces)
        except BaseException as exc:
            message = str(exc) or f"stopped by {type(exc).__name__}"
            _close_import(engine, actor, import_id, report, "failed", message[:2000], folded)
            raise
    _close_import(engine, actor, import_id, report, "done", report.summary(), folded)
    if report.added:
        statistics.refresh_statistics(engine)
    return report


class _Folded(NamedTuple):
    """An import reopened to take this one's counts: its id, its counts before this pass
    and this pass's number."""

    import_id: int
    added: int
    skipped: int
    rejected: int
    redactions: dict[str, int]
    number: int


def _hour_start(at: dt.datetime) -> dt.datetime:
    return at.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0)


def _reopen(
    s: Session, actor: Actor, report: ImportReport, stored: int, plan: dict[str, Any]
) -> _Folded | None:
    """Reopen the newest import of ``report``'s source and format if this process completed
    it within the current hour, in the caller's transaction: its row running again with this
    pass's rejected and already-stored traces added, and the audit log's progress entry
    that says so. None when there is no such import (a new one is started)."""
    row = s.scalar(
        select(TraceImport)
        .where(
            TraceImport.source == report.source,
            TraceImport.format == report.format,
            TraceImport.started_at >= _hour_start(utcnow()),
        )
        .order_by(TraceImport.id.desc())
        .limit(1)
        .with_for_update()
    )
    if row is None or row.status != ImportStatus.done or row.actor != actor.email:
        return None
    state = runs.state_of(s, RUN_ENTITY, row.id)
    if (
        state is None
        or state.status != "completed"
        or state.plan.get("host") != socket.gethostname()
        or state.plan.get("pid") != os.getpid()
    ):
        return None
    number = int(state.counts.get("passes") or 1) + 1
    folded = _Folded(
        row.id, row.added, row.skipped, row.rejected, dict(row.redactions or {}), number
    )
    row.status = ImportStatus.running
    row.finished_at = None
    row.rejected = row.rejected + report.rejected
    row.skipped = row.skipped + stored
    runs.progressed(
        s,
        actor.email,
        RUN_ENTITY,
        row.id,
        {
            "reopened": "another import of this source this hour, folded into this one",
            "pass": number,
            "plan": plan,
            "added": row.added,
            "skipped": row.skipped,
        },
    )
    return folded


def _with_parts(
    progress: ProgressFn | None, workers: importparts.PartWorkers | None
) -> ProgressFn | None:
    """``progress`` counting the traces the other parts' processes have checked as well."""
    if progress is None or workers is None:
        return progress
    return lambda phase, done, total: progress(phase, done + workers.checked(), total)


def _spooled(spools: list[IO[bytes]]) -> Iterator[tuple[tuple[str, ...], list[Prepared]]]:
    """The spooled batches of every spool, one spool after the other (the file's order)."""
    for spool in spools:
        while True:
            try:
                keys, prepared = pickle.load(spool)
            except EOFError:
                break
            yield keys, prepared


class _Staged(NamedTuple):
    """A spooled batch made ready for its transaction, without reading the database: its
    trace rows, the restricted rule's facts of each trace and the rollup's counts of them all
    (the transaction recounts when it finds some of them stored meanwhile)."""

    rows: list[dict[str, Any]]
    prepared: list[Prepared]
    facts: list[TraceFacts]
    counts: dict[rollup.Key, list[int]]


def _stage(keys: tuple[str, ...], prepared: list[Prepared]) -> _Staged:
    rows = [dict(zip(keys, p[0], strict=True)) for p in prepared]
    doc, filtered = tracerows.CHUNK_DOC_ID, tracerows.CHUNK_FILTERED
    facts = new_trace_facts(
        (row, [{"doc_id": c[doc], "filtered": c[filtered]} for c in p[1]])
        for row, p in zip(rows, prepared, strict=True)
    )
    return _Staged(rows, prepared, facts, rollup.aggregate(rows))


class _Ahead:
    """The spooled batches, each staged one ahead: the next batch is staged (read from its
    spool and made ready) while PostgreSQL writes the current batch's traces, which takes
    longer than the staging (tracerows.insert_trace_rows's ``while_copying``)."""

    def __init__(self, batches: Iterator[tuple[tuple[str, ...], list[Prepared]]]) -> None:
        self._batches = batches
        self._next: _Staged | None = None
        self._ended = False

    def stage_next(self) -> None:
        """Stage the next batch unless it is staged already (so a retried transaction may call
        this again) or there is none."""
        if self._next is None and not self._ended:
            got = next(self._batches, None)
            if got is None:
                self._ended = True
            else:
                self._next = _stage(*got)

    def take(self) -> _Staged | None:
        """The next batch, staged; None after the last."""
        self.stage_next()
        staged, self._next = self._next, None
        return staged


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
    staged: _Staged,
    report: ImportReport,
    while_copying: Callable[[], object],
    folded: _Folded | None = None,
) -> None:
    """One transaction: the batch's new traces with all their chunks, the import's counts and
    the audit log's progress entry. Trace ids already stored (or repeated in the batch) are
    skipped; the check is exact, as trace inserts hold a lock (tracerows module docs).
    ``while_copying`` stages the next batch while the server writes this one's traces."""
    now = utcnow()
    rows, prepared = staged.rows, staged.prepared

    def work(s: Session) -> tuple[int, int, dict[str, int], list[tuple[Reason, ...]]]:
        conn = s.connection()
        tracerows.lock_trace_inserts(conn)
        # a new month's partitions (PostgreSQL) before any other lock of the batch: making one
        # takes the traces table to itself for a moment
        partitions.ensure_months(conn, [r["at"] for r in rows])
        ids = [r["trace_id"] for r in rows]
        with tracerows.custom_plans(conn):
            existing = set(
                s.scalars(select(TraceRow.trace_id).where(one_of(s, TraceRow.trace_id, ids)))
            )
        keep: list[int] = []
        for i, tid in enumerate(ids):
            if tid not in existing:
                existing.add(tid)
                keep.append(i)
        fresh = [rows[i] for i in keep]
        if len(keep) == len(rows):
            facts, counts = staged.facts, staged.counts
        else:
            facts, counts = [staged.facts[i] for i in keep], rollup.aggregate(fresh)
        # the restricted rule against the corpus as this transaction sees it, so that a
        # document made restricted meanwhile is never missed (review.corpus.restricted_traces)
        lock_flags(s, exclusive=False)
        why = reasons_of(s, facts)
        flags = [bool(w) for w in why]
        for row, flag in zip(fresh, flags, strict=True):
            row["restricted"] = flag
        pks = tracerows.insert_trace_rows(conn, fresh, import_id, now, while_copying)
        rollup.add_counts(s, counts)
        added_counts: dict[str, int] = {}
        for i in keep:
            for k, v in prepared[i][2].items():
                added_counts[k] = added_counts.get(k, 0) + v
        restricted_n = sum(flags)
        insert_chunks(
            s, [(pk, *c[1:]) for pk, i in zip(pks, keep, strict=True) for c in prepared[i][1]]
        )
        added, skipped = len(pks), len(prepared) - len(pks)
        s.execute(
            update(TraceImport)
            .where(TraceImport.id == import_id)
            .values(added=TraceImport.added + added, skipped=TraceImport.skipped + skipped)
        )
        so_far: dict[str, Any] = {
            "added": report.added + added,
            "skipped": report.skipped + skipped,
            "restricted": report.restricted + restricted_n,
            "of": report.traces,
        }
        if folded is not None:  # the run's totals, this pass's counts beside them
            so_far = {
                "added": folded.added + so_far["added"],
                "skipped": folded.skipped + so_far["skipped"],
                "pass": folded.number,
                "pass_counts": so_far,
            }
        runs.progressed(s, actor.email, RUN_ENTITY, import_id, so_far)
        return added, restricted_n, added_counts, why

    added, restricted_n, added_counts, why = run_write(engine, work)
    report.unknown.add(why)
    report.added += added
    report.skipped += len(prepared) - added
    report.restricted += restricted_n
    for k, v in added_counts.items():
        report.redactions[k] = report.redactions.get(k, 0) + v


def _close_import(
    engine: Engine,
    actor: Actor,
    import_id: int,
    report: ImportReport,
    status: str,
    message: str,
    folded: _Folded | None = None,
) -> None:
    def work(s: Session) -> None:
        row = s.get(TraceImport, import_id)
        if row is None:
            return
        row.status = status
        row.finished_at = utcnow()
        text = message
        redactions = dict(report.redactions) if report.redacted else {}
        after: dict[str, Any] = {
            "source": report.source,
            "format": report.format,
            "status": status,
            "added": row.added,
            "skipped": row.skipped,
            "rejected": report.rejected,
            "redactions": redactions,
            "redacted": report.redacted,
        }
        if folded is not None:  # the run's totals; this pass's own counts beside them
            for k, v in folded.redactions.items():
                redactions[k] = redactions.get(k, 0) + int(v)
            after |= {
                "rejected": row.rejected,
                "redactions": redactions,
                "passes": folded.number,
                "pass_counts": {
                    "added": report.added,
                    "skipped": report.skipped,
                    "rejected": report.rejected,
                    "redactions": dict(report.redactions),
                },
            }
            text = (
                f"{readable.count(folded.number, 'import')} of this source this hour, folded "
                f"into this entry; the last: {message}"
            )
        row.message = text
        row.redactions = redactions
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
        first = first_line(fh)
    resolved = resolve_format(fmt, first, path.name)
    vocab = TraceVocabulary.from_taxonomy(tax) if tax is not None else TraceVocabulary()
    if skip_bad and rejects_path is None:
        rejects_path = path.with_name(path.name + ".rejects.jsonl")
    with path.open("rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    origin = {"bytes": path.stat().st_size, "sha256": digest}
    # a large canonical file is checked in parts, one per core (review.traces.importparts)
    parts = importparts.plan_parts(path, resolved, vocab, engine)
    items = (
        parts.first_items(str(path), skip_bad)
        if parts is not None
        else parse_binary(lambda: path.open("rb"), str(path), resolved, skip_bad, vocab)
    )
    return import_items(
        engine,
        actor,
        items,
        parts=parts,
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
    resolved = resolve_format(fmt, first_line(io.BytesIO(data)), name)
    vocab = TraceVocabulary.from_taxonomy(tax) if tax is not None else TraceVocabulary()

    return import_items(
        engine,
        actor,
        parse_binary(lambda: io.BytesIO(data), name, resolved, skip_bad, vocab),
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
