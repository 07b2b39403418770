"""The top-score index holds what the threshold replay reads (issue 33)

The replay (``review.thresholds.replay``) counts most traces from their signal groups and reads
one by one the traces of the score bins that hold a threshold: about 80,000 traces a bin at ten
million traces, scattered over the whole table. Through ``ix_traces_top_score`` that was a
bitmap scan of their rows, 4.8 s a bin from disk (31 s for a replay after a restart). With the
columns the replay reads included, a bin is an index-only scan of about 2 MB: 0.06 s from disk.
PostgreSQL only: SQLite's index is unchanged (its database is one file a server keeps in
memory at the sizes it serves).

Revision ID: 0042
Revises: 0041
Create Date: 2026-12-06 08:10:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0042"
down_revision: str | None = "0041"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: as storage.models.REPLAY_INCLUDE when this revision was written
INCLUDE = (
    "id",
    "topics",
    "ranking_mode",
    "hits_after_filter",
    "answerable",
    "ambiguous",
    "ungrounded",
    "customer_tier",
    "restricted",
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.drop_index("ix_traces_top_score", table_name="traces")
    op.create_index(
        "ix_traces_top_score", "traces", ["top_score"], postgresql_include=list(INCLUDE)
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.drop_index("ix_traces_top_score", table_name="traces")
    op.create_index("ix_traces_top_score", "traces", ["top_score"])
