"""Refusal wording as a signed policy kind: its canonical form, who must sign, the wording in
force and its versions.

The wording file (``policies/refusal-wording.yaml``, validated by :mod:`review.wording.messages`
and linted by :mod:`review.wording.lint`) is versioned through the generic sign-off service
(:mod:`review.policy.signoff`) as kind ``refusal_wording``:

* **Who signs.** A product owner signs every change. Compliance signs as well when R3 (answer
  blocked as ungrounded) or E1 (escalation) differs from the parent version in any field, and
  always when there is no parent (the first signed version). The author never signs.
* **What a signature covers.** The sha256 of the wording's meaning: the validated file without
  its ``version`` number, comments or layout, so reformatting is not a change."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from sqlalchemy import Engine

from review.core.errors import InputError
from review.core.identity import Role
from review.core.terms import VersionStatus
from review.policy import signoff
from review.wording.messages import (
    REQUIRED_KEYS,
    WordingSet,
    needs_compliance,
    parse_wording,
    wording_path,
)

__all__ = [
    "KIND",
    "WordingInForce",
    "canonical",
    "changed_keys",
    "in_force",
    "key_order",
    "parse_or_none",
    "pending",
    "required_roles",
    "shipped_text",
    "versions",
    "wording_of",
]


KIND = "refusal_wording"


# ---------------------------------------------------------------------------------------------
# The kind: canonical form and required roles
# ---------------------------------------------------------------------------------------------


@lru_cache(maxsize=256)
def parse_or_none(text: str) -> WordingSet | None:
    try:
        return parse_wording(text, "wording")
    except InputError:
        return None


def canonical(text: str) -> str:
    """What a signature covers: the wording's content without ``version``, comments or layout."""
    ws = parse_wording(text, "refusal wording")
    data = ws.model_dump(mode="json")
    data.pop("version", None)
    if not data["company_names"]:  # signatures made before the field existed stay valid
        del data["company_names"]
    return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _entry(ws: WordingSet, key: str) -> tuple[object, ...] | None:
    msg = ws.messages.get(key)
    if msg is None:
        return None
    return (msg.text, tuple(msg.placeholders), ws.locale_for(key), msg.description)


def key_order(keys: Iterable[str]) -> list[str]:
    keys = set(keys)
    return [k for k in REQUIRED_KEYS if k in keys] + sorted(keys - set(REQUIRED_KEYS))


def changed_keys(old: WordingSet | None, new: WordingSet) -> list[str]:
    """Message keys whose text, placeholders, effective locale or description differ (or that
    were added or removed). Without an ``old`` set every key of ``new`` counts as changed."""
    if old is None:
        return key_order(new.messages)
    keys = set(old.messages) | set(new.messages)
    return key_order(k for k in keys if _entry(old, k) != _entry(new, k))


def required_roles(text: str, parent_text: str | None) -> frozenset[Role]:
    """Product owner always; compliance too when R3 or E1 changed or there is no parent."""
    both = frozenset({Role.product_owner, Role.compliance})
    new = parse_or_none(text)
    old = parse_or_none(parent_text) if parent_text is not None else None
    if new is None or old is None:
        return both
    if any(needs_compliance(k) for k in changed_keys(old, new)):
        return both
    return frozenset({Role.product_owner})


signoff.register_kind(
    signoff.Kind(
        KIND,
        "refusal wording",
        lambda text, source: parse_wording(text, source),
        canonical,
        required_roles,
    )
)


def compliance_reason(old: WordingSet | None, new: WordingSet) -> str:
    """One sentence on whether compliance must sign, and why."""
    if old is None:
        return "Compliance signs too: this is the first signed wording (no parent version)."
    keys = [k for k in changed_keys(old, new) if needs_compliance(k)]
    if keys:
        return f"Compliance signs too: {', '.join(keys)} changed."
    return "A product owner signs; compliance is not needed (R3 and E1 are unchanged)."


# ---------------------------------------------------------------------------------------------
# The wording in force, versions
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WordingInForce:
    wording: WordingSet
    text: str
    version: signoff.VersionView | None  # None: the shipped file, never signed here

    @property
    def version_id(self) -> int | None:
        return self.version.id if self.version is not None else None

    @property
    def label(self) -> str:
        if self.version is None:
            return "the shipped file (not signed in this workbench yet)"
        return f"version {self.version.number}"


def shipped_text() -> str:
    try:
        return wording_path().read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{wording_path()}: cannot be read: {exc.strerror}") from None


def in_force(engine: Engine) -> WordingInForce:
    """The wording in force: the latest verified approved version, else the shipped file.

    When the sign-off record does not verify, the last verified version is served, or, when
    none is left, :class:`review.policy.signoff.TamperedPolicyError` says why nothing is (see
    :func:`review.policy.signoff.in_force_version`).
    """
    v = signoff.in_force_version(engine, KIND)
    if v is not None:
        return WordingInForce(
            parse_wording(v.yaml_text, f"approved wording version {v.number}"), v.yaml_text, v
        )
    text = shipped_text()
    return WordingInForce(parse_wording(text, str(wording_path())), text, None)


def versions(engine: Engine) -> list[signoff.VersionView]:
    """Every wording version, newest first."""
    return signoff.versions(engine, KIND)


def pending(engine: Engine) -> list[signoff.VersionView]:
    """Versions waiting for signatures, oldest first."""
    return sorted(
        (v for v in versions(engine) if v.status == VersionStatus.pending), key=lambda v: v.number
    )


def wording_of(engine: Engine, version_id: int | None) -> tuple[WordingSet, str]:
    """A stored version's wording and text; ``None`` is the shipped file."""
    if version_id is None:
        text = shipped_text()
        return parse_wording(text, str(wording_path())), text
    v = signoff.get_version(engine, version_id)
    if v.kind != KIND:
        raise InputError(f"policy version {version_id} is not a refusal wording")
    return parse_wording(v.yaml_text, f"wording version {v.number}"), v.yaml_text
