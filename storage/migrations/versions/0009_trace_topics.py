"""the question's topics on traces (traces.topics), which the gate's restricted-topic check reads

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 14:30:00

Traces imported before this revision have NULL topics: not classified, so replaying a policy
with restricted topics on them fails closed (they are counted as not replayable).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # a plain ADD COLUMN: SQLite and PostgreSQL add a nullable column without copying rows
    op.add_column("traces", sa.Column("topics", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("traces", schema=None) as batch_op:
        batch_op.drop_column("topics")
