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
row means recomputing its hash and every later one; with a key, that fails on the later
keyed rows and on the key-sealed chain head. Rewriting *every* row from the first keyed one
on as plain rows (and dropping the head's seal) leaves a chain that looks like one that
never used the key: only a chain head recorded elsewhere (``workbench verify-signoffs
--head``) catches that, as it catches a complete rewrite without a key.

**The signing key.** When the deployment provides one (``WORKBENCH_SIGNING_KEY``, or the
``[signing] key`` of the Streamlit secrets, which the pages pass in with
:func:`set_signing_key`), new rows are hashed with HMAC-SHA256 under that key and record
``hmac-sha256:<key id>``; the key id is an HMAC of a fixed label, not the key. Without the
key such rows "cannot be checked", which is not the same as tampered, but they are not
verified either, so nothing they approved is served. Key rotation is not supported: a
chain keeps the key it started with.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

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
    """The seal a keyed chain head carries: without the key, the count and last hash it
    records cannot be changed unnoticed."""
    return hmac.new(key, f"chain-head:{count}:{head}".encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class ChainStatus:
    """The verdict on the stored rows and the chain head.

    ``break_at``: the id of the first sign-off that is not verified (altered, out of the
    chain, downgraded, or keyed and not checkable here); None when every stored row verifies.
    ``problems``: one line per finding (empty: intact). ``unchecked``: the findings that are
    rows the key is needed for, not evidence of tampering."""

    problems: tuple[str, ...]
    break_at: int | None
    head: str
    count: int
    unchecked: tuple[str, ...] = ()

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


def check(
    rows: Iterable[RowData],
    versions: Mapping[int, Mapping[str, Any]],
    head_value: Mapping[str, Any] | None,
    key: bytes | None,
) -> ChainStatus:
    """Check rows (in id order) against each other, their versions' fields and the head."""
    problems: list[str] = []
    unchecked: list[str] = []
    break_at: int | None = None
    prev = GENESIS
    count = 0
    hashes: list[tuple[int, str]] = []
    seen_v2: int | None = None
    seen_keyed: int | None = None
    checkable_keyed = False

    def broken(row_id: int, line: str) -> None:
        nonlocal break_at
        problems.append(line)
        if break_at is None:
            break_at = row_id

    for row in rows:
        count += 1
        hashes.append((row.id, row.row_hash))
        bad = False
        if row.prev_hash != prev:
            broken(
                row.id,
                f"sign-off {row.id}: does not follow the previous signature (a row before it "
                "was deleted or changed)",
            )
            bad = True
        if row.chain_format not in (1, 2):
            broken(row.id, f"sign-off {row.id}: unknown chain format {row.chain_format}")
            prev = row.row_hash
            continue
        if row.chain_format == 1 and seen_v2 is not None:
            broken(
                row.id,
                f"sign-off {row.id}: recorded in the old chain format after sign-off {seen_v2} "
                "used the new one; a row never goes back to the old format (downgraded?)",
            )
            bad = True
        if row.chain_format == 1 and row.hash_alg != PLAIN:
            broken(row.id, f"sign-off {row.id}: an old-format row cannot be keyed")
            bad = True
        if row.hash_alg == PLAIN and seen_keyed is not None:
            broken(
                row.id,
                f"sign-off {row.id}: hashed without the signing key after sign-off "
                f"{seen_keyed} was hashed with it (suspicious: a row recomputed without the "
                "key?)",
            )
            bad = True
        if row.chain_format == 2:
            seen_v2 = seen_v2 if seen_v2 is not None else row.id
        if is_keyed(row.hash_alg):
            seen_keyed = seen_keyed if seen_keyed is not None else row.id
            checkable_keyed = checkable_keyed or (key is not None and row.hash_alg == alg_for(key))
        expected = row_hash(
            row.prev_hash, payload(row, versions.get(row.policy_version_id)), row.hash_alg, key
        )
        if expected is None and (row.hash_alg == PLAIN or is_keyed(row.hash_alg)):
            line = _unchecked_line(row, key)
            unchecked.append(line)
            broken(row.id, line)
        elif expected is None:
            broken(row.id, f"sign-off {row.id}: unknown hash algorithm {row.hash_alg!r}")
        elif expected != row.row_hash and not bad:
            what = "its content was altered after signing" + (
                " (its own fields, or the kind, number, parent, author, text digest or "
                "required roles of the version it signs)"
                if row.chain_format == 2
                else ""
            )
            broken(row.id, f"sign-off {row.id}: {what}")
        elif expected != row.row_hash:
            problems.append(f"sign-off {row.id}: its content was altered after signing")
        prev = row.row_hash
    if head_value is None:
        if count:
            problems.append("the chain head record is missing")
        return ChainStatus(tuple(problems), break_at, GENESIS, count, tuple(unchecked))
    head = str(head_value.get("head", ""))
    try:
        recorded = int(head_value.get("count", -1))
    except (TypeError, ValueError):
        recorded = -1
    if recorded != count or head != prev:
        if recorded != count:
            problems.append(
                f"the chain head records {recorded} signatures but {count} are stored (rows "
                "were deleted or added)"
            )
        else:
            problems.append("the last signature does not match the chain head")
        # rows after the one the head names were added without it, and the row where the head
        # should be when it names none (replaced, hash and all): they are not verified
        at = next((i for i, (_, h) in enumerate(hashes) if h == head), None)
        suspect: int | None = None
        if at is not None and at + 1 < len(hashes):
            suspect = hashes[at + 1][0]
        elif at is None and 0 < recorded <= count:
            suspect = hashes[recorded - 1][0]
        if suspect is not None and (break_at is None or suspect < break_at):
            break_at = suspect
    if key is not None and checkable_keyed:
        mac = head_value.get("mac")
        if not isinstance(mac, str) or not hmac.compare_digest(mac, head_mac(key, recorded, head)):
            problems.append(
                "the chain head is not sealed with the signing key (it was rewritten without "
                "the key)"
            )
    return ChainStatus(tuple(problems), break_at, head, count, tuple(unchecked))
