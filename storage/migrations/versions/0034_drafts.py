"""People's drafts in the database (drafts), issue 33

The app runs as several servers behind one address, and a session lives on one of them: the
unsaved wording a person is editing (and later other drafts) was held in that server's memory
and lost when it went down. A draft is now one row per user and draft key, a JSON payload and
a version that counts its saves (a save from a stale tab is refused, not written over a newer
one); the rows go with their user.

Revision ID: 0034
Revises: 0033
Create Date: 2026-12-05 10:50:30.027312
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import storage.models

revision: str = "0034"
down_revision: str | None = "0033"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "drafts",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=120), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", storage.models.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", storage.models.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_drafts_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("user_id", "key", name=op.f("pk_drafts")),
    )


def downgrade() -> None:
    op.drop_table("drafts")
