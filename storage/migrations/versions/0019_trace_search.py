"""Searching and filtering traces without scanning them (issue 18)

* One index per filter of the Traces page that had none: ``(column, at, restricted)`` for the
  decision, reason code, ranking mode, model, language, customer tier, document type and user
  role, and the policy version's single-column index widened the same way. The list's "newest
  first" then reads the index in order and stops after a page; a count reads the index alone
  (``restricted`` is in it, for users without clearance).
* The same for the most used components of ``versions`` (index, prompt, embedding, reranker):
  a generated column ``versions_<key>`` per component, holding what the filter has always
  compared, and its index. SQLite: virtual, ``json_extract(versions, '$."<key>"')`` (no
  declared type, so values keep their JSON type as before); PostgreSQL: stored,
  ``versions ->> '<key>'`` (one table rewrite here). Computed by the database: nothing for
  writers to fill, and a writer must not name them (a PostgreSQL ``COPY`` lists its columns).
  An expression index instead would not serve counts on PostgreSQL (no index-only scan of an
  expression) and SQLite cannot reflect one (a warning in every reflection, lost in a batch
  table copy).
* On SQLite a later migration that copies the traces table (``batch_alter_table`` with a
  column change) drops the table's triggers: it must recreate ``FTS_TRIGGERS`` below.
* Text search keeps its meaning (a substring of the question or the answer, any case, or an
  exact trace id), served by trigrams. On SQLite a contentless FTS5 table ``traces_fts`` with
  the case-sensitive trigram tokenizer over ``lower(query)`` and ``lower(answer_text)`` (the
  same lower() the search's ``lower(x) LIKE lower(p)`` applies, so a trigram phrase match is
  exactly that substring match), kept in step by triggers on every insert, delete and text
  update, whoever writes, and filled here from the stored traces. On PostgreSQL GIN indexes
  with ``pg_trgm`` (created here when the extension can be; without it the search is still
  right, only slower).

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-01 23:10:00
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from alembic import op
from sqlalchemy.exc import DBAPIError

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# (index name, leading column) as storage.models.Trace declares them at this revision
COLUMN_INDEXES = (
    ("ix_traces_decision_at", "decision"),
    ("ix_traces_reason_at", "reason_code"),
    ("ix_traces_ranking_mode_at", "ranking_mode"),
    ("ix_traces_model_at", "model_version"),
    ("ix_traces_policy_at", "policy_version"),
    ("ix_traces_language_at", "language"),
    ("ix_traces_tier_at", "customer_tier"),
    ("ix_traces_doctype_at", "document_type"),
    ("ix_traces_user_role_at", "user_role"),
)
# the versions components with an expression index (storage.trace_search.VERSION_KEYS)
VERSION_KEYS = ("index", "prompt", "embedding", "reranker")

FTS_TRIGGERS = (
    """CREATE TRIGGER traces_fts_ai AFTER INSERT ON traces BEGIN
      INSERT INTO traces_fts(rowid, query, answer_text)
      VALUES (new.id, lower(new.query), lower(new.answer_text));
    END""",
    """CREATE TRIGGER traces_fts_ad AFTER DELETE ON traces BEGIN
      INSERT INTO traces_fts(traces_fts, rowid, query, answer_text)
      VALUES ('delete', old.id, lower(old.query), lower(old.answer_text));
    END""",
    """CREATE TRIGGER traces_fts_au AFTER UPDATE OF id, query, answer_text ON traces BEGIN
      INSERT INTO traces_fts(traces_fts, rowid, query, answer_text)
      VALUES ('delete', old.id, lower(old.query), lower(old.answer_text));
      INSERT INTO traces_fts(rowid, query, answer_text)
      VALUES (new.id, lower(new.query), lower(new.answer_text));
    END""",
)


def upgrade() -> None:
    bind = op.get_bind()
    dialect = bind.dialect.name
    op.drop_index("ix_traces_policy_version", table_name="traces")
    # the generated columns first: PostgreSQL rewrites the table (and its indexes) to add them
    if dialect == "sqlite":
        for key in VERSION_KEYS:
            op.execute(
                f"ALTER TABLE traces ADD COLUMN versions_{key} "
                f"GENERATED ALWAYS AS (json_extract(versions, '$.\"{key}\"')) VIRTUAL"
            )
    else:  # one ALTER TABLE: one rewrite of the table for all four
        op.execute(
            "ALTER TABLE traces "
            + ", ".join(
                f"ADD COLUMN versions_{key} text GENERATED ALWAYS AS (versions ->> '{key}') STORED"
                for key in VERSION_KEYS
            )
        )
    for name, column in COLUMN_INDEXES:
        op.create_index(name, "traces", [column, "at", "restricted"])
    for key in VERSION_KEYS:
        op.create_index(
            f"ix_traces_version_{key}_at", "traces", [f"versions_{key}", "at", "restricted"]
        )
    if dialect == "sqlite":
        op.execute(
            "CREATE VIRTUAL TABLE traces_fts USING fts5(query, answer_text, "
            "content='', tokenize='trigram case_sensitive 1')"
        )
        # the backfill: every stored trace's question and answer
        op.execute(
            "INSERT INTO traces_fts(rowid, query, answer_text) "
            "SELECT id, lower(query), lower(answer_text) FROM traces"
        )
        for trigger in FTS_TRIGGERS:
            op.execute(trigger)
    elif dialect == "postgresql":
        try:
            with bind.begin_nested():
                bind.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        except DBAPIError as exc:
            warnings.warn(
                "pg_trgm could not be created, so trace text search scans the traces (still "
                f"right, slower): {exc.orig}. Create the extension and the indexes "
                "ix_traces_query_trgm, ix_traces_answer_trgm as in migration 0019.",
                stacklevel=1,
            )
            return
        op.execute("CREATE INDEX ix_traces_query_trgm ON traces USING gin (query gin_trgm_ops)")
        op.execute(
            "CREATE INDEX ix_traces_answer_trgm ON traces USING gin (answer_text gin_trgm_ops)"
        )


def downgrade() -> None:
    bind = op.get_bind()
    dialect = bind.dialect.name
    if dialect == "sqlite":
        for trigger in ("traces_fts_ai", "traces_fts_ad", "traces_fts_au"):
            op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        op.execute("DROP TABLE IF EXISTS traces_fts")
    elif dialect == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_traces_query_trgm")
        op.execute("DROP INDEX IF EXISTS ix_traces_answer_trgm")
    for key in VERSION_KEYS:
        op.execute(f"DROP INDEX IF EXISTS ix_traces_version_{key}_at")
        op.execute(f"ALTER TABLE traces DROP COLUMN versions_{key}")
    for name, _column in COLUMN_INDEXES:
        op.drop_index(name, table_name="traces")
    op.create_index("ix_traces_policy_version", "traces", ["policy_version"])
