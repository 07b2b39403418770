"""Corpus services: import, versions, search with server-side pagination, access checks."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy import ColumnElement, Engine, func, or_, select
from sqlalchemy.orm import Session

from review.core import clearance, readable
from review.core.errors import InputError, PermissionDenied
from review.core.identity import Actor, Permission, require
from review.core.taxonomy import Taxonomy
from review.corpus import restricted_traces
from review.corpus.docformat import DocumentIn, iter_jsonl, parse_markdown
from storage import changes
from storage.db import one_of, read_session, run_write
from storage.models import Document

DOC_SUFFIXES = (".md", ".markdown", ".txt", ".jsonl")


@dataclass(frozen=True)
class DocumentView:
    id: int
    doc_key: str
    version: int
    title: str
    body: str
    effective_date: dt.date | None
    superseded_by: str | None
    authority: str
    owner: str
    access_scope: str
    jurisdiction: str
    is_current: bool
    source: str | None
    created_at: dt.datetime
    created_by: str | None

    @property
    def ref(self) -> str:
        return f"{self.doc_key}@{self.version}"


def _view(d: Document) -> DocumentView:
    return DocumentView(
        d.id,
        d.doc_key,
        d.version,
        d.title,
        d.body,
        d.effective_date,
        d.superseded_by,
        d.authority,
        d.owner,
        d.access_scope,
        d.jurisdiction,
        d.is_current,
        d.source,
        d.created_at,
        d.created_by,
    )


@dataclass(frozen=True)
class ImportReport:
    added: int
    unchanged: int
    files: int

    def summary(self) -> str:
        return (
            f"{readable.count(self.added, 'document version')} added, {self.unchanged} already "
            "present "
            f"unchanged, from {readable.count(self.files, 'file')}"
        )


def _require_clearance_for(s: Session, actor: Actor, keys: Iterable[str]) -> None:
    """Adding a version to a document that has a restricted version needs clearance: without
    it the author could neither see what they replace nor read back what they wrote."""
    if clearance.cleared(actor):
        return
    wanted = sorted(set(keys))
    if not wanted:
        return
    hidden = s.scalars(
        select(Document.doc_key)
        .where(
            one_of(s, Document.doc_key, wanted),
            Document.access_scope == clearance.RESTRICTED_SCOPE,
        )
        .distinct()
        .order_by(Document.doc_key)
    ).all()
    if hidden:
        raise PermissionDenied(
            f"{hidden[0]} is restricted: only users with clearance may add versions of it; "
            "nothing was written"
        )


# ---------------------------------------------------------------------------------------
# Reading files (pure: no database)


def read_files(paths: Iterable[Path], tax: Taxonomy) -> tuple[list[DocumentIn], int]:
    """Parse every file under ``paths`` (files or folders). Any error aborts the whole read."""
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(sorted(f for f in p.rglob("*") if f.suffix.lower() in DOC_SUFFIXES))
        elif p.exists():
            files.append(p)
        else:
            raise InputError(f"{p}: no such file or folder")
    docs: list[DocumentIn] = []
    for f in files:
        try:
            text = f.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise InputError(f"{f}: line 1: the file is not UTF-8 text") from None
        docs.extend(parse_upload(f.name, text, tax, source=str(f)))
    return docs, len(files)


def parse_upload(
    name: str, text: str, tax: Taxonomy, source: str | None = None
) -> list[DocumentIn]:
    """Parse one uploaded file by its extension."""
    source = source or name
    suffix = Path(name).suffix.lower()
    if suffix == ".jsonl":
        return list(iter_jsonl(text.splitlines(), source, tax))
    if suffix in (".md", ".markdown", ".txt"):
        return [parse_markdown(text, source, tax)]
    raise InputError(f"{source}: unsupported file type {suffix!r}; use .md, .txt or .jsonl")


def check_batch(docs: Sequence[DocumentIn]) -> None:
    seen: dict[tuple[str, int], int] = {}
    for i, d in enumerate(docs):
        key = (d.doc_id, d.version)
        if key in seen:
            raise InputError(
                f"{d.doc_id}@{d.version} appears twice in this import (items {seen[key] + 1} "
                f"and {i + 1}); each version must be unique"
            )
        seen[key] = i


# ---------------------------------------------------------------------------------------
# Writing


def check_superseded_by(
    s: Session, doc: DocumentIn, batch: Collection[tuple[str, int]] = ()
) -> None:
    """``doc.superseded_by`` names a version in the corpus or in ``batch`` (the versions
    imported with it), never ``doc`` itself; ``ID`` without ``@N`` names any version of ID."""
    ref = doc.superseded_by
    if ref is None:
        return
    key, _, ver = ref.partition("@")
    version = int(ver) if ver else None
    if (key, version) == (doc.doc_id, doc.version):
        raise InputError(f"{doc.where('superseded_by')}: a version cannot supersede itself")
    if version is not None:
        found = (key, version) in batch or s.scalar(
            select(Document.id).where(Document.doc_key == key, Document.version == version)
        )
    else:
        found = any(k == key for k, _ in batch) or s.scalar(
            select(Document.id).where(Document.doc_key == key).limit(1)
        )
    if not found:
        raise InputError(
            f"{doc.where('superseded_by')}: {ref!r} names no document version in the corpus "
            "or in this import; nothing was written"
        )


def insert_version(
    s: Session,
    actor: Actor,
    doc: DocumentIn,
    *,
    source: str,
    link_previous: bool,
    before: dict[str, Any] | None = None,
    batch: Collection[tuple[str, int]] = (),
) -> Document:
    """The one writer of a document version, inside the caller's transaction: the row (its
    id and version must be free, its ``superseded_by`` must name a version in the corpus or
    in ``batch``), which version of the id is current (the newest), the change log entry, the
    restricted flags of the traces quoting the document (recomputed before the transaction
    commits, review.corpus.restricted_traces), and, with ``link_previous``, ``superseded_by`` on
    the version it replaces (unless that one is already marked, or the new version says it is
    the older one)."""
    check_superseded_by(s, doc, batch)
    if s.scalar(
        select(Document.id).where(Document.doc_key == doc.doc_id, Document.version == doc.version)
    ):
        raise InputError(f"{doc.doc_id}@{doc.version} already exists")
    latest = int(
        s.scalar(select(func.max(Document.version)).where(Document.doc_key == doc.doc_id)) or 0
    )
    # the traces quoting this document follow in this transaction (before it commits)
    restricted_traces.document_added(s, doc.doc_id, doc.access_scope, doc.title)
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
        source=(source or None) and source[:500],
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
            if (
                link_previous
                and old.version == latest
                and not old.superseded_by
                and doc.superseded_by != f"{old.doc_key}@{old.version}"
            ):
                old.superseded_by = f"{doc.doc_id}@{doc.version}"
    changes.record(
        s,
        actor.email,
        "create",
        "document",
        row.id,
        before,
        {**changes.snapshot(row), "body": f"<{len(doc.body)} characters>"},
    )
    return row


def import_documents(
    engine: Engine, actor: Actor, docs: Sequence[DocumentIn], files: int = 1, source: str = ""
) -> ImportReport:
    """Add document versions in one transaction: all land, or none (with the reason).

    Re-importing an identical version is a no-op; the same id and version with different
    content is refused (add a new version instead).
    """
    require(actor, Permission.edit_corpus)
    check_batch(docs)

    def work(s: Session) -> ImportReport:
        _require_clearance_for(s, actor, (d.doc_id for d in docs))
        batch = {(d.doc_id, d.version) for d in docs}
        for d in docs:  # every reference is checked before anything is written
            check_superseded_by(s, d, batch)
        added = unchanged = 0
        for d in docs:
            existing = s.scalar(
                select(Document).where(Document.doc_key == d.doc_id, Document.version == d.version)
            )
            if existing is not None:
                if existing.sha256 == d.sha256() and existing.title == d.title:
                    unchanged += 1
                    continue
                raise InputError(
                    f"{d.doc_id}@{d.version} already exists with different content; "
                    f"import it as version {d.version + 1} (or higher) to keep both"
                )
            insert_version(s, actor, d, source=source, link_previous=False, batch=batch)
            added += 1
        return ImportReport(added=added, unchanged=unchanged, files=files)

    return run_write(engine, work)


def add_version(
    engine: Engine, actor: Actor, doc_key: str, based_on_version: int, new: DocumentIn
) -> DocumentView:
    """Save ``new`` as the next version of ``doc_key``; the old versions are kept.

    ``based_on_version`` is the version the editor started from: if someone added a newer
    version meanwhile, the write is refused naming who.
    """
    require(actor, Permission.edit_corpus)

    def work(s: Session) -> DocumentView:
        _require_clearance_for(s, actor, [doc_key])
        latest = s.scalar(
            select(Document)
            .where(Document.doc_key == doc_key)
            .order_by(Document.version.desc())
            .limit(1)
        )
        if latest is None:
            raise InputError(f"document {doc_key} does not exist")
        if latest.version != based_on_version:
            raise changes.StaleWriteError(
                f"{doc_key} has a newer version {latest.version} added by "
                f"{latest.created_by or 'another user'} at "
                f"{latest.created_at:%Y-%m-%d %H:%M UTC}; you edited version "
                f"{based_on_version}. Nothing was saved: reload and apply your edit again."
            )
        if (
            new.sha256() == latest.sha256
            and new.title == latest.title
            and (new.effective_date, new.access_scope, new.authority, new.jurisdiction, new.owner)
            == (
                latest.effective_date,
                latest.access_scope,
                latest.authority,
                latest.jurisdiction,
                latest.owner,
            )
        ):
            raise InputError("nothing changed: the new version would equal the current one")
        row = insert_version(
            s,
            actor,
            new.model_copy(update={"doc_id": doc_key, "version": latest.version + 1}),
            source="edited in the workbench",
            link_previous=True,
            before={"previous": f"{doc_key}@{latest.version}"},
        )
        s.refresh(row)
        return _view(row)

    return run_write(engine, work)


# ---------------------------------------------------------------------------------------
# Reading


@dataclass(frozen=True)
class DocFilter:
    text: str = ""
    authority: str | None = None
    access_scope: str | None = None
    jurisdiction: str | None = None
    current_only: bool = True


def _conditions(actor: Actor, f: DocFilter) -> list[ColumnElement[bool]]:
    conds: list[ColumnElement[bool]] = []
    if not clearance.cleared(actor):
        conds.append(Document.access_scope != clearance.RESTRICTED_SCOPE)
    if f.current_only:
        conds.append(Document.is_current.is_(True))
    if f.authority:
        conds.append(Document.authority == f.authority)
    if f.access_scope:
        conds.append(Document.access_scope == f.access_scope)
    if f.jurisdiction:
        conds.append(Document.jurisdiction == f.jurisdiction)
    text = f.text.strip()
    if text:
        like = f"%{text.replace('%', '').replace('_', '')}%"
        conds.append(
            or_(Document.title.ilike(like), Document.doc_key.ilike(like), Document.body.ilike(like))
        )
    return conds


@dataclass(frozen=True)
class DocRow:
    id: int
    ref: str
    title: str
    version: int
    effective_date: dt.date | None
    authority: str
    access_scope: str
    jurisdiction: str
    owner: str
    is_current: bool


def count_documents(engine: Engine, actor: Actor, f: DocFilter) -> int:
    with read_session(engine) as s:
        return int(s.scalar(select(func.count(Document.id)).where(*_conditions(actor, f))) or 0)


def search_documents(
    engine: Engine, actor: Actor, f: DocFilter, page: int = 1, page_size: int = 25
) -> list[DocRow]:
    """One page of matching documents (restricted ones only with clearance)."""
    page = max(page, 1)
    with read_session(engine) as s:
        rows = s.execute(
            select(
                Document.id,
                Document.doc_key,
                Document.version,
                Document.title,
                Document.effective_date,
                Document.authority,
                Document.access_scope,
                Document.jurisdiction,
                Document.owner,
                Document.is_current,
            )
            .where(*_conditions(actor, f))
            .order_by(Document.doc_key, Document.version.desc())
            .limit(page_size)
            .offset((page - 1) * page_size)
        ).all()
    return [
        DocRow(
            r.id,
            f"{r.doc_key}@{r.version}",
            r.title,
            r.version,
            r.effective_date,
            r.authority,
            r.access_scope,
            r.jurisdiction,
            r.owner,
            r.is_current,
        )
        for r in rows
    ]


def get_document(engine: Engine, actor: Actor, doc_id: int) -> DocumentView:
    with read_session(engine) as s:
        d = s.get(Document, doc_id)
        if d is None:
            raise InputError(f"document {doc_id} does not exist")
        if not clearance.may_see_document(actor, d.access_scope):
            raise PermissionDenied(
                "this document is restricted; it is shown only to users with clearance"
            )
        return _view(d)


def find_document(engine: Engine, actor: Actor, ref: str) -> DocumentView | None:
    """Look up ``KEY`` (current version) or ``KEY@VERSION``."""
    key, _, ver = ref.partition("@")
    with read_session(engine) as s:
        stmt = select(Document).where(Document.doc_key == key)
        stmt = (
            stmt.where(Document.version == int(ver))
            if ver.isdigit()
            else stmt.where(Document.is_current.is_(True))
        )
        d = s.scalar(stmt)
        if d is None or not clearance.may_see_document(actor, d.access_scope):
            return None
        return _view(d)


def version_history(engine: Engine, actor: Actor, doc_key: str) -> list[DocRow]:
    with read_session(engine) as s:
        stmt = select(Document).where(Document.doc_key == doc_key).order_by(Document.version.desc())
        out = []
        for d in s.scalars(stmt):
            if not clearance.may_see_document(actor, d.access_scope):
                continue
            out.append(
                DocRow(
                    d.id,
                    f"{d.doc_key}@{d.version}",
                    d.title,
                    d.version,
                    d.effective_date,
                    d.authority,
                    d.access_scope,
                    d.jurisdiction,
                    d.owner,
                    d.is_current,
                )
            )
        return out


def facet_values(engine: Engine) -> dict[str, list[str]]:
    """Distinct values for the filters (small: grouped in SQL)."""
    with read_session(engine) as s:
        return {
            col: [
                v
                for (v,) in s.execute(
                    select(getattr(Document, col)).distinct().order_by(getattr(Document, col))
                )
            ]
            for col in ("authority", "access_scope", "jurisdiction")
        }


# ---------------------------------------------------------------------------------------
# Tables of the Corpus page


def _term(tax: Taxonomy | None, section: str, key: str | None) -> str:
    """A taxonomy key by its label when the taxonomy is given (the key otherwise)."""
    return (key or "—") if tax is None else readable.term(tax, section, key)


def metadata_frame(
    doc: DocumentView, tax: Taxonomy | None = None, names: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """A document version's metadata, one field per row; with ``tax`` and ``names`` keys
    read as their taxonomy labels and people as their names."""
    by = (doc.created_by or "—") if names is None else readable.person(doc.created_by, names)
    return pd.DataFrame(
        [
            ("id", doc.doc_key),
            ("version", str(doc.version)),
            ("effective date", str(doc.effective_date or "—")),
            ("superseded by", doc.superseded_by or "—"),
            ("authority", _term(tax, "authorities", doc.authority)),
            ("owner", doc.owner),
            ("access scope", _term(tax, "access_scopes", doc.access_scope)),
            ("jurisdiction", _term(tax, "jurisdictions", doc.jurisdiction)),
            ("added", f"{readable.when(doc.created_at)} by {by}"),
        ],
        columns=["field", "value"],
    )


def versions_frame(history: list[DocRow], link: Callable[[int], str]) -> pd.DataFrame:
    """The versions of a document; ``link`` gives the page address of one version."""
    return pd.DataFrame(
        [
            {
                "version": h.version,
                "effective": h.effective_date,
                "current": h.is_current,
                "open": link(h.id),
            }
            for h in history
        ],
        columns=["version", "effective", "current", "open"],
    )


def results_frame(
    rows: list[DocRow], link: Callable[[int], str], tax: Taxonomy | None = None
) -> pd.DataFrame:
    """One page of search results; ``link`` gives the page address of a document; with
    ``tax`` authority, access and jurisdiction read as their taxonomy labels."""
    return pd.DataFrame(
        [
            {
                "open": link(r.id),
                "document": r.ref,
                "title": r.title,
                "effective": r.effective_date,
                "authority": _term(tax, "authorities", r.authority),
                "access": _term(tax, "access_scopes", r.access_scope),
                "jurisdiction": _term(tax, "jurisdictions", r.jurisdiction),
                "owner": r.owner,
                "current": r.is_current,
            }
            for r in rows
        ],
        columns=[
            "open", "document", "title", "effective", "authority", "access", "jurisdiction",
            "owner", "current",
        ],
    )  # fmt: skip
