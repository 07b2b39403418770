"""How the signatures of a policy or wording version read on the Thresholds and Wording pages
(one text for both): each signer by name, each role in words."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from review.core import readable
from review.policy import signoff

__all__ = ["roles_text", "signatures_text"]


def roles_text(roles: Iterable[str], none: str = "nothing") -> str:
    """Roles in words ("Compliance, Product owner"), or ``none``."""
    return ", ".join(readable.humanize(r) for r in roles) or none


def signatures_text(version: signoff.VersionView, names: Mapping[str, str] | None = None) -> str:
    """The signatures so far ("Compliance approve (Chen Li)", comma separated), or "none".
    Without ``names`` (e-mail -> name) a signer reads as the part of the address before the @,
    never the whole address."""
    people = names or {}
    return (
        ", ".join(
            f"{readable.humanize(s.role)} {s.meaning} ({readable.person(s.signer, people)})"
            for s in version.signatures
        )
        or "none"
    )
