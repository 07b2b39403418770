"""The keys of the Label page, listed once: the page binds them and the `?` overlay lists
them from here (and a test checks each is bound)."""

from __future__ import annotations

from dataclasses import dataclass

from review.core.keys import option_keys
from review.core.taxonomy import Taxonomy

__all__ = ["Key", "decision_keys", "label_keys", "reason_keys", "reason_lines"]

SUBMIT = "ctrl+enter"
NEXT = "n"
PREVIOUS = "p"
SKIP = "s"
HELP = "k"


@dataclass(frozen=True)
class Key:
    key: str  # as Streamlit's ``shortcut=`` takes it
    shows: str  # as the overlay prints it
    does: str


def decision_keys(tax: Taxonomy) -> dict[str, str]:
    """Decision -> its key: 1, 2, ... in the taxonomy's order."""
    return {d: str(i + 1) for i, d in enumerate(tax.decisions)}


def reason_keys(tax: Taxonomy) -> dict[str, str]:
    """Reason code -> its key (a letter) for the reasons a labeler may give, in order."""
    codes = list(tax.case_reason_codes())
    return {c: k for c, k in zip(codes, option_keys(len(codes)), strict=True) if k}


def reason_lines(tax: Taxonomy) -> list[tuple[str, str]]:
    """The reason keys as the key list prints them: (key, what it does)."""
    terms = tax.case_reason_codes()
    return [
        (k.upper(), f"Reason: {terms[c].label} (pick or unpick)")
        for c, k in reason_keys(tax).items()
    ]


def label_keys(tax: Taxonomy) -> list[Key]:
    """Every key of the Label page, in the order the overlay lists them."""
    keys = [Key(k, k, f"Decision: {tax.decisions[d].label}") for d, k in decision_keys(tax).items()]
    return [
        *keys,
        Key(SUBMIT, "Ctrl+Enter", "Submit the label and open the next case"),
        Key(PREVIOUS, "P", "Back to the case I labeled before (my label can be changed)"),
        Key(NEXT, "N", "Next case from my queue"),
        Key(SKIP, "S", "Skip this case (it goes back to the queue)"),
        Key(HELP, "? or K", "Show these keys"),
    ]
