"""The keys of the Label page, listed once: the page binds them and the `?` overlay lists
them from here (and a test checks each is bound)."""

from __future__ import annotations

from dataclasses import dataclass

from review.core.taxonomy import Taxonomy

__all__ = ["Key", "decision_keys", "label_keys"]

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
