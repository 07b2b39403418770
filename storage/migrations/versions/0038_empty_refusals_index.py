"""partial index of the refusal traces without a text (issue 33)

The Monitoring page asks how many refusal texts the production check has to lint
(review.wording.production.candidate_population). Counted from ``ix_traces_refusal_texts``
that is a read of every refusal's index entry: 0.6-1.0 s at ten million traces on
PostgreSQL (4.4 million refusals). The population groups (migration 0035) already count the
traces by decision, reason code and restricted flag, but not by whether the text is empty:
the candidates are the groups of refusal decisions less the refusals without a text, which
this index holds (few: a refusal is logged with its wording).

Revision ID: 0038
Revises: 0037
Create Date: 2026-12-05 22:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0038"
down_revision: str | None = "0037"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# storage.models.EMPTY_REFUSALS_WHERE when this revision was written
WHERE = (
    "answer_text = '' AND ((decision IS NOT NULL AND decision != 'answer') OR "
    "(decision = 'answer' AND reason_code IS NOT NULL AND reason_code != 'false_premise'))"
)


def upgrade() -> None:
    op.create_index(
        "ix_traces_empty_refusals",
        "traces",
        ["id", "restricted"],
        sqlite_where=sa.text(WHERE),
        postgresql_where=sa.text(WHERE),
    )


def downgrade() -> None:
    op.drop_index("ix_traces_empty_refusals", table_name="traces")
