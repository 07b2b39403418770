"""The keys options take on the pages that are worked by keyboard (reasons on Label and
Adjudicate, the audit verdict): single letters, shown on the options themselves."""

from __future__ import annotations

__all__ = ["OPTION_LETTERS", "option_keys"]

#: in order; none of the letters the pages bind to buttons (N, P, S, K; J and K on Audit) nor
#: R (Streamlit's rerun; C, its clear-caches key, is the page's where an option shows it)
OPTION_LETTERS = "abcdefghilmoqtuvwxyz"


def option_keys(count: int, letters: str = OPTION_LETTERS) -> list[str]:
    """The keys of ``count`` options, in order; an option past the last letter has none ("")."""
    return [letters[i] if i < len(letters) else "" for i in range(count)]
