"""The hash chain over sign-offs: what each row hash covers, the optional signing key, and the
check of a whole chain (pure: rows in, findings out; :mod:`review.policy.signoff` reads the
rows and decides what is served).

**What a row hash covers.** Every row hashes the previous row's hash (so rows cannot be
deleted, inserted or reordered in the middle) and a JSON payload. The payload format is
recorded per row (``signoffs.chain_format``):

* format 1, rows signed before revision 0016: the signature's own fields (id, version id,
  signer, role, meaning, note, time, the policy sha256 signed, data fingerprint, metrics).
* format 2, every row signed since: the same, plus the format and the hash algorithm
  themselves, plus the signed version's kind, number, parent, author, sha256 (the digest of
  its canonical text) and the roles its approval requires. Editing any of those on the
  version breaks the signature rows that cover it.

**No silent downgrade.** The format only moves forward: a format-1 row after a format-2 row
is reported, and so is a plain row after a keyed one (with or without the key). Both facts
sit in the hashed payload of a format-2 row, so turning such a row into a format-1 or plain
row means recomputing its hash and every later one.

**The signing key.** When the deployment provides one (``WORKBENCH_SIGNING_KEY``, or the
``[signing] key`` of the Streamlit secrets, which the pages pass in with
:func:`set_signing_key`), new rows are hashed with HMAC-SHA256 under that key and record
``hmac-sha256:<key id>``; the key id is an HMAC of a fixed label, not the key. The chain head
then carries the key's *seal*: an HMAC over the number of signatures, the last hash and what
the key adopted. With a key configured, a record verifies only when the head carries a valid
seal of that key: a missing seal, a seal of another key, or a seal that does not match the
stored head fails, and so does a plain row the seal does not cover. Plain rows are covered
only when the key holder adopted them (``workbench adopt-signing-key``: an explicit, audited
step that checks the record and seals it as it stands). So someone with write access to the
database alone cannot recompute the record as plain rows, drop the seal, or cut rows off.
Without the key, keyed rows "cannot be checked", which is not the same as tampered, but they
are not verified either, so nothing they approved is served. Key rotation is not supported:
a chain keeps the key it started with.

**Anchors for the record's length.** Besides the seal, every signature is written to the
audit log with its id and hash in the same transaction: a stored row whose hash is not the
one logged, or a logged signature missing from the record, fails the check. And the head is
printed in every exported policy file, to compare later with ``workbench verify-signoffs
--head``. A record shorter than an anchor says is *shrunk*: nothing is served from it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from review.core import readable

GENESIS = "0" * 64
ENV_KEY = "WORKBENCH_SIGNING_KEY"
PLAIN = "sha256"
KEYED_PREFIX = "hmac-sha256:"
CURRENT_FORMAT = 2

_configured: str | None = None


def set_signing_key(key: str | None) -> None:
    """Use ``key`` (from the deployment's secrets) instead of ``WORKBENCH_SIGNING_KEY`` in
    this process; None or empty: fall back to the environment variable."""
    global _configured
    _configured = key or None


def signing_key() -> bytes | None:
    """The deployment's signing key, or None when it has none."""
    key = _configured or os.environ.get(ENV_KEY) or None
    return key.encode("utf-8") if key else None


def key_id(key: bytes) -> str:
    """A short public name for a key (an HMAC of a fixed label: it does not reveal the key)."""
    return hmac.new(key, b"workbench signing key id", hashlib.sha256).hexdigest()[:16]


def alg_for(key: bytes | None) -> str:
    """The hash algorithm a row signed now records."""
    return PLAIN if key is None else KEYED_PREFIX + key_id(key)


def is_keyed(alg: str) -> bool:
    return alg.startswith(KEYED_PREFIX)


@dataclass(frozen=True)
class RowData:
    """One stored sign-off, as hashed."""

    id: int
    policy_version_id: int
    signer: str
    role: str
    meaning: str
    note: str
    at: dt.datetime
    policy_sha256: str
    data_fingerprint: str
    metrics_snapshot: Any
    prev_hash: str
    row_hash: str
    chain_format: int
    hash_alg: str


def version_fields(
    kind: str,
    number: int,
    parent_id: int | None,
    author: str,
    sha256: str,
    required_roles: Iterable[str] | None,
) -> dict[str, Any]:
    """The fields of a signed version a format-2 row covers. ``required_roles`` None: they
    cannot be computed here (an unknown kind), which never matches a signed row."""
    return {
        "kind": kind,
        "number": number,
        "parent_id": parent_id,
        "author": author,
        "sha256": sha256,
        "required_roles": sorted(required_roles) if required_roles is not None else None,
    }


def _utc(at: dt.datetime) -> str:
    if at.tzinfo is None:
        at = at.replace(tzinfo=dt.UTC)
    return at.astimezone(dt.UTC).isoformat()


def payload(row: RowData, version: Mapping[str, Any] | None) -> dict[str, Any]:
    """What a row hash covers, by the row's format (``version``: its signed version's fields)."""
    fields: dict[str, Any] = {
        "id": row.id,
        "policy_version_id": row.policy_version_id,
        "signer": row.signer,
        "role": row.role,
        "meaning": row.meaning,
        "note": row.note,
        "at": _utc(row.at),
        "policy_sha256": row.policy_sha256,
        "data_fingerprint": row.data_fingerprint,
        "metrics_snapshot": row.metrics_snapshot,
    }
    if row.chain_format >= 2:
        fields["chain_format"] = row.chain_format
        fields["hash_alg"] = row.hash_alg
        fields["version"] = dict(version) if version is not None else None
    return fields


def row_hash(prev: str, fields: Mapping[str, Any], alg: str, key: bytes | None) -> str | None:
    """The hash of a row, or None when it cannot be computed here (a keyed row and no key, or
    another key)."""
    data = (prev + json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)).encode(
        "utf-8"
    )
    if alg == PLAIN:
        return hashlib.sha256(data).hexdigest()
    if is_keyed(alg) and key is not None and alg == alg_for(key):
        return hmac.new(key, data, hashlib.sha256).hexdigest()
    return None


def head_mac(key: bytes, count: int, head: str) -> str:
    """The seal a keyed chain head carried before adoption was an explicit step (still read:
    without the key, the count and last hash it records cannot be changed unnoticed)."""
    return hmac.new(key, f"chain-head:{count}:{head}".encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Seal:
    """A checked seal of the signing key on the chain head: the key holder vouches for the
    record's length and head, and for the plain rows it adopted (the first ``adopted_count``,
    ending with ``adopted_head``). ``legacy``: a seal written before adoption was explicit
    (it then covers the plain rows before the first keyed one)."""

    alg: str
    adopted_count: int
    adopted_head: str
    adopted_at: str
    adopted_by: str
    legacy: bool = False


def _seal_message(
    count: int, head: str, alg: str, adopted_count: int, adopted_head: str, at: str, by: str
) -> bytes:
    fields = {
        "seal": 2,
        "count": count,
        "head": head,
        "alg": alg,
        "adopted_count": adopted_count,
        "adopted_head": adopted_head,
        "adopted_at": at,
        "adopted_by": by,
    }
    return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode("utf-8")


def head_record(key: bytes | None, count: int, head: str, seal: Seal | None) -> dict[str, Any]:
    """The chain head's stored value: the count and last hash, and with a key the seal over
    them (carrying forward what ``seal`` says was adopted)."""
    value: dict[str, Any] = {"count": count, "head": head}
    if key is None or seal is None:
        return value
    alg = alg_for(key)
    at, by = seal.adopted_at, seal.adopted_by
    message = _seal_message(count, head, alg, seal.adopted_count, seal.adopted_head, at, by)
    value["seal"] = {
        "alg": alg,
        "adopted_count": seal.adopted_count,
        "adopted_head": seal.adopted_head,
        "adopted_at": at,
        "adopted_by": by,
        "mac": hmac.new(key, message, hashlib.sha256).hexdigest(),
    }
    return value


def sealed_alg(value: Mapping[str, Any] | None) -> str | None:
    """The key a chain head says it is sealed with (None: it carries no seal)."""
    if value is None:
        return None
    seal = value.get("seal")
    if isinstance(seal, Mapping):
        return str(seal.get("alg") or KEYED_PREFIX + "?")
    if value.get("mac") is not None:
        return KEYED_PREFIX + "?"
    return None


def read_seal(
    value: Mapping[str, Any] | None, key: bytes, algs: Sequence[tuple[str, str]]
) -> tuple[Seal | None, str]:
    """(the seal, "") when the chain head carries a valid seal of ``key``, else (None, why).
    ``algs``: (row hash, hash algorithm) of the stored rows in order, to place the plain rows
    a seal written before adoption was explicit covers."""
    if value is None:
        return None, "the chain head record is missing"
    count, head = value.get("count"), value.get("head")
    if not isinstance(count, int) or not isinstance(head, str):
        return None, "the chain head record is malformed"
    alg = alg_for(key)
    seal = value.get("seal")
    if isinstance(seal, Mapping):
        if seal.get("alg") != alg:
            return None, f"it is sealed with another signing key ({seal.get('alg')}; this is {alg})"
        try:
            adopted_count = int(seal["adopted_count"])
            adopted_head = str(seal["adopted_head"])
            at, by, mac = str(seal["adopted_at"]), str(seal["adopted_by"]), seal["mac"]
        except (KeyError, TypeError, ValueError):
            return None, "its seal is malformed"
        message = _seal_message(count, head, alg, adopted_count, adopted_head, at, by)
        expected = hmac.new(key, message, hashlib.sha256).hexdigest()
        if not isinstance(mac, str) or not hmac.compare_digest(mac, expected):
            return None, (
                "its seal does not match the count and head it is stored with (rewritten "
                "without the key)"
            )
        return Seal(alg, adopted_count, adopted_head, at, by), ""
    legacy = value.get("mac")
    if legacy is not None:
        if not isinstance(legacy, str) or not hmac.compare_digest(
            legacy, head_mac(key, count, head)
        ):
            return None, (
                "its seal does not match the count and head it is stored with (rewritten "
                "without the key)"
            )
        plain = 0
        for _, row_alg in algs:
            if is_keyed(row_alg):
                break
            plain += 1
        adopted_head = algs[plain - 1][0] if plain else GENESIS
        return Seal(alg, plain, adopted_head, "", "", legacy=True), ""
    return None, (
        "it was never sealed with this key (a record started or kept without it is adopted "
        "explicitly: `workbench adopt-signing-key`), or its seal was removed"
    )


@dataclass(frozen=True)
class AuditSig:
    """A signature as the audit log recorded it when it was made (in the same transaction)."""

    signoff_id: int | None
    row_hash: str | None
    meaning: str
    actor: str
    at: dt.datetime


@dataclass(frozen=True)
class ChainStatus:
    """The verdict on the stored rows and the chain head.

    ``break_at``: the id of the first sign-off that is not verified (altered, out of the
    chain, downgraded, or keyed and not checkable here); None when every stored row verifies.
    ``problems``: one line per finding (empty: intact). ``unchecked``: the findings that are
    rows the key is needed for, not evidence of tampering. ``shrunk``: the findings that say
    signatures are missing (an anchor knows of more than are stored) or that, with a key, the
    record's length is vouched for by no seal: what was approved in them cannot be known, so
    nothing is served. ``keyed``/``plain``: the ids of the rows hashed with a key and without.
    ``seal``: the key's checked seal (None: no key, or not sealed with it); ``seal_problem``:
    why not, with a key."""

    problems: tuple[str, ...]
    break_at: int | None
    head: str
    count: int
    unchecked: tuple[str, ...] = ()
    shrunk: tuple[str, ...] = ()
    keyed: tuple[int, ...] = ()
    plain: tuple[int, ...] = ()
    seal: Seal | None = None
    seal_problem: str = ""

    @property
    def intact(self) -> bool:
        return not self.problems


def _unchecked_line(row: RowData, key: bytes | None) -> str:
    if key is None:
        return (
            f"sign-off {row.id}: cannot be checked without the signing key (it was hashed "
            f"with {row.hash_alg}); set {ENV_KEY} or [signing] key in the secrets"
        )
    return (
        f"sign-off {row.id}: cannot be checked with this signing key (it was hashed with "
        f"{row.hash_alg}, this key is {alg_for(key)})"
    )


def _missing_line(missing: Sequence[AuditSig], stored: int) -> str:
    shown = ", ".join(
        f"{a.signoff_id} ({a.meaning} by {a.actor}, {_utc(a.at)[:10]})" for a in missing[:4]
    )
    more = f" and {len(missing) - 4} more" if len(missing) > 4 else ""
    return (
        f"the audit log records {readable.count(len(missing), 'signature')} the record no longer "
        "holds "
        f"(sign-off {shown}{more}; {stored} stored): rows were deleted"
    )


@dataclass
class _Findings:
    """What :func:`check` has found so far, in the order it found it."""

    problems: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    shrunk: list[str] = field(default_factory=list)
    break_at: int | None = None

    def suspect(self, row_id: int) -> None:
        """Row ``row_id`` is not verified: the verified part ends before it at the latest."""
        if self.break_at is None or row_id < self.break_at:
            self.break_at = row_id

    def broken(self, row_id: int, line: str) -> None:
        self.problems.append(line)
        self.suspect(row_id)

    def lost(self, line: str) -> None:
        """A finding that says signatures are missing (or that no seal vouches for them)."""
        self.problems.append(line)
        self.shrunk.append(line)


@dataclass
class _Walk:
    """The state of the walk along the rows: the previous row's hash, the first row in the
    new format and the first keyed row, and the last row hashed with this key that
    verifies (its index)."""

    prev: str = GENESIS
    seen_v2: int | None = None
    seen_keyed: int | None = None
    last_keyed_ok: int = -1


def _format_problems(row: RowData, walk: _Walk, found: _Findings) -> bool:
    """Record a row in the old format after the new one, an old-format row that is keyed, or
    a plain row after a keyed one; True when there was any."""
    bad = False
    if row.chain_format == 1 and walk.seen_v2 is not None:
        found.broken(
            row.id,
            f"sign-off {row.id}: recorded in the old chain format after sign-off "
            f"{walk.seen_v2} used the new one; a row never goes back to the old format "
            "(downgraded?)",
        )
        bad = True
    if row.chain_format == 1 and row.hash_alg != PLAIN:
        found.broken(row.id, f"sign-off {row.id}: an old-format row cannot be keyed")
        bad = True
    if row.hash_alg == PLAIN and walk.seen_keyed is not None:
        found.broken(
            row.id,
            f"sign-off {row.id}: hashed without the signing key after sign-off "
            f"{walk.seen_keyed} was hashed with it (suspicious: a row recomputed without the "
            "key?)",
        )
        bad = True
    return bad


def _hash_verifies(
    row: RowData,
    versions: Mapping[int, Mapping[str, Any]],
    key: bytes | None,
    bad: bool,
    found: _Findings,
) -> bool:
    """Whether the row's hash is the one its content gives; why not, recorded (a row already
    found ``bad`` does not also count as altered, it is noted only)."""
    expected = row_hash(
        row.prev_hash, payload(row, versions.get(row.policy_version_id)), row.hash_alg, key
    )
    if expected is None and (row.hash_alg == PLAIN or is_keyed(row.hash_alg)):
        line = _unchecked_line(row, key)
        found.unchecked.append(line)
        found.broken(row.id, line)
    elif expected is None:
        found.broken(row.id, f"sign-off {row.id}: unknown hash algorithm {row.hash_alg!r}")
    elif expected != row.row_hash and not bad:
        what = "its content was altered after signing" + (
            " (its own fields, or the kind, number, parent, author, text digest or "
            "required roles of the version it signs)"
            if row.chain_format == 2
            else ""
        )
        found.broken(row.id, f"sign-off {row.id}: {what}")
    elif expected != row.row_hash:
        found.problems.append(f"sign-off {row.id}: its content was altered after signing")
    else:
        return True
    return False


def _walk_rows(
    rows: Sequence[RowData],
    versions: Mapping[int, Mapping[str, Any]],
    key: bytes | None,
    found: _Findings,
) -> _Walk:
    """Check each row against the one before it, its format and its hash."""
    walk = _Walk()
    alg = alg_for(key)
    for index, row in enumerate(rows):
        bad = row.prev_hash != walk.prev
        if bad:
            found.broken(
                row.id,
                f"sign-off {row.id}: does not follow the previous signature (a row before it "
                "was deleted or changed)",
            )
        if row.chain_format not in (1, 2):
            found.broken(row.id, f"sign-off {row.id}: unknown chain format {row.chain_format}")
            walk.prev = row.row_hash
            continue
        bad = _format_problems(row, walk, found) or bad
        if row.chain_format == 2 and walk.seen_v2 is None:
            walk.seen_v2 = row.id
        if is_keyed(row.hash_alg) and walk.seen_keyed is None:
            walk.seen_keyed = row.id
        verified = _hash_verifies(row, versions, key, bad, found)
        if verified and not bad and key is not None and row.hash_alg == alg:
            walk.last_keyed_ok = index
        walk.prev = row.row_hash
    return walk


def _check_head(
    head_value: Mapping[str, Any] | None,
    rows: Sequence[RowData],
    prev: str,
    found: _Findings,
) -> str:
    """Check the head the database records against the rows (``prev``: the last row's
    hash); returns the recorded head."""
    count = len(rows)
    if head_value is None:
        if count:
            found.lost("the chain head record is missing")
        return GENESIS
    head = str(head_value.get("head", ""))
    try:
        recorded = int(head_value.get("count", -1))
    except (TypeError, ValueError):
        recorded = -1
    if recorded == count and head == prev:
        return head
    if recorded != count:
        line = (
            f"the chain head records {recorded} signatures but {count} are stored "
            "(rows were deleted or added)"
        )
        found.problems.append(line)
        if recorded > count or recorded < 0:
            found.shrunk.append(line)
    else:
        found.problems.append("the last signature does not match the chain head")
    # rows after the one the head names were added without it, and the row where the head
    # should be when it names none (replaced, hash and all): not verified
    at = next((i for i, r in enumerate(rows) if r.row_hash == head), None)
    if at is not None and at + 1 < count:
        found.suspect(rows[at + 1].id)
    elif at is None and 0 < recorded <= count:
        found.suspect(rows[recorded - 1].id)
    return head


def _check_unsealed(
    rows: Sequence[RowData], seal_problem: str, last_keyed_ok: int, found: _Findings
) -> None:
    """With a key and no seal of it: nothing vouches for the record's length, and a plain row
    after the last keyed row that verifies may have been recomputed without the key."""
    found.problems.append(f"the sign-off record is not sealed with the signing key: {seal_problem}")
    found.shrunk.append(
        "with a signing key configured, the record's length and head are vouched for "
        "by no seal of it"
    )
    for r in rows[last_keyed_ok + 1 :]:
        if r.hash_alg == PLAIN:
            found.broken(
                r.id,
                f"sign-off {r.id}: hashed without the signing key, and no seal of the "
                "key covers it (recomputed by someone without the key?)",
            )


def _check_sealed(
    rows: Sequence[RowData], seal: Seal, seen_keyed: int | None, found: _Findings
) -> None:
    """The rows the key's seal adopted are all stored and unchanged, and no row after them
    is plain."""
    adopted = seal.adopted_count
    if adopted > len(rows):
        found.lost(
            f"the signing key's seal adopted {adopted} signatures but {len(rows)} are "
            "stored (rows were deleted)"
        )
    elif adopted and rows[adopted - 1].row_hash != seal.adopted_head:
        found.broken(
            rows[adopted - 1].id,
            f"sign-off {rows[adopted - 1].id}: is not the signature the signing key was "
            "adopted on (the record before the adoption was rewritten)",
        )
    for r in rows[adopted:]:
        if r.hash_alg == PLAIN and (seen_keyed is None or r.id < seen_keyed):
            found.broken(
                r.id,
                f"sign-off {r.id}: hashed without the signing key after the key was "
                f"adopted on the first {readable.count(adopted, 'signature')} (recomputed without "
                "the key?)",
            )


def _check_seal(
    rows: Sequence[RowData],
    head_value: Mapping[str, Any] | None,
    key: bytes | None,
    walk: _Walk,
    require_seal: bool,
    found: _Findings,
) -> tuple[Seal | None, str]:
    """The key's seal: with a key, only a record its holder sealed verifies; without one, a
    sealed head cannot be checked. Returns the seal and why there is none (with a key)."""
    if key is None:
        if (sealed := sealed_alg(head_value)) is not None:
            line = (
                f"the chain head is sealed with a signing key ({sealed}) and none is "
                f"configured: the seal cannot be checked; set {ENV_KEY} or [signing] key in "
                "the secrets"
            )
            found.problems.append(line)
            found.unchecked.append(line)
        return None, ""
    seal, seal_problem = read_seal(head_value, key, [(r.row_hash, r.hash_alg) for r in rows])
    if seal is None and require_seal:
        _check_unsealed(rows, seal_problem, walk.last_keyed_ok, found)
    elif seal is not None:
        _check_sealed(rows, seal, walk.seen_keyed, found)
    return seal, seal_problem


def _check_audit(rows: Sequence[RowData], audit: Iterable[AuditSig], found: _Findings) -> None:
    """The signatures the audit log recorded as they were made are all stored, unchanged."""
    entries = list(audit)
    by_id = {r.id: r for r in rows}
    missing = [a for a in entries if a.signoff_id is not None and a.signoff_id not in by_id]
    for a in entries:
        logged = by_id.get(a.signoff_id) if a.signoff_id is not None else None
        if logged is not None and a.row_hash and a.row_hash != logged.row_hash:
            found.broken(
                logged.id,
                f"sign-off {logged.id}: its hash is not the one the audit log recorded when it was "
                "signed (the row was rewritten)",
            )
    if missing:
        found.lost(_missing_line(missing, len(rows)))
    elif len(entries) > len(rows):
        found.lost(
            f"the audit log records {len(entries)} signatures but {len(rows)} are stored (rows "
            "were deleted)"
        )


def check(
    rows: Iterable[RowData],
    versions: Mapping[int, Mapping[str, Any]],
    head_value: Mapping[str, Any] | None,
    key: bytes | None,
    audit: Iterable[AuditSig] = (),
    *,
    require_seal: bool = True,
) -> ChainStatus:
    """Check rows (in id order) against each other, their versions' fields, the head, the
    key's seal on the head (with a key) and the signatures the audit log recorded.
    ``require_seal`` False: everything but the seal (what adopting a key checks first)."""
    rows = list(rows)
    found = _Findings()
    walk = _walk_rows(rows, versions, key, found)
    head = _check_head(head_value, rows, walk.prev, found)
    seal, seal_problem = _check_seal(rows, head_value, key, walk, require_seal, found)
    _check_audit(rows, audit, found)
    return ChainStatus(
        tuple(found.problems),
        found.break_at,
        head,
        len(rows),
        tuple(found.unchecked),
        tuple(found.shrunk),
        tuple(r.id for r in rows if is_keyed(r.hash_alg)),
        tuple(r.id for r in rows if r.hash_alg == PLAIN),
        seal,
        seal_problem,
    )


def _ranges(ids: Sequence[int]) -> str:
    """``1–4, 7, 9–10`` for ids 1, 2, 3, 4, 7, 9, 10."""
    parts: list[str] = []
    start = prev = None
    for i in sorted(ids):
        if prev is not None and i == prev + 1:
            prev = i
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}–{prev}")
        start = prev = i
    if start is not None:
        parts.append(str(start) if start == prev else f"{start}–{prev}")
    return ", ".join(parts)


def describe(status: ChainStatus, key: bytes | None) -> list[str]:
    """What the record is keyed and sealed with, row by row in ranges: which rows are keyed
    with the configured key, which are plain and whether a seal of the key covers them."""
    lines: list[str] = []
    if key is None:
        lines.append(
            f"no signing key is configured: {readable.count(len(status.plain), 'plain sha256 row')}"
            + (f" (sign-offs {_ranges(status.plain)})" if status.plain else "")
            + (
                f"; {readable.count(len(status.keyed), 'keyed row')} that cannot be checked here "
                "(sign-offs "
                f"{_ranges(status.keyed)})"
                if status.keyed
                else ""
            )
        )
        return lines
    alg = alg_for(key)
    lines.append(
        f"keyed with the signing key ({alg}): "
        + (
            f"{readable.count(len(status.keyed), 'row')}, sign-offs {_ranges(status.keyed)}"
            if status.keyed
            else "no row"
        )
    )
    if status.plain:
        ordered = sorted(status.keyed + status.plain)
        adopted = status.seal.adopted_count if status.seal is not None else 0
        covered = [i for i in status.plain if ordered.index(i) < adopted]
        loose = [i for i in status.plain if i not in covered]
        if covered and status.seal is not None:
            how = (
                f"adopted by {status.seal.adopted_by} at {status.seal.adopted_at}"
                if not status.seal.legacy
                else "covered by the keyed rows signed after them"
            )
            lines.append(
                f"plain sha256, sealed by the key ({how}): {readable.count(len(covered), 'row')}, "
                "sign-offs "
                f"{_ranges(covered)}"
            )
        if loose:
            lines.append(
                f"plain sha256 and covered by no seal of the key (not verified): "
                f"{readable.count(len(loose), 'row')}, sign-offs {_ranges(loose)}"
            )
    if status.seal is not None:
        lines.append(
            f"sealed with the signing key: {readable.count(status.count, 'signature')} and the head"
        )
    else:
        lines.append(f"NOT sealed with the signing key: {status.seal_problem}")
    return lines
