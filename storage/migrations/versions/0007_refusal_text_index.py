"""partial index of the traces the wording check lints (refusal, follow-up, caveat texts)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 08:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# storage.models.REFUSAL_TEXTS_WHERE when this revision was written
WHERE = (
    "answer_text != '' AND ((decision IS NOT NULL AND decision != 'answer') OR "
    "(decision = 'answer' AND reason_code IS NOT NULL AND reason_code != 'false_premise'))"
)


def upgrade() -> None:
    with op.batch_alter_table("traces", schema=None) as batch_op:
        batch_op.create_index(
            "ix_traces_refusal_texts",
            ["id", "restricted"],
            unique=False,
            sqlite_where=sa.text(WHERE),
            postgresql_where=sa.text(WHERE),
        )


def downgrade() -> None:
    with op.batch_alter_table("traces", schema=None) as batch_op:
        batch_op.drop_index(
            "ix_traces_refusal_texts",
            sqlite_where=sa.text(WHERE),
            postgresql_where=sa.text(WHERE),
        )
