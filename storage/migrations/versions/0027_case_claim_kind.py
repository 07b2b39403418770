"""The kind of a case's required claim (case_claims.kind), issue 35

The no-answer policy's freshness rules give age limits per kind of claim (a settled historical
fact has none, a current price 30 days). A case may now say what kind of fact each required
claim states, so that the Thresholds page's evidence gate and the Case builder's suggestions
of stale evidence apply the rule for that kind. Claims stored before this revision have none
(the rule for the source's category or the global max_age_days applies, as before).

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-04 21:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("case_claims", schema=None) as batch_op:
        batch_op.add_column(sa.Column("kind", sa.String(length=60), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("case_claims", schema=None) as batch_op:
        batch_op.drop_column("kind")
