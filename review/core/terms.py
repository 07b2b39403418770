"""The fixed words the code relies on, as enums: statuses of cases, sampling plans, trace
imports, signed policy versions and monthly reviews, and the verdicts a claim can get.

Each is a ``StrEnum``: its members are the strings stored in the database and shown on the
pages, so a member equals its text (``PlanStatus.open == "open"``). The taxonomy may name more
case statuses; ``draft`` and ``ready`` are the two the workflows depend on.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "CLAIM_VERDICTS",
    "CaseStatus",
    "ClaimVerdict",
    "ImportStatus",
    "PlanStatus",
    "SessionStatus",
    "VersionStatus",
]


class CaseStatus(StrEnum):
    draft = "draft"  # being built: not labeled, not in the metrics
    ready = "ready"  # in the labeling queue and the metrics


class PlanStatus(StrEnum):
    planned = "planned"  # population counted, sample not drawn
    open = "open"  # drawn: reviewers judge its items
    closed = "closed"


class ImportStatus(StrEnum):
    running = "running"
    done = "done"
    failed = "failed"


class VersionStatus(StrEnum):
    pending = "pending"  # proposed, approvals missing
    approved = "approved"
    rejected = "rejected"


class SessionStatus(StrEnum):
    """A monthly review, and each of its findings and actions."""

    open = "open"
    closed = "closed"


class ClaimVerdict(StrEnum):
    supported = "supported"
    unsupported = "unsupported"
    contradicted = "contradicted"
    not_a_claim = "not_a_claim"


#: The verdicts a person gives a claim on the labeling and audit forms; ``not_a_claim`` (text
#: that asserts nothing, a greeting or a lead-in) is left out of the claim-level check.
CLAIM_VERDICTS: tuple[ClaimVerdict, ...] = (
    ClaimVerdict.supported,
    ClaimVerdict.unsupported,
    ClaimVerdict.contradicted,
)
