"""Counterfactual families: one question, several evidence states, each with its decision.

Builders take an evidence-present case as a plain dict in the canonical exchange format (the
shape of one line of ``cases.jsonl``) plus the texts of the documents it needs, and return a
:class:`Variant`: the variant case dict, any new document versions to create, the edit records
that produced them, and the *suggested* decision and reasons. The suggestion is kept apart from
the labels: the variant case is a ``draft`` until an expert confirms its expected decision.

Documents are plain dicts with at least ``doc_id`` (or ``doc_key``), ``version`` and ``body``;
``title``, ``effective_date``, ``superseded_by``, ``authority``, ``owner``, ``access_scope`` and
``jurisdiction`` are used when present. New documents come back in the same shape, with dates as
ISO strings, ready for ``review.corpus.docformat.DocumentIn``.

:func:`family_checks` verifies a whole family without reading any labels: exactly one
evidence-present variant, no restricted text visible in a forbidden variant, no decisive passage
left visible in a removed-evidence variant, and visibility that agrees with the identity's
scopes. Lexical overlap is only used to find leaks, never to decide what answers a question.
"""

# Long module: the five builders share one input validation, one variant constructor and one
# rule for the decisive documents an edit leaves (the evidence is gone only when none still
# shows the answer); apart, each would need the others' private helpers.

from __future__ import annotations

import copy
import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from review.builder.edits import OPERATORS, EditRecord, edit_document
from review.builder.operator import (
    EditResult,
    Params,
    ParamValue,
    Span,
    Suggestion,
    find_span,
)
from review.core.errors import InputError
from review.core.terms import CaseStatus

__all__ = [
    "Check",
    "DocEdit",
    "Variant",
    "derive_conflicted",
    "derive_edited",
    "derive_forbidden",
    "derive_partial",
    "derive_removed",
    "index_documents",
    "merge_unique",
    "norm_text",
    "passage_bounds",
    "present_variant",
    "versioned_ref",
]

DocRef = tuple[str, int]
PUBLIC_SCOPE = "public"


@dataclass(frozen=True)
class Variant:
    """One member of a family: the case dict plus what it needs and what is suggested."""

    evidence_state: str | None
    case: dict[str, Any]
    suggested_decision: str
    suggested_reasons: tuple[str, ...]
    suggested_slices: tuple[str, ...] = ()
    new_documents: tuple[dict[str, Any], ...] = ()
    edits: tuple[EditRecord, ...] = ()
    decisive_passage: str | None = None
    derivation: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (for storage or export)."""
        return {
            "evidence_state": self.evidence_state,
            "case": copy.deepcopy(self.case),
            "suggested_decision": self.suggested_decision,
            "suggested_reasons": list(self.suggested_reasons),
            "suggested_slices": list(self.suggested_slices),
            "new_documents": [dict(d) for d in self.new_documents],
            "edits": [e.to_dict() for e in self.edits],
            "decisive_passage": self.decisive_passage,
            "derivation": self.derivation,
        }


@dataclass(frozen=True)
class Check:
    """One consistency check on a family; ``variant`` names the member it is about."""

    name: str
    passed: bool
    detail: str
    variant: str = ""


# ------------------------------------------------------------------------------------------
# Input validation


def _fail(label: str, fld: str, problem: str) -> InputError:
    return InputError(f"{label}: field {fld}: {problem}")


def _label(case: Mapping[str, Any]) -> str:
    key = case.get("key")
    return str(key) if key else "case"


def _base(case: Mapping[str, Any], builder: str) -> dict[str, Any]:
    """A validated deep copy of an evidence-present case."""
    if not isinstance(case, Mapping):
        raise InputError(f"{builder}: the case must be a mapping in the canonical case format")
    label = _label(case)
    for fld, typ in (("question", str), ("expected_decision", str)):
        if not isinstance(case.get(fld), typ) or not case[fld].strip():
            raise _fail(label, fld, "required (a non-empty string)")
    _check_identity(label, case.get("identity"))
    _check_documents(label, case.get("documents"))
    claims = case.get("required_claims", [])
    if not isinstance(claims, list) or not all(isinstance(c, str) for c in claims):
        raise _fail(label, "required_claims", "expected a list of strings")
    if not case.get("family"):
        raise _fail(label, "family", "the case has no family key; set one before deriving variants")
    state = case.get("evidence_state")
    if state not in (None, "present"):
        raise _fail(
            label,
            "evidence_state",
            f"{builder} starts from an evidence-present case, not {state!r}",
        )
    if case["expected_decision"] != "answer":
        raise _fail(
            label,
            "expected_decision",
            f"{builder} starts from a case expecting 'answer', not {case['expected_decision']!r}",
        )
    return copy.deepcopy(dict(case))


def _check_identity(label: str, identity: object) -> None:
    if not isinstance(identity, Mapping):
        raise _fail(label, "identity", "required (a mapping with name and scopes)")
    if not isinstance(identity.get("name"), str):
        raise _fail(label, "identity.name", "required (a string)")
    scopes = identity.get("scopes")
    if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
        raise _fail(label, "identity.scopes", "required (a list of scope names)")


def _check_documents(label: str, docs: object) -> None:
    if not isinstance(docs, list):
        raise _fail(label, "documents", "required (a list)")
    for i, d in enumerate(docs):
        if not isinstance(d, Mapping):
            raise _fail(label, f"documents.{i}", "expected a mapping")
        for fld, typ in (("doc_id", str), ("visibility", str), ("role", str)):
            if not isinstance(d.get(fld), typ):
                raise _fail(label, f"documents.{i}.{fld}", "required (a string)")
        if not isinstance(d.get("version"), int) or isinstance(d.get("version"), bool):
            raise _fail(label, f"documents.{i}.version", "required (a whole number)")


def _iso(value: object) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value.date().isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value).isoformat()
        except ValueError:
            raise InputError(f"effective_date {value!r} is not a date like 2025-03-01") from None
    raise InputError(f"effective_date {value!r} is not a date")


def index_documents(documents: Iterable[Mapping[str, Any]]) -> dict[DocRef, dict[str, Any]]:
    out: dict[DocRef, dict[str, Any]] = {}
    for i, d in enumerate(documents):
        if not isinstance(d, Mapping):
            raise InputError(f"documents[{i}]: expected a mapping")
        doc_id = d.get("doc_id", d.get("doc_key"))
        version = d.get("version")
        if not isinstance(doc_id, str) or not doc_id:
            raise InputError(f"documents[{i}]: field doc_id: required (a string)")
        if not isinstance(version, int) or isinstance(version, bool):
            raise InputError(f"documents[{i}] ({doc_id}): field version: required (a number)")
        if not isinstance(d.get("body"), str):
            raise InputError(f"documents[{i}] ({doc_id}@{version}): field body: required")
        doc = dict(d)
        doc["doc_id"] = doc_id
        doc.pop("doc_key", None)
        out[(doc_id, version)] = doc
    return out


def versioned_ref(doc_id: str, version: int) -> str:
    return f"{doc_id}@{version}"


def _pick(
    case: dict[str, Any],
    docs: Mapping[DocRef, dict[str, Any]],
    doc_id: str | None,
    builder: str,
) -> tuple[int, dict[str, Any]]:
    """The position in case['documents'] and the text of the document a builder works on.

    Default: the one visible decisive document; ``doc_id`` picks a visible document by id.
    """
    label = _label(case)
    rows = [
        (i, d)
        for i, d in enumerate(case["documents"])
        if d["visibility"] == "visible"
        and (d["doc_id"] == doc_id if doc_id else d["role"] == "decisive")
    ]
    if not rows:
        what = f"no visible document {doc_id}" if doc_id else "no visible decisive document"
        raise _fail(label, "documents", f"{builder}: the case has {what}")
    if len(rows) > 1:
        ids = ", ".join(versioned_ref(d["doc_id"], d["version"]) for _i, d in rows)
        raise _fail(label, "documents", f"{builder}: several candidates ({ids}); choose doc_id")
    i, row = rows[0]
    doc = docs.get((row["doc_id"], row["version"]))
    if doc is None:
        ref = versioned_ref(row["doc_id"], row["version"])
        raise InputError(f"{label}: {builder}: the text of {ref} was not given")
    return i, doc


def _locate(doc: Mapping[str, Any], passage: str | Span) -> Span:
    ref = versioned_ref(doc["doc_id"], doc["version"])
    body: str = doc["body"]
    if isinstance(passage, Span):
        if not (0 <= passage.start <= passage.end <= len(body)) or (
            body[passage.start : passage.end] != passage.text
        ):
            raise InputError(f"{ref}: the span {passage.start}-{passage.end} does not match")
        return passage
    try:
        return find_span(body, passage)
    except InputError as exc:
        raise InputError(f"{ref}: {exc}") from None


def _new_doc(src: Mapping[str, Any], doc_id: str, body: str, **changes: object) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "doc_id": doc_id,
        "version": 1,
        "title": src.get("title") or doc_id,
        "effective_date": _iso(src.get("effective_date")),
        "superseded_by": src.get("superseded_by"),
        "authority": src.get("authority"),
        "owner": src.get("owner"),
        "access_scope": src.get("access_scope"),
        "jurisdiction": src.get("jurisdiction"),
        "body": body,
    }
    doc.update(changes)
    return doc


def _edit_copy(
    doc: Mapping[str, Any],
    operator: str,
    span: Span,
    params: Params | Mapping[str, ParamValue],
    target: str,
) -> tuple[EditResult, EditRecord]:
    """``operator`` applied to ``doc`` at ``span``, its result to be stored as ``target``@1;
    a refusal names the document."""
    try:
        return edit_document(
            doc["body"],
            operator,
            span,
            params,
            doc_id=doc["doc_id"],
            version=doc["version"],
            result_ref=versioned_ref(target, 1),
        )
    except InputError as exc:
        raise InputError(f"{versioned_ref(doc['doc_id'], doc['version'])}: {exc}") from None


def _default_id(doc_id: str, suffix: str) -> str:
    return f"{doc_id}-CF-{suffix}"[:120]


def merge_unique(*groups: Iterable[str]) -> list[str]:
    out: list[str] = []
    for g in groups:
        for x in g:
            if x not in out:
                out.append(x)
    return out


def _still_decisive(refs: Sequence[Mapping[str, Any]], base: Mapping[str, Any]) -> list[str]:
    """The base case's visible decisive documents that are still visible, unchanged, among
    a variant's ``refs``: each still carries the answer."""
    kept = {(d["doc_id"], d["version"]) for d in refs if d["visibility"] == "visible"}
    return [
        versioned_ref(d["doc_id"], d["version"])
        for d in base["documents"]
        if d["visibility"] == "visible"
        and d["role"] == "decisive"
        and (d["doc_id"], d["version"]) in kept
    ]


def _evidence_kept(
    base: Mapping[str, Any],
    refs: Sequence[Mapping[str, Any]],
    decision: str,
    reasons: tuple[str, ...],
    derivation: str,
) -> tuple[str, tuple[str, ...], str]:
    """The suggested decision, reasons and derivation of a variant that takes the answer away
    from one decisive document: when another decisive document still shows it, the evidence
    is not gone and the base case's decision and reasons stay (the family check flags it)."""
    others = _still_decisive(refs, base)
    if not others:
        return decision, reasons, derivation
    note = Suggestion(decision, reasons).kept_by(others).note
    return (
        base["expected_decision"],
        tuple(base.get("reason_codes", [])),
        f"{derivation} {note}",
    )


def _variant(
    base: dict[str, Any],
    *,
    state: str | None,
    decision: str,
    reasons: Sequence[str],
    slices: Sequence[str],
    category: str | None,
    derivation: str,
    documents: list[dict[str, Any]] | None = None,
    identity: dict[str, Any] | None = None,
    question: str | None = None,
    claims: list[str] | None = None,
    new_documents: Sequence[dict[str, Any]] = (),
    edits: Sequence[EditRecord] = (),
    passage: str | None = None,
) -> Variant:
    case = copy.deepcopy(base)
    source = _label(base)
    case["key"] = None
    case["evidence_state"] = state
    case["expected_decision"] = decision
    if decision != base.get("expected_decision"):  # the wording key follows the decision
        case["expected_message"] = None
    case["reason_codes"] = list(reasons)
    case["slices"] = merge_unique(base.get("slices", []), slices)
    case["category"] = category or base.get("category")
    case["status"] = CaseStatus.draft
    case["notes"] = (
        f"Derived from {source}: {derivation} Suggested {decision}"
        + (f" [{', '.join(reasons)}]" if reasons else "")
        + "; an expert must confirm the expected decision and reasons."
    )
    if documents is not None:
        case["documents"] = documents
    if identity is not None:
        case["identity"] = identity
    if question is not None:
        case["question"] = question
    if claims is not None:
        case["required_claims"] = claims
        kinds = {c: k for c, k in (base.get("claim_kinds") or {}).items() if c in claims}
        case.pop("claim_kinds", None)
        if kinds:
            case["claim_kinds"] = kinds
    return Variant(
        evidence_state=state,
        case=case,
        suggested_decision=decision,
        suggested_reasons=tuple(reasons),
        suggested_slices=tuple(slices),
        new_documents=tuple(new_documents),
        edits=tuple(edits),
        decisive_passage=passage,
        derivation=derivation,
    )


# ------------------------------------------------------------------------------------------
# Builders


def present_variant(case: Mapping[str, Any], *, passage: str | None = None) -> Variant:
    """The evidence-present case itself as a family member (its labels are kept)."""
    base = _base(case, "present_variant")
    base["evidence_state"] = "present"
    return Variant(
        evidence_state="present",
        case=base,
        suggested_decision=base["expected_decision"],
        suggested_reasons=tuple(base.get("reason_codes", [])),
        suggested_slices=(),
        decisive_passage=passage,
        derivation="the evidence-present case",
    )


def derive_removed(
    case: Mapping[str, Any],
    documents: Iterable[Mapping[str, Any]],
    *,
    passage: str | Span | None = None,
    doc_id: str | None = None,
    new_doc_id: str | None = None,
    also: Sequence[DocEdit] = (),
) -> Variant:
    """Decisive passage removed, neighbours kept; ``also``: the same for more decisive
    documents (each with its own passage, or none), one edit record per edited document.

    Without a passage the decisive document leaves the case and its neighbours stay. With a
    passage, an edited copy of the decisive document without it (``remove_answer``: questions
    and headings stay) replaces the original; the copy is returned in ``new_documents``.
    """
    base = _base(case, "derive_removed")
    docs = index_documents(documents)
    first = DocEdit(doc_id or "", passage, new_doc_id)
    targets = _targets(base, docs, first, also, "derive_removed")
    refs: list[dict[str, Any] | None] = list(copy.deepcopy(base["documents"]))
    new_docs: list[dict[str, Any]] = []
    edits: list[EditRecord] = []
    texts: list[str] = []
    said: list[str] = []
    for pos, doc, want in targets:
        src_ref = versioned_ref(doc["doc_id"], doc["version"])
        if want.span is None:
            refs[pos] = None
            said.append(f"decisive document {src_ref} removed")
            continue
        if isinstance(want.span, int):
            raise InputError(f"{src_ref}: derive_removed needs a passage, not a position")
        span = _locate(doc, want.span)
        body: str = doc["body"]
        start = span.start
        while start > 0 and body[start - 1] in " \t":  # take the space before a mid-line passage
            start -= 1
        edit_span = Span(start, span.end, body[start : span.end], span.kind)
        target = want.new_doc_id or _default_id(doc["doc_id"], "REMOVED")
        result, record = _edit_copy(doc, "remove_answer", edit_span, {}, target)
        new_docs.append(_new_doc(doc, target, result.text))
        edits.append(record)
        kept = refs[pos]
        assert kept is not None
        refs[pos] = {**kept, "doc_id": target, "version": 1, "role": "distractor"}
        texts.append(span.text)
        said.append(f"the decisive passage of {src_ref} removed in the copy {target}@1")
    left = [r for r in refs if r is not None]
    if len(targets) == 1:
        derivation = said[0] + (
            "; its neighbours are kept." if edits == [] else "; the rest of the document is kept."
        )
    else:
        derivation = "; ".join(said) + f" (one edit of {len(targets)} decisive documents)."
    slices = ("near_neighbour_distractor",) if left else ("empty_retrieval",)
    decision, reasons, derivation = _evidence_kept(
        base, left, "abstain", ("no_answer_bearing_evidence",), derivation
    )
    return _variant(
        base,
        state="removed",
        decision=decision,
        reasons=reasons,
        slices=slices,
        category="near_miss",
        derivation=derivation,
        documents=left,
        new_documents=new_docs,
        edits=edits,
        passage="\n".join(texts) if texts else None,
    )


ConflictMode = Literal["older_version", "lower_authority", "unresolved"]


def derive_conflicted(
    case: Mapping[str, Any],
    documents: Iterable[Mapping[str, Any]],
    *,
    passage: str | Span,
    operator: str = "change_number",
    params: Params | Mapping[str, ParamValue] | None = None,
    mode: ConflictMode = "older_version",
    effective_date: str | dt.date | None = None,
    authority: str | None = None,
    unresolved_decision: Literal["abstain", "escalate"] = "abstain",
    doc_id: str | None = None,
    new_doc_id: str | None = None,
    also: Sequence[DocEdit] = (),
) -> Variant:
    """A second version that states a conflicting value, with visible date or authority;
    ``also``: the same for more decisive documents, each at its own passage with the same
    operator and params (one conflicting copy and one edit record per document).

    The copy of the decisive document is edited at ``passage`` by ``operator`` (default:
    another number, same unit). ``mode`` decides how the conflict reads:

    * ``older_version``: the copy has an earlier effective date and is superseded by the
      original, so the original controls (answer, temporal_mismatch);
    * ``lower_authority``: the copy has a lower authority (default ``faq``), so the original
      controls (answer);
    * ``unresolved``: same authority and date, neither supersedes the other (abstain or
      escalate with conflicting_evidence).
    """
    base = _base(case, "derive_conflicted")
    docs = index_documents(documents)
    op = OPERATORS.get(operator)
    if op is None:
        raise InputError(f"unknown edit operator {operator!r}; use one of: {', '.join(OPERATORS)}")
    if mode not in ("older_version", "lower_authority", "unresolved"):
        raise InputError(
            f"derive_conflicted: mode {mode!r} is not one of: older_version, lower_authority, "
            "unresolved"
        )
    first = DocEdit(doc_id or "", passage, new_doc_id)
    targets = _targets(base, docs, first, also, "derive_conflicted")
    role, decision, reasons, slices, category = _CONFLICT_READS[mode]
    if mode == "unresolved":
        decision = unresolved_decision
    refs = copy.deepcopy(base["documents"])
    new_docs: list[dict[str, Any]] = []
    records: list[EditRecord] = []
    texts: list[str] = []
    hows: list[str] = []
    p: Params | Mapping[str, ParamValue] | None = params
    for _pos, doc, want in targets:
        src_ref = versioned_ref(doc["doc_id"], doc["version"])
        if want.span is None or isinstance(want.span, int):
            raise InputError(f"{src_ref}: derive_conflicted needs the passage the copy changes")
        span = _locate(doc, want.span)
        p = p if p is not None else op.example_params(doc["body"], span)  # the same for all
        target = want.new_doc_id or _default_id(doc["doc_id"], "CONFLICT")
        result, record = _edit_copy(doc, operator, span, p, target)
        if result.extra_documents:
            raise InputError(
                f"{operator} makes a second document; it cannot make a conflicting copy"
            )
        changes, how = _conflict_reads(
            _label(base), doc, mode, result.metadata, effective_date, authority
        )
        new_docs.append(_new_doc(doc, target, result.text, **changes))
        refs.append({"doc_id": target, "version": 1, "visibility": "visible", "role": role})
        records.append(record)
        texts.append(span.text)
        hows.append(f"a conflicting copy {target}@1 of {src_ref} ({op.label}) {how}")
    derivation = "; ".join(hows) + "."
    if len(targets) > 1:
        derivation += f" One edit of {len(targets)} decisive documents."
    if mode == "unresolved":  # a decisive document without a copy still settles the answer
        edited = {pos for pos, _d, _w in targets}
        uncontested = [
            versioned_ref(d["doc_id"], d["version"])
            for i, d in enumerate(base["documents"])
            if i not in edited and d["visibility"] == "visible" and d["role"] == "decisive"
        ]
        if uncontested:
            verb = "is" if len(uncontested) == 1 else "are"
            derivation += (
                f" {', '.join(uncontested)} {verb} not contested and still settle"
                f"{'s' if len(uncontested) == 1 else ''} the answer: the base case's decision "
                "stays. Contest those documents too for a variant whose evidence conflicts."
            )
            decision, reasons = base["expected_decision"], tuple(base.get("reason_codes", []))
    return _variant(
        base,
        state="conflicted",
        decision=decision,
        reasons=reasons,
        slices=slices,
        category=category,
        derivation=derivation,
        documents=refs,
        new_documents=new_docs,
        edits=records,
        passage="\n".join(merge_unique(texts)),
    )


#: How a conflicting copy reads in each mode: its role in the case, and the suggested
#: decision, reasons, slices and category of the variant
_CONFLICT_READS: dict[str, tuple[str, str, tuple[str, ...], tuple[str, ...], str | None]] = {
    "older_version": ("superseded", "answer", (), ("temporal_mismatch",), "time_sensitive"),
    "lower_authority": ("distractor", "answer", (), (), None),
    "unresolved": ("decisive", "abstain", ("conflicting_evidence",), (), "time_sensitive"),
}


def _conflict_reads(
    label: str,
    doc: Mapping[str, Any],
    mode: str,
    metadata: Mapping[str, str],
    effective_date: str | dt.date | None,
    authority: str | None,
) -> tuple[dict[str, object], str]:
    """The metadata a conflicting copy of ``doc`` takes in ``mode`` (its date, authority,
    what supersedes it) and how the derivation says it."""
    src_ref = versioned_ref(doc["doc_id"], doc["version"])
    original_date = _iso(doc.get("effective_date"))
    chosen = _iso(effective_date) if effective_date is not None else None
    chosen = chosen or metadata.get("effective_date")
    changes: dict[str, object] = {"superseded_by": None}
    if mode == "older_version":
        if chosen is None:
            if original_date is None:
                raise InputError(
                    f"{label}: derive_conflicted: {src_ref} has no effective_date; give "
                    "effective_date for the older version"
                )
            old = dt.date.fromisoformat(original_date)
            try:
                chosen = old.replace(year=old.year - 1).isoformat()
            except ValueError:  # 29 February
                chosen = old.replace(year=old.year - 1, day=28).isoformat()
        if original_date is not None and chosen >= original_date:
            raise InputError(
                f"{label}: derive_conflicted: the older version must be dated before "
                f"{original_date} (got {chosen})"
                + (f" for {src_ref}" if effective_date is not None else "")
            )
        changes.update(effective_date=chosen, superseded_by=src_ref)
        return changes, f"dated {chosen} and superseded by {src_ref}, which controls"
    if mode == "lower_authority":
        lower = authority or "faq"
        if lower == doc.get("authority"):
            raise InputError(
                f"{label}: derive_conflicted: the copy's authority must differ from "
                f"{src_ref}'s ({lower!r})"
            )
        changes.update(effective_date=chosen or original_date, authority=lower)
        return changes, f"with authority {lower!r}, below {src_ref}'s {doc.get('authority')!r}"
    changes.update(effective_date=chosen or original_date)
    return changes, "with the same authority and date; neither version controls"


def derive_forbidden(
    case: Mapping[str, Any],
    documents: Iterable[Mapping[str, Any]],
    *,
    passage: str | Span | None = None,
    doc_id: str | None = None,
    identity_name: str | None = None,
    restricted_scope: str = "restricted",
    new_doc_id: str | None = None,
    also: Sequence[DocEdit] = (),
) -> Variant:
    """The decisive document stays but is forbidden to the identity; ``also``: the same for
    more decisive documents (each with its own passage, or none).

    A non-public decisive document is kept and its scope is taken away from the identity. A
    public one cannot be hidden, so a copy with ``restricted_scope`` replaces it. Any other
    document the narrowed identity may not see is marked forbidden as well.
    """
    base = _base(case, "derive_forbidden")
    label = _label(base)
    docs = index_documents(documents)
    if restricted_scope == PUBLIC_SCOPE:
        raise InputError("derive_forbidden: restricted_scope cannot be 'public'")
    first = DocEdit(doc_id or "", passage, new_doc_id)
    targets = _targets(base, docs, first, also, "derive_forbidden")
    refs = copy.deepcopy(base["documents"])
    new_docs: list[dict[str, Any]] = []
    hidden: list[str] = []
    hows: list[str] = []
    texts: list[str] = []
    for pos, doc, want in targets:
        src_ref = versioned_ref(doc["doc_id"], doc["version"])
        scope = doc.get("access_scope")
        if not isinstance(scope, str) or not scope:
            raise InputError(
                f"{src_ref}: field access_scope: required to derive a forbidden variant"
            )
        if isinstance(want.span, int):
            raise InputError(f"{src_ref}: derive_forbidden needs a passage, not a position")
        if want.span is not None:
            texts.append(_locate(doc, want.span).text)
        if scope == PUBLIC_SCOPE:
            target = want.new_doc_id or _default_id(doc["doc_id"], "RESTRICTED")
            new_docs.append(_new_doc(doc, target, doc["body"], access_scope=restricted_scope))
            refs[pos] = {**refs[pos], "doc_id": target, "version": 1, "visibility": "forbidden"}
            scope = restricted_scope
            hows.append(f"a copy {target}@1 of {src_ref} in scope {restricted_scope!r}")
        else:
            refs[pos] = {**refs[pos], "visibility": "forbidden"}
            hows.append(f"{src_ref} (scope {scope!r})")
        if scope not in hidden:
            hidden.append(scope)
    identity = _narrowed(label, base["identity"], hidden, identity_name)
    scopes = identity["scopes"]
    edited = {pos for pos, _d, _w in targets}
    more: list[str] = []
    for i, r in enumerate(refs):
        if i in edited or r["visibility"] != "visible":
            continue
        d = docs.get((r["doc_id"], r["version"]))
        if d is not None and d.get("access_scope") and d["access_scope"] not in scopes:
            r["visibility"] = "forbidden"
            more.append(versioned_ref(r["doc_id"], r["version"]))
    if len(targets) == 1:
        derivation = f"the decisive document is kept but forbidden to the identity: {hows[0]}."
    else:
        derivation = (
            f"{len(targets)} decisive documents are kept but forbidden to the identity: "
            f"{'; '.join(hows)}."
        )
    if more:
        derivation += f" Also forbidden for the narrowed identity: {', '.join(more)}."
    decision, reasons, derivation = _evidence_kept(
        base, refs, "abstain", ("source_not_allowed",), derivation
    )
    return _variant(
        base,
        state="forbidden",
        decision=decision,
        reasons=reasons,
        slices=("access_filtered_answer",),
        category="access_restricted",
        derivation=derivation,
        documents=refs,
        identity=identity,
        new_documents=new_docs,
        passage="\n".join(merge_unique(texts)) if texts else None,
    )


def _narrowed(
    label: str, identity: Mapping[str, Any], hidden: Sequence[str], name: str | None
) -> dict[str, Any]:
    """The identity without the ``hidden`` scopes (renamed to say so, or to ``name``)."""
    out = copy.deepcopy(dict(identity))
    scopes = [s for s in out["scopes"] if s not in hidden]
    if not scopes:
        raise _fail(
            label,
            "identity.scopes",
            f"taking {', '.join(repr(h) for h in hidden)} away would leave the identity with "
            "no scope",
        )
    if scopes != out["scopes"]:
        lost = ", ".join(h for h in hidden if h in out["scopes"])
        out["name"] = name or f"{out['name']} (without {lost} access)"
    elif name:
        out["name"] = name
    out["scopes"] = scopes
    return out


PartialPolicy = Literal["abstain", "clarify", "partial"]


def _lower_first(text: str) -> str:
    first = text.split(" ", 1)[0]
    if first == "I" or (len(first) > 1 and first[:2].isupper()):
        return text
    return text[:1].lower() + text[1:]


def derive_partial(
    case: Mapping[str, Any],
    documents: Iterable[Mapping[str, Any]] = (),
    *,
    extra_claim: str,
    extra_question: str | None = None,
    question: str | None = None,
    policy: PartialPolicy = "partial",
) -> Variant:
    """A compound question: a second required claim that no document supports.

    ``question`` replaces the question; otherwise ``extra_question`` is joined to it ("..., and
    how long ...?"). ``policy`` is the product's choice for partial support: abstain, clarify,
    or a labelled partial answer. If ``documents`` are given, a claim written word for word in
    a visible document is refused (a sanity check, not a test of support).
    """
    base = _base(case, "derive_partial")
    label = _label(base)
    claim = extra_claim.strip()
    if not claim:
        raise _fail(label, "extra_claim", "must not be empty")
    if claim in base.get("required_claims", []):
        raise _fail(label, "extra_claim", "is already a required claim of the case")
    if policy not in ("abstain", "clarify", "partial"):
        raise _fail(label, "policy", f"{policy!r} is not one of: abstain, clarify, partial")
    if question is not None and question.strip():
        new_q = question.strip()
    elif extra_question is not None and extra_question.strip():
        new_q = (
            base["question"].strip().rstrip("?").rstrip()
            + ", and "
            + _lower_first(extra_question.strip())
        )
        if not new_q.endswith("?"):
            new_q += "?"
    else:
        raise _fail(label, "question", "give question or extra_question for the second part")
    docs = index_documents(documents)
    for r in base["documents"]:
        d = docs.get((r["doc_id"], r["version"]))
        if (
            r["visibility"] == "visible"
            and d is not None
            and norm_text(claim) in norm_text(d["body"])
        ):
            raise _fail(
                label,
                "extra_claim",
                f"is stated in {versioned_ref(r['doc_id'], r['version'])}; choose a claim that no "
                "document of the case supports",
            )
    return _variant(
        base,
        state="partial",
        decision=policy,
        reasons=("required_claim_not_covered",),
        slices=("compound_insufficiency",),
        category="near_miss",
        derivation=f"a second required claim that no document supports ({claim!r}); product "
        f"policy for partial support is {policy!r}.",
        question=new_q,
        claims=[*base.get("required_claims", []), claim],
    )


@dataclass(frozen=True)
class DocEdit:
    """One more document an edit works on (several decisive documents carry the answer):
    its id, where (a Span, a unique passage, a position; for derive_removed None drops the
    document) and the ids its copy and restricted extract take (default: derived)."""

    doc_id: str
    span: Span | str | int | None = None
    new_doc_id: str | None = None
    restricted_doc_id: str | None = None


def _edit_span(doc: Mapping[str, Any], span: Span | str | int | None) -> Span:
    src_ref = versioned_ref(doc["doc_id"], doc["version"])
    body: str = doc["body"]
    if isinstance(span, int) and not isinstance(span, bool):
        if not 0 <= span <= len(body):
            raise InputError(f"{src_ref}: position {span} is outside the text")
        return Span(span, span, "", "position")
    if isinstance(span, Span | str):
        return _locate(doc, span)
    raise InputError("derive_edited: span must be a Span, a passage or a position")


def _targets(
    base: dict[str, Any],
    docs: Mapping[DocRef, dict[str, Any]],
    first: DocEdit,
    also: Sequence[DocEdit],
    builder: str,
) -> list[tuple[int, dict[str, Any], DocEdit]]:
    """The documents an edit works on (position in the case, text, what to do), each once."""
    out: list[tuple[int, dict[str, Any], DocEdit]] = []
    for k, want in enumerate((first, *also)):
        pos, doc = _pick(base, docs, want.doc_id if k or want.doc_id else None, builder)
        if any(p == pos for p, _d, _w in out):
            ref = versioned_ref(doc["doc_id"], doc["version"])
            raise InputError(f"{_label(base)}: {builder}: {ref} is listed twice; edit it once")
        out.append((pos, doc, want))
    return out


def derive_edited(
    case: Mapping[str, Any],
    documents: Iterable[Mapping[str, Any]],
    *,
    operator: str,
    span: Span | str | int,
    params: Params | Mapping[str, ParamValue] | None = None,
    doc_id: str | None = None,
    new_doc_id: str | None = None,
    restricted_doc_id: str | None = None,
    also: Sequence[DocEdit] = (),
) -> Variant:
    """A hard negative made by one recorded edit of a document of the case, or of several
    (``also``: the other decisive documents that carry the answer, each at its own span with
    the same operator and params; one edited copy and one edit record per document).

    ``span`` is a Span, a passage (unique in the document) or, for ``insert_instruction``, a
    position. Each edited copy replaces its document in the case; ``relocate_answer`` also adds
    the restricted document with the true answer, forbidden to the identity. The suggestion is
    the operator's (for ``insert_instruction`` the base decision is kept), unless a visible
    decisive document left unedited still carries the answer.
    """
    base = _base(case, "derive_edited")
    label = _label(base)
    docs = index_documents(documents)
    op = OPERATORS.get(operator)
    if op is None:
        raise InputError(f"unknown edit operator {operator!r}; use one of: {', '.join(OPERATORS)}")
    first = DocEdit(doc_id or "", span, new_doc_id, restricted_doc_id)
    targets = _targets(base, docs, first, also, "derive_edited")
    demoted = op.suggestion.decision is not None  # the edited copies no longer settle it
    refs = copy.deepcopy(base["documents"])
    new_docs: list[dict[str, Any]] = []
    records: list[EditRecord] = []
    identity: dict[str, Any] | None = None
    passages: list[str] = []
    where: list[str] = []
    p: Params | Mapping[str, ParamValue] | None = params
    for pos, doc, want in targets:
        src_ref = versioned_ref(doc["doc_id"], doc["version"])
        body: str = doc["body"]
        sp = _edit_span(doc, want.span)
        p = p if p is not None else op.example_params(body, sp)  # the same params for all
        target = want.new_doc_id or _default_id(doc["doc_id"], operator.upper().replace("_", "-"))
        result, record = _edit_copy(doc, operator, sp, p, target)
        records.append(record)
        changes: dict[str, object] = {}
        if "effective_date" in result.metadata:
            changes["effective_date"] = result.metadata["effective_date"]
        if "jurisdiction" in result.metadata:
            changes["jurisdiction"] = result.metadata["jurisdiction"]
        new_docs.append(_new_doc(doc, target, result.text, **changes))
        role = "distractor" if demoted else refs[pos]["role"]
        refs[pos] = {**refs[pos], "doc_id": target, "version": 1, "role": role}
        for k, extra in enumerate(result.extra_documents):
            rid = want.restricted_doc_id if want.restricted_doc_id and k == 0 else None
            rid = rid or _default_id(
                doc["doc_id"], "RESTRICTED" if k == 0 else f"RESTRICTED{k + 1}"
            )
            new_docs.append(
                _new_doc(doc, rid, extra.body, title=extra.title, access_scope=extra.access_scope)
            )
            refs.append(
                {"doc_id": rid, "version": 1, "visibility": "forbidden", "role": "decisive"}
            )
            identity = copy.deepcopy(identity or base["identity"])
            identity["scopes"] = [s for s in identity["scopes"] if s != extra.access_scope]
            if not identity["scopes"]:
                raise _fail(
                    label,
                    "identity.scopes",
                    f"taking {extra.access_scope!r} away would leave the identity with no scope",
                )
        passages.append(_passage_text(body, sp.start, sp.end))
        where.append(f"{src_ref} at {sp.start}-{sp.end} in the copy {target}@1")
    # other visible decisive documents still carry the answer: the edit does not take the
    # evidence away, so the suggestion keeps the base case's decision (see Suggestion.kept_by)
    edited = {pos for pos, _d, _w in targets}
    others = [
        versioned_ref(d["doc_id"], d["version"])
        for i, d in enumerate(base["documents"])
        if i not in edited and d["visibility"] == "visible" and d["role"] == "decisive"
    ]
    sug = op.suggestion.kept_by(others)
    keep_labels = sug.decision is None
    decision = base["expected_decision"] if keep_labels else str(sug.decision)
    reasons = tuple(base.get("reason_codes", [])) if keep_labels else sug.reason_codes
    checked = sug.evidence_state in ("removed", "forbidden")
    derivation = f"{op.label} applied to {'; '.join(where)}."
    if len(targets) > 1:
        derivation += f" One edit of {len(targets)} decisive documents."
    if sug is not op.suggestion:
        derivation += " " + sug.note
    return _variant(
        base,
        state=sug.evidence_state,
        decision=decision,
        reasons=reasons,
        slices=sug.slices,
        category=sug.category,
        derivation=derivation,
        documents=refs,
        identity=identity,
        new_documents=new_docs,
        edits=records,
        passage="\n".join(merge_unique(passages)) if checked else None,
    )


#: A span of this many words or more is a passage of its own (a sentence, an answer); a
#: shorter one (a figure, a tier, a year) stands for the lines around it.
PASSAGE_WORDS = 6


def passage_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """Where the decisive passage of an edit at ``[start, end)`` is: the span itself (without
    surrounding space) when it is a sentence or longer, else the whole lines it is on. The
    family checks look for this passage in the variant's visible documents."""
    a, b = start, end
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    if len(text[a:b].split()) >= PASSAGE_WORDS:
        return a, b
    a = text.rfind("\n", 0, start) + 1
    b = text.find("\n", end)
    b = len(text) if b < 0 else b
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b


def _passage_text(text: str, start: int, end: int) -> str:
    a, b = passage_bounds(text, start, end)
    return text[a:b]


_EMPHASIS_RE = re.compile(r"\[\^[^\]\s]+\]|[*`]")


def norm_text(text: str) -> str:
    return " ".join(_EMPHASIS_RE.sub("", text).split()).casefold()
