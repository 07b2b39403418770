"""Searching and filtering traces through the indexes of migration 0020 gives what the old
scanning query gave: on random traces (hostile search strings, non-ASCII text, restricted
traces), on the demo, after a purge and a re-import, after a downgrade and upgrade (the
backfill), on SQLite and PostgreSQL. Text search on SQLite is also checked against plain
Python (a substring of the question or the answer with ASCII letters in any case, or the
exact trace id)."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import pytest
from alembic import command
from sqlalchemy import ColumnElement, Engine, func, inspect, or_, select, text, update

from review.traces import browse, retention
from review.traces.model import Trace
from storage.db import alembic_config
from storage.models import Trace as TraceRow
from tests.helpers.actors import make_actor
from tests.helpers.traces import import_traces, make_trace

pytestmark = pytest.mark.postgres

UTC = dt.UTC
CLEARED = make_actor("reviewer", email="cleared@test.example", clearance=True, uid=12)
UNCLEARED = make_actor("reviewer", clearance=False, uid=11)
ADMIN = make_actor("admin", clearance=True, uid=15)

WORDS = [
    "refund", "Refund", "REFUND", "legal hold", "Legal-Hold", "invoice", "Éclair", "éclair",
    "STRASSE", "straße", "\u212aelvin", "kelvin", "\u017fun", "sun", "\u0130stanbul",
    "istanbul", "100%", "50_50", "a\\b", 'say "hi"', "NEAR(a b)", "x*", "-minus", "(paren)",
    "col:umn", "{query}", "^start", "O'Brien", "naïve", "🙂 smile", "AND", "OR", "NOT",
    "über", "ÜBER", "日本語テキスト", "tab\there", "  spaced  ", "x", "ab",
]  # fmt: skip
HOSTILE = [
    '"', '""', '"refund', "refund\"", "*", "NEAR", "NEAR(refund hold)", "-", "-refund",
    "(", ")", "()", "%", "_", "%_%", "\\", "\\%", "'", "''", "AND", "OR NOT", "^", ":",
    "query:refund", "{query answer_text}:x", "re*", "refund OR hold", "a\x00b", "\u212a",
    "ſ", "İ", "É", "é", "ß", "ss", "🙂", "テキ", "  ", "x", "ab", "abc",
]  # fmt: skip
TIERS = ["starter", "team", "business", "enterprise", None]
LANGS = ["en", "de", "fr", None]
DOCTYPES = ["policy", "contract", "faq", None]
DECISIONS = ["answer", "abstain", "clarify", "escalate", "partial", None]


def random_traces(n: int, seed: int, prefix: str = "r") -> list[Trace]:
    rng = random.Random(seed)
    start = dt.datetime(2025, 5, 1, tzinfo=UTC)
    out: list[Trace] = []
    for i in range(n):
        q = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 5)))
        a = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 4)))
        attrs: dict[str, Any] = {}
        for key, values in (("language", LANGS), ("customer_tier", TIERS),
                            ("document_type", DOCTYPES)):  # fmt: skip
            v = rng.choice(values)
            if v is not None:
                attrs[key] = v
        if rng.random() < 0.1:
            attrs["restricted"] = True
        versions = {"index": rng.choice(["kb-1", "kb-2", "kb-3"]),
                    "prompt": rng.choice(["p@1", "p@2"]),
                    "model": rng.choice(["m-a", "m-b"]),
                    "policy": rng.choice(["pol@1", "pol@2"])}  # fmt: skip
        if rng.random() < 0.3:
            versions["reranker"] = rng.choice(["none", "bge"])
        if rng.random() < 0.2:
            versions["flavour"] = rng.choice(["x", "y"])  # a component without an index
        if i % 50 == 0:  # a question that quotes another trace's id
            q += f" see {prefix}-{i + 1:04d}"
        decision = rng.choice(DECISIONS)
        out.append(
            make_trace(
                f"{prefix}-{i:04d}",
                # some traces share a time, so the id breaks ties in the order
                start + dt.timedelta(minutes=rng.randrange(n * 3) // 2),
                query=q,
                answer_text=a,
                decision=decision,
                reason=rng.choice([None, "ambiguous_question", "restricted_topic"]),
                ranking_mode=rng.choice(["vector", "semantic_reranker", None]),
                user_role=rng.choice(["customer_admin", "legal_counsel", None]),
                versions=versions,
                attributes=attrs,
            )
        )
    return out


# --- the reference: the query as it was before migration 0020 ---------------------------


def _old_conditions(actor: Any, f: browse.TraceFilter) -> list[ColumnElement[bool]]:
    conds: list[ColumnElement[bool]] = []
    if not actor.clearance:
        conds.append(TraceRow.restricted.is_(False))
    elif f.restricted_only:
        conds.append(TraceRow.restricted.is_(True))
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
    for name in browse.COLUMN_FILTERS:
        value = getattr(f, name)
        if value:
            conds.append(getattr(TraceRow, name) == value)
    if f.version_key and f.version_value:
        conds.append(TraceRow.versions[f.version_key].as_string() == f.version_value)
    t = f.text.strip()
    if t:
        esc = t.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        like = f"%{esc}%"
        conds.append(
            or_(
                TraceRow.trace_id == t,
                TraceRow.query.ilike(like, escape="\\"),
                TraceRow.answer_text.ilike(like, escape="\\"),
            )
        )
    return conds


def old_listing(engine: Engine, actor: Any, f: browse.TraceFilter, sort: str) -> list[str]:
    order: list[Any] = {
        "newest": [TraceRow.at.desc(), TraceRow.id.desc()],
        "oldest": [TraceRow.at.asc(), TraceRow.id.asc()],
        "score_desc": [TraceRow.top_score.desc().nulls_last(), TraceRow.id.desc()],
    }[sort]
    with engine.connect() as c:
        stmt = select(TraceRow.trace_id).where(*_old_conditions(actor, f))
        return list(c.scalars(stmt.order_by(*order)))


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def python_text_matches(engine: Engine, actor: Any, needle: str) -> set[str]:
    """Plain Python: SQLite's lower() and LIKE fold ASCII letters only."""
    t = needle.strip()
    low = t.translate(_ASCII_LOWER)
    out: set[str] = set()
    with engine.connect() as c:
        rows = c.execute(
            select(TraceRow.trace_id, TraceRow.query, TraceRow.answer_text, TraceRow.restricted)
        )
        for tid, q, a, restricted in rows:
            if restricted and not actor.clearance:
                continue
            if (
                tid == t
                or low in (q or "").translate(_ASCII_LOWER)
                or low in (a or "").translate(_ASCII_LOWER)
            ):
                out.add(tid)
    return out


def listed(engine: Engine, actor: Any, f: browse.TraceFilter, sort: str) -> list[str]:
    out: list[str] = []
    page = 1
    while True:
        rows = browse.list_traces(engine, actor, f, page=page, page_size=97, sort=sort)
        out += [r.trace_id for r in rows]
        if len(rows) < 97:
            return out
        page += 1


def assert_same(
    engine: Engine, f: browse.TraceFilter, sorts: tuple[str, ...] = ("newest",)
) -> None:
    if engine.dialect.name == "postgresql" and "\x00" in f.text:
        # the old query raised (PostgreSQL text holds no NUL); now nothing matches
        for actor in (CLEARED, UNCLEARED):
            assert listed(engine, actor, f, "newest") == []
            assert browse.count_traces(engine, actor, f) == 0
        return
    for actor in (CLEARED, UNCLEARED):
        for sort in sorts:
            want = old_listing(engine, actor, f, sort)
            assert listed(engine, actor, f, sort) == want, (f, actor.clearance, sort)
        assert browse.count_traces(engine, actor, f) == len(want), (f, actor.clearance)


def search_strings(items: list[Trace], seed: int) -> list[str]:
    rng = random.Random(seed)
    out = list(HOSTILE) + list(WORDS)
    for t in rng.sample(items, 25):
        body = t.query + " " + t.answer_text
        lo = rng.randrange(len(body))
        piece = body[lo : lo + rng.randint(1, 14)]
        out.append("".join(ch.upper() if rng.random() < 0.3 else ch for ch in piece))
    out += [items[3].trace_id, items[7].trace_id.upper(), "r-00", "-0001", "r-0001", "r-0051"]
    return out


FILTERS = [
    browse.TraceFilter(),
    browse.TraceFilter(customer_tier="enterprise"),
    browse.TraceFilter(language="de"),
    browse.TraceFilter(document_type="contract"),
    browse.TraceFilter(model_version="m-b"),
    browse.TraceFilter(ranking_mode="semantic_reranker"),
    browse.TraceFilter(policy_version="pol@2"),
    browse.TraceFilter(user_role="legal_counsel"),
    browse.TraceFilter(reason_code="restricted_topic"),
    browse.TraceFilter(version_key="index", version_value="kb-2"),
    browse.TraceFilter(version_key="prompt", version_value="p@1"),
    browse.TraceFilter(version_key="reranker", version_value="none"),
    browse.TraceFilter(version_key="flavour", version_value="x"),
    browse.TraceFilter(decisions=("abstain",)),
    browse.TraceFilter(decisions=("clarify", "escalate")),
    browse.TraceFilter(decisions=("answer", "(none)")),
    browse.TraceFilter(decisions=("(none)",)),
    browse.TraceFilter(customer_tier="team", decisions=("answer",), language="en"),
    browse.TraceFilter(restricted_only=True),
    browse.TraceFilter(text="refund", customer_tier="business"),
    browse.TraceFilter(text="legal", decisions=("abstain", "answer")),
]


@pytest.fixture
def searched(any_engine: Engine) -> tuple[Engine, list[Trace]]:
    items = random_traces(260, seed=18)
    assert import_traces(any_engine, items, batch_size=64).added == len(items)
    return any_engine, items


def test_filters_and_listing_by_decision_match_the_old_query(
    searched: tuple[Engine, list[Trace]],
) -> None:
    engine, _items = searched
    for f in FILTERS:
        assert_same(engine, f, ("newest", "oldest"))


@pytest.mark.parametrize(("few", "dense"), [(0, 10**9), (0, 0), (5000, 50_000)])
def test_text_search_matches_the_old_query_and_plain_python(
    searched: tuple[Engine, list[Trace]], few: int, dense: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # few=0: every search counts as having many matches, so the list walks the time index;
    # dense=0: every search counts as having a great many, so each trace's text is matched
    monkeypatch.setattr(browse, "FEW_MATCHES", few)
    monkeypatch.setattr(browse, "DENSE_MATCHES", dense)
    engine, items = searched
    for needle in search_strings(items, seed=few):
        f = browse.TraceFilter(text=needle)
        sorts = ("newest", "oldest", "score_desc") if needle == "abc" else ("newest",)
        assert_same(engine, f, sorts)
        if engine.dialect.name == "sqlite":
            for actor in (CLEARED, UNCLEARED):
                got = set(listed(engine, actor, f, "newest"))
                if needle.strip():
                    assert got == python_text_matches(engine, actor, needle), (needle, actor)


@pytest.mark.parametrize("window", [1, 40, 250])
def test_short_text_lists_from_the_newest_window_then_the_whole_table_as_before(
    searched: tuple[Engine, list[Trace]], window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # one or two characters: no trigrams; the list looks among the newest (oldest) `window`
    # traces first, and reads them all when the page is not among them
    monkeypatch.setattr(browse, "WINDOW", window)
    engine, items = searched
    short = [n for n in search_strings(items, seed=window) if 0 < len(n.strip()) < 3]
    assert len(short) > 15
    for needle in [*short, "q", "zz"]:
        f = browse.TraceFilter(text=needle)
        assert_same(engine, f, ("newest", "oldest"))
        for actor in (CLEARED, UNCLEARED):
            for page in (1, 2, 5):
                want = old_listing(engine, actor, f, "oldest")[(page - 1) * 7 : page * 7]
                rows = browse.list_traces(engine, actor, f, page=page, page_size=7, sort="oldest")
                assert [r.trace_id for r in rows] == want, (needle, page)


@pytest.mark.parametrize(("window", "limit"), [(1, 3), (40, 5), (250, 1000)])
def test_two_characters_count_from_the_newest_window_then_the_trigram_table(
    searched: tuple[Engine, list[Trace]], window: int, limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # two characters: counted among the newest `window` traces first, then among the
    # matches of the trigrams that start or end with them
    monkeypatch.setattr(browse, "WINDOW", window)
    engine, items = searched
    short = [n for n in search_strings(items, seed=window) if len(n.strip()) == 2]
    for needle in [*short, "zz", "ab", "AB", "x ", " x", "%_", "r-"]:
        f = browse.TraceFilter(text=needle)
        for actor in (CLEARED, UNCLEARED):
            exact = browse.count_traces(engine, actor, f)
            want = browse.MatchCount(limit, True) if exact > limit else browse.MatchCount(exact)
            assert browse.count_for_page(engine, actor, f, limit=limit) == want, needle


@pytest.mark.parametrize("window", [1, 20_000])
def test_two_characters_find_texts_too_short_for_a_trigram(
    any_engine: Engine, window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a question or answer of 0-2 characters has no trigram; one of 128 trigrams (130
    # characters) has a size of two bytes ending in 0, which is not a text without trigrams
    monkeypatch.setattr(browse, "WINDOW", window)
    long = "w" * 130
    at = dt.datetime(2025, 5, 1, tzinfo=UTC)
    items = [
        make_trace("t-short-q", at, query="Qz", answer_text=long),
        make_trace("t-short-a", at, query=long, answer_text="qZ"),
        make_trace("t-empty-a", at, query="xqz" + long, answer_text=""),
        make_trace("t-long", at, query=long, answer_text=long),
        make_trace("t-other", at, query="ab", answer_text="q"),
        make_trace("qz", at, query=long, answer_text="z"),
    ]
    assert import_traces(any_engine, items).added == len(items)
    for needle in ("qz", "QZ", "ww", "ab", "q", "z", "zz"):
        f = browse.TraceFilter(text=needle)
        assert_same(any_engine, f, ("newest", "oldest"))
        for actor in (CLEARED, UNCLEARED):
            want = set(old_listing(any_engine, actor, f, "newest"))
            assert browse.count_for_page(any_engine, actor, f) == browse.MatchCount(len(want))
    assert set(listed(any_engine, CLEARED, browse.TraceFilter(text="qz"), "newest")) == {
        "t-short-q", "t-short-a", "t-empty-a", "qz",
    }  # fmt: skip


def test_the_count_from_a_listed_page() -> None:
    assert browse.count_from_listing(1, 25, 0) == browse.MatchCount(0)
    assert browse.count_from_listing(1, 25, 7) == browse.MatchCount(7)
    assert browse.count_from_listing(3, 25, 24) == browse.MatchCount(74)
    assert browse.count_from_listing(1, 25, 25) is None  # a full page: more may follow
    assert browse.count_from_listing(3, 25, 0) is None  # beyond the last page: unknown


@pytest.mark.parametrize(("limit", "dense"), [(0, 50_000), (4, 0), (30, 50_000), (10_000, 0)])
def test_the_pages_count_is_exact_up_to_its_limit_and_says_more_beyond(
    searched: tuple[Engine, list[Trace]], limit: int, dense: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(browse, "DENSE_MATCHES", dense)
    engine, items = searched
    restricted = [t for t in items if t.attributes.get("restricted")]
    needles = [*search_strings(items, seed=limit), restricted[0].trace_id]
    for needle in needles:
        for f in (
            browse.TraceFilter(text=needle),
            browse.TraceFilter(text=needle, customer_tier="team"),
            browse.TraceFilter(text=needle, restricted_only=True),
        ):
            for actor in (CLEARED, UNCLEARED):
                exact = browse.count_traces(engine, actor, f)
                got = browse.count_for_page(engine, actor, f, limit=limit)
                bounded = exact > limit and needle.strip()  # blank text: no text search
                want = browse.MatchCount(limit, True) if bounded else browse.MatchCount(exact)
                assert got == want, (needle, f, actor.clearance)
    # without text the count is exact whatever the limit
    for actor in (CLEARED, UNCLEARED):
        got = browse.count_for_page(engine, actor, browse.TraceFilter(), limit=3)
        assert got == browse.MatchCount(browse.count_traces(engine, actor, browse.TraceFilter()))


def test_search_follows_a_purge_and_a_reimport(searched: tuple[Engine, list[Trace]]) -> None:
    engine, items = searched
    probes = [browse.TraceFilter(text=t) for t in ("refund", "ÉCLAIR", "legal hold", "100%")]
    report = retention.purge_older_than(
        engine, ADMIN, 1, now=dt.datetime(2025, 5, 4, tzinfo=UTC), batch=50
    )
    assert report.deleted > 0
    for f in probes:
        assert_same(engine, f)
    assert import_traces(engine, items, batch_size=64).added == report.deleted
    for f in probes:
        assert_same(engine, f)
    # a restricted mark changes no text: the search still follows
    with engine.begin() as c:
        c.execute(update(TraceRow).values(restricted=True, restricted_mark="restricted")
                  .where(TraceRow.trace_id.in_([t.trace_id for t in items[:40]])))  # fmt: skip
    for f in probes:
        assert_same(engine, f)


def test_backfill_on_upgrade_indexes_the_stored_traces(
    searched: tuple[Engine, list[Trace]],
) -> None:
    engine, items = searched
    cfg = alembic_config(engine)
    command.downgrade(cfg, "0017")
    assert "traces_fts" not in inspect(engine).get_table_names()
    command.upgrade(cfg, "head")
    for t in ("refund", "Straße", "50_50", items[5].trace_id, "NEAR(a b)"):
        assert_same(engine, browse.TraceFilter(text=t))
    assert_same(engine, browse.TraceFilter(version_key="index", version_value="kb-3"))


def test_the_database_uses_its_search_objects(any_engine: Engine) -> None:
    """The fast paths exist: the trigram table on SQLite, pg_trgm indexes on PostgreSQL, and
    the filters' indexes are used for the list (no scan of every trace)."""
    import_traces(any_engine, random_traces(30, seed=3))
    with any_engine.connect() as c:
        if any_engine.dialect.name == "sqlite":
            sql = "select name from sqlite_master where type = 'index' and tbl_name = 'traces'"
        else:
            sql = "select indexname from pg_indexes where tablename = 'traces'"
        names = set(c.scalars(text(sql)))
        assert {"ix_traces_tier_at", "ix_traces_decision_at", "ix_traces_policy_at"} <= names
        assert {"ix_traces_version_index_at", "ix_traces_version_prompt_at"} <= names
        if any_engine.dialect.name == "sqlite":
            assert c.execute(text("select count(*) from traces_fts")).scalar_one() == 30
            sql = (
                "EXPLAIN QUERY PLAN SELECT id FROM traces "
                "WHERE traces.versions_index = 'kb-1' "
                "ORDER BY at DESC, id DESC LIMIT 25"
            )
            plan = " ".join(str(r[-1]) for r in c.execute(text(sql)))
            assert "ix_traces_version_index_at" in plan, plan
        else:
            assert {"ix_traces_query_trgm", "ix_traces_answer_trgm"} <= names


def test_demo_traces_search_and_filter_as_before(trace_demo_engine: Engine) -> None:
    engine = trace_demo_engine
    with engine.connect() as c:
        some = list(c.scalars(select(TraceRow.trace_id).order_by(TraceRow.id).limit(3)))
        tier = c.scalar(select(TraceRow.customer_tier).where(TraceRow.customer_tier.is_not(None)))
        n = c.scalar(select(func.count()).select_from(TraceRow))
    assert n and n > 1000
    for f in (
        browse.TraceFilter(),
        browse.TraceFilter(text=some[1]),
        browse.TraceFilter(text="refund"),
        browse.TraceFilter(text="Legal HOLD"),
        browse.TraceFilter(text='"refund" NEAR(*)'),
        browse.TraceFilter(customer_tier=tier),
        browse.TraceFilter(decisions=("abstain", "clarify")),
        browse.TraceFilter(version_key="index", version_value="kb-2025-q2"),
    ):
        assert_same(engine, f)
