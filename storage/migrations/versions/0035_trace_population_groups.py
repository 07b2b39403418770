"""The audit population counted by day in groups (trace_population_groups), and the number of
traces in a counter, issue 33

An audit plan's population per stratum (counts, smallest and largest id, sums of ids and of
sampling keys: the fingerprint) was counted from every trace of it, 0.4-0.7 s at a million
traces and ten times that at ten million; the stamp that tells whether the traces changed ran
a ``count(*)`` of the table. The same figures are now kept per UTC day and group of the audit
columns (decision, reason code, feedback, customer tier, language, restricted flag), and the
number of traces in ``counters.traces_rows``, by triggers on ``traces`` on both engines
(storage.population_groups says how, and holds the SQL). The backfill groups the traces
already stored.

Revision ID: 0035
Revises: 0034
Create Date: 2026-12-05 13:20:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from storage import population_groups as pg_groups

revision: str = "0035"
down_revision: str | None = "0034"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.create_table(
        pg_groups.TABLE,
        sa.Column("k", sa.Text(), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("decision", sa.String(length=40), nullable=True),
        sa.Column("reason_code", sa.String(length=60), nullable=True),
        sa.Column("feedback", sa.String(length=60), nullable=True),
        sa.Column("customer_tier", sa.String(length=60), nullable=True),
        sa.Column("language", sa.String(length=20), nullable=True),
        sa.Column("restricted", sa.Boolean(), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.Column("id_sum", sa.BigInteger(), nullable=False),
        sa.Column("key_sum", sa.BigInteger(), nullable=False),
        sa.Column("unkeyed", sa.BigInteger(), nullable=False),
        sa.Column("min_id", sa.BigInteger(), nullable=False),
        sa.Column("max_id", sa.BigInteger(), nullable=False),
        sa.Column("stale", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("k", name=op.f("pk_trace_population_groups")),
    )
    op.create_index("ix_trace_population_groups_day", pg_groups.TABLE, ["day"])
    op.execute(pg_groups.grouped_insert(dialect))
    op.execute(f"DELETE FROM counters WHERE name = '{pg_groups.COUNTER}'")
    op.execute(
        f"INSERT INTO counters (name, value, version) "
        f"SELECT '{pg_groups.COUNTER}', count(*), 1 FROM traces"
    )
    for statement in pg_groups.install_statements(dialect):
        op.execute(statement)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    for statement in pg_groups.drop_statements(dialect):
        op.execute(statement)
    op.execute(f"DELETE FROM counters WHERE name = '{pg_groups.COUNTER}'")
    op.drop_index("ix_trace_population_groups_day", table_name=pg_groups.TABLE)
    op.drop_table(pg_groups.TABLE)
