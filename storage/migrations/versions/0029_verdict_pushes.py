"""Verdicts pushed back to Phoenix (verdict_pushes), issue 31 item 3

`workbench push phoenix` and the Audit page write each audit verdict, failed stage and claim
judgment of a closed batch to its trace's root span in Phoenix as a span annotation. A row per
(source, item, reviewer, annotation name) records what Phoenix acknowledged (digest, label,
when, its id), so a second push writes nothing new and a newer verdict is sent as the new
value, and why the last attempt failed, so the next push retries it.

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-05 00:20:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import storage.models

revision: str = "0029"
down_revision: str | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "verdict_pushes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("source_id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("reviewer", sa.String(length=320), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("span_id", sa.String(length=16), nullable=False),
        sa.Column("verdict_id", sa.Integer(), nullable=True),
        sa.Column("label", sa.String(length=200), nullable=True),
        sa.Column("pushed_digest", sa.String(length=64), nullable=True),
        sa.Column("pushed_at", storage.models.UTCDateTime(timezone=True), nullable=True),
        sa.Column("phoenix_id", sa.String(length=200), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("failed_at", storage.models.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["source_id"],
            ["trace_sources.id"],
            name=op.f("fk_verdict_pushes_source_id_trace_sources"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["item_id"],
            ["audit_items.id"],
            name=op.f("fk_verdict_pushes_item_id_audit_items"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["verdict_id"],
            ["audit_verdicts.id"],
            name=op.f("fk_verdict_pushes_verdict_id_audit_verdicts"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_verdict_pushes")),
        sa.UniqueConstraint(
            "source_id",
            "item_id",
            "reviewer",
            "name",
            name=op.f("uq_verdict_pushes_source_id_item_id_reviewer_name"),
        ),
    )
    op.create_index(
        op.f("ix_verdict_pushes_source_id"), "verdict_pushes", ["source_id"], unique=False
    )
    op.create_index(op.f("ix_verdict_pushes_item_id"), "verdict_pushes", ["item_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_verdict_pushes_item_id"), table_name="verdict_pushes")
    op.drop_index(op.f("ix_verdict_pushes_source_id"), table_name="verdict_pushes")
    op.drop_table("verdict_pushes")
