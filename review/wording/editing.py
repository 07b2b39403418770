"""The Wording page's draft as plain data: which keys can be edited, what a new key must look
like, the edits kept while the person switches keys, the live lint (with what a viewer
without clearance may be shown), and the summary of the draft before it is proposed.

A draft is a mapping ``message key -> {"text": ..., "description": ...}`` holding only the
messages that differ from the wording in force (the page keeps it in session state)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass

import pandas as pd

from review.wording import compare, drafts
from review.wording import terms as wording_terms
from review.wording.findings import Finding
from review.wording.lint import lint
from review.wording.messages import (
    EXAMPLE_VALUES,
    MESSAGE_KEY_RE,
    REQUIRED_KEY_MEANING,
    Message,
    WordingSet,
    parse_wording,
)
from review.wording.versions import WordingInForce, compliance_reason

__all__ = [
    "Draft",
    "DraftSummary",
    "LiveLint",
    "draft_edits",
    "example_value",
    "key_meaning",
    "live_lint",
    "message_keys",
    "new_key_problem",
    "preview_only_findings",
    "record_edit",
    "start_values",
    "summarize_draft",
]

Draft = MutableMapping[str, dict[str, str]]


def key_meaning(key: str) -> str:
    """What a required message key is for; "custom message" for any other key."""
    return REQUIRED_KEY_MEANING.get(key, "custom message")


def message_keys(wording: WordingSet, draft: Mapping[str, object]) -> list[str]:
    """The keys the editor offers: the wording's, then keys added in the draft."""
    return list(wording.messages) + [k for k in draft if k not in wording.messages]


def new_key_problem(candidate: str, keys: Iterable[str]) -> str | None:
    """Why ``candidate`` (already stripped) cannot be added as a message key, or None."""
    if not MESSAGE_KEY_RE.match(candidate):
        return (
            "Message keys use capital letters, digits and _, starting with a letter "
            "(like R2_BILLING)."
        )
    if candidate in keys:
        return f"{candidate} exists already: pick it in the list above."
    return None


def start_values(
    draft: Mapping[str, Mapping[str, str]], key: str, base: Message | None
) -> tuple[str, str]:
    """The text and description the editor opens ``key`` with: the draft's, else the wording
    in force's, else empty (a new key)."""
    entry = draft.get(key, {})
    return (
        entry.get("text", base.text if base else ""),
        entry.get("description", base.description if base else ""),
    )


def record_edit(draft: Draft, key: str, text: str, description: str, base: Message | None) -> None:
    """Keep the edit of ``key`` in the draft; an edit back to the wording in force leaves
    the draft (so the draft holds only real changes)."""
    if base is not None and text == base.text and description == base.description:
        draft.pop(key, None)
    else:
        draft[key] = {"text": text, "description": description}


def example_value(name: str) -> str:
    """The value a placeholder is previewed with: the standard example, else its name in
    brackets (``[missing item]``)."""
    return EXAMPLE_VALUES.get(name, f"[{name.replace('_', ' ')}]")


@dataclass(frozen=True)
class LiveLint:
    """The lint run while typing, with the terms the viewer may learn about."""

    restricted_titles: tuple[str, ...]
    doc_ids: tuple[str, ...]
    allowed_contacts: tuple[str, ...]
    company_names: tuple[str, ...] = ()

    def lint(self, text: str, key: str | None) -> list[Finding]:
        return lint(
            text,
            key=key,
            restricted_titles=self.restricted_titles,
            allowed_contacts=self.allowed_contacts,
            doc_ids=self.doc_ids,
            company_names=self.company_names,
        )


def live_lint(
    current: WordingInForce, terms: wording_terms.CorpusTerms, clearance: bool
) -> LiveLint:
    """Without clearance the live lint leaves out restricted titles and the ids of restricted
    documents: otherwise trying candidate titles would tell who exists. They are still checked
    when a proposal is stored and when it is signed."""
    if clearance:
        titles = (*current.wording.restricted_titles, *terms.restricted_titles)
        doc_ids = tuple(terms.doc_ids)
    else:
        hidden = set(terms.restricted_doc_ids)
        titles, doc_ids = (), tuple(d for d in terms.doc_ids if d not in hidden)
    return LiveLint(
        tuple(titles),
        doc_ids,
        tuple(current.wording.allowed_contacts),
        tuple(current.wording.company_names),
    )


def preview_only_findings(
    template: Sequence[Finding], rendered: Sequence[Finding]
) -> list[Finding]:
    """Findings of the filled-in preview under rules the template itself does not trip (what
    the example values add)."""
    seen = {f.rule for f in template}
    return [f for f in rendered if f.rule not in seen]


def draft_edits(draft: Mapping[str, Mapping[str, str]]) -> dict[str, drafts.MessageDraft]:
    """The draft as edits for the wording file (a blank description keeps the old one)."""
    return {
        k: drafts.MessageDraft(v["text"], v["description"] if v["description"].strip() else None)
        for k, v in draft.items()
    }


@dataclass(frozen=True)
class DraftSummary:
    """The changed messages of a valid draft with their lint counts, who must sign and why."""

    changes: pd.DataFrame
    compliance_reason: str
    lint_total: int


def summarize_draft(
    current: WordingInForce, draft_text: str, terms: wording_terms.CorpusTerms
) -> DraftSummary:
    """``draft_text`` (the validated draft file) against the wording in force."""
    new = parse_wording(draft_text)
    changes = [c for c in compare.compare(current.wording, new) if c.status != "unchanged"]
    lint_counts = wording_terms.lint_wording(new, terms)
    frame = compare.compare_frame(changes)
    frame["lint findings"] = [len(lint_counts.get(c.key, [])) for c in changes]
    parent = current.wording if current.version is not None else None
    return DraftSummary(
        frame,
        compliance_reason(parent, new),
        sum(len(v) for v in lint_counts.values()),
    )
