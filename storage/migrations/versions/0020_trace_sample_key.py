"""A stored sampling key per trace (traces.sample_key), issue 18

``sample_key`` is ``storage.models.trace_sample_key(trace_id)``: a uniform 62-bit BLAKE2b hash
of the trace id, computed in Python here and by every trace writer, so it is the same value on
SQLite and PostgreSQL. Audit plans of sampling algorithm 2 (review.audits.plans) draw a stratum
by this key rotated by a seed-derived offset: an index range scan instead of hashing every
row. Plans drawn before this revision record no algorithm and keep verifying with algorithm 1.

The backfill on SQLite is one UPDATE with the Python function registered in the connection; on
PostgreSQL it reads (id, trace_id) in batches of 10,000 and writes each batch's keys back with
one UPDATE ... FROM unnest(...). The index is built after it: ``ix_traces_sampling`` on the
key then the usual strata and filters (decision, reason code, feedback, tier, language,
document type, restricted, time; the id included on PostgreSQL), so a draw reads a key range
and a count reads the index, not the wide rows.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-01 23:00:00
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BATCH = 10_000
_BITS = 62  # storage.models.SAMPLE_KEY_BITS when this revision was written


def _key(trace_id: str) -> int:
    """storage.models.trace_sample_key as of this revision (a migration keeps its own copy)."""
    digest = hashlib.blake2b(
        trace_id.encode("utf-8"), digest_size=8, person=b"aw-sample-key"
    ).digest()
    return int.from_bytes(digest, "big") >> (64 - _BITS)


def _backfill() -> None:
    conn = op.get_bind()
    if conn.dialect.name == "sqlite":  # one pass, the key computed by Python inside SQLite
        raw = conn.connection.driver_connection
        raw.create_function("aw_trace_sample_key", 1, _key, deterministic=True)  # type: ignore[union-attr]
        conn.execute(
            sa.text(
                "UPDATE traces SET sample_key = aw_trace_sample_key(trace_id) "
                "WHERE sample_key IS NULL"
            )
        )
        return
    postgres = conn.dialect.name == "postgresql"
    last = 0
    while True:
        rows = conn.execute(
            sa.text(
                "SELECT id, trace_id FROM traces WHERE id > :last AND sample_key IS NULL "
                "ORDER BY id LIMIT :n"
            ),
            {"last": last, "n": _BATCH},
        ).all()
        if not rows:
            return
        last = int(rows[-1][0])
        pairs = [(int(pk), _key(str(tid))) for pk, tid in rows]
        if postgres:
            conn.execute(
                sa.text(
                    "UPDATE traces SET sample_key = v.k FROM unnest("
                    "CAST(:ids AS bigint[]), CAST(:keys AS bigint[])) AS v(id, k) "
                    "WHERE traces.id = v.id"
                ),
                {"ids": [p[0] for p in pairs], "keys": [p[1] for p in pairs]},
            )
        else:
            conn.execute(
                sa.text("UPDATE traces SET sample_key = :k WHERE id = :id"),
                [{"k": k, "id": pk} for pk, k in pairs],
            )


def upgrade() -> None:
    # plain ADD COLUMN (no table copy, also on SQLite: the traces table can be large)
    op.add_column("traces", sa.Column("sample_key", sa.BigInteger(), nullable=True))
    _backfill()
    op.create_index(
        "ix_traces_sampling",
        "traces",
        [
            "sample_key",
            "decision",
            "reason_code",
            "feedback",
            "customer_tier",
            "language",
            "document_type",
            "restricted",
            "at",
        ],
        unique=False,
        postgresql_include=["id"],
    )


def downgrade() -> None:
    op.drop_index("ix_traces_sampling", table_name="traces")
    if op.get_bind().dialect.name == "sqlite":
        # SQLite drops the column in place (3.35+): a batch copy of the table would lose the
        # search triggers and generated version columns of revision 0019
        op.execute("ALTER TABLE traces DROP COLUMN sample_key")
    else:
        op.drop_column("traces", "sample_key")
