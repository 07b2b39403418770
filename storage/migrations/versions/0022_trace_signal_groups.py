"""The traces' gate signals rolled up into groups (trace_signal_groups), issue 18

A replay of a proposed policy (review.thresholds.replay) applies the gate to every trace's
logged signals. Read trace by trace, a million traces take several seconds on either engine.
The gate reads the signals only through exact values (ranking mode, hits, the three flags,
topics) and through comparisons of the top score with a few thresholds. So the traces are
counted here by those values, with the score in a bin of 1/256. Every score within one bin
compares the same way with any threshold outside that bin. The replay decides each group once,
and reads only the traces of the bins that hold a threshold trace by trace.

One row per group: the exact signal values, ``customer_tier`` (the replay's slice), the score's
kind (0: not logged, 1: a number binned as ``floor(top_score * 256)``, 2: anything else: a
number of 1e15 or more in size, infinite, NaN or not a number, always replayed trace by trace),
the bin, and ``n``, the traces of the group. ``k`` identifies the group: on SQLite the values
quoted with their types, on PostgreSQL the SHA-256 of them as a JSON array.

Triggers keep it in step with ``traces``, whoever writes them: row triggers on SQLite, statement
triggers with transition tables on PostgreSQL (one grouped upsert per COPY or INSERT). A group
whose last trace is deleted is removed. The backfill groups the traces already stored.

An index on ``traces.top_score`` serves the replay's reads of single bins.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-02 02:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# storage.models.SCORE_BIN_SCALE and SCORE_BIN_LIMIT as of this revision
_SCALE = 256
_LIMIT = "1e15"
_VALUES = (
    "ranking_mode",
    "hits_after_filter",
    "answerable",
    "ambiguous",
    "ungrounded",
    "topics",
    "customer_tier",
)
_SIGNALS = ("ranking_mode", "hits_after_filter", "top_score", *_VALUES[2:])


def _sqlite_parts(p: str) -> dict[str, str]:
    """SQLite expressions over the row ``p`` (NEW, OLD or a table alias)."""
    s = f"{p}.top_score"
    numeric = f"typeof({s}) IN ('integer', 'real') AND abs({s}) < {_LIMIT}"
    scaled = f"({s} * {_SCALE})"
    kind = f"CASE WHEN {s} IS NULL THEN 0 WHEN {numeric} THEN 1 ELSE 2 END"
    # floor() without the math functions: truncate, then step down for negative fractions
    bin_ = (
        f"CASE WHEN {numeric} THEN CAST({scaled} AS INTEGER) - "
        f"({scaled} < CAST({scaled} AS INTEGER)) END"
    )

    def quoted(col: str) -> str:  # the type and the value, reals with every digit
        v = f"{p}.{col}"
        return (
            f"typeof({v}) || ':' || CASE WHEN typeof({v}) = 'real' "
            f"THEN printf('%.17g', {v}) ELSE quote({v}) END"
        )

    key = " || '|' || ".join(
        [quoted("ranking_mode"), quoted("hits_after_filter"), f"({kind})", f"ifnull({bin_}, '')"]
        + [quoted(c) for c in _VALUES[2:]]
    )
    return {"key": key, "kind": kind, "bin": bin_}


def _pg_parts(p: str) -> dict[str, str]:
    s = f"{p}.top_score"
    # NaN is larger than every number in PostgreSQL: abs(NaN) >= 1e15, so it is kind 2
    kind = f"CASE WHEN {s} IS NULL THEN 0 WHEN abs({s}) < {_LIMIT} THEN 1 ELSE 2 END"
    bin_ = f"CASE WHEN abs({s}) < {_LIMIT} THEN floor({s} * {_SCALE})::bigint END"
    key = (
        "encode(sha256(convert_to(json_build_array("
        f"{p}.ranking_mode, {p}.hits_after_filter, {kind}, {bin_}, {p}.answerable, "
        f"{p}.ambiguous, {p}.ungrounded, {p}.topics::text, {p}.customer_tier)::text, 'UTF8')), "
        "'hex')"
    )
    return {"key": key, "kind": kind, "bin": bin_}


_COLUMNS = (
    "k, ranking_mode, hits_after_filter, score_kind, score_bin, answerable, ambiguous, "
    "ungrounded, topics, customer_tier, n"
)


def _grouped(parts: dict[str, str], source: str, alias: str, topics: str) -> str:
    """SELECT of the groups of ``source`` (rows named ``alias``) in the table's columns."""
    return (
        f"SELECT k, ranking_mode, hits_after_filter, score_kind, score_bin, answerable, "
        f"ambiguous, ungrounded, topics, customer_tier, count(*) FROM ("
        f"SELECT {parts['key']} AS k, {alias}.ranking_mode, {alias}.hits_after_filter, "
        f"{parts['kind']} AS score_kind, {parts['bin']} AS score_bin, {alias}.answerable, "
        f"{alias}.ambiguous, {alias}.ungrounded, {topics} AS topics, {alias}.customer_tier "
        f"FROM {source} {alias}) x "
        "GROUP BY k, ranking_mode, hits_after_filter, score_kind, score_bin, answerable, "
        "ambiguous, ungrounded, topics, customer_tier"
    )


def _sqlite_triggers() -> list[str]:
    new, old = _sqlite_parts("NEW"), _sqlite_parts("OLD")
    add = (
        f"INSERT INTO trace_signal_groups ({_COLUMNS}) VALUES ({new['key']}, NEW.ranking_mode, "
        f"NEW.hits_after_filter, {new['kind']}, {new['bin']}, NEW.answerable, NEW.ambiguous, "
        "NEW.ungrounded, NEW.topics, NEW.customer_tier, 1) "
        "ON CONFLICT (k) DO UPDATE SET n = n + 1;"
    )
    remove = (
        f"UPDATE trace_signal_groups SET n = n - 1 WHERE k = {old['key']}; "
        f"DELETE FROM trace_signal_groups WHERE k = {old['key']} AND n <= 0;"
    )
    return [
        f"CREATE TRIGGER trace_signal_groups_ai AFTER INSERT ON traces BEGIN {add} END",
        f"CREATE TRIGGER trace_signal_groups_ad AFTER DELETE ON traces BEGIN {remove} END",
        f"CREATE TRIGGER trace_signal_groups_au AFTER UPDATE OF {', '.join(_SIGNALS)}, "
        f"customer_tier ON traces BEGIN {remove} {add} END",
    ]


def _pg_statements() -> list[str]:
    def add(source: str) -> str:
        return (
            f"INSERT INTO trace_signal_groups AS g ({_COLUMNS}) "
            + _grouped(_pg_parts("r"), source, "r", "r.topics::text")
            + " ORDER BY 1 ON CONFLICT (k) DO UPDATE SET n = g.n + EXCLUDED.n;"
        )

    def remove(source: str) -> str:
        return (
            "UPDATE trace_signal_groups g SET n = g.n - d.c FROM ("
            f"SELECT {_pg_parts('r')['key']} AS k, count(*) AS c FROM {source} r GROUP BY 1"
            ") d WHERE g.k = d.k; DELETE FROM trace_signal_groups WHERE n <= 0;"
        )

    # an UPDATE moves the rows whose group changed (most updates touch other columns)
    moved = (
        "FROM old_rows o JOIN new_rows nw ON nw.id = o.id "
        f"WHERE {_pg_parts('o')['key']} IS DISTINCT FROM {_pg_parts('nw')['key']}"
    )
    old_changed = f"(SELECT o.* {moved})"
    new_changed = f"(SELECT nw.* {moved})"
    return [
        "CREATE FUNCTION trace_signal_groups_add() RETURNS trigger LANGUAGE plpgsql AS $$ "
        f"BEGIN {add('new_rows')} RETURN NULL; END $$",
        "CREATE FUNCTION trace_signal_groups_remove() RETURNS trigger LANGUAGE plpgsql AS $$ "
        f"BEGIN {remove('old_rows')} RETURN NULL; END $$",
        "CREATE FUNCTION trace_signal_groups_change() RETURNS trigger LANGUAGE plpgsql AS $$ "
        f"BEGIN {remove(old_changed)} {add(new_changed)} RETURN NULL; END $$",
        "CREATE TRIGGER trace_signal_groups_ai AFTER INSERT ON traces "
        "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT "
        "EXECUTE FUNCTION trace_signal_groups_add()",
        "CREATE TRIGGER trace_signal_groups_ad AFTER DELETE ON traces "
        "REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT "
        "EXECUTE FUNCTION trace_signal_groups_remove()",
        "CREATE TRIGGER trace_signal_groups_au AFTER UPDATE ON traces "
        "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT "
        "EXECUTE FUNCTION trace_signal_groups_change()",
    ]


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.create_table(
        "trace_signal_groups",
        sa.Column("k", sa.Text(), nullable=False),
        sa.Column("ranking_mode", sa.String(length=40), nullable=True),
        sa.Column("hits_after_filter", sa.Integer(), nullable=True),
        sa.Column("score_kind", sa.SmallInteger(), nullable=False),
        sa.Column("score_bin", sa.BigInteger(), nullable=True),
        sa.Column("answerable", sa.Boolean(), nullable=True),
        sa.Column("ambiguous", sa.Boolean(), nullable=True),
        sa.Column("ungrounded", sa.Boolean(), nullable=True),
        sa.Column("topics", sa.Text(), nullable=True),
        sa.Column("customer_tier", sa.String(length=60), nullable=True),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("k", name=op.f("pk_trace_signal_groups")),
    )
    op.create_index("ix_traces_top_score", "traces", ["top_score"])
    if dialect == "sqlite":
        op.execute(
            f"INSERT INTO trace_signal_groups ({_COLUMNS}) "
            + _grouped(_sqlite_parts("t"), "traces", "t", "t.topics")
        )
        for trigger in _sqlite_triggers():
            op.execute(trigger)
    elif dialect == "postgresql":
        op.execute(
            f"INSERT INTO trace_signal_groups ({_COLUMNS}) "
            + _grouped(_pg_parts("t"), "traces", "t", "t.topics::text")
        )
        for statement in _pg_statements():
            op.execute(statement)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    for trigger in ("trace_signal_groups_ai", "trace_signal_groups_ad", "trace_signal_groups_au"):
        if dialect == "sqlite":
            op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        else:
            op.execute(f"DROP TRIGGER IF EXISTS {trigger} ON traces")
    if dialect == "postgresql":
        for fn in ("add", "remove", "change"):
            op.execute(f"DROP FUNCTION IF EXISTS trace_signal_groups_{fn}()")
    op.drop_index("ix_traces_top_score", table_name="traces")
    op.drop_table("trace_signal_groups")
