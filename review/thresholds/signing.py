"""Signing a threshold change: what the signer sees (:func:`review_proposal`) and the
signature itself (:func:`sign_thresholds`).

The figures are computed here, at signing time, on the proposal's own calibration source
(:func:`review.thresholds.evidence.signoff_evidence`), never taken from the page. Approving a
proposal that fails a release target on its report split, or whose figures cannot be computed
(no source, no outcomes: the targets cannot be shown to pass), needs a written reason and an
explicit confirmation; both are stored with the signature (the reason as the signature's note,
the failing targets and the confirmation in its metrics snapshot, which the sign-off chain
covers). The four-eyes rules are :func:`review.policy.signoff.sign`'s."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine

from review.core import readable
from review.core.errors import InputError
from review.core.identity import Actor, Permission, Role, require
from review.core.taxonomy import Taxonomy
from review.policy import inforce, signoff
from review.policy.inforce import PolicyInForce
from review.policy.policy import parse_policy
from review.thresholds import headline as hl
from review.thresholds.evidence import OutputsReader, SignoffEvidence, signoff_evidence

__all__ = ["ProposalReview", "needs_confirmation", "review_proposal", "sign_thresholds"]


@dataclass(frozen=True)
class ProposalReview:
    """A pending threshold proposal as its signers see it."""

    version: signoff.VersionView
    evidence: SignoffEvidence
    headline: hl.Headline | None
    #: why approving needs a reason and a confirmation ("" when it does not)
    confirmation: str


def needs_confirmation(evidence: SignoffEvidence, headline: hl.Headline | None) -> str:
    """Why approving needs a written reason and an explicit confirmation ("" when not)."""
    if evidence.analysis is None or headline is None:
        why = evidence.note or "there are no outcomes to compute them on"
        return f"Its figures cannot be computed ({why}), so no target can be shown to pass."
    if not headline.targets_total:
        return f"No outcome on the {headline.report_on} split: no target can be shown to pass."
    if headline.failing:
        return (
            f"It fails {len(headline.failing)} of "
            f"{readable.count(headline.targets_total, 'release target')}"
            f"{hl.unmeasured_note(headline.failing)}: " + "; ".join(headline.failing) + "."
        )
    return ""


def review_proposal(
    engine: Engine,
    tax: Taxonomy,
    version: signoff.VersionView,
    *,
    pif: PolicyInForce | None = None,
    outputs: OutputsReader | None = None,
) -> ProposalReview:
    """The figures of ``version`` against the policy in force, on its calibration source.
    A page passes the policy in force it read for this run (``pif``) and its kept copy of a
    run's outputs (``outputs``); both are read afresh when not given (a signature does)."""
    if version.kind != inforce.KIND:
        raise InputError(f"policy version {version.id} is not a threshold change")
    pif = pif if pif is not None else inforce.in_force(engine)
    proposed = parse_policy(version.yaml_text, f"version {version.number}")
    evidence = signoff_evidence(
        engine, tax, pif.policy, proposed, version.snapshot, outputs=outputs
    )
    head = hl.headline(evidence.analysis, proposed) if evidence.analysis is not None else None
    return ProposalReview(version, evidence, head, needs_confirmation(evidence, head))


def sign_thresholds(
    engine: Engine,
    actor: Actor,
    tax: Taxonomy,
    version_id: int,
    meaning: str,
    *,
    role: Role | None = None,
    note: str = "",
    confirm_failing_targets: bool = False,
) -> int:
    """Approve or reject a pending threshold change with the figures computed now.

    Refused, besides :func:`review.policy.signoff.sign`'s rules: approving a change that
    fails a release target (or whose targets cannot be checked) without a written reason in
    ``note`` and ``confirm_failing_targets``. The signature stores the figures, the failing
    targets, the reason and the confirmation."""
    require(actor, Permission.approve_policy)
    review = review_proposal(engine, tax, signoff.get_version(engine, version_id))
    ev = review.evidence
    snapshot = dict(ev.snapshot)
    if meaning == "approve" and review.confirmation:
        missing = [
            what
            for what, given in (
                ("a written reason", bool(note.strip())),
                ("the confirmation that you approve it anyway", confirm_failing_targets),
            )
            if not given
        ]
        if missing:
            raise InputError(
                f"Version {review.version.number} was not approved: "
                f"{review.confirmation} Approving it needs {' and '.join(missing)}."
            )
        snapshot["approved_despite"] = {
            "why": review.confirmation,
            "failing_targets": list(review.headline.failing) if review.headline else [],
            "reason": note.strip(),
            "confirmed": True,
        }
    if review.headline is not None:
        snapshot["headline"] = hl.frame(review.headline).to_dict(orient="records")
    return signoff.sign(
        engine,
        actor,
        version_id,
        meaning,
        role=role,
        note=note,
        data_fingerprint=ev.fingerprint,
        metrics_snapshot=snapshot,
        lock_case_ids=ev.case_ids,
    )
