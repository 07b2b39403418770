"""An audit population's terms per stratum read from the population groups, issue 33.

A plan's population per stratum (count, smallest and largest id, sum of ids, sum of sampling
keys mod 2**31: ``review.audits.plans.StratumCount``) counted from every trace grows with
the table. ``storage.population_groups`` keeps the same terms per UTC day and group of the
audit columns, in step with ``traces`` (triggers on both engines), so a population whose
filter and strata read only those columns is summed from the groups instead:

- whole UTC days of the time range from the groups (a few hundred rows a day, whatever the
  number of traces);
- the edges of the range that do not cover a whole day, and the days holding a stale group
  (one whose smallest or largest id was deleted), from the traces, through the index on
  ``at`` (a plain range on the column);
- both in one statement, grouped and ordered by the stratum in the database, so the rows and
  their order are those of the count of every trace.

:func:`stratum_terms` returns None when the groups cannot answer (a filter or stratum on
another column, an attribute filter, traces without a sampling key, too many stale days):
the caller counts the traces as before.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Final

from sqlalchemy import ColumnElement, and_, case, func, literal, or_, select, union_all
from sqlalchemy.orm import Session

from review.audits.population import (
    PopulationFilter,
    grouped_column,
    stratum_column,
    stratum_of,
)
from storage.models import Trace, TracePopulationGroup
from storage.population_groups import KEY_SUM_MOD

__all__ = ["MAX_STALE_DAYS", "Terms", "groups_answer", "stratum_terms"]

#: beyond this many days with a stale group in the range, the traces are counted instead
MAX_STALE_DAYS: Final = 60

#: (stratum, count, min id, max id, id sum, key sum)
Terms = tuple[str, int, int, int, int, int]

_DAY: Final = dt.timedelta(days=1)


def _naive_utc(at: dt.datetime | None) -> dt.datetime | None:
    if at is None or at.tzinfo is None:
        return at
    return at.astimezone(dt.UTC).replace(tzinfo=None)


def _midnight(day: dt.date) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day)


#: the flag column the groups keep besides the dimensions (a filter on it: who the population
#: holds, not who may see it, which the clearance module decides)
_FLAGS = frozenset({TracePopulationGroup.restricted.key})


def _group_col(dim: str) -> ColumnElement[Any] | None:
    name = dim if dim in _FLAGS else grouped_column(dim)
    if name is None:
        return None
    col: ColumnElement[Any] = getattr(TracePopulationGroup, name)
    return col


def groups_answer(flt: PopulationFilter, strata: Sequence[str]) -> bool:
    """Whether the groups hold the filter's columns and the strata."""
    return all(grouped_column(d) is not None for d in strata) and (
        flt.value_conditions(_group_col) is not None
    )


def stratum_terms(
    s: Session,
    flt: PopulationFilter,
    strata: Sequence[str],
    start: dt.datetime | None = None,
    end: dt.datetime | None = None,
) -> list[Terms] | None:
    """The population of ``flt`` per stratum of ``strata`` in the order of the database, from
    the groups and the edges of the time range; the range is [start, end) of ``traces.at``
    (naive UTC, or aware) within the filter's own dates. None when the groups cannot answer."""
    if not groups_answer(flt, strata):
        return None
    group_conds = flt.value_conditions(_group_col) or []
    start, end = _bounds(flt, _naive_utc(start), _naive_utc(end))
    if start is not None and end is not None and start >= end:
        return []
    # whole days: [first, stop) as dates (None: open)
    first = (
        None
        if start is None
        else start.date() + (_DAY if start != _midnight(start.date()) else dt.timedelta())
    )
    stop = None if end is None else end.date()
    edges: list[tuple[dt.datetime | None, dt.datetime | None]] = []
    if first is not None and stop is not None and first >= stop:
        edges.append((start, end))  # no whole day: the traces of the range
        whole = False
    else:
        whole = True
        if start is not None and first is not None and start != _midnight(first):
            edges.append((start, _midnight(first)))
        if end is not None and stop is not None and end != _midnight(stop):
            edges.append((_midnight(stop), end))
    g = TracePopulationGroup
    day_conds: list[ColumnElement[bool]] = []
    if first is not None:
        day_conds.append(g.day >= first)
    if stop is not None:
        day_conds.append(g.day < stop)
    stale: list[dt.date] = []
    if whole:
        stale = sorted(
            s.scalars(select(g.day).where(g.stale.is_(True), *day_conds).distinct()).all()
        )
        if len(stale) > MAX_STALE_DAYS:
            return None
        edges += [(_midnight(d), _midnight(d) + _DAY) for d in stale]

    parts: list[Any] = []
    if whole:
        gcols = [_group_col(d) for d in strata]
        parts.append(
            select(
                stratum_of([c for c in gcols if c is not None]).label("stratum"),
                g.n.label("n"),
                g.min_id.label("mn"),
                g.max_id.label("mx"),
                g.id_sum.label("ids"),
                g.key_sum.label("key_terms"),
                g.unkeyed.label("unkeyed"),
            ).where(*group_conds, *day_conds, *([g.day.not_in(stale)] if stale else []))
        )
    if edges:
        plain = replace(flt, date_from=None, date_to=None)  # the range is the edges'
        ranges = [
            and_(
                *([Trace.at >= a] if a is not None else []),
                *([Trace.at < b] if b is not None else []),
            )
            for a, b in edges
        ]
        key = Trace.sample_key
        parts.append(
            select(
                stratum_of([stratum_column(d, promoted=True) for d in strata]).label("stratum"),
                literal(1).label("n"),
                Trace.id.label("mn"),
                Trace.id.label("mx"),
                Trace.id.label("ids"),
                func.coalesce(key % KEY_SUM_MOD, 0).label("key_terms"),
                case((key.is_(None), 1), else_=0).label("unkeyed"),
            ).where(*plain.conditions(), or_(*ranges))
        )
    if not parts:
        return []
    u = union_all(*parts).subquery("u") if len(parts) > 1 else parts[0].subquery("u")
    rows = s.execute(
        select(
            u.c.stratum,
            func.sum(u.c.n),
            func.min(u.c.mn),
            func.max(u.c.mx),
            func.sum(u.c.ids),
            func.sum(u.c.key_terms),
            func.sum(u.c.unkeyed),
        )
        .group_by(u.c.stratum)
        .order_by(u.c.stratum)
    ).all()
    if any(int(r[6] or 0) for r in rows):
        return None  # traces without a sampling key: the count of the traces says so
    return [
        (str(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5]))
        for r in rows
        if int(r[1]) > 0
    ]


def _bounds(
    flt: PopulationFilter, start: dt.datetime | None, end: dt.datetime | None
) -> tuple[dt.datetime | None, dt.datetime | None]:
    """The intersection of [start, end) with the filter's dates."""
    f_start, f_end = flt.time_range()
    if f_start is not None:
        start = f_start if start is None else max(start, f_start)
    if f_end is not None:
        end = f_end if end is None else min(end, f_end)
    return start, end
