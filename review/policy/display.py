"""How a signed policy or wording version reads on the Thresholds and Wording pages (one text
for both): the version in force, each signer by name, each role in words, and one vocabulary
for a version in every picker and diff header ("sign-off v4 · file version 4 (in force)"),
with the change in force (that version against the one it replaced) as the default diff."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from review.core import readable
from review.core.terms import VersionStatus
from review.policy import signoff

__all__ = [
    "SHIPPED",
    "change_caption",
    "in_force_caption",
    "in_force_change",
    "roles_text",
    "signature_line",
    "signatures_text",
    "status_text",
    "version_heading",
]

#: The heading of the shipped file in pickers and diff headers.
SHIPPED: Final = "the shipped file"


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


def signature_line(
    s: signoff.Signature, names: Mapping[str, str] | None = None, *, note: bool = False
) -> str:
    """One signature in a history table: "Compliance: approve by Chen Li at 2026-11-03
    14:05", with its note in brackets when ``note``; the signer by name, never the e-mail."""
    line = (
        f"{readable.humanize(s.role)}: {s.meaning} by {readable.person(s.signer, names or {})} "
        f"at {s.at:%Y-%m-%d %H:%M}"
    )
    return line + (f" ({s.note})" if note and s.note else "")


def status_text(version: signoff.VersionView, in_force_id: int | None) -> str:
    """Where a version stands, in words: in force; approved earlier and replaced since; a
    proposal waiting for sign-off; rejected."""
    if version.id == in_force_id:
        return "in force"
    status = version.status
    if status == VersionStatus.approved:
        return "approved, replaced since"
    if status == VersionStatus.pending:
        return "proposal, waiting for sign-off"
    return str(status)


def version_heading(
    version: signoff.VersionView | None, in_force_id: int | None, *, shipped: str = SHIPPED
) -> str:
    """A version in a picker or a diff header, the same words everywhere: "sign-off v4 · file
    version 4 (in force)", "sign-off v3 · file version 4 (proposal, waiting for sign-off)";
    None is the shipped file (``shipped``)."""
    if version is None:
        return shipped
    label = readable.version_label(version.number, version.file_version)
    return f"{label} ({status_text(version, in_force_id)})"


def in_force_change(
    versions: Sequence[signoff.VersionView], in_force_id: int | None
) -> tuple[signoff.VersionView | None, signoff.VersionView] | None:
    """The change that is in force: (the version it replaced, its parent; None when that was
    the shipped file, the version in force). None when nothing is in force. A proposal that
    was never approved is never the "before" side: a version's parent is the version in force
    when it was proposed, and a proposal whose parent is no longer in force cannot be
    approved."""
    current = next((v for v in versions if v.id == in_force_id), None)
    if current is None:
        return None
    parent = next((v for v in versions if v.id == current.parent_id), None)
    return parent, current


def change_caption(
    before: signoff.VersionView | None,
    after: signoff.VersionView,
    in_force_id: int | None,
    *,
    shipped: str = SHIPPED,
) -> str:
    """What the default diff shows, in one sentence."""
    return (
        f"The change in force: {version_heading(after, in_force_id)} against the version it "
        f"replaced, {version_heading(before, in_force_id, shipped=shipped)}."
    )
