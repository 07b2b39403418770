"""The sign-off record's integrity on the pages: the signing key from the deployment's secrets,
and the blocking banner every page that uses the policy or wording in force shows when the
record does not verify (what is wrong, and which verified version is served instead)."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from review.policy import chain, signoff


def _secrets_key() -> str | None:
    """``[signing] key`` from .streamlit/secrets.toml (None when there is none)."""
    try:
        section = st.secrets.get("signing")
    except Exception:  # no secrets file at all
        return None
    if section is None or not hasattr(section, "get"):
        return None
    key = section.get("key")
    return str(key) if key else None


def chain_banner(engine: Engine) -> None:
    """Pass the deployment's signing key down, then show the banner when the sign-off record
    does not verify (nothing when it does)."""
    chain.set_signing_key(_secrets_key())
    message = signoff.integrity_banner(engine)
    if message:
        ui.error(message, icon="⛔")
