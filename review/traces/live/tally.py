"""The OTLP/HTTP receiver's request counts: what exporters sent and what was refused.

The receiver counts every request it answers in memory (:class:`Tally`, per HTTP status: the
requests, the spans of the accepted ones, the newest request's time) and adds what it counted
to the ``receiver_requests`` rows of its source every few seconds (:func:`flush`), so a busy
receiver writes a few rows per flush, not one per request. A flush the database refuses (busy,
unreachable) puts its counts back and the next flush adds them; a flush only ever adds, so two
receivers of one source add up. What a receiver counted after its last flush is lost when the
process is killed (it flushes once more when it stops): the figures are a monitor's, the spans
themselves are never counted here, only stored by staging.

:func:`read_counts` gives the figures per source for the Traces page (:class:`RequestCounts`:
accepted requests and their spans, refused requests by status, the last request's time).
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, case, insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from storage.db import read_session, run_write
from storage.models import ReceiverRequests, utcnow

__all__ = [
    "ACCEPTED",
    "Count",
    "RequestCounts",
    "Tally",
    "add_counts",
    "flush",
    "read_counts",
    "source_counts",
    "summarize",
]

#: The status of an accepted request (its spans stored; some may be refused in
#: ``partial_success``).
ACCEPTED = 200


@dataclass(slots=True)
class Count:
    """Requests answered with one status since the last flush."""

    requests: int = 0
    spans: int = 0
    last_at: dt.datetime | None = None

    def add(self, other: Count) -> None:
        self.requests += other.requests
        self.spans += other.spans
        if other.last_at is not None and (self.last_at is None or other.last_at > self.last_at):
            self.last_at = other.last_at


class Tally:
    """Counts in memory, safe to call from the receiver's worker threads and event loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[int, Count] = {}

    def count(self, status: int, spans: int = 0, at: dt.datetime | None = None) -> None:
        """One request answered with ``status`` (``spans``: the accepted request's spans)."""
        if not 100 <= status <= 599:
            raise ValueError(f"not an HTTP status: {status}")
        if spans < 0:
            raise ValueError("a request carries no negative number of spans")
        one = Count(1, spans, at or utcnow())
        with self._lock:
            self._counts.setdefault(status, Count()).add(one)

    def take(self) -> dict[int, Count]:
        """What was counted since the last take, the tally emptied."""
        with self._lock:
            taken, self._counts = self._counts, {}
        return taken

    def give_back(self, taken: Mapping[int, Count]) -> None:
        """Counts a flush could not store, added back for the next one."""
        with self._lock:
            for status, c in taken.items():
                self._counts.setdefault(status, Count()).add(c)

    def pending(self) -> dict[int, Count]:
        """A copy of what the next flush would add (tests, the receiver's log)."""
        with self._lock:
            return {k: Count(v.requests, v.spans, v.last_at) for k, v in self._counts.items()}


def add_counts(engine: Engine, source_id: int, counts: Mapping[int, Count]) -> None:
    """Add ``counts`` to the source's rows, in one transaction (insert or add)."""
    rows = [
        {
            "source_id": source_id,
            "status": status,
            "requests": c.requests,
            "spans": c.spans,
            "last_at": c.last_at,
        }
        for status, c in sorted(counts.items())
        if c.requests
    ]
    if not rows:
        return

    def work(s: Session) -> None:
        dialect = s.get_bind().dialect.name
        t = ReceiverRequests
        stmt: Any
        if dialect == "postgresql":
            stmt = postgresql.insert(t)
        elif dialect == "sqlite":
            stmt = sqlite.insert(t)
        else:  # pragma: no cover - the two supported databases
            stmt = insert(t)
        new = stmt.excluded
        stmt = stmt.on_conflict_do_update(
            index_elements=["source_id", "status"],
            set_={
                "requests": t.requests + new.requests,
                "spans": t.spans + new.spans,
                "last_at": case(
                    (t.last_at.is_(None), new.last_at),
                    (new.last_at > t.last_at, new.last_at),
                    else_=t.last_at,
                ),
            },
        )
        s.execute(stmt, rows)

    run_write(engine, work)


def flush(engine: Engine, source_id: int, tally: Tally) -> bool:
    """Add what ``tally`` counted to the database; on failure the counts go back into the
    tally (for the next flush) and the error propagates. Whether anything was written."""
    taken = tally.take()
    if not any(c.requests for c in taken.values()):
        return False
    try:
        add_counts(engine, source_id, taken)
    except BaseException:
        tally.give_back(taken)
        raise
    return True


@dataclass(frozen=True, slots=True)
class RequestCounts:
    """A receiver source's figures: requests accepted and their spans, refused requests by
    HTTP status, and the last request's time (None: no request counted yet)."""

    accepted: int = 0
    spans: int = 0
    refused: dict[int, int] = field(default_factory=dict)
    last_at: dt.datetime | None = None

    @property
    def requests(self) -> int:
        return self.accepted + sum(self.refused.values())


def summarize(rows: Sequence[tuple[int, int, int, dt.datetime | None]]) -> RequestCounts:
    """The figures of one source from its ``(status, requests, spans, last_at)`` rows."""
    accepted = spans = 0
    refused: dict[int, int] = {}
    last: dt.datetime | None = None
    for status, requests, n_spans, at in rows:
        if status == ACCEPTED:
            accepted += requests
            spans += n_spans
        elif requests:
            refused[status] = refused.get(status, 0) + requests
        if at is not None and (last is None or at > last):
            last = at
    return RequestCounts(accepted, spans, dict(sorted(refused.items())), last)


def source_counts(s: Session, source_ids: Sequence[int]) -> dict[int, RequestCounts]:
    """The figures of each of ``source_ids`` that has any, in the caller's session."""
    if not source_ids:
        return {}
    by_source: dict[int, list[tuple[int, int, int, dt.datetime | None]]] = {}
    for sid, status, requests, n_spans, at in s.execute(
        select(
            ReceiverRequests.source_id,
            ReceiverRequests.status,
            ReceiverRequests.requests,
            ReceiverRequests.spans,
            ReceiverRequests.last_at,
        ).where(ReceiverRequests.source_id.in_(list(source_ids)))
    ):
        by_source.setdefault(int(sid), []).append((int(status), int(requests), int(n_spans), at))
    return {sid: summarize(rows) for sid, rows in by_source.items()}


def read_counts(engine: Engine, source_id: int) -> RequestCounts:
    """One source's figures (all zero, ``last_at`` None, when nothing was counted)."""
    with read_session(engine) as s:
        return source_counts(s, [source_id]).get(source_id, RequestCounts())
