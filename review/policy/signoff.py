"""Policy versions and four-eyes sign-off, stored for good.

A change is proposed as a new version of a policy file (the full YAML text, its sha256, the
author, a rationale and what it was tuned on). Approvers sign it: each signature stores the
signer, role, meaning (approve or reject), time, the sha256 of the exact policy text, the
metrics snapshot the signer saw and a fingerprint of the labeled data. Signatures are
append-only and hash-chained across the whole table, so ``verify_chain`` detects an altered,
inserted or deleted row; it also re-hashes the stored text of every version, so a version
edited after it was proposed or signed is reported, and ``in_force_version`` refuses to serve
an approved version whose text no longer matches what was signed. The author of a change can
never approve it, and the required approvals come from different people.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from review.core.errors import InputError, PermissionDenied, PolicyFileError
from review.core.identity import Actor, Permission, Role, require
from review.core.terms import VersionStatus
from storage import changes
from storage.db import read_session, run_write
from storage.models import PolicyVersion, Setting, SignOff, SplitLock, utcnow

GENESIS = "0" * 64
CHAIN_KEY = "signoff_chain"
APPROVER_ROLES = (Role.product_owner, Role.compliance)
# Modules that register the kinds the workbench ships; loaded before the stored texts are
# checked, so `workbench verify-signoffs` knows every kind without importing them itself.
BUILTIN_KIND_MODULES = ("review.thresholds.thresholds", "review.wording.versions")


class TamperedPolicyError(PolicyFileError):
    """A stored policy version's text no longer matches the sha256 that was proposed and
    signed: it was edited in the database. Nothing is served from it."""


@dataclass(frozen=True)
class Kind:
    """A kind of signed policy file: how to validate it, hash it, and who must approve."""

    name: str
    title: str
    validate: Callable[[str, str], object]
    canonical: Callable[[str], str]
    required_roles: Callable[[str, str | None], frozenset[Role]]


_KINDS: dict[str, Kind] = {}


def register_kind(kind: Kind) -> None:
    _KINDS[kind.name] = kind


def kind(name: str) -> Kind:
    try:
        return _KINDS[name]
    except KeyError:
        raise InputError(f"unknown policy kind {name!r}") from None


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@lru_cache(maxsize=128)
def _canonical_digest(kind_name: str, text: str) -> str:
    """sha256 of a text's canonical form (what a signature covers); raises when the text no
    longer reads as a file of its kind."""
    return sha256_text(kind(kind_name).canonical(text))


def _text_problems(
    kind_name: str, yaml_text: str, sha256: str, signed: Iterable[tuple[int, str]]
) -> list[str]:
    """Why a stored version's text is not what was proposed and signed (empty when it is).

    ``signed`` holds (sign-off id, policy_sha256) of its signatures: the sha256 each signer
    signed, which the hash chain protects. Only the canonical form is covered, so an edit
    that leaves the meaning unchanged (a comment, the layout) is not a change here either."""
    sigs = list(signed)
    problems: list[str] = []
    other = sorted({digest for _, digest in sigs if digest != sha256})
    if other:
        ids = ", ".join(str(i) for i, digest in sigs if digest != sha256)
        problems.append(
            f"its sha256 column ({sha256[:12]}…) is not the sha256 sign-off {ids} signed "
            f"({', '.join(d[:12] + '…' for d in other)}): the version was rewritten after signing"
        )
    try:
        digest = _canonical_digest(kind_name, yaml_text)
    except InputError as exc:
        problems.append(f"its stored text no longer reads as a valid policy file ({exc})")
        return problems
    except Exception as exc:  # a canonical form that cannot be computed is not the signed one
        problems.append(f"its stored text cannot be hashed any more ({type(exc).__name__})")
        return problems
    if digest != sha256:
        what = (
            "the sha256 its signatures recorded"
            if sigs
            else "the sha256 recorded when it was proposed"
        )
        problems.append(
            f"its stored text no longer hashes to {what} ({sha256[:12]}…, now "
            f"{digest[:12]}…): the text was edited in the database"
        )
    return problems


def _load_builtin_kinds() -> None:
    for name in BUILTIN_KIND_MODULES:
        importlib.import_module(name)


@dataclass(frozen=True)
class Signature:
    id: int
    signer: str
    role: str
    meaning: str
    note: str
    at: dt.datetime
    policy_sha256: str
    data_fingerprint: str
    metrics_snapshot: dict[str, Any]


@dataclass(frozen=True)
class VersionView:
    id: int
    kind: str
    number: int
    yaml_text: str
    sha256: str
    parent_id: int | None
    author: str
    rationale: str
    tuned_on_split: str | None
    override_note: str | None
    snapshot: dict[str, Any] | None
    created_at: dt.datetime
    signatures: tuple[Signature, ...]
    required_roles: frozenset[Role]

    @property
    def status(self) -> str:
        if any(s.meaning == "reject" for s in self.signatures):
            return VersionStatus.rejected
        approved = {Role(s.role) for s in self.signatures if s.meaning == "approve"}
        if self.required_roles <= approved:
            return VersionStatus.approved
        return VersionStatus.pending

    @property
    def missing_roles(self) -> list[str]:
        approved = {s.role for s in self.signatures if s.meaning == "approve"}
        return sorted(r.value for r in self.required_roles if r.value not in approved)

    @property
    def approved_on(self) -> dt.datetime | None:
        if self.status != VersionStatus.approved:
            return None
        return max(s.at for s in self.signatures if s.meaning == "approve")


def _views(s: Session, rows: Iterable[PolicyVersion]) -> list[VersionView]:
    rows = list(rows)
    ids = [r.id for r in rows]
    sigs: dict[int, list[Signature]] = {}
    for sg in s.scalars(
        select(SignOff).where(SignOff.policy_version_id.in_(ids)).order_by(SignOff.id)
    ):
        sigs.setdefault(sg.policy_version_id, []).append(
            Signature(
                sg.id,
                sg.signer,
                sg.role,
                sg.meaning,
                sg.note,
                sg.at,
                sg.policy_sha256,
                sg.data_fingerprint,
                dict(sg.metrics_snapshot),
            )
        )
    parents = {r.id: r.yaml_text for r in rows}
    missing = {r.parent_id for r in rows if r.parent_id and r.parent_id not in parents}
    if missing:
        parents.update(
            dict(
                s.execute(
                    select(PolicyVersion.id, PolicyVersion.yaml_text).where(
                        PolicyVersion.id.in_(missing)
                    )
                ).all()
            )
        )
    out = []
    for r in rows:
        k = kind(r.kind)
        parent_text = parents.get(r.parent_id) if r.parent_id else None
        out.append(
            VersionView(
                r.id,
                r.kind,
                r.number,
                r.yaml_text,
                r.sha256,
                r.parent_id,
                r.author,
                r.rationale,
                r.tuned_on_split,
                r.override_note,
                r.snapshot,
                r.created_at,
                tuple(sigs.get(r.id, [])),
                k.required_roles(r.yaml_text, parent_text),
            )
        )
    return out


def versions(engine: Engine, kind_name: str) -> list[VersionView]:
    """Every version of a policy kind, newest first."""
    with read_session(engine) as s:
        rows = s.scalars(
            select(PolicyVersion)
            .where(PolicyVersion.kind == kind_name)
            .order_by(PolicyVersion.number.desc())
        )
        return _views(s, rows)


def get_version(engine: Engine, version_id: int) -> VersionView:
    with read_session(engine) as s:
        row = s.get(PolicyVersion, version_id)
        if row is None:
            raise InputError(f"policy version {version_id} does not exist")
        return _views(s, [row])[0]


def current_approved(engine: Engine, kind_name: str) -> VersionView | None:
    """The most recently approved version, as recorded (its text is not checked here: use
    :func:`in_force_version` for the policy to serve)."""
    approved = [v for v in versions(engine, kind_name) if v.status == VersionStatus.approved]
    if not approved:
        return None
    return max(approved, key=lambda v: (v.approved_on or v.created_at, v.number))


def text_problems(v: VersionView) -> list[str]:
    """Why a version's stored text is not the text that was proposed and signed (empty when
    it is): the text no longer hashes to its sha256, or the sha256 column differs from what
    its signatures signed."""
    return _text_problems(
        v.kind, v.yaml_text, v.sha256, ((sg.id, sg.policy_sha256) for sg in v.signatures)
    )


def in_force_version(engine: Engine, kind_name: str) -> VersionView | None:
    """The policy in force: the most recently approved version, or None when nothing of this
    kind has been approved yet.

    Raises :class:`TamperedPolicyError`, naming the version, when that version's stored text
    no longer matches the sha256 its signatures recorded (it was edited in the database after
    signing). It does not fall back to an older approved version: that version was
    superseded by a signed decision, and serving it silently would put a policy in force
    that nobody approved to be in force now, while the record says otherwise. Nothing is
    served until the database is restored from a backup (or the text is put back), and
    ``workbench verify-signoffs`` reports the version.
    """
    v = current_approved(engine, kind_name)
    if v is None:
        return None
    problems = text_problems(v)
    if problems:
        raise TamperedPolicyError(
            f"approved {kind(kind_name).title} version {v.number} (policy version {v.id}) "
            f"was altered after it was signed: {'; '.join(problems)}. It is not served, and "
            "no older version is put in force in its place. Run `workbench verify-signoffs` "
            "and restore the database from a backup taken before the change."
        )
    return v


#: Splits a proposal is also reported on: tuned there, its figures are not on unseen data
#: (the test split; audited traces, which form one sample). Approval needs an override note.
REPORTED_ON = frozenset({"test", "audit"})


def needs_override(tuned_on_split: str | None) -> bool:
    """Whether a proposal tuned on this split needs an override note to be approved."""
    return tuned_on_split in REPORTED_ON


def propose(
    engine: Engine,
    actor: Actor,
    kind_name: str,
    yaml_text: str,
    rationale: str,
    *,
    tuned_on_split: str | None = None,
    override_note: str | None = None,
    snapshot: dict[str, Any] | None = None,
) -> int:
    """Store a proposed version (validated first). Equal to the policy in force: refused.
    Equal to an older version: allowed, that is a rollback, and it is signed again."""
    require(actor, Permission.propose_policy)
    k = kind(kind_name)
    k.validate(yaml_text, f"proposed {k.title}")
    if not rationale.strip():
        raise InputError("say why: a rationale is required for every change")
    digest = sha256_text(k.canonical(yaml_text))
    current = current_approved(engine, kind_name)
    if current is not None and current.sha256 == digest:
        raise InputError(f"nothing changed: this equals the approved version {current.number}")

    def work(s: Session) -> int:
        number = (
            int(
                s.scalar(
                    select(func.max(PolicyVersion.number)).where(PolicyVersion.kind == kind_name)
                )
                or 0
            )
            + 1
        )
        row = PolicyVersion(
            kind=kind_name,
            number=number,
            yaml_text=yaml_text,
            sha256=digest,
            parent_id=current.id if current else None,
            author=actor.email,
            rationale=rationale.strip(),
            tuned_on_split=tuned_on_split,
            override_note=(override_note or "").strip() or None,
            snapshot=json_safe(snapshot) if snapshot is not None else None,
        )
        s.add(row)
        s.flush()
        changes.record(
            s,
            actor.email,
            "propose",
            "policy_version",
            row.id,
            None,
            {
                "kind": kind_name,
                "number": number,
                "sha256": digest,
                "tuned_on_split": tuned_on_split,
            },
        )
        return row.id

    return run_write(engine, work)


def json_safe(value: Any) -> Any:
    """Snapshots are stored as JSON: NaN/inf become null (PostgreSQL's JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return json_safe(value.item())
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    return value


def _row_hash(prev: str, fields: dict[str, Any]) -> str:
    payload = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256((prev + payload).encode("utf-8")).hexdigest()


def _hash_fields(sg: SignOff) -> dict[str, Any]:
    at = sg.at.astimezone(dt.UTC)
    return {
        "id": sg.id,
        "policy_version_id": sg.policy_version_id,
        "signer": sg.signer,
        "role": sg.role,
        "meaning": sg.meaning,
        "note": sg.note,
        "at": at.isoformat(),
        "policy_sha256": sg.policy_sha256,
        "data_fingerprint": sg.data_fingerprint,
        "metrics_snapshot": sg.metrics_snapshot,
    }


def sign(
    engine: Engine,
    actor: Actor,
    version_id: int,
    meaning: str,
    *,
    role: Role | None = None,
    note: str = "",
    data_fingerprint: str = "",
    metrics_snapshot: dict[str, Any] | None = None,
    lock_case_ids: Iterable[int] = (),
) -> int:
    """Append a signature (approve or reject) to a pending version.

    Refused: the author signing their own change; a role the signer does not hold or that
    is not an approver role; a second signature by the same role; a second approval by the
    same person in another role (the required approvals come from different people: a user
    holding both roles gives one of them; a rejection after their own approval is still
    allowed, it can only stop a change); a version that is no longer pending; a version whose
    stored text no longer matches its sha256; approving a proposal tuned on the test split
    without an override note.
    """
    require(actor, Permission.approve_policy)
    if meaning not in ("approve", "reject"):
        raise InputError("meaning must be approve or reject")
    held = [r for r in APPROVER_ROLES if r in actor.roles]
    if role is None:
        if not held:
            raise PermissionDenied("signing needs the product_owner or compliance role")
        role = held[0]
    if role not in held:
        raise PermissionDenied(f"{actor.name} does not hold the {role.value} role")
    if meaning == "reject" and not note.strip():
        raise InputError("say why: a rejection needs a note")
    lock_ids = sorted(set(lock_case_ids))

    def work(s: Session) -> int:
        row = s.get(PolicyVersion, version_id, with_for_update=True)
        if row is None:
            raise InputError(f"policy version {version_id} does not exist")
        view = _views(s, [row])[0]
        if row.author.strip().casefold() == actor.email.strip().casefold():
            raise PermissionDenied(
                "the author of a change can never approve or reject it: another person must sign"
            )
        if view.status != VersionStatus.pending:
            raise InputError(f"version {row.number} is already {view.status}")
        if role not in view.required_roles:
            raise InputError(f"this change does not need a {role.value} signature")
        if any(sg.role == role.value for sg in view.signatures):
            raise InputError(f"the {role.value} signature is already on version {row.number}")
        if meaning == "approve":
            me = actor.email.strip().casefold()
            for given in view.signatures:
                if given.meaning == "approve" and given.signer.strip().casefold() == me:
                    raise PermissionDenied(
                        f"{actor.email} already approved version {row.number} as {given.role}: "
                        "the required approvals must come from different people, so another "
                        f"person holding the {role.value} role must sign"
                    )
        problems = text_problems(view)
        if problems:
            raise TamperedPolicyError(
                f"version {row.number} cannot be signed: {'; '.join(problems)}"
            )
        if meaning == "approve" and needs_override(row.tuned_on_split) and not row.override_note:
            raise InputError(
                f"this proposal was tuned on the {row.tuned_on_split} data it is reported on; "
                "it cannot be approved without an override note on the record (propose it "
                "again with one)"
            )
        head = s.get(Setting, CHAIN_KEY, with_for_update=True)
        if head is None:
            head = Setting(key=CHAIN_KEY, value={"count": 0, "head": GENESIS}, version=1)
            s.add(head)
            s.flush()
        prev = str(head.value["head"])
        sg = SignOff(
            policy_version_id=row.id,
            signer=actor.email,
            role=role.value,
            meaning=meaning,
            note=note.strip(),
            at=utcnow(),
            policy_sha256=row.sha256,
            data_fingerprint=data_fingerprint,
            metrics_snapshot=json_safe(metrics_snapshot or {}),
            prev_hash=prev,
            row_hash="pending",
        )
        s.add(sg)
        s.flush()
        s.refresh(sg)
        sg.row_hash = _row_hash(prev, _hash_fields(sg))
        head.value = {"count": int(head.value["count"]) + 1, "head": sg.row_hash}
        head.version += 1
        head.updated_at = utcnow()
        head.updated_by = actor.email
        if meaning == "approve":
            for cid in lock_ids:
                if s.get(SplitLock, cid) is None:
                    s.add(SplitLock(case_id=cid, signoff_id=sg.id))
        s.flush()
        changes.record(
            s,
            actor.email,
            meaning,
            "policy_version",
            row.id,
            None,
            {
                "signoff": sg.id,
                "role": role.value,
                "row_hash": sg.row_hash,
                "policy_sha256": row.sha256,
            },
        )
        return sg.id

    return run_write(engine, work)


def verify_chain(engine: Engine) -> list[str]:
    """Problems in the sign-off chain (empty when intact): altered rows, rows deleted or
    inserted in the middle, and rows deleted from the end (checked against the chain head);
    then every policy version whose stored text no longer hashes to the sha256 it was proposed
    with, or whose sha256 is not the one its signatures signed (a text edited, or text and
    sha256 rewritten together, in the database).

    Not covered: ``split_locks``. A signature does not hash them (it records the labeled
    data it saw through ``data_fingerprint``; the locks only keep those cases' splits as they
    were), and deleting a case removes its lock, so a missing lock cannot be told from a
    legitimate one here."""
    _load_builtin_kinds()
    problems: list[str] = []
    signed: dict[int, list[tuple[int, str]]] = {}
    prev = GENESIS
    count = 0
    with read_session(engine) as s:
        for sg in s.scalars(select(SignOff).order_by(SignOff.id)).yield_per(1000):
            count += 1
            if sg.prev_hash != prev:
                problems.append(
                    f"sign-off {sg.id}: does not follow the previous signature (a row before "
                    "it was deleted or changed)"
                )
            expected = _row_hash(sg.prev_hash, _hash_fields(sg))
            if expected != sg.row_hash:
                problems.append(f"sign-off {sg.id}: its content was altered after signing")
            prev = sg.row_hash
            signed.setdefault(sg.policy_version_id, []).append((sg.id, sg.policy_sha256))
        head = s.get(Setting, CHAIN_KEY)
        stored = s.execute(
            select(
                PolicyVersion.id,
                PolicyVersion.kind,
                PolicyVersion.number,
                PolicyVersion.yaml_text,
                PolicyVersion.sha256,
            ).order_by(PolicyVersion.id)
        ).all()
    if head is None:
        if count:
            problems.append("the chain head record is missing")
    else:
        if int(head.value["count"]) != count:
            problems.append(
                f"the chain head records {head.value['count']} signatures but "
                f"{count} are stored (rows were deleted or added)"
            )
        elif str(head.value["head"]) != prev:
            problems.append("the last signature does not match the chain head")
    for vid, kind_name, number, yaml_text, sha256 in stored:
        if kind_name not in _KINDS:
            problems.append(
                f"policy version {vid}: its kind {kind_name!r} is unknown here, so its text "
                "cannot be checked"
            )
            continue
        label = f"policy version {vid} ({_KINDS[kind_name].title} version {number})"
        for p in _text_problems(kind_name, yaml_text, sha256, signed.get(vid, [])):
            problems.append(f"{label}: {p}")
    return problems


def locked_case_ids(engine: Engine, case_ids: Iterable[int]) -> set[int]:
    ids = list(case_ids)
    with read_session(engine) as s:
        return set(s.scalars(select(SplitLock.case_id).where(SplitLock.case_id.in_(ids))))


def signing_roles(actor: Actor, version: VersionView) -> list[Role]:
    """The roles ``actor`` holds that ``version`` still needs (product owner first)."""
    return [
        role
        for role in (Role.product_owner, Role.compliance)
        if role in actor.roles and role.value in version.missing_roles
    ]
