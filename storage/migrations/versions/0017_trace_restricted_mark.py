"""A person's mark on a trace's restricted status (traces.restricted_mark), issue 16

"restricted": an admin marked the trace restricted by hand; "cleared": an admin lifted the
unknown-document reason; NULL: no mark. The stored flag traces.restricted stays derived from
the rule (review.corpus.restricted_traces); after upgrading an existing database run
``workbench recompute-restricted`` once, so flags set at import by the old rule follow the
corpus as it is now.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-01 18:50:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # plain ADD COLUMN (no table copy, also on SQLite: the traces table can be large)
    op.add_column("traces", sa.Column("restricted_mark", sa.String(length=20), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("traces") as batch:
        batch.drop_column("restricted_mark")
