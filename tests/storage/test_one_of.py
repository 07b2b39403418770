"""``storage.db.one_of`` (``= ANY(array)`` on PostgreSQL) selects exactly what ``IN`` selects,
on SQLite and PostgreSQL: texts with quotes, commas, braces and accents, integers, an empty
list and a list of thousands; and the importer's duplicate check that uses it still skips
stored traces."""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, func, select

from storage.db import SQLITE_IN_LIMIT, one_of, read_session
from storage.models import Case, CaseSlice, Trace
from tests.helpers.bulk import BIG, add_cases
from tests.helpers.traces import import_traces, make_trace

ODD_IDS = ['a"b', "c,d", "{e}", "f'g", "ÄÖ ü", "h\\i", "NULL", "", " j "]


def _both(engine: Engine, column: Any, values: list[Any]) -> tuple[list[Any], list[Any]]:
    with read_session(engine) as s:
        stmt = select(Trace.trace_id).order_by(Trace.trace_id)
        got = list(s.scalars(stmt.where(one_of(s, column, values))))
        want = list(s.scalars(stmt.where(column.in_(values))))
    return got, want


def test_one_of_selects_what_in_selects(any_engine: Engine) -> None:
    stored = [x for x in ODD_IDS if x.strip()] + [f"t{i}" for i in range(40)]
    import_traces(any_engine, [make_trace(t) for t in stored])
    with read_session(any_engine) as s:
        pks = list(s.scalars(select(Trace.id).order_by(Trace.id)))
    cases: list[tuple[Any, list[Any]]] = [
        (Trace.trace_id, ODD_IDS),
        (Trace.trace_id, ["t1", "t1", "missing", "T1"]),
        (Trace.trace_id, []),
        (Trace.trace_id, [f"t{i}" for i in range(0, 5000, 3)]),
        (Trace.id, pks[::2]),
        (Trace.id, [-1, 0, 2**31 - 1]),
    ]
    for column, values in cases:
        got, want = _both(any_engine, column, values)
        assert got == want, values[:5]
    got, _ = _both(any_engine, Trace.trace_id, ODD_IDS)
    assert got == sorted(x for x in ODD_IDS if x.strip())


def test_reimport_skips_stored_traces_found_with_one_of(any_engine: Engine) -> None:
    traces = [make_trace(t) for t in ['q"1', "q,2", "{q3}"]]
    first = import_traces(any_engine, traces)
    again = import_traces(any_engine, traces)
    assert (first.added, again.added, again.skipped) == (3, 0, 3)


def test_one_of_takes_a_list_longer_than_a_statements_parameters(any_engine: Engine) -> None:
    """70,000 values (PostgreSQL takes 65,535 parameters a statement, common SQLite builds
    32,766): one parameter on either engine, the same rows as the values name; with
    duplicates, strings, values that match nothing, integers past 32 and 64 bits and a NumPy
    integer."""
    ids = add_cases(any_engine, BIG)
    keys = [f"K{i:06d}" for i in range(1, BIG + 1)]
    wanted_ids = [*ids[::2], *ids[:10], 0, -5, 2**31 + 7, 2**63 + 1, np.int64(ids[1])]
    wanted_keys = [*keys[1::2], *keys[:5], "missing", "K'1", "Ä"]
    with read_session(any_engine) as s:
        got = set(s.scalars(select(Case.id).where(one_of(s, Case.id, wanted_ids))))
        assert got == set(ids[::2]) | set(ids[:10]) | {ids[1]}
        got_keys = list(s.scalars(select(Case.key).where(one_of(s, Case.key, wanted_keys))))
        assert sorted(got_keys) == sorted(set(keys[1::2]) | set(keys[:5]))
        assert list(s.scalars(select(Case.id).where(one_of(s, Case.id, [])))) == []
        big = [2**31 + i for i in range(BIG)]
        assert list(s.scalars(select(Case.id).where(one_of(s, Case.id, big)))) == []
        assert s.scalar(select(func.count()).where(one_of(s, Case.id, iter(ids)))) == BIG
        # the statement holds one parameter, not 70,000
        stmt = select(Case.id).where(one_of(s, Case.id, wanted_ids))
        compiled = stmt.compile(s.get_bind(), compile_kwargs={"render_postcompile": True})
        assert len(compiled.construct_params()) == 1
        if any_engine.dialect.name == "postgresql":
            # the array of the column's type: int4 = ANY(int8[]) is not hashed by PostgreSQL,
            # which then compares every row with every value (seconds at 70,000)
            assert "= ANY (%(param_1)s::INTEGER[])" in str(compiled), str(compiled)


def test_one_of_refuses_values_with_no_one_meaning_on_both_engines(any_engine: Engine) -> None:
    with read_session(any_engine) as s:
        for bad in (True, np.bool_(False), dt.date(2026, 1, 1), 1.5, None, b"x"):
            with pytest.raises(TypeError, match="one_of takes integers or strings"):
                one_of(s, Case.id, [1, bad])


def test_a_long_list_on_sqlite_still_seeks_the_columns_index(engine: Engine) -> None:
    """Past ``SQLITE_IN_LIMIT`` values SQLite reads the list from ``json_each`` and seeks each
    value in the column's index (a primary key, a unique key, a plain index), never scanning
    the table; a short list stays a plain IN."""
    n = SQLITE_IN_LIMIT + 1
    with read_session(engine) as s:
        cases: list[tuple[Any, list[Any], str]] = [
            (Case.id, list(range(n)), "INTEGER PRIMARY KEY"),
            (Case.key, [f"k{i}" for i in range(n)], "INDEX sqlite_autoindex_cases_1"),
            (CaseSlice.slice, [f"s{i}" for i in range(n)], "INDEX ix_case_slices_slice"),
        ]
        for column, values, index in cases:
            stmt = select(column).where(one_of(s, column, values))
            compiled = stmt.compile(s.get_bind(), compile_kwargs={"render_postcompile": True})
            assert "json_each" in str(compiled)
            params = compiled.construct_params()
            args = tuple(params[k] for k in compiled.positiontup or ())
            plan = " | ".join(
                r[3] for r in s.connection().exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}", args)
            )
            assert "SEARCH" in plan and index in plan, plan
            assert f"SCAN {column.class_.__tablename__}" not in plan, plan
        short = select(Case.id).where(one_of(s, Case.id, list(range(SQLITE_IN_LIMIT))))
        assert "json_each" not in str(short.compile(s.get_bind()))
