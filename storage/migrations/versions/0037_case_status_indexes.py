"""Indexes on (status, category) and (status, split) for the case pickers (issue 33)

The Runs page's subset pickers and the Label queue's filters list the categories and splits of
the ready cases (``review.cases.choices``). ``ix_cases_filter`` holds both columns, but after
``expected_decision``: each list was a read of every ready case (95 ms each at 500,000 cases on
PostgreSQL). An index that starts with (status, column) lets ``choices.case_values`` find the
few values by seeks, as migration 0021 does for the language, the import batch and the family.

Revision ID: 0037
Revises: 0036
Create Date: 2026-12-05 19:20:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0037"
down_revision: str | None = "0036"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEXES = {
    "ix_cases_status_category": ["status", "category"],
    "ix_cases_status_split": ["status", "split"],
}


def upgrade() -> None:
    for name, columns in INDEXES.items():
        op.create_index(name, "cases", columns)


def downgrade() -> None:
    for name in INDEXES:
        op.drop_index(name, table_name="cases")
