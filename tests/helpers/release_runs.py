"""Runs over the demo's ready cases for the release gate's tests: each case as the gate's
tests need it, the output a correct pipeline gives, and a run's outputs scored as the
workbench scores an imported run."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Engine, select

from review.core.taxonomy import Taxonomy
from review.evaluation import evalruns
from storage.db import read_session
from storage.models import Case, CaseDocument, Document


def ready_cases(engine: Engine) -> list[dict[str, Any]]:
    """Every ready case with its expected decision, first reason, wording key and the
    visible documents by role."""
    with read_session(engine) as s:
        rows = s.execute(
            select(
                Case.id,
                Case.key,
                Case.expected_decision,
                Case.reason_codes,
                Case.expected_message,
            ).where(Case.status == "ready")
        ).all()
        docs: dict[int, list[tuple[str, str]]] = {}
        for cid, key, ver, role in s.execute(
            select(CaseDocument.case_id, Document.doc_key, Document.version, CaseDocument.role)
            .join(Document, Document.id == CaseDocument.document_id)
            .where(CaseDocument.visibility == "visible")
        ):
            docs.setdefault(cid, []).append((f"{key}@{ver}", role))
    return [
        {
            "key": r.key,
            "decision": r.expected_decision,
            "reasons": list(r.reason_codes or []),
            "message": r.expected_message,
            "docs": docs.get(r.id, []),
        }
        for r in rows
    ]


def correct_output(c: dict[str, Any]) -> dict[str, Any]:
    """The output a correct pipeline gives: the expected decision, its first reason and
    wording key; an answer cites a decisive (or partial) document."""
    if c["decision"] in ("answer", "partial"):
        cited = [d for d, role in c["docs"] if role in ("decisive", "partial")][:1]
        return {"case": c["key"], "decision": c["decision"], "text": "It is.", "cited_ids": cited}
    return {
        "case": c["key"],
        "decision": c["decision"],
        "text": "I cannot answer that from the documents available to you.",
        "reason_code": c["reasons"][0],
        "message_key": c["message"],
    }


def scored_frame(engine: Engine, tax: Taxonomy, rows: list[dict[str, Any]]) -> Any:
    lines = [json.dumps(r) for r in rows]
    items = list(evalruns.iter_outputs(lines, "run.jsonl", tax))
    return evalruns.score_outputs(engine, items, "run.jsonl", tax)
