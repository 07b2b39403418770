"""The no-answer policy in force: the latest verified approved version of the policy file,
else the shipped file, and the sign-off kind its versions are signed under."""

from __future__ import annotations

from dataclasses import dataclass

import yaml
from sqlalchemy import Engine

from review.core.identity import Role
from review.policy import signoff
from review.policy.policy import NoAnswerPolicy, default_policy_path, parse_policy

KIND = "no_answer_policy"
POLICY_ROLES = frozenset({Role.product_owner, Role.compliance})


def _canonical(text: str) -> str:
    """What a signature covers: the policy's meaning, without the approval date (the exported
    copy gets approved_on filled in after signing)."""
    policy = parse_policy(text, "policy")
    data = policy.canonical_data()
    data["approved_on"] = None
    return yaml.safe_dump(data, sort_keys=True, allow_unicode=True, default_flow_style=False)


signoff.register_kind(
    signoff.Kind(
        KIND,
        "no-answer policy",
        lambda text, source: parse_policy(text, source),
        _canonical,
        lambda text, parent: POLICY_ROLES,
    )
)


@dataclass(frozen=True)
class PolicyInForce:
    policy: NoAnswerPolicy
    text: str
    version: signoff.VersionView | None  # None: the shipped file, not yet signed here


def in_force(engine: Engine) -> PolicyInForce:
    """The policy in force: the latest verified approved version, else the shipped file.

    When the sign-off record does not verify, the last verified version is served, or, when
    none is left, :class:`review.policy.signoff.TamperedPolicyError` says why nothing is (see
    :func:`review.policy.signoff.in_force_version`).
    """
    v = signoff.in_force_version(engine, KIND)
    if v is not None:
        return PolicyInForce(
            parse_policy(v.yaml_text, f"approved version {v.number}"), v.yaml_text, v
        )
    text = default_policy_path().read_text(encoding="utf-8")
    return PolicyInForce(parse_policy(text, str(default_policy_path())), text, None)
