"""The Cases page's create/edit form as plain data: the values it starts from (a stored case's
canonical record, or a new case's few defaults), the claims and document rows read back from
what was typed, and the whole validated into a :class:`~review.cases.cases.CaseIn`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from review.cases.cases import CaseIn, validate_case
from review.core.errors import InputError, WorkbenchError
from review.core.taxonomy import Taxonomy
from review.core.terms import CaseStatus

__all__ = [
    "DEFAULT_IDENTITY",
    "DOCUMENT_COLUMNS",
    "FormStart",
    "FormValues",
    "claim_lines",
    "document_rows",
    "documents_frame",
    "form_record",
    "form_start",
    "kinds_help",
    "message_options",
    "option_index",
    "parse_claim_lines",
    "parse_claims",
    "validate_form",
]

DEFAULT_IDENTITY: Mapping[str, object] = {"name": "customer", "scopes": ["public"]}
DOCUMENT_COLUMNS = ["doc_id", "version", "visibility", "role"]
_WHERE = "form: line 1: "  # how validate_case names the form; the page leaves it out


@dataclass(frozen=True)
class FormStart:
    """What the form's inputs start with."""

    key: str | None
    question: str
    claims: str  # one per line
    identity_name: str
    identity_scopes: list[str]
    documents: list[dict[str, object]]
    expected_decision: str  # "" for the category's default decision (a new case)
    expected_message: str  # "" for the wording key the taxonomy suggests
    category: str
    split: str
    reason_codes: list[str]
    slices: list[str]
    family: str
    evidence_state: str  # "" for none
    status: str
    notes: str
    language: str = ""  # "" for not stated


def _strings(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list | tuple) else []


def _kinds(record: Mapping[str, object]) -> Mapping[str, object]:
    kinds = record.get("claim_kinds")
    return kinds if isinstance(kinds, Mapping) else {}


def form_start(record: Mapping[str, object]) -> FormStart:
    """The form's starting values from a case record (canonical format) or from the few
    values a new case starts with; what is missing starts empty (the identity as a customer
    who may see public documents, the decision as the category's default (a
    category has one agreed behaviour), the wording key as the suggested one, the status as
    draft)."""
    ident = record.get("identity")
    if not isinstance(ident, Mapping) or not ident:
        ident = DEFAULT_IDENTITY
    docs = record.get("documents")
    key = record.get("key")
    return FormStart(
        key=None if key is None else str(key),
        question=str(record.get("question", "")),
        claims=claim_lines(_strings(record.get("required_claims")), _kinds(record)),
        identity_name=str(ident.get("name", "")),
        identity_scopes=_strings(ident.get("scopes")),
        documents=[dict(d) for d in docs if isinstance(d, Mapping)]
        if isinstance(docs, list | tuple)
        else [],
        expected_decision=str(record.get("expected_decision") or ""),
        expected_message=str(record.get("expected_message") or ""),
        category=str(record.get("category") or ""),
        split=str(record.get("split") or ""),
        reason_codes=_strings(record.get("reason_codes")),
        slices=_strings(record.get("slices")),
        family=str(record.get("family") or ""),
        evidence_state=str(record.get("evidence_state") or ""),
        status=str(record.get("status", CaseStatus.draft)),
        notes=str(record.get("notes", "")),
        language=str(record.get("language") or ""),
    )


def option_index(options: Sequence[str], value: str) -> int:
    """Where ``value`` is among a select's options; the first option when it is not there."""
    return options.index(value) if value in options else 0


def documents_frame(documents: Sequence[Mapping[str, object]]) -> pd.DataFrame:
    """The case's documents as the rows of the form's document editor."""
    return pd.DataFrame(list(documents), columns=DOCUMENT_COLUMNS)


def message_options(tax: Taxonomy) -> list[str]:
    """The wording keys the form offers, after "" (the suggested one): every decision's."""
    keys: list[str] = []
    for term in tax.decisions.values():
        keys += [k for k in term.messages if k not in keys]
    return ["", *keys]


#: How a claim line's kind starts, at its end: ``The final was in Tampa [kind: historical]``
_KIND_MARK = "[kind:"


def parse_claims(text: str) -> list[str]:
    """Required claims typed one per line (each without its ``[kind: …]``); blank lines are
    left out."""
    return parse_claim_lines(text)[0]


def parse_claim_lines(text: str) -> tuple[list[str], dict[str, str | None]]:
    """Required claims typed one per line, each optionally ending in ``[kind: KIND]`` (the
    kind of fact it states), as (claims, their kinds by claim). A blank kind is none; whether
    a kind is known is checked with the case (:meth:`CaseIn.problems`)."""
    claims: list[str] = []
    kinds: dict[str, str | None] = {}
    for raw in text.splitlines():
        claim, kind = _kind_suffix(raw.strip())
        if not claim:
            continue
        claims.append(claim)
        if kind:
            kinds[claim] = kind
    return claims, kinds


def kinds_help(tax: Taxonomy) -> str:
    """How to give a claim its kind, with the kinds the taxonomy defines."""
    if not tax.claim_kinds:
        return "The taxonomy defines no claim kinds."
    known = "; ".join(f"{k} ({term.label.lower()})" for k, term in tax.claim_kinds.items())
    return (
        "End a claim with [kind: KIND] to say what kind of fact it states, so the no-answer "
        f"policy's freshness rule for that kind applies to its evidence. Kinds: {known}. "
        "Without one, the rule for the document's authority or the global age limit applies."
    )


def _kind_suffix(line: str) -> tuple[str, str]:
    """(the claim, its kind) of a line ending in ``[kind: KIND]`` (any case); (line, "")
    otherwise. Linear in the line's length, whatever was pasted."""
    start = line.lower().rfind(_KIND_MARK) if line.endswith("]") else -1
    if start < 0 or "]" in line[start:-1]:
        return line, ""
    return line[:start].strip(), line[start + len(_KIND_MARK) : -1].strip()


def claim_lines(claims: Sequence[str], kinds: Mapping[str, object] | None) -> str:
    """Claims as the form's text: one per line, each with ``[kind: KIND]`` when it has one."""
    kinds = kinds or {}
    return "\n".join(f"{c} [kind: {kinds[c]}]" if kinds.get(c) else c for c in claims)


def _missing(value: object) -> bool:
    return value is None or bool(pd.isna(value))


def _or_default(value: object, default: str) -> object:
    """A cell's value; ``default`` for an empty cell (None, NaN or "")."""
    return default if _missing(value) or not value else value


def document_rows(frame: pd.DataFrame) -> list[dict[str, object]]:
    """The rows of the document editor as case documents. A row without a document id is
    skipped; an id may carry its version as ``ID@VERSION``; an empty visibility is visible and
    an empty role context. InputError names the row whose version is missing or not a whole
    number."""
    out: list[dict[str, object]] = []
    for n, row in enumerate(frame.reset_index(drop=True).to_dict("records"), 1):
        raw_id = row.get("doc_id")
        if _missing(raw_id) or not str(raw_id).strip():
            continue
        ref = str(raw_id).strip()
        version = row.get("version")
        if "@" in ref and _missing(version):
            ref, _, version = ref.partition("@")
        if _missing(version):
            raise InputError(f"Document row {n}: give the version of {ref}.")
        try:
            number = int(str(version).strip()) if isinstance(version, str) else int(version)
        except (TypeError, ValueError, OverflowError):
            raise InputError(
                f"Document row {n}: the version of {ref} must be a whole number."
            ) from None
        out.append(
            {
                "doc_id": ref.partition("@")[0],
                "version": number,
                "visibility": _or_default(row.get("visibility"), "visible"),
                "role": _or_default(row.get("role"), "context"),
            }
        )
    return out


@dataclass(frozen=True)
class FormValues:
    """What the form holds when it is submitted."""

    key: str | None
    question: str
    claims: str
    identity_name: str
    identity_scopes: list[str]
    documents: list[dict[str, object]]  # from document_rows
    expected_decision: str  # "": the category's default decision
    category: str
    split: str
    expected_message: str = ""  # "": the suggested wording key
    reason_codes: list[str] = field(default_factory=list)
    slices: list[str] = field(default_factory=list)
    family: str = ""
    evidence_state: str = ""
    status: str = CaseStatus.draft
    notes: str = ""
    language: str = ""  # "": not stated


def form_record(v: FormValues) -> dict[str, object]:
    """The form's values as a case record (canonical format), not yet validated."""
    claims, kinds = parse_claim_lines(v.claims)
    return {
        "key": v.key,
        "question": v.question,
        "required_claims": claims,
        **({"claim_kinds": kinds} if kinds else {}),
        "identity": {"name": v.identity_name, "scopes": list(v.identity_scopes)},
        "documents": list(v.documents),
        "expected_decision": v.expected_decision,
        "expected_message": v.expected_message or None,
        "reason_codes": list(v.reason_codes),
        "category": v.category,
        "slices": list(v.slices),
        "split": v.split,
        "family": v.family or None,
        "evidence_state": v.evidence_state or None,
        "language": v.language.strip() or None,
        "status": v.status,
        "notes": v.notes,
    }


def validate_form(v: FormValues, tax: Taxonomy) -> CaseIn:
    """The form's case validated like an imported one; InputError says what is wrong (without
    naming the form as a file and line). An empty decision is the category's default."""
    record = form_record(v)
    if not v.expected_decision and v.category in tax.categories:
        record["expected_decision"] = tax.categories[v.category].default_decision
    try:
        return validate_case(record, "form", 1, tax)
    except WorkbenchError as exc:
        raise InputError(str(exc).removeprefix(_WHERE)) from None
