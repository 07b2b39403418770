"""Moving between the Case builder's views (query parameters) and the message a save leaves
for the next run."""

from __future__ import annotations

from typing import NoReturn

import streamlit as st

from pages import ui

FLASH_KEY = "bld_flash"
FOCUS_KEY = "bld_focus_variant"


def go(**params: str) -> NoReturn:
    """Switch view by query parameters, keeping the others (such as ``as``)."""
    for k in ("case", "family"):
        if k in st.query_params and k not in params:
            del st.query_params[k]
    for k, v in params.items():
        st.query_params[k] = v
    st.rerun()


def leave_message(text: str) -> None:
    """A success message shown once, at the top of the next run."""
    st.session_state[FLASH_KEY] = text


def focus_variant(case_id: int) -> None:
    """Open the family view's confirmation form on this (just saved) variant."""
    st.session_state[FOCUS_KEY] = case_id


def take_focus() -> int | None:
    """The variant a save asked the confirmation form to open on, once."""
    focus = st.session_state.pop(FOCUS_KEY, None)
    return focus if isinstance(focus, int) else None


def flash() -> None:
    msg = st.session_state.pop(FLASH_KEY, None)
    if msg:
        st.success(ui.plain(msg))
