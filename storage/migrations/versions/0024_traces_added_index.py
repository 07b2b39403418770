"""A narrow index of the traces in id order, on SQLite (issue 18)

An audit plan's population check after an import counts only the traces added since the plan
was counted: the rows after the highest id counted (``review.traces.stamp.added_since`` and
the count of their strata). SQLite read those rows from the table, about 2 KB each with their
texts: 100,000 new traces were 200 MB to read when not cached, and the Audit page's first view
took 1.2-1.4 s. This index holds the id first, then the columns of ``ix_traces_sampling`` (the
sampling key and the usual strata and filters), so the same check reads about 7 MB of it.
New traces are appended at its end, in id order.

PostgreSQL is left as it is: its check reads the primary key and ``ix_traces_sampling`` (which
includes the id) and is within target.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-02 05:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = "ix_traces_added"
COLUMNS = [
    "id",
    "sample_key",
    "decision",
    "reason_code",
    "feedback",
    "customer_tier",
    "language",
    "document_type",
    "restricted",
    "at",
]


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.create_index(NAME, "traces", COLUMNS)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.drop_index(NAME, table_name="traces")
