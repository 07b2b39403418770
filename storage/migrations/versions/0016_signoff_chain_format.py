"""How each sign-off's row hash was made (signoffs.chain_format, signoffs.hash_alg), issue 16

Rows signed before this revision keep chain_format 1 (the signature's own fields) and
hash_alg "sha256"; rows signed from now on use chain_format 2 (also the fields of the version
they sign) and "sha256" or "hmac-sha256:<key id>" when the deployment has a signing key.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01 18:20:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("signoffs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("chain_format", sa.Integer(), nullable=False, server_default="1")
        )
        batch_op.add_column(
            sa.Column("hash_alg", sa.String(length=80), nullable=False, server_default="sha256")
        )


def downgrade() -> None:
    with op.batch_alter_table("signoffs", schema=None) as batch_op:
        batch_op.drop_column("hash_alg")
        batch_op.drop_column("chain_format")
