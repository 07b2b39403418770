"""the wording key a case expects (cases.expected_message) and the one an output used
(eval_outputs.message_key), so runs check that a no-answer is worded as the case expects

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 15:00:00

Existing cases get the key the taxonomy suggests for them (their category's default message
when they expect its default decision, else their reasons' message, else the decision's only
message); a case for which there is no suggestion keeps NULL until its author names one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
import yaml
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # plain ADD COLUMNs: SQLite and PostgreSQL add a nullable column without copying rows
    op.add_column("cases", sa.Column("expected_message", sa.String(40), nullable=True))
    op.add_column("eval_outputs", sa.Column("message_key", sa.String(40), nullable=True))
    tax = _taxonomy()
    if tax is None:
        return
    cases = sa.table(
        "cases",
        sa.column("id", sa.Integer),
        sa.column("expected_decision", sa.String),
        sa.column("category", sa.String),
        sa.column("reason_codes", sa.JSON),
        sa.column("expected_message", sa.String),
    )
    bind = op.get_bind()
    rows = bind.execute(
        sa.select(cases.c.id, cases.c.expected_decision, cases.c.category, cases.c.reason_codes)
    ).all()
    for case_id, decision, category, reasons in rows:
        key = _suggested(tax, decision, category, list(reasons or []))
        if key is not None:
            bind.execute(sa.update(cases).where(cases.c.id == case_id).values(expected_message=key))


def _taxonomy() -> dict[str, Any] | None:
    """The taxonomy file as this revision knew it (read here, not through the app's code,
    so the migration keeps doing what it did when later code changes)."""
    root = Path(os.environ.get("WORKBENCH_POLICIES_DIR") or Path(__file__).parents[3] / "policies")
    try:
        data = yaml.safe_load((root / "taxonomy.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    return data if isinstance(data, dict) else None


def _suggested(tax: dict[str, Any], decision: str, category: str, reasons: list[Any]) -> str | None:
    """The rule of review.core.taxonomy.Taxonomy.expected_message at this revision."""
    term = (tax.get("decisions") or {}).get(decision) or {}
    messages = term.get("messages") or []
    if not messages:
        return None
    cat = (tax.get("categories") or {}).get(category) or {}
    if cat.get("default_decision") == decision and cat.get("default_message"):
        return str(cat["default_message"])
    for code in reasons:
        msg = ((tax.get("reason_codes") or {}).get(code) or {}).get("message")
        if msg in messages:
            return str(msg)
    if len(messages) == 1 and not term.get("answers"):
        return str(messages[0])
    return None


def downgrade() -> None:
    with op.batch_alter_table("eval_outputs", schema=None) as batch_op:
        batch_op.drop_column("message_key")
    with op.batch_alter_table("cases", schema=None) as batch_op:
        batch_op.drop_column("expected_message")
