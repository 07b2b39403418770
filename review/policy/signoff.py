"""Policy versions and four-eyes sign-off, stored for good.

A change is proposed as a new version of a policy file (the full YAML text, its sha256, the
author, a rationale and what it was tuned on). Approvers sign it: each signature stores the
signer, role, meaning (approve or reject), time, the sha256 of the exact policy text, the
metrics snapshot the signer saw and a fingerprint of the labeled data. Signatures are
append-only and hash-chained across the whole table (:mod:`review.policy.chain`: since
revision 0016 a row also covers the kind, number, parent, author, text digest and required
roles of the version it signs, and is keyed with HMAC when the deployment has a signing
key, under a seal of that key on the chain head), so ``verify_chain`` detects an altered,
inserted or deleted row; it also re-hashes the stored text of every version, so a version
edited after it was proposed or signed is reported. The record's length is anchored outside
the two tables a writer would cut: the audit log holds every signature's id and hash, an
exported policy prints the head (:func:`recorded_head`), and with a key its seal vouches for
count and head (:func:`adopt_signing_key` seals a record explicitly).

What is in force is decided on verified facts only: ``in_force_version`` serves the latest
approved version whose approving signatures all come before the first row the chain check
does not verify and whose text is intact, and nothing when no such version is left (fail
closed). While the record does not verify, nothing can be proposed or approved. An approval
applies only on top of what is in force: a proposal whose parent is no longer the approved
version cannot be approved (only rejected). The author of a change can never approve it, and
the required approvals come from different people.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib
import math
import re
import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from review.core import readable
from review.core.errors import InputError, PermissionDenied, PolicyFileError
from review.core.identity import Actor, Permission, Role, require
from review.core.terms import VersionStatus
from review.policy import chain
from review.policy.chain import GENESIS, ChainStatus
from storage import changes
from storage.db import one_of, read_session, run_write
from storage.models import AuditLog, PolicyVersion, Setting, SignOff, SplitLock, utcnow

# Long module: versions, signing and what is put in force share the kinds registry, the text
# checks and the chain verdict; the row hashing itself lives in review.policy.chain.

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

    @property
    def file_version(self) -> int | None:
        """The ``version:`` field the author wrote inside the signed file: their own count,
        not the sign-off number (``number``); None when the file has none."""
        found = _FILE_VERSION.search(self.yaml_text)
        return int(found.group(1)) if found else None


#: The top-level ``version:`` line of a policy or wording file.
_FILE_VERSION = re.compile(r"^version:\s*(\d+)\s*(?:#.*)?$", re.M)


def _texts_with_parents(s: Session, rows: Sequence[Any]) -> dict[int, str]:
    """The YAML text of each of ``rows`` (versions) and of their parents, by version id (the
    parents' read in one query when not among ``rows``): what required roles are worked out
    from."""
    texts: dict[int, str] = {r.id: r.yaml_text for r in rows}
    missing = {r.parent_id for r in rows if r.parent_id and r.parent_id not in texts}
    if missing:
        texts.update(
            (vid, text)
            for vid, text in s.execute(
                select(PolicyVersion.id, PolicyVersion.yaml_text).where(
                    one_of(s, PolicyVersion.id, missing)
                )
            )
        )
    return texts


def _views(s: Session, rows: Iterable[PolicyVersion]) -> list[VersionView]:
    rows = list(rows)
    ids = [r.id for r in rows]
    sigs: dict[int, list[Signature]] = {}
    for sg in s.scalars(
        select(SignOff).where(one_of(s, SignOff.policy_version_id, ids)).order_by(SignOff.id)
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
    parents = _texts_with_parents(s, rows)
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


def _latest_approved(vs: Iterable[VersionView]) -> VersionView | None:
    approved = [v for v in vs if v.status == VersionStatus.approved]
    if not approved:
        return None
    return max(approved, key=lambda v: (v.approved_on or v.created_at, v.number))


def current_approved(engine: Engine, kind_name: str) -> VersionView | None:
    """The most recently approved version, as recorded (neither its text nor the chain is
    checked here: use :func:`in_force_version` for the policy to serve)."""
    return _latest_approved(versions(engine, kind_name))


def text_problems(v: VersionView) -> list[str]:
    """Why a version's stored text is not the text that was proposed and signed (empty when
    it is): the text no longer hashes to its sha256, or the sha256 column differs from what
    its signatures signed."""
    return _text_problems(
        v.kind, v.yaml_text, v.sha256, ((sg.id, sg.policy_sha256) for sg in v.signatures)
    )


def _verified(v: VersionView, break_at: int | None) -> VersionView:
    """The version as its verified signatures (those before ``break_at``) make it."""
    if break_at is None:
        return v
    return replace(v, signatures=tuple(sg for sg in v.signatures if sg.id < break_at))


def in_force_version(engine: Engine, kind_name: str) -> VersionView | None:
    """The policy in force: the latest approved version that is *verified*, or None when
    nothing of this kind has been approved and the chain verifies (the shipped file applies).

    Verified means: every signature that approves it comes before the first sign-off the
    chain check does not verify (:func:`chain_status`: altered, inserted, deleted before it,
    downgraded, or keyed and not checkable without the signing key), and its stored text
    still hashes to what was signed. When the chain and the texts are intact this is the
    latest approved version as recorded. When they are not, it is the last verified version
    (the pages say so in a blocking banner, :func:`integrity_banner`): an older decision
    that was signed, rather than a newer one nobody can show was.

    Raises :class:`TamperedPolicyError`, naming what broke, when the record shrank (an
    anchor knows of signatures it no longer holds, or with a key no seal vouches for its
    length: what they approved cannot be known, so neither an older version nor the shipped
    file is served), when there is no verified approved version but one is recorded, or
    when the chain is broken and nothing of this kind verifies: nothing is served (fail
    closed), and the decisions that need the policy are refused with that reason.
    """
    status = chain_status(engine)
    title = kind(kind_name).title
    if status.shrunk:
        raise TamperedPolicyError(
            f"the sign-off record is shorter than its anchors say, or its length is vouched "
            f"for by nothing ({'; '.join(status.shrunk[:2])}). Signatures that decide what is "
            f"in force may be missing, so no {title} version is in force, not even the shipped "
            "file. Run `workbench verify-signoffs` and restore the database from a backup "
            "taken before the change."
        )
    allv = versions(engine, kind_name)
    recorded = _latest_approved(allv)
    candidates = [
        vv
        for vv in (_verified(v, status.break_at) for v in allv)
        if vv.status == VersionStatus.approved and not text_problems(vv)
    ]
    best = _latest_approved(candidates)
    if best is not None:
        return best
    if recorded is None and status.intact:
        return None  # nothing approved yet, and the chain says so
    if recorded is not None and (problems := text_problems(recorded)):
        why = (
            f"approved {title} version {recorded.number} (policy version {recorded.id}) was "
            f"altered after it was signed: {'; '.join(problems)}"
        )
    else:
        why = f"the sign-off chain does not verify ({'; '.join(status.problems[:3])})"
    raise TamperedPolicyError(
        f"{why}. No verified {title} version is left to serve, so none is in force, and no "
        "older version is put in force in its place. Run `workbench verify-signoffs` and "
        "restore the database from a backup taken before the change."
    )


# --- checking the chain ---------------------------------------------------------------------

_CACHE_SECONDS = 30.0
_chain_cache: dict[tuple[object, ...], tuple[float, ChainStatus]] = {}


def clear_chain_cache() -> None:
    """Forget cached chain checks (the next :func:`chain_status` checks afresh)."""
    _chain_cache.clear()


def _version_fields(
    s: Session, rows: Iterable[PolicyVersion] | None = None
) -> dict[int, dict[str, Any]]:
    """The fields a format-2 row covers, for every stored version (or ``rows``)."""
    stored = (
        list(rows)
        if rows is not None
        else list(
            s.execute(
                select(
                    PolicyVersion.id,
                    PolicyVersion.kind,
                    PolicyVersion.number,
                    PolicyVersion.parent_id,
                    PolicyVersion.author,
                    PolicyVersion.sha256,
                    PolicyVersion.yaml_text,
                )
            ).all()
        )
    )
    texts = _texts_with_parents(s, stored)
    out: dict[int, dict[str, Any]] = {}
    for r in stored:
        roles: list[str] | None
        try:
            parent_text = texts.get(r.parent_id) if r.parent_id else None
            roles = [x.value for x in kind(r.kind).required_roles(r.yaml_text, parent_text)]
        except Exception:  # an unknown kind or unreadable text: never matches a signed row
            roles = None
        out[r.id] = chain.version_fields(r.kind, r.number, r.parent_id, r.author, r.sha256, roles)
    return out


def row_data(sg: SignOff) -> chain.RowData:
    return chain.RowData(
        sg.id,
        sg.policy_version_id,
        sg.signer,
        sg.role,
        sg.meaning,
        sg.note,
        sg.at,
        sg.policy_sha256,
        sg.data_fingerprint,
        sg.metrics_snapshot,
        sg.prev_hash,
        sg.row_hash,
        sg.chain_format,
        sg.hash_alg,
    )


def version_fields_of(engine: Engine, version_id: int) -> dict[str, Any]:
    """The fields of a stored version a format-2 signature covers, as they are now."""
    with read_session(engine) as s:
        rows = list(s.scalars(select(PolicyVersion).where(PolicyVersion.id == version_id)))
        if not rows:
            raise InputError(f"policy version {version_id} does not exist")
        return _version_fields(s, rows)[version_id]


def _head_value(head: Setting) -> dict[str, Any]:
    """The chain head's record ({} when it is not a mapping: the check then reports it)."""
    return dict(head.value) if isinstance(head.value, dict) else {}


#: What the audit log calls a signature on a policy version (written by :func:`sign`).
SIGN_ACTIONS = ("approve", "reject")


def _audit_filter() -> Any:
    return (AuditLog.entity == "policy_version") & AuditLog.action.in_(SIGN_ACTIONS)


def _audit_sigs(s: Session) -> list[chain.AuditSig]:
    """The signatures the audit log recorded, in order: each names its sign-off id and the
    hash it was stored with (entries without them still count)."""
    out = []
    for action, actor, at, after in s.execute(
        select(AuditLog.action, AuditLog.actor, AuditLog.at, AuditLog.after)
        .where(_audit_filter())
        .order_by(AuditLog.id)
    ):
        data = after if isinstance(after, dict) else {}
        sid = data.get("signoff")
        digest = data.get("row_hash")
        out.append(
            chain.AuditSig(
                sid if isinstance(sid, int) else None,
                digest if isinstance(digest, str) else None,
                str(action),
                str(actor),
                at,
            )
        )
    return out


def _check_chain(engine: Engine, key: bytes | None, *, require_seal: bool = True) -> ChainStatus:
    _load_builtin_kinds()
    with read_session(engine) as s:
        fields = _version_fields(s)
        rows = [row_data(sg) for sg in s.scalars(select(SignOff).order_by(SignOff.id))]
        head = s.get(Setting, CHAIN_KEY)
        value = _head_value(head) if head is not None else None
        audit = _audit_sigs(s)
    return chain.check(rows, fields, value, key, audit, require_seal=require_seal)


def chain_status(engine: Engine) -> ChainStatus:
    """The verdict on the sign-off rows and the chain head, with the deployment's signing key.

    Cached per database for up to 30 seconds, keyed by the chain head, the number of
    signatures, the highest sign-off and policy version ids and the key: a new signature or
    version is checked at once; an edit in place of a stored row (which changes none of
    those) shows within 30 seconds. ``workbench verify-signoffs`` always checks afresh."""
    key = chain.signing_key()
    with read_session(engine) as s:
        head = s.get(Setting, CHAIN_KEY)
        n, top = s.execute(select(func.count(SignOff.id), func.max(SignOff.id))).one()
        top_version = s.scalar(select(func.max(PolicyVersion.id)))
        logged = s.scalar(select(func.count(AuditLog.id)).where(_audit_filter()))
        value = _head_value(head) if head is not None else {}
    cache_key = (
        engine.url.render_as_string(hide_password=True),
        str(value.get("head")),
        value.get("count"),
        head is not None,
        str(value.get("seal") or value.get("mac")),
        logged,
        int(n or 0),
        top,
        top_version,
        chain.alg_for(key),
    )
    now = time.monotonic()
    hit = _chain_cache.get(cache_key)
    if hit is not None and now - hit[0] < _CACHE_SECONDS:
        return hit[1]
    status = _check_chain(engine, key)
    if len(_chain_cache) > 64:
        _chain_cache.clear()
    _chain_cache[cache_key] = (now, status)
    return status


def chain_head(engine: Engine) -> tuple[str, int]:
    """(the chain head hash, the number of signatures it records): what to record elsewhere
    and later compare with ``workbench verify-signoffs --head``."""
    with read_session(engine) as s:
        head = s.get(Setting, CHAIN_KEY)
        if head is None:
            return GENESIS, 0
        value = _head_value(head)
    count = value.get("count", 0)
    return str(value.get("head", GENESIS)), count if isinstance(count, int) else -1


def with_chain_head(engine: Engine, yaml_text: str) -> str:
    """An exported policy file with the chain head in a leading comment (comments are not
    part of what is signed, so the file still reads and hashes the same)."""
    head, count = chain_head(engine)
    return (
        f"# sign-off chain head: {head} ({readable.count(count, 'signature')}); record it "
        "elsewhere and "
        f"compare later with: workbench verify-signoffs --head {head}\n" + yaml_text
    )


def integrity_banner(engine: Engine) -> str | None:
    """What the pages show, blocking, when the sign-off record does not verify (None: it
    does): what is wrong, what is served instead of what is recorded, and what to do."""
    _load_builtin_kinds()
    status = chain_status(engine)
    problems = list(status.problems) + text_findings(engine)
    if not problems:
        return None
    shown = "; ".join(problems[:3]) + (
        f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
    )
    served = []
    for name in BUILTIN_KINDS:
        title = kind(name).title
        recorded = current_approved(engine, name)
        try:
            v = in_force_version(engine, name)
        except TamperedPolicyError:
            served.append(f"no {title} is served (no verified version): what needs it is refused")
            continue
        if v is None:
            served.append(f"the shipped {title} file applies (nothing approved)")
        elif recorded is not None and recorded.id != v.id:
            served.append(
                f"{title} version {v.number} is served, the last verified one (the record "
                f"says version {recorded.number})"
            )
        else:
            served.append(f"{title} version {v.number} is served (it verifies)")
    return (
        f"The sign-off record does not verify: {shown}. "
        + "; ".join(served)
        + ". Nothing can be approved while the chain is broken. Run `workbench "
        "verify-signoffs` and restore the database from a backup taken before the change."
    )


def text_findings(engine: Engine) -> list[str]:
    """Every stored version whose text is not what was proposed and signed."""
    _load_builtin_kinds()
    with read_session(engine) as s:
        signed: dict[int, list[tuple[int, str]]] = {}
        for sid, vid, digest in s.execute(
            select(SignOff.id, SignOff.policy_version_id, SignOff.policy_sha256).order_by(
                SignOff.id
            )
        ):
            signed.setdefault(vid, []).append((sid, digest))
        stored = s.execute(
            select(
                PolicyVersion.id,
                PolicyVersion.kind,
                PolicyVersion.number,
                PolicyVersion.yaml_text,
                PolicyVersion.sha256,
            ).order_by(PolicyVersion.id)
        ).all()
    problems: list[str] = []
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


def competing(allv: Sequence[VersionView], v: VersionView) -> list[VersionView]:
    """The other pending versions of ``v``'s kind proposed on top of the same version as
    ``v`` (oldest first): approving any one of them puts it in force, and every other then
    has a parent no longer in force, so it can no longer be approved (only rejected) and its
    change must be proposed again on top of the approved one."""
    return sorted(
        (
            x
            for x in allv
            if x.id != v.id
            and x.kind == v.kind
            and x.parent_id == v.parent_id
            and x.status == VersionStatus.pending
        ),
        key=lambda x: x.number,
    )


def stale_parent(engine: Engine, v: VersionView) -> str | None:
    """Why a pending version can no longer be approved (None: it can): it was proposed on top
    of a version that is no longer the one in force (approved as recorded)."""
    if v.status != VersionStatus.pending:
        return None
    current = current_approved(engine, v.kind)
    parent_number = None
    if v.parent_id is not None:
        parent_number = get_version(engine, v.parent_id).number
    return _stale_message(v, parent_number, current)


def _stale_in(s: Session, v: VersionView) -> str | None:
    """:func:`stale_parent` inside a write transaction."""
    rows = s.scalars(select(PolicyVersion).where(PolicyVersion.kind == v.kind))
    allv = _views(s, rows)
    parent = next((x for x in allv if x.id == v.parent_id), None)
    return _stale_message(v, parent.number if parent else None, _latest_approved(allv))


def _stale_message(
    v: VersionView, parent_number: int | None, current: VersionView | None
) -> str | None:
    current_id = current.id if current is not None else None
    if v.parent_id == current_id:
        return None
    title = kind(v.kind).title
    base = (
        f"version {parent_number}"
        if parent_number is not None
        else "nothing (no version was in force)"
    )
    now = f"version {current.number}" if current is not None else "no approved version"
    return (
        f"{title} version {v.number} was proposed on top of {base}, but {now} is in force "
        f"now: approving version {v.number} would undo what was decided in between. Reject "
        f"it, and propose the change again on top of the version in force ({now})."
    )


BUILTIN_KINDS = ("no_answer_policy", "refusal_wording")


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
    # checked afresh (not the pages' cached verdict): a write must not rely on a stale check
    problems = list(_check_chain(engine, chain.signing_key()).problems) + text_findings(engine)
    if problems:
        raise TamperedPolicyError(
            "nothing can be proposed while the sign-off record does not verify: "
            f"{'; '.join(problems[:3])}. Run `workbench verify-signoffs`."
        )
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


def _signing_role(actor: Actor, meaning: str, role: Role | None, note: str) -> Role:
    """The approver role the actor signs in (the first they hold when none is given); refused:
    an unknown meaning, a role not held, a rejection without a note."""
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
    return role


def _refuse_signer(
    row: PolicyVersion, view: VersionView, actor: Actor, role: Role, meaning: str
) -> None:
    """Who may not sign this version: its author, a role it does not need or already has, a
    person who already approved it in another role (approving again); nor anyone once it is
    no longer pending."""
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


def _refuse_version(s: Session, row: PolicyVersion, view: VersionView, meaning: str) -> None:
    """What makes a version unsignable: its text no longer matching its sha256; and to
    approve it, a parent no longer in force or a test-split tuning without an override note."""
    problems = text_problems(view)
    if problems:
        raise TamperedPolicyError(f"version {row.number} cannot be signed: {'; '.join(problems)}")
    if meaning == "approve":
        stale = _stale_in(s, view)
        if stale:
            raise InputError(stale)
    if meaning == "approve" and needs_override(row.tuned_on_split) and not row.override_note:
        raise InputError(
            f"this proposal was tuned on the {row.tuned_on_split} data it is reported on; "
            "it cannot be approved without an override note on the record (propose it "
            "again with one)"
        )


def _locked_chain_head(s: Session) -> Setting:
    """The chain head setting, locked for this transaction (created for the first signature)."""
    head = s.get(Setting, CHAIN_KEY, with_for_update=True)
    if head is None:
        head = Setting(key=CHAIN_KEY, value={"count": 0, "head": GENESIS}, version=1)
        s.add(head)
        s.flush()
    return head


def _seal_for_signing(s: Session, head: Setting, key: bytes | None, alg: str) -> chain.Seal | None:
    """The seal the new head keeps (None without a key). Refused: a chain keyed with another
    key or none configured, a record sealed with a key while none is configured, a record not
    sealed with this key."""
    keyed = s.scalar(
        select(SignOff.hash_alg)
        .where(SignOff.hash_alg.like(chain.KEYED_PREFIX + "%"))
        .order_by(SignOff.id.desc())
        .limit(1)
    )
    if keyed is not None and keyed != alg:
        raise InputError(
            f"the sign-off chain is hashed with a signing key ({keyed}) and "
            + ("no signing key is configured" if key is None else f"this one is {alg}")
            + f": nothing was signed. Configure the same key ({chain.ENV_KEY}, or "
            "[signing] key in the secrets)."
        )
    current = _head_value(head)
    seal: chain.Seal | None = None
    if key is None and (sealed := chain.sealed_alg(current)) is not None:
        raise InputError(
            f"the sign-off chain is sealed with a signing key ({sealed}) and no signing key "
            f"is configured: nothing was signed. Configure the same key ({chain.ENV_KEY}, "
            "or [signing] key in the secrets)."
        )
    if key is not None:
        algs = list(s.execute(select(SignOff.row_hash, SignOff.hash_alg).order_by(SignOff.id)))
        seal, why = chain.read_seal(current, key, [(str(h), str(a)) for h, a in algs])
        if seal is None:
            raise InputError(
                f"the sign-off record is not sealed with this signing key ({why}): nothing "
                "was signed. Check the record with `workbench verify-signoffs` and, if it "
                "is the one you trust, adopt the key with `workbench adopt-signing-key`."
            )
    return seal


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
    without an override note; approving a proposal whose parent is no longer the approved
    version in force (it would undo what was approved in between: it can only be rejected);
    approving while the sign-off chain does not verify; any signature when the chain is
    keyed and this process has no key or another one.
    """
    require(actor, Permission.approve_policy)
    role = _signing_role(actor, meaning, role, note)
    lock_ids = sorted(set(lock_case_ids))
    key = chain.signing_key()
    alg = chain.alg_for(key)
    if meaning == "approve":
        status = _check_chain(engine, key)  # afresh, as for a proposal
        if not status.intact:
            raise InputError(
                "the sign-off chain does not verify, so nothing can be approved until it is "
                f"repaired: {'; '.join(status.problems[:3])}. Run `workbench verify-signoffs`."
            )

    def work(s: Session) -> int:
        row = s.get(PolicyVersion, version_id, with_for_update=True)
        if row is None:
            raise InputError(f"policy version {version_id} does not exist")
        view = _views(s, [row])[0]
        _refuse_signer(row, view, actor, role, meaning)
        _refuse_version(s, row, view, meaning)
        head = _locked_chain_head(s)
        prev = str(head.value["head"])
        seal = _seal_for_signing(s, head, key, alg)
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
            row_hash=f"pending-{secrets.token_hex(16)}",
            chain_format=chain.CURRENT_FORMAT,
            hash_alg=alg,
        )
        s.add(sg)
        s.flush()
        s.refresh(sg)
        fields = _version_fields(s, [row])[row.id]
        digest = chain.row_hash(prev, chain.payload(row_data(sg), fields), alg, key)
        assert digest is not None  # the key that names ``alg`` is at hand
        sg.row_hash = digest
        count = int(head.value["count"]) + 1
        head.value = chain.head_record(key, count, digest, seal)
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
    """Problems in the sign-off chain (empty when intact), checked afresh with the
    deployment's signing key: altered rows (their own fields, and for rows signed since
    revision 0016 the kind, number, parent, author, sha256 and required roles of the version
    they sign), rows deleted or inserted in the middle, rows deleted from the end (checked
    against the chain head), rows downgraded to the old format or to no key, keyed rows that
    cannot be checked without the key; then every policy version whose stored text no longer
    hashes to the sha256 it was proposed with, or whose sha256 is not the one its signatures
    signed (a text edited, or text and sha256 rewritten together, in the database).

    Not covered: ``split_locks``. A signature does not hash them (it records the labeled
    data it saw through ``data_fingerprint``; the locks only keep those cases' splits as they
    were), and deleting a case removes its lock, so a missing lock cannot be told from a
    legitimate one here."""
    status = _check_chain(engine, chain.signing_key())
    return list(status.problems) + text_findings(engine)


def check_afresh(engine: Engine) -> ChainStatus:
    """The chain verdict with the deployment's signing key, checked now (not cached)."""
    return _check_chain(engine, chain.signing_key())


def recorded_head(engine: Engine, recorded: str) -> tuple[bool, str]:
    """Whether the stored record still holds a chain head recorded elsewhere (an exported
    policy prints it), and what that means. The record holds it when one of its signatures
    has that hash (the chain makes every row before it the same as when it was recorded);
    signatures added since are fine, a record rewritten or cut back before it is not."""
    wanted = recorded.strip().lower()
    with read_session(engine) as s:
        ids = list(s.execute(select(SignOff.id, SignOff.row_hash).order_by(SignOff.id)))
    if wanted == GENESIS:
        return (
            True,
            f"the recorded head is the empty record's; {readable.count(len(ids), 'signature')} "
            "since",
        )
    at = next((i for i, (_, h) in enumerate(ids) if h == wanted), None)
    if at is None:
        return False, (
            f"HEAD MISMATCH: no stored signature has the recorded head {wanted} "
            f"({len(ids)} stored): the record was rewritten or cut back since it was recorded"
        )
    since = len(ids) - at - 1
    return True, (
        f"the recorded head is sign-off {ids[at][0]}, signature {at + 1} of {len(ids)}"
        + (f"; {since} signed since" if since else "")
    )


@dataclass(frozen=True)
class Adoption:
    """What adopting the signing key sealed (``already``: it was sealed with it before)."""

    alg: str
    count: int
    plain: int
    keyed: int
    head: str
    already: bool = False


def adopt_signing_key(
    engine: Engine, actor: Actor, *, expected_head: str | None = None
) -> Adoption:
    """Seal the record as it stands with the deployment's signing key: from then on, with the
    key configured, the record verifies only under this seal, and every new signature is keyed.

    The key holder vouches for what is sealed, so it is checked first: every row's hash, the
    head, the signatures the audit log recorded, the policy texts, and ``expected_head`` (a
    head recorded elsewhere) when given. Refused when any of that fails, when no key is
    configured, and when the record is sealed with another key (rotation is not supported).
    Written to the audit log (``adopt_signing_key``)."""
    if Role.admin not in actor.roles:
        raise PermissionDenied("adopting a signing key needs the admin role")
    key = chain.signing_key()
    if key is None:
        raise InputError(
            f"no signing key is configured: set {chain.ENV_KEY} (the same key the pages read "
            "from [signing] key in the secrets)"
        )
    alg = chain.alg_for(key)
    status = _check_chain(engine, key, require_seal=False)
    with read_session(engine) as s:
        stored = s.get(Setting, CHAIN_KEY)
        before = _head_value(stored) if stored is not None else None
    if status.seal is not None and not status.seal.legacy and not status.problems:
        return Adoption(alg, status.count, len(status.plain), len(status.keyed), status.head, True)
    if chain.sealed_alg(before) is not None and status.seal is None:
        raise InputError(
            f"the record carries a seal this key cannot confirm ({status.seal_problem}): it "
            "was sealed with another key, which cannot be replaced, or the seal was forged"
        )
    problems = list(status.problems) + text_findings(engine)
    if problems:
        raise TamperedPolicyError(
            "the sign-off record does not verify, so the signing key cannot adopt it: "
            f"{'; '.join(problems[:3])}. Restore a backup you trust first."
        )
    if expected_head is not None:
        ok, why = recorded_head(engine, expected_head)
        if not ok:
            raise InputError(f"{why}; nothing was sealed")

    def work(s: Session) -> Adoption:
        head = s.get(Setting, CHAIN_KEY, with_for_update=True)
        n = int(s.scalar(select(func.count(SignOff.id))) or 0)
        last = s.scalar(select(SignOff.row_hash).order_by(SignOff.id.desc()).limit(1))
        now_head = str(last) if last is not None else GENESIS
        if n != status.count or now_head != (status.head if n else GENESIS):
            raise InputError(
                "the record changed while it was checked: nothing was sealed; run again"
            )
        seal = chain.Seal(alg, n, now_head, utcnow().isoformat(), actor.email)
        value = chain.head_record(key, n, now_head, seal)
        if head is None:
            s.add(Setting(key=CHAIN_KEY, value=value, version=1, updated_by=actor.email))
        else:
            head.value = value
            head.version += 1
            head.updated_at = utcnow()
            head.updated_by = actor.email
        done = Adoption(alg, n, len(status.plain), len(status.keyed), now_head)
        changes.record(
            s,
            actor.email,
            "adopt_signing_key",
            "signoff_chain",
            alg,
            before,
            {"alg": alg, "count": n, "head": now_head, "plain": done.plain, "keyed": done.keyed},
        )
        return done

    return run_write(engine, work)


def locked_case_ids(engine: Engine, case_ids: Iterable[int]) -> set[int]:
    ids = list(case_ids)
    with read_session(engine) as s:
        return set(s.scalars(select(SplitLock.case_id).where(one_of(s, SplitLock.case_id, ids))))


def signing_roles(actor: Actor, version: VersionView) -> list[Role]:
    """The roles ``actor`` holds that ``version`` still needs (product owner first)."""
    return [
        role
        for role in (Role.product_owner, Role.compliance)
        if role in actor.roles and role.value in version.missing_roles
    ]
