"""LLM-judge labels of a run's outputs (judge_labels), compared with the experts' agreed labels

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01 17:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import storage.models

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "judge_labels",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "run_id",
            sa.Integer(),
            sa.ForeignKey("eval_runs.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "case_id", sa.Integer(), sa.ForeignKey("cases.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("repeat", sa.Integer(), nullable=False),
        sa.Column("judge", sa.String(length=200), nullable=False),
        sa.Column("decision", sa.String(length=40), nullable=True),
        sa.Column("reason_codes", sa.JSON(), nullable=False),
        sa.Column("output_acceptable", sa.Boolean(), nullable=True),
        sa.Column("created_at", storage.models.UTCDateTime(timezone=True), nullable=False),
        sa.Column("created_by", sa.String(length=320), nullable=False),
        sa.UniqueConstraint("run_id", "case_id", "repeat", "judge"),
    )
    op.create_index("ix_judge_labels_run", "judge_labels", ["run_id", "judge"])


def downgrade() -> None:
    op.drop_index("ix_judge_labels_run", table_name="judge_labels")
    op.drop_table("judge_labels")
