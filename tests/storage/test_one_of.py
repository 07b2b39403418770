"""``storage.db.one_of`` (``= ANY(array)`` on PostgreSQL) selects exactly what ``IN`` selects,
on SQLite and PostgreSQL: texts with quotes, commas, braces and accents, integers, an empty
list and a list of thousands; and the importer's duplicate check that uses it still skips
stored traces."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, select

from storage.db import one_of, read_session
from storage.models import Trace
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
