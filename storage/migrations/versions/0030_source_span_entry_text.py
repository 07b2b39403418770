"""Staged spans: identified by trace id and span id, their entry kept as JSON text, and a
digest of what they said (source_spans), issue 31

* OTLP asks a span id to be unique within its trace only: two traces whose spans an SDK
  numbered alike were one trace's spans and the other's duplicates. The unique key is now
  (source, trace id, span id).
* A span sent again must say the same: ``digest`` keeps a digest of its entry (the entry is
  dropped once its trace is imported), and a span sent again with other content makes its
  waiting trace refused instead of being dropped as a duplicate without a word.
* Staging writes a span's entry once as compact JSON text and assembly joins the texts of a
  trace's spans into its OTLP export line as they are: the JSON column type parsed every
  entry on the way out and the assembler encoded it again, a third of a sync's time for
  nothing. The text is still parsed, once, by the OTLP importer's bounded parser.

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-05 03:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0030"
down_revision: str | None = "0029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_KEY = "uq_source_spans_source_id_span_id"
NEW_KEY = "uq_source_spans_source_id_trace_id_span_id"


def upgrade() -> None:
    with op.batch_alter_table("source_spans") as batch:
        batch.alter_column(
            "entry",
            type_=sa.Text(),
            existing_type=sa.JSON(),
            existing_nullable=True,
            postgresql_using="entry::text",
        )
        batch.add_column(sa.Column("digest", sa.String(length=32), nullable=True))
        batch.drop_constraint(OLD_KEY, type_="unique")
        batch.create_unique_constraint(NEW_KEY, ["source_id", "trace_id", "span_id"])


def downgrade() -> None:
    with op.batch_alter_table("source_spans") as batch:
        batch.drop_constraint(NEW_KEY, type_="unique")
        batch.create_unique_constraint(OLD_KEY, ["source_id", "span_id"])
        batch.drop_column("digest")
        batch.alter_column(
            "entry",
            type_=sa.JSON(),
            existing_type=sa.Text(),
            existing_nullable=True,
            postgresql_using="entry::json",
        )
