"""The planner counts two traces to an instant, so key checks of traces use the primary key

A foreign-key check of a trace (an audit item's, a chunk's) looks it up by ``id = $1 AND at =
$2``. Each index that begins with ``at`` tied in cost with the primary key ``(id, at)`` and
the planner took the newest of them: a draw of 400 traces at ten million read 400 leaves of
``ix_traces_signals`` from disk one after the other (0.15 s of its 0.3 s), where its lock had
just read the primary key's. See storage.partitions.COLUMN_OPTIONS. PostgreSQL only; the
setting takes effect from the statistics this revision gathers (``ANALYZE traces (at)``: 24 s
at ten million traces, reads a sample, locks nothing a reader or writer waits for).

Revision ID: 0043
Revises: 0042
Create Date: 2026-12-06 10:20:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0043"
down_revision: str | None = "0042"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: as storage.partitions.COLUMN_OPTIONS["traces"] when this revision was written
N_DISTINCT = "-0.5"


def _partitions() -> list[str]:
    rows = op.get_bind().exec_driver_sql(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = 'traces'::regclass ORDER BY c.relname"
    )
    return [str(r[0]) for r in rows]


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for name in _partitions():
        op.execute(f"ALTER TABLE {name} ALTER COLUMN at SET (n_distinct = {N_DISTINCT})")
    op.execute("ANALYZE traces (at)")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for name in _partitions():
        op.execute(f"ALTER TABLE {name} ALTER COLUMN at RESET (n_distinct)")
    op.execute("ANALYZE traces (at)")
