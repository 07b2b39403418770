"""A text search walks the newest traces or asks the trigram indexes (review.traces.textsearch,
PostgreSQL; SQLite keeps its FTS5 table), and either way lists and counts what a plain ILIKE
over every trace gives: a frequent word, a rare one, one in no trace, words with ``%``, ``_``
and a backslash, restricted traces (left out for users without clearance), every page, both
orders, with the date and other filters, and the count exact up to its limit and "more than"
beyond. The window the walk reads is shrunk so that both paths, and their seam, are taken on
a table of a few hundred traces; Hypothesis picks the search texts."""

from __future__ import annotations

import contextlib
import datetime as dt
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import ColumnElement, Engine, func, or_, select
from sqlalchemy.orm import Session

from review.admin import users
from review.core.errors import InputError
from review.traces import browse, textsearch
from review.traces.model import Trace
from storage.models import Trace as TraceRow
from tests.helpers.actors import make_actor
from tests.helpers.pages import no_exception, page_app, readable
from tests.helpers.traces import import_traces, make_trace

pytestmark = pytest.mark.postgres

UTC = dt.UTC
CLEARED = make_actor("reviewer", email="cleared@test.example", clearance=True, uid=12)
UNCLEARED = make_actor("reviewer", clearance=False, uid=11)
START = dt.datetime(2025, 5, 1, tzinfo=UTC)

FILLER = ["how", "long", "does", "the", "team", "plan", "keep", "logs", "Straße", "naïve"]
SPECIAL = ["100%", "50_50", "a\\b", "C:\\Temp\\x", "x%_\\y", "under_score", "%"]
N = 300


def corpus() -> list[Trace]:
    """``refund`` in about 80% of the traces (any case), ``penalty`` in about 3% (several of
    them restricted), the special words in about 2% each, ``zebra`` in none; about 15%
    restricted; some traces share a time (the id breaks the tie)."""
    rng = random.Random(33)
    out: list[Trace] = []
    for i in range(N):
        words = [rng.choice(FILLER) for _ in range(rng.randint(1, 4))]
        if rng.random() < 0.8:
            words.insert(rng.randrange(len(words) + 1), rng.choice(["refund", "Refund", "REFUND"]))
        if rng.random() < 0.03 or i in (5, 150, 290):
            words.append(rng.choice(["penalty", "Penalty fee"]))
        if rng.random() < 0.14:
            words.append(rng.choice(SPECIAL))
        answer = [rng.choice(FILLER) for _ in range(rng.randint(0, 3))]
        if rng.random() < 0.1:
            answer.append("refunds")  # in the answer alone
        attrs: dict[str, Any] = {"customer_tier": rng.choice(["team", "enterprise"])}
        if rng.random() < 0.15 or i in (5, 150):
            attrs["restricted"] = True
        if i == 77:  # a question that quotes another trace's id
            words.append("see t-0123")
        out.append(
            make_trace(
                f"t-{i:04d}",
                START + dt.timedelta(hours=rng.randrange(N * 2) // 3),
                query=" ".join(words),
                answer_text=" ".join(answer),
                attributes=attrs,
                decision=("answer", "abstain", "clarify")[i % 3],
            )
        )
    return out


@pytest.fixture
def engine(any_engine: Engine) -> Engine:
    assert import_traces(any_engine, corpus(), batch_size=100).added == N
    return any_engine


def reference(engine: Engine, actor: Any, f: browse.TraceFilter, newest: bool) -> list[str]:
    """Plain ILIKE over every trace (SQLite: lower() LIKE lower()), the filter's other
    conditions as plain comparisons, restricted traces out for a user without clearance."""
    t = f.text.strip()
    conds: list[ColumnElement[bool]] = []
    if t:
        like = textsearch.like_pattern(t)
        conds.append(
            or_(
                TraceRow.trace_id == t,
                TraceRow.query.ilike(like, escape="\\"),
                TraceRow.answer_text.ilike(like, escape="\\"),
            )
        )
    if not actor.clearance:
        conds.append(TraceRow.restricted.is_(False))
    if f.customer_tier:
        conds.append(TraceRow.customer_tier == f.customer_tier)
    if f.decisions:
        conds.append(TraceRow.decision.in_(f.decisions))
    if f.date_from:
        conds.append(TraceRow.at >= dt.datetime.combine(f.date_from, dt.time(), UTC))
    if f.date_to:
        end = dt.datetime.combine(f.date_to + dt.timedelta(days=1), dt.time(), UTC)
        conds.append(TraceRow.at < end)
    order = [TraceRow.at.desc(), TraceRow.id.desc()] if newest else [TraceRow.at, TraceRow.id]
    with engine.connect() as c:
        return list(c.scalars(select(TraceRow.trace_id).where(*conds).order_by(*order)))


def check(
    engine: Engine, f: browse.TraceFilter, size: int = 7, limits: tuple[int, ...] = ()
) -> None:
    """Every page in both orders (and one past the end), and the count at each limit and at
    the number of matches, one below and one above it."""
    for actor in (CLEARED, UNCLEARED):
        for sort in ("newest", "oldest"):
            want = reference(engine, actor, f, sort == "newest")
            for page in range(1, len(want) // size + 3):
                rows = browse.list_traces(engine, actor, f, page=page, page_size=size, sort=sort)
                got = [r.trace_id for r in rows]
                assert got == want[(page - 1) * size : page * size], (f, actor, sort, page)
                assert all(not r.restricted for r in rows) or actor.clearance
        n = len(want)
        for limit in sorted({*limits, max(n - 1, 0), n, n + 1}):  # the edges of exactness
            expected = browse.MatchCount(limit, True) if n > limit else browse.MatchCount(n)
            assert browse.count_for_page(engine, actor, f, limit=limit) == expected, (f, limit)
        assert browse.count_traces(engine, actor, f) == len(want), f


NEEDLES = [
    "refund",  # ~80%
    "REFUNDS",  # in the answers
    "penalty",  # ~3%, some restricted
    "Penalty fee",
    "zebra",  # none
    "100%",
    "50_50",
    "a\\b",
    "\\temp\\",
    "x%_\\y",
    "_sc",  # '_' is no wildcard: "under_score" holds it, "understand" would not
    "%%%",
    "t-0123",  # a trace id, and quoted in another trace's question
    "t-0042",
    "straße",
    "NAÏVE",
]


@pytest.mark.parametrize(
    ("window", "per_match", "few", "guard"),
    [(1, 1, -1, 1), (9, 1, -1, 1), (60, 2, -1, 1), (20_000, 4, -1, 1), (60, 2, 10**9, 9),
     (60, 2, 10**9, 1), (60, 2, 10**9, 20_000)],
)  # fmt: skip
def test_lists_and_counts_as_plain_ilike(
    engine: Engine,
    window: int,
    per_match: int,
    few: int,
    guard: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # few=-1: every text is expected common (the long walk first); a window of 1 sends
    # nearly every search to the indexes, 9 and 60 split the matches between the walk and
    # the indexes, 20,000 walks the whole table; few=10**9: every text is expected rare (the
    # short walk of `guard` traces, then the indexes)
    monkeypatch.setattr(textsearch, "WINDOW", window)
    monkeypatch.setattr(textsearch, "ROWS_PER_MATCH", per_match)
    monkeypatch.setattr(textsearch, "FEW", few)
    monkeypatch.setattr(textsearch, "GUARD", guard)
    # the count of a text expected rare walks on when its short walk finds this many
    monkeypatch.setattr(textsearch, "GUARD_MATCHES", max(1, guard // 10))
    for needle in NEEDLES:
        check(engine, browse.TraceFilter(text=needle), limits=(0, 3, 25, 10_000))


@pytest.mark.parametrize(("window", "few"), [(1, -1), (9, -1), (60, -1), (9, 10**9)])
def test_with_other_filters_and_dates(
    engine: Engine, window: int, few: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(textsearch, "WINDOW", window)
    monkeypatch.setattr(textsearch, "GUARD", window)
    monkeypatch.setattr(textsearch, "FEW", few)
    day = (START + dt.timedelta(days=2)).date()
    for needle in ("refund", "penalty", "100%", "zebra"):
        for f in (
            browse.TraceFilter(text=needle, customer_tier="enterprise"),
            browse.TraceFilter(text=needle, decisions=("answer", "abstain")),
            browse.TraceFilter(text=needle, date_from=day),
            browse.TraceFilter(text=needle, date_to=day),
            browse.TraceFilter(text=needle, date_from=day, date_to=day + dt.timedelta(days=1)),
        ):
            check(engine, f, size=5, limits=(4, 1000))


def test_restricted_traces_stay_hidden_from_users_without_clearance(engine: Engine) -> None:
    restricted = [t for t in corpus() if t.attributes.get("restricted")]
    for t in restricted[:5]:
        f = browse.TraceFilter(text=t.trace_id)
        assert browse.list_traces(engine, UNCLEARED, f) == []
        assert browse.count_for_page(engine, UNCLEARED, f) == browse.MatchCount(0)
        assert [r.trace_id for r in browse.list_traces(engine, CLEARED, f)] == [t.trace_id]
    # the rare word's restricted matches are counted for one user and not the other
    f = browse.TraceFilter(text="penalty")
    cleared = browse.count_for_page(engine, CLEARED, f)
    uncleared = browse.count_for_page(engine, UNCLEARED, f)
    assert uncleared.n < cleared.n and not cleared.more


ALPHABET = "refundREFUNDpenalty _%\\-0123t.ßÉé"


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    text=st.one_of(
        st.text(alphabet=ALPHABET, min_size=0, max_size=8),
        st.sampled_from(NEEDLES).map(lambda s: s.swapcase()),
    ),
    window=st.sampled_from([1, 5, 40]),
    few=st.sampled_from([-1, 10**9]),
)
def test_any_text_lists_and_counts_as_plain_ilike(
    engine: Engine, text: str, window: int, few: int
) -> None:
    saved = textsearch.WINDOW, textsearch.GUARD, textsearch.FEW
    # hypothesis runs many examples in one test: set and restored here, not by monkeypatch
    textsearch.WINDOW = textsearch.GUARD = window
    textsearch.FEW = few
    try:
        f = browse.TraceFilter(text=text)
        for actor in (CLEARED, UNCLEARED):
            want = reference(engine, actor, f, True)
            for page in (1, 2, 9):
                rows = browse.list_traces(engine, actor, f, page=page, page_size=5)
                assert [r.trace_id for r in rows] == want[(page - 1) * 5 : page * 5], text
            if text.strip():
                n = len(want)
                expected = browse.MatchCount(10, True) if n > 10 else browse.MatchCount(n)
                assert browse.count_for_page(engine, actor, f, limit=10) == expected, text
    finally:
        textsearch.WINDOW, textsearch.GUARD, textsearch.FEW = saved


def test_the_traces_page_says_more_than_the_limit_never_a_wrong_number(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Traces page on each engine, a reviewer without clearance: a frequent word shows
    its newest page and "more than" the limit; a rare word its exact count; the indexes'
    path (a window of one trace) gives the same."""
    admin = make_actor("admin", clearance=True, uid=1)
    users.add_user(engine, admin, "rev@test.example", "Rev", ["reviewer"], clearance=False)
    monkeypatch.setattr(browse, "COUNT_LIMIT", 30)
    monkeypatch.setattr(textsearch, "WINDOW", 1)
    monkeypatch.setattr(textsearch, "GUARD", 1)
    at = page_app(str(engine.url.render_as_string(hide_password=False)), monkeypatch,
                  "pages/traces_page.py", "rev@test.example").run()  # fmt: skip
    for needle in ("refund", "penalty", "50_50", "zebra"):
        at.text_input(key="traces_q").input(needle).run()
        no_exception(at)
        want = reference(engine, UNCLEARED, browse.TraceFilter(text=needle), True)
        captions = " ".join(readable(c) for c in at.caption)
        frames = [d.value for d in at.dataframe if "question" in d.value.columns]
        if not want:
            assert not frames and any("No traces match" in readable(i) for i in at.info)
            continue
        questions = {t.trace_id: t.query for t in corpus()}
        assert list(frames[0]["question"]) == [questions[i] for i in want[:25]], needle
        if len(want) > 30:
            assert "of more than 30 (counting stopped there)" in captions, needle
            assert f"of {len(want):,} " not in captions
        else:
            assert f"Showing 1–{min(25, len(want))} of {len(want):,} ·" in captions, needle
            assert "more than" not in captions


def test_a_frequent_word_is_walked_and_a_rare_one_asked_of_the_indexes(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL: the walk's window holds a page of "refund" (the indexes are not asked, for
    the list or the count); "penalty" sends both to the indexes. Within each step the
    planner's switches are as the step needs, and as they were after it."""
    if engine.dialect.name != "postgresql":
        pytest.skip("the walk and the indexes are PostgreSQL's (SQLite has its FTS5 table)")
    monkeypatch.setattr(textsearch, "WINDOW", 60)
    monkeypatch.setattr(textsearch, "FEW", -1)  # every text expected common: the long walk
    asked: list[str] = []
    settings_seen: list[tuple[str, str, str]] = []
    real = textsearch.indexes_only

    def spy(s: Any) -> Any:
        asked.append("indexes")
        return real(s)

    monkeypatch.setattr(textsearch, "indexes_only", spy)
    for needle, walked in (("refund", True), ("penalty", False)):
        asked.clear()
        f = browse.TraceFilter(text=needle)
        browse.list_traces(engine, CLEARED, f, page_size=5)
        browse.count_for_page(engine, CLEARED, f, limit=10)
        assert (asked == []) == walked, needle
    # every text expected rare (statistics from before "refund" became common): the short
    # walk still finds its page, and the count, having seen a page's worth there, walks on
    # instead of reading every match's index entries; "penalty" goes to the indexes
    monkeypatch.setattr(textsearch, "FEW", 10**9)
    monkeypatch.setattr(textsearch, "GUARD", 30)
    monkeypatch.setattr(textsearch, "GUARD_MATCHES", 5)
    for needle, walked in (("refund", True), ("penalty", False)):
        asked.clear()
        f = browse.TraceFilter(text=needle)
        assert len(browse.list_traces(engine, CLEARED, f, page_size=5)) == 5
        n = len(reference(engine, CLEARED, f, True))
        want = browse.MatchCount(10, True) if n > 10 else browse.MatchCount(n)
        assert browse.count_for_page(engine, CLEARED, f, limit=10) == want
        assert (asked == []) == walked, needle

    def fetch(s: Any, conds: Any) -> list[str]:
        row = s.execute(
            select(
                func.current_setting("enable_sort"),
                func.current_setting("enable_seqscan"),
                func.current_setting("enable_indexscan"),
            )
        ).one()
        settings_seen.append(tuple(row))
        return []  # never a full page: the indexes are asked next

    with Session(engine) as s:
        textsearch.page(s, [], "refund", True, 1, 5, lambda conds: fetch(s, conds))
        after = s.execute(select(func.current_setting("enable_sort"))).scalar_one()
    assert settings_seen == [("off", "on", "on"), ("on", "off", "off")]
    assert after == "on"


def test_a_search_too_short_for_the_indexes_is_stopped_and_says_so(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL a text of one or two characters is matched by reading the traces (no
    trigram of its own): each statement of its listing and counts may run
    textsearch.SHORT_SEARCH_SECONDS at most, then the search stops with an error that says
    what to do (a pair of letters in no trace read ten million traces for minutes). Made
    certain here by another transaction holding the traces table: the statements wait for
    it and are stopped. Longer texts and other engines run unbounded, and a short search
    that finishes lists as plain ILIKE."""
    monkeypatch.setattr(textsearch, "SHORT_SEARCH_SECONDS", 0.2)
    short = browse.TraceFilter(text="qz")
    if engine.dialect.name != "postgresql":
        assert browse.list_traces(engine, CLEARED, short) == []
        return
    assert browse.list_traces(engine, CLEARED, short) == []  # it finishes: nothing matches
    # no index bitmap for it: the planner would read a whole trigram index, which does not
    # stop when the statement is cancelled (8 s at ten million traces); a longer text keeps
    # them (its trigrams are the way to its rare matches)
    for text, bitmaps in (("qz", "off"), ("refund", "on")):
        with Session(engine) as s, textsearch.bounded(s, text):
            assert s.scalar(select(func.current_setting("enable_bitmapscan"))) == bitmaps
    assert [r.trace_id for r in browse.list_traces(engine, CLEARED, browse.TraceFilter(text="50"))]
    with engine.connect() as holder:
        # (released by the server after 10 s, should a statement wait unbounded)
        holder.exec_driver_sql("SET idle_in_transaction_session_timeout = '10s'")
        holder.exec_driver_sql("LOCK TABLE traces IN ACCESS EXCLUSIVE MODE")
        calls = [
            lambda: browse.list_traces(engine, CLEARED, short),
            lambda: browse.count_for_page(engine, CLEARED, short),
            lambda: browse.count_traces(engine, CLEARED, short),
        ]
        for call in calls:
            with pytest.raises(InputError, match=r"fewer than 3 characters .* type 3 characters"):
                call()
        with contextlib.suppress(Exception):  # (the server may have closed it)
            holder.rollback()
    # after the stop the next search runs as usual (the bound was the transaction's own)
    assert browse.count_for_page(engine, CLEARED, browse.TraceFilter(text="refund")).n > 0


def test_the_traces_page_shows_a_stopped_search_as_an_error(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Traces page shows the stopped search's message, not a crash."""
    if engine.dialect.name != "postgresql":
        return
    monkeypatch.setattr(textsearch, "SHORT_SEARCH_SECONDS", 0.2)
    with engine.connect() as holder:
        # (released by the server after 10 s, should a statement wait unbounded)
        holder.exec_driver_sql("SET idle_in_transaction_session_timeout = '10s'")
        holder.exec_driver_sql("LOCK TABLE traces IN ACCESS EXCLUSIVE MODE")
        with pytest.raises(InputError) as stopped:
            browse.list_traces(engine, CLEARED, browse.TraceFilter(text="qz"))
        with contextlib.suppress(Exception):  # (the server may have closed it)
            holder.rollback()

    def stop(*_a: Any, **_k: Any) -> Any:
        raise stopped.value

    admin = make_actor("admin", clearance=True, uid=1)
    users.add_user(engine, admin, "rev@test.example", "Rev", ["reviewer"], clearance=False)
    at = page_app(str(engine.url.render_as_string(hide_password=False)), monkeypatch,
                  "pages/traces_page.py", "rev@test.example").run()  # fmt: skip
    monkeypatch.setattr(browse, "list_traces", stop)
    at.text_input(key="traces_q").input("qz").run()
    no_exception(at)
    assert any("fewer than 3 characters" in readable(e) for e in at.error)
