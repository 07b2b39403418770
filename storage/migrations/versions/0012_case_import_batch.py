"""the import batch a case came in with (cases.import_batch), for runs on a chosen subset

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01 17:00:00

Cases that existed before this revision have no batch (NULL): they were created on the form or
imported before batches were recorded.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # a plain ADD COLUMN and an index: no row is copied
    op.add_column("cases", sa.Column("import_batch", sa.String(length=200), nullable=True))
    op.create_index("ix_cases_import_batch", "cases", ["import_batch"])


def downgrade() -> None:
    op.drop_index("ix_cases_import_batch", table_name="cases")
    with op.batch_alter_table("cases", schema=None) as batch_op:
        batch_op.drop_column("import_batch")
