"""The edit group of a recorded edit (case_edits.edit_group), issue 35

One edit in the Case builder can take the answer out of several decisive documents: it stores
one provenance row per document, all with the same operator, parameters, author and time and
the same edit group, so that history shows them as one action. Rows recorded before this
revision have none (each was an action of its own).

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-04 18:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("case_edits", schema=None) as batch_op:
        batch_op.add_column(sa.Column("edit_group", sa.String(length=32), nullable=True))
        batch_op.create_index(batch_op.f("ix_case_edits_edit_group"), ["edit_group"])


def downgrade() -> None:
    with op.batch_alter_table("case_edits", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_case_edits_edit_group"))
        batch_op.drop_column("edit_group")
