"""The Agreement page's figures per slice and per category, stored (agreement_group_values,
agreement_group_annotators), and a counter of changes to the cases' slices and categories,
issue 33

The table by slice or by category grouped every current label by case and joined it to the
cases' slices: about 3.5 s at two million labels on PostgreSQL. The same figures are now kept
per group (review.cases.agreement_groups says the rule and who keeps them in step).

Triggers bump ``counters.case_groups_changes`` on every write of ``case_slices`` and on a
change of a case's category or a delete of a case, whoever writes; the stored rows stand for
the value in ``counters.agreement_groups_stamp``. Filled here from the labels and cases already
stored (the rule as it was when this revision was written), and stamped.

Revision ID: 0039
Revises: 0038
Create Date: 2026-12-06 02:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0039"
down_revision: str | None = "0038"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COUNTER = "case_groups_changes"
STAMP = "agreement_groups_stamp"
BUMP = f"UPDATE counters SET value = value + 1 WHERE name = '{COUNTER}'"

CURRENT = """
    NOT EXISTS (
        SELECT 1 FROM labels newer
        WHERE newer.case_id = l.case_id AND newer.annotator = l.annotator AND newer.id > l.id
    )
"""
GROUPS = """
    (SELECT case_id, 'slice' AS kind, slice AS grp FROM case_slices
     UNION ALL SELECT id, 'category', category FROM cases) g
"""
VALUES = f"""
INSERT INTO agreement_group_values (kind, grp, m, decision, labels, squares)
SELECT g.kind, g.grp, i.m, i.decision, SUM(i.n), SUM(i.n * i.n)
FROM (
    SELECT case_id, decision, n, SUM(n) OVER (PARTITION BY case_id) AS m
    FROM (
        SELECT l.case_id, l.decision, COUNT(*) AS n FROM labels l
        WHERE {CURRENT} GROUP BY l.case_id, l.decision
    ) per
) i JOIN {GROUPS} ON g.case_id = i.case_id
GROUP BY g.kind, g.grp, i.m, i.decision
"""
ANNOTATORS = f"""
INSERT INTO agreement_group_annotators (kind, grp, annotator, cases)
SELECT g.kind, g.grp, l.annotator, COUNT(*)
FROM labels l JOIN {GROUPS} ON g.case_id = l.case_id
WHERE {CURRENT}
GROUP BY g.kind, g.grp, l.annotator
"""

SQLITE_TRIGGERS = {
    "case_groups_slices_ai": "AFTER INSERT ON case_slices",
    "case_groups_slices_ad": "AFTER DELETE ON case_slices",
    "case_groups_slices_au": "AFTER UPDATE ON case_slices",
    "case_groups_cases_au": (
        "AFTER UPDATE OF category ON cases WHEN OLD.category IS NOT NEW.category"
    ),
    "case_groups_cases_ad": "AFTER DELETE ON cases",
}
PG_TRIGGERS = {
    "case_groups_slices": "AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON case_slices",
    "case_groups_cases": "AFTER UPDATE OF category OR DELETE OR TRUNCATE ON cases",
}


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.create_table(
        "agreement_group_values",
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("grp", sa.String(length=60), nullable=False),
        sa.Column("m", sa.Integer(), nullable=False),
        sa.Column("decision", sa.String(length=40), nullable=False),
        sa.Column("labels", sa.BigInteger(), nullable=False),
        sa.Column("squares", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "kind", "grp", "m", "decision", name=op.f("pk_agreement_group_values")
        ),
    )
    op.create_table(
        "agreement_group_annotators",
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("grp", sa.String(length=60), nullable=False),
        sa.Column("annotator", sa.String(length=320), nullable=False),
        sa.Column("cases", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "kind", "grp", "annotator", name=op.f("pk_agreement_group_annotators")
        ),
    )
    op.execute(VALUES)
    op.execute(ANNOTATORS)
    op.execute(f"DELETE FROM counters WHERE name IN ('{COUNTER}', '{STAMP}')")
    op.execute(
        f"INSERT INTO counters (name, value, version) VALUES ('{COUNTER}', 0, 1), ('{STAMP}', 0, 1)"
    )
    if dialect == "postgresql":
        op.execute(
            "CREATE FUNCTION case_groups_bump() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN {BUMP}; RETURN NULL; END $$"
        )
        for name, when in PG_TRIGGERS.items():
            op.execute(
                f"CREATE TRIGGER {name} {when} FOR EACH STATEMENT "
                "EXECUTE FUNCTION case_groups_bump()"
            )
    else:
        for name, when in SQLITE_TRIGGERS.items():
            op.execute(f"CREATE TRIGGER {name} {when} BEGIN {BUMP}; END")


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS case_groups_slices ON case_slices")
        op.execute("DROP TRIGGER IF EXISTS case_groups_cases ON cases")
        op.execute("DROP FUNCTION IF EXISTS case_groups_bump()")
    else:
        for name in SQLITE_TRIGGERS:
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
    op.execute(f"DELETE FROM counters WHERE name IN ('{COUNTER}', '{STAMP}')")
    op.drop_table("agreement_group_annotators")
    op.drop_table("agreement_group_values")
