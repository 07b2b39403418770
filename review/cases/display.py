"""What the Cases page shows, as plain data: the filter of the list, the tables of cases, of a
case's documents, details and family, its reason codes and decision as read, and the texts of
the split assignment (last assignment, preview, result). The page passes its links in."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from review.cases.cases import CaseDocView, CaseFilter, CaseRow, CaseView
from review.cases.splits import SplitPlan
from review.core import clearance, readable
from review.core.escape import markdown_text
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy, Term

__all__ = [
    "case_filter",
    "case_table",
    "category_defaults_help",
    "category_mismatch",
    "decision_label",
    "details_table",
    "documents_table",
    "empty_list_message",
    "family_table",
    "reason_text",
    "split_applied_message",
    "split_note",
    "split_preview",
    "split_preview_current",
    "terms_help",
]


def _term(tax: Taxonomy | None, section: str, key: str | None, missing: str = "") -> str:
    """A taxonomy key as its label when the taxonomy is given (the key itself otherwise)."""
    if tax is None:
        return key or missing
    return readable.term(tax, section, key, missing)


def _who(email: str | None, names: Mapping[str, str] | None, missing: str = "") -> str:
    """A person by name when the names are given (the address otherwise)."""
    if names is None:
        return email or missing
    return readable.person(email, names, missing)


def case_filter(
    text: str = "",
    decision: str = "",
    category: str = "",
    slice_: str = "",
    split: str = "",
    status: str = "",
    family: str = "",
) -> CaseFilter:
    """The list's filter from the filter widgets ("" is any)."""
    return CaseFilter(
        text=text,
        expected_decision=decision or None,
        category=category or None,
        slice=slice_ or None,
        split=split or None,
        status=status or None,
        family=family or None,
    )


def case_table(
    rows: Sequence[CaseRow],
    link: Callable[[int], str],
    tax: Taxonomy | None = None,
    names: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """One page of the case list; ``link`` makes a case's address from its id. With ``tax``
    and ``names`` the keys read as their taxonomy labels and people as their names."""
    return pd.DataFrame(
        [
            {
                "open": link(r.id),
                "case": r.key,
                "question": r.question,
                "decision": _term(tax, "decisions", r.agreed_decision or r.expected_decision),
                "label from": "" if r.blind else (_who(r.agreed_by, names) or "author"),
                "author expected": (
                    _term(tax, "decisions", r.expected_decision)
                    if r.agreed_decision and r.agreed_decision != r.expected_decision
                    else ""
                ),
                "category": _term(tax, "categories", r.category),
                "slices": ", ".join(_term(tax, "slices", k) for k in r.slices),
                "split": _term(tax, "splits", r.split),
                "status": _term(tax, "case_statuses", r.status),
                "family": r.family or "",
                "evidence": _term(tax, "evidence_states", r.evidence_state),
                "docs": r.documents,
            }
            for r in rows
        ]
    )


def empty_list_message(total: int, all_cases: int) -> str:
    """What an empty list says: nothing matches (there are cases) or there are none yet."""
    if total == 0 and all_cases:
        return "No cases match these filters."
    return "No cases yet: create one above or import a JSONL file."


# ------------------------------------------------------------------------------------------
# One case


def decision_label(tax: Taxonomy, key: str) -> str:
    return tax.label("decisions", key, missing=key)


def category_defaults_help(tax: Taxonomy) -> str:
    """The help of the expected-decision select: each category's agreed behaviour."""
    md = markdown_text  # the taxonomy is edited by people: its text shows as typed
    lines = [
        f"- **{md(c.label)}**: {md(tax.label('decisions', c.default_decision))}"
        + (f" ({md(c.default_message)})" if c.default_message else "")
        for c in tax.categories.values()
    ]
    return "Each category's default decision; another needs a note saying why.\n" + "\n".join(lines)


def agreed_text(view: CaseView, tax: Taxonomy) -> str | None:
    """The agreed label beside the author's expected one (None: no agreed label yet)."""
    a = view.agreed
    if a is None:
        return None
    by = "adjudicated" if a.by == "adjudication" else "agreed by its annotators"
    text = f"Agreed label ({by}): {tax.label('decisions', a.decision)}"
    if a.reason_codes:
        text += f" · {', '.join(a.reason_codes)}"
    if (a.decision, tuple(a.reason_codes)) != (view.expected_decision, view.reason_codes):
        text += (
            f". The author expected {tax.label('decisions', view.expected_decision)}"
            + (f" · {', '.join(view.reason_codes)}" if view.reason_codes else "")
            + "; runs, metrics and exports score against the agreed label."
        )
    return text


def category_mismatch(view: CaseView, tax: Taxonomy) -> str | None:
    """One sentence when the case expects another decision than its category's default
    else None; the case's notes say why."""
    cat = tax.categories.get(view.category)
    if cat is None or cat.default_decision == view.expected_decision:
        return None
    return (
        f"Expects {tax.label('decisions', view.expected_decision)!r} where category "
        f"{cat.label!r} defaults to {tax.label('decisions', cat.default_decision)!r}; "
        "the notes say why."
    )


def terms_help(terms: Mapping[str, Term]) -> str:
    """The help of a select of taxonomy terms: each term's label and definition as a
    Markdown list, the terms' own text escaped (it shows as typed)."""
    return "\n".join(
        f"- **{markdown_text(t.label)}**: {markdown_text(t.definition)}" for t in terms.values()
    )


def reason_text(codes: Sequence[str], tax: Taxonomy) -> str:
    """Each reason code with its definition, one per line; "(none)" without any."""
    return "\n".join(f"{c}: {tax.definition('reason_codes', c)}" for c in codes) or "(none)"


def documents_table(
    docs: Sequence[CaseDocView],
    actor: Actor,
    link: Callable[[int], str],
    tax: Taxonomy | None = None,
) -> pd.DataFrame:
    """The case's documents; a restricted document's title only for a user with clearance.
    ``link`` makes a document's address from its id; with ``tax`` roles and access scopes
    read as their labels."""
    return pd.DataFrame(
        [
            {
                "open": link(d.document_id),
                "document": d.ref,
                "title": clearance.title(actor, d.title, d.access_scope),
                "visibility": d.visibility,
                "role": _term(tax, "document_roles", d.role),
                "access": _term(tax, "access_scopes", d.access_scope),
                "effective": readable.when(d.effective_date, with_time=False, missing=""),
                "current version": d.is_current,
            }
            for d in docs
        ]
    )


def details_table(
    view: CaseView, tax: Taxonomy | None = None, names: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """The case's labels and bookkeeping as (field, value) rows; with ``tax`` and ``names``
    keys read as their labels and people as their names."""
    by = _who(view.updated_by, names, "—")
    return pd.DataFrame(
        [
            ("category", _term(tax, "categories", view.category)),
            ("expected wording", view.expected_message or "—"),
            ("slices", ", ".join(_term(tax, "slices", k) for k in view.slices) or "—"),
            ("split", _term(tax, "splits", view.split)),
            ("status", _term(tax, "case_statuses", view.status)),
            ("family", view.family or "—"),
            ("evidence state", _term(tax, "evidence_states", view.evidence_state, "—")),
            ("question language", view.record.get("language") or "not stated"),
            ("version", str(view.version)),
            ("last change", f"{readable.when(view.updated_at)} by {by}"),
        ],
        columns=["field", "value"],
    )


def family_table(
    rows: Sequence[CaseRow], link: Callable[[int], str], tax: Taxonomy | None = None
) -> pd.DataFrame:
    """The variants of the case's family."""
    return pd.DataFrame(
        [
            {
                "open": link(r.id),
                "case": r.key,
                "evidence state": _term(tax, "evidence_states", r.evidence_state),
                "expected": _term(tax, "decisions", r.expected_decision),
                "question": r.question,
            }
            for r in rows
        ]
    )


# ------------------------------------------------------------------------------------------
# Split assignment


def split_note(last: Mapping[str, Any] | None) -> str:
    """How splits are assigned, and the last assignment if there was one."""
    return (
        "Stratified by expected decision and slice, reproducible from the seed. Cases whose "
        "split a threshold sign-off relied on never move."
        + (
            f" Last assignment: seed {last['seed']} by {last['by']} at {last['at'][:16]}, "
            f"{readable.count(last['moved'], 'case')} moved."
            if last
            else ""
        )
    )


def split_preview(sp: SplitPlan, seed: int, keep: bool) -> dict[str, Any]:
    """What is kept of a previewed assignment until its inputs change or it is applied."""
    return {
        "seed": seed,
        "keep": keep,
        "counts": sp.counts,
        "moves": sp.moves,
        "locked": int(sp.cases["locked"].sum()),
    }


def split_preview_current(preview: Mapping[str, Any] | None, seed: int, keep: bool) -> bool:
    """Whether a kept preview was made with these inputs."""
    return preview is not None and (preview["seed"], preview["keep"]) == (seed, keep)


def split_applied_message(moved: int, seed: int, previewed: int) -> str:
    """The result of applying an assignment, noting when it moved other cases than the
    preview showed (the cases changed meanwhile)."""
    return f"{readable.count(moved, 'case')} moved; seed {seed} recorded." + (
        f" The cases changed after the preview, which showed {readable.count(previewed, 'move')}."
        if moved != previewed
        else ""
    )
