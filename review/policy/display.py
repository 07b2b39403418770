"""How a signed policy or wording version reads on the Thresholds and Wording pages (one text
for both): the version in force, each signer by name, each role in words."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from review.core import readable
from review.policy import signoff

__all__ = ["in_force_caption", "roles_text", "signatures_text"]


def in_force_caption(version: signoff.VersionView) -> str:
    """The caption of the version in force: its sign-off and file versions, when it was
    approved and the start of its digest."""
    approved = f"{version.approved_on:%Y-%m-%d}" if version.approved_on else "?"
    label = readable.version_label(version.number, version.file_version)
    return f"In force: {label}, approved {approved} · sha256 {version.sha256[:12]}…"


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
