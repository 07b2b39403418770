"""Live trace sources and the spans they send (trace_sources, source_spans), issue 31

Traces no longer arrive only as files: the workbench syncs from a running Phoenix and receives
OpenTelemetry spans over OTLP/HTTP. A source row holds where a sync resumes (cursor, state),
its counts and its last error; the secret it needs is named, never stored. Spans wait in
source_spans until their trace is complete (root arrived and the grace period passed), then go
through the trace importer; the row stays (without its payload) so a re-read span is known
and the root span can carry the audit verdict back.

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-05 00:05:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import storage.models

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "trace_sources",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("url", sa.String(length=500), nullable=False),
        sa.Column("project", sa.String(length=200), nullable=False),
        sa.Column("secret_name", sa.String(length=200), nullable=True),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("grace_seconds", sa.Double(), nullable=False),
        sa.Column("cursor", sa.String(length=500), nullable=True),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("last_sync_at", storage.models.UTCDateTime(timezone=True), nullable=True),
        sa.Column("last_success_at", storage.models.UTCDateTime(timezone=True), nullable=True),
        sa.Column("newest_span_at", storage.models.UTCDateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("last_error_at", storage.models.UTCDateTime(timezone=True), nullable=True),
        sa.Column("spans_read", sa.BigInteger(), nullable=False),
        sa.Column("traces_added", sa.BigInteger(), nullable=False),
        sa.Column("traces_rejected", sa.BigInteger(), nullable=False),
        sa.Column("late_spans", sa.BigInteger(), nullable=False),
        sa.Column("created_by", sa.String(length=320), nullable=False),
        sa.Column("created_at", storage.models.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_trace_sources")),
        sa.UniqueConstraint("name", name=op.f("uq_trace_sources_name")),
        sa.UniqueConstraint(
            "kind", "url", "project", name=op.f("uq_trace_sources_kind_url_project")
        ),
    )
    op.create_table(
        "source_spans",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("source_id", sa.Integer(), nullable=False),
        sa.Column("trace_id", sa.String(length=32), nullable=False),
        sa.Column("span_id", sa.String(length=16), nullable=False),
        sa.Column("parent_id", sa.String(length=16), nullable=True),
        sa.Column("start_at", storage.models.UTCDateTime(timezone=True), nullable=False),
        sa.Column("received_at", storage.models.UTCDateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(length=12), nullable=False),
        sa.Column("entry", sa.JSON(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["source_id"],
            ["trace_sources.id"],
            name=op.f("fk_source_spans_source_id_trace_sources"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_source_spans")),
        sa.UniqueConstraint("source_id", "span_id", name=op.f("uq_source_spans_source_id_span_id")),
    )
    op.create_index(
        "ix_source_spans_waiting", "source_spans", ["source_id", "state", "trace_id"], unique=False
    )
    op.create_index(
        "ix_source_spans_trace", "source_spans", ["trace_id", "parent_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_source_spans_trace", table_name="source_spans")
    op.drop_index("ix_source_spans_waiting", table_name="source_spans")
    op.drop_table("source_spans")
    op.drop_table("trace_sources")
