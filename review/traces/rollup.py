"""The daily rollup of the monitoring signals (table ``trace_rollup``).

Weekly monitoring reads counts per week, per segment and per decision. Computed from the
traces table at a million traces that takes seconds (segments inside the ``versions`` JSON
cannot be indexed), so the counts are kept per UTC day in a small table instead, updated in
the same transaction that writes or deletes the traces:

- ``add_counts`` is called by the trace import with the counts (``aggregate``) of each batch
  it inserts;
- ``subtract_ids`` is called by the purge with the ids it is about to delete;
- ``rebuild`` recomputes everything from the traces (``workbench rebuild-rollup``), for a
  database whose traces were written some other way.

Each row counts, for one (segment value, day, decision), the traces and how many of them
carry each flag in ``FLAGS``. The segment is ``("", "")`` for all traces, else one of
``DIMENSIONS`` and a value of it (traces without a value for a segment are not counted
under it). The no-answer count is not stored: which decisions answer is a taxonomy
setting, so it is summed from the decision column when read.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any, Final

from sqlalchemy import Engine, Table, delete, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from review.traces import tracerows
from review.traces.model import NEGATIVE_FEEDBACK
from review.traces.stamp import added_since, traces_stamp
from storage import population_groups
from storage.db import one_of, read_session, run_write
from storage.models import Trace as TraceRow
from storage.models import TraceRollup

__all__ = [
    "ALL",
    "DIMENSIONS",
    "FLAGS",
    "Key",
    "add_counts",
    "add_ids",
    "aggregate",
    "decision_total",
    "forget_days",
    "rebuild",
    "row_flags",
    "segment_values",
    "stored_total",
    "subtract_ids",
    "utc_day",
    "visible_total",
]

#: The reason code of an answer given with a caveat (kept equal to review.traces.browse).
CAVEAT_REASON: Final = "support_below_threshold"

#: Segments: trace columns, or ``version.<name>`` for one entry of ``versions``.
DIMENSIONS: Final[dict[str, str]] = {
    "version.index": "Index version",
    "policy_version": "Policy version",
    "model_version": "Model version",
    "version.prompt": "Prompt version",
    "version.embedding": "Embedding model",
    "version.reranker": "Reranker",
    "ranking_mode": "Ranking mode",
    "language": "Language",
    "customer_tier": "Customer tier",
    "document_type": "Document type",
    "user_role": "User role",
}

#: The segment of the all-traces rows.
ALL: Final = ""

#: Counted flags, besides the number of traces.
FLAGS: Final[tuple[str, ...]] = (
    "caveat",
    "empty_retrieval",
    "ungrounded",
    "negative_feedback",
    "missing_reason",
    "reformulation_logged",
    "reformulated",
    "citation_logged",
    "citation_opened",
)
_COUNTS: Final = ("traces", *FLAGS)
_VALUE_LEN: Final = 200

#: The trace columns the rollup reads.
_SOURCE = (
    TraceRow.id,
    TraceRow.at,
    TraceRow.decision,
    TraceRow.reason_code,
    TraceRow.hits_after_filter,
    TraceRow.ungrounded,
    TraceRow.feedback,
    TraceRow.reformulated,
    TraceRow.citation_opened,
    TraceRow.versions,
    TraceRow.policy_version,
    TraceRow.model_version,
    TraceRow.ranking_mode,
    TraceRow.language,
    TraceRow.customer_tier,
    TraceRow.document_type,
    TraceRow.user_role,
)

Key = tuple[str, str, dt.date, str]


def utc_day(at: dt.datetime) -> dt.date:
    if at.tzinfo is not None:
        at = at.astimezone(dt.UTC)
    return at.date()


def row_flags(row: Mapping[str, Any]) -> tuple[int, ...]:
    decision = row.get("decision")
    reason = row.get("reason_code")
    return (
        1,
        int(decision == "answer" and reason == CAVEAT_REASON),
        int(row.get("hits_after_filter") == 0),
        int(row.get("ungrounded") is True),
        int(row.get("feedback") in NEGATIVE_FEEDBACK),
        int(decision is None or (decision != "answer" and reason is None)),
        int(row.get("reformulated") is not None),
        int(row.get("reformulated") is True),
        int(row.get("citation_opened") is not None),
        int(row.get("citation_opened") is True),
    )


def segment_values(row: Mapping[str, Any]) -> Iterable[tuple[str, str]]:
    yield ALL, ALL
    versions = row.get("versions") or {}
    for dim in DIMENSIONS:
        if dim.startswith("version."):
            v = versions.get(dim.split(".", 1)[1]) if isinstance(versions, dict) else None
        else:
            v = row.get(dim)
        if v is not None:
            yield dim, str(v)[:_VALUE_LEN]


def aggregate(rows: Iterable[Mapping[str, Any]]) -> dict[Key, list[int]]:
    """Rollup counts of trace rows (dicts with the trace columns): key -> counts in the
    order traces, *FLAGS. Rows alike in day, decision, flags and segment values (most of a
    batch) are counted once, then added to each of their keys."""
    alike: dict[tuple[dt.date, str, tuple[int, ...], tuple[tuple[str, str], ...]], int] = {}
    for row in rows:
        sig = (
            utc_day(row["at"]),
            row.get("decision") or "",
            row_flags(row),
            tuple(segment_values(row)),
        )
        alike[sig] = alike.get(sig, 0) + 1
    out: dict[Key, list[int]] = {}
    for (day, decision, flags, segments), n in alike.items():
        for dim, value in segments:
            key = (dim, value, day, decision)
            got = out.get(key)
            if got is None:
                out[key] = [f * n for f in flags]
            else:
                for i, f in enumerate(flags):
                    got[i] += f * n
    return out


def _upsert(s: Session, counts: Mapping[Key, Sequence[int]], sign: int) -> None:
    if not counts:
        return
    params = [
        {
            "dim": dim,
            "value": value,
            "day": day,
            "decision": decision,
            **{c: sign * n for c, n in zip(_COUNTS, ns, strict=True)},
        }
        for (dim, value, day, decision), ns in counts.items()
    ]
    table: Table = TraceRollup.__table__  # type: ignore[assignment]
    dialect = s.get_bind().dialect.name
    if dialect == "postgresql":
        stmt: Any = postgresql.insert(table)
    else:
        stmt = sqlite.insert(table)
    stmt = stmt.on_conflict_do_update(
        index_elements=["dim", "value", "day", "decision"],
        set_={c: getattr(table.c, c) + getattr(stmt.excluded, c) for c in _COUNTS},
    )
    s.connection().execute(stmt, params)
    if sign < 0:
        s.execute(delete(TraceRollup).where(TraceRollup.traces <= 0))


def add_counts(s: Session, counts: Mapping[Key, Sequence[int]]) -> None:
    """Count newly inserted trace rows, given as their :func:`aggregate` (in the caller's
    transaction)."""
    _upsert(s, counts, +1)


def _fetch(s: Session, ids: Sequence[int]) -> list[dict[str, Any]]:
    rows = s.execute(select(*_SOURCE).where(one_of(s, TraceRow.id, ids)))
    return [dict(r._mapping) for r in rows]


def add_ids(s: Session, ids: Sequence[int]) -> None:
    """Count stored traces again (the purge's kept traces of a dropped month)."""
    if ids:
        _upsert(s, aggregate(_fetch(s, ids)), +1)


def forget_days(s: Session, first: dt.date, end: dt.date) -> None:
    """Remove the counts of the UTC days ``first <= day < end`` (the purge of whole months,
    whose traces go with their partition)."""
    s.execute(delete(TraceRollup).where(TraceRollup.day >= first, TraceRollup.day < end))


def subtract_ids(s: Session, ids: Sequence[int]) -> None:
    """Uncount traces about to be deleted (in the caller's transaction, before the delete)."""
    if ids:
        _upsert(s, aggregate(_fetch(s, ids)), -1)


#: reads of the traces a rebuild makes outside the write lock before it reads them under it
REBUILD_READS: Final = 3


def _count_from(
    s: Session, after: int, batch: int, progress: Callable[[int], None] | None
) -> tuple[dict[Key, list[int]], int]:
    """The counts of the traces whose id is above ``after``, read ``batch`` at a time; and
    how many were read. ``progress`` gets the number read so far after each batch."""
    total: dict[Key, list[int]] = {}
    seen = 0
    last = after
    while True:
        rows = [
            dict(r._mapping)
            for r in s.execute(
                select(*_SOURCE).where(TraceRow.id > last).order_by(TraceRow.id).limit(batch)
            )
        ]
        if not rows:
            return total, seen
        last = int(rows[-1]["id"])
        seen += len(rows)
        if progress is not None:
            progress(seen)
        _merge(total, aggregate(rows))


def _merge(total: dict[Key, list[int]], more: Mapping[Key, Sequence[int]]) -> None:
    for key, ns in more.items():
        got = total.get(key)
        if got is None:
            total[key] = list(ns)
        else:
            for i, n in enumerate(ns):
                got[i] += n


def _replace(s: Session, total: Mapping[Key, Sequence[int]]) -> None:
    s.execute(delete(TraceRollup))
    _upsert(s, total, +1)


def _write_counted(
    counted: Mapping[Key, Sequence[int]],
    seen: int,
    then: Sequence[int],
    batch: int,
    s: Session,
) -> int | None:
    """Replace the rollup with ``counted`` (``seen`` traces, read when the traces stamp was
    ``then``), plus the traces added since; None, writing nothing, when any was deleted."""
    tracerows.lock_trace_inserts(s.connection())
    now = traces_stamp(s)
    total = {k: list(v) for k, v in counted.items()}
    added = 0
    if now != list(then):
        if not added_since(s, then, now):
            return None
        more, added = _count_from(s, then[1], batch, None)
        _merge(total, more)
    _replace(s, total)
    return seen + added


def rebuild(
    engine: Engine, batch: int = 20_000, progress: Callable[[int], None] | None = None
) -> int:
    """Recompute the rollup from the traces; returns the traces counted. ``progress`` gets
    the number of traces read so far (after each batch).

    The traces are read from one snapshot without holding a write lock (on SQLite the
    database's only one: a rebuild of a million traces held it for a minute, and the job's
    own heartbeat, every import and every save waited for it), then the rollup is replaced in
    one short write transaction that takes the trace writers' lock and reads the traces stamp
    (review.traces.stamp) again: traces added since the snapshot are counted in it too, and
    if any was deleted meanwhile (a purge) the traces are read again, :data:`REBUILD_READS`
    times at most, then under the write lock as a last resort. The old rollup stays whole
    until the new one is written."""

    for _ in range(REBUILD_READS):
        with read_session(engine) as s:
            if engine.dialect.name == "postgresql":  # one snapshot for every batch
                s.connection(execution_options={"isolation_level": "REPEATABLE READ"})
            then = traces_stamp(s)
            counted, seen = _count_from(s, 0, batch, progress)
        done = run_write(engine, partial(_write_counted, counted, seen, then, batch))
        if done is not None:
            if progress is not None:
                progress(done)
            return done

    def under_lock(s: Session) -> int:
        tracerows.lock_trace_inserts(s.connection())
        total, n = _count_from(s, 0, batch, progress)
        _replace(s, total)
        return n

    return run_write(engine, under_lock)


def stored_total(engine: Engine) -> int:
    """Traces counted in the rollup (equals the traces table when in step)."""
    with read_session(engine) as s:
        return int(
            s.scalar(
                select(func.coalesce(func.sum(TraceRollup.traces), 0)).where(TraceRollup.dim == ALL)
            )
            or 0
        )


def visible_total(s: Session, cleared: bool) -> int:
    """How many traces there are, from the counter the triggers keep
    (storage.population_groups), less the restricted ones (a few index entries) for a user
    without clearance (``cleared`` False): no read of every trace."""
    total = population_groups.trace_count(s)
    if cleared:
        return total
    hidden = s.scalar(select(func.count()).where(TraceRow.restricted.is_(True)))
    return total - int(hidden or 0)


def decision_total(s: Session, decisions: Sequence[str]) -> int | None:
    """How many traces have one of ``decisions`` ("" for none logged), read from the
    rollup's rows of all traces instead of the traces (a decision holds a fifth of a million
    traces: 1.1 s to count on SQLite); None when the rollup is out of step with the traces
    table (its total is not the table's count), for the caller to count the table."""
    total = func.coalesce(func.sum(TraceRollup.traces), 0)
    stored = int(s.scalar(select(total).where(TraceRollup.dim == ALL)) or 0)
    # the number of traces from the counter the triggers keep (storage.population_groups)
    if stored != population_groups.trace_count(s):
        return None
    picked = TraceRollup.decision.in_(list(decisions))
    return int(s.scalar(select(total).where(TraceRollup.dim == ALL, picked)) or 0)
