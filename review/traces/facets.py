"""The values the traces list's filter pickers offer: those of the filterable columns and of
the version components."""

from __future__ import annotations

from sqlalchemy import Engine, select

from review.traces.browse import COLUMN_FILTERS
from storage.db import read_session, seek_distinct
from storage.models import Trace as TraceRow

__all__ = ["facet_values", "version_keys"]


#: Filterable columns with an index of their own: their values are read from the whole table.
_INDEXED_FACETS = ("policy_version", "feedback")


def facet_values(engine: Engine, limit: int = 200, sample: int = 20_000) -> dict[str, list[str]]:
    """Values offered in the filter pickers: every value of the indexed columns, and for the
    others the values of the newest ``sample`` traces (a full scan per column would take
    seconds at a million traces; an older value can still be reached by a link)."""
    out: dict[str, list[str]] = {}
    with read_session(engine) as s:
        newest = (
            select(*(getattr(TraceRow, n) for n in COLUMN_FILTERS))
            .order_by(TraceRow.at.desc())
            .limit(sample)
            .subquery()
        )
        for name in (*COLUMN_FILTERS, "feedback"):
            if name in _INDEXED_FACETS:  # one index seek per value
                found, _null = seek_distinct(s, getattr(TraceRow, name), limit)
                out[name] = [str(v) for v in found]
                continue
            col = newest.c[name]
            stmt = select(col).where(col.is_not(None)).distinct().order_by(col).limit(limit)
            out[name] = [str(v) for v in s.scalars(stmt)]
    return out


def version_keys(engine: Engine, sample: int = 1000) -> dict[str, list[str]]:
    """Component names in ``versions`` and their values, from the newest ``sample`` traces."""
    keys: dict[str, set[str]] = {}
    with read_session(engine) as s:
        for versions in s.scalars(
            select(TraceRow.versions).order_by(TraceRow.at.desc()).limit(sample)
        ):
            for k, v in (versions or {}).items():
                keys.setdefault(str(k), set()).add(str(v))
    return {k: sorted(v) for k, v in sorted(keys.items())}
