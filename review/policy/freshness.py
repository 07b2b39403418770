"""Freshness that fits the fact: the evidence gate's age limits per kind of claim or source.

One global ``max_age_days`` calls every settled historical fact stale ("where was the 2021
Super Bowl played?" answered from a passage dated 2024, asked in 2026) while a price must be
recent. The evidence gate's section of the no-answer policy may therefore hold a list of
``freshness`` rules, signed with the rest of the policy::

    evidence_gate:
      max_age_days: 365            # the global rule
      freshness:
        - claim_kind: historical   # a settled fact: no age limit
          max_age_days: null
        - claim_kind: current_price
          max_age_days: 30
        - source_category: legal   # a passage from a legal source
          max_age_days: 730
        - claim_kind: current_price
          source_category: contract
          max_age_days: 90

A rule names a ``claim_kind`` (the ``kind`` of a required claim), a ``source_category`` (the
``category`` of a passage; for a case's documents, the document's authority), or both, and
its ``max_age_days``: a whole number of days (0 or more), or null for no age limit.

Which rule applies to a passage supporting a claim (most specific wins):

1. a rule naming both the claim's kind and the passage's category;
2. a rule naming the claim's kind only;
3. a rule naming the passage's category only;
4. otherwise the global ``max_age_days``.

So a claim's kind comes before a source's category. A rule naming a kind or category that no
input uses is fine: it simply never matches. A claim without a ``kind`` (or a passage without
a ``category``) matches no rule that names one, so the source's rule or the global
``max_age_days`` applies to it. A malformed rule (negative or fractional days, text for a
number, an unknown key, a rule naming neither key, two rules with the same keys) is refused
when the policy is parsed, naming the rule's field.

A policy without the list reads, hashes and signs exactly as before (the list is left out of
the canonical form when it is empty).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Final

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "FreshnessLimit",
    "FreshnessRule",
    "freshness_limit",
    "freshness_problems",
    "limits_for_source",
]

#: How a kind or category is written in a rule: a key of letters, digits, ``_``, ``-``, ``.``.
KIND_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
Kind = Annotated[str, Field(min_length=1, max_length=60, pattern=KIND_RE.pattern)]
GLOBAL_RULE: Final = "global max_age_days"


class FreshnessRule(BaseModel):
    """One rule: the claim kind and/or source category it applies to, and its age limit."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    claim_kind: Kind | None = None
    source_category: Kind | None = None
    max_age_days: int | None = Field(
        ge=0, description="oldest effective date allowed, in days before as_of (null: no limit)"
    )

    @model_validator(mode="after")
    def _names_something(self) -> FreshnessRule:
        if self.claim_kind is None and self.source_category is None:
            raise ValueError(
                "name the claim_kind or the source_category (or both) the rule applies to"
            )
        return self

    @property
    def specificity(self) -> int:
        """2: kind and category; 1: kind only; 0: category only (a kind comes first)."""
        if self.claim_kind is not None:
            return 2 if self.source_category is not None else 1
        return 0

    def describe(self) -> str:
        parts = []
        if self.claim_kind is not None:
            parts.append(f"claim kind {self.claim_kind!r}")
        if self.source_category is not None:
            parts.append(f"source category {self.source_category!r}")
        return " and ".join(parts)

    def matches(self, claim_kind: str | None, category: str | None) -> bool:
        if self.claim_kind is not None and self.claim_kind != claim_kind:
            return False
        return self.source_category is None or self.source_category == category


@dataclass(frozen=True)
class FreshnessLimit:
    """The age limit that applies to one passage supporting one claim, and which rule set it."""

    max_age_days: int | None  # None: no age limit
    rule: str  # "claim kind 'price'", "global max_age_days", ...

    def why_stale(self, age_days: int) -> str | None:
        """Why a passage ``age_days`` old is too old under this limit (None: it is not)."""
        if self.max_age_days is None or age_days <= self.max_age_days:
            return None
        return f"older than {self.max_age_days} days (rule: {self.rule})"


def freshness_limit(
    rules: Sequence[FreshnessRule],
    global_max_age_days: int | None,
    claim_kind: str | None,
    category: str | None,
) -> FreshnessLimit:
    """The limit for a passage of ``category`` supporting a claim of ``claim_kind`` (see the
    module for the order); the parse refuses two rules with the same keys, so one wins."""
    best: FreshnessRule | None = None
    for rule in rules:
        if rule.matches(claim_kind, category) and (
            best is None or rule.specificity > best.specificity
        ):
            best = rule
    if best is None:
        return FreshnessLimit(global_max_age_days, GLOBAL_RULE)
    return FreshnessLimit(best.max_age_days, best.describe())


def freshness_problems(rules: Sequence[FreshnessRule], where: str) -> list[str]:
    """Rules that repeat another's keys (which of the two would apply is not written down)."""
    problems: list[str] = []
    seen: dict[tuple[str | None, str | None], int] = {}
    for i, rule in enumerate(rules):
        key = (rule.claim_kind, rule.source_category)
        if key in seen:
            problems.append(
                f"{where}.{i}: applies to the same {rule.describe()} as {where}.{seen[key]}; "
                "keep one of them"
            )
        else:
            seen[key] = i
    return problems


def limits_for_source(
    rules: Sequence[FreshnessRule], global_max_age_days: int | None, category: str | None
) -> list[tuple[str, FreshnessLimit]]:
    """The age limit a passage of ``category`` gets for a claim without a kind (first) and for
    each claim kind the rules name, in name order: what a builder's suggestion of stale
    evidence depends on when it moves a document's date."""
    kinds = sorted({r.claim_kind for r in rules if r.claim_kind is not None})
    out = [("a claim without a kind", freshness_limit(rules, global_max_age_days, None, category))]
    out += [
        (f"kind {k!r}", freshness_limit(rules, global_max_age_days, k, category)) for k in kinds
    ]
    return out
