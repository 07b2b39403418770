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

from sqlalchemy import ColumnElement, Table, exists, literal, select, union_all
from sqlalchemy.orm import Session

from storage.db import seek_distinct
from storage.models import Case, CaseDocument, CaseFamily, CaseSlice, Document

__all__ = ["SEEK_LIMIT", "case_values", "document_keys", "family_keys", "slice_names"]

_CASES: Table = Case.__table__  # type: ignore[assignment]

#: values found by index seeks at most; a column with more is read with one DISTINCT
SEEK_LIMIT = 200


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


def _by_seeks(
    s: Session,
    column: Any,
    holds: Callable[[Any], ColumnElement[bool]] | None,
    whole: Callable[[], list[Any]],
    *where: ColumnElement[bool],
) -> list[str]:
    """The values of ``column`` found by seeks (within ``where``) for which ``holds`` is true
    (all of them: None), sorted; ``whole()`` reads them all when there are too many."""
    values, _null = seek_distinct(s, column, SEEK_LIMIT + 1, *where)
    if len(values) > SEEK_LIMIT:
        return sorted(str(v) for v in whole())
    if holds is not None:
        values = _kept(s, values, holds)
    return sorted(str(v) for v in values)


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

    def whole() -> list[Any]:
        stmt = select(column).where(of_status, column.is_not(None)).distinct()
        return list(s.scalars(stmt))

    if not _after_status(column):
        return sorted(str(v) for v in whole())
    return _by_seeks(s, column, None, whole, of_status)


def slice_names(s: Session, status: str) -> list[str]:
    """The slices of at least one case of ``status``, sorted."""

    def holds(value: Any) -> ColumnElement[bool]:
        return exists(
            select(literal(1))
            .select_from(CaseSlice)
            .join(Case, Case.id == CaseSlice.case_id)
            .where(CaseSlice.slice == value, Case.status == status)
        )

    def whole() -> list[Any]:
        stmt = (
            select(CaseSlice.slice)
            .join(Case, Case.id == CaseSlice.case_id)
            .where(Case.status == status)
            .distinct()
        )
        return list(s.scalars(stmt))

    return _by_seeks(s, CaseSlice.slice, holds, whole)


def document_keys(s: Session, status: str) -> list[str]:
    """The keys of the documents at least one case of ``status`` quotes (any version), sorted."""

    def holds(value: Any) -> ColumnElement[bool]:
        return exists(
            select(literal(1))
            .select_from(CaseDocument)
            .join(Case, Case.id == CaseDocument.case_id)
            .where(CaseDocument.document_id == value, Case.status == status)
        )

    ids, _null = seek_distinct(s, CaseDocument.document_id, SEEK_LIMIT + 1)
    if len(ids) > SEEK_LIMIT:
        quoted = (
            select(CaseDocument.document_id)
            .join(Case, Case.id == CaseDocument.case_id)
            .where(Case.status == status)
        )
        stmt = select(Document.doc_key).where(Document.id.in_(quoted)).distinct()
    else:
        kept = _kept(s, ids, holds)
        if not kept:
            return []
        stmt = select(Document.doc_key).where(Document.id.in_(kept)).distinct()
    return sorted(str(k) for k in s.scalars(stmt) if k is not None)


def family_keys(s: Session, status: str) -> list[str]:
    """The keys of the families with at least one case of ``status``, sorted (one semi-join:
    a family per few cases is too many for seeks)."""
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
    return [str(k) for k in s.scalars(stmt)]
