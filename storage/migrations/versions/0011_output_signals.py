"""the gate's signals on run outputs (eval_outputs.signals), which the dry run re-decides from

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01 16:10:00

Outputs stored before this revision have NULL signals: nothing was logged, so a dry run of a
policy counts them as not re-decidable (a failure), never as answers.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # a plain ADD COLUMN: SQLite and PostgreSQL add a nullable column without copying rows
    op.add_column("eval_outputs", sa.Column("signals", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("eval_outputs", schema=None) as batch_op:
        batch_op.drop_column("signals")
