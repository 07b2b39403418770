"""Spans held until their trace is complete, then imported like a file's.

A live source delivers spans one request or page at a time, in no promised order: a root span
may come before its children (Phoenix stores spans as they end) or after them (an OTLP SDK
exports a root last). :func:`stage` stores a batch of spans durably in ``source_spans`` (one
transaction). A span is its trace id and span id (OTLP makes span ids unique within their
trace only); one the source sent before is a duplicate and is dropped, so a re-read or a
retried export adds nothing, but it must say the same as before (a digest of it is kept): a
span sent again with other content leaves its trace refused, naming the span, as nobody can
tell which of the two the trace had. :func:`assemble` then imports every trace that is ready:

* its root span (no parent) has arrived, and
* its newest span was received at least the source's grace period ago (children that end after
  their root, or that the other of two Phoenix servers commits later, still get in).

A ready trace's spans are joined into one OTLP/JSON export line and go through the OTLP parser
(:mod:`review.traces.formats.otlp`, the file importer's mapping) and
:func:`review.traces.importer.import_items` (redaction, restriction, rollup, audit log; the trace
id is unique, so importing it twice adds nothing), folded into the import log entry of the
source's earlier rounds of the hour (one entry per source and hour; every round in the audit
log). Its spans are then marked ``imported`` and
their payload dropped; the rows stay so that a span read again is known and the root span can
carry the audit verdict back. A span that arrives after its trace was imported is ``late``
(counted on the source, not imported). A trace whose spans the parser refuses is ``rejected``
with the reason; so is a trace whose root span has not arrived one hold period (an hour by
default) after its newest span.

Waiting spans hold what the source sent, before redaction (redaction applies to the trace the
spans make): for the grace period, or the hold period for a trace whose root is missing. Once
their trace is imported or refused their payload is dropped; a purge deletes the span rows of
the traces it deletes (:mod:`review.traces.retention`).

A crash anywhere leaves nothing half-done: staged spans are committed before a receiver
acknowledges them, an import writes whole traces, and a trace imported but not yet marked is
found stored by the next :func:`assemble` and marked then.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, Table, case, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from review.core.errors import InputError
from review.core.identity import Actor, Permission, require
from review.traces import importer
from review.traces.formats.otlp import iter_otlp_jsonl
from review.traces.model import TraceVocabulary
from storage.db import read_session, run_write
from storage.models import SourceSpan, TraceSource, utcnow
from storage.models import Trace as TraceRow

__all__ = [
    "HOLD_SECONDS",
    "AssembleResult",
    "StageResult",
    "StagedSpan",
    "assemble",
    "check_span",
    "stage",
    "waiting_spans",
]

#: how long a trace without its root span is held after its newest span before it is refused
HOLD_SECONDS = 3600.0
#: spans in one call of :func:`stage` (a receiver's request, a sync's page)
MAX_STAGE = 100_000
#: traces imported per round of :func:`assemble` (one import run each)
ASSEMBLE_BATCH = 2000
_CHUNK = 500


@dataclass(frozen=True, slots=True)
class StagedSpan:
    """One span as a source delivered it. ``entry`` is one OTLP/JSON ``resourceSpans`` entry
    holding this span alone (``{"resource": {...}, "scopeSpans": [{"spans": [span]}]}``, hex
    ids, OTLP/JSON attribute values), so that a trace's entries joined are an OTLP export."""

    trace_id: str
    span_id: str
    parent_id: str | None
    start: dt.datetime
    entry: dict[str, Any]
    #: why the source could not read this span (its attributes, say): its trace is refused
    #: with this reason when it is complete, instead of being imported without the span
    refused: str | None = None


@dataclass(slots=True)
class StageResult:
    added: int = 0
    duplicates: int = 0
    late: int = 0


@dataclass(slots=True)
class AssembleResult:
    imported: int = 0
    skipped: int = 0
    rejected: int = 0
    waiting_spans: int = 0
    #: trace id -> why it was refused (at most the first 100)
    reasons: dict[str, str] = field(default_factory=dict)


def _insert(s: Session, rows: list[dict[str, Any]]) -> None:
    """Insert span rows, a span id the source holds already (a concurrent writer) ignored."""
    if not rows:
        return
    # Core inserts on the table (not the ORM's bulk insert, which costs as much again per
    # row in bookkeeping for objects nobody loads)
    table: Table = SourceSpan.__table__  # type: ignore[assignment]
    dialect = s.get_bind().dialect.name
    stmt: Any
    if dialect == "postgresql":
        stmt = postgresql.insert(table).on_conflict_do_nothing(
            index_elements=["source_id", "trace_id", "span_id"]
        )
    elif dialect == "sqlite":
        stmt = sqlite.insert(table).on_conflict_do_nothing(
            index_elements=["source_id", "trace_id", "span_id"]
        )
    else:  # pragma: no cover - the two supported databases
        stmt = insert(table)
    s.connection().execute(stmt, rows)


def _chunks(values: Sequence[str]) -> Iterator[Sequence[str]]:
    for i in range(0, len(values), _CHUNK):
        yield values[i : i + _CHUNK]


def check_span(sp: StagedSpan, i: int) -> None:
    """Refuse a span whose ids, time or entry are malformed (InputError naming span i+1)."""

    def bad(what: str) -> InputError:
        return InputError(f"span {i + 1}: {what}")

    if not (len(sp.trace_id) == 32 and _is_hex(sp.trace_id)):
        raise bad(f"trace id {sp.trace_id[:40]!r} is not 32 lowercase hex digits")
    if not (len(sp.span_id) == 16 and _is_hex(sp.span_id)):
        raise bad(f"span id {sp.span_id[:40]!r} is not 16 lowercase hex digits")
    if sp.parent_id is not None and not (len(sp.parent_id) == 16 and _is_hex(sp.parent_id)):
        raise bad(f"parent span id {sp.parent_id[:40]!r} is not 16 lowercase hex digits")
    if sp.start.tzinfo is None:
        raise bad("start time has no time zone")
    if sp.refused is not None:
        if not sp.refused.strip():
            raise bad("a refused span needs its reason")
    elif not isinstance(sp.entry, dict) or not isinstance(sp.entry.get("scopeSpans"), list):
        raise bad("entry is not an OTLP/JSON resourceSpans entry")


def _entry_text(sp: StagedSpan) -> str:
    """The span's entry as compact JSON text (joined as it is into its trace's export line)."""
    try:
        return json.dumps(sp.entry, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InputError(f"span {sp.span_id}: its entry is not plain JSON ({exc})") from exc


def _is_hex(s: str) -> bool:
    return all(c in "0123456789abcdef" for c in s)


def _digest(sp: StagedSpan, text: str | None) -> str:
    """What a span said, in 32 hex digits: a span sent again must say the same."""
    said = text if sp.refused is None or text is not None else "refused: " + sp.refused
    return hashlib.blake2b((said or "").encode("utf-8"), digest_size=16).hexdigest()


#: why a trace is refused whose span came twice saying different things
CONFLICT = "span {span} was sent twice with different content (which one is the trace's?)"


def _known(
    s: Session, source_id: int, digests: dict[tuple[str, str], str], refused: dict[str, str]
) -> tuple[set[tuple[str, str]], set[str]]:
    """The spans of ``digests`` the source sent before, and the traces of ``digests`` one of
    whose spans the source imported or refused already (one read of the traces' spans serves
    both); ``refused`` gets the traces a waiting span of which said something else then."""
    known: set[tuple[str, str]] = set()
    done: set[str] = set()
    for part in _chunks(sorted({tid for tid, _ in digests})):
        for tid, sid, state, digest in s.execute(
            select(
                SourceSpan.trace_id, SourceSpan.span_id, SourceSpan.state, SourceSpan.digest
            ).where(SourceSpan.source_id == source_id, SourceSpan.trace_id.in_(part))
        ):
            if state in ("imported", "rejected"):
                done.add(tid)
            key = (tid, sid)
            if key not in digests:
                continue  # another span of the trace
            known.add(key)
            if state == "waiting" and digest is not None and digest != digests[key]:
                refused.setdefault(tid, CONFLICT.format(span=sid))
    return known, done


def _refuse_waiting(s: Session, source_id: int, refused: dict[str, str]) -> None:
    """Give the waiting spans of each trace of ``refused`` its reason (and drop their payload):
    the trace is refused with it once complete."""
    for tid, why in sorted(refused.items()):
        s.execute(
            update(SourceSpan)
            .where(
                SourceSpan.source_id == source_id,
                SourceSpan.trace_id == tid,
                SourceSpan.state == "waiting",
            )
            .values(reason=why, entry=None)
        )


def stage(engine: Engine, source_id: int, spans: Sequence[StagedSpan]) -> StageResult:
    """Store ``spans`` of source ``source_id`` in one transaction (durable when this returns).

    A span is identified by its trace id and span id (OTLP asks span ids to be unique within
    their trace only). One the source sent before, or twice in ``spans``, is a duplicate; a
    span whose trace was imported (or refused) already is stored as ``late``. A span sent
    again with other content while its trace waits makes the trace refused (its spans carry
    the reason), not the batch: the rest of the source goes on."""
    if len(spans) > MAX_STAGE:
        raise InputError(f"at most {MAX_STAGE:,} spans at once, got {len(spans):,}")
    unique: dict[tuple[str, str], StagedSpan] = {}
    texts: dict[tuple[str, str], str | None] = {}
    digests: dict[tuple[str, str], str] = {}
    conflicts: dict[str, str] = {}  # trace id -> why it is refused
    for i, sp in enumerate(spans):
        check_span(sp, i)
        key = (sp.trace_id, sp.span_id)
        text = _entry_text(sp) if sp.refused is None else None
        digest = _digest(sp, text)
        if key in unique:
            if digests[key] != digest:
                conflicts.setdefault(sp.trace_id, CONFLICT.format(span=sp.span_id))
            continue
        unique[key], texts[key], digests[key] = sp, text, digest
    result = StageResult(duplicates=len(spans) - len(unique))

    def work(s: Session) -> StageResult:
        res = StageResult(duplicates=result.duplicates)
        refused = dict(conflicts)
        src = s.get(TraceSource, source_id)
        if src is None:
            raise InputError(f"trace source {source_id} does not exist")
        known, done = _known(s, source_id, digests, refused)
        fresh = [sp for key, sp in unique.items() if key not in known]
        res.duplicates += len(known)
        tids = sorted({sp.trace_id for sp in fresh} - done)
        for part in _chunks(tids):  # a trace imported from a file or another source
            done.update(s.scalars(select(TraceRow.trace_id).where(TraceRow.trace_id.in_(part))))
        # a trace refused for a conflict: its spans waiting already carry the reason too
        _refuse_waiting(s, source_id, {t: why for t, why in refused.items() if t not in done})
        now = utcnow()
        rows = []
        for sp in fresh:
            key = (sp.trace_id, sp.span_id)
            late = sp.trace_id in done
            res.late += late
            why = refused.get(sp.trace_id) or (sp.refused[:2000] if sp.refused else None)
            rows.append(
                {
                    "source_id": source_id,
                    "trace_id": sp.trace_id,
                    "span_id": sp.span_id,
                    "parent_id": sp.parent_id,
                    "start_at": sp.start,
                    "received_at": now,
                    "state": "late" if late else "waiting",
                    "entry": None if late or why else texts[key],
                    "digest": digests[key],
                    "reason": "its trace was imported or refused before this span arrived"
                    if late
                    else why,
                }
            )
        _insert(s, rows)
        res.added = len(rows) - res.late
        newest = max((sp.start for sp in fresh), default=None)
        values: dict[str, Any] = {
            "spans_read": TraceSource.spans_read + len(rows),
            "late_spans": TraceSource.late_spans + res.late,
        }
        if newest is not None:
            values["newest_span_at"] = func.coalesce(
                case(
                    (TraceSource.newest_span_at > newest, TraceSource.newest_span_at),
                    else_=newest,
                ),
                newest,
            )
        s.execute(update(TraceSource).where(TraceSource.id == source_id).values(**values))
        return res

    return run_write(engine, work)


def waiting_spans(engine: Engine, source_id: int) -> int:
    with read_session(engine) as s:
        return int(
            s.scalar(
                select(func.count()).where(
                    SourceSpan.source_id == source_id, SourceSpan.state == "waiting"
                )
            )
            or 0
        )


def _waiting_traces(
    s: Session, source_id: int, cutoff: dt.datetime, limit: int, *, rooted: bool
) -> list[str]:
    """Waiting traces whose newest span was received by ``cutoff``: with their root span
    (``rooted``, oldest first: ready to import), or without one (held past the hold period)."""
    has_root = func.sum(case((SourceSpan.parent_id.is_(None), 1), else_=0))
    return list(
        s.scalars(
            select(SourceSpan.trace_id)
            .where(SourceSpan.source_id == source_id, SourceSpan.state == "waiting")
            .group_by(SourceSpan.trace_id)
            .having(
                has_root > 0 if rooted else has_root == 0,
                func.max(SourceSpan.received_at) <= cutoff,
            )
            .order_by(func.min(SourceSpan.id))
            .limit(limit)
        )
    )


def _mark(
    engine: Engine,
    source_id: int,
    span_pks: Sequence[int],
    state: str,
    reason: str | None = None,
    counts: dict[str, int] | None = None,
) -> None:
    def work(s: Session) -> None:
        for i in range(0, len(span_pks), _CHUNK):
            part = span_pks[i : i + _CHUNK]
            s.execute(
                update(SourceSpan)
                .where(SourceSpan.id.in_(part), SourceSpan.state == "waiting")
                .values(state=state, entry=None, reason=reason)
            )
        if counts and any(counts.values()):
            s.execute(
                update(TraceSource)
                .where(TraceSource.id == source_id)
                .values(**{name: getattr(TraceSource, name) + n for name, n in counts.items() if n})
            )

    if span_pks or (counts and any(counts.values())):
        run_write(engine, work)


def _hold_text(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        n = int(seconds // 3600)
        return f"{n} hour{'s' if n != 1 else ''}"
    if seconds >= 60 and seconds % 60 == 0:
        n = int(seconds // 60)
        return f"{n} minute{'s' if n != 1 else ''}"
    return f"{seconds:g} seconds"


def assemble(
    engine: Engine,
    actor: Actor,
    source_id: int,
    *,
    grace_seconds: float | None = None,
    hold_seconds: float = HOLD_SECONDS,
    now: dt.datetime | None = None,
    vocab: TraceVocabulary | None = None,
    batch: int = ASSEMBLE_BATCH,
) -> AssembleResult:
    """Import the source's ready traces (module docs); refuse its rootless traces held longer
    than ``hold_seconds``. ``grace_seconds`` defaults to the source's own."""
    require(actor, Permission.import_traces)  # before a rootless trace is marked refused
    at = now or utcnow()
    with read_session(engine) as s:
        src = s.get(TraceSource, source_id)
        if src is None:
            raise InputError(f"trace source {source_id} does not exist")
        name, kind = src.name, src.kind
        grace = src.grace_seconds if grace_seconds is None else grace_seconds
    result = AssembleResult()
    voc = vocab or TraceVocabulary()

    # rootless traces held too long
    hold_cutoff = at - dt.timedelta(seconds=hold_seconds)
    while True:
        with read_session(engine) as s:
            lost = _waiting_traces(s, source_id, hold_cutoff, batch, rooted=False)
            pks = _span_pks(s, source_id, lost)
        if not lost:
            break
        why = (
            f"no root span arrived within {_hold_text(hold_seconds)} of the trace's newest "
            "span (the root may have been dropped by the sender or its exporter)"
        )
        _mark(engine, source_id, pks, "rejected", why, {"traces_rejected": len(lost)})
        result.rejected += len(lost)
        for tid in lost[: max(0, 100 - len(result.reasons))]:
            result.reasons[tid] = why
        if len(lost) < batch:
            break

    cutoff = at - dt.timedelta(seconds=grace)
    while True:
        with read_session(engine) as s:
            ready = _waiting_traces(s, source_id, cutoff, batch, rooted=True)
            if not ready:
                break
            unread: dict[str, str] = {}
            spans = _waiting_entries(s, source_id, ready, unread)
            stored = _stored(s, ready)
            imported_before = _imported_before(s, source_id, ready)
        for tid, why in unread.items():
            _mark(
                engine,
                source_id,
                [pk for pk, _ in spans[tid]],
                "rejected",
                why[:2000],
                {"traces_rejected": 1},
            )
            result.rejected += 1
            if len(result.reasons) < 100:
                result.reasons[tid] = why
        todo = [t for t in ready if t not in unread]
        _import_round(
            engine, actor, source_id, name, kind, voc, todo, spans, stored, imported_before, result
        )
        if len(ready) < batch:
            break
    result.waiting_spans = waiting_spans(engine, source_id)
    return result


def _span_pks(s: Session, source_id: int, tids: Sequence[str]) -> list[int]:
    out: list[int] = []
    for part in _chunks(list(tids)):
        out.extend(
            s.scalars(
                select(SourceSpan.id).where(
                    SourceSpan.source_id == source_id,
                    SourceSpan.state == "waiting",
                    SourceSpan.trace_id.in_(part),
                )
            )
        )
    return out


def _waiting_entries(
    s: Session, source_id: int, tids: Sequence[str], refused: dict[str, str]
) -> dict[str, list[tuple[int, str]]]:
    """The waiting spans' entries (JSON text) of each trace; ``refused`` gets the reason of a
    trace one of whose spans the source could not read."""
    out: dict[str, list[tuple[int, str]]] = {t: [] for t in tids}
    for part in _chunks(list(tids)):
        for pk, tid, entry, reason in s.execute(
            select(SourceSpan.id, SourceSpan.trace_id, SourceSpan.entry, SourceSpan.reason)
            .where(
                SourceSpan.source_id == source_id,
                SourceSpan.state == "waiting",
                SourceSpan.trace_id.in_(part),
            )
            .order_by(SourceSpan.start_at, SourceSpan.id)
        ):
            out[tid].append((int(pk), entry or "{}"))
            if reason is not None:
                refused.setdefault(tid, str(reason))
    return out


def _stored(s: Session, tids: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for part in _chunks(list(tids)):
        found.update(s.scalars(select(TraceRow.trace_id).where(TraceRow.trace_id.in_(part))))
    return found


def _imported_before(s: Session, source_id: int, tids: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for part in _chunks(list(tids)):
        found.update(
            s.scalars(
                select(SourceSpan.trace_id)
                .where(
                    SourceSpan.source_id == source_id,
                    SourceSpan.trace_id.in_(part),
                    SourceSpan.state == "imported",
                )
                .distinct()
            )
        )
    return found


def _import_round(
    engine: Engine,
    actor: Actor,
    source_id: int,
    name: str,
    kind: str,
    vocab: TraceVocabulary,
    ready: list[str],
    spans: dict[str, list[tuple[int, str]]],
    stored: set[str],
    imported_before: set[str],
    result: AssembleResult,
) -> None:
    # spans of a trace this source imported already arrived late; a trace stored but never
    # marked (a crash between import and marking, or a file import) is complete: mark it
    late = [t for t in ready if t in stored and t in imported_before]
    _mark(
        engine,
        source_id,
        [pk for t in late for pk, _ in spans[t]],
        "late",
        "its trace was imported before this span arrived",
        {"late_spans": sum(len(spans[t]) for t in late)},
    )
    todo = [t for t in ready if t not in late]
    if not todo:
        return
    # the entries are JSON text already: joined, not parsed and encoded again
    lines = ['{"resourceSpans":[' + ",".join(e for _, e in spans[t]) + "]}\n" for t in todo]
    label = f"live source {name} ({kind})"
    with tempfile.TemporaryDirectory(prefix="wb-live-") as tmp:
        rejects = Path(tmp) / "rejects.jsonl"
        report = importer.import_items(
            engine,
            actor,
            iter_otlp_jsonl(lines, label, skip_bad=True, vocab=vocab),
            source=label,
            fmt="otlp",
            skip_bad=True,
            rejects_path=rejects,
            fold=True,  # one import log entry per source and hour, not one per pass
        )
        refused: dict[str, str] = {}
        if rejects.exists():
            with rejects.open(encoding="utf-8") as fh:
                for raw in fh:
                    rec = json.loads(raw)
                    line = int(rec.get("line") or 0)
                    if 1 <= line <= len(todo):
                        refused[todo[line - 1]] = str(rec.get("reason") or "refused")
    ok = [t for t in todo if t not in refused]
    _mark(
        engine,
        source_id,
        [pk for t in ok for pk, _ in spans[t]],
        "imported",
        None,
        {"traces_added": report.added},
    )
    for tid, why in refused.items():
        _mark(
            engine,
            source_id,
            [pk for pk, _ in spans[tid]],
            "rejected",
            why[:2000],
            {"traces_rejected": 1},
        )
        if len(result.reasons) < 100:
            result.reasons[tid] = why
    result.imported += report.added
    result.skipped += report.skipped
    result.rejected += len(refused)
