"""metamorphic perturbations of evaluation runs: the pipeline's answer to each perturbed input,
linked to the output it is compared with

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 09:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "eval_perturbed_outputs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("output_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=40), nullable=False),
        sa.Column("perturbation", sa.JSON(), nullable=False),
        sa.Column("decision", sa.String(length=40), nullable=True),
        sa.Column("reason_code", sa.String(length=60), nullable=True),
        sa.Column("score", sa.Double(), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("cited_doc_ids", sa.JSON(), nullable=False),
        sa.Column("infra_error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["output_id"],
            ["eval_outputs.id"],
            name=op.f("fk_eval_perturbed_outputs_output_id_eval_outputs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_eval_perturbed_outputs")),
        sa.UniqueConstraint(
            "output_id", "kind", name=op.f("uq_eval_perturbed_outputs_output_id_kind")
        ),
    )


def downgrade() -> None:
    op.drop_table("eval_perturbed_outputs")
