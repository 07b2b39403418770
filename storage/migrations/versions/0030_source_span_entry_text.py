"""A waiting span's OTLP entry is kept as JSON text (source_spans.entry), issue 31

Staging writes a span's entry once as compact JSON text and assembly joins the texts of a
trace's spans into its OTLP export line as they are: the JSON column type parsed every entry
on the way out and the assembler encoded it again, a third of a sync's time for nothing. The
text is still parsed, once, by the OTLP importer's bounded parser.

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


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column(
            "source_spans",
            "entry",
            type_=sa.Text(),
            existing_type=sa.JSON(),
            postgresql_using="entry::text",
        )
    else:  # SQLite keeps JSON as text already: only the declared type changes
        with op.batch_alter_table("source_spans") as batch:
            batch.alter_column("entry", type_=sa.Text(), existing_type=sa.JSON())


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column(
            "source_spans",
            "entry",
            type_=sa.JSON(),
            existing_type=sa.Text(),
            postgresql_using="entry::json",
        )
    else:
        with op.batch_alter_table("source_spans") as batch:
            batch.alter_column("entry", type_=sa.JSON(), existing_type=sa.Text())
