"""daily rollup of the monitoring signals (trace_rollup), filled from the existing traces

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 07:10:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Segments as review.traces.rollup.DIMENSIONS had them when this revision was written.
_COLUMNS = (
    "policy_version",
    "model_version",
    "ranking_mode",
    "language",
    "customer_tier",
    "document_type",
    "user_role",
)
_VERSIONS = ("index", "prompt", "embedding", "reranker")


def _fill() -> None:
    bind = op.get_bind()
    pg = bind.dialect.name == "postgresql"
    day = "CAST((at AT TIME ZONE 'UTC') AS DATE)" if pg else "date(at)"
    true = "ungrounded" if pg else "ungrounded = 1"
    sums = (
        "COUNT(*), "
        "SUM(CASE WHEN decision = 'answer' AND reason_code = 'support_below_threshold' "
        "THEN 1 ELSE 0 END), "
        "SUM(CASE WHEN hits_after_filter = 0 THEN 1 ELSE 0 END), "
        f"SUM(CASE WHEN {true} THEN 1 ELSE 0 END), "
        "SUM(CASE WHEN feedback IN ('negative', 'expected_answer', 'answer_wrong') "
        "THEN 1 ELSE 0 END), "
        "SUM(CASE WHEN decision IS NULL OR (decision <> 'answer' AND reason_code IS NULL) "
        "THEN 1 ELSE 0 END)"
    )
    segments: list[tuple[str, str]] = [("''", "''")]
    segments += [(f"'{c}'", f"substr({c}, 1, 200)") for c in _COLUMNS]
    for v in _VERSIONS:
        expr = f"(versions ->> '{v}')" if pg else f"CAST(json_extract(versions, '$.{v}') AS TEXT)"
        segments.append((f"'version.{v}'", f"substr({expr}, 1, 200)"))
    for dim, value in segments:
        op.execute(
            sa.text(
                "INSERT INTO trace_rollup (dim, value, day, decision, traces, caveat, "
                "empty_retrieval, ungrounded, negative_feedback, missing_reason) "
                f"SELECT {dim}, {value}, {day}, COALESCE(decision, ''), {sums} "
                f"FROM traces WHERE {value} IS NOT NULL "
                "GROUP BY 2, 3, 4"
            )
        )


def upgrade() -> None:
    op.create_table(
        "trace_rollup",
        sa.Column("dim", sa.String(length=40), nullable=False),
        sa.Column("value", sa.String(length=200), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("decision", sa.String(length=40), nullable=False),
        sa.Column("traces", sa.Integer(), nullable=False),
        sa.Column("caveat", sa.Integer(), nullable=False),
        sa.Column("empty_retrieval", sa.Integer(), nullable=False),
        sa.Column("ungrounded", sa.Integer(), nullable=False),
        sa.Column("negative_feedback", sa.Integer(), nullable=False),
        sa.Column("missing_reason", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("dim", "value", "day", "decision", name=op.f("pk_trace_rollup")),
    )
    _fill()


def downgrade() -> None:
    op.drop_table("trace_rollup")
