"""Extreme dates written straight into a database, past every importer's checks (as someone
with write access to the database file could): the pages must still render."""

from __future__ import annotations

from sqlalchemy import Engine

EXTREME_DAYS = ("9999-12-31", "0001-01-01")


def store_extreme_dates(engine: Engine, *days: str) -> None:
    """Move one trace per ``day`` (with its all-traffic rollup rows) to that UTC day, and give
    one document version per ``day`` that effective date."""
    with engine.begin() as c:
        traces = c.exec_driver_sql(
            "SELECT id, at FROM traces ORDER BY id LIMIT ?", (len(days),)
        ).all()
        docs = c.exec_driver_sql("SELECT id FROM documents ORDER BY id LIMIT ?", (len(days),))
        for (pk, at), day in zip(traces, days, strict=True):
            c.exec_driver_sql(
                "UPDATE traces SET at = ? WHERE id = ?", (f"{day} 12:00:00.000000", pk)
            )
            c.exec_driver_sql(
                "UPDATE trace_rollup SET day = ? WHERE day = ? AND dim = '' AND NOT EXISTS "
                "(SELECT 1 FROM trace_rollup r WHERE r.day = ? AND r.dim = '')",
                (day, str(at)[:10], day),
            )
        for (pk,), day in zip(docs.all(), days, strict=True):
            c.exec_driver_sql("UPDATE documents SET effective_date = ? WHERE id = ?", (day, pk))
