"""The (status, split) index of the cases also holds the id and the key (issue 33)

The release gate reads the key and slices of every ready case of a split
(``review.cases.splits.scope_pairs``: the Monthly review, the Thresholds and Runs pages). From
``ix_cases_status_split`` that was a bitmap scan of the wide case rows, 24,000 heap pages at
500,000 cases on PostgreSQL; with the id and the key in the index it is an index-only scan
(272 ms -> 176 ms for 141,864 test cases). The index keeps its name and serves what the
two-column one served (its leading columns are the same).

Revision ID: 0040
Revises: 0039
Create Date: 2026-12-06 02:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0040"
down_revision: str | None = "0039"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index("ix_cases_status_split", table_name="cases")
    op.create_index("ix_cases_status_split", "cases", ["status", "split", "id", "key"])


def downgrade() -> None:
    op.drop_index("ix_cases_status_split", table_name="cases")
    op.create_index("ix_cases_status_split", "cases", ["status", "split"])
