"""The expert's decisions on a variant: confirm (or change) the operator's suggestion,
edit the required claims, mark the decisive passage. Session-taking services: each works
inside the caller's transaction and does not commit. And what the policy in force says about
a suggestion of stale evidence (:func:`freshness_note`): whether a passage is stale depends on
the freshness rule for the kind of claim it supports and its source (issue 35, item 3)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from review.builder.documents import ref_of
from review.builder.operator import Suggestion
from review.cases import cases as case_service
from review.cases.cases import CaseIn, case_query, validate_case
from review.core import clearance
from review.core.errors import InputError
from review.core.identity import Actor, Permission, require
from review.core.taxonomy import Taxonomy
from review.core.terms import CaseStatus
from review.policy.freshness import freshness_limit, limits_for_source
from review.policy.policy import NoAnswerPolicy
from storage import changes
from storage.models import (
    Case,
    CaseDocument,
    CaseSuggestion,
    Document,
    utcnow,
)

__all__ = [
    "ConfirmResult",
    "confirm_suggestion",
    "freshness_note",
    "mark_passage",
    "set_required_claims",
]


PASSAGE_ENTITY = "decisive_passage"


# ------------------------------------------------------------------------------------------
# What the policy's freshness rules say about a suggestion of stale evidence


def freshness_note(
    policy: NoAnswerPolicy,
    authority: str | None,
    sug: Suggestion,
    claim_kinds: Sequence[str | None] = (),
) -> str | None:
    """For a suggestion that names ``evidence_stale``: the age limits the policy in force sets
    for a passage of a document of ``authority`` (its source category), so the expert
    confirming it sees whether the case's claims can go stale at all (a settled historical
    fact under a rule without a limit does not). When the case gives its claims a kind
    (``claim_kinds``, in the claims' order), the limit of each claim; otherwise the limit per
    kind the rules name. None for other suggestions, or a policy without an evidence gate."""
    gate = policy.evidence_gate
    if gate is None or "evidence_stale" not in sug.reason_codes:
        return None
    if any(claim_kinds):
        limits = [
            (
                f"claim {i} ({f'kind {k!r}' if k else 'no kind'})",
                freshness_limit(gate.freshness, gate.max_age_days, k, authority),
            )
            for i, k in enumerate(claim_kinds, 1)
        ]
    else:
        limits = limits_for_source(gate.freshness, gate.max_age_days, authority)
    parts = []
    for who, limit in limits:
        days = "no age limit" if limit.max_age_days is None else f"{limit.max_age_days} days"
        parts.append(f"{who}: {days} ({limit.rule})")
    where = f"authority {authority!r}" if authority else "no authority"
    return (
        f"Age limits of the no-answer policy version {policy.version} for a document of "
        f"{where}: " + "; ".join(parts) + ". The evidence is stale only for a claim whose "
        "limit the document's date exceeds on the date the question is about."
    )


# ------------------------------------------------------------------------------------------
# Confirming a suggestion, editing required claims


@dataclass(frozen=True)
class ConfirmResult:
    case_id: int
    changed: bool  # the expert chose another decision or other reasons than suggested
    version: int
    status: str


def confirm_suggestion(
    s: Session,
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

    return _confirm(s, actor, case_id, decision, chosen, tax, expected_version, note, make_ready)


def set_required_claims(
    s: Session,
    actor: Actor,
    tax: Taxonomy,
    case_id: int,
    expected_version: int,
    claims: Sequence[str],
    kinds: Mapping[str, str | None] | None = None,
) -> int:
    """Replace the required claims of a case (compound questions) inside the caller's
    transaction, which it does not commit; returns the new version. ``kinds`` gives claims
    their kind (None: each claim kept keeps its kind, a new one has none)."""
    require(actor, Permission.edit_cases)
    row = s.scalar(
        case_query()
        .where(Case.id == case_id)
        .with_for_update()  # read as the edit will find it: locked, so current
    )
    if row is None:
        raise InputError(f"case {case_id} does not exist")
    cleaned = [c.strip() for c in claims if c.strip()]
    if len(set(cleaned)) != len(cleaned):
        raise InputError("a required claim is listed twice")
    record = case_service.to_record(row)
    if kinds is None:
        kinds = record.get("claim_kinds") or {}
    kept = {c: k for c, k in kinds.items() if c in cleaned and k}
    record.pop("claim_kinds", None)
    data = {**record, "required_claims": cleaned, **({"claim_kinds": kept} if kept else {})}
    case_in = validate_case(data, "claims", 1, tax)
    return case_service.update_case(s, actor, case_id, expected_version, case_in, tax)


def mark_passage(s: Session, actor: Actor, case_id: int, passage: str) -> str:
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

    return _mark(s, actor, case_id, wanted)


def _confirm(
    s: Session,
    actor: Actor,
    case_id: int,
    decision: str,
    chosen: list[str],
    tax: Taxonomy,
    expected_version: int | None,
    note: str,
    make_ready: bool,
) -> ConfirmResult:
    row = s.scalar(case_query().where(Case.id == case_id).with_for_update())
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
    if decision != row.expected_decision:  # the wording key follows the decision
        data["expected_message"] = None
    if make_ready and row.status == CaseStatus.draft:
        data["status"] = CaseStatus.ready
    case_in = CaseIn.model_validate(data).with_suggested_message(tax)
    problems = case_in.problems(tax)
    if problems:
        raise InputError(f"{problems[0][0]}: {problems[0][1]}")
    row.expected_decision = decision
    row.expected_message = case_in.expected_message
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
    changes.record(s, actor.email, "update", "case", row.id, before, case_service.to_record(row))
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


def _mark(s: Session, actor: Actor, case_id: int, wanted: str) -> str:
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
        if not clearance.may_see_document(actor, d.access_scope):
            continue
        first = d.body.find(wanted)
        if first >= 0:
            if d.body.find(wanted, first + 1) >= 0:
                raise InputError(
                    f"the passage occurs several times in {ref_of(d)}; select a longer one"
                )
            hits.append((d, first))
    if not hits:
        raise InputError(
            f"the passage does not occur in any visible document of {row.key} that you may "
            "read; copy it exactly from the document"
        )
    if len(hits) > 1:
        refs = ", ".join(ref_of(d) for d, _ in hits)
        raise InputError(f"the passage occurs in several documents ({refs}); make it unique")
    d, first = hits[0]
    changes.record(
        s,
        actor.email,
        "mark",
        PASSAGE_ENTITY,
        row.id,
        None,
        {"doc": ref_of(d), "start": first, "end": first + len(wanted), "case": row.key},
    )
    return ref_of(d)
