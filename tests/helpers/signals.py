"""Every stored trace's gate signals, read row by row for the replay tests' references."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, select

from review.policy.gate import Signals
from storage.db import read_session
from storage.models import Trace


def trace_signals(engine: Engine, *extra: Any) -> list[tuple[Signals, tuple[Any, ...]]]:
    """(the trace's Signals for ``gate.decide``, its values of the ``extra`` trace columns)."""
    with read_session(engine) as s:
        rows = s.execute(
            select(
                Trace.ranking_mode,
                Trace.hits_after_filter,
                Trace.top_score,
                Trace.answerable,
                Trace.ambiguous,
                Trace.ungrounded,
                Trace.topics,
                *extra,
            )
        ).all()
    return [
        (
            Signals(r[0], r[1], r[2], r[3], r[4], r[5], None if r[6] is None else tuple(r[6])),
            tuple(r[7:]),
        )
        for r in rows
    ]
