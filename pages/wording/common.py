"""What the tabs of the Wording page share: the session-state keys of the draft, the page's
context (built once per run by the page) and the lint findings view."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from review.core import readable
from review.core.identity import Actor
from review.wording import terms as wording_terms
from review.wording.editing import Draft, LiveLint
from review.wording.findings import Finding
from review.wording.versions import WordingInForce

DRAFT = "wd_draft"  # message key -> {"text": ..., "description": ...}
BASE = "wd_base"  # id of the version the draft started from (None: the shipped file)
PROPOSED = "wd_proposed"  # what the last proposal did, said under "Your draft"
SIGNED = "wd_signed"  # what a signature that ended a proposal did, said atop the Sign-off tab
CARET_WIDTH = 72  # characters per line of the caret view
DIFF_LEGEND = "Word diff: [-removed-] {+added+}"


@dataclass(frozen=True)
class WordingContext:
    """What every tab of the page works from."""

    engine: Engine
    actor: Actor
    current: WordingInForce
    terms: wording_terms.CorpusTerms
    live: LiveLint
    draft: Draft  # the session's draft (edited in place)


def clear_draft() -> None:
    """Drop the draft and the editor's widgets of every message."""
    st.session_state[DRAFT] = {}
    for k in list(st.session_state):
        if str(k).startswith(("wd_text_", "wd_desc_")):
            del st.session_state[k]


def findings_view(text: str, findings: Sequence[Finding], *, fit: bool = False) -> None:
    """Findings as a caret view (plain text) and a table; never HTML. ``fit`` sizes the
    table to its rows."""
    st.code(wording_terms.caret_lines(text, findings, width=CARET_WIDTH), language=None)
    frame = wording_terms.findings_frame(text, findings)
    if fit:
        st.dataframe(frame, hide_index=True, width="stretch", height=ui.table_height(len(findings)))
    else:
        st.dataframe(frame, hide_index=True, width="stretch")


def show_findings(text: str, findings: Sequence[Finding], what: str) -> None:
    """The live lint of the ``what`` ("template", "preview"): a verdict, then the findings."""
    if not findings:
        st.success(f"Lint: no findings in the {ui.plain(what)}.")
        return
    st.warning(f"Lint: {readable.count(len(findings), 'finding')} in the {ui.plain(what)}.")
    findings_view(text, findings, fit=True)
