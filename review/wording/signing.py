"""Proposing and signing wording changes.

* **Lint findings do not block a proposal** (the lint is a set of heuristics, and a product
  owner may need to put a deliberate exception in front of the approvers), but they are
  stored in the proposal's snapshot, shown in the approval view, and *approving* a version
  whose messages still have findings needs a note saying why they are acceptable. Findings
  are recomputed at signing time against the corpus as it is then, and the signature stores
  what the signer saw.
* **No silent overwrite.** A proposal records the version it was edited from. Proposing from
  a version that is no longer in force, or approving a proposal whose parent is no longer in
  force, is refused: it would undo the changes approved in between."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import Engine

from review.core import readable
from review.core.errors import InputError, StaleWriteError
from review.core.identity import Actor, Permission, Role, require
from review.core.terms import VersionStatus
from review.policy import signoff
from review.wording.compare import MessageChange, compare, setting_changes
from review.wording.drafts import MessageDraft, draft_yaml
from review.wording.findings import Finding
from review.wording.messages import WordingSet, parse_wording
from review.wording.terms import CorpusTerms, corpus_terms, lint_snapshot, lint_wording
from review.wording.versions import (
    KIND,
    WordingInForce,
    compliance_reason,
    in_force,
    parse_or_none,
    shipped_text,
    versions,
)

__all__ = [
    "VersionReview",
    "competing_numbers",
    "propose_edits",
    "propose_wording",
    "review_version",
    "sign_wording",
]


# ---------------------------------------------------------------------------------------------
# Proposing and signing
# ---------------------------------------------------------------------------------------------

_UNCHECKED: Literal["unchecked"] = "unchecked"


def _check_base(engine: Engine, current: WordingInForce, based_on: int | None) -> None:
    """Refuse (StaleWriteError) when the wording in force is not the one the draft started
    from: proposing it would silently drop what was approved in between."""
    if current.version_id != based_on:
        was = "the shipped file"
        if based_on is not None:
            try:
                was = f"version {signoff.get_version(engine, based_on).number}"
            except InputError:
                was = "a version that no longer exists"
        raise StaleWriteError(
            f"the wording in force changed while you were editing: you started from {was}, "
            f"but {current.label} is in force now"
            + (
                f" (approved {current.version.approved_on:%Y-%m-%d %H:%M} UTC)"
                if current.version is not None and current.version.approved_on
                else ""
            )
            + ". Nothing was proposed; review your draft against it and propose again."
        )


def propose_wording(
    engine: Engine,
    actor: Actor,
    yaml_text: str,
    rationale: str,
    *,
    based_on: int | Literal["unchecked"] | None = _UNCHECKED,
) -> int:
    """Store a complete wording file as the next version, pending sign-off.

    The file is validated (errors name the key); lint findings are stored in the snapshot but
    do not block the proposal. ``based_on`` is the id of the version the author edited
    (``None``: the shipped file); when given and no longer in force, nothing is stored.
    """
    require(actor, Permission.propose_policy)
    ws = parse_wording(yaml_text, "proposed refusal wording")
    if not rationale.strip():
        raise InputError("say why: a rationale is required for every change")
    current = in_force(engine)
    if based_on != _UNCHECKED:
        _check_base(engine, current, based_on if isinstance(based_on, int) else None)
    parent = current.wording if current.version is not None else None
    snapshot = lint_snapshot(ws, parent, corpus_terms(engine))
    return signoff.propose(engine, actor, KIND, yaml_text, rationale, snapshot=snapshot)


def competing_numbers(engine: Engine, version_id: int) -> list[int]:
    """The numbers of the other pending wording versions proposed on top of the same
    version as ``version_id`` (see :func:`review.policy.signoff.competing`)."""
    allv = versions(engine)
    v = next((x for x in allv if x.id == version_id), None)
    return [] if v is None else [x.number for x in signoff.competing(allv, v)]


def _next_number(engine: Engine) -> int:
    return max((v.number for v in versions(engine)), default=0) + 1


def propose_edits(
    engine: Engine,
    actor: Actor,
    edits: Mapping[str, MessageDraft],
    rationale: str,
    *,
    based_on: int | Literal["unchecked"] | None = _UNCHECKED,
    remove: Iterable[str] = (),
    allowed_contacts: Sequence[str] | None = None,
) -> int:
    """Apply edited messages to the wording in force and propose the result."""
    require(actor, Permission.propose_policy)
    current = in_force(engine)
    if based_on != _UNCHECKED:
        _check_base(engine, current, based_on if isinstance(based_on, int) else None)
    text = draft_yaml(
        current.text,
        edits,
        remove=remove,
        allowed_contacts=allowed_contacts,
        version=_next_number(engine),
        source="your draft",
    )
    return propose_wording(engine, actor, text, rationale, based_on=based_on)


@dataclass(frozen=True)
class VersionReview:
    """Everything an approver needs for one version."""

    version: signoff.VersionView
    wording: WordingSet
    parent: WordingSet | None
    parent_label: str
    changes: list[MessageChange]
    settings: list[tuple[str, str]]
    findings: dict[str, list[Finding]]
    compliance_reason: str
    stale_parent: str | None  # why it can no longer be approved, when its parent is not in force
    #: the other pending versions proposed on top of the same version (their numbers): an
    #: approval of this one makes them stale, and the other way round
    competitors: tuple[int, ...] = ()
    #: the number of the version approved since over this one's parent (None: not stale)
    superseded_by: int | None = None

    @property
    def lint_total(self) -> int:
        return sum(len(v) for v in self.findings.values())


def review_version(
    engine: Engine,
    version_id: int,
    terms: CorpusTerms | None = None,
    *,
    reveal_restricted: bool = True,
) -> VersionReview:
    """A version with its changes against its parent (or the shipped file), the lint of every
    message with the corpus as it is now, who must sign and why, and whether its parent is
    still in force. ``reveal_restricted=False`` masks restricted titles in setting changes."""
    v = signoff.get_version(engine, version_id)
    if v.kind != KIND:
        raise InputError(f"policy version {version_id} is not a refusal wording")
    ws = parse_wording(v.yaml_text, f"wording version {v.number}")
    parent: WordingSet | None = None
    parent_label = "nothing (first signed version)"
    if v.parent_id is not None:
        pv = signoff.get_version(engine, v.parent_id)
        parent = parse_wording(pv.yaml_text, f"wording version {pv.number}")
        parent_label = f"version {pv.number}"
    terms = terms or corpus_terms(engine)
    stale: str | None = None
    superseded_by: int | None = None
    competitors: tuple[int, ...] = ()
    if v.status == VersionStatus.pending:
        allv = versions(engine)
        current = signoff.current_approved(engine, KIND)
        current_id = current.id if current is not None else None
        if current_id == v.parent_id:
            competitors = tuple(x.number for x in signoff.competing(allv, v))
        else:
            superseded_by = current.number if current is not None else None
            since = f"version {current.number}" if current is not None else "another version"
            stale = (
                f"Version {v.number} was proposed as a change to {parent_label}, but {since} "
                "has been approved since; approving it would undo that change. Reject it and "
                "propose the edit again from the wording in force."
            )
    shown_parent = parent
    if shown_parent is None:
        shipped = parse_or_none(shipped_text())
        shown_parent = shipped
        parent_label = "the shipped file (no signed parent)"
    return VersionReview(
        v,
        ws,
        parent,
        parent_label,
        compare(shown_parent, ws),
        setting_changes(shown_parent, ws, reveal_restricted=reveal_restricted),
        lint_wording(ws, terms),
        compliance_reason(parent, ws),
        stale,
        competitors,
        superseded_by,
    )


def sign_wording(
    engine: Engine,
    actor: Actor,
    version_id: int,
    meaning: str,
    *,
    role: Role | None = None,
    note: str = "",
) -> int:
    """Approve or reject a pending wording version (see :func:`review.policy.signoff.sign` for the
    four-eyes rules). Also refused: approving a version whose parent is no longer in force,
    and approving a version with lint findings without a note. The signature stores the lint
    the signer saw and the fingerprint of the corpus terms it was computed with."""
    require(actor, Permission.approve_policy)
    terms = corpus_terms(engine)
    r = review_version(engine, version_id, terms)
    if meaning == "approve":
        if r.stale_parent:
            raise InputError(r.stale_parent)
        if r.lint_total and not note.strip():
            raise InputError(
                f"version {r.version.number} has {readable.count(r.lint_total, 'lint finding')}; "
                "approving it "
                "needs a note saying why they are acceptable"
            )
    snapshot = lint_snapshot(r.wording, r.parent, terms)
    return signoff.sign(
        engine,
        actor,
        version_id,
        meaning,
        role=role,
        note=note,
        data_fingerprint=terms.fingerprint(),
        metrics_snapshot=snapshot,
    )
