"""The taxonomy (policies/taxonomy.yaml): decisions, reason codes, categories, slices.

Every key carries a one-line definition that labelers see beside the choice. The file is
validated strictly: duplicate keys, unknown keys, wrong types and references to undefined
entries are refused with the file, the key and the problem.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from review.core.yamlstrict import load_model

ROOT = Path(__file__).resolve().parents[2]


def policies_dir() -> Path:
    """Where the policy files live: ``WORKBENCH_POLICIES_DIR`` or the project's policies/."""
    return Path(os.environ.get("WORKBENCH_POLICIES_DIR") or ROOT / "policies")


CORE_DECISIONS = ("answer", "abstain", "clarify", "partial", "escalate")
KEY_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")

Definition = Annotated[str, Field(min_length=3, max_length=300)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Term(_Strict):
    label: str
    definition: Definition


#: A refusal-wording key (R1, C1, E1, or a custom one): what cases, outputs and the taxonomy
#: name a message by.
MESSAGE_KEY_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,39}$"
MessageKey = Annotated[str, Field(pattern=MESSAGE_KEY_PATTERN)]


class DecisionTerm(Term):
    answers: bool = Field(description="True when the assistant gives a substantive answer")
    messages: list[MessageKey] = Field(
        default_factory=list,
        description="wording keys a case expecting this decision may name; a case expecting "
        "a non-answer must name one when the list is not empty",
    )


class ReasonTerm(Term):
    labels: bool = Field(
        default=True,
        description="False: a code only the gate gives (an infrastructure state, not a "
        "property of a question), so labelers do not choose it for a case",
    )
    message: MessageKey | None = Field(
        default=None, description="the wording key a case with this reason usually expects"
    )


class CategoryTerm(Term):
    default_decision: str
    default_message: MessageKey | None = None


class Taxonomy(_Strict):
    version: int = Field(ge=1)
    decisions: dict[str, DecisionTerm]
    reason_codes: dict[str, ReasonTerm]
    categories: dict[str, CategoryTerm]
    slices: dict[str, Term]
    evidence_states: dict[str, Term]
    document_roles: dict[str, Term]
    access_scopes: dict[str, Term]
    authorities: dict[str, Term]
    jurisdictions: dict[str, Term]
    splits: dict[str, Term]
    case_statuses: dict[str, Term]
    #: the kinds of fact a case's required claim may be given (optional section): the
    #: no-answer policy's freshness rules name them as claim_kind
    claim_kinds: dict[str, Term] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _references(self) -> Taxonomy:
        problems: list[str] = []
        for section in type(self).model_fields:
            value = getattr(self, section)
            if isinstance(value, dict):
                if not value and section != "claim_kinds":
                    problems.append(f"{section}: must define at least one entry")
                for key in value:
                    if not KEY_RE.match(key):
                        problems.append(
                            f"{section}.{key}: use letters, digits and _, starting with a letter"
                        )
        missing = [d for d in CORE_DECISIONS if d not in self.decisions]
        if missing:
            problems.append(f"decisions: the core decisions {', '.join(missing)} are missing")
        for key, cat in self.categories.items():
            if cat.default_decision not in self.decisions:
                problems.append(
                    f"categories.{key}.default_decision: {cat.default_decision!r} is not "
                    "defined under decisions"
                )
            elif cat.default_message is not None and cat.default_message not in (
                self.decisions[cat.default_decision].messages
            ):
                problems.append(
                    f"categories.{key}.default_message: {cat.default_message!r} is not one of "
                    f"the messages of {cat.default_decision!r}"
                )
        for split in ("train", "validation", "test"):
            if split not in self.splits:
                problems.append(f"splits: {split!r} is required")
        if problems:
            raise ValueError("\n".join(problems))
        return self

    # Convenience views -------------------------------------------------------------------
    def answering_decisions(self) -> set[str]:
        return {k for k, v in self.decisions.items() if v.answers}

    def expected_message(
        self, decision: str, category: str | None, reason_codes: list[str] | tuple[str, ...]
    ) -> str | None:
        """The wording key a case expecting ``decision`` is suggested: its
        category's default message when the case expects the category's default decision,
        else the first of its reasons' messages that the decision allows, else the decision's
        message when it has only one. None: no suggestion (the author names it)."""
        term = self.decisions.get(decision)
        if term is None or not term.messages:
            return None
        cat = self.categories.get(category or "")
        if cat is not None and cat.default_decision == decision and cat.default_message:
            return cat.default_message
        for code in reason_codes:
            reason = self.reason_codes.get(code)
            if reason is not None and reason.message in term.messages:
                return reason.message
        if len(term.messages) == 1 and not term.answers:
            return term.messages[0]
        return None

    def case_reason_codes(self) -> dict[str, ReasonTerm]:
        """The reason codes a labeler may give a case (not the gate-only ones)."""
        return {k: v for k, v in self.reason_codes.items() if v.labels}

    def label(self, section: str, key: str | None, missing: str = "—") -> str:
        """A key of ``section`` as people read it: its term's label, the key itself when the
        taxonomy does not know it, ``missing`` when there is none."""
        if not key:
            return missing
        terms: dict[str, Term] = getattr(self, section)
        term = terms.get(key)
        return term.label if term else key

    def definition(self, section: str, key: str) -> str:
        terms: dict[str, Term] = getattr(self, section)
        term = terms.get(key)
        return term.definition if term else ""


def load_taxonomy(path: Path | None = None) -> Taxonomy:
    """Load and validate a taxonomy file (raises PolicyFileError naming file and key)."""
    return load_model(Taxonomy, path or policies_dir() / "taxonomy.yaml")


@lru_cache(maxsize=4)
def _cached(path: str, mtime: float) -> Taxonomy:
    return load_taxonomy(Path(path))


def taxonomy(path: Path | None = None) -> Taxonomy:
    """The taxonomy in force, reloaded when the file changes."""
    path = path or policies_dir() / "taxonomy.yaml"
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return load_taxonomy(path)  # raises PolicyFileError naming the file
    return _cached(str(path), mtime)
