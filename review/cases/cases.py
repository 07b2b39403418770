"""Evaluation cases: the canonical JSONL format, import/export, listing, create and edit.

A case is a question, the claims an answer must establish, the exact documents available to
retrieval (each visible or forbidden to the test identity, with its role in the case), the
identity's scopes, the expected decision with reason codes, slice tags, split and family.
"""

from __future__ import annotations

# Long module: the case record's validation (CaseIn), its import, listing, reading and export
# share one query, one filter (with the blind rule's and the clearance rule's conditions) and
# one record shape; split, each half would import the other's private parts.
import dataclasses
import datetime as dt
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from sqlalchemy import ColumnElement, Engine, Select, exists, func, select
from sqlalchemy.orm import Session, selectinload

from review.cases import agreement_counts, agreement_groups
from review.cases.agreed import Agreed, agreed_labels
from review.core import clearance, readable
from review.core.errors import InputError, PermissionDenied
from review.core.identity import Actor, Permission, require
from review.core.records import JsonProblem, json_lines, parse_json, validate_record
from review.core.taxonomy import Taxonomy
from review.core.terms import CaseStatus
from storage import changes
from storage.db import one_of, read_session
from storage.models import (
    Case,
    CaseClaim,
    CaseDocument,
    CaseFamily,
    CaseSlice,
    Counter,
    Document,
    SplitLock,
    utcnow,
)

KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,119}$")
#: A BCP 47 language tag, simplified: a 2-3 letter language, then up to three subtags
LANGUAGE_RE = re.compile(r"^[A-Za-z]{2,3}(?:-[A-Za-z0-9]{1,8}){0,3}$")


#: Limits of a case's free texts and lists, refused at import and in the form with the line
#: and field (the demo's longest: 3 claims of 147 characters, notes of 190 characters)
MAX_CLAIMS = 30
MAX_CLAIM_CHARS = 2000
MAX_NOTES_CHARS = 10_000
MAX_LIST = 50  # documents, reason codes, slices, scopes
_Term = Annotated[str, Field(max_length=60)]  # a vocabulary key (checked against the taxonomy)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class IdentityIn(_Strict):
    name: str = Field(min_length=1, max_length=200)
    scopes: list[_Term] = Field(max_length=MAX_LIST)


class CaseDocIn(_Strict):
    doc_id: str = Field(max_length=120)
    version: int = Field(ge=1, le=2**31 - 1)  # the database's integer columns hold no more
    visibility: _Term
    role: _Term


class AgreedIn(_Strict):
    decision: str = Field(max_length=40)
    reason_codes: list[_Term] = Field(default_factory=list, max_length=MAX_LIST)
    by: Literal["adjudication", "annotators"]


class CaseIn(_Strict):
    """One case in the canonical exchange format (one JSON object per line)."""

    key: str | None = None
    question: str = Field(min_length=3, max_length=4000)
    required_claims: list[Annotated[str, Field(max_length=MAX_CLAIM_CHARS)]] = Field(
        default_factory=list, max_length=MAX_CLAIMS
    )
    #: the kind of fact a required claim states, by the claim's text (a taxonomy claim_kinds
    #: key, which the policy's freshness rules may name); a claim left out has none
    claim_kinds: dict[str, Annotated[str, Field(max_length=60)] | None] = Field(
        default_factory=dict, max_length=MAX_CLAIMS
    )
    identity: IdentityIn
    documents: list[CaseDocIn] = Field(default_factory=list, max_length=MAX_LIST)
    expected_decision: _Term
    #: the wording key the case expects (R1, R2, R3, C1, F1, E1, ...); absent: the one the
    #: taxonomy suggests (see :meth:`with_suggested_message`)
    expected_message: str | None = Field(default=None, max_length=40)
    reason_codes: list[_Term] = Field(default_factory=list, max_length=MAX_LIST)
    category: _Term
    slices: list[_Term] = Field(default_factory=list, max_length=MAX_LIST)
    split: _Term
    family: str | None = None
    evidence_state: _Term | None = None
    #: the question's language, a BCP 47 tag (en, de, pt-BR); None: not stated
    language: str | None = Field(default=None, max_length=35)
    status: _Term = CaseStatus.ready
    notes: str = Field(default="", max_length=MAX_NOTES_CHARS)
    #: the agreed label at export time (latest adjudication, else unanimous annotators), for
    #: reading beside the author's expected decision; ignored on import (labels are not
    #: imported this way)
    agreed: AgreedIn | None = None

    @field_validator("key", "family")
    @classmethod
    def _key(cls, v: str | None) -> str | None:
        if v in (None, ""):
            return None
        assert v is not None
        if not KEY_RE.match(v):
            raise ValueError("must be letters, digits, '.', '_' or '-' (at most 120 characters)")
        return v

    @field_validator("language")
    @classmethod
    def _language(cls, v: str | None) -> str | None:
        if v is None or not v.strip():
            return None
        tag = v.strip()
        if not LANGUAGE_RE.match(tag):
            raise ValueError("must be a language tag such as en, de or pt-BR (BCP 47)")
        head, *rest = tag.split("-")
        return "-".join([head.lower(), *rest])

    @field_validator("claim_kinds")
    @classmethod
    def _kinds(cls, v: dict[str, str | None]) -> dict[str, str | None]:
        """Claims and kinds trimmed; a claim whose kind is null or blank has none."""
        out: dict[str, str | None] = {}
        for claim, kind in v.items():
            if kind is not None and kind.strip():
                out[claim.strip()] = kind.strip()
        return out

    @field_validator("required_claims")
    @classmethod
    def _claims(cls, v: list[str]) -> list[str]:
        out = [c.strip() for c in v]
        if any(not c for c in out):
            raise ValueError("a required claim is empty")
        return out

    def problems(self, tax: Taxonomy) -> list[tuple[str, str]]:
        """Vocabulary and consistency problems as (field, reason)."""
        out: list[tuple[str, str]] = []

        def one_of(field: str, value: str | None, section: dict[str, Any]) -> None:
            if value is not None and value not in section:
                out.append((field, f"{value!r} is not one of: {', '.join(section)}"))

        one_of("expected_decision", self.expected_decision, tax.decisions)
        one_of("category", self.category, tax.categories)
        one_of("split", self.split, tax.splits)
        one_of("status", self.status, tax.case_statuses)
        one_of("evidence_state", self.evidence_state, tax.evidence_states)
        out += self._kind_problems(tax)
        for i, code in enumerate(self.reason_codes):
            one_of(f"reason_codes.{i}", code, tax.case_reason_codes())
        for i, sl in enumerate(self.slices):
            one_of(f"slices.{i}", sl, tax.slices)
        for i, sc in enumerate(self.identity.scopes):
            one_of(f"identity.scopes.{i}", sc, tax.access_scopes)
        for i, d in enumerate(self.documents):
            if d.visibility not in ("visible", "forbidden"):
                out.append(
                    (
                        f"documents.{i}.visibility",
                        f"{d.visibility!r} is not one of: visible, forbidden",
                    )
                )
            one_of(f"documents.{i}.role", d.role, tax.document_roles)
        if len(set(self.reason_codes)) != len(self.reason_codes):
            out.append(("reason_codes", "a reason code is listed twice"))
        refs = [(d.doc_id, d.version) for d in self.documents]
        if len(set(refs)) != len(refs):
            out.append(("documents", "a document version is listed twice"))
        if self.expected_decision in tax.decisions:
            answers = tax.decisions[self.expected_decision].answers
            if not answers and not self.reason_codes:
                out.append(
                    (
                        "reason_codes",
                        f"a case expecting {self.expected_decision!r} "
                        "needs at least one reason code saying why",
                    )
                )
            if self.expected_decision == "answer" and set(self.reason_codes) - {"false_premise"}:
                out.append(("reason_codes", "an 'answer' case may only carry false_premise"))
        if self.evidence_state and not self.family:
            out.append(("evidence_state", "an evidence state needs a family"))
        out += self._category_problems(tax)
        return out

    def _kind_problems(self, tax: Taxonomy) -> list[tuple[str, str]]:
        """A claim kind names a required claim of the case and a kind the taxonomy defines."""
        out: list[tuple[str, str]] = []
        index = {c: i for i, c in enumerate(self.required_claims)}
        for claim, kind in self.claim_kinds.items():
            i = index.get(claim)
            if i is None:
                short = claim if len(claim) <= 60 else claim[:59] + "…"
                out.append(("claim_kinds", f"{short!r} is not one of the required_claims"))
            elif kind not in tax.claim_kinds:
                known = ", ".join(tax.claim_kinds) or "(the taxonomy defines no claim_kinds)"
                out.append((f"claim_kinds.{i}", f"{kind!r} is not one of: {known}"))
        return out

    def kind_of(self, claim: str) -> str | None:
        """The kind given to ``claim`` (None: none)."""
        return self.claim_kinds.get(claim)

    def _category_problems(self, tax: Taxonomy) -> list[tuple[str, str]]:
        """A category has one agreed behaviour. Expecting another needs a note, and
        a case expecting a non-answer names the wording it expects."""
        out: list[tuple[str, str]] = []
        cat = tax.categories.get(self.category)
        term = tax.decisions.get(self.expected_decision)
        if cat is None or term is None:
            return out
        if self.expected_decision != cat.default_decision and not self.notes.strip():
            out.append(
                (
                    "notes",
                    f"category {self.category!r} expects {cat.default_decision!r} by default; "
                    f"say in the notes why this case expects {self.expected_decision!r}",
                )
            )
        allowed = term.messages
        if self.expected_message is not None and self.expected_message not in allowed:
            listed = ", ".join(allowed) or "none"
            out.append(
                (
                    "expected_message",
                    f"{self.expected_message!r} is not a message for "
                    f"{self.expected_decision!r} (one of: {listed})",
                )
            )
        elif (
            self.expected_message is None
            and allowed
            and not term.answers
            and self.status != CaseStatus.draft
        ):
            out.append(
                (
                    "expected_message",
                    f"a case expecting {self.expected_decision!r} names the wording it expects "
                    f"(one of: {', '.join(allowed)})",
                )
            )
        return out

    def with_suggested_message(self, tax: Taxonomy) -> CaseIn:
        """The case with the wording key the taxonomy suggests when it names none (its
        category's default, else its reasons' message, else the decision's only one)."""
        if self.expected_message is not None:
            return self
        key = tax.expected_message(self.expected_decision, self.category, self.reason_codes)
        return self if key is None else self.model_copy(update={"expected_message": key})


def validate_case(data: Any, source: str, line: int, tax: Taxonomy) -> CaseIn:
    case = validate_record(CaseIn, data, f"{source}: line {line}").with_suggested_message(tax)
    problems = case.problems(tax)
    if problems:
        fld, msg = problems[0]
        raise InputError(f"{source}: line {line}: field {fld}: {msg}")
    return case


def iter_cases_jsonl(
    lines: Iterable[str], source: str, tax: Taxonomy
) -> Iterator[tuple[int, CaseIn]]:
    for n, _raw, text in json_lines(lines):
        try:
            data = parse_json(text)
        except JsonProblem as exc:
            raise exc.where(f"{source}: line {n}") from None
        yield n, validate_case(data, source, n, tax)


# ---------------------------------------------------------------------------------------
# Writing


def _next_key(s: Session) -> str:
    counter = s.get(Counter, "case_key", with_for_update=True)
    if counter is None:
        counter = Counter(name="case_key", value=0, version=1)
        s.add(counter)
    while True:
        counter.value += 1
        key = f"CASE-{counter.value:04d}"
        if s.scalar(select(Case.id).where(Case.key == key)) is None:
            s.flush()
            return key


def _family(s: Session, key: str | None, actor: Actor, title: str) -> CaseFamily | None:
    if not key:
        return None
    fam = s.scalar(select(CaseFamily).where(CaseFamily.key == key))
    if fam is None:
        fam = CaseFamily(key=key, title=title[:500], created_by=actor.email)
        s.add(fam)
        s.flush()
        changes.record(s, actor.email, "create", "case_family", fam.id, None, changes.snapshot(fam))
    return fam


def _resolve_docs(s: Session, c: CaseIn, where: str) -> list[tuple[CaseDocIn, Document]]:
    out = []
    for i, d in enumerate(c.documents):
        doc = s.scalar(
            select(Document).where(Document.doc_key == d.doc_id, Document.version == d.version)
        )
        if doc is None:
            raise InputError(
                f"{where}field documents.{i}: document {d.doc_id}@{d.version} is not in the "
                "corpus; import it first"
            )
        out.append((d, doc))
    return out


def _apply(s: Session, row: Case, c: CaseIn, actor: Actor, where: str) -> None:
    docs = _resolve_docs(s, c, where)
    if row.id is not None:
        # delete the old children first so unique (case, document) pairs can be re-added
        row.claims.clear()
        row.documents.clear()
        row.slices.clear()
        s.flush()
    row.question = c.question
    row.identity_name = c.identity.name
    row.identity_scopes = list(c.identity.scopes)
    row.expected_decision = c.expected_decision
    row.expected_message = c.expected_message
    row.reason_codes = list(c.reason_codes)
    row.category = c.category
    row.split = c.split
    row.status = c.status
    row.family = _family(s, c.family, actor, c.question)
    row.evidence_state = c.evidence_state
    row.language = c.language
    row.notes = c.notes
    row.claims = [
        CaseClaim(position=i, text=t, kind=c.kind_of(t)) for i, t in enumerate(c.required_claims)
    ]
    row.documents = [
        CaseDocument(position=i, document=doc, visibility=d.visibility, role=d.role)
        for i, (d, doc) in enumerate(docs)
    ]
    row.slices = [CaseSlice(slice=sl) for sl in dict.fromkeys(c.slices)]


def claim_kinds_field(claims: Sequence[CaseClaim]) -> dict[str, Any]:
    """``{"claim_kinds": {text: kind}}`` for the claims given a kind; {} when none is (so a
    record of a case without kinds reads as before)."""
    kinds = {c.text: c.kind for c in claims if c.kind}
    return {"claim_kinds": kinds} if kinds else {}


def to_record(row: Case) -> dict[str, Any]:
    """A stored case in the canonical exchange format."""
    return {
        "key": row.key,
        "question": row.question,
        "required_claims": [c.text for c in row.claims],
        **claim_kinds_field(row.claims),
        "identity": {"name": row.identity_name, "scopes": list(row.identity_scopes)},
        "documents": [
            {
                "doc_id": d.document.doc_key,
                "version": d.document.version,
                "visibility": d.visibility,
                "role": d.role,
            }
            for d in row.documents
        ],
        "expected_decision": row.expected_decision,
        "expected_message": row.expected_message,
        "reason_codes": list(row.reason_codes),
        "category": row.category,
        "slices": sorted(sl.slice for sl in row.slices),
        "split": row.split,
        "family": row.family.key if row.family else None,
        "evidence_state": row.evidence_state,
        "language": row.language,
        "status": row.status,
        "notes": row.notes,
    }


def normalised_case(c: CaseIn) -> dict[str, Any]:
    d = c.model_dump(exclude={"agreed", "claim_kinds"})
    d["slices"] = sorted(dict.fromkeys(d["slices"]))
    kinds = {t: k for t in c.required_claims if (k := c.kind_of(t))}
    if kinds:  # as to_record writes it: left out when no claim has a kind
        d["claim_kinds"] = kinds
    return d


@dataclass(frozen=True)
class CaseImportReport:
    added: int
    unchanged: int

    def summary(self) -> str:
        return (
            f"{readable.count(self.added, 'case')} added, "
            f"{self.unchanged} already present unchanged"
        )


def insert_case(s: Session, actor: Actor, c: CaseIn, where: str = "") -> Case:
    """The one writer of a new case, inside the caller's transaction: the row (its key, or the
    next free CASE-NNNN), its documents, claims, slices and family, and the change-log entry.
    ``where`` prefixes errors (``"file: line 3: "``)."""
    row = Case(key=c.key or _next_key(s), created_by=actor.email, updated_by=actor.email, version=1)
    held = agreement_groups.hold(s)
    _apply(s, row, c, actor, where)
    s.add(row)
    s.flush()
    agreement_groups.settle(s, held)  # a new case has no label: no figure moves
    changes.record(s, actor.email, "create", "case", row.id, None, to_record(row))
    return row


def import_batch_label(source: str, batch: str | None = None) -> str:
    """The import batch new cases are recorded with: ``batch`` when given, else the file's
    name and the time (UTC)."""
    label = " ".join((batch or "").split())
    if not label:
        name = source.replace("\\", "/").rsplit("/", 1)[-1] or "import"
        label = f"{name} {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M}"
    if len(label) > 200:
        raise InputError("the import batch label is longer than 200 characters")
    return label


def import_cases(
    s: Session,
    actor: Actor,
    items: Sequence[tuple[int, CaseIn]],
    source: str,
    *,
    batch: str | None = None,
) -> CaseImportReport:
    """Add cases in the caller's transaction, which it does not commit: all land or none. An
    identical existing case is skipped; an existing key with different content is refused
    (edit it instead). New cases record their import batch (:func:`import_batch_label`), so
    runs can be made on them alone."""
    require(actor, Permission.edit_cases)
    label = import_batch_label(source, batch)
    keys = [c.key for _, c in items if c.key]
    dup = {k for k in keys if keys.count(k) > 1}
    if dup:
        raise InputError(f"{source}: case key {sorted(dup)[0]} appears more than once")

    added = unchanged = 0
    for line, c in items:
        where = f"{source}: line {line}: "
        if c.key:
            existing = s.scalar(case_query().where(Case.key == c.key))
            if existing is not None:
                if to_record(existing) == normalised_case(c):
                    unchanged += 1
                    continue
                raise InputError(
                    f"{where}field key: case {c.key} already exists with different "
                    "content; edit it in the workbench or give the new case another key"
                )
        insert_case(s, actor, c, where).import_batch = label
        added += 1
    return CaseImportReport(added, unchanged)


def import_batches(engine: Engine) -> list[tuple[str, int]]:
    """Every import batch with its number of cases, newest label order."""
    with read_session(engine) as s:
        rows = s.execute(
            select(Case.import_batch, func.count())
            .where(Case.import_batch.is_not(None))
            .group_by(Case.import_batch)
            .order_by(Case.import_batch)
        ).all()
    return [(str(b), int(n)) for b, n in rows]


def _checked(c: CaseIn, tax: Taxonomy) -> CaseIn:
    c = c.with_suggested_message(tax)
    problems = c.problems(tax)
    if problems:
        raise InputError(f"{problems[0][0]}: {problems[0][1]}")
    return c


def create_case(s: Session, actor: Actor, c: CaseIn, tax: Taxonomy) -> int:
    """A new case (the case form's, or one another area makes) inside the caller's
    transaction, which it does not commit: the role and the record are checked, a taken key
    is refused. Returns its id."""
    require(actor, Permission.edit_cases)
    c = _checked(c, tax)
    if c.key and s.scalar(select(Case.id).where(Case.key == c.key)) is not None:
        raise InputError(f"a case with key {c.key} already exists")
    return insert_case(s, actor, c).id


def update_case(
    s: Session, actor: Actor, case_id: int, expected_version: int, c: CaseIn, tax: Taxonomy
) -> int:
    """Save an edit made from ``expected_version`` inside the caller's transaction, which it
    does not commit; a stale edit is refused naming who saved. Returns the new version."""
    require(actor, Permission.edit_cases)
    c = _checked(c, tax)
    row = s.scalar(case_query().where(Case.id == case_id).with_for_update())
    if row is None:
        raise InputError(f"case {case_id} does not exist")
    if row.version != expected_version:
        raise changes.stale_error("case", row.key, expected_version, row)
    if not clearance.may_see(actor, bool(clearance.restricted_cases(s, [row.id]))):
        raise PermissionDenied(
            f"{row.key} relies on a restricted document: only users with clearance may "
            "edit it; nothing was written"
        )
    before = to_record(row)
    if c.split != row.split and s.get(SplitLock, row.id) is not None:
        raise InputError(
            f"the split of {row.key} is frozen: a threshold sign-off relied on it being in "
            f"{row.split!r}. Create a new case instead of moving this one."
        )
    held = agreement_groups.hold(s)
    counts_before = agreement_counts.case_counts(s, [row.id])
    _apply(s, row, c.model_copy(update={"key": row.key}), actor, "")
    # the figures of the case's groups, and the views filtered by slice or category, move
    agreement_counts.move(s, counts_before, agreement_counts.case_counts(s, [row.id]))
    agreement_groups.settle(s, held)
    after = to_record(row)
    if before == after:
        raise InputError("nothing changed")
    row.version = expected_version + 1
    row.updated_at = utcnow()
    row.updated_by = actor.email
    s.flush()
    changes.record(s, actor.email, "update", "case", row.id, before, after)
    return row.version


# ---------------------------------------------------------------------------------------
# Reading


def case_query() -> Select[Case]:
    """A select of cases with everything a case's record reads (claims, documents, slices,
    family) loaded with it."""
    return select(Case).options(
        selectinload(Case.claims),
        selectinload(Case.documents).selectinload(CaseDocument.document),
        selectinload(Case.slices),
        selectinload(Case.family),
    )


@dataclass(frozen=True)
class CaseFilter:
    text: str = ""
    expected_decision: str | None = None
    category: str | None = None
    slice: str | None = None
    split: str | None = None
    status: str | None = None
    family: str | None = None


def filter_conditions(f: CaseFilter, viewer: Actor | None = None) -> list[ColumnElement[bool]]:
    """The WHERE conditions of ``f``; for a ``viewer`` without clearance the text search does
    not look into the question of a case that lists a restricted document (a match would tell
    what its hidden question says)."""
    conds: list[ColumnElement[bool]] = []
    for attr in ("expected_decision", "category", "split", "status"):
        value = getattr(f, attr)
        if value:
            conds.append(getattr(Case, attr) == value)
    if f.slice:
        conds.append(exists().where(CaseSlice.case_id == Case.id, CaseSlice.slice == f.slice))
    if f.family:
        conds.append(Case.family_id.in_(select(CaseFamily.id).where(CaseFamily.key == f.family)))
    text = f.text.strip()
    if text:
        like = f"%{text.replace('%', '').replace('_', '')}%"
        question: ColumnElement[bool] = Case.question.ilike(like)
        if viewer is not None and not clearance.cleared(viewer):
            question = question & ~clearance.lists_restricted_document()
        conds.append(question | Case.key.ilike(like))
    return conds


@dataclass(frozen=True)
class CaseRow:
    id: int
    key: str
    question: str
    expected_decision: str
    category: str
    split: str
    status: str
    family: str | None
    evidence_state: str | None
    slices: tuple[str, ...]
    documents: int
    #: the agreed label's decision (None: no adjudication or agreement yet) and its source
    agreed_decision: str | None = None
    agreed_by: str | None = None
    #: the judgement is withheld (see review.cases.sight)
    blind: bool = False


def count_cases(
    engine: Engine,
    f: CaseFilter,
    also: Sequence[ColumnElement[bool]] = (),
    *,
    viewer: Actor | None = None,
) -> int:
    """How many cases match ``f`` and the conditions ``also`` (for a ``viewer``, as
    :func:`list_cases` finds them)."""
    with read_session(engine) as s:
        conds = [*filter_conditions(f, viewer), *also]
        return int(s.scalar(select(func.count(Case.id)).where(*conds)) or 0)


def list_cases(
    engine: Engine,
    f: CaseFilter,
    page: int = 1,
    page_size: int = 25,
    also: Sequence[ColumnElement[bool]] = (),
    *,
    viewer: Actor | None = None,
) -> list[CaseRow]:
    """One page of cases matching the filter (and the conditions ``also``), with their
    slices and document counts; for a ``viewer`` the question as they may see it (see
    :func:`seen_by`)."""
    conds = [*filter_conditions(f, viewer), *also]
    page = max(page, 1)
    with read_session(engine) as s:
        rows = s.execute(
            select(
                Case.id,
                Case.key,
                Case.question,
                Case.expected_decision,
                Case.category,
                Case.split,
                Case.status,
                CaseFamily.key.label("family"),
                Case.evidence_state,
            )
            .outerjoin(CaseFamily, CaseFamily.id == Case.family_id)
            .where(*conds)
            .order_by(Case.id)
            .limit(page_size)
            .offset((page - 1) * page_size)
        ).all()
        ids = [r.id for r in rows]
        slices: dict[int, list[str]] = {i: [] for i in ids}
        for cid, sl in s.execute(
            select(CaseSlice.case_id, CaseSlice.slice).where(one_of(s, CaseSlice.case_id, ids))
        ):
            slices[cid].append(sl)
        ndocs = dict(
            s.execute(
                select(CaseDocument.case_id, func.count())
                .where(one_of(s, CaseDocument.case_id, ids))
                .group_by(CaseDocument.case_id)
            ).all()
        )
        agreed = agreed_labels(s, ids)
        restricted = clearance.restricted_cases(s, ids) if viewer is not None else frozenset()
    return [
        CaseRow(
            r.id,
            r.key,
            r.question
            if viewer is None
            else clearance.shown(viewer, r.question, r.id in restricted),
            r.expected_decision,
            r.category,
            r.split,
            r.status,
            r.family,
            r.evidence_state,
            tuple(sorted(slices[r.id])),
            int(ndocs.get(r.id, 0)),
            agreed[r.id].decision if r.id in agreed else None,
            agreed[r.id].by if r.id in agreed else None,
        )
        for r in rows
    ]


@dataclass(frozen=True)
class CaseDocView:
    document_id: int
    ref: str
    title: str
    access_scope: str
    effective_date: dt.date | None
    authority: str
    jurisdiction: str
    visibility: str
    role: str
    is_current: bool


@dataclass(frozen=True)
class CaseView:
    id: int
    key: str
    question: str
    required_claims: tuple[str, ...]
    identity_name: str
    identity_scopes: tuple[str, ...]
    documents: tuple[CaseDocView, ...]
    expected_decision: str
    expected_message: str | None
    reason_codes: tuple[str, ...]
    category: str
    slices: tuple[str, ...]
    split: str
    status: str
    family: str | None
    evidence_state: str | None
    notes: str
    version: int
    created_by: str | None
    updated_at: dt.datetime
    updated_by: str | None
    record: dict[str, Any]
    #: the agreed label (None: no adjudication or agreement yet)
    agreed: Agreed | None = None
    #: the judgement is withheld (see review.cases.sight)
    blind: bool = False
    #: whether the case's text is restricted, worked out from the documents when it was read
    #: (:func:`review.core.clearance.restricted_cases`)
    text_restricted: bool = False
    #: the kind given to each required claim, in the claims' order (None: none given)
    claim_kinds: tuple[str | None, ...] = ()


def seen_by(view: CaseView, actor: Actor) -> CaseView:
    """``view`` as ``actor`` may see it: the question, claims and notes of a case that relies
    on a restricted document are the redaction text without clearance (the record too)."""
    restricted = view.text_restricted
    if clearance.may_see(actor, restricted):
        return view
    return dataclasses.replace(
        view,
        question=clearance.REDACTED,
        required_claims=clearance.shown_all(actor, view.required_claims, restricted),
        notes=clearance.shown(actor, view.notes, restricted) if view.notes else "",
        record=clearance.case_record(actor, view.record, restricted),
    )


def case_id_for_key(engine: Engine, key: str) -> int | None:
    """The id of the case ``key`` names (``CASE-005``), None when there is none. A key says
    nothing restricted: it is what every list shows."""
    if not key or len(key) > 200:
        return None
    with read_session(engine) as s:
        found = s.scalar(select(Case.id).where(Case.key == key))
    return None if found is None else int(found)


def get_case(
    engine: Engine,
    case_id: int | None = None,
    key: str | None = None,
    *,
    viewer: Actor | None = None,
) -> CaseView | None:
    """One case; for a ``viewer``, as they may see it (see :func:`seen_by`)."""
    with read_session(engine) as s:
        stmt = case_query()
        stmt = (
            stmt.where(Case.id == case_id) if case_id is not None else stmt.where(Case.key == key)
        )
        row = s.scalar(stmt)
        if row is None:
            return None
        view = CaseView(
            id=row.id,
            key=row.key,
            question=row.question,
            required_claims=tuple(c.text for c in row.claims),
            claim_kinds=tuple(c.kind for c in row.claims),
            identity_name=row.identity_name,
            identity_scopes=tuple(row.identity_scopes),
            documents=tuple(
                CaseDocView(
                    d.document_id,
                    f"{d.document.doc_key}@{d.document.version}",
                    d.document.title,
                    d.document.access_scope,
                    d.document.effective_date,
                    d.document.authority,
                    d.document.jurisdiction,
                    d.visibility,
                    d.role,
                    d.document.is_current,
                )
                for d in row.documents
            ),
            expected_decision=row.expected_decision,
            expected_message=row.expected_message,
            reason_codes=tuple(row.reason_codes),
            category=row.category,
            slices=tuple(sorted(sl.slice for sl in row.slices)),
            split=row.split,
            status=row.status,
            family=row.family.key if row.family else None,
            evidence_state=row.evidence_state,
            notes=row.notes,
            version=row.version,
            created_by=row.created_by,
            updated_at=row.updated_at,
            updated_by=row.updated_by,
            record=to_record(row),
            agreed=agreed_labels(s, [row.id]).get(row.id),
            text_restricted=row.id in clearance.restricted_cases(s, [row.id]),
        )
    return view if viewer is None else seen_by(view, viewer)


def family_exists(engine: Engine, key: str) -> bool:
    """Whether a family has the key ``key`` (a key typed where the families are too many to
    list)."""
    with read_session(engine) as s:
        return s.scalar(select(CaseFamily.id).where(CaseFamily.key == key).limit(1)) is not None


def family_keys(engine: Engine, limit: int | None = None) -> list[str]:
    """Every family's key, sorted; the first ``limit`` + 1 only, when given (a picker shows
    ``limit`` and learns that there are more)."""
    stmt = select(CaseFamily.key).order_by(CaseFamily.key)
    with read_session(engine) as s:
        return list(s.scalars(stmt if limit is None else stmt.limit(limit + 1)))


def export_cases(
    engine: Engine,
    out: IO[str],
    f: CaseFilter | None = None,
    also: Sequence[ColumnElement[bool]] = (),
    *,
    viewer: Actor,
) -> int:
    """Write cases as canonical JSONL, streaming in batches; returns the count. A case with
    an agreed label carries it as ``agreed`` (read-only: ignored on import). ``also``: more
    conditions on the cases written. The text of a case that relies on a restricted document
    is written only for a ``viewer`` with clearance."""
    conds = [*filter_conditions(f or CaseFilter()), *also]
    n = 0
    last_id = 0
    with read_session(engine) as s:
        while True:
            batch = list(
                s.scalars(
                    case_query().where(Case.id > last_id, *conds).order_by(Case.id).limit(500)
                )
            )
            if not batch:
                break
            agreed = agreed_labels(s, [row.id for row in batch])
            restricted = clearance.restricted_cases(s, [row.id for row in batch])
            for row in batch:
                record = clearance.case_record(viewer, to_record(row), row.id in restricted)
                if row.id in agreed:
                    record["agreed"] = agreed[row.id].as_json()
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
                n += 1
            last_id = batch[-1].id
            s.expunge_all()
    return n
