"""The wording rules and their findings: what each rule means, and a finding's span and
explanation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from review.core import readable

__all__ = ["KEY_ONLY_RULES", "RULES", "RULE_TITLES", "Finding", "excerpt", "rule_title"]


# ---------------------------------------------------------------------------------------------
# The lint
# ---------------------------------------------------------------------------------------------

#: Stable rule ids -> what the rule protects against (for legends and filters).
RULES: Mapping[str, str] = {
    "universal_negative": "Says the answer does not exist instead of 'the sources do not show it'",
    "leaked_internal": "Shows internal scores, search terms, document ids or restricted titles",
    "unlisted_contact": "Names an email, phone, URL or person that is not an approved contact",
    "claim_after_refusal": "Refuses, then gives an unsupported answer anyway",
    "blames_user": "Blames the person for the question",
    "followup_without_request": "A follow-up that does not ask for what would help (F1 only)",
    "escalation_names_person": "An escalation that names a person, not a role or team (E1 only)",
}

#: Each rule's title: how a rule reads in every table, legend and tooltip (its id never does).
RULE_TITLES: Mapping[str, str] = {
    "universal_negative": "Says the answer does not exist",
    "leaked_internal": "Leaks internal details",
    "unlisted_contact": "Names an unlisted contact",
    "claim_after_refusal": "Answers after refusing",
    "blames_user": "Blames the user",
    "followup_without_request": "Follow-up asks for nothing",
    "escalation_names_person": "Escalation names a person",
}


def rule_title(rule: str) -> str:
    """A wording rule as people read it: its title; a rule id this version does not know
    reads humanised ("no_names" -> "No names"), never as the id."""
    return RULE_TITLES.get(rule) or readable.humanize(rule)


#: Rules that only run for one message key.
KEY_ONLY_RULES: Mapping[str, str] = {
    "followup_without_request": "F1",
    "escalation_names_person": "E1",
}


@dataclass(frozen=True)
class Finding:
    """One wording problem: the rule id, the span ``text[start:end]`` and why it matters."""

    rule: str
    start: int
    end: int
    explanation: str


def excerpt(text: str, finding: Finding) -> str:
    """The flagged part of ``text``."""
    return text[finding.start : finding.end]
