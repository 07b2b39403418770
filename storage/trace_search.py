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
* :data:`UNMODELLED`: the objects made by the migration outside the models (the FTS5 table and
  its shadow tables, the generated version columns and their indexes, the trigram indexes),
  which the Alembic model check skips.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Select, String, column, exists, func, select, table
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
