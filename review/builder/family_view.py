"""A family at a glance: every variant of a base case with its documents, edits, claims and
the family's consistency checks."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from review.builder.documents import doc_dict, get_document, ref_of
from review.builder.edits import EditRecord
from review.builder.families import Check, Variant
from review.builder.family_checks import family_checks
from review.builder.suggestions import PASSAGE_ENTITY
from review.builder.variants import MAX_FAMILY_VARIANTS, VARIANT_ENTITY
from review.cases import cases as case_service
from review.cases.cases import case_query
from review.core import clearance
from review.core.identity import Actor
from storage.db import one_of, read_session
from storage.models import (
    AuditLog,
    Case,
    CaseEdit,
    CaseFamily,
    CaseSuggestion,
    Document,
    User,
)

__all__ = [
    "ClaimMark",
    "EditRow",
    "FamilyRow",
    "FamilyView",
    "VariantRow",
    "count_families",
    "family_view",
    "list_families",
]


# ------------------------------------------------------------------------------------------
# Family view


@dataclass(frozen=True)
class FamilyRow:
    key: str
    title: str
    variants: int
    unconfirmed: int
    states: tuple[str | None, ...]  # the evidence states of its cases (None: no state)


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
                .where(one_of(s, Case.family_id, ids))
                .group_by(Case.family_id)
            ).all()
        )
        pending = dict(
            s.execute(
                select(Case.family_id, func.count(Case.id))
                .join(CaseSuggestion, CaseSuggestion.case_id == Case.id)
                .where(one_of(s, Case.family_id, ids), CaseSuggestion.confirmed_by.is_(None))
                .group_by(Case.family_id)
            ).all()
        )
        states: dict[int, list[str | None]] = {i: [] for i in ids}
        for fid, state in s.execute(
            select(Case.family_id, Case.evidence_state)
            .where(one_of(s, Case.family_id, ids))
            .distinct()
            .order_by(Case.evidence_state)
        ):
            if fid is not None:
                states[fid].append(state)
    return [
        FamilyRow(
            f.key,
            f.title,
            int(counts.get(f.id, 0)),
            int(pending.get(f.id, 0)),
            tuple(sorted(states[f.id], key=lambda x: (x is None, x or ""))),
        )
        for f in fams
    ]


@dataclass(frozen=True)
class ClaimMark:
    text: str
    status: str  # supported | loses support | as in the evidence-present case
    kind: str | None = None  # the kind of fact the claim states (None: not given)


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
    group: str | None = None  # the rows of one edit of several documents share it


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
    people: Mapping[str, str] = dataclasses.field(default_factory=dict)  # e-mail -> name
    blind: int = 0  # variants whose judgement is withheld from this actor (review.builder.blinding)

    def person(self, email: str | None) -> str:
        """Who someone is, as people read it: their name, else the e-mail address."""
        if not email:
            return "—"
        return self.people.get(email) or email

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
        rows = _family_cases(s, fam.id)
        ids = [r.id for r in rows]
        sugs = {
            g.case_id: g
            for g in s.scalars(select(CaseSuggestion).where(CaseSuggestion.case_id.in_(ids)))
        }
        edits: dict[int, list[CaseEdit]] = {i: [] for i in ids}
        for e in s.scalars(select(CaseEdit).where(CaseEdit.case_id.in_(ids)).order_by(CaseEdit.id)):
            if e.case_id is not None:
                edits[e.case_id].append(e)
        recorded = _logged(s, VARIANT_ENTITY, "derive", ids, _derived_passage)
        marked = _logged(s, PASSAGE_ENTITY, "mark", ids, _marked_passage)  # the newest wins
        docs = _family_documents(s, rows, [*recorded.values(), *marked.values()])
        restricted_in_family = any(
            d.access_scope == clearance.RESTRICTED_SCOPE for d in docs.values()
        )
        hide = not clearance.may_see(actor, restricted_in_family)
        present = [r for r in rows if r.evidence_state == "present"]
        base_passage, source, base_doc = _base_passage(
            passage, present, ids, recorded, marked, docs
        )
        variants: list[Variant] = []
        for r in rows:
            own: str | None = None
            if r.evidence_state == "present":
                own = base_passage
            elif r.id in recorded:
                own = _own_passage(docs, recorded[r.id])
            variants.append(
                Variant(
                    evidence_state=r.evidence_state,
                    case=case_service.to_record(r),
                    suggested_decision=r.expected_decision,
                    suggested_reasons=tuple(r.reason_codes),
                    edits=tuple(_record_of(e) for e in edits[r.id]),
                    decisive_passage=own,
                )
            )
        checks = family_checks(variants, [doc_dict(d) for d in docs.values()])
        emails = {g.confirmed_by for g in sugs.values() if g.confirmed_by}
        emails |= {e.author for es in edits.values() for e in es}
        people = {
            email: name
            for email, name in s.execute(
                select(User.email, User.name).where(User.email.in_(emails))
            )
        }
        if hide:
            checks = [
                dataclasses.replace(c, detail=_QUOTED_RE.sub(clearance.REDACTED, c.detail))
                for c in checks
            ]
        base_claims = [c.text for r in present for c in r.claims]
        secret_cases = clearance.restricted_cases(s, [r.id for r in rows])
        out_rows = [
            _variant_row(actor, r, sugs.get(r.id), r.id in secret_cases, base_claims, edits, docs)
            for r in rows
        ]
        shown = base_passage
        if base_passage is not None and hide:
            shown = None
        if base_doc is not None and not clearance.may_see_document(actor, base_doc.access_scope):
            shown = None
        return FamilyView(
            fam.key, fam.title, tuple(out_rows), tuple(checks), shown, source, hide, people
        )


def _record_of(e: CaseEdit) -> EditRecord:
    """A stored provenance row as the checks read it (which copy came from which document)."""
    result = e.record.get("result_ref") if isinstance(e.record, dict) else None
    return EditRecord(
        e.operator,
        dict(e.params),
        e.source_doc_key,
        e.source_version,
        e.span_start,
        e.span_end,
        e.before,
        e.after,
        result if isinstance(result, str) else None,
    )


def _family_cases(s: Session, family_id: int) -> list[Case]:
    """The family's cases (at most MAX_FAMILY_VARIANTS), with what the view shows of them."""
    return list(
        s.scalars(
            case_query()
            .where(Case.family_id == family_id)
            .order_by(Case.id)
            .limit(MAX_FAMILY_VARIANTS)
        )
    )


def _derived_passage(after: Any) -> dict[str, Any] | None:
    """The passage a variant's derivation recorded (its audit entry's ``after``), with every
    passage of an edit of several documents under ``all``."""
    p = (after or {}).get("passage")
    if not isinstance(p, dict):
        return None
    more = (after or {}).get("passages")
    if isinstance(more, list) and len(more) > 1:
        return {**p, "all": [m for m in more if isinstance(m, dict)]}
    return p


def _all_passages(passages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The recorded passages, each passage of an edit of several documents apart."""
    out: list[Mapping[str, Any]] = []
    for p in passages:
        out.extend(p.get("all") or [p])
    return out


def _own_passage(docs: Mapping[tuple[str, int], Document], p: Mapping[str, Any]) -> str | None:
    """A variant's decisive passage(s) as one text, a line each (the checks look for each
    sentence of each)."""
    texts = [found[0] for q in _all_passages([p]) if (found := _passage_text(docs, q))]
    return "\n".join(texts) if texts else None


def _marked_passage(after: Any) -> dict[str, Any] | None:
    """The passage marked as decisive (its audit entry's ``after``)."""
    return after if isinstance(after, dict) else None


def _logged(
    s: Session,
    entity: str,
    action: str,
    ids: Sequence[int],
    passage_of: Callable[[Any], dict[str, Any] | None],
) -> dict[int, dict[str, Any]]:
    """The passage of the newest ``action`` the audit log records on each case of ``ids``
    that names one."""
    out: dict[int, dict[str, Any]] = {}
    for log in s.scalars(
        select(AuditLog)
        .where(
            AuditLog.entity == entity,
            AuditLog.action == action,
            AuditLog.entity_id.in_([str(i) for i in ids]),
        )
        .order_by(AuditLog.id)
    ):
        p = passage_of(log.after)
        if p is not None:
            out[int(log.entity_id)] = p
    return out


def _family_documents(
    s: Session, rows: Sequence[Case], passages: Sequence[Mapping[str, Any]]
) -> dict[tuple[str, int], Document]:
    """The documents of the family's cases and those the recorded passages are in."""
    docs: dict[tuple[str, int], Document] = {}
    for r in rows:
        for cd in r.documents:
            docs[(cd.document.doc_key, cd.document.version)] = cd.document
    for p in _all_passages(passages):
        key, _, ver = str(p.get("doc", "")).partition("@")
        if ver.isdigit() and (key, int(ver)) not in docs:
            d = get_document(s, key, int(ver))
            if d is not None:
                docs[(key, int(ver))] = d
    return docs


def _passage_text(
    docs: Mapping[tuple[str, int], Document], p: Mapping[str, Any]
) -> tuple[str, Document] | None:
    """The text of a recorded passage (``{"doc": "KEY@2", "start": .., "end": ..}``) and its
    document; None when it is not there or empty."""
    key, _, ver = str(p.get("doc", "")).partition("@")
    d = docs.get((key, int(ver))) if ver.isdigit() else None
    start, end = p.get("start"), p.get("end")
    if d is None or not isinstance(start, int) or not isinstance(end, int):
        return None
    text = d.body[start:end].strip()
    return (text, d) if text else None


def _base_passage(
    passage: str | None,
    present: Sequence[Case],
    ids: Sequence[int],
    recorded: Mapping[int, Mapping[str, Any]],
    marked: Mapping[int, Mapping[str, Any]],
    docs: Mapping[tuple[str, int], Document],
) -> tuple[str | None, str, Document | None]:
    """The decisive passage the checks use, where it comes from, and its document: the one
    given, else the one marked on an evidence-present case, else the first one recorded when
    a variant was built from an evidence-present case's document."""
    marks = [marked[r.id] for r in present if r.id in marked]
    found_mark = _passage_text(docs, marks[-1]) if marks else None
    if passage is not None and passage.strip():
        return passage.strip(), "given", None
    if found_mark is not None:
        return found_mark[0], f"marked as decisive in {ref_of(found_mark[1])}", found_mark[1]
    present_refs = {
        (cd.document.doc_key, cd.document.version)
        for r in present
        for cd in r.documents
        if cd.visibility == "visible"
    }
    for cid in ids:
        p = recorded.get(cid)
        found = _passage_text(docs, p) if p else None
        if found and (found[1].doc_key, found[1].version) in present_refs:
            return found[0], f"recorded when a variant was built from {ref_of(found[1])}", found[1]
    return None, "none recorded", None


def _variant_row(
    actor: Actor,
    r: Case,
    g: CaseSuggestion | None,
    secret: bool,
    base_claims: Sequence[str],
    edits: Mapping[int, Sequence[CaseEdit]],
    docs: Mapping[tuple[str, int], Document],
) -> VariantRow:
    """One variant as ``actor`` may see it (``secret``: it cites a restricted document)."""
    return VariantRow(
        case_id=r.id,
        key=r.key,
        version=r.version,
        evidence_state=r.evidence_state,
        status=r.status,
        question=clearance.shown(actor, r.question, secret),
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
                ref_of(cd.document),
                cd.document.id,
                clearance.title(actor, cd.document.title, cd.document.access_scope),
                cd.visibility,
                cd.role,
                cd.document.access_scope,
            )
            for cd in r.documents
        ),
        claims=tuple(
            dataclasses.replace(m, text=clearance.shown(actor, m.text, secret), kind=c.kind)
            for m, c in zip(
                _claim_marks(r.evidence_state, [c.text for c in r.claims], base_claims),
                r.claims,
                strict=True,
            )
        ),
        edits=tuple(_edit_row(e, docs, actor) for e in edits[r.id]),
    )


def _edit_row(e: CaseEdit, docs: Mapping[tuple[str, int], Document], actor: Actor) -> EditRow:
    src = docs.get((e.source_doc_key, e.source_version))
    visible = src is None or clearance.may_see_document(actor, src.access_scope)
    if src is None:
        visible = clearance.cleared(
            actor
        )  # the source is not in the family: show it to clearance only
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
        e.edit_group,
    )
