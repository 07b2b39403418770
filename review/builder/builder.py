"""Case builder: recorded edits saved as documents, family variants saved as draft cases.

The pure work is done by :mod:`review.builder.edits` (operators, provenance records, replay) and
:mod:`review.builder.families` (evidence-state builders, family checks). This module is the thin
service around them:

* :func:`preview` shows what an operator does to a span, as escaped, marked-up plain text;
* :func:`save_edit` stores the edited text as a new document (``<ID>-CF-<n>``, or the next
  version of the source when the expert chooses) with a :class:`~storage.models.CaseEdit`
  provenance row;
* :func:`build_variant` derives a family variant from an evidence-present case and stores, in
  one transaction, its new documents, the draft case, the edit records and the operator's
  :class:`~storage.models.CaseSuggestion`, which is kept apart from the case's labels;
* :func:`confirm_suggestion` is the expert's decision: only then does the variant count as
  labeled (it leaves the draft status and joins the labeling queue and the metrics);
* :func:`family_view` gathers a family's variants with the consistency checks;
* :func:`replay_check` proves that a stored record re-creates the stored text.

Refusals (an edit that changes nothing, a target missing from the span, a stale base) raise
:class:`~review.core.errors.InputError` before anything is written.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import difflib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from sqlalchemy import Engine, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload

from review.builder.edits import (
    OPERATORS,
    EditRecord,
    EditResult,
    ParamValue,
    Span,
    Suggestion,
    edit_document,
    replay_result,
    span_at,
)
from review.builder.families import (
    Check,
    Variant,
    derive_conflicted,
    derive_edited,
    derive_forbidden,
    derive_partial,
    derive_removed,
    family_checks,
)
from review.cases import cases as case_service
from review.cases.cases import CaseIn, validate_case
from review.core.errors import InputError, PermissionDenied
from review.core.identity import Actor, Permission, require
from review.core.taxonomy import Taxonomy
from review.corpus.corpus import can_see
from review.corpus.docformat import DocumentIn
from storage import changes
from storage.db import read_session, run_write
from storage.models import (
    AuditLog,
    Case,
    CaseDocument,
    CaseEdit,
    CaseFamily,
    CaseSuggestion,
    Document,
    utcnow,
)

__all__ = [
    "KINDS",
    "MARKERS",
    "BaseCaseRow",
    "CaseDocText",
    "ClaimMark",
    "ConfirmResult",
    "DiffRow",
    "EditRow",
    "FamilyRow",
    "FamilyView",
    "Preview",
    "ReplayCheck",
    "SavedEdit",
    "SavedVariant",
    "VariantRow",
    "VariantSpec",
    "build_variant",
    "case_documents",
    "confirm_suggestion",
    "count_base_cases",
    "count_families",
    "diff_rows",
    "escape_markers",
    "family_view",
    "list_base_cases",
    "list_families",
    "mark_changes",
    "mark_passage",
    "preview",
    "replay_check",
    "save_edit",
    "set_required_claims",
    "side_by_side",
]

RESTRICTED = "restricted"
T = TypeVar("T")
VARIANT_ENTITY = "case_variant"
PASSAGE_ENTITY = "decisive_passage"
MAX_FAMILY_VARIANTS = 200

# ------------------------------------------------------------------------------------------
# Pure: marking changes in plain text (never HTML: the page shows it with st.code/dataframes)

MARKERS = {"removed": ("[-", "-]"), "added": ("{+", "+}")}
_ESCAPES = (("\\", "\\\\"), ("[-", "[\\-"), ("-]", "\\-]"), ("{+", "{\\+"), ("+}", "\\+}"))
_TOKEN_RE = re.compile(r"\s+|\w+|[^\w\s]")


def escape_markers(text: str) -> str:
    """Escape the marker sequences (and backslashes) already in ``text``.

    Applied before marking, so that ``[-``/``-]``/``{+``/``+}`` in a document can never be
    mistaken for a highlighted change.
    """
    for old, new in _ESCAPES:
        text = text.replace(old, new)
    return text


def mark_changes(before: str, after: str) -> tuple[str, str]:
    """Word-level marks: removed words as ``[-...-]`` in before, added as ``{+...+}`` in after.

    Both texts are escaped first (see :func:`escape_markers`).
    """
    a = _TOKEN_RE.findall(before)
    b = _TOKEN_RE.findall(after)
    out_a: list[str] = []
    out_b: list[str] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    (ro, rc), (ao, ac) = MARKERS["removed"], MARKERS["added"]
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        left = escape_markers("".join(a[i1:i2]))
        right = escape_markers("".join(b[j1:j2]))
        if tag == "equal":
            out_a.append(left)
            out_b.append(right)
            continue
        if left:
            out_a.append(f"{ro}{left}{rc}")
        if right:
            out_b.append(f"{ao}{right}{ac}")
    return "".join(out_a), "".join(out_b)


@dataclass(frozen=True)
class DiffRow:
    """One line of a line diff; ``before``/``after`` carry escaped word-level marks."""

    line_before: int | None
    line_after: int | None
    change: str  # same | changed | removed | added
    before: str
    after: str


def _changed_window(a: list[str], b: list[str]) -> tuple[int, int, int]:
    """Common prefix length and the ends of the differing middles of two line lists."""
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    ea, eb = len(a), len(b)
    while ea > p and eb > p and a[ea - 1] == b[eb - 1]:
        ea -= 1
        eb -= 1
    return p, ea, eb


def diff_rows(before_text: str, after_text: str, context: int = 1) -> list[DiffRow]:
    """The changed lines of two texts, with ``context`` unchanged lines around them.

    Linear in the document size outside the changed region (common prefix and suffix are
    skipped before the diff), so a small edit of a large document stays cheap.
    """
    a = before_text.split("\n")
    b = after_text.split("\n")
    p, ea, eb = _changed_window(a, b)
    rows: list[DiffRow] = []
    for i in range(max(0, p - context), p):
        t = escape_markers(a[i])
        rows.append(DiffRow(i + 1, i + 1, "same", t, t))
    matcher = difflib.SequenceMatcher(None, a[p:ea], b[p:eb], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                t = escape_markers(a[p + i1 + k])
                rows.append(DiffRow(p + i1 + k + 1, p + j1 + k + 1, "same", t, t))
            continue
        n = max(i2 - i1, j2 - j1)
        for k in range(n):
            ia, jb = i1 + k, j1 + k
            la = a[p + ia] if ia < i2 else None
            lb = b[p + jb] if jb < j2 else None
            if la is not None and lb is not None:
                ma, mb = mark_changes(la, lb)
                rows.append(DiffRow(p + ia + 1, p + jb + 1, "changed", ma, mb))
            elif la is not None:
                ro, rc = MARKERS["removed"]
                marked = f"{ro}{escape_markers(la)}{rc}" if la else ""
                rows.append(DiffRow(p + ia + 1, None, "removed", marked, ""))
            elif lb is not None:
                ao, ac = MARKERS["added"]
                marked = f"{ao}{escape_markers(lb)}{ac}" if lb else ""
                rows.append(DiffRow(None, p + jb + 1, "added", "", marked))
    tail = len(a) - ea
    for k in range(min(context, tail)):
        t = escape_markers(a[ea + k])
        rows.append(DiffRow(ea + k + 1, eb + k + 1, "same", t, t))
    return rows


def side_by_side(rows: Sequence[DiffRow]) -> tuple[str, str]:
    """Two plain-text excerpts (before, after) with line numbers, for st.code blocks."""
    left: list[str] = []
    right: list[str] = []
    last_a: int | None = None
    for r in rows:
        if r.line_before is not None and last_a is not None and r.line_before > last_a + 1:
            left.append("     …")
            right.append("     …")
        if r.line_before is not None:
            last_a = r.line_before
            left.append(f"{r.line_before:>4} │ {r.before}")
        if r.line_after is not None:
            right.append(f"{r.line_after:>4} │ {r.after}")
    return "\n".join(left), "\n".join(right)


@dataclass(frozen=True)
class Preview:
    """What an operator does to a span: the result, its record, the diff and the suggestion."""

    result: EditResult
    record: EditRecord
    rows: tuple[DiffRow, ...]
    before_excerpt: str
    after_excerpt: str
    suggestion: Suggestion
    metadata: Mapping[str, str]
    extra_documents: tuple[tuple[str, str, str], ...]  # (title, access scope, body)


def preview(
    body: str,
    operator: str,
    start: int,
    end: int,
    params: Mapping[str, object],
    *,
    doc_ref: str = "document@1",
) -> Preview:
    """Apply ``operator`` to ``body[start:end]`` without saving; InputError when refused."""
    op = OPERATORS.get(operator)
    if op is None:
        raise InputError(f"unknown edit operator {operator!r}; use one of: {', '.join(OPERATORS)}")
    key, _, ver = doc_ref.partition("@")
    span = span_at(body, start, end, "position" if start == end else "selection")
    result, record = edit_document(
        body, operator, span, params, doc_id=key, version=int(ver) if ver.isdigit() else 1
    )
    rows = tuple(diff_rows(body, result.text))
    left, right = side_by_side(rows)
    extras = tuple((x.title, x.access_scope, x.body) for x in result.extra_documents)
    return Preview(result, record, rows, left, right, op.suggestion, result.metadata, extras)


# ------------------------------------------------------------------------------------------
# Reading the documents of a case


@dataclass(frozen=True)
class CaseDocText:
    """A document of a case with its text, or without it when the actor may not see it."""

    document_id: int
    ref: str
    doc_key: str
    version: int
    title: str
    body: str | None  # None: restricted and the actor has no clearance
    visibility: str
    role: str
    access_scope: str
    is_current: bool
    effective_date: dt.date | None

    @property
    def readable(self) -> bool:
        return self.body is not None


def case_documents(engine: Engine, actor: Actor, case_id: int) -> list[CaseDocText]:
    """The documents of a case in order; restricted text only for users with clearance."""
    with read_session(engine) as s:
        rows = s.execute(
            select(CaseDocument, Document)
            .join(Document, Document.id == CaseDocument.document_id)
            .where(CaseDocument.case_id == case_id)
            .order_by(CaseDocument.position)
        ).all()
        out: list[CaseDocText] = []
        for cd, d in rows:
            seen = can_see(actor, d.access_scope)
            out.append(
                CaseDocText(
                    d.id,
                    f"{d.doc_key}@{d.version}",
                    d.doc_key,
                    d.version,
                    d.title if seen else "(restricted title hidden)",
                    d.body if seen else None,
                    cd.visibility,
                    cd.role,
                    d.access_scope,
                    d.is_current,
                    d.effective_date,
                )
            )
        return out


@dataclass(frozen=True)
class BaseCaseRow:
    id: int
    key: str
    family: str | None
    question: str


def _base_conditions(text: str) -> list[Any]:
    conds: list[Any] = [Case.evidence_state == "present", Case.expected_decision == "answer"]
    t = text.strip().replace("%", "").replace("_", "")
    if t:
        conds.append(Case.question.ilike(f"%{t}%") | Case.key.ilike(f"%{t}%"))
    return conds


def count_base_cases(engine: Engine, text: str = "") -> int:
    with read_session(engine) as s:
        return int(s.scalar(select(func.count(Case.id)).where(*_base_conditions(text))) or 0)


def list_base_cases(
    engine: Engine, text: str = "", page: int = 1, page_size: int = 50
) -> list[BaseCaseRow]:
    """Evidence-present cases expecting an answer: the starting points of variants."""
    page = max(page, 1)
    with read_session(engine) as s:
        rows = s.execute(
            select(Case.id, Case.key, CaseFamily.key.label("family"), Case.question)
            .outerjoin(CaseFamily, CaseFamily.id == Case.family_id)
            .where(*_base_conditions(text))
            .order_by(Case.id)
            .limit(page_size)
            .offset((page - 1) * page_size)
        ).all()
    return [BaseCaseRow(r.id, r.key, r.family, r.question) for r in rows]


# ------------------------------------------------------------------------------------------
# Writing: documents and provenance


def _doc_dict(d: Document) -> dict[str, Any]:
    return {
        "doc_id": d.doc_key,
        "version": d.version,
        "title": d.title,
        "body": d.body,
        "effective_date": d.effective_date.isoformat() if d.effective_date else None,
        "superseded_by": d.superseded_by,
        "authority": d.authority,
        "owner": d.owner,
        "access_scope": d.access_scope,
        "jurisdiction": d.jurisdiction,
    }


def _ref_of(d: Document) -> str:
    return f"{d.doc_key}@{d.version}"


def _get_doc(s: Session, key: str, version: int) -> Document | None:
    return s.scalar(select(Document).where(Document.doc_key == key, Document.version == version))


def _parse_ref(ref: str) -> tuple[str, int]:
    key, _, ver = ref.strip().partition("@")
    if not key or not ver.isdigit():
        raise InputError(f"{ref!r} is not a document reference like POL-REFUND@2")
    return key, int(ver)


def _copy_ids(s: Session, doc_key: str, count: int) -> list[str]:
    """The next free ``<doc_key>-CF-<n>`` ids."""
    prefix = f"{doc_key[:100]}-CF-"
    pattern = re.compile(re.escape(prefix) + r"(\d+)")
    existing = s.scalars(
        select(Document.doc_key).where(Document.doc_key.startswith(prefix, autoescape=True))
    )
    numbers = [int(m.group(1)) for k in existing if (m := pattern.fullmatch(k))]
    n = max(numbers, default=0)
    return [f"{prefix}{n + i}" for i in range(1, count + 1)]


def _latest_version(s: Session, key: str) -> int:
    return int(s.scalar(select(func.max(Document.version)).where(Document.doc_key == key)) or 0)


def _insert_document(
    s: Session, actor: Actor, tax: Taxonomy, data: Mapping[str, Any], source: str
) -> Document:
    """Validate and add one new document version (id and version must be free)."""
    ref = f"{data.get('doc_id')}@{data.get('version')}"
    try:
        doc = DocumentIn.model_validate(dict(data))
    except ValueError as exc:
        raise InputError(f"{ref}: the derived document is not valid: {exc}") from None
    problems = doc.check_vocabulary(tax)
    if problems:
        raise InputError(f"{ref}: field {problems[0][0]}: {problems[0][1]}")
    if _get_doc(s, doc.doc_id, doc.version) is not None:
        raise InputError(f"{ref} already exists; choose another document id")
    latest = _latest_version(s, doc.doc_id)
    row = Document(
        doc_key=doc.doc_id,
        version=doc.version,
        title=doc.title,
        body=doc.body,
        effective_date=doc.effective_date,
        superseded_by=doc.superseded_by,
        authority=doc.authority,
        owner=doc.owner,
        access_scope=doc.access_scope,
        jurisdiction=doc.jurisdiction,
        is_current=doc.version > latest,
        source=source[:500],
        sha256=doc.sha256(),
        created_by=actor.email,
    )
    s.add(row)
    s.flush()
    if row.is_current and latest:
        for old in s.scalars(
            select(Document).where(Document.doc_key == doc.doc_id, Document.id != row.id)
        ):
            old.is_current = False
            # the newest version supersedes the one before, unless it says the opposite
            if (
                old.version == latest
                and not old.superseded_by
                and (doc.superseded_by != _ref_of(old))
            ):
                old.superseded_by = f"{doc.doc_id}@{doc.version}"
    changes.record(
        s,
        actor.email,
        "create",
        "document",
        row.id,
        None,
        {**changes.snapshot(row), "body": f"<{len(doc.body)} characters>"},
    )
    return row


def _add_edit(
    s: Session,
    actor: Actor,
    record: EditRecord,
    *,
    document_id: int | None,
    case_id: int | None,
    extra_refs: Sequence[str] = (),
) -> CaseEdit:
    stored = record.to_dict()
    if extra_refs:
        stored["extra_refs"] = list(extra_refs)
    row = CaseEdit(
        case_id=case_id,
        document_id=document_id,
        operator=record.operator,
        params=dict(record.params),
        source_doc_key=record.doc_id,
        source_version=record.version,
        span_start=record.start,
        span_end=record.end,
        before=record.before,
        after=record.after,
        record=stored,
        author=actor.email,
        created_at=utcnow(),
    )
    s.add(row)
    s.flush()
    changes.record(
        s,
        actor.email,
        "create",
        "case_edit",
        row.id,
        None,
        {
            "operator": row.operator,
            "params": row.params,
            "source": f"{row.source_doc_key}@{row.source_version}",
            "span": [row.span_start, row.span_end],
            "result": record.result_ref,
            "case_id": case_id,
        },
    )
    return row


def _source_for_edit(s: Session, actor: Actor, ref: str) -> Document:
    key, version = _parse_ref(ref)
    doc = _get_doc(s, key, version)
    if doc is None:
        raise InputError(f"document {ref} does not exist")
    if not can_see(actor, doc.access_scope):
        raise PermissionDenied("this document is restricted; only users with clearance may edit it")
    return doc


def _write_new_ids(engine: Engine, work: Callable[[Session], T]) -> T:
    """Run a write that allocates new keys; a concurrent writer that took the same key first
    (PostgreSQL, where the allocation is not serialised) makes it re-run with fresh keys."""
    for attempt in range(3):
        try:
            return run_write(engine, work)
        except IntegrityError:
            if attempt == 2:
                raise InputError(
                    "someone saved a document or case with the same id at the same moment; "
                    "nothing was saved, try again"
                ) from None
    raise AssertionError("unreachable")  # pragma: no cover


@dataclass(frozen=True)
class SavedEdit:
    edit_id: int
    document_id: int
    ref: str
    extra_refs: tuple[str, ...]


def save_edit(
    engine: Engine,
    actor: Actor,
    tax: Taxonomy,
    source_ref: str,
    operator: str,
    start: int,
    end: int,
    params: Mapping[str, object],
    *,
    as_new_version: bool = False,
    new_doc_id: str | None = None,
) -> SavedEdit:
    """Apply an operator to ``source_ref`` and store the result with its provenance row.

    The result is a new document ``<ID>-CF-<n>`` (or ``new_doc_id``), or, with
    ``as_new_version``, the next version of the source (which must then be its newest
    version). ``relocate_answer`` also stores its restricted document. Nothing is written when
    the operator refuses.
    """
    require(actor, Permission.edit_corpus)

    def work(s: Session) -> SavedEdit:
        src = _source_for_edit(s, actor, source_ref)
        span = span_at(src.body, start, end, "position" if start == end else "selection")
        ids = _copy_ids(s, src.doc_key, 2)
        if as_new_version:
            latest = _latest_version(s, src.doc_key)
            if latest != src.version:
                raise InputError(
                    f"{src.doc_key} has a newer version {latest}; a new version must be made "
                    f"from {src.doc_key}@{latest}"
                )
            target, version = src.doc_key, latest + 1
        else:
            target, version = (new_doc_id or ids[0]).strip(), 1
        ref = f"{target}@{version}"
        result, record = edit_document(
            src.body,
            operator,
            span,
            params,
            doc_id=src.doc_key,
            version=src.version,
            result_ref=ref,
        )
        base = _doc_dict(src)
        data = {
            **base,
            "doc_id": target,
            "version": version,
            "body": result.text,
            "superseded_by": None,
        }
        data.update(result.metadata)
        row = _insert_document(s, actor, tax, data, f"case builder: {operator} on {_ref_of(src)}")
        extras: list[str] = []
        extra_ids = [i for i in ids if i != target] if not as_new_version else ids
        for k, extra in enumerate(result.extra_documents):
            eid = extra_ids[k] if k < len(extra_ids) else f"{target}-R{k + 1}"
            _insert_document(
                s,
                actor,
                tax,
                {
                    **base,
                    "doc_id": eid,
                    "version": 1,
                    "title": extra.title,
                    "body": extra.body,
                    "access_scope": extra.access_scope,
                    "superseded_by": None,
                },
                f"case builder: {operator} on {_ref_of(src)}",
            )
            extras.append(f"{eid}@1")
        edit = _add_edit(s, actor, record, document_id=row.id, case_id=None, extra_refs=extras)
        return SavedEdit(edit.id, row.id, ref, tuple(extras))

    return _write_new_ids(engine, work)


# ------------------------------------------------------------------------------------------
# Variants


KINDS = ("edited", "removed", "conflicted", "forbidden", "partial")
Kind = Literal["edited", "removed", "conflicted", "forbidden", "partial"]


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


def _whole_line_bounds(text: str, start: int, end: int) -> tuple[int, int]:
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
    old_key, old_ver = _parse_ref(old_ref)
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
    return dataclasses.replace(variant, case=case, new_documents=docs, edits=edits)


def _derive(
    spec: VariantSpec,
    record: dict[str, Any],
    docs: list[dict[str, Any]],
    target: Document | None,
    ids: list[str],
) -> tuple[Variant, tuple[int, int] | None]:
    """The pure derivation, and the offsets of the decisive passage in ``target``'s body."""
    body = target.body if target is not None else ""
    key = target.doc_key if target is not None else None
    span: Span | None = None
    if spec.start is not None:
        end = spec.start if spec.end is None else spec.end
        span = span_at(body, spec.start, end, "position" if spec.start == end else "selection")
    passage: tuple[int, int] | None = None
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
        )
        if v.decisive_passage is not None:
            passage = _whole_line_bounds(body, span.start, span.end)
    elif spec.kind == "removed":
        v = derive_removed(record, docs, passage=span, doc_id=key, new_doc_id=ids[0])
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
        )
    elif spec.kind == "forbidden":
        v = derive_forbidden(record, docs, passage=span, doc_id=key, new_doc_id=ids[0])
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
    if passage is None and span is not None and spec.kind in ("removed", "conflicted", "forbidden"):
        passage = _strip_bounds(body, span.start, span.end)
    return v, passage


def _variant_key(s: Session, base_key: str) -> str:
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
    engine: Engine, actor: Actor, tax: Taxonomy, base_case_id: int, spec: VariantSpec
) -> SavedVariant:
    """Derive a variant of an evidence-present case and save it as a draft in its family.

    One transaction stores the new documents, the draft case (key ``<BASE>-CF-<n>``), one
    provenance row per edit and the operator's suggestion. The suggestion is not a label: the
    variant stays a draft until :func:`confirm_suggestion`.
    """
    require(actor, Permission.edit_cases)

    def work(s: Session) -> SavedVariant:
        base = s.scalar(
            select(Case)
            .options(
                selectinload(Case.claims),
                selectinload(Case.documents).selectinload(CaseDocument.document),
                selectinload(Case.slices),
                selectinload(Case.family),
            )
            .where(Case.id == base_case_id)
        )
        if base is None:
            raise InputError(f"case {base_case_id} does not exist")
        if base.evidence_state not in (None, "present") or base.expected_decision != "answer":
            raise InputError(
                f"{base.key}: variants start from an evidence-present case expecting 'answer' "
                f"(this one is {base.evidence_state or 'without evidence state'}, expecting "
                f"{base.expected_decision!r}); start from the family's evidence-present case"
            )
        record = case_service.to_record(base)
        case_docs = [cd.document for cd in base.documents]
        target: Document | None = None
        if spec.doc_ref:
            key, version = _parse_ref(spec.doc_ref)
            found = [d for d in case_docs if (d.doc_key, d.version) == (key, version)]
            if not found:
                raise InputError(f"{spec.doc_ref} is not a document of {base.key}")
            target = found[0]
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
        if target is not None and not can_see(actor, target.access_scope):
            raise PermissionDenied(
                "the document to edit is restricted; only users with clearance may build "
                "variants from it"
            )
        docs = [_doc_dict(d) for d in case_docs]
        ids = _copy_ids(s, target.doc_key, 2) if target is not None else ["", ""]
        variant, passage = _derive(spec, record, docs, target, ids)
        if spec.as_new_version:
            if not variant.new_documents or target is None:
                raise InputError("this variant makes no new document; nothing to version")
            latest = _latest_version(s, target.doc_key)
            if latest != target.version:
                raise InputError(
                    f"{target.doc_key} has a newer version {latest}; a new version must be "
                    f"made from {target.doc_key}@{latest}"
                )
            first = variant.new_documents[0]
            variant = _remap(
                variant, f"{first['doc_id']}@{first['version']}", target.doc_key, latest + 1
            )
        data = dict(variant.case)
        data["key"] = _variant_key(s, base.key)
        try:
            case_in = validate_case(data, "variant", 1, tax)
        except InputError as exc:
            raise InputError(str(exc).removeprefix("variant: line 1: ")) from None
        problems = case_in.problems(tax)
        if problems:
            raise InputError(f"{problems[0][0]}: {problems[0][1]}")
        rows: dict[str, Document] = {}
        for nd in variant.new_documents:
            row = _insert_document(
                s, actor, tax, nd, f"case builder: {spec.kind} variant of {base.key}"
            )
            rows[f"{row.doc_key}@{row.version}"] = row
        case_row = Case(key=case_in.key, created_by=actor.email, updated_by=actor.email, version=1)
        case_service._apply(s, case_row, case_in, actor, "")
        s.add(case_row)
        s.flush()
        changes.record(
            s,
            actor.email,
            "create",
            "case",
            case_row.id,
            None,
            case_service.to_record(case_row),
        )
        new_refs = list(rows)
        edit_ids: list[int] = []
        for rec in variant.edits:
            doc_row = rows.get(rec.result_ref or "")
            extras = [r for r in new_refs if r != rec.result_ref] if rec.result_ref else []
            extras = extras if rec.operator == "relocate_answer" else []
            edit = _add_edit(
                s,
                actor,
                rec,
                document_id=doc_row.id if doc_row else None,
                case_id=case_row.id,
                extra_refs=extras,
            )
            edit_ids.append(edit.id)
        s.add(
            CaseSuggestion(
                case_id=case_row.id,
                decision=variant.suggested_decision,
                reason_codes=list(variant.suggested_reasons),
                source=_suggestion_source(spec, variant)[:120],
                created_at=utcnow(),
            )
        )
        changes.record(
            s,
            actor.email,
            "derive",
            VARIANT_ENTITY,
            case_row.id,
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
                # offsets only: the text is read from the document, with its access checks
                "passage": (
                    {
                        "doc": _ref_of(target),
                        "start": passage[0],
                        "end": passage[1],
                    }
                    if passage is not None and target is not None
                    else None
                ),
            },
        )
        s.flush()
        return SavedVariant(
            case_row.id,
            case_row.key,
            variant.evidence_state,
            variant.suggested_decision,
            variant.suggested_reasons,
            tuple(new_refs),
            tuple(edit_ids),
            variant.derivation,
        )

    return _write_new_ids(engine, work)


# ------------------------------------------------------------------------------------------
# Confirming a suggestion, editing required claims


@dataclass(frozen=True)
class ConfirmResult:
    case_id: int
    changed: bool  # the expert chose another decision or other reasons than suggested
    version: int
    status: str


def confirm_suggestion(
    engine: Engine,
    actor: Actor,
    case_id: int,
    decision: str,
    reasons: Iterable[str],
    *,
    tax: Taxonomy | None = None,
    expected_version: int | None = None,
    note: str = "",
    make_ready: bool = True,
) -> ConfirmResult:
    """An expert confirms (or changes) the suggested decision and reasons of a variant.

    The case gets the expert's decision and reasons and, with ``make_ready``, leaves the draft
    status; the suggestion row keeps what was suggested and records who confirmed and when.
    Refused when there is no suggestion, when it is already confirmed, or when the case was
    changed since ``expected_version``.
    """
    require(actor, Permission.edit_cases)
    if tax is None:
        from review.core.taxonomy import taxonomy

        tax = taxonomy()
    chosen = list(dict.fromkeys(r.strip() for r in reasons if r.strip()))

    def work(s: Session) -> ConfirmResult:
        row = s.scalar(
            select(Case)
            .options(
                selectinload(Case.claims),
                selectinload(Case.documents).selectinload(CaseDocument.document),
                selectinload(Case.slices),
                selectinload(Case.family),
            )
            .where(Case.id == case_id)
            .with_for_update()
        )
        if row is None:
            raise InputError(f"case {case_id} does not exist")
        sug = s.get(CaseSuggestion, case_id, with_for_update=True)
        if sug is None:
            raise InputError(f"{row.key} has no suggested label to confirm")
        if sug.confirmed_by:
            raise InputError(
                f"the suggestion on {row.key} was already confirmed by {sug.confirmed_by} at "
                f"{sug.confirmed_at:%Y-%m-%d %H:%M UTC}; edit the case to change its label"
            )
        if expected_version is not None and row.version != expected_version:
            raise changes.stale_error("case", row.key, expected_version, row)
        before = case_service.to_record(row)
        data = {**before, "expected_decision": decision, "reason_codes": chosen}
        if make_ready and row.status == "draft":
            data["status"] = "ready"
        case_in = CaseIn.model_validate(data)
        problems = case_in.problems(tax)
        if problems:
            raise InputError(f"{problems[0][0]}: {problems[0][1]}")
        row.expected_decision = decision
        row.reason_codes = chosen
        row.status = case_in.status
        row.version += 1
        row.updated_at = utcnow()
        row.updated_by = actor.email
        changed = decision != sug.decision or set(chosen) != set(sug.reason_codes)
        sug_before = changes.snapshot(sug)
        sug.confirmed_by = actor.email
        sug.confirmed_at = utcnow()
        s.flush()
        changes.record(
            s, actor.email, "update", "case", row.id, before, case_service.to_record(row)
        )
        changes.record(
            s,
            actor.email,
            "confirm",
            "case_suggestion",
            row.id,
            sug_before,
            {
                **changes.snapshot(sug),
                "expert_decision": decision,
                "expert_reasons": chosen,
                "changed": changed,
                "note": note,
            },
        )
        return ConfirmResult(row.id, changed, row.version, row.status)

    return run_write(engine, work)


def set_required_claims(
    engine: Engine,
    actor: Actor,
    tax: Taxonomy,
    case_id: int,
    expected_version: int,
    claims: Sequence[str],
) -> int:
    """Replace the required claims of a case (compound questions); returns the new version."""
    view = case_service.get_case(engine, case_id=case_id)
    if view is None:
        raise InputError(f"case {case_id} does not exist")
    cleaned = [c.strip() for c in claims if c.strip()]
    if len(set(cleaned)) != len(cleaned):
        raise InputError("a required claim is listed twice")
    data = {**view.record, "required_claims": cleaned}
    case_in = validate_case(data, "claims", 1, tax)
    return case_service.update_case(engine, actor, case_id, expected_version, case_in, tax)


def mark_passage(engine: Engine, actor: Actor, case_id: int, passage: str) -> str:
    """Record the decisive passage of an evidence-present case (for the family checks).

    ``passage`` must occur exactly once in exactly one visible document of the case. Only the
    document reference and offsets are recorded (in the audit log, entity
    ``decisive_passage``); the text is read back from the document with its access checks.
    The newest mark counts. Returns the document reference.
    """
    require(actor, Permission.edit_cases)
    wanted = passage.strip()
    if not wanted:
        raise InputError("the decisive passage is empty")

    def work(s: Session) -> str:
        row = s.get(Case, case_id)
        if row is None:
            raise InputError(f"case {case_id} does not exist")
        if row.evidence_state != "present":
            raise InputError(
                f"{row.key} is not the evidence-present case of its family; mark the passage there"
            )
        hits: list[tuple[Document, int]] = []
        for d in s.scalars(
            select(Document)
            .join(CaseDocument, CaseDocument.document_id == Document.id)
            .where(CaseDocument.case_id == case_id, CaseDocument.visibility == "visible")
        ):
            if not can_see(actor, d.access_scope):
                continue
            first = d.body.find(wanted)
            if first >= 0:
                if d.body.find(wanted, first + 1) >= 0:
                    raise InputError(
                        f"the passage occurs several times in {_ref_of(d)}; select a longer one"
                    )
                hits.append((d, first))
        if not hits:
            raise InputError(
                f"the passage does not occur in any visible document of {row.key} that you may "
                "read; copy it exactly from the document"
            )
        if len(hits) > 1:
            refs = ", ".join(_ref_of(d) for d, _ in hits)
            raise InputError(f"the passage occurs in several documents ({refs}); make it unique")
        d, first = hits[0]
        changes.record(
            s,
            actor.email,
            "mark",
            PASSAGE_ENTITY,
            row.id,
            None,
            {"doc": _ref_of(d), "start": first, "end": first + len(wanted), "case": row.key},
        )
        return _ref_of(d)

    return run_write(engine, work)


# ------------------------------------------------------------------------------------------
# Family view


@dataclass(frozen=True)
class FamilyRow:
    key: str
    title: str
    variants: int
    unconfirmed: int
    states: str


def count_families(engine: Engine) -> int:
    with read_session(engine) as s:
        return int(s.scalar(select(func.count(CaseFamily.id))) or 0)


def list_families(engine: Engine, page: int = 1, page_size: int = 25) -> list[FamilyRow]:
    """One page of families with their variant counts (aggregated in SQL)."""
    page = max(page, 1)
    with read_session(engine) as s:
        fams = s.execute(
            select(CaseFamily.id, CaseFamily.key, CaseFamily.title)
            .order_by(CaseFamily.key)
            .limit(page_size)
            .offset((page - 1) * page_size)
        ).all()
        ids = [f.id for f in fams]
        counts = dict(
            s.execute(
                select(Case.family_id, func.count(Case.id))
                .where(Case.family_id.in_(ids))
                .group_by(Case.family_id)
            ).all()
        )
        pending = dict(
            s.execute(
                select(Case.family_id, func.count(Case.id))
                .join(CaseSuggestion, CaseSuggestion.case_id == Case.id)
                .where(Case.family_id.in_(ids), CaseSuggestion.confirmed_by.is_(None))
                .group_by(Case.family_id)
            ).all()
        )
        states: dict[int, list[str]] = {i: [] for i in ids}
        for fid, state in s.execute(
            select(Case.family_id, Case.evidence_state)
            .where(Case.family_id.in_(ids))
            .distinct()
            .order_by(Case.evidence_state)
        ):
            if fid is not None:
                states[fid].append(state or "other")
    return [
        FamilyRow(
            f.key,
            f.title,
            int(counts.get(f.id, 0)),
            int(pending.get(f.id, 0)),
            ", ".join(states[f.id]),
        )
        for f in fams
    ]


@dataclass(frozen=True)
class ClaimMark:
    text: str
    status: str  # supported | loses support | as in the evidence-present case


@dataclass(frozen=True)
class EditRow:
    id: int
    operator: str
    params: dict[str, Any]
    source: str
    start: int
    end: int
    before: str | None  # None when the source is restricted and the actor has no clearance
    after: str | None
    result: str | None
    author: str
    created_at: dt.datetime


@dataclass(frozen=True)
class VariantDoc:
    ref: str
    document_id: int
    title: str
    visibility: str
    role: str
    access_scope: str


@dataclass(frozen=True)
class VariantRow:
    case_id: int
    key: str
    version: int
    evidence_state: str | None
    status: str
    question: str
    expected_decision: str
    reason_codes: tuple[str, ...]
    suggested_decision: str | None
    suggested_reasons: tuple[str, ...]
    suggestion_source: str | None
    confirmed_by: str | None
    confirmed_at: dt.datetime | None
    identity_name: str
    identity_scopes: tuple[str, ...]
    documents: tuple[VariantDoc, ...]
    claims: tuple[ClaimMark, ...]
    edits: tuple[EditRow, ...]

    @property
    def has_suggestion(self) -> bool:
        return self.suggested_decision is not None

    @property
    def labeled(self) -> bool:
        """A variant with a suggestion counts as labeled only once an expert confirmed it."""
        return self.suggested_decision is None or self.confirmed_by is not None


@dataclass(frozen=True)
class FamilyView:
    key: str
    title: str
    variants: tuple[VariantRow, ...]
    checks: tuple[Check, ...]
    passage: str | None  # the decisive passage the checks used (None if hidden or unknown)
    passage_source: str  # where it came from
    hidden: bool  # restricted text was withheld from this actor

    @property
    def unverified(self) -> tuple[Check, ...]:
        """Failed checks that only lack a decisive passage (nothing was found wrong)."""
        return tuple(c for c in self.checks if not c.passed and _unverifiable(c))

    @property
    def failed(self) -> tuple[Check, ...]:
        """Checks that found something wrong."""
        return tuple(c for c in self.checks if not c.passed and not _unverifiable(c))


def _unverifiable(c: Check) -> bool:
    return c.detail.startswith("cannot be verified") or c.detail == "no decisive passage recorded"


_QUOTED_RE = re.compile(r"(['\"]).*?\1(?= is visible in)")


def _claim_marks(state: str | None, claims: Sequence[str], base: Sequence[str]) -> list[ClaimMark]:
    out: list[ClaimMark] = []
    for c in claims:
        if state == "present":
            status = "supported"
        elif state in ("removed", "forbidden"):
            status = "loses support"
        elif state == "partial":
            status = "supported" if c in base else "loses support"
        else:
            status = "as in the evidence-present case"
        out.append(ClaimMark(c, status))
    return out


def family_view(
    engine: Engine, actor: Actor, family_key: str, *, passage: str | None = None
) -> FamilyView | None:
    """The variants of a family with their suggestions, documents, claims, edits and checks.

    The checks need the decisive passage: ``passage`` when given, else the one recorded when a
    variant was built from the evidence-present case. Restricted titles, edit texts and leaked
    fragments are withheld from users without clearance.
    """
    with read_session(engine) as s:
        fam = s.scalar(select(CaseFamily).where(CaseFamily.key == family_key))
        if fam is None:
            return None
        rows = list(
            s.scalars(
                select(Case)
                .options(
                    selectinload(Case.claims),
                    selectinload(Case.documents).selectinload(CaseDocument.document),
                    selectinload(Case.slices),
                    selectinload(Case.family),
                )
                .where(Case.family_id == fam.id)
                .order_by(Case.id)
                .limit(MAX_FAMILY_VARIANTS)
            )
        )
        ids = [r.id for r in rows]
        sugs = {
            g.case_id: g
            for g in s.scalars(select(CaseSuggestion).where(CaseSuggestion.case_id.in_(ids)))
        }
        edits: dict[int, list[CaseEdit]] = {i: [] for i in ids}
        for e in s.scalars(select(CaseEdit).where(CaseEdit.case_id.in_(ids)).order_by(CaseEdit.id)):
            if e.case_id is not None:
                edits[e.case_id].append(e)
        recorded: dict[int, dict[str, Any]] = {}
        for log in s.scalars(
            select(AuditLog)
            .where(
                AuditLog.entity == VARIANT_ENTITY,
                AuditLog.action == "derive",
                AuditLog.entity_id.in_([str(i) for i in ids]),
            )
            .order_by(AuditLog.id)
        ):
            p = (log.after or {}).get("passage")
            if isinstance(p, dict):
                recorded[int(log.entity_id)] = p
        marked: dict[int, dict[str, Any]] = {}
        for log in s.scalars(
            select(AuditLog)
            .where(
                AuditLog.entity == PASSAGE_ENTITY,
                AuditLog.action == "mark",
                AuditLog.entity_id.in_([str(i) for i in ids]),
            )
            .order_by(AuditLog.id)
        ):
            if isinstance(log.after, dict):
                marked[int(log.entity_id)] = log.after  # the newest mark wins
        docs: dict[tuple[str, int], Document] = {}
        for r in rows:
            for cd in r.documents:
                docs[(cd.document.doc_key, cd.document.version)] = cd.document
        for p in [*recorded.values(), *marked.values()]:
            key, _, ver = str(p.get("doc", "")).partition("@")
            if ver.isdigit() and (key, int(ver)) not in docs:
                d = _get_doc(s, key, int(ver))
                if d is not None:
                    docs[(key, int(ver))] = d
        restricted_in_family = any(d.access_scope == RESTRICTED for d in docs.values())
        hide = restricted_in_family and not actor.clearance

        def passage_text(p: Mapping[str, Any]) -> tuple[str, Document] | None:
            key, _, ver = str(p.get("doc", "")).partition("@")
            d = docs.get((key, int(ver))) if ver.isdigit() else None
            start, end = p.get("start"), p.get("end")
            if d is None or not isinstance(start, int) or not isinstance(end, int):
                return None
            text = d.body[start:end].strip()
            return (text, d) if text else None

        present = [r for r in rows if r.evidence_state == "present"]
        present_refs = {
            (cd.document.doc_key, cd.document.version)
            for r in present
            for cd in r.documents
            if cd.visibility == "visible"
        }
        base_passage: str | None = None
        source = "none recorded"
        base_doc: Document | None = None
        marks = [marked[r.id] for r in present if r.id in marked]
        found_mark = passage_text(marks[-1]) if marks else None
        if passage is not None and passage.strip():
            base_passage, source = passage.strip(), "given"
        elif found_mark is not None:
            base_passage, base_doc = found_mark
            source = f"marked as decisive in {_ref_of(base_doc)}"
        else:
            for cid in ids:
                p = recorded.get(cid)
                found = passage_text(p) if p else None
                if found and (found[1].doc_key, found[1].version) in present_refs:
                    base_passage, base_doc = found[0], found[1]
                    source = f"recorded when a variant was built from {_ref_of(found[1])}"
                    break
        variants: list[Variant] = []
        for r in rows:
            own: str | None = None
            if r.evidence_state == "present":
                own = base_passage
            elif r.id in recorded:
                found = passage_text(recorded[r.id])
                own = found[0] if found else None
            record = case_service.to_record(r)
            variants.append(
                Variant(
                    evidence_state=r.evidence_state,
                    case=record,
                    suggested_decision=r.expected_decision,
                    suggested_reasons=tuple(r.reason_codes),
                    decisive_passage=own,
                )
            )
        checks = family_checks(variants, [_doc_dict(d) for d in docs.values()])
        if hide:
            checks = [
                dataclasses.replace(c, detail=_QUOTED_RE.sub("(restricted text)", c.detail))
                for c in checks
            ]
        base_claims = [c.text for r in present for c in r.claims]
        out_rows: list[VariantRow] = []
        for r in rows:
            g = sugs.get(r.id)
            out_rows.append(
                VariantRow(
                    case_id=r.id,
                    key=r.key,
                    version=r.version,
                    evidence_state=r.evidence_state,
                    status=r.status,
                    question=r.question,
                    expected_decision=r.expected_decision,
                    reason_codes=tuple(r.reason_codes),
                    suggested_decision=g.decision if g else None,
                    suggested_reasons=tuple(g.reason_codes) if g else (),
                    suggestion_source=g.source if g else None,
                    confirmed_by=g.confirmed_by if g else None,
                    confirmed_at=g.confirmed_at if g else None,
                    identity_name=r.identity_name,
                    identity_scopes=tuple(r.identity_scopes),
                    documents=tuple(
                        VariantDoc(
                            _ref_of(cd.document),
                            cd.document.id,
                            cd.document.title
                            if can_see(actor, cd.document.access_scope)
                            else "(restricted title hidden)",
                            cd.visibility,
                            cd.role,
                            cd.document.access_scope,
                        )
                        for cd in r.documents
                    ),
                    claims=tuple(
                        _claim_marks(r.evidence_state, [c.text for c in r.claims], base_claims)
                    ),
                    edits=tuple(_edit_row(e, docs, actor) for e in edits[r.id]),
                )
            )
        shown = base_passage
        if base_passage is not None and hide:
            shown = None
        if base_doc is not None and not can_see(actor, base_doc.access_scope):
            shown = None
        return FamilyView(fam.key, fam.title, tuple(out_rows), tuple(checks), shown, source, hide)


def _edit_row(e: CaseEdit, docs: Mapping[tuple[str, int], Document], actor: Actor) -> EditRow:
    src = docs.get((e.source_doc_key, e.source_version))
    visible = src is None or can_see(actor, src.access_scope)
    if src is None:
        visible = actor.clearance  # the source is not in the family: show it to clearance only
    return EditRow(
        e.id,
        e.operator,
        dict(e.params),
        f"{e.source_doc_key}@{e.source_version}",
        e.span_start,
        e.span_end,
        e.before if visible else None,
        e.after if visible else None,
        e.record.get("result_ref") if isinstance(e.record, dict) else None,
        e.author,
        e.created_at,
    )


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
        src = _get_doc(s, e.source_doc_key, e.source_version)
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
        dref = _ref_of(derived)
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
            key, version = _parse_ref(str(ref))
            extra_doc = _get_doc(s, key, version)
            want = result.extra_documents[k].body if k < len(result.extra_documents) else None
            if extra_doc is None or want is None or extra_doc.body != want.strip():
                return ReplayCheck(
                    e.id, False, f"replaying on {where} does not give the text of {ref}"
                )
        also = f" and {', '.join(str(r) for r in extra_refs)}" if extra_refs else ""
        return ReplayCheck(e.id, True, f"replaying on {where} gives exactly {dref}{also}")
