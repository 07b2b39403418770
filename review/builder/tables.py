"""The Case builder's tables and labels as plain data: a diff preview's rows and colours, a
suggestion, the base cases and families to pick from, a family's variants, checks and claims,
recorded edits, and which checks and suggestions need attention. The page shows them as
dataframes and text (never Markdown), with its links passed in."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import pandas as pd

from review.builder.diffs import DiffRow
from review.builder.documents import BaseCaseRow, SavedEdit
from review.builder.families import Check
from review.builder.family_view import ClaimMark, EditRow, FamilyRow, FamilyView, VariantRow
from review.builder.operator import Suggestion, operator_label
from review.core import readable
from review.core.taxonomy import Taxonomy

__all__ = [
    "CHANGE_COLOURS",
    "CHECK_NAMES",
    "CheckNote",
    "base_case_table",
    "change_styles",
    "check_notes",
    "checks_table",
    "claims_table",
    "confirm_start",
    "decision_label",
    "edit_groups",
    "edit_line",
    "evidence_state_label",
    "family_list_table",
    "metadata_table",
    "pending_variants",
    "preview_table",
    "saved_documents_message",
    "suggestion_source_label",
    "suggestion_table",
    "variant_label",
    "variants_table",
    "with_reasons",
]

CHANGE_COLOURS = {"changed": "#fff3cd", "removed": "#f8d7da", "added": "#d1e7dd", "same": ""}


def decision_label(tax: Taxonomy, key: str | None) -> str:
    """A decision as people read it: its label, the key when unknown, "—" when none."""
    return tax.label("decisions", key)


def with_reasons(tax: Taxonomy, decision: str | None, reasons: Sequence[str]) -> str:
    """A decision and its reason codes as people read them: "Abstain (No evidence ...)"."""
    label = decision_label(tax, decision)
    return f"{label} ({terms(tax, 'reason_codes', reasons)})" if reasons else label


def terms(tax: Taxonomy, section: str, keys: Sequence[str]) -> str:
    """Keys of a taxonomy section as their labels, comma-separated; "—" when there are none."""
    return ", ".join(readable.term(tax, section, k) for k in keys) or "—"


def evidence_state_label(tax: Taxonomy, state: str | None) -> str:
    """An evidence state as people read it ("Evidence removed"); none reads so."""
    return readable.term(tax, "evidence_states", state, missing="no evidence state")


def suggestion_source_label(tax: Taxonomy, source: str | None) -> str:
    """Where a suggestion came from, in words: "operator:drop_exception" -> "the operator Drop
    the exception", "family:removed (remove_answer)" -> "the Evidence removed variant (Remove
    the answer)"."""
    if not source:
        return "—"
    kind, _, rest = source.partition(":")
    if kind == "operator":
        return f"the operator {operator_label(rest)}"
    if kind == "family":
        state, _, ops = rest.partition(" (")
        names = ", ".join(operator_label(o) for o in ops.rstrip(")").split(",") if o)
        label = f"the {evidence_state_label(tax, state)} variant"
        return f"{label} ({names})" if names else label
    return source


# ------------------------------------------------------------------------------------------
# Preview of an edit


def preview_table(rows: Sequence[DiffRow]) -> pd.DataFrame:
    """The diff rows of a preview, line numbers as text (blank where a side has no line)."""
    return pd.DataFrame(
        [
            {
                "line before": "" if r.line_before is None else str(r.line_before),
                "line after": "" if r.line_after is None else str(r.line_after),
                "change": r.change,
                "before": r.before,
                "after": r.after,
            }
            for r in rows
        ]
    )


def change_styles(change: str, cells: int) -> list[str]:
    """The CSS of each of ``cells`` cells in a diff row of the given change."""
    return [f"background-color: {CHANGE_COLOURS.get(change, '')}"] * cells


def metadata_table(metadata: Mapping[str, str]) -> pd.DataFrame:
    return pd.DataFrame([{"field": k, "new value": v} for k, v in metadata.items()])


def suggestion_table(sug: Suggestion, tax: Taxonomy, freshness: str | None = None) -> pd.DataFrame:
    """What an operator suggests for the variant (an expert confirms it; it is not a label),
    with the policy's age limits when it suggests stale evidence (see
    :func:`review.builder.suggestions.freshness_note`)."""
    rows = [
        (
            "decision",
            decision_label(tax, sug.decision) if sug.decision else "keep the base's",
        ),
        ("reasons", terms(tax, "reason_codes", sug.reason_codes)),
        ("slices", terms(tax, "slices", sug.slices)),
        ("evidence state", evidence_state_label(tax, sug.evidence_state)),
        ("why", sug.note),
    ]
    if freshness:
        rows.append(("freshness", freshness))
    return pd.DataFrame(rows, columns=["", "suggestion"])


# ------------------------------------------------------------------------------------------
# Landing: base cases and families


def base_case_table(base: Sequence[BaseCaseRow]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"case": b.key, "family": b.family or "—", "question": b.question} for b in base]
    )


def family_list_table(
    fams: Sequence[FamilyRow], link: Callable[[str], str], tax: Taxonomy
) -> pd.DataFrame:
    """One row a family; ``link`` makes the address of its family view from its key."""
    return pd.DataFrame(
        [
            {
                "open": link(f.key),
                "family": f.key,
                "variants": f.variants,
                "awaiting confirmation": f.unconfirmed,
                "evidence states": ", ".join(evidence_state_label(tax, st) for st in f.states),
                "question": f.title,
            }
            for f in fams
        ]
    )


# ------------------------------------------------------------------------------------------
# Family view


def pending_variants(fam: FamilyView) -> list[VariantRow]:
    """Variants whose suggested label no expert has confirmed yet."""
    return [v for v in fam.variants if v.has_suggestion and v.confirmed_by is None]


def variants_table(
    fam: FamilyView, link: Callable[[int], str], tax: Taxonomy
) -> list[dict[str, object]]:
    """The family's variants as table rows; ``link`` makes a case's address from its id."""
    rows: list[dict[str, object]] = []
    for v in fam.variants:
        pending = v.has_suggestion and v.confirmed_by is None
        rows.append(
            {
                "open": link(v.case_id),
                "case": v.key,
                "evidence state": evidence_state_label(tax, v.evidence_state),
                "status": readable.term(tax, "case_statuses", v.status),
                "expected": "awaiting confirmation"
                if pending
                else with_reasons(tax, v.expected_decision, v.reason_codes),
                "suggested": "—"
                if not v.has_suggestion
                else with_reasons(tax, v.suggested_decision, v.suggested_reasons),
                "confirmed": "—"
                if not v.has_suggestion
                else (f"by {fam.person(v.confirmed_by)}" if v.confirmed_by else "no"),
                "documents": "; ".join(
                    f"{d.ref} ({d.visibility}, {d.role}, {d.access_scope})" for d in v.documents
                )
                or "(none: empty retrieval)",
                "identity may see": ", ".join(v.identity_scopes),
            }
        )
    return rows


@dataclass(frozen=True)
class CheckNote:
    """A message about the family's checks and how it is shown."""

    level: Literal["error", "warning", "success"]
    text: str


#: The family checks (review.builder.family_checks) as people read them
CHECK_NAMES = {
    "one_present": "One evidence-present case",
    "same_family": "One family key",
    "documents_known": "Every document has its text",
    "visibility_matches_scopes": "Visibility agrees with the identity's scopes",
    "present_shows_passage": "The evidence-present case shows the decisive passage",
    "removed_no_passage": "No decisive passage left visible",
    "forbidden_no_leak": "No restricted text visible",
    "decisive_documents_accounted": "Every decisive document accounted for",
}


def check_notes(fam: FamilyView) -> list[CheckNote]:
    """What to say about the checks: how many fail, how many cannot be verified, or that all
    pass."""
    notes: list[CheckNote] = []
    if fam.failed:
        notes.append(CheckNote("error", f"{len(fam.failed)} of {len(fam.checks)} checks fail."))
    if fam.unverified:
        notes.append(
            CheckNote(
                "warning",
                f"{readable.count(len(fam.unverified), 'check')} cannot be verified: no decisive "
                "passage is "
                "recorded. Mark it on the evidence-present case (Decisive passage tab) or check "
                "against a passage below.",
            )
        )
    if not fam.failed and not fam.unverified:
        notes.append(CheckNote("success", f"All {len(fam.checks)} checks pass."))
    return notes


def checks_table(checks: Sequence[Check]) -> pd.DataFrame:
    """The checks, failing ones first."""
    return pd.DataFrame(
        [
            {
                "result": "pass" if c.passed else "FAIL",
                "check": CHECK_NAMES.get(c.name) or readable.humanize(c.name),
                "variant": c.variant or "(family)",
                "detail": c.detail,
            }
            for c in sorted(checks, key=lambda c: c.passed)
        ]
    )


def variant_label(v: VariantRow, tax: Taxonomy, with_status: bool = False) -> str:
    """A variant in a picker ("KEY · Evidence removed") or an expander title (with its
    status)."""
    label = f"{v.key} · {evidence_state_label(tax, v.evidence_state)}"
    if with_status:
        return f"{label} · {readable.term(tax, 'case_statuses', v.status)}"
    return label


def confirm_start(v: VariantRow, tax: Taxonomy) -> tuple[int, list[str]]:
    """Where the confirmation form starts: the index of the suggested decision among the
    taxonomy's decisions (abstain when there is none) and the suggested reasons it knows."""
    decisions = list(tax.decisions)
    index = decisions.index(v.suggested_decision or "abstain")
    return index, [r for r in v.suggested_reasons if r in tax.reason_codes]


def claims_table(claims: Sequence[ClaimMark], tax: Taxonomy | None = None) -> pd.DataFrame:
    """Required claims and whether the variant's evidence still supports each; with their
    kinds (as the taxonomy names them) when a claim has one."""
    if not claims:
        return pd.DataFrame(columns=["claim", "support"])
    if not any(c.kind for c in claims):  # no kinds given: the table as it always was
        return pd.DataFrame([{"claim": c.text, "support": c.status} for c in claims])
    return pd.DataFrame(
        [
            {
                "claim": c.text,
                "kind": readable.term(tax, "claim_kinds", c.kind, "—") if tax else c.kind or "—",
                "support": c.status,
            }
            for c in claims
        ]
    )


def edit_line(e: EditRow, person: Callable[[str], str] = str) -> str:
    """One recorded edit (provenance) on one line of plain text; ``person`` names its author
    (FamilyView.person)."""
    return (
        f"#{e.id} {operator_label(e.operator)} on {e.source} at {e.start}-{e.end} → "
        f"{e.result or '—'} by {person(e.author)}, {readable.when(e.created_at)}; "
        f"params {e.params}"
    )


def saved_documents_message(saved: Sequence[SavedEdit]) -> str:
    """What saving an edit as documents only made: the derived documents (and restricted
    extracts) and their provenance records."""
    refs = ", ".join(e.ref + "".join(f" and {x}" for x in e.extra_refs) for e in saved)
    if len(saved) == 1:
        return f"Saved {refs} with provenance record {saved[0].edit_id}."
    ids = ", ".join(str(e.edit_id) for e in saved)
    return f"Saved {refs} (one edit of {len(saved)} documents) with provenance records {ids}."


def edit_groups(edits: Sequence[EditRow], person: Callable[[str], str] = str) -> list[str]:
    """The edits of several documents made as one action (one edit group), one line each:
    "One edit of 3 documents: Remove the answer on A@1, B@1, C@1 by Ines, 4 Dec 18:40"."""
    groups: dict[str, list[EditRow]] = {}
    for e in edits:
        if e.group:
            groups.setdefault(e.group, []).append(e)
    return [
        f"One edit of {len(rows)} documents: {operator_label(rows[0].operator)} on "
        f"{', '.join(r.source for r in rows)} by {person(rows[0].author)}, "
        f"{readable.when(rows[0].created_at)}; params {rows[0].params}"
        for rows in groups.values()
        if len(rows) > 1
    ]
