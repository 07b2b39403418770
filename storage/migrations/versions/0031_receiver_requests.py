"""The OTLP/HTTP receiver's request counts per source and status (receiver_requests), issue 31

The receiver is a process of its own; it counts the requests it answered per HTTP status (the
spans of the accepted ones, the last request's time) in memory and adds them to these rows
every few seconds, so the Traces page's sources panel shows what exporters sent and what was
refused (400, 401, 413, 415, 429, 503, ...).

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-05 03:20:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import storage.models

revision: str = "0031"
down_revision: str | None = "0030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "receiver_requests",
        sa.Column("source_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("requests", sa.BigInteger(), nullable=False),
        sa.Column("spans", sa.BigInteger(), nullable=False),
        sa.Column("last_at", storage.models.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["source_id"],
            ["trace_sources.id"],
            name=op.f("fk_receiver_requests_source_id_trace_sources"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("source_id", "status", name=op.f("pk_receiver_requests")),
    )


def downgrade() -> None:
    op.drop_table("receiver_requests")
