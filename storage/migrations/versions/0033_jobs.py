"""Background jobs (jobs, job_files, job_workers), issue 33

Imports, syncs, pushes, rebuilds, exports and evaluation runs become rows of ``jobs``, claimed
by ``workbench worker`` processes on any machine (``FOR UPDATE SKIP LOCKED`` on PostgreSQL)
under a lease that a worker renews while it runs; a job whose worker died is claimed again when
its lease has passed. The files a job reads and writes are chunks in ``job_files`` so every
server and worker sees them; ``job_workers`` holds each worker's heartbeat.

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-05 09:31:04.511091
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import storage.models

revision: str = "0033"
down_revision: str | None = "0032"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_workers",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("started_at", storage.models.UTCDateTime(timezone=True), nullable=False),
        sa.Column("seen_at", storage.models.UTCDateTime(timezone=True), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_job_workers")),
    )
    with op.batch_alter_table("job_workers", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_job_workers_seen_at"), ["seen_at"], unique=False)

    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=60), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=12), nullable=False),
        sa.Column("created_by", sa.Integer(), nullable=False),
        sa.Column("created_at", storage.models.UTCDateTime(timezone=True), nullable=False),
        sa.Column("run_after", storage.models.UTCDateTime(timezone=True), nullable=False),
        sa.Column("started_at", storage.models.UTCDateTime(timezone=True), nullable=True),
        sa.Column("finished_at", storage.models.UTCDateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(length=200), nullable=True),
        sa.Column("lease_until", storage.models.UTCDateTime(timezone=True), nullable=True),
        sa.Column("done", sa.BigInteger(), nullable=False),
        sa.Column("total", sa.BigInteger(), nullable=True),
        sa.Column("note", sa.String(length=500), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("cancelled_by", sa.Integer(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["cancelled_by"], ["users.id"], name=op.f("fk_jobs_cancelled_by_users")
        ),
        sa.ForeignKeyConstraint(
            ["created_by"], ["users.id"], name=op.f("fk_jobs_created_by_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_jobs_created_by"), ["created_by"], unique=False)
        batch_op.create_index("ix_jobs_kind_id", ["kind", "id"], unique=False)
        batch_op.create_index("ix_jobs_status_run_after", ["status", "run_after"], unique=False)

    op.create_table(
        "job_files",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=8), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("mime", sa.String(length=100), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_files_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("job_id", "role", "name", "seq", name=op.f("pk_job_files")),
    )


def downgrade() -> None:
    op.drop_table("job_files")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_status_run_after")
        batch_op.drop_index("ix_jobs_kind_id")
        batch_op.drop_index(batch_op.f("ix_jobs_created_by"))

    op.drop_table("jobs")
    with op.batch_alter_table("job_workers", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_job_workers_seen_at"))

    op.drop_table("job_workers")
