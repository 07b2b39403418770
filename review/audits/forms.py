"""What the Audit page's forms read: the new-plan form (population filter, strata, sample) turned
into a :class:`PopulationFilter` and a :class:`PlanSpec`, and the rows of the claim editor (the
claims of an answer under review, with the chunk ids each cites written as text)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from review.audits import vocabulary
from review.audits.items import ClaimDraft, ItemView, propose_claims
from review.audits.plans import PlanSpec, parse_explicit_sizes
from review.audits.population import PopulationFilter
from review.audits.verdicts import AUDIT_CLAIM_VERDICTS, VerdictView
from review.core import terms
from review.core.errors import InputError
from review.core.keys import option_keys
from review.core.readable import humanize

__all__ = [
    "CLAIM_KEYS",
    "NOT_JUDGED",
    "STAGE_KEYS",
    "VERDICT_KEYS",
    "PlanForm",
    "audit_key_lines",
    "cited_options",
    "claim_row",
    "claim_rows",
    "claim_verdict_index",
    "claim_verdict_label",
    "claim_verdict_options",
    "draft_of_row",
    "parse_attribute_filter",
    "parse_attribute_strata",
    "parse_cited",
    "review_claims_by_default",
    "verdict_of_choice",
]


# --- the new-plan form ----------------------------------------------------------------------

AttributeFilter = tuple[tuple[str, tuple[str, ...]], ...]


def parse_attribute_filter(text: str) -> AttributeFilter:
    """The trace attribute filter, written ``key=value1,value2`` (one attribute); empty text
    filters nothing."""
    if not text.strip():
        return ()
    key, sep, vals = text.partition("=")
    if not sep or not key.strip() or not vals.strip():
        raise InputError("attribute filter: write key=value1,value2")
    return ((key.strip(), tuple(v.strip() for v in vals.split(",") if v.strip())),)


def parse_attribute_strata(text: str) -> tuple[str, ...]:
    """Trace attributes to stratify by, comma-separated names, as ``attr.<name>`` dimensions."""
    return tuple(f"attr.{a.strip()}" for a in text.split(",") if a.strip())


def _date(value: object) -> dt.date | None:
    """A date picked in the form; None when none is (or a range is still being picked)."""
    return value if isinstance(value, dt.date) else None


@dataclass(frozen=True)
class PlanForm:
    """The new-plan form as entered: the filter's selections, the raw text fields and the
    sample settings. ``date_from``/``date_to`` are whatever the date pickers returned."""

    name: str = ""
    date_from: object = None
    date_to: object = None
    decisions: Sequence[str] = ()
    reason_codes: Sequence[str] = ()
    feedback: Sequence[str] = ()
    languages: Sequence[str] = ()
    customer_tiers: Sequence[str] = ()
    document_types: Sequence[str] = ()
    policy_versions: Sequence[str] = ()
    model_versions: Sequence[str] = ()
    index_versions: Sequence[str] = ()
    prompt_versions: Sequence[str] = ()
    embedding_versions: Sequence[str] = ()
    reranker_versions: Sequence[str] = ()
    attribute_filter: str = ""
    include_restricted: bool = True
    strata: Sequence[str] = ()
    attribute_strata: str = ""
    allocation: str = "proportional"
    total: int = 100
    seed: int = 0
    overlap: int = 1
    blind: bool = True
    explicit: str = ""

    def population_filter(self) -> PopulationFilter:
        """The population the form describes (InputError for a malformed attribute filter)."""
        return PopulationFilter(
            date_from=_date(self.date_from),
            date_to=_date(self.date_to),
            decisions=tuple(self.decisions),
            reason_codes=tuple(self.reason_codes),
            feedback=tuple(self.feedback),
            languages=tuple(self.languages),
            customer_tiers=tuple(self.customer_tiers),
            document_types=tuple(self.document_types),
            policy_versions=tuple(self.policy_versions),
            model_versions=tuple(self.model_versions),
            index_versions=tuple(self.index_versions),
            prompt_versions=tuple(self.prompt_versions),
            embedding_versions=tuple(self.embedding_versions),
            reranker_versions=tuple(self.reranker_versions),
            attributes=parse_attribute_filter(self.attribute_filter),
            include_restricted=self.include_restricted,
        )

    def dimensions(self) -> tuple[str, ...]:
        """The strata: the chosen dimensions, then the trace attributes named."""
        return tuple(self.strata) + parse_attribute_strata(self.attribute_strata)

    def spec(self) -> PlanSpec:
        """The plan to create; the explicit sizes are read only for the explicit allocation."""
        return PlanSpec(
            name=self.name,
            filter=self.population_filter(),
            strata=self.dimensions(),
            allocation=self.allocation,
            total=self.total,
            seed=self.seed,
            explicit_sizes=(
                parse_explicit_sizes(self.explicit) if self.allocation == "explicit" else None
            ),
            overlap=self.overlap,
            blind=self.blind,
        )


# --- the claim editor -----------------------------------------------------------------------

#: The claim verdict choice that leaves a claim unjudged.
NOT_JUDGED = "(not judged)"


def parse_cited(text: str) -> tuple[str, ...]:
    """The chunk ids a claim cites, written comma-separated."""
    return tuple(x.strip() for x in text.split(",") if x.strip())


def claim_row(uid: int, draft: ClaimDraft | None = None) -> dict[str, Any]:
    """One row of the claim editor (``uid`` keeps its widgets apart); empty without a draft."""
    if draft is None:
        return {"uid": uid, "text": "", "cited": "", "verdict": None}
    return {
        "uid": uid,
        "text": draft.text,
        "cited": ", ".join(draft.cited),
        "verdict": draft.verdict,
    }


def claim_rows(
    view: ItemView, mine: VerdictView | None, next_uid: Callable[[], int]
) -> list[dict[str, Any]]:
    """The editor's starting rows: the claims of the reviewer's verdict when it has some, else
    the answer split into claims with the ids each cites."""
    drafts = (
        mine.claim_drafts
        if mine and mine.claims
        else propose_claims(view.answer_text, view.citations)
    )
    return [claim_row(next_uid(), d) for d in drafts]


def draft_of_row(row: dict[str, Any]) -> ClaimDraft:
    """The claim an editor row holds."""
    return ClaimDraft(str(row["text"]), parse_cited(str(row["cited"])), row["verdict"])


def claim_verdict_options() -> list[str]:
    """The choices of a claim's verdict: not judged, the claim verdicts, not a claim."""
    return [NOT_JUDGED, *(str(v) for v in AUDIT_CLAIM_VERDICTS)]


#: The key that gives the claim in hand each verdict (numbers, as labeling's decision keys;
#: Streamlit keeps C and R for itself).
CLAIM_KEYS: dict[str, str] = {
    terms.ClaimVerdict.supported: "1",
    terms.ClaimVerdict.unsupported: "2",
    terms.ClaimVerdict.contradicted: "3",
    terms.ClaimVerdict.not_a_claim: "4",
}


#: The verdict of the trace by letter, shown on each option (in the vocabulary's order).
VERDICT_KEYS: dict[str, str] = dict(
    zip(vocabulary.VERDICTS, option_keys(len(vocabulary.VERDICTS)), strict=True)
)

#: The stages by the digits after the claim keys (5-9), shown on each option.
STAGE_KEYS: dict[str, str] = dict(
    zip(vocabulary.STAGES, option_keys(len(vocabulary.STAGES), "56789"), strict=True)
)


def audit_key_lines() -> list[tuple[str, str]]:
    """Every key of the My queue tab as its key list prints it: (key, what it does)."""
    return [
        *((k.upper(), f"Verdict: {vocabulary.VERDICTS[v]}") for v, k in VERDICT_KEYS.items() if k),
        *(
            (k, f"Stage (pick or unpick): {vocabulary.STAGES[v]}")
            for v, k in STAGE_KEYS.items()
            if k
        ),
        *(
            (k, f"The claim in hand is {claim_verdict_label(str(v))}; on to the next claim")
            for v, k in CLAIM_KEYS.items()
        ),
        ("J / K", "Next / previous claim"),
        ("Ctrl+Enter", "Save the verdict"),
        ("S", "Skip this trace (it goes back to the queue)"),
        ("N", "Next trace (once the verdict is saved)"),
        ("?", "Show these keys"),
    ]


def claim_verdict_label(choice: str) -> str:
    """A claim verdict choice as people read it ("not_a_claim" -> "Not a claim")."""
    return choice if choice == NOT_JUDGED else humanize(choice)


def cited_options(view: ItemView, cited: Sequence[str] = ()) -> list[str]:
    """The chunk ids a claim can cite: the trace's retrieved chunks in rank order, then any id
    the claim already cites that is not among them (kept, so nothing is lost silently)."""
    ids = [c.chunk_id for c in view.chunks]
    return ids + [c for c in dict.fromkeys(cited) if c not in ids]


def claim_verdict_index(verdict: str | None) -> int:
    """Where a row's verdict sits among :func:`claim_verdict_options` (unknown: not judged)."""
    opts = claim_verdict_options()
    return opts.index(verdict) if verdict in opts else 0


def verdict_of_choice(chosen: str | None) -> str | None:
    """A row's verdict from the choice made (None: not judged)."""
    return None if chosen == NOT_JUDGED else chosen


def review_claims_by_default(view: ItemView, mine: VerdictView | None) -> bool:
    """Whether the claim review starts switched on: as the reviewer last saved it, else for
    answers (and partial answers)."""
    return bool(mine.claims) if mine else view.decision in ("answer", "partial")
