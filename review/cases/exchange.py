"""Exchange formats: cases written for other evaluation tools.

* ``canonical``: the workbench's own JSONL (see :func:`review.cases.cases.export_cases`); it round
  trips exactly through ``import-cases``.
* ``ragas``: JSONL, one single-turn sample per line with the documented field names of Ragas'
  ``SingleTurnSample`` (``user_input``, ``retrieved_contexts``, ``retrieved_context_ids``,
  ``reference``). The expected decision, reason codes and the rest of the case travel alongside
  in extra keys, which Ragas ignores when it loads the file.
* ``deepeval``: one JSON array of goldens with DeepEval's field names (``input``,
  ``expected_output``, ``context``, ``additional_metadata``). JSON, not CSV or JSONL: DeepEval's
  CSV loader joins list fields such as ``context`` with a delimiter, which would split or merge
  documents that contain it.

Contexts are the texts of the documents *visible* to the case's identity, in case order; a
forbidden document is never exported as context. Restricted texts are withheld from a ``viewer``
without clearance: the documents' texts, and the case's own text (question, claims, notes, and
the reference built from them) when the case relies on a restricted document.
A variant whose suggested label no expert has confirmed is left out of the ragas and deepeval
exports: an unconfirmed suggestion is not a gold label. Writing streams in batches.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any, Literal

from sqlalchemy import Engine, select

from review.cases import cases
from review.cases.agreed import Agreed, agreed_labels
from review.cases.cases import case_query
from review.core import clearance, readable
from review.core.errors import InputError
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy
from storage.db import read_session
from storage.models import Case, CaseSuggestion

__all__ = [
    "DEEPEVAL_FIELDS",
    "FORMATS",
    "RAGAS_FIELDS",
    "RAGAS_SIDE_FIELDS",
    "ExportReport",
    "deepeval_golden",
    "export",
    "ragas_sample",
    "reference_text",
    "with_agreed",
]

Format = Literal["canonical", "ragas", "deepeval"]
FORMATS: tuple[str, ...] = ("canonical", "ragas", "deepeval")
RAGAS_FIELDS = ("user_input", "retrieved_contexts", "retrieved_context_ids", "reference")
RAGAS_SIDE_FIELDS = (
    "label_source",
    "case_key",
    "expected_decision",
    "reason_codes",
    "required_claims",
    "claim_kinds",
    "category",
    "slices",
    "split",
    "family",
    "evidence_state",
    "language",
    "forbidden_context_ids",
)
DEEPEVAL_FIELDS = ("input", "expected_output", "context", "additional_metadata")
BATCH = 500


@dataclass(frozen=True)
class ContextDoc:
    """A document of a case as the exporters need it."""

    ref: str
    body: str
    visibility: str
    role: str
    access_scope: str


@dataclass(frozen=True)
class ExportReport:
    written: int
    skipped_unconfirmed: int = 0
    withheld_contexts: int = 0

    def summary(self) -> str:
        parts = [f"{readable.count(self.written, 'case')} exported"]
        if self.skipped_unconfirmed:
            parts.append(
                f"{readable.count(self.skipped_unconfirmed, 'variant')} left out: their suggested "
                "label is not "
                "confirmed yet"
            )
        if self.withheld_contexts:
            parts.append(f"{readable.count(self.withheld_contexts, 'restricted context')} withheld")
        return "; ".join(parts)


def with_agreed(record: dict[str, Any], agreed: Agreed | None) -> dict[str, Any]:
    """The record as other tools should score against: the agreed label's decision and reason
    codes as ``expected_decision`` and ``reason_codes`` once a case has one, the author's
    beside them (``author_expected_decision``, ``author_reason_codes``) where they differ;
    ``label_source`` says which: "adjudication", "annotators" or "author"."""
    out = dict(record)
    if agreed is None:
        out["label_source"] = "author"
        return out
    out["label_source"] = agreed.by
    if (agreed.decision, list(agreed.reason_codes)) != (
        record["expected_decision"],
        list(record.get("reason_codes") or []),
    ):
        out["author_expected_decision"] = record["expected_decision"]
        out["author_reason_codes"] = list(record.get("reason_codes") or [])
    out["expected_decision"] = agreed.decision
    out["reason_codes"] = list(agreed.reason_codes)
    return out


def _labels(record: dict[str, Any]) -> dict[str, Any]:
    """The label fields that ride along with a Ragas sample or DeepEval golden."""
    out: dict[str, Any] = {"label_source": record.get("label_source", "author")}
    if "author_expected_decision" in record:
        out["author_expected_decision"] = record["author_expected_decision"]
        out["author_reason_codes"] = record["author_reason_codes"]
    return out


def reference_text(record: dict[str, Any], tax: Taxonomy) -> str:
    """The reference answer: the required claims for an answer, else the expected behaviour."""
    decision = str(record["expected_decision"])
    claims = [str(c) for c in record.get("required_claims") or []]
    if decision == "answer":
        return " ".join(claims) if claims else "Answer from the allowed sources."
    term = tax.decisions.get(decision)
    text = f"{term.label}: {term.definition}" if term else f"Expected decision: {decision}."
    reasons = [
        tax.reason_codes[r].label if r in tax.reason_codes else r
        for r in record.get("reason_codes") or []
    ]
    if reasons:
        text += f" Why: {'; '.join(reasons)}."
    if decision == "partial" and claims:
        text += " Required claims: " + " ".join(claims)
    return text


def _contexts(
    docs: Sequence[ContextDoc], include_restricted: bool
) -> tuple[list[str], list[str], list[str], int]:
    """(texts, ids, forbidden ids, withheld count) of a case's documents."""
    texts: list[str] = []
    ids: list[str] = []
    forbidden: list[str] = []
    withheld = 0
    for d in docs:
        secret = clearance.document_restricted(d.access_scope) and not include_restricted
        if d.visibility != "visible":
            if not secret:  # never reveal that a restricted document exists
                forbidden.append(d.ref)
            continue
        if secret:
            withheld += 1
            continue
        texts.append(d.body)
        ids.append(d.ref)
    return texts, ids, forbidden, withheld


def ragas_sample(
    record: dict[str, Any],
    docs: Sequence[ContextDoc],
    tax: Taxonomy,
    *,
    include_restricted: bool = True,
) -> tuple[dict[str, Any], int]:
    """One Ragas single-turn sample (with the case's labels alongside) and the withheld count."""
    texts, ids, forbidden, withheld = _contexts(docs, include_restricted)
    sample: dict[str, Any] = {
        "user_input": record["question"],
        "retrieved_contexts": texts,
        "retrieved_context_ids": ids,
        "reference": reference_text(record, tax),
        "case_key": record["key"],
        "expected_decision": record["expected_decision"],
        "reason_codes": list(record.get("reason_codes") or []),
        "required_claims": list(record.get("required_claims") or []),
        "claim_kinds": dict(record.get("claim_kinds") or {}),
        "category": record["category"],
        "slices": list(record.get("slices") or []),
        "split": record["split"],
        "family": record.get("family"),
        "evidence_state": record.get("evidence_state"),
        "language": record.get("language"),
        "forbidden_context_ids": forbidden,
        **_labels(record),
    }
    return sample, withheld


def deepeval_golden(
    record: dict[str, Any],
    docs: Sequence[ContextDoc],
    tax: Taxonomy,
    *,
    include_restricted: bool = True,
) -> tuple[dict[str, Any], int]:
    """One DeepEval golden and the withheld count."""
    texts, ids, forbidden, withheld = _contexts(docs, include_restricted)
    golden = {
        "input": record["question"],
        "expected_output": reference_text(record, tax),
        "context": texts,
        "additional_metadata": {
            "case_key": record["key"],
            "expected_decision": record["expected_decision"],
            "reason_codes": list(record.get("reason_codes") or []),
            "required_claims": list(record.get("required_claims") or []),
            "claim_kinds": dict(record.get("claim_kinds") or {}),
            "category": record["category"],
            "slices": list(record.get("slices") or []),
            "split": record["split"],
            "family": record.get("family"),
            "evidence_state": record.get("evidence_state"),
            "language": record.get("language"),
            "identity": dict(record.get("identity") or {}),
            "context_ids": ids,
            "forbidden_context_ids": forbidden,
            **_labels(record),
        },
    }
    return golden, withheld


def _batches(
    engine: Engine, flt: cases.CaseFilter
) -> Iterator[list[tuple[dict[str, Any], list[ContextDoc], bool, bool]]]:
    """(record, documents, unconfirmed, text restricted) per case, 500 cases at a time, in id
    order."""
    conds = cases.filter_conditions(flt)
    last_id = 0
    with read_session(engine) as s:
        while True:
            rows = list(
                s.scalars(
                    case_query().where(Case.id > last_id, *conds).order_by(Case.id).limit(BATCH)
                )
            )
            if not rows:
                return
            ids = [r.id for r in rows]
            pending = set(
                s.scalars(
                    select(CaseSuggestion.case_id).where(
                        CaseSuggestion.case_id.in_(ids), CaseSuggestion.confirmed_by.is_(None)
                    )
                )
            )
            agreed = agreed_labels(s, ids)
            secret = clearance.restricted_cases(s, ids)
            out = []
            for r in rows:
                docs = [
                    ContextDoc(
                        f"{cd.document.doc_key}@{cd.document.version}",
                        cd.document.body,
                        cd.visibility,
                        cd.role,
                        cd.document.access_scope,
                    )
                    for cd in r.documents
                ]
                out.append(
                    (
                        with_agreed(cases.to_record(r), agreed.get(r.id)),
                        docs,
                        r.id in pending,
                        r.id in secret,
                    )
                )
            yield out
            last_id = rows[-1].id
            s.expunge_all()


def export(
    engine: Engine,
    out: IO[str],
    fmt: str,
    tax: Taxonomy,
    flt: cases.CaseFilter | None = None,
    *,
    viewer: Actor,
) -> ExportReport:
    """Write the cases matching ``flt`` in ``fmt`` (canonical, ragas or deepeval) to ``out``,
    as ``viewer`` may see them."""
    flt = flt or cases.CaseFilter()
    if fmt not in FORMATS:
        raise InputError(f"unknown export format {fmt!r}; use one of: {', '.join(FORMATS)}")
    if fmt == "canonical":
        return ExportReport(cases.export_cases(engine, out, flt, viewer=viewer))
    include_restricted = clearance.cleared(viewer)
    written = skipped = withheld = 0
    if fmt == "deepeval":
        out.write("[")
    for batch in _batches(engine, flt):
        for record, docs, unconfirmed, restricted in batch:
            if unconfirmed:
                skipped += 1
                continue
            record = clearance.case_record(viewer, record, restricted)
            if fmt == "ragas":
                item, w = ragas_sample(record, docs, tax, include_restricted=include_restricted)
                out.write(json.dumps(item, ensure_ascii=False) + "\n")
            else:
                item, w = deepeval_golden(record, docs, tax, include_restricted=include_restricted)
                out.write(("\n" if written == 0 else ",\n") + json.dumps(item, ensure_ascii=False))
            written += 1
            withheld += w
    if fmt == "deepeval":
        out.write("\n]\n" if written else "]\n")
    return ExportReport(written, skipped, withheld)
