"""The agreed label of each case, stored (case_agreed), issue 18

Filled here from the labels and adjudications already stored, by the rule of
review.cases.agreed as it was when this revision was written: the case's latest adjudication;
for a case never adjudicated, the newest of its current labels (the newest row of each
annotator) when there are two or more and they all have the same decision and the same reason
codes (compared as stored). From this revision on the writers of labels and adjudications keep
it in step.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-01 23:10:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BACKFILL = """
INSERT INTO case_agreed (case_id, decision, reason_codes, agreed_by, source_id)
SELECT adj.case_id, adj.decision, adj.reason_codes, 'adjudication', adj.id
FROM (SELECT case_id, MAX(id) AS adj_id FROM adjudications GROUP BY case_id) latest
JOIN adjudications adj ON adj.id = latest.adj_id
UNION ALL
SELECT lab.case_id, lab.decision, lab.reason_codes, 'annotators', lab.id
FROM (
    SELECT cur.case_id, MAX(cur.id) AS label_id
    FROM (
        SELECT l.case_id, l.id, l.decision, CAST(l.reason_codes AS TEXT) AS rc
        FROM labels l
        WHERE NOT EXISTS (
            SELECT 1 FROM labels newer
            WHERE newer.case_id = l.case_id AND newer.annotator = l.annotator
              AND newer.id > l.id
        )
    ) cur
    GROUP BY cur.case_id
    HAVING COUNT(*) >= 2 AND COUNT(DISTINCT cur.decision) = 1 AND COUNT(DISTINCT cur.rc) = 1
) unanimous
JOIN labels lab ON lab.id = unanimous.label_id
WHERE NOT EXISTS (SELECT 1 FROM adjudications a WHERE a.case_id = unanimous.case_id)
"""


def upgrade() -> None:
    op.create_table(
        "case_agreed",
        sa.Column("case_id", sa.Integer(), nullable=False),
        sa.Column("decision", sa.String(length=40), nullable=False),
        sa.Column("reason_codes", sa.JSON(), nullable=False),
        sa.Column("agreed_by", sa.String(length=20), nullable=False),
        sa.Column("source_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["case_id"],
            ["cases.id"],
            name=op.f("fk_case_agreed_case_id_cases"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("case_id", name=op.f("pk_case_agreed")),
    )
    op.execute(sa.text(BACKFILL))


def downgrade() -> None:
    op.drop_table("case_agreed")
