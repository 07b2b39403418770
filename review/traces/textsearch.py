"""A text search of the traces on PostgreSQL whose cost does not grow with the table.

The search means what it always has (an exact trace id, or a substring of the question or
the answer in any case: ``ILIKE '%text%'``). The ``pg_trgm`` GIN indexes of migration 0019
find the traces that hold a rare word at once, but for a word that most traces hold they
collect every one of them, each read again to check it, before the newest 25 can be picked
(4.3 s for "refund", in 70% of 1M traces, and in step with the table). Walking the time index
newest first and matching each trace's own text finds a page of a frequent word after a few
dozen traces, but reads the whole table for a rare one. Left to itself the planner picks
between the two from its estimate of how many traces hold the text, taken from a sample of
about a hundred texts when the statistics were last gathered: close when the texts repeat,
as in the synthetic scale data, but a word that has become common since (a new product's
name in every trace of the last days: ``ANALYZE`` runs after a tenth of the table has
changed) is estimated at a handful and collected match by match. So a page is found in two
steps, and the estimate only chooses how far the first one goes:

1. **The walk** (:func:`each_row`, :func:`within`, :func:`walking`): the newest traces in
   time order, each matched on its own text, stopping at the page: :data:`WINDOW` of them
   (more for a deep page, :func:`window_size`) when the planner expects more than
   :data:`FEW` matches (:func:`estimate`), else :data:`GUARD`, which a word common among the
   newest traces fills whatever the statistics say. When the walk holds the page it is the
   page (the traces before them in the order are all among them), at a cost of at most that
   many traces, at any size of table.
2. **The indexes** (:func:`indexed`, :func:`indexes_only`): otherwise the word is rare among
   the newest traces, and the trigram indexes collect its matches and sort them. The planner
   is held to index bitmaps here: a rare word it estimated common would read the table.
   Their cost is the word's matches: few for a rare word, but a word in 0.4% of 10M traces
   has 40,000, and one that is rare among the newest traces and common among older ones has
   all its old matches collected (the walk cannot find those without reading all the newest
   traces first).

The count the Traces page shows is exact up to a limit (:func:`count_upto`): the matches
among the newest :data:`WINDOW` traces (a frequent word passes the limit there and stops),
then those older than them from the indexes, which stop reading traces once the limit is
passed but read the index entries of every match; for a text expected rare whose short walk
finds fewer than a page (:data:`GUARD_MATCHES`), the indexes alone. The page says "more than
N" beyond the limit.

Who sees what is not decided here: the callers pass the conditions of the other filters,
which hold the clearance rule (review.core.clearance, through review.traces.browse).
Texts of fewer than 3 characters have no trigram and are not served here
(:func:`walkable`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, and_, func, or_, select
from sqlalchemy import text as sql_text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from review.core.errors import InputError
from storage.db import planner_off
from storage.models import Trace as TraceRow

__all__ = [
    "FEW",
    "GUARD",
    "GUARD_MATCHES",
    "SHORT_SEARCH_SECONDS",
    "WINDOW",
    "Edge",
    "beyond",
    "bounded",
    "count_upto",
    "each_row",
    "edge_of",
    "estimate",
    "indexed",
    "indexes_only",
    "like_pattern",
    "page",
    "walkable",
    "walking",
    "window_size",
    "within",
]

T = TypeVar("T")

#: the newest traces a search walks, matching each one's own text, before it asks the indexes
#: (a trace walked costs about what a match collected from the indexes costs: at 1M traces on
#: a busy machine, 20,000 traces walked took 0.15 s, the 725,000 matches of "refund" 4.3 s)
WINDOW = 5_000
#: a text the planner expects in at most this many traces (with the other filters) skips the
#: long walk: a short one (:data:`GUARD`), then the indexes
FEW = 5_000
#: the short walk of a text expected to be rare: a word common among the newest traces that
#: the planner's statistics, taken before it became common, do not know (a new product's
#: name, a trending question) fills a page here instead of having every match collected
GUARD = 1_000
#: matches in the short walk that make the count of a text expected rare walk on (a page)
GUARD_MATCHES = 25
#: a deep page walks at least this many traces per match it needs (so a word in a quarter
#: of the traces or more still finds it by walking)
ROWS_PER_MATCH = 4
#: the shortest text the trigram indexes serve
MIN_CHARS = 3


def like_pattern(text: str) -> str:
    """``%text%`` with LIKE's wildcards and the escape character taken literally (escape
    ``\\``)."""
    esc = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{esc}%"


def walkable(text: str) -> bool:
    """Whether this module serves ``text`` (stripped): 3 characters or more, no NUL (which
    PostgreSQL text cannot hold: nothing matches it)."""
    return len(text) >= MIN_CHARS and "\x00" not in text


#: a search these indexes cannot serve (fewer than :data:`MIN_CHARS` characters) reads each
#: trace it looks at; on PostgreSQL each of its statements is cancelled after this many
#: seconds and the search says so, within the second a person waits for an answer (a pair
#: of letters in no trace read all ten million traces for minutes). A pair of letters that
#: many traces hold finds its page among the newest traces at once (0.01 s at 10M)
SHORT_SEARCH_SECONDS = 0.5


@contextmanager
def bounded(s: Session, text: str) -> Iterator[None]:
    """The statements of a search of ``text`` in ``s``'s transaction: on PostgreSQL, when
    ``text`` is too short for the indexes (not :func:`walkable`, not empty), each may run
    :data:`SHORT_SEARCH_SECONDS` at most, and reads no index bitmap (for the rest of the
    transaction, as the bound); one that runs longer is an InputError saying what to do.
    Anything else runs as it is."""
    text = text.strip()
    if not text or walkable(text) or s.get_bind().dialect.name != "postgresql":
        yield
        return
    bound_ms = max(1, int(SHORT_SEARCH_SECONDS * 1000))
    s.execute(sql_text(f"SET LOCAL statement_timeout = {bound_ms}"))
    # no bitmap scans: a trigram index cannot serve the text, and the planner would read the
    # whole of it, which does not stop when the statement is cancelled (8 s at ten million
    # traces, whatever the bound); a scan of the rows stops at once
    s.execute(sql_text("SET LOCAL enable_bitmapscan = off"))
    try:
        yield
    except OperationalError as exc:
        if getattr(exc.orig, "sqlstate", None) != "57014":  # query_canceled
            raise
        raise InputError(
            f"text search: a text of fewer than {MIN_CHARS} characters is matched by "
            f"reading every trace, which took more than {SHORT_SEARCH_SECONDS} s here and "
            f"was stopped; type {MIN_CHARS} characters or more, or narrow the dates or the "
            "other filters"
        ) from None


def indexed(text: str) -> ColumnElement[bool]:
    """The search as the indexes serve it: the trace id's B-tree, the trigram GIN indexes."""
    like = like_pattern(text)
    return or_(
        TraceRow.trace_id == text,
        TraceRow.query.ilike(like, escape="\\"),
        TraceRow.answer_text.ilike(like, escape="\\"),
    )


def each_row(text: str) -> ColumnElement[bool]:
    """The same condition on each trace's own text: ``|| ''`` leaves the text as it is and
    keeps the planner from the trigram indexes, so a walk matches the traces it reads."""
    like = like_pattern(text)
    return or_(
        TraceRow.trace_id == text,
        (TraceRow.query + "").ilike(like, escape="\\"),
        (TraceRow.answer_text + "").ilike(like, escape="\\"),
    )


@dataclass(frozen=True)
class Edge:
    """The last trace of a window in the order (time, then id), as values: the planner
    sees the range it bounds (a subquery it would have to guess)."""

    at: dt.datetime
    id: int


def window_size(need: int) -> int:
    """The traces a walk reads when the page needs ``need`` matches."""
    return max(WINDOW, need * ROWS_PER_MATCH)


def edge_of(
    s: Session, newest: bool, size: int, span: list[ColumnElement[bool]] | None = None
) -> Edge | None:
    """The ``size``-th trace newest (or oldest) first, among those in ``span`` (conditions on
    the time alone, which the time index serves: a search of last March walks last March);
    None: there are fewer."""
    order = [TraceRow.at.desc(), TraceRow.id.desc()] if newest else [TraceRow.at.asc(), TraceRow.id]
    first = select(TraceRow.at, TraceRow.id).where(*(span or [])).order_by(*order)
    row = s.execute(first.offset(size - 1).limit(1)).first()
    return None if row is None else Edge(row[0], int(row[1]))


def within(edge: Edge, newest: bool) -> ColumnElement[bool]:
    """The traces from the start of the order up to ``edge``, itself included."""
    if newest:
        return and_(TraceRow.at >= edge.at, or_(TraceRow.at > edge.at, TraceRow.id >= edge.id))
    return and_(TraceRow.at <= edge.at, or_(TraceRow.at < edge.at, TraceRow.id <= edge.id))


def beyond(edge: Edge, newest: bool) -> ColumnElement[bool]:
    """The traces after ``edge`` in the order (the rest of the table)."""
    if newest:
        return or_(TraceRow.at < edge.at, and_(TraceRow.at == edge.at, TraceRow.id < edge.id))
    return or_(TraceRow.at > edge.at, and_(TraceRow.at == edge.at, TraceRow.id > edge.id))


def indexes_only(s: Session) -> Any:
    """Within the block the planner reads the table only through index bitmaps (no scan
    of the table, no walk of an index in order), for a search already known to be rare."""
    return planner_off(s, "enable_seqscan", "enable_indexscan")


def walking(s: Session) -> Any:
    """Within the block the planner keeps to the order of the time index (no sort of every
    row of the window): it cannot tell how many traces a text matches on their own text
    (``each_row``, estimated at a handful), and would otherwise read the whole window and
    sort it instead of stopping at the page (150 ms instead of 0.4 ms for a frequent word
    at 1M traces)."""
    return planner_off(s, "enable_sort")


def page(
    s: Session,
    base: list[ColumnElement[bool]],
    text: str,
    newest: bool,
    number: int,
    size: int,
    fetch: Callable[[list[ColumnElement[bool]]], list[T]],
    span: list[ColumnElement[bool]] | None = None,
) -> list[T]:
    """Page ``number`` (of ``size`` rows, newest or oldest first) of the traces that match
    ``base`` (the other filters, clearance and ``span`` included) and ``text``
    (:func:`walkable`); ``fetch(conditions)`` reads that page of the traces meeting the
    conditions in the order; ``span``: the conditions on the time among ``base``. The walk
    first, then the indexes (see the module docs)."""
    common = estimate(s, [*base, indexed(text)]) > FEW
    edge = edge_of(s, newest, window_size(number * size) if common else GUARD, span)
    if edge is None:  # the window is the whole table
        return fetch([*base, each_row(text)])
    with walking(s):
        rows = fetch([*base, each_row(text), within(edge, newest)])
    if len(rows) == size:
        return rows
    with indexes_only(s):
        return fetch([*base, indexed(text)])


def count_upto(
    s: Session,
    base: list[ColumnElement[bool]],
    text: str,
    limit: int,
    span: list[ColumnElement[bool]] | None = None,
) -> int:
    """The traces that match ``base`` and ``text`` (:func:`walkable`), counted up to
    ``limit`` + 1: the newest :data:`WINDOW` traces (of ``span``, as in :func:`page`) by
    walking (a frequent word passes the limit there), then the older ones from the indexes
    (see the module docs)."""
    if estimate(s, [*base, indexed(text)]) <= FEW:
        # few matches expected: the short walk first, as for a page: when it finds fewer than
        # a page of them, the indexes count them (reading the index entries of every match:
        # 0.7 s for the 725,000 of "refund" at 1M traces, so not for a word common among the
        # newest traces that the statistics do not know), else the long walk below
        guard = edge_of(s, True, GUARD, span)
        seen = _upto(s, [*base, each_row(text), *([within(guard, True)] if guard else [])], limit)
        if guard is None:
            return seen
        if seen < GUARD_MATCHES:
            with indexes_only(s):
                return _upto(s, [*base, indexed(text)], limit)
    edge = edge_of(s, True, window_size(limit + 1), span)
    if edge is None:
        return _upto(s, [*base, each_row(text)], limit)
    n = _upto(s, [*base, each_row(text), within(edge, True)], limit)
    if n > limit:
        return n
    with indexes_only(s):
        return n + _upto(s, [*base, indexed(text), beyond(edge, True)], limit - n)


def estimate(s: Session, conds: list[ColumnElement[bool]]) -> float:
    """The planner's estimate of the traces that meet ``conds`` (no trace is read)."""
    stmt = select(TraceRow.id).where(*conds)
    compiled = stmt.compile(
        dialect=s.get_bind().dialect, compile_kwargs={"render_postcompile": True}
    )
    explain = "EXPLAIN (FORMAT JSON) " + str(compiled)
    plan = s.connection().exec_driver_sql(explain, compiled.params).scalar_one()
    return float(plan[0]["Plan"]["Plan Rows"])


def _upto(s: Session, conds: list[ColumnElement[bool]], limit: int) -> int:
    some: Any = select(TraceRow.id).where(*conds).limit(limit + 1).subquery()
    return int(s.scalar(select(func.count()).select_from(some)) or 0)
