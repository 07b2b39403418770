"""Who is acting, and what their roles allow. Every write service calls :func:`require`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from review.core.errors import PermissionDenied
from review.core.readable import humanize


class Role(StrEnum):
    annotator = "annotator"
    reviewer = "reviewer"
    product_owner = "product_owner"
    compliance = "compliance"
    admin = "admin"


ROLE_HELP = {
    Role.annotator: "builds cases and labels them",
    Role.reviewer: "audits production traces and adjudicates label disagreements",
    Role.product_owner: "proposes and approves thresholds and refusal wording",
    Role.compliance: "approves thresholds and the refusal and escalation wording",
    Role.admin: "manages users and roles",
}


class Permission(StrEnum):
    edit_corpus = "edit_corpus"
    edit_cases = "edit_cases"
    label = "label"
    audit = "audit"
    adjudicate = "adjudicate"
    propose_policy = "propose_policy"
    approve_policy = "approve_policy"
    import_traces = "import_traces"
    run_evaluations = "run_evaluations"
    manage_users = "manage_users"
    restrict_traces = "restrict_traces"
    manage_sources = "manage_sources"
    exchange_labels = "exchange_labels"


GRANTS: dict[Role, frozenset[Permission]] = {
    Role.annotator: frozenset(
        {
            Permission.edit_corpus,
            Permission.edit_cases,
            Permission.label,
            Permission.run_evaluations,
        }
    ),
    Role.reviewer: frozenset(
        {
            Permission.edit_cases,
            Permission.audit,
            Permission.adjudicate,
            Permission.exchange_labels,
            Permission.import_traces,
            Permission.run_evaluations,
        }
    ),
    Role.product_owner: frozenset(
        {Permission.propose_policy, Permission.approve_policy, Permission.run_evaluations}
    ),
    Role.compliance: frozenset({Permission.propose_policy, Permission.approve_policy}),
    Role.admin: frozenset(
        {
            Permission.manage_users,
            Permission.restrict_traces,
            Permission.manage_sources,
            Permission.exchange_labels,
            Permission.edit_corpus,
            Permission.edit_cases,
            Permission.import_traces,
            Permission.run_evaluations,
        }
    ),
}

ACTION_TEXT = {
    Permission.edit_corpus: "add or change documents",
    Permission.edit_cases: "create or edit cases",
    Permission.label: "label cases",
    Permission.audit: "audit production traces",
    Permission.adjudicate: "adjudicate label disagreements",
    Permission.propose_policy: "propose policy changes",
    Permission.approve_policy: "approve policy changes",
    Permission.import_traces: "import production traces",
    Permission.run_evaluations: "import or run evaluations",
    Permission.manage_users: "manage users and roles",
    Permission.restrict_traces: "mark traces restricted or clear them",
    Permission.manage_sources: "add, pause or remove live trace sources",
    Permission.exchange_labels: "export cases to Label Studio or Argilla and import their labels",
}


@dataclass(frozen=True)
class Actor:
    """The signed-in user as the services see it."""

    id: int
    email: str
    name: str
    roles: frozenset[Role] = field(default_factory=frozenset)
    clearance: bool = False

    def can(self, permission: Permission) -> bool:
        return any(permission in GRANTS[r] for r in self.roles)


SYSTEM = Actor(id=0, email="system", name="System", roles=frozenset({Role.admin}), clearance=True)


def roles_text(roles: Iterable[str]) -> str:
    """Roles as people read them, in key order ("Compliance, Product owner"), or "no role"."""
    return ", ".join(humanize(str(r)) for r in sorted(roles)) or "no role"


def require(actor: Actor, permission: Permission) -> None:
    """Raise PermissionDenied unless the actor holds a role granting ``permission``."""
    if not actor.can(permission):
        holders = sorted(r.value for r, perms in GRANTS.items() if permission in perms)
        raise PermissionDenied(
            f"{actor.name} ({roles_text(actor.roles)}) may not "
            f"{ACTION_TEXT[permission]}; this needs one of the roles: {roles_text(holders)}."
        )


def parse_roles(values: list[str] | tuple[str, ...] | set[str]) -> frozenset[Role]:
    out = set()
    for v in values:
        try:
            out.add(Role(v.strip()))
        except ValueError:
            raise ValueError(
                f"unknown role {v!r}; roles are: {', '.join(r.value for r in Role)}"
            ) from None
    return frozenset(out)
