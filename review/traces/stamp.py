"""The stamp of the traces: a few cheap look-ups that change whenever a trace is added or
deleted, so a figure counted from the traces (an audit plan's population, the monitoring
rollup) can tell whether it still holds, or holds but for the traces added since."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from storage import population_groups
from storage.models import Counter, TraceImport
from storage.models import Trace as Trace

__all__ = ["PURGE_COUNTER", "added_since", "key_of", "traces_stamp"]

#: the counter every purge increments as it starts (its run number, review.traces.retention)
PURGE_COUNTER = "trace_purge"


def traces_stamp(s: Session) -> list[int]:
    """(rows, highest id, newest import, purges, the sampling key of the trace with the highest
    id) of the traces: cheap look-ups. Traces are never edited, and every import adds an import
    row (so a reused id still moves the stamp); while the stamp stays the same every
    population is the one counted before. Plans counted before the last two were part of it
    hold the first three."""
    # the number of traces from the counter the triggers of storage.population_groups keep
    # (a count of the table grows with it)
    n = population_groups.trace_count(s)
    top: Any = s.scalar(select(func.coalesce(func.max(Trace.id), 0)))
    newest_import = s.scalar(select(func.coalesce(func.max(TraceImport.id), 0)))
    purges = s.scalar(select(Counter.value).where(Counter.name == PURGE_COUNTER))
    return [int(n), int(top), int(newest_import or 0), int(purges or 0), key_of(s, int(top))]


def key_of(s: Session, pk: int) -> int:
    """The sampling key of the trace ``pk`` (0 when there is none): which trace holds an id."""
    return int(s.scalar(select(Trace.sample_key).where(Trace.id == pk)) or 0)


def added_since(s: Session, then: Sequence[int], now: Sequence[int]) -> bool:
    """Whether the traces only grew since the stamp ``then``: no purge ran, the trace that
    held the highest id then still holds it (ids are reused only once the highest is
    deleted), and the rows added are exactly the traces after it (none was deleted)."""
    if len(then) != 5 or now[3] != then[3] or now[0] < then[0] or now[1] < then[1]:
        return False
    if key_of(s, then[1]) != then[4]:
        return False
    newer = s.scalar(select(func.count()).select_from(Trace).where(Trace.id > then[1]))
    return int(newer or 0) == now[0] - then[0]
