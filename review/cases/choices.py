"""The values the case pickers offer (the Label queue's filters, a new evaluation run's
subset): the families, slices, documents and case fields among the cases of one status.

A ``SELECT DISTINCT`` joined to the cases reads every case of the status (0.9 s for the seven
pickers at 500,000 cases on PostgreSQL). The few values a column takes are found instead by
index seeks (``storage.db.seek_distinct``), and each is kept when one case of the status
carries it (an ``EXISTS`` that stops at the first such case), all in one statement; a column
with more than :data:`SEEK_LIMIT` values is read whole as before. Families (tens of
thousands) are one semi-join."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import ColumnElement, Select, Table, exists, literal, select, union_all
from sqlalchemy.orm import Session

from storage.db import distinct_values, seek_distinct
from storage.models import Case, CaseDocument, CaseFamily, CaseSlice, Document

__all__ = [
    "PICKER_LIMIT",
    "SEEK_LIMIT",
    "case_values",
    "document_keys",
    "family_keys",
    "slice_names",
]

_CASES: Table = Case.__table__  # type: ignore[assignment]

#: values found by index seeks at most; a column with more is read with one DISTINCT
SEEK_LIMIT = 200

#: the families a picker lists at most (in key order; any other is typed): tens of thousands
#: of options cost the browser seconds to receive and draw
PICKER_LIMIT = 1000


def _kept(
    s: Session,
    candidates: list[Any],
    holds: Callable[[Any], ColumnElement[bool]],
) -> list[Any]:
    """The candidates for which ``holds(value)`` is true, in their order, in one statement."""
    if not candidates:
        return []
    parts = [
        select(literal(i).label("i")).where(holds(value)) for i, value in enumerate(candidates)
    ]
    found = {int(i) for (i,) in s.execute(union_all(*parts) if len(parts) > 1 else parts[0])}
    return [v for i, v in enumerate(candidates) if i in found]


def _linked(s: Session, link: Any, status: str) -> tuple[list[Any] | None, Select[Any]]:
    """The values of ``link`` (a column of a table with ``case_id``: the slices, the quoted
    documents) that at least one case of ``status`` carries: found by seeks and kept by one
    EXISTS each, as a list; None when there are more than :data:`SEEK_LIMIT` (then read the
    select of every carried value, the second item, instead)."""
    carried = (
        select(link)
        .select_from(link.table)
        .join(Case, Case.id == link.table.c.case_id)
        .where(Case.status == status)
    )
    values, _null = seek_distinct(s, link, SEEK_LIMIT + 1)
    if len(values) > SEEK_LIMIT:
        return None, carried
    return _kept(s, values, lambda value: exists(carried.where(link == value))), carried


def _after_status(column: Any) -> bool:
    """Whether an index of ``cases`` starts with (status, ``column``)."""
    return any(
        [c.name for c in index.columns][:2] == ["status", column.name] for index in _CASES.indexes
    )


def case_values(s: Session, column: Any, status: str) -> list[str]:
    """The distinct non-null values of a column of ``cases`` among the cases of ``status``,
    sorted: by seeks within the status when an index starts with (status, column), else with
    one DISTINCT (a seek without such an index would read the table each time)."""
    of_status = Case.status == status
    if not _after_status(column):
        stmt = select(column).where(of_status, column.is_not(None)).distinct()
        return sorted(str(v) for v in s.scalars(stmt))
    return sorted(str(v) for v in distinct_values(s, column, SEEK_LIMIT, of_status))


def slice_names(s: Session, status: str) -> list[str]:
    """The slices of at least one case of ``status``, sorted."""
    kept, carried = _linked(s, CaseSlice.slice, status)
    names = kept if kept is not None else s.scalars(carried.distinct())
    return sorted(str(v) for v in names if v is not None)


def document_keys(s: Session, status: str) -> list[str]:
    """The keys of the documents at least one case of ``status`` quotes (any version), sorted."""
    kept, quoted = _linked(s, CaseDocument.document_id, status)
    if kept is None:
        stmt = select(Document.doc_key).where(Document.id.in_(quoted)).distinct()
    elif not kept:
        return []
    else:
        stmt = select(Document.doc_key).where(Document.id.in_(kept)).distinct()
    return sorted(str(k) for k in s.scalars(stmt) if k is not None)


def family_keys(s: Session, status: str, limit: int | None = None) -> list[str]:
    """The keys of the families with at least one case of ``status``, sorted (one semi-join:
    a family per few cases is too many for seeks); the first ``limit`` + 1 only, when given
    (a picker shows ``limit`` and learns that there are more)."""
    stmt = (
        select(CaseFamily.key)
        .where(
            exists(
                select(literal(1))
                .select_from(Case)
                .where(Case.family_id == CaseFamily.id, Case.status == status)
            )
        )
        .order_by(CaseFamily.key)
    )
    if limit is not None:
        stmt = stmt.limit(limit + 1)
    return [str(k) for k in s.scalars(stmt)]
