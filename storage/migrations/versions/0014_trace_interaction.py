"""Interaction after a response (monitoring signals): traces.reformulated and
traces.citation_opened, and their daily counts in trace_rollup

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01 17:50:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ROLLUP = ("reformulation_logged", "reformulated", "citation_logged", "citation_opened")


def upgrade() -> None:
    # plain ADD COLUMN (no table copy, also on SQLite: the traces table can be large)
    op.add_column("traces", sa.Column("reformulated", sa.Boolean(), nullable=True))
    op.add_column("traces", sa.Column("citation_opened", sa.Boolean(), nullable=True))
    for name in _ROLLUP:
        op.add_column(
            "trace_rollup", sa.Column(name, sa.Integer(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("trace_rollup") as batch:
        for name in reversed(_ROLLUP):
            batch.drop_column(name)
    with op.batch_alter_table("traces") as batch:
        batch.drop_column("citation_opened")
        batch.drop_column("reformulated")
