"""``one_of``: ``column IN (values)`` for a list of any length, on PostgreSQL and SQLite.
Apart from :mod:`storage.db` (which names it too) so that :mod:`storage.models` can use it
without an import cycle."""

from __future__ import annotations

import json
import numbers
from collections.abc import Iterable
from typing import Any

from sqlalchemy import BigInteger, Integer, SmallInteger, String, any_, bindparam, func, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

# Above this many values ``one_of`` on SQLite sends the list as one JSON parameter instead of
# one parameter per value: SQLite builds are limited to 32,766 (older ones to 999) parameters
# a statement. A shorter list stays a plain IN, whose plans are known.
SQLITE_IN_LIMIT = 10_000
_INT64 = (-(2**63), 2**63 - 1)


def _checked(values: Iterable[Any]) -> list[Any]:
    """The values that can match, after refusing any but integers and strings: a bool would
    reach SQLite's ``json_each`` as true/false and a date as text that compares unlike the
    stored value, so neither has one meaning on both engines. An integer past 64 bits matches
    nothing (no column of either engine holds it) and is left out."""
    out: list[Any] = []
    for v in values:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, numbers.Integral) and not isinstance(v, bool):
            # (a NumPy integer too) an integer no column holds matches nothing: left out
            if _INT64[0] <= int(v) <= _INT64[1]:
                out.append(int(v))
        else:
            raise TypeError(
                f"one_of takes integers or strings, not {type(v).__name__} ({v!r}): "
                "use column.in_() for a short list of other values"
            )
    return out


def _int_range(type_: Any) -> tuple[int, int | None]:
    """The values an integer column holds on PostgreSQL; (0, None) for any other type."""
    if isinstance(type_, BigInteger):
        return _INT64[0], _INT64[1]
    if isinstance(type_, SmallInteger):
        return -(2**15), 2**15 - 1
    if isinstance(type_, Integer):
        return -(2**31), 2**31 - 1
    return 0, None


def one_of(session: Session | Connection, column: Any, values: Iterable[Any]) -> Any:
    """``column IN (values)`` for a list of any length, of integers or strings: the one way to
    filter by a list whose length grows with the data (every case of a run, every key of an
    import file), since PostgreSQL refuses a statement of more than 65,535 parameters and
    SQLite one of more than 32,766.

    On PostgreSQL it is written ``column = ANY(:array)``, one parameter (psycopg also converts a
    statement too long for its cache again on every call, and an ``IN`` of a thousand
    parameters is one). On SQLite a list of more than :data:`SQLITE_IN_LIMIT` values is
    written ``column IN (SELECT value FROM json_each(:json))``, one parameter; the column's
    index is still used. A value other than an integer or a string raises TypeError."""
    values = _checked(values)
    bind = session.get_bind() if isinstance(session, Session) else session
    if bind.dialect.name == "postgresql":
        # The array has the column's own type: with another (int4 = ANY(int8[])) PostgreSQL
        # cannot hash the list and compares each row with every value, seconds at 70,000.
        # A value past the column's range can match nothing and is left out, as IN would.
        lo, hi = _int_range(column.type)
        if hi is not None:
            values = [v for v in values if not isinstance(v, int) or lo <= v <= hi]
        return column == any_(bindparam(None, values, type_=ARRAY(column.type)))
    if len(values) <= SQLITE_IN_LIMIT:
        return column.in_(values)
    as_json = json.dumps(values, ensure_ascii=False)
    listed = func.json_each(bindparam(None, as_json, type_=String())).table_valued("value")
    return column.in_(select(listed.c.value))
