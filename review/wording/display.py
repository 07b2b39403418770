"""What the Wording page shows around the wording versions, as plain data: the version in
force, labels of versions and message changes, who may sign a pending version and what the
signed-in person is shown instead, the history table, the sign-off chain, and the tables and
texts of the production check."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Literal

import pandas as pd

from review.core import readable
from review.core.identity import Actor, Permission
from review.policy import signoff
from review.policy.display import in_force_caption, signature_line, status_text, version_heading
from review.policy.signoff import signing_roles
from review.wording.compare import MessageChange
from review.wording.editing import key_meaning
from review.wording.findings import RULES, rule_title
from review.wording.production import OffendingTrace, ProductionSummary

__all__ = [
    "ASK_BEFORE",
    "SHIPPED",
    "SignChoice",
    "chain_message",
    "change_caption",
    "finding_rows_frame",
    "history_frame",
    "in_force_caption",
    "production_caption",
    "production_share",
    "rules_frame",
    "should_ask_first",
    "sign_choice",
    "signing_roles",
    "trace_line",
    "version_label",
    "violations_table",
]

#: The shipped wording file in pickers and diff headers.
SHIPPED: Final = "the shipped file (policies/refusal-wording.yaml)"

#: Unchecked refusal texts above which the production check waits for a click.
ASK_BEFORE = 20_000

#: What the signed-in person is shown under a pending version: the note that they proposed
#: it, the signing form, that their signature is not needed, or who signs.
SignChoice = Literal["author", "sign", "not_needed", "not_a_signer"]


def change_caption(change: MessageChange, *, for_signing: bool = False) -> str:
    """The heading of a message's word diff; for signing it also says what the key is for
    and whether compliance signs it."""
    fields = f" ({', '.join(change.fields)})" if change.fields else ""
    if not for_signing:
        return f"{change.key} · {change.status}{fields}"
    return f"{change.key} · {key_meaning(change.key)} · {change.status}{fields}" + (
        " · compliance signs this key" if change.needs_compliance else ""
    )


def version_label(
    version_id: int | None,
    views: Mapping[int, signoff.VersionView],
    in_force_id: int | None = None,
) -> str:
    """A version in the pickers and diff headers, in the words of the Thresholds page
    ("sign-off v3 · file version 1 (in force)"); None is the shipped file."""
    return version_heading(
        views[version_id] if version_id is not None else None,
        in_force_id,
        shipped=SHIPPED,
        versions=list(views.values()),
    )


def sign_choice(actor: Actor, version: signoff.VersionView) -> SignChoice:
    """What ``actor`` is shown under a pending version (see :data:`SignChoice`)."""
    if actor.email == version.author:
        return "author"
    if not actor.can(Permission.approve_policy):
        return "not_a_signer"
    return "sign" if signing_roles(actor, version) else "not_needed"


def history_frame(
    versions: Sequence[signoff.VersionView],
    in_force_id: int | None,
    names: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Every wording version: where it stands (``status_text``), author (by name: ``names``
    maps e-mail -> name), dates, changed keys, lint, signatures (signers by name)."""
    return pd.DataFrame(
        [
            {
                "version": v.number,
                "status": status_text(v, in_force_id, versions),
                "author": readable.person(v.author, names or {}),
                "created": v.created_at,
                "approved": v.approved_on,
                "changed keys": ", ".join((v.snapshot or {}).get("changed_keys", [])),
                "lint findings": (v.snapshot or {}).get("lint_total"),
                "sha256": v.sha256[:16],
                "signatures": "; ".join(signature_line(s, names, note=True) for s in v.signatures),
            }
            for v in versions
        ]
    )


def chain_message(problems: Sequence[str]) -> str:
    """The verdict on the sign-off chain (an error when ``problems`` is not empty)."""
    return "Sign-off chain: " + (
        "; ".join(problems) if problems else "intact (every signature hash verifies)"
    )


def should_ask_first(unchecked: int, confirmed: bool) -> bool:
    """Whether the production check waits for a click before linting ``unchecked`` texts."""
    return unchecked > ASK_BEFORE and not confirmed


def production_share(summary: ProductionSummary) -> str:
    """The share of checked refusal texts with findings ("—" when none was checked)."""
    return readable.percent(summary.offending / summary.checked) if summary.checked else "—"


def production_caption(summary: ProductionSummary) -> str:
    """What the production check linted with, and what it hides from the viewer."""
    version = (
        f"version {summary.wording_version}" if summary.wording_version else "the shipped file"
    )
    return (
        f"Linted with the approved contacts of {version}, the restricted titles of the corpus "
        "and every document id."
        + (
            f" {readable.count(summary.hidden_restricted, 'offending restricted trace')} "
            f"{readable.plural(summary.hidden_restricted, 'is', 'are')} hidden: seeing them "
            "needs clearance."
            if summary.hidden_restricted
            else ""
        )
    )


def rules_frame(summary: ProductionSummary) -> pd.DataFrame:
    """Offending traces per rule, with what each rule catches."""
    return pd.DataFrame(
        [
            {"rule": rule_title(r), "what it catches": RULES[r], "traces": n}
            for r, n in summary.per_rule.items()
        ]
    )


def violations_table(weekly: pd.DataFrame) -> pd.DataFrame:
    """The weekly count of refusals breaking each wording rule (``weekly_violations``) as
    shown: the week, the refusals breaking any rule, then a column per rule, each headed by
    its title."""
    names = {"week": "week (Monday)", "offending": "refusals breaking a rule"}
    return weekly.rename(columns=lambda c: names.get(c) or rule_title(str(c)))


def trace_line(row: OffendingTrace) -> str:
    """One line about an offending trace (shown as text: the trace id is from the file)."""
    return (
        f"{row.trace_id} · {row.at:%Y-%m-%d %H:%M} UTC · decision {row.decision or '—'}"
        + (f" ({row.reason_code})" if row.reason_code else "")
        + (f" · checked as {row.key}" if row.key else "")
        + (" · restricted trace" if row.restricted else "")
    )


def finding_rows_frame(row: OffendingTrace) -> pd.DataFrame:
    """The findings of an offending trace: rule, excerpt, why."""
    return pd.DataFrame(
        [
            {"rule": rule_title(f.rule), "excerpt": f.excerpt, "why": f.explanation}
            for f in row.findings
        ]
    )
