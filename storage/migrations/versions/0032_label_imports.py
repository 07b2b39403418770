"""Labels made in Label Studio or Argilla, imported (label_imports; labels.source ...), issue 32

A label now says where it was made: ``source`` is "workbench" for labels made on the Labeling
page (every label before this migration) or the labeling tool whose export brought it in; an
imported label keeps the tool's id of the annotation (``source_ref``) and a digest of what it
said (``source_digest``) so that importing the same export again adds nothing, the import file
it came with (``import_id``), when the annotator made it (``labeled_at``) and how long they took
(``lead_seconds``).

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-05 06:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import storage.models

revision: str = "0032"
down_revision: str | None = "0031"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "label_imports",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("tool", sa.String(length=20), nullable=False),
        sa.Column("file_name", sa.String(length=500), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("imported_by", sa.String(length=320), nullable=False),
        sa.Column("imported_at", storage.models.UTCDateTime(timezone=True), nullable=False),
        sa.Column("users", sa.JSON(), nullable=False),
        sa.Column("added", sa.Integer(), nullable=False),
        sa.Column("changed", sa.Integer(), nullable=False),
        sa.Column("unchanged", sa.Integer(), nullable=False),
        sa.Column("skipped", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_label_imports")),
    )
    op.create_index(op.f("ix_label_imports_sha256"), "label_imports", ["sha256"], unique=False)
    with op.batch_alter_table("labels", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("source", sa.String(length=20), server_default="workbench", nullable=False)
        )
        batch_op.add_column(sa.Column("source_ref", sa.String(length=300), nullable=True))
        batch_op.add_column(sa.Column("source_digest", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("import_id", sa.Integer(), nullable=True))
        batch_op.add_column(
            sa.Column("labeled_at", storage.models.UTCDateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(sa.Column("lead_seconds", sa.Float(), nullable=True))
        batch_op.create_index(batch_op.f("ix_labels_import_id"), ["import_id"], unique=False)
        batch_op.create_index("ix_labels_source_ref", ["source", "source_ref", "id"], unique=False)
        batch_op.create_foreign_key(
            batch_op.f("fk_labels_import_id_label_imports"),
            "label_imports",
            ["import_id"],
            ["id"],
            ondelete="RESTRICT",
        )


def downgrade() -> None:
    with op.batch_alter_table("labels", schema=None) as batch_op:
        batch_op.drop_constraint(
            batch_op.f("fk_labels_import_id_label_imports"), type_="foreignkey"
        )
        batch_op.drop_index("ix_labels_source_ref")
        batch_op.drop_index(batch_op.f("ix_labels_import_id"))
        batch_op.drop_column("lead_seconds")
        batch_op.drop_column("labeled_at")
        batch_op.drop_column("import_id")
        batch_op.drop_column("source_digest")
        batch_op.drop_column("source_ref")
        batch_op.drop_column("source")
    op.drop_index(op.f("ix_label_imports_sha256"), table_name="label_imports")
    op.drop_table("label_imports")
