"""Moving between the Case builder's views (query parameters) and the message a save leaves
for the next run."""

from __future__ import annotations

from typing import NoReturn

import streamlit as st

from pages import ui

FOCUS_KEY = "bld_focus_variant"


def go(**params: str) -> NoReturn:
    """Switch view by query parameters, keeping the others (such as ``as``)."""
    for k in ("case", "family"):
        if k in st.query_params and k not in params:
            del st.query_params[k]
    for k, v in params.items():
        st.query_params[k] = v
    st.rerun()


# A saved variant opens its family's view on the form that confirms its label: the message
# is said there (ui.under(SAVED) under that form's heading), where the next step is, not at
# the top of a long page the browser may not show after the switch.
SAVED = "bld_saved"


def leave_message(text: str) -> None:
    """Say ``text`` under the family view's "Confirm a suggested label" heading, once."""
    ui.said(SAVED, text)


def focus_variant(case_id: int) -> None:
    """Open the family view's confirmation form on this (just saved) variant."""
    st.session_state[FOCUS_KEY] = case_id


def take_focus() -> int | None:
    """The variant a save asked the confirmation form to open on, once."""
    focus = st.session_state.pop(FOCUS_KEY, None)
    return focus if isinstance(focus, int) else None
