"""Family variants: derive a variant of an evidence-present case (edited, removed,
conflicted, forbidden, partial) and store its documents, the draft case, the edit records
and the operator's suggestion together, inside the caller's transaction (a Session-taking
service: the pages and the CLI open the transaction)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from review.builder.diffs import DiffRow, diff_rows, side_by_side
from review.builder.documents import (
    add_edit,
    copy_ids,
    doc_dict,
    insert_document,
    latest_version,
    new_group,
    parse_ref,
    ref_of,
    with_new_ids,
)
from review.builder.edits import EditRecord
from review.builder.families import (
    DocEdit,
    Variant,
    derive_conflicted,
    derive_edited,
    derive_forbidden,
    derive_partial,
    derive_removed,
    passage_bounds,
)
from review.builder.operator import ParamValue, Span, span_at
from review.cases import cases as case_service
from review.cases.cases import case_query, validate_case
from review.core import clearance
from review.core.errors import InputError, PermissionDenied
from review.core.identity import Actor, Permission, require
from review.core.taxonomy import Taxonomy
from storage import changes
from storage.db import read_session
from storage.models import (
    Case,
    CaseSuggestion,
    Document,
    utcnow,
)

__all__ = [
    "KINDS",
    "DocChange",
    "MoreDoc",
    "SavedVariant",
    "VariantPreview",
    "VariantSpec",
    "build_variant",
    "preview_variant",
    "variant_key",
    "whole_line_bounds",
]


VARIANT_ENTITY = "case_variant"


MAX_FAMILY_VARIANTS = 200


# ------------------------------------------------------------------------------------------
# Variants


KINDS = ("edited", "removed", "conflicted", "forbidden", "partial")


Kind = Literal["edited", "removed", "conflicted", "forbidden", "partial"]


@dataclass(frozen=True)
class MoreDoc:
    """One more decisive document an edited or removed variant works on: a case document
    and the offsets in its body (for a removed variant none drops the document)."""

    doc_ref: str
    start: int | None = None
    end: int | None = None


@dataclass(frozen=True)
class VariantSpec:
    """What the expert asked for. Offsets are in the body of ``doc_ref`` (a case document)."""

    kind: Kind
    doc_ref: str | None = None  # default: the case's visible decisive document
    operator: str | None = None  # edited (required), conflicted (default change_number)
    start: int | None = None
    end: int | None = None
    params: Mapping[str, ParamValue] | None = None
    as_new_version: bool = False
    mode: Literal["older_version", "lower_authority", "unresolved"] = "older_version"
    unresolved_decision: Literal["abstain", "escalate"] = "abstain"
    effective_date: str | None = None
    authority: str | None = None
    extra_claim: str = ""
    extra_question: str = ""
    question: str = ""
    policy: Literal["abstain", "clarify", "partial"] = "partial"
    # edited and removed: the other decisive documents the same edit works on, one edit each
    also: tuple[MoreDoc, ...] = ()


@dataclass(frozen=True)
class SavedVariant:
    case_id: int
    key: str
    evidence_state: str | None
    suggested_decision: str
    suggested_reasons: tuple[str, ...]
    documents: tuple[str, ...]  # refs of the new documents
    edit_ids: tuple[int, ...]
    derivation: str


def whole_line_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """The lines of ``[start, end)`` without their surrounding space (the demo's passages)."""
    a = text.rfind("\n", 0, start) + 1
    b = text.find("\n", end)
    b = len(text) if b < 0 else b
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b


def _strip_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _remap(variant: Variant, old_ref: str, key: str, version: int) -> Variant:
    """Rename the new document ``old_ref`` to ``key@version`` everywhere in the variant."""
    new_ref = f"{key}@{version}"
    old_key, old_ver = parse_ref(old_ref)
    case = dict(variant.case)
    case["documents"] = [
        {**d, "doc_id": key, "version": version}
        if (d["doc_id"], d["version"]) == (old_key, old_ver)
        else d
        for d in case["documents"]
    ]
    docs = tuple(
        {**d, "doc_id": key, "version": version}
        if (d["doc_id"], d["version"]) == (old_key, old_ver)
        else d
        for d in variant.new_documents
    )
    edits = tuple(
        dataclasses.replace(e, result_ref=new_ref) if e.result_ref == old_ref else e
        for e in variant.edits
    )
    if isinstance(case.get("notes"), str):
        case["notes"] = case["notes"].replace(old_ref, new_ref)
    return dataclasses.replace(
        variant,
        case=case,
        new_documents=docs,
        edits=edits,
        derivation=variant.derivation.replace(old_ref, new_ref),
    )


def _span_of(body: str, start: int | None, end: int | None) -> Span | None:
    if start is None:
        return None
    end = start if end is None else end
    return span_at(body, start, end, "position" if start == end else "selection")


Passage = tuple[Document, int, int]  # where a decisive passage is: document and offsets


def _more(
    spec: VariantSpec, more: Sequence[tuple[Document, list[str]]]
) -> tuple[list[DocEdit], list[tuple[Document, Span | None]]]:
    """The other documents of the edit as the derivation takes them, with their spans."""
    out: list[DocEdit] = []
    spans: list[tuple[Document, Span | None]] = []
    for want, (doc, ids) in zip(spec.also, more, strict=True):
        span = _span_of(doc.body, want.start, want.end)
        if span is None and spec.kind == "edited":
            raise InputError(f"{ref_of(doc)}: select a span (or a position) to edit")
        if span is None and spec.kind == "conflicted":
            raise InputError(
                f"{ref_of(doc)}: select the passage that its conflicting copy states differently"
            )
        out.append(DocEdit(doc.doc_key, span, ids[0], ids[1]))
        spans.append((doc, span))
    return out, spans


def _derive(
    spec: VariantSpec,
    record: dict[str, Any],
    docs: list[dict[str, Any]],
    target: Document | None,
    ids: list[str],
    more: Sequence[tuple[Document, list[str]]] = (),
) -> tuple[Variant, list[Passage]]:
    """The pure derivation, and where the decisive passages are (first in ``target``'s body,
    then in each of ``more``, the spec's other documents with their free ids)."""
    body = target.body if target is not None else ""
    key = target.doc_key if target is not None else None
    span = _span_of(body, spec.start, spec.end)
    if spec.also and spec.kind == "partial":
        raise InputError("a partial variant changes the question, not documents: no documents")
    also, more_spans = _more(spec, more)
    if spec.kind == "edited":
        if not spec.operator:
            raise InputError("choose an edit operator")
        if span is None:
            raise InputError(
                f"{spec.operator}: select a span (or a position) of {key or 'a document'}"
            )
        v = derive_edited(
            record,
            docs,
            operator=spec.operator,
            span=span,
            params=spec.params,
            doc_id=key,
            new_doc_id=ids[0],
            restricted_doc_id=ids[1],
            also=also,
        )
        if v.decisive_passage is not None:
            found = [(target, *passage_bounds(body, span.start, span.end))] if target else []
            found += [(d, *passage_bounds(d.body, sp.start, sp.end)) for d, sp in more_spans if sp]
            return v, found
    elif spec.kind == "removed":
        v = derive_removed(record, docs, passage=span, doc_id=key, new_doc_id=ids[0], also=also)
        found = [(target, *_strip_bounds(body, span.start, span.end))] if span and target else []
        found += [(d, *_strip_bounds(d.body, sp.start, sp.end)) for d, sp in more_spans if sp]
        return v, found
    elif spec.kind == "conflicted":
        if span is None:
            raise InputError("select the passage that the conflicting copy states differently")
        v = derive_conflicted(
            record,
            docs,
            passage=span,
            operator=spec.operator or "change_number",
            params=spec.params,
            mode=spec.mode,
            effective_date=spec.effective_date,
            authority=spec.authority,
            unresolved_decision=spec.unresolved_decision,
            doc_id=key,
            new_doc_id=ids[0],
            also=also,
        )
    elif spec.kind == "forbidden":
        v = derive_forbidden(record, docs, passage=span, doc_id=key, new_doc_id=ids[0], also=also)
    elif spec.kind == "partial":
        v = derive_partial(
            record,
            docs,
            extra_claim=spec.extra_claim,
            extra_question=spec.extra_question or None,
            question=spec.question or None,
            policy=spec.policy,
        )
    else:
        raise InputError(f"unknown variant kind {spec.kind!r}; use one of: {', '.join(KINDS)}")
    found = []
    if span is not None and target is not None and spec.kind in ("conflicted", "forbidden"):
        found = [(target, *_strip_bounds(body, span.start, span.end))]
        found += [(d, *_strip_bounds(d.body, sp.start, sp.end)) for d, sp in more_spans if sp]
    return v, found


@dataclass(frozen=True)
class DocChange:
    """What a variant does to one decisive document it works on: what it becomes (in words)
    and, when a copy's text differs, the marked diff."""

    source: str
    outcome: str
    rows: tuple[DiffRow, ...] = ()
    before_excerpt: str = ""
    after_excerpt: str = ""


@dataclass(frozen=True)
class VariantPreview:
    """A variant derived but not saved: its suggestion and what it does to each document."""

    variant: Variant
    changes: tuple[DocChange, ...]


def _row_of(variant: Variant, ref: str) -> dict[str, Any] | None:
    return next(
        (d for d in variant.case["documents"] if f"{d['doc_id']}@{d['version']}" == ref), None
    )


def _change_of(variant: Variant, source: Document) -> DocChange:
    """What ``variant`` does to ``source``: an edited copy (with its diff), a restricted copy
    that replaces it, the document itself forbidden, or the document left out."""
    ref = ref_of(source)
    new = {f"{d['doc_id']}@{d['version']}": d for d in variant.new_documents}
    for rec in variant.edits:
        if (rec.doc_id, rec.version) != (source.doc_key, source.version) or not rec.result_ref:
            continue
        row = _row_of(variant, rec.result_ref)
        copy = new.get(rec.result_ref)
        where = f"{row['visibility']}, {row['role']}" if row else "not in the case"
        still = _row_of(variant, ref)
        outcome = f"copy {rec.result_ref} ({where})" + (
            f"; {ref} stays ({still['visibility']}, {still['role']})" if still else ""
        )
        rows = tuple(diff_rows(source.body, copy["body"])) if copy else ()
        left, right = side_by_side(rows)
        return DocChange(ref, outcome, rows, left, right)
    still = _row_of(variant, ref)
    if still is not None:
        return DocChange(ref, f"stays, {still['visibility']} (scope {source.access_scope!r})")
    for d in variant.new_documents:  # a copy in another scope replaces it
        row = _row_of(variant, f"{d['doc_id']}@{d['version']}")
        if d["body"] == source.body and row is not None:
            return DocChange(
                ref,
                f"replaced by a copy {d['doc_id']}@{d['version']} in scope "
                f"{d['access_scope']!r}, {row['visibility']}",
            )
    return DocChange(ref, "left out of the case")


def preview_variant(
    engine: Engine, actor: Actor, base_case_id: int, spec: VariantSpec
) -> VariantPreview:
    """The variant :func:`build_variant` would save, and what it does to each document it
    works on, without saving anything (the same checks and clearance: a refusal here is the
    one saving would give)."""
    require(actor, Permission.edit_cases)
    with read_session(engine) as s:
        base = _base_case(s, base_case_id)
        target = _target(actor, base, spec)
        more = [_document_of(actor, base, m.doc_ref) for m in spec.also]
        variant, _passages = _derived(s, spec, base, target, more)
        sources = [d for d in (target, *more) if d is not None]
        return VariantPreview(variant, tuple(_change_of(variant, d) for d in sources))


def variant_key(s: Session, base_key: str) -> str:
    prefix = f"{base_key[:100]}-CF-"
    pattern = re.compile(re.escape(prefix) + r"(\d+)")
    keys = s.scalars(select(Case.key).where(Case.key.startswith(prefix, autoescape=True)))
    n = max((int(m.group(1)) for k in keys if (m := pattern.fullmatch(k))), default=0)
    return f"{prefix}{n + 1}"


def _suggestion_source(spec: VariantSpec, variant: Variant) -> str:
    if spec.kind == "edited":
        return f"operator:{spec.operator}"
    ops = ",".join(e.operator for e in variant.edits)
    return f"family:{spec.kind}" + (f" ({ops})" if ops else "")


def build_variant(
    s: Session, actor: Actor, tax: Taxonomy, base_case_id: int, spec: VariantSpec
) -> SavedVariant:
    """Derive a variant of an evidence-present case and save it as a draft in its family.

    Inside the caller's transaction, which it does not commit: the new documents, the draft
    case (key ``<BASE>-CF-<n>``), one provenance row per edit and the operator's suggestion
    land together. The suggestion is not a label: the variant stays a draft until
    :func:`confirm_suggestion`. A key taken by a concurrent writer is replaced by a fresh one.
    """
    require(actor, Permission.edit_cases)
    return with_new_ids(s, lambda: _build(s, actor, tax, base_case_id, spec))


def _build(
    s: Session, actor: Actor, tax: Taxonomy, base_case_id: int, spec: VariantSpec
) -> SavedVariant:
    base = _base_case(s, base_case_id)
    target = _target(actor, base, spec)
    more = [_document_of(actor, base, m.doc_ref) for m in spec.also]
    variant, passage = _derived(s, spec, base, target, more)
    case_in = _variant_case(s, variant, base, tax)
    rows = {
        ref_of(row): row
        for row in (
            insert_document(s, actor, tax, nd, f"case builder: {spec.kind} variant of {base.key}")
            for nd in variant.new_documents
        )
    }
    case_row = case_service.insert_case(s, actor, case_in)
    edit_ids = _store_edits(s, actor, variant, rows, case_row.id)
    _store_suggestion(s, spec, variant, case_row.id)
    _record_derivation(s, actor, spec, base, variant, list(rows), target, passage, case_row.id)
    s.flush()
    return SavedVariant(
        case_row.id,
        case_row.key,
        variant.evidence_state,
        variant.suggested_decision,
        variant.suggested_reasons,
        tuple(rows),
        tuple(edit_ids),
        variant.derivation,
    )


def _base_case(s: Session, base_case_id: int) -> Case:
    """The evidence-present case expecting an answer that a variant starts from."""
    base = s.scalar(case_query().where(Case.id == base_case_id))
    if base is None:
        raise InputError(f"case {base_case_id} does not exist")
    if base.evidence_state not in (None, "present") or base.expected_decision != "answer":
        raise InputError(
            f"{base.key}: variants start from an evidence-present case expecting 'answer' "
            f"(this one is {base.evidence_state or 'without evidence state'}, expecting "
            f"{base.expected_decision!r}); start from the family's evidence-present case"
        )
    return base


def _target(actor: Actor, base: Case, spec: VariantSpec) -> Document | None:
    """The document of the base case the variant changes (the asked one, else the visible
    decisive one; none for a partial variant without one), if the actor may read it."""
    target: Document | None = None
    if spec.doc_ref:
        return _document_of(actor, base, spec.doc_ref)
    else:
        decisive = [
            cd.document
            for cd in base.documents
            if cd.visibility == "visible" and cd.role == "decisive"
        ]
        if decisive:
            target = decisive[0]
        elif spec.kind != "partial":
            raise InputError(f"{base.key} has no visible decisive document; choose one")
    if target is not None and not clearance.may_see_document(actor, target.access_scope):
        raise PermissionDenied(
            "the document to edit is restricted; only users with clearance may build "
            "variants from it"
        )
    return target


def _document_of(actor: Actor, base: Case, ref: str) -> Document:
    """A document of the base case by reference, if the actor may read it."""
    key, version = parse_ref(ref)
    found = [
        cd.document
        for cd in base.documents
        if (cd.document.doc_key, cd.document.version) == (key, version)
    ]
    if not found:
        raise InputError(f"{ref} is not a document of {base.key}")
    if not clearance.may_see_document(actor, found[0].access_scope):
        raise PermissionDenied(
            f"{ref} is restricted; only users with clearance may build variants from it"
        )
    return found[0]


def _derived(
    s: Session,
    spec: VariantSpec,
    base: Case,
    target: Document | None,
    more: Sequence[Document] = (),
) -> tuple[Variant, list[Passage]]:
    """The derivation (:func:`_derive`) with free document ids, its new document renamed to
    the next version of the target when the spec asks for one."""
    docs = [doc_dict(cd.document) for cd in base.documents]
    ids = copy_ids(s, target.doc_key, 2) if target is not None else ["", ""]
    more_ids = [(d, copy_ids(s, d.doc_key, 2)) for d in more]
    variant, passage = _derive(spec, case_service.to_record(base), docs, target, ids, more_ids)
    if not spec.as_new_version:
        return variant, passage
    if not variant.new_documents or target is None:
        raise InputError("this variant makes no new document; nothing to version")
    if not more:
        latest = latest_version(s, target.doc_key)
        if latest != target.version:
            raise InputError(
                f"{target.doc_key} has a newer version {latest}; a new version must be "
                f"made from {target.doc_key}@{latest}"
            )
        first = variant.new_documents[0]
        old_ref = f"{first['doc_id']}@{first['version']}"
        return _remap(variant, old_ref, target.doc_key, latest + 1), passage
    return _next_versions(s, variant), passage


def _next_versions(s: Session, variant: Variant) -> Variant:
    """An edit of several documents with each edited copy saved as the next version of its
    source: every source must be its document's newest version, or nothing is (the refusal
    names each one that is not)."""
    stale = []
    plan: list[tuple[str, str, int]] = []  # (copy's reference, source key, next version)
    for rec in variant.edits:
        if rec.result_ref is None:
            continue
        latest = latest_version(s, rec.doc_id)
        if latest != rec.version:
            stale.append(f"{rec.doc_id}@{rec.version} (the newest is {rec.doc_id}@{latest})")
        plan.append((rec.result_ref, rec.doc_id, latest + 1))
    if stale:
        raise InputError(
            "a new version must be made from the newest version of each document; not the "
            f"newest: {', '.join(stale)}. Nothing was saved"
        )
    for old_ref, key, version in plan:
        variant = _remap(variant, old_ref, key, version)
    return variant


def _variant_case(s: Session, variant: Variant, base: Case, tax: Taxonomy) -> case_service.CaseIn:
    """The variant's draft case, checked, under the next free ``<BASE>-CF-<n>`` key."""
    data = dict(variant.case)
    data["key"] = variant_key(s, base.key)
    try:
        case_in = validate_case(data, "variant", 1, tax)
    except InputError as exc:
        raise InputError(str(exc).removeprefix("variant: line 1: ")) from None
    problems = case_in.problems(tax)
    if problems:
        raise InputError(f"{problems[0][0]}: {problems[0][1]}")
    return case_in


def _extracts_of(rec: EditRecord, new_refs: Sequence[str], results: Sequence[str]) -> list[str]:
    """The restricted extracts a relocate edit made: the new documents after its copy and
    before the next edited copy (the derivation lists each copy, then its extracts)."""
    if rec.result_ref not in new_refs:
        return []
    out: list[str] = []
    for ref in new_refs[new_refs.index(rec.result_ref) + 1 :]:
        if ref in results:
            break
        out.append(ref)
    return out


def _store_edits(
    s: Session, actor: Actor, variant: Variant, rows: dict[str, Document], case_id: int
) -> list[int]:
    """One provenance row per edit of the variant; returns their ids."""
    new_refs = list(rows)
    edit_ids: list[int] = []
    group, at = new_group(), utcnow()  # one action: the same group and time for every row
    for rec in variant.edits:
        doc_row = rows.get(rec.result_ref or "")
        results = [e.result_ref for e in variant.edits if e.result_ref]
        extras = _extracts_of(rec, new_refs, results) if rec.operator == "relocate_answer" else []
        edit = add_edit(
            s,
            actor,
            rec,
            document_id=doc_row.id if doc_row else None,
            case_id=case_id,
            extra_refs=extras,
            group=group,
            at=at,
        )
        edit_ids.append(edit.id)
    return edit_ids


def _store_suggestion(s: Session, spec: VariantSpec, variant: Variant, case_id: int) -> None:
    s.add(
        CaseSuggestion(
            case_id=case_id,
            decision=variant.suggested_decision,
            reason_codes=list(variant.suggested_reasons),
            source=_suggestion_source(spec, variant)[:120],
            created_at=utcnow(),
        )
    )


def _record_derivation(
    s: Session,
    actor: Actor,
    spec: VariantSpec,
    base: Case,
    variant: Variant,
    new_refs: list[str],
    target: Document | None,
    passages: Sequence[Passage],
    case_id: int,
) -> None:
    """The change-log entry of the derivation; the passage by offsets only (its text is read
    from the document, with its access checks)."""
    changes.record(
        s,
        actor.email,
        "derive",
        VARIANT_ENTITY,
        case_id,
        None,
        {
            "base_case": base.key,
            "kind": spec.kind,
            "operator": spec.operator,
            "params": dict(spec.params or {}),
            "evidence_state": variant.evidence_state,
            "suggested_decision": variant.suggested_decision,
            "suggested_reasons": list(variant.suggested_reasons),
            "new_documents": new_refs,
            "passage": (
                {"doc": ref_of(passages[0][0]), "start": passages[0][1], "end": passages[0][2]}
                if passages
                else None
            ),
            # every decisive passage of an edit of several documents (the first is "passage")
            "passages": [{"doc": ref_of(d), "start": a, "end": b} for d, a, b in passages],
            "documents": [ref_of(target)] + [m.doc_ref for m in spec.also] if target else [],
        },
    )
