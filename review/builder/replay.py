"""Replay: proof that a stored edit record re-creates the stored text."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine

from review.builder.documents import get_document, parse_ref, ref_of
from review.builder.edits import EditRecord, replay_result
from review.core.errors import InputError
from storage.db import read_session
from storage.models import (
    CaseEdit,
    Document,
)

__all__ = ["ReplayCheck", "replay_check"]


# ------------------------------------------------------------------------------------------
# Replay


@dataclass(frozen=True)
class ReplayCheck:
    edit_id: int
    ok: bool
    detail: str


def _first_difference(a: str, b: str) -> int:
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def replay_check(engine: Engine, case_edit_id: int) -> ReplayCheck:
    """Re-apply a stored edit to its source and compare with the stored derived text.

    Reports positions and references only, never document text, so it is safe to show to
    anyone who can see the edit row.
    """
    with read_session(engine) as s:
        e = s.get(CaseEdit, case_edit_id)
        if e is None:
            raise InputError(f"edit {case_edit_id} does not exist")
        where = f"{e.source_doc_key}@{e.source_version}"
        src = get_document(s, e.source_doc_key, e.source_version)
        if src is None:
            return ReplayCheck(e.id, False, f"the source {where} is no longer in the corpus")
        stored = {k: v for k, v in dict(e.record).items() if k != "extra_refs"}
        try:
            record = EditRecord.from_dict(stored, f"edit {e.id}")
        except InputError as exc:
            return ReplayCheck(e.id, False, str(exc))
        columns = (
            e.operator,
            e.source_doc_key,
            e.source_version,
            e.span_start,
            e.span_end,
            e.before,
            e.after,
            dict(e.params),
        )
        if columns != (
            record.operator,
            record.doc_id,
            record.version,
            record.start,
            record.end,
            record.before,
            record.after,
            dict(record.params),
        ):
            return ReplayCheck(e.id, False, "the provenance columns differ from the stored record")
        try:
            result = replay_result(record, src.body)
        except InputError as exc:
            return ReplayCheck(e.id, False, str(exc))
        if e.document_id is None:
            return ReplayCheck(
                e.id, True, f"replaying on {where} reproduces the recorded change (no stored copy)"
            )
        derived = s.get(Document, e.document_id)
        if derived is None:  # pragma: no cover - the foreign key sets NULL instead
            return ReplayCheck(e.id, False, "the derived document is gone")
        dref = ref_of(derived)
        # stored bodies drop leading and trailing whitespace (see DocumentIn)
        if derived.body != result.text.strip():
            want_text = result.text.strip()
            diff = _first_difference(derived.body, want_text)
            return ReplayCheck(
                e.id,
                False,
                f"replaying on {where} does not give the text of {dref}: they differ from "
                f"character {diff}",
            )
        extra_refs = e.record.get("extra_refs") or []
        for k, ref in enumerate(extra_refs):
            key, version = parse_ref(str(ref))
            extra_doc = get_document(s, key, version)
            want = result.extra_documents[k].body if k < len(result.extra_documents) else None
            if extra_doc is None or want is None or extra_doc.body != want.strip():
                return ReplayCheck(
                    e.id, False, f"replaying on {where} does not give the text of {ref}"
                )
        also = f" and {', '.join(str(r) for r in extra_refs)}" if extra_refs else ""
        return ReplayCheck(e.id, True, f"replaying on {where} gives exactly {dref}{also}")
