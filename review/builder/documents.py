"""The documents of the case builder: reading a case's documents and the evidence-present
base cases, and saving an edit as a new document version with its provenance record."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import ValidationError
from sqlalchemy import Engine, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from review.builder.edits import EditRecord, edit_document
from review.builder.operator import span_at
from review.core import clearance
from review.core.errors import InputError, PermissionDenied
from review.core.identity import Actor, Permission, require
from review.core.taxonomy import Taxonomy
from review.corpus.corpus import insert_version
from review.corpus.docformat import DocumentIn
from storage import changes
from storage.db import count_upto, read_session
from storage.models import (
    Case,
    CaseDocument,
    CaseEdit,
    CaseFamily,
    Document,
    utcnow,
)

__all__ = [
    "BaseCaseRow",
    "CaseDocText",
    "SavedEdit",
    "add_edit",
    "case_documents",
    "copy_ids",
    "count_base_cases",
    "count_base_cases_upto",
    "doc_dict",
    "get_document",
    "insert_document",
    "latest_version",
    "list_base_cases",
    "new_group",
    "parse_ref",
    "ref_of",
    "save_edit",
    "save_edits",
    "with_new_ids",
]


T = TypeVar("T")


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
            out.append(
                CaseDocText(
                    d.id,
                    f"{d.doc_key}@{d.version}",
                    d.doc_key,
                    d.version,
                    clearance.title(actor, d.title, d.access_scope),
                    d.body if clearance.may_see_document(actor, d.access_scope) else None,
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


def count_base_cases(engine: Engine, text: str = "", also: Sequence[Any] = ()) -> int:
    with read_session(engine) as s:
        return int(s.scalar(select(func.count(Case.id)).where(*_base_conditions(text), *also)) or 0)


def count_base_cases_upto(
    engine: Engine, text: str, limit: int, also: Sequence[Any] = ()
) -> tuple[int, bool]:
    """:func:`count_base_cases` counted as far as ``limit`` (storage.db.count_upto)."""
    with read_session(engine) as s:
        return count_upto(s, select(Case.id).where(*_base_conditions(text), *also), limit)


def list_base_cases(
    engine: Engine,
    text: str = "",
    page: int = 1,
    page_size: int = 50,
    also: Sequence[Any] = (),
    *,
    viewer: Actor | None = None,
) -> list[BaseCaseRow]:
    """Evidence-present cases expecting an answer: the starting points of variants (those
    ``also`` admits); for a ``viewer`` the questions as they may see them."""
    page = max(page, 1)
    with read_session(engine) as s:
        rows = s.execute(
            select(Case.id, Case.key, CaseFamily.key.label("family"), Case.question)
            .outerjoin(CaseFamily, CaseFamily.id == Case.family_id)
            .where(*_base_conditions(text), *also)
            .order_by(Case.id)
            .limit(page_size)
            .offset((page - 1) * page_size)
        ).all()
        secret = clearance.restricted_cases(s, [r.id for r in rows]) if viewer else frozenset()
    return [
        BaseCaseRow(
            r.id,
            r.key,
            r.family,
            r.question if viewer is None else clearance.shown(viewer, r.question, r.id in secret),
        )
        for r in rows
    ]


# ------------------------------------------------------------------------------------------
# Writing: documents and provenance


def doc_dict(d: Document) -> dict[str, Any]:
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


def ref_of(d: Document) -> str:
    return f"{d.doc_key}@{d.version}"


def get_document(s: Session, key: str, version: int) -> Document | None:
    return s.scalar(select(Document).where(Document.doc_key == key, Document.version == version))


def parse_ref(ref: str) -> tuple[str, int]:
    key, _, ver = ref.strip().partition("@")
    if not key or not ver.isdigit():
        raise InputError(f"{ref!r} is not a document reference like POL-REFUND@2")
    return key, int(ver)


def copy_ids(s: Session, doc_key: str, count: int) -> list[str]:
    """The next free ``<doc_key>-CF-<n>`` ids."""
    prefix = f"{doc_key[:100]}-CF-"
    pattern = re.compile(re.escape(prefix) + r"(\d+)")
    existing = s.scalars(
        select(Document.doc_key).where(Document.doc_key.startswith(prefix, autoescape=True))
    )
    numbers = [int(m.group(1)) for k in existing if (m := pattern.fullmatch(k))]
    n = max(numbers, default=0)
    return [f"{prefix}{n + i}" for i in range(1, count + 1)]


def latest_version(s: Session, key: str) -> int:
    return int(s.scalar(select(func.max(Document.version)).where(Document.doc_key == key)) or 0)


def insert_document(
    s: Session, actor: Actor, tax: Taxonomy, data: Mapping[str, Any], source: str
) -> Document:
    """Validate and add one new document version (id and version must be free)."""
    ref = f"{data.get('doc_id')}@{data.get('version')}"
    try:
        doc = DocumentIn.model_validate(dict(data))
    except ValidationError as exc:
        why = "; ".join(
            f"field {'.'.join(str(x) for x in e['loc']) or '?'}: {e['msg']}" for e in exc.errors()
        )
        raise InputError(f"{ref}: the derived document is not valid: {why}") from None
    except ValueError as exc:
        raise InputError(f"{ref}: the derived document is not valid: {exc}") from None
    problems = doc.check_vocabulary(tax)
    if problems:
        raise InputError(f"{ref}: field {problems[0][0]}: {problems[0][1]}")
    if get_document(s, doc.doc_id, doc.version) is not None:
        raise InputError(f"{ref} already exists; choose another document id")
    return insert_version(s, actor, doc, source=source, link_previous=True)


def add_edit(
    s: Session,
    actor: Actor,
    record: EditRecord,
    *,
    document_id: int | None,
    case_id: int | None,
    extra_refs: Sequence[str] = (),
    group: str | None = None,
    at: dt.datetime | None = None,
) -> CaseEdit:
    """One provenance row (and its change-log entry); ``group`` and ``at`` are shared by the
    rows of one edit of several documents (see :func:`new_group`)."""
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
        created_at=at or utcnow(),
        edit_group=group,
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
            "group": group,
        },
    )
    return row


def new_group() -> str:
    """A fresh edit-group id: the provenance rows of one action share it."""
    return uuid.uuid4().hex


def _source_for_edit(s: Session, actor: Actor, ref: str) -> Document:
    key, version = parse_ref(ref)
    doc = get_document(s, key, version)
    if doc is None:
        raise InputError(f"document {ref} does not exist")
    if not clearance.may_see_document(actor, doc.access_scope):
        raise PermissionDenied("this document is restricted; only users with clearance may edit it")
    return doc


def with_new_ids(s: Session, step: Callable[[], T]) -> T:
    """Run ``step``, a write that allocates new keys, in a savepoint of the caller's
    transaction; when a concurrent writer took the same key first (PostgreSQL, where the
    allocation is not serialised) the savepoint is rolled back and ``step`` re-run: it reads
    the keys again and sees the other writer's."""
    for attempt in range(3):
        try:
            with s.begin_nested():
                return step()
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
    s: Session,
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
    group: str | None = None,
    at: dt.datetime | None = None,
) -> SavedEdit:
    """Apply an operator to ``source_ref`` and store the result with its provenance row.

    The result is a new document ``<ID>-CF-<n>`` (or ``new_doc_id``), or, with
    ``as_new_version``, the next version of the source (which must then be its newest
    version). ``relocate_answer`` also stores its restricted document. Nothing is written when
    the operator refuses. Inside the caller's transaction, which it does not commit.
    """
    require(actor, Permission.edit_corpus)

    return with_new_ids(
        s,
        lambda: _save_edit(
            s,
            actor,
            tax,
            source_ref,
            operator,
            (start, end),
            params,
            as_new_version,
            new_doc_id,
            (group, at),
        ),
    )


def save_edits(
    s: Session,
    actor: Actor,
    tax: Taxonomy,
    spans: Sequence[tuple[str, int, int]],
    operator: str,
    params: Mapping[str, object],
    *,
    as_new_version: bool = False,
) -> list[SavedEdit]:
    """One edit of several documents (``spans``: reference, start, end of each), saved as
    :func:`save_edit` saves one: a derived document and a provenance row each, all with the
    same operator, params, author, time and edit group. Nothing is saved when any is refused
    (the caller's transaction is rolled back); the refusal names the document."""
    require(actor, Permission.edit_corpus)
    refs = [ref for ref, _a, _b in spans]
    if len(set(refs)) != len(refs):
        raise InputError("a document is listed twice; edit each document once")
    for ref in refs:  # every document readable before anything is written
        _source_for_edit(s, actor, ref)
    group, at = new_group(), utcnow()
    out: list[SavedEdit] = []
    for ref, start, end in spans:
        try:
            out.append(
                save_edit(
                    s,
                    actor,
                    tax,
                    ref,
                    operator,
                    start,
                    end,
                    params,
                    as_new_version=as_new_version,
                    group=group,
                    at=at,
                )
            )
        except InputError as exc:
            raise InputError(f"{ref}: {exc}") if len(spans) > 1 else exc from None
    return out


def _save_edit(
    s: Session,
    actor: Actor,
    tax: Taxonomy,
    source_ref: str,
    operator: str,
    span_bounds: tuple[int, int],
    params: Mapping[str, object],
    as_new_version: bool,
    new_doc_id: str | None,
    grouped: tuple[str | None, dt.datetime | None] = (None, None),
) -> SavedEdit:
    start, end = span_bounds
    src = _source_for_edit(s, actor, source_ref)
    span = span_at(src.body, start, end, "position" if start == end else "selection")
    ids = copy_ids(s, src.doc_key, 2)
    if as_new_version:
        latest = latest_version(s, src.doc_key)
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
    base = doc_dict(src)
    data = {
        **base,
        "doc_id": target,
        "version": version,
        "body": result.text,
        "superseded_by": None,
    }
    data.update(result.metadata)
    row = insert_document(s, actor, tax, data, f"case builder: {operator} on {ref_of(src)}")
    extras: list[str] = []
    extra_ids = [i for i in ids if i != target] if not as_new_version else ids
    for k, extra in enumerate(result.extra_documents):
        eid = extra_ids[k] if k < len(extra_ids) else f"{target}-R{k + 1}"
        insert_document(
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
            f"case builder: {operator} on {ref_of(src)}",
        )
        extras.append(f"{eid}@1")
    edit = add_edit(
        s,
        actor,
        record,
        document_id=row.id,
        case_id=None,
        extra_refs=extras,
        group=grouped[0] or new_group(),
        at=grouped[1],
    )
    return SavedEdit(edit.id, row.id, ref, tuple(extras))
