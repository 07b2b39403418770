"""The database objects that make searching and filtering traces fast (migration 0019), and
the query pieces that use them.

* ``version_value(key)``: a component of ``traces.versions`` as the filter has always
  compared it (SQLite ``json_extract(versions, '$."key"')``, PostgreSQL ``versions ->> 'key'``),
  read from the generated column ``versions_<key>`` of migration 0019, which is indexed.
* ``fts_candidates(text)``: on SQLite, the ids of the traces whose question or answer holds
  ``text`` as a substring, in any case, from the FTS5 trigram table ``traces_fts``. The table
  holds ``lower(query)`` and ``lower(answer_text)`` with a case-sensitive trigram tokenizer and
  the phrase is lowered by the same SQL lower(), so a match is exactly SQLite's
  ``lower(x) LIKE lower('%text%')`` (lower() folds ASCII letters only, as LIKE does).
  ``None`` when trigrams cannot answer (fewer than 3 characters).
* ``two_character_matches(text)``: on SQLite, the same for a text of two characters, which has
  no trigram of its own: the matches of the trigrams in the table that start or end with it
  (found in the table's vocabulary, :data:`TERMS_TABLE`), with the few traces whose question
  or answer is shorter than 3 characters (no trigram at all), matched on their own text.
* :data:`UNMODELLED`: the objects made by the migration outside the models (the FTS5 table and
  its shadow tables, the generated version columns and their indexes, the trigram indexes),
  which the Alembic model check skips.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    ColumnElement,
    Integer,
    Select,
    String,
    bindparam,
    column,
    exists,
    func,
    select,
    table,
)
from sqlalchemy import text as sql_text
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.visitors import InternalTraversal, _TraverseInternalsType

#: versions components with an expression index ``ix_traces_version_<key>_at``
VERSION_KEYS = ("index", "prompt", "embedding", "reranker")

FTS_TABLE = "traces_fts"
#: objects of migrations 0019 and 0024 that storage.models does not declare
UNMODELLED = frozenset(
    {
        *(f"ix_traces_version_{k}_at" for k in VERSION_KEYS),
        *(f"versions_{k}" for k in VERSION_KEYS),  # generated columns
        "ix_traces_query_trgm",
        "ix_traces_answer_trgm",
        FTS_TABLE,
        *(f"{FTS_TABLE}_{part}" for part in ("data", "idx", "docsize", "config", "content")),
        "ix_traces_added",  # migration 0024, on SQLite only
    }
)

#: the shortest text trigrams can find (shorter searches read every trace)
MIN_TRIGRAM_CHARS = 3

#: the trigram table's vocabulary (an ``fts5vocab`` table of the ``instance`` kind, which
#: seeks a term without reading its posting list), made in every SQLite connection's temp
#: schema by storage.db (:data:`TERMS_DDL`)
TERMS_TABLE = "traces_fts_terms"
TERMS_DDL = (
    f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{TERMS_TABLE} "
    f"USING fts5vocab(main, {FTS_TABLE}, instance)"
)


class _VersionValue(ColumnElement[str]):
    """``traces.versions[component]`` as text (see :func:`version_value`)."""

    inherit_cache = True
    _traverse_internals: _TraverseInternalsType = [("component", InternalTraversal.dp_string)]  # noqa: RUF012
    type = String()

    def __init__(self, component: str) -> None:
        if component not in VERSION_KEYS:
            raise ValueError(f"no index on the versions component {component!r}")
        self.component = component


@compiles(_VersionValue, "sqlite")
@compiles(_VersionValue, "postgresql")
def _version_column(element: _VersionValue, compiler: Any, **kw: Any) -> str:
    # the generated column of migration 0019: json_extract(versions, '$."<key>"') on SQLite,
    # versions ->> '<key>' on PostgreSQL
    return f"traces.versions_{element.component}"


@compiles(_VersionValue)
def _version_other(element: _VersionValue, compiler: Any, **kw: Any) -> str:
    from storage.models import Trace

    return str(compiler.process(Trace.versions[element.component].as_string(), **kw))


def version_value(component: str) -> ColumnElement[str]:
    """One indexed component of ``traces.versions`` as text (one of :data:`VERSION_KEYS`)."""
    return _VersionValue(component)


_fts = table(FTS_TABLE, column("rowid"), column(FTS_TABLE))


def fts_phrase(text: str) -> str | None:
    """``text`` as an FTS5 string (every character literal: quotes doubled, operators such as
    NEAR, ``*``, ``-`` or parentheses inside the string are plain text); None when trigrams
    cannot find it (fewer than 3 characters, or a NUL, where FTS5 would stop reading)."""
    if len(text) < MIN_TRIGRAM_CHARS or "\x00" in text:
        return None
    return '"' + text.replace('"', '""') + '"'


def fts_candidates(text: str) -> Select[Any] | None:
    """The ids of traces whose question or answer holds ``text`` in any case (SQLite), or
    None when trigrams cannot answer."""
    phrase = fts_phrase(text)
    if phrase is None:
        return None
    return select(_fts.c.rowid).where(_fts.c[FTS_TABLE].match(func.lower(phrase)))


def fts_holds(text: str, trace_pk: ColumnElement[int]) -> ColumnElement[bool]:
    """Whether the trace ``trace_pk`` is among :func:`fts_candidates` (a lookup of one row in
    the trigram table, for a correlated condition); ``text`` must have trigrams."""
    phrase = fts_phrase(text)
    if phrase is None:
        raise ValueError("fts_holds needs a text with trigrams (fts_phrase)")
    return exists().where(_fts.c[FTS_TABLE].match(func.lower(phrase)), _fts.c.rowid == trace_pk)


#: The traces whose question or answer holds the two characters ``:s`` in any case (lowered
#: as SQLite's lower() does, like the table's text). A text of 3 or more characters holds
#: them exactly when it holds a trigram that starts or ends with them: those in the table
#: are found in its vocabulary, the ones that start with them by a walk from the first term
#: >= ``:s`` (one seek per term), the ones that end with them by looking up, for each first
#: character of the table's terms (one seek each), that character followed by ``:s``; all
#: are asked in one FTS5 query joined by OR (``"s"`` itself, too short for a trigram, matches
#: nothing and keeps the query valid when no trigram holds them). A text of 0-2 characters
#: has no trigram: its traces have a column of 0 trigrams in the table's size record (one
#: varint per column: the first byte 0, or the last byte 0 after a byte below 0x80, a
#: varint's last byte; ``instr`` first, as a cheap test) and are matched on their own text.
_TWO_CHARACTERS = f"""
WITH RECURSIVE
  s(v) AS (SELECT lower(:s)),
  firsts(ch) AS (
    SELECT (SELECT substr(term, 1, 1) FROM temp.{TERMS_TABLE} LIMIT 1)
    UNION ALL
    SELECT (
      SELECT substr(term, 1, 1) FROM temp.{TERMS_TABLE}
      WHERE term > firsts.ch || char(1114111) || char(1114111) LIMIT 1
    ) FROM firsts WHERE firsts.ch IS NOT NULL
  ),
  starts(term) AS (
    SELECT (SELECT term FROM temp.{TERMS_TABLE} WHERE term >= (SELECT v FROM s) LIMIT 1)
    UNION ALL
    SELECT (SELECT term FROM temp.{TERMS_TABLE} WHERE term > starts.term LIMIT 1)
    FROM starts WHERE substr(starts.term, 1, 2) = (SELECT v FROM s)
  ),
  found(term) AS (
    SELECT term FROM starts WHERE substr(term, 1, 2) = (SELECT v FROM s)
    UNION
    SELECT firsts.ch || s.v FROM firsts, s
    WHERE firsts.ch IS NOT NULL AND EXISTS (
      SELECT 1 FROM temp.{TERMS_TABLE} WHERE term = firsts.ch || s.v LIMIT 1
    )
  )
SELECT rowid AS id FROM {FTS_TABLE}
WHERE {FTS_TABLE} MATCH (
  SELECT '"' || replace(v, '"', '""') || '"' || coalesce(
    (SELECT group_concat(' OR "' || replace(term, '"', '""') || '"', '') FROM found), ''
  ) FROM s
)
UNION
SELECT traces.id FROM {FTS_TABLE}_docsize AS size JOIN traces ON traces.id = size.id
WHERE instr(size.sz, x'00') > 0 AND (
  substr(size.sz, 1, 1) = x'00'
  OR (substr(size.sz, -1, 1) = x'00' AND substr(size.sz, -2, 1) < x'80')
) AND (
  lower(traces.query) LIKE lower(:like) ESCAPE '\\'
  OR lower(traces.answer_text) LIKE lower(:like) ESCAPE '\\'
)
"""

#: the length of text :func:`two_character_matches` answers
TWO_CHARACTERS = 2


def two_character_matches(text: str) -> Select[Any] | None:
    """The ids of the traces whose question or answer holds ``text``, two characters, in any
    case (SQLite; exactly ``lower(x) LIKE lower('%text%')``), or None for any other length
    or a NUL. It reads the table's size record of every trace (a fraction of a second at a
    million traces) and the posting lists of every trigram that holds ``text``: for text
    that few traces hold."""
    if len(text) != TWO_CHARACTERS or "\x00" in text:
        return None
    esc = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    found = (
        sql_text(_TWO_CHARACTERS)
        .bindparams(bindparam("s", text), bindparam("like", f"%{esc}%"))
        .columns(column("id", Integer))
        .subquery("two_characters")
    )
    return select(found.c.id)
