"""How fresh the traces are, for the Monitoring page: the newest trace's time, every live
source (its last successful sync or receive and its lag), and when the last file import
finished. Three cheap reads (an index end each, and the sources table); the words are
:func:`review.traces.live.display.freshness_lines`."""

from __future__ import annotations

from sqlalchemy import Engine, func, select

from review.core.terms import ImportStatus
from review.traces.live import sources
from review.traces.live.display import Freshness
from storage.db import read_session
from storage.models import Trace, TraceImport

__all__ = ["read_freshness"]


def read_freshness(engine: Engine) -> Freshness:
    with read_session(engine) as s:
        newest = s.scalar(select(func.max(Trace.at)))
        last_import = s.scalar(
            select(func.max(TraceImport.finished_at)).where(
                TraceImport.status == ImportStatus.done.value
            )
        )
    return Freshness(
        newest_trace_at=newest,
        last_import_at=last_import,
        sources=tuple(sources.list_sources(engine)),
    )
