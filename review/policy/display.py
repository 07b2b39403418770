"""How a signed policy or wording version reads on the Thresholds and Wording pages (one text
for both): the version in force, each signer by name, each role in words, and one vocabulary
for a version in every picker and diff header ("sign-off v4 · file version 4 (in force)"),
with the change in force (that version against the one it replaced) as the default diff."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from review.core import readable
from review.core.errors import WorkbenchError
from review.core.terms import VersionStatus
from review.core.yamlstrict import load_yaml_text
from review.policy import signoff

__all__ = [
    "SHIPPED",
    "change_caption",
    "changed_values",
    "competing_after_approval",
    "competing_before_approval",
    "competing_draft",
    "competing_on_propose",
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


def waiting_roles(roles: Iterable[str]) -> str:
    """The roles a proposal still waits for, as a sentence reads them ("compliance and
    product owner"), never the stored keys (``product_owner``)."""
    return " and ".join(readable.humanize(str(r)).lower() for r in roles) or "no one"


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


def status_text(
    version: signoff.VersionView,
    in_force_id: int | None,
    versions: Sequence[signoff.VersionView] = (),
) -> str:
    """Where a version stands, in the words every table, picker and header of a history uses:
    "in force"; "approved, replaced by version 5" (an approval since put another in force);
    "proposal, waiting for sign-off"; "stale: superseded by version 5" (a proposal whose
    parent is no longer in force: it can only be rejected); "rejected". Without ``versions``
    (every version of the kind) the successor is not known: "approved, replaced since",
    and a proposal reads as waiting."""
    if version.id == in_force_id:
        return "in force"
    status = version.status
    if status == VersionStatus.approved:
        later = _replaced_by(version, versions)
        if later is None:
            return "approved, replaced since"
        return f"approved, replaced by version {later.number}"
    if status == VersionStatus.pending:
        current = next((v for v in versions if v.id == in_force_id), None)
        if current is not None and version.parent_id != current.id:
            return f"stale: superseded by version {current.number}"
        return "proposal, waiting for sign-off"
    return str(status)


def _approval_order(v: signoff.VersionView) -> tuple[dt.datetime, int]:
    return (v.approved_on or v.created_at, v.number)


def _replaced_by(
    version: signoff.VersionView, versions: Sequence[signoff.VersionView]
) -> signoff.VersionView | None:
    """The version approved next after ``version`` (the one that replaced it), if known."""
    later = [
        v
        for v in versions
        if v.id != version.id
        and v.approved_on is not None
        and _approval_order(v) > _approval_order(version)
    ]
    return min(later, key=_approval_order) if later else None


def version_heading(
    version: signoff.VersionView | None,
    in_force_id: int | None,
    *,
    shipped: str = SHIPPED,
    versions: Sequence[signoff.VersionView] = (),
) -> str:
    """A version in a picker or a diff header, the same words everywhere: "sign-off v4 · file
    version 4 (in force)", "sign-off v3 · file version 4 (proposal, waiting for sign-off)";
    None is the shipped file (``shipped``)."""
    if version is None:
        return shipped
    label = readable.version_label(version.number, version.file_version)
    return f"{label} ({status_text(version, in_force_id, versions)})"


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
    versions: Sequence[signoff.VersionView] = (),
) -> str:
    """What the default diff shows, in one sentence."""
    now = version_heading(after, in_force_id, versions=versions)
    was = version_heading(before, in_force_id, shipped=shipped, versions=versions)
    return f"The change in force: {now} against the version it replaced, {was}."


#: what a version's bookkeeping changes on every proposal, not a decision anyone signs for
_BOOKKEEPING: Final = frozenset({"version", "approved_on", "change_record"})


def _leaves(value: object, path: str = "") -> dict[str, object]:
    if isinstance(value, dict):
        out: dict[str, object] = {}
        for k, v in value.items():
            if not path and k in _BOOKKEEPING:
                continue
            out.update(_leaves(v, f"{path}.{k}" if path else str(k)))
        return out
    return {path: value}


def changed_values(before: str, after: str) -> list[str] | None:
    """The values ``after`` sets differently from ``before`` (policy or wording YAML), one
    line each ("ranking_modes.vector.refuse_below: 0.55 → 0.6"; a list counts as one value),
    leaving out the file's version, approval date and change record; None when either text
    does not parse (the diff beside it still shows the change)."""
    try:
        old, new = load_yaml_text(before, "in force"), load_yaml_text(after, "proposed")
    except WorkbenchError:
        return None
    a, b = _leaves(old), _leaves(new)
    lines = []
    for key in sorted(a.keys() | b.keys()):
        was, now = a.get(key, _ABSENT), b.get(key, _ABSENT)
        if was == now:
            continue
        if isinstance(was, list) and isinstance(now, list):
            lines.append(f"{key}: {_list_change(was, now)}")
        else:
            lines.append(f"{key}: {_shown(was)} → {_shown(now)}")
    return lines


def _list_change(was: list[object], now: list[object]) -> str:
    """A list's change as what it gains and loses ("removed security_incident")."""
    added = [_shown(x) for x in now if x not in was]
    removed = [_shown(x) for x in was if x not in now]
    said = [f"added {', '.join(added)}"] if added else []
    said += [f"removed {', '.join(removed)}"] if removed else []
    return "; ".join(said) or "the same items in another order"


_ABSENT: Final = object()


def _shown(value: object) -> str:
    if value is _ABSENT:
        return "(not set)"
    if value is None:
        return "null"
    text = str(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _versions(numbers: Sequence[int]) -> str:
    """ "proposal 3", "proposals 3 and 4", "proposals 3, 4 and 5"."""
    named = [str(n) for n in numbers]
    if len(named) == 1:
        return f"proposal {named[0]}"
    return "proposals " + ", ".join(named[:-1]) + f" and {named[-1]}"


def competing_on_propose(number: int, others: Sequence[int], base: str) -> str:
    """The warning after proposing version ``number`` while ``others`` wait on the same
    ``base`` ("version 1", "the shipped file"); empty when none does."""
    if not others:
        return ""
    verb = "waits" if len(others) == 1 else "wait"
    return (
        f"Version {number} competes with pending {_versions(others)}, which also {verb} to "
        f"change {base}. Only one can be approved: approving one puts it in force and makes "
        "the other stale (it can then only be rejected, and its change must be proposed again "
        "on top of the approved version)."
    )


def competing_draft(others: Sequence[int], base: str) -> str:
    """The warning beside the proposal form while ``others`` wait on the same ``base``."""
    if not others:
        return ""
    verb, them = ("waits", "it") if len(others) == 1 else ("wait", "them")
    return (
        f"Pending {_versions(others)} also {verb} to change {base}: your proposal would compete "
        f"with {them}. Only one can be approved; approving one makes the other stale (only "
        "rejected, then proposed again on top of the approved version)."
    )


def competing_before_approval(number: int, others: Sequence[int]) -> str:
    """What approving version ``number`` does to the other pending versions on its base
    (shown beside the Approve button); empty when there are none."""
    if not others:
        return ""
    they = "it" if len(others) == 1 else "they"
    return (
        f"Approving version {number} (once it has every signature it needs) puts it in force "
        f"and makes pending {_versions(others)} stale: {they} can then no longer be approved, "
        f"only rejected, and must be proposed again on top of version {number}."
    )


def competing_after_approval(number: int, others: Sequence[int]) -> str:
    """What an approval that put version ``number`` in force did to the others."""
    if not others:
        return ""
    verb = "is" if len(others) == 1 else "are"
    return (
        f"Pending {_versions(others)} {verb} stale now, superseded by version {number}: "
        f"reject {'it' if len(others) == 1 else 'them'} and propose the change again on top "
        f"of version {number}."
    )
