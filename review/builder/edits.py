"""Controlled edit operators: small, recorded edits of real-shaped Markdown documents.

Domain experts build hard negatives by editing an authoritative document in one place: another
product tier, the same number with another unit, a policy without its exception, another year,
another jurisdiction, a question without its answer, the answer moved to a restricted document,
or an injected instruction. Every operator here is pure: it takes the document text, a span and
a frozen params object and returns the edited text.

Contract shared by every operator
    * ``candidates(text)`` proposes spans the operator can act on (one :class:`Span` each).
    * ``apply(text, span, params)`` changes text *only inside the span*: the result is
      ``text[:span.start] + result.after + text[span.end:]``. Headings, tables and footnote
      definitions outside the edited words keep their shape.
    * An edit that would change nothing, or whose target is missing from the span, raises
      :class:`~review.core.errors.InputError` saying what was missing.
    * :class:`EditRecord` keeps the provenance (operator, JSON-able params, source document and
      version, span, before, after) and :func:`replay` re-applies it to the source text.

Nothing here touches the database or Streamlit.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from review.builder.operator import EditResult, Operator, Params, ParamValue, Span
from review.builder.operators_text import (
    DropException,
    InsertInstruction,
    RelocateAnswer,
    RemoveAnswer,
)
from review.builder.operators_values import (
    ChangeNumber,
    ChangeUnit,
    MoveJurisdiction,
    ReplaceTier,
    SwapYear,
)
from review.core.errors import InputError

__all__ = [
    "OPERATORS",
    "EditRecord",
    "edit_document",
    "replay",
    "replay_result",
]


# ------------------------------------------------------------------------------------------
# The registry, provenance and replay

OPERATORS: dict[str, Operator[Any]] = {
    op.name: op
    for op in (
        ReplaceTier(),
        ChangeUnit(),
        ChangeNumber(),
        DropException(),
        SwapYear(),
        MoveJurisdiction(),
        RemoveAnswer(),
        RelocateAnswer(),
        InsertInstruction(),
    )
}


def _operator(name: str) -> Operator[Any]:
    op = OPERATORS.get(name)
    if op is None:
        raise InputError(f"unknown edit operator {name!r}; use one of: {', '.join(OPERATORS)}")
    return op


@dataclass(frozen=True)
class EditRecord:
    """Provenance of one edit: enough to show it, audit it and replay it."""

    operator: str
    params: Mapping[str, ParamValue]
    doc_id: str
    version: int
    start: int
    end: int
    before: str
    after: str
    result_ref: str | None = None  # "DOC@version" of the stored edited copy, when there is one

    def to_dict(self) -> dict[str, Any]:
        return {
            "operator": self.operator,
            "params": dict(self.params),
            "doc_id": self.doc_id,
            "version": self.version,
            "start": self.start,
            "end": self.end,
            "before": self.before,
            "after": self.after,
            "result_ref": self.result_ref,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object], source: str = "edit record") -> EditRecord:
        """Validate a stored record; problems name the field."""
        if not isinstance(data, Mapping):
            raise InputError(f"{source}: expected a mapping")
        expected: dict[str, tuple[type, ...]] = {
            "operator": (str,),
            "params": (Mapping,),
            "doc_id": (str,),
            "version": (int,),
            "start": (int,),
            "end": (int,),
            "before": (str,),
            "after": (str,),
        }
        unknown = sorted(set(data) - set(expected) - {"result_ref"})
        if unknown:
            raise InputError(f"{source}: field {unknown[0]}: unknown field")
        for key, types_ in expected.items():
            if key not in data:
                raise InputError(f"{source}: field {key}: required field is missing")
            value = data[key]
            if not isinstance(value, types_) or isinstance(value, bool):
                raise InputError(f"{source}: field {key}: has the wrong type")
        ref = data.get("result_ref")
        if ref is not None and not isinstance(ref, str):
            raise InputError(f"{source}: field result_ref: has the wrong type")
        params = typing.cast(Mapping[str, object], data["params"])
        op = _operator(typing.cast(str, data["operator"]))
        parsed = op.parse_params(params)  # validates names, types and values
        return cls(
            operator=op.name,
            params=parsed.to_dict(),
            doc_id=typing.cast(str, data["doc_id"]),
            version=typing.cast(int, data["version"]),
            start=typing.cast(int, data["start"]),
            end=typing.cast(int, data["end"]),
            before=typing.cast(str, data["before"]),
            after=typing.cast(str, data["after"]),
            result_ref=ref,
        )


def edit_document(
    text: str,
    operator: str,
    span: Span,
    params: Params | Mapping[str, object],
    *,
    doc_id: str,
    version: int,
    result_ref: str | None = None,
) -> tuple[EditResult, EditRecord]:
    """Apply an operator by name and return the result with its provenance record."""
    op = _operator(operator)
    p = params if isinstance(params, Params) else op.parse_params(params)
    result = op.apply(text, span, p)
    if text.strip() and not result.text.strip():
        # a document needs some text (the corpus refuses an empty body): say so before the
        # preview (the callers name the document), not fail at the save in the validator's words
        raise InputError(
            f"{op.label} would leave this document with no text (the span "
            "is all of it). Pick a smaller span, or leave this document out of the edit; to "
            "keep its passage from the case's identity, make an Evidence forbidden variant."
        )
    record = EditRecord(
        operator=op.name,
        params=p.to_dict(),
        doc_id=doc_id,
        version=version,
        start=span.start,
        end=span.end,
        before=result.before,
        after=result.after,
        result_ref=result_ref,
    )
    return result, record


def replay_result(record: EditRecord, source_text: str) -> EditResult:
    """Re-apply a recorded edit to its source text; InputError if it no longer matches."""
    op = _operator(record.operator)
    where = f"{record.doc_id}@{record.version}"
    if not (0 <= record.start <= record.end <= len(source_text)):
        raise InputError(
            f"{where}: the recorded span {record.start}-{record.end} is outside the text "
            f"({len(source_text)} characters)"
        )
    if source_text[record.start : record.end] != record.before:
        raise InputError(
            f"{where}: the text at {record.start}-{record.end} differs from the recorded "
            "'before'; this is not the source the edit was made on"
        )
    span = Span(record.start, record.end, record.before)
    result = op.apply(source_text, span, op.parse_params(record.params))
    if result.after != record.after:
        raise InputError(
            f"{where}: replaying {record.operator} gives a different result from the record; "
            "the operator has changed since the edit was made"
        )
    return result


def replay(record: EditRecord, source_text: str) -> str:
    """The edited text, re-created from the record and the source text."""
    return replay_result(record, source_text).text
