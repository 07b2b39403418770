"""Browsing production traces safely: filters, lists and one trace, clearance respected.

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
decision other than ``answer`` that carries no reason code."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Engine,
    Select,
    and_,
    false,
    func,
    or_,
    select,
    union_all,
)
from sqlalchemy.orm import Session

from review.core import clearance
from review.core.errors import InputError, PermissionDenied
from review.core.identity import Actor, Role, roles_text
from review.corpus.restricted_traces import trace_reasons
from review.traces import rollup, textsearch
from review.traces.chunks import ChunkView, chunk_view
from review.traces.model import (
    NEGATIVE_FEEDBACK,
)
from storage import population_groups, trace_search
from storage.db import count_upto, read_session
from storage.models import Trace as TraceRow
from storage.models import TraceChunk, TraceImport

__all__ = [
    "CAVEAT_REASON",
    "COLUMN_FILTERS",
    "COUNT_LIMIT",
    "FEW_MATCHES",
    "SORTS",
    "VIEW_ROLES",
    "CitationView",
    "MatchCount",
    "TraceFilter",
    "TraceListRow",
    "TraceView",
    "can_view",
    "caveat_condition",
    "count_for_page",
    "count_from_listing",
    "count_traces",
    "data_stamp",
    "get_trace",
    "list_traces",
    "missing_reason_condition",
    "require_view",
    "total_traces",
]


CAVEAT_REASON = rollup.CAVEAT_REASON


VIEW_ROLES: frozenset[Role] = frozenset(
    {Role.reviewer, Role.product_owner, Role.compliance, Role.admin}
)


# ---------------------------------------------------------------------------------------
# Access


def can_view(actor: Actor) -> bool:
    """Whether ``actor`` may browse production traces (see the module docs)."""
    return bool(actor.roles & VIEW_ROLES)


def require_view(actor: Actor) -> None:
    if not can_view(actor):
        holders = roles_text([r.value for r in VIEW_ROLES])
        raise PermissionDenied(
            f"{actor.name} ({roles_text(actor.roles)}) may not browse "
            f"production traces; this needs one of the roles: {holders}."
        )


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


def _conditions(
    actor: Actor,
    f: TraceFilter,
    dialect: str,
    *,
    for_listing: bool = False,
    walk: bool = False,
    dense: bool = False,
) -> list[ColumnElement[bool]]:
    """The WHERE conditions of ``f`` as ``actor`` may see it, written so that the database
    can use the indexes of migration 0019 (``dialect``: the engine's, for text search;
    ``walk``, ``dense``: see :func:`_text_condition`)."""
    conds = _filter_conditions(f, dialect, walk, dense)
    if not clearance.cleared(actor):
        if for_listing or conds:
            # Wrapped so that SQLite does not pick the restricted index and then sort (or,
            # for a count, read) every unrestricted trace: restricted traces are rare, so
            # walking the time index, or the index of another filter (it holds
            # ``restricted``), and skipping them is the fast plan.
            conds.append(func.coalesce(TraceRow.restricted, False).is_(False))
        else:  # a count of everything: the restricted index covers it
            conds.append(TraceRow.restricted.is_(False))
    elif f.restricted_only:
        conds.append(TraceRow.restricted.is_(True))
    return conds


def _text_condition(
    text: str, dialect: str, *, walk: bool = False, dense: bool = False
) -> ColumnElement[bool]:
    """An exact trace id, or a substring of the question or the answer in any case
    (``lower(x) LIKE lower('%text%')``). On SQLite the trigram table answers the substring
    part exactly (storage.trace_search); PostgreSQL's trigram indexes serve the condition
    itself. ``walk``: the list walks its order's index and looks each trace up among the
    matches (many matches) instead of sorting every match (few). ``dense`` (a great many
    matches, :data:`DENSE_MATCHES`): each trace the database looks at is matched on its own
    text, the same answer as the trigram table's, since collecting every match first to look
    traces up among them costs more (1.1 s for a word in 70% of 1M traces) than matching the
    few traces a walk or a bounded count reads."""
    if dialect == "postgresql" and "\x00" in text:
        return false()  # PostgreSQL text holds no NUL, so nothing matches (and none is sent)
    candidates = trace_search.fts_candidates(text) if dialect == "sqlite" and not dense else None
    if candidates is None:
        like = textsearch.like_pattern(text)
        return or_(
            TraceRow.trace_id == text,
            TraceRow.query.ilike(like, escape="\\"),
            TraceRow.answer_text.ilike(like, escape="\\"),
        )
    by_id = select(TraceRow.id).where(TraceRow.trace_id == text)
    key = TraceRow.id + 0 if walk else TraceRow.id  # "+ 0": not the driving index
    return key.in_(union_all(by_id, candidates))


#: a text search with more trigram matches than this lists by walking the time index
FEW_MATCHES = 5000
#: ... and with more than this, matches each walked trace's own text (see _text_condition)
DENSE_MATCHES = 50_000


def _trigram_matches(engine: Engine, text: str) -> int:
    """The trigram table's matches of ``text``, counted up to :data:`DENSE_MATCHES` + 1 (0 on
    PostgreSQL, or without trigrams)."""
    candidates = trace_search.fts_candidates(text) if engine.dialect.name == "sqlite" else None
    if candidates is None:
        return 0
    upto = max(FEW_MATCHES, DENSE_MATCHES) + 1
    with read_session(engine) as s:
        some = select(func.count()).select_from(candidates.limit(upto).subquery())
        return int(s.scalar(some) or 0)


def _filter_conditions(
    f: TraceFilter, dialect: str, walk: bool, dense: bool
) -> list[ColumnElement[bool]]:
    conds = [*_date_conditions(f), *_choice_conditions(f), *_score_conditions(f)]
    text = f.text.strip()
    if text:
        conds.append(_text_condition(text, dialect, walk=walk, dense=dense))
    return conds + _flag_conditions(f)


def _date_conditions(f: TraceFilter) -> list[ColumnElement[bool]]:
    conds: list[ColumnElement[bool]] = []
    if f.date_from is not None:
        conds.append(TraceRow.at >= _day_start(f.date_from))
    if f.date_to is not None:
        conds.append(TraceRow.at < _day_start(f.date_to + dt.timedelta(days=1)))
    return conds


def _decision_condition(decisions: tuple[str, ...]) -> ColumnElement[bool]:
    """One of the decisions ("(none)": no decision logged)."""
    named = [d for d in decisions if d != "(none)"]
    if named and "(none)" in decisions:
        # one expression, not "IN (...) OR IS NULL": for that OR SQLite collects every match
        # by two index reads and sorts them (2.5 s for all decisions at 1M traces) instead of
        # walking the time index
        return func.coalesce(TraceRow.decision, "").in_([*named, ""])
    if named:
        return TraceRow.decision.in_(named)
    return TraceRow.decision.is_(None)


def _choice_conditions(f: TraceFilter) -> list[ColumnElement[bool]]:
    """The filters that pick values: decisions, reason, feedback, columns, a version."""
    conds: list[ColumnElement[bool]] = []
    if f.decisions:
        conds.append(_decision_condition(f.decisions))
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
        if f.version_key in trace_search.VERSION_KEYS:  # an expression index serves these
            conds.append(trace_search.version_value(f.version_key) == f.version_value)
        else:
            conds.append(TraceRow.versions[f.version_key].as_string() == f.version_value)
    return conds


def _score_conditions(f: TraceFilter) -> list[ColumnElement[bool]]:
    conds: list[ColumnElement[bool]] = []
    if f.score_min is not None:
        conds.append(TraceRow.top_score >= f.score_min)
    if f.score_max is not None:
        conds.append(TraceRow.top_score <= f.score_max)
    return conds


def _flag_conditions(f: TraceFilter) -> list[ColumnElement[bool]]:
    conds: list[ColumnElement[bool]] = []
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
    text = f.text.strip()
    only_text = _text_only(f)
    with read_session(engine) as s, textsearch.bounded(s, text):
        if f == TraceFilter():  # the triggers' counter, not count(*) (1.3-2.2 s at 10M traces)
            return rollup.visible_total(s, clearance.cleared(actor))
        if only_text and engine.dialect.name == "sqlite":
            counted = _count_text_only(s, actor, text)
            if counted is not None:
                return counted
        if f.decisions and replace(f, decisions=()) == TraceFilter():  # decisions alone
            counted = rollup.decision_total(s, [d if d != "(none)" else "" for d in f.decisions])
            if counted is not None and not clearance.cleared(actor):  # less what is hidden
                hidden = [TraceRow.restricted.is_(True), _decision_condition(f.decisions)]
                counted -= int(s.scalar(select(func.count()).where(*hidden)) or 0)
            if counted is not None:
                return counted
        stmt = (
            select(func.count())
            .select_from(TraceRow)
            .where(*_conditions(actor, f, engine.dialect.name))
        )
        return int(s.scalar(stmt) or 0)


#: a text search's count on the Traces page stops after this many matches ("more than 1,000",
#: 40 pages): a string of one or two letters in 3% of 1M traces has its 1,000th match in the
#: newest 3% of the table, its 10,000th in the newest third (1.4 s on PostgreSQL)
COUNT_LIMIT = 1000


@dataclass(frozen=True)
class MatchCount:
    """How many traces match, as far as they were counted: exactly ``n``, or, when ``more``,
    more than ``n`` (counting stopped after ``n`` + 1 matches)."""

    n: int
    more: bool = False


def count_for_page(
    engine: Engine, actor: Actor, f: TraceFilter, limit: int | None = None
) -> MatchCount:
    """The count the Traces page shows: :func:`count_traces`, except that a text search
    stops counting after ``limit`` matches (default :data:`COUNT_LIMIT`). Its matches are
    found by reading each trace (the trigram indexes only narrow them down), so the exact
    count of a common word takes seconds at a million traces; the first pages do not need
    it. PostgreSQL: review.traces.textsearch.count_upto (three characters or more)."""
    require_view(actor)
    limit = COUNT_LIMIT if limit is None else limit
    if not f.text.strip():
        return MatchCount(count_traces(engine, actor, f))
    with read_session(engine) as s, textsearch.bounded(s, f.text):
        if engine.dialect.name == "postgresql" and textsearch.walkable(f.text.strip()):
            base = _conditions(actor, replace(f, text=""), "postgresql", for_listing=True)
            upto = textsearch.count_upto(s, base, f.text.strip(), limit, _date_conditions(f))
            return MatchCount(limit, True) if upto > limit else MatchCount(upto)
        if engine.dialect.name == "sqlite" and _text_only(f):
            n = _count_text_only_upto(s, actor, f.text.strip(), limit)
            if n is None:
                n = _count_two_characters(s, actor, f, limit)
            if n is not None:
                return MatchCount(limit, True) if n > limit else MatchCount(n)
        dense = _trigram_matches(engine, f.text.strip()) > DENSE_MATCHES
        conds = _conditions(actor, f, engine.dialect.name, dense=dense)
        n, more = count_upto(s, select(TraceRow.id).where(*conds), limit)
    return MatchCount(n, more)


def _text_only(f: TraceFilter) -> bool:
    return bool(f.text.strip()) and replace(f, text="") == TraceFilter()


def _count_text_only_upto(s: Session, actor: Actor, text: str, limit: int) -> int | None:
    """:func:`_count_text_only`, or any number above ``limit`` when there are more matches
    than that. The trigram table's matches are counted up to ``limit`` + 1 + the restricted
    traces (a user without clearance does not see those): beyond that at least ``limit`` + 1
    of them are visible, found without reading any trace. None: no trigrams."""
    candidates = trace_search.fts_candidates(text)
    if candidates is None:
        return None
    hidden = 0
    if not clearance.cleared(actor):
        restricted = select(func.count()).select_from(TraceRow).where(TraceRow.restricted.is_(True))
        hidden = int(s.scalar(restricted) or 0)
    upto = candidates.limit(limit + 1 + hidden).subquery()
    if int(s.scalar(select(func.count()).select_from(upto)) or 0) > limit + hidden:
        return limit + 1
    return _count_text_only(s, actor, text)


def _count_two_characters(s: Session, actor: Actor, f: TraceFilter, limit: int) -> int | None:
    """A search of two characters (no trigram of its own, see :func:`_two_characters`)
    counted up to ``limit`` + 1 matches: among the newest :data:`WINDOW` traces first, which
    hold that many of a common pair, else among its matches in the trigram table. None: not
    two characters."""
    text = f.text.strip()
    if trace_search.two_character_matches(text) is None:
        return None
    window = _window(s, "newest")
    if window is not None:
        probe = select(TraceRow.id).where(*_conditions(actor, f, "sqlite"), window)
        if count_upto(s, probe, limit)[1]:
            return limit + 1
    visible = _conditions(actor, replace(f, text=""), "sqlite")
    n, more = count_upto(s, select(TraceRow.id).where(*visible, _two_characters(s, text)), limit)
    return limit + 1 if more else n


def _two_characters(s: Session, text: str) -> ColumnElement[bool]:
    """The traces that match ``text``, two characters (SQLite): its matches in the trigram
    table (storage.trace_search.two_character_matches, read once, for the few traces that
    hold a rare pair), and the trace whose id it is."""
    found = trace_search.two_character_matches(text)
    ids = json.dumps(list(s.scalars(found)) if found is not None else [])
    listed = func.json_each(ids).table_valued("value")
    return or_(TraceRow.trace_id == text, TraceRow.id.in_(select(listed.c.value)))


def _count_text_only(s: Session, actor: Actor, text: str) -> int | None:
    """The count of a search without other filters on SQLite, from the trigram table without
    reading each matching trace (a common word matches most of them): its matches (every row
    of the table is a stored trace), plus the trace whose id it is when its text does not
    match, minus, for a user without clearance, the restricted traces among them (few: found
    from the restricted index, each looked up among the matches). None: no trigrams."""
    candidates = trace_search.fts_candidates(text)
    if candidates is None:
        return None
    n = int(s.scalar(select(func.count()).select_from(candidates.subquery())) or 0)
    holds = trace_search.fts_holds(text, TraceRow.__table__.c.id)
    by_id = [TraceRow.trace_id == text, ~holds]
    if not clearance.cleared(actor):
        by_id.append(TraceRow.restricted.is_(False))
        # "+ 0": from the restricted index, each looked up among the matches read once
        hidden = TraceRow.restricted.is_(True), (TraceRow.id + 0).in_(candidates)
        n -= int(s.scalar(select(func.count()).select_from(TraceRow).where(*hidden)) or 0)
    n += int(s.scalar(select(func.count()).select_from(TraceRow).where(*by_id)) or 0)
    return n


def total_traces(engine: Engine) -> int:
    """All stored traces (no text: for empty-state messages and the overview), from the
    counter the triggers of ``traces`` keep (storage.population_groups), not a count."""
    with read_session(engine) as s:
        return population_groups.trace_count(s)


def data_stamp(engine: Engine) -> str:
    """Changes whenever traces are added or purged (cheap: three index lookups); a cache key.
    Each of min and max is a subquery of its own: SQLite reads one end of an index for a lone
    min() or max(), and the whole index for the two in one select (0.1 s at 1.6M traces, on
    every rerun of the pages that key a cache by this stamp)."""
    with read_session(engine) as s:
        lo, hi, imports = s.execute(
            select(
                select(func.min(TraceRow.id)).scalar_subquery(),
                select(func.max(TraceRow.id)).scalar_subquery(),
                select(func.max(TraceImport.id)).scalar_subquery(),
            )
        ).one()
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
    text = f.text.strip()
    matches = _trigram_matches(engine, text) if sort in ("newest", "oldest") and text else 0
    walk, dense = matches > FEW_MATCHES, matches > DENSE_MATCHES
    conds = _conditions(actor, f, engine.dialect.name, for_listing=True, walk=walk, dense=dense)
    by_time = sort in ("newest", "oldest")
    with read_session(engine) as s, textsearch.bounded(s, text):
        if engine.dialect.name == "postgresql" and by_time and textsearch.walkable(text):
            # the walk of the time index, or the trigram indexes (review.traces.textsearch)
            base = _conditions(actor, replace(f, text=""), "postgresql", for_listing=True)
            return textsearch.page(
                s, base, text, sort == "newest", page, page_size,
                lambda conds: _rows(s, _listing(conds, _order(sort), page, page_size)),
                span=_date_conditions(f),
            )  # fmt: skip
        if sort in ("newest", "oldest") and _text_only(f) and trace_search.fts_phrase(text) is None:
            return _list_without_trigrams(s, conds, page, page_size, sort, text)
        return _rows(s, _listing(conds, _order(sort), page, page_size))


#: a search the trigrams cannot serve first looks among this many newest (or oldest) traces
WINDOW = 20_000


def _list_without_trigrams(
    s: Session, conds: list[ColumnElement[bool]], page: int, page_size: int, sort: str, text: str
) -> list[TraceListRow]:
    """A page of a text search without trigrams of its own (one or two characters), which
    reads each trace it looks at. The newest (or oldest) :data:`WINDOW` traces first: they
    come first in the order, so when they hold the page it is the page. Else (few matches)
    two characters are found in the trigram table (:func:`_two_characters`), and one is
    found by reading every trace once and sorting the matches, instead of walking the time
    index to its end and looking each trace up (several times slower)."""
    window = _window(s, sort)
    if window is None:  # the window is every trace
        return _rows(s, _listing(conds, _order(sort), page, page_size))
    rows = _rows(s, _listing([*conds, window], _order(sort), page, page_size))
    if len(rows) == page_size:
        return rows
    sqlite = s.get_bind().dialect.name == "sqlite"  # the trigram vocabulary is SQLite's
    if sqlite and trace_search.two_character_matches(text) is not None:
        found = _two_characters(s, text)
        return _rows(s, _listing([*conds, found], _order(sort), page, page_size))
    # the same order on an expression: no index serves it, so the database reads the table
    at = func.coalesce(TraceRow.at, TraceRow.at)
    order = [at.desc(), TraceRow.id.desc()] if sort == "newest" else [at.asc(), TraceRow.id.asc()]
    return _rows(s, _listing(conds, order, page, page_size))


def _window(s: Session, sort: str) -> ColumnElement[bool] | None:
    """The newest (or oldest) :data:`WINDOW` traces of ``sort``'s order; None: every trace."""
    edge = s.scalar(select(TraceRow.id).order_by(*_order(sort)).offset(WINDOW - 1).limit(1))
    if edge is None:
        return None
    edge_at = select(TraceRow.at).where(TraceRow.id == edge).scalar_subquery()
    if sort == "newest":
        return and_(TraceRow.at >= edge_at, or_(TraceRow.at > edge_at, TraceRow.id >= edge))
    return and_(TraceRow.at <= edge_at, or_(TraceRow.at < edge_at, TraceRow.id <= edge))


def _listing(
    conds: list[ColumnElement[bool]], order: list[Any], page: int, page_size: int
) -> Select[Any]:
    return (
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
        .where(*conds)
        .order_by(*order)
        .limit(page_size)
        .offset((page - 1) * page_size)
    )


def _rows(s: Session, stmt: Select[Any]) -> list[TraceListRow]:
    return [
        TraceListRow(
            id=r[0],
            trace_id=r[1],
            at=_aware(r[2]),
            query=r[3] or "",
            decision=r[4],
            reason_code=r[5],
            top_score=r[6],
            ranking_mode=r[7],
            hits_after_filter=r[8],
            feedback=r[9],
            policy_version=r[10],
            restricted=bool(r[11]),
        )
        for r in s.execute(stmt)
    ]


def count_from_listing(page: int, page_size: int, listed: int) -> MatchCount | None:
    """The exact count when the listed page (``listed`` rows of page ``page``) is the last
    one: fewer rows than a page, none only on the first page. None: the page does not say."""
    if listed < page_size and (listed > 0 or page == 1):
        return MatchCount((page - 1) * page_size + listed)
    return None


def _aware(v: dt.datetime) -> dt.datetime:
    return v if v.tzinfo is not None else v.replace(tzinfo=dt.UTC)


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
    topics: tuple[str, ...] | None = None  # the question's topic keys (None: not classified)
    reformulated: bool | None = None  # the user asked again in other words (None: not logged)
    citation_opened: bool | None = None  # the user opened a cited source (None: not logged)

    @property
    def caveat(self) -> bool:
        return self.decision == "answer" and self.reason_code == CAVEAT_REASON

    @property
    def missing_reason(self) -> bool:
        return self.decision is None or (self.decision != "answer" and not self.reason_code)


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
        # the stored flag, and the rule against the corpus as it is now (a flag left stale,
        # e.g. by a database upgraded without `workbench recompute-restricted`, never opens it)
        if not clearance.cleared(actor) and (row.restricted or trace_reasons(s, row.id)):
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
    visible = [c for c in chunk_rows if clearance.may_see(actor, bool(c.filtered))]
    hidden_ids = {c.chunk_id for c in chunk_rows if not clearance.may_see(actor, bool(c.filtered))}
    chunks = tuple(chunk_view(c, actor, context, cited_ids) for c in visible)
    by_id = {c.chunk_id: c for c in chunk_rows}
    citations: list[CitationView] = []
    for c in row.citations or []:
        ids = [str(x) for x in c.get("chunk_ids", [])]
        problems: list[str] = []
        for cid in ids:
            shown = clearance.shown(actor, cid, cid in hidden_ids)
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
                tuple(clearance.shown(actor, cid, cid in hidden_ids) for cid in ids),
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
        topics=None if row.topics is None else tuple(str(t) for t in row.topics),
        decision=row.decision,
        reason_code=row.reason_code,
        answer_text=row.answer_text,
        citations=tuple(citations),
        feedback=row.feedback,
        reformulated=row.reformulated,
        citation_opened=row.citation_opened,
        versions=dict(row.versions or {}),
        attributes=dict(row.attributes or {}),
        restricted=row.restricted,
        redactions=dict(row.redactions or {}),
        chunks=chunks,
        hidden_chunks=len(chunk_rows) - len(visible),
        import_source=source,
        imported_at=_aware(row.imported_at),
    )
