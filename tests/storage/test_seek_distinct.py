"""Distinct values found by index seeks (storage.db.seek_distinct) are the values
``SELECT DISTINCT ... ORDER BY ... LIMIT`` gives, in the same order, on SQLite and PostgreSQL;
the filter pickers that use them (trace facets, audit dimensions) offer what they did."""

from __future__ import annotations

import random
from typing import Any

from sqlalchemy import Engine, select

from review.audits import plans
from review.audits.population import NONE, stratum_column
from review.traces import facets as trace_facets
from storage.db import distinct_values, leads_an_index, read_session, seek_distinct
from storage.models import Trace
from tests.helpers.traces import import_traces, make_trace

VALUES = ["helpful", "Helpful", "not_helpful", "ÄÖ", "a b", "z", "10", "9", "", "'q'"]


def _load(engine: Engine, seed: int) -> None:
    rng = random.Random(seed)
    import_traces(
        engine,
        [
            make_trace(
                f"d{i}",
                feedback=rng.choice([*VALUES, None, None]),
                versions={"policy": p}
                if (p := rng.choice(["v1", "v10", "v2", "V2", None]))
                else {},
                ranking_mode=rng.choice(["vector", "bm25", None]),
            )
            for i in range(300)
        ],
    )


def _distinct(engine: Engine, column: Any, limit: int) -> tuple[list[Any], bool]:
    """The reference: SELECT DISTINCT in the database's order, and whether a null is held."""
    with read_session(engine) as s:
        stmt = select(column).where(column.is_not(None)).distinct().order_by(column).limit(limit)
        return list(s.scalars(stmt)), _any_null(engine, column)


def _any_null(engine: Engine, column: Any) -> bool:
    with read_session(engine) as s:
        return s.execute(select(Trace.id).where(column.is_(None)).limit(1)).first() is not None


def test_seeks_give_the_distinct_values_in_order(any_engine: Engine) -> None:
    _load(any_engine, 7)
    for column in (Trace.feedback, Trace.policy_version, Trace.ranking_mode, Trace.decision):
        assert leads_an_index(column)
        for limit in (1, 3, 200):
            want, want_null = _distinct(any_engine, column, limit)
            with read_session(any_engine) as s:
                got, has_null = seek_distinct(s, column, limit)
            assert got == want, (column, limit)
            assert has_null == want_null
    assert not leads_an_index(Trace.versions["index"].as_string())
    assert not leads_an_index(Trace.query)  # no index starts with it


def test_pickers_offer_what_a_distinct_read_offers(any_engine: Engine) -> None:
    _load(any_engine, 8)
    facets = trace_facets.facet_values(any_engine)
    for name in ("feedback", "policy_version"):
        want, _ = _distinct(any_engine, getattr(Trace, name), 200)
        assert facets[name] == [str(v) for v in want]
    for dim in ("feedback", "policy_version", "ranking_mode"):
        want, has_null = _distinct(any_engine, stratum_column(dim), 100)
        expected = ([NONE] if has_null else []) + [str(v) for v in want]
        assert plans.dimension_values(any_engine, dim) == expected[:100]
        assert plans.dimension_values(any_engine, dim, limit=2) == expected[:2]


def test_distinct_values_by_seeks_or_by_one_scan_past_the_cap(any_engine: Engine) -> None:
    """Both ways (seeks within the cap, one DISTINCT past it) give the distinct non-null
    values, and a condition fixed by equality narrows the seeks as it would the DISTINCT."""
    _load(any_engine, 3)
    for column in (Trace.feedback, Trace.policy_version, Trace.ranking_mode):
        want, _null = _distinct(any_engine, column, 1000)
        for cap in (0, 1, 2, len(want) - 1, len(want), 1000):
            with read_session(any_engine) as s:
                got = distinct_values(s, column, cap=max(cap, 0))
            assert sorted(got) == sorted(want), (column, cap)
    with read_session(any_engine) as s:
        within, _null = seek_distinct(s, Trace.feedback, 100, Trace.ranking_mode == "bm25")
        reference = s.scalars(
            select(Trace.feedback)
            .where(Trace.ranking_mode == "bm25", Trace.feedback.is_not(None))
            .distinct()
            .order_by(Trace.feedback)
        ).all()
    assert within == list(reference)
