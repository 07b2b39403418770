"""What the tabs of the Wording page share: the session-state keys of the draft, the draft kept
in the database (each edit saved, loaded when the page opens on any server), the page's
context (built once per run by the page) and the lint findings view."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from review.core import readable, userdrafts
from review.core.identity import Actor
from review.wording import terms as wording_terms
from review.wording.editing import Draft, LiveLint
from review.wording.findings import Finding
from review.wording.versions import WordingInForce

DRAFT = "wd_draft"  # message key -> {"text": ..., "description": ...}
BASE = "wd_base"  # id of the version the draft started from (None: the shipped file)
PROPOSED = "wd_proposed"  # what the last proposal did, said under "Your draft"
SAVED = "wd_saved"  # the draft as last saved or loaded ({"base", "messages"}; None: none)
SAVED_VERSION = "wd_saved_version"  # the version of the saved draft this session works on
LOADED = "wd_loaded"  # whose saved draft was read when the page opened in this session
DRAFT_KEY = "wording"  # the draft's key in the database (userdrafts)
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


def _clear_widgets() -> None:
    for k in list(st.session_state):
        if str(k).startswith(("wd_text_", "wd_desc_")):
            del st.session_state[k]


def clear_draft() -> None:
    """Drop the draft (once its saved copy is gone) and the editor's widgets of every
    message."""
    st.session_state[DRAFT] = {}
    st.session_state[SAVED] = None
    st.session_state[SAVED_VERSION] = None
    _clear_widgets()


def _payload() -> dict[str, Any] | None:
    """The session's draft as it is saved (None: no edits)."""
    draft = st.session_state.get(DRAFT) or {}
    if not draft:
        return None
    return {"base": st.session_state.get(BASE), "messages": copy.deepcopy(dict(draft))}


def _messages(payload: dict[str, Any]) -> dict[str, dict[str, str]] | None:
    """The edited messages of a saved draft; None when it is not one the page wrote."""
    messages = payload.get("messages")
    base = payload.get("base")
    if not isinstance(messages, dict) or not (base is None or isinstance(base, int)):
        return None
    out: dict[str, dict[str, str]] = {}
    for key, entry in messages.items():
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("text"), str)
            and isinstance(entry.get("description"), str)
        ):
            return None
        out[str(key)] = {"text": entry["text"], "description": entry["description"]}
    return out


def _adopt(saved: userdrafts.SavedDraft | None, in_force_id: int | None) -> None:
    """Work on ``saved`` (None: no draft): the draft, its base and the editor's widgets."""
    messages = _messages(saved.payload) if saved else {}
    if messages is None:
        ui.error(
            "Your saved wording draft could not be read; your next edit replaces it.",
        )
        messages = {}
    st.session_state[DRAFT] = messages
    st.session_state[BASE] = saved.payload.get("base") if saved and messages else in_force_id
    st.session_state[SAVED] = copy.deepcopy(saved.payload) if saved else None
    st.session_state[SAVED_VERSION] = saved.version if saved else None
    _clear_widgets()


def open_draft(engine: Engine, actor: Actor, in_force_id: int | None) -> None:
    """When the page opens in a session (on any server): the draft saved in the database.
    Later runs keep the session's draft (saved at every edit, :func:`keep_draft`)."""
    if st.session_state.get(LOADED) != actor.id:  # opened, or signed in as someone else
        _adopt(userdrafts.load_draft(engine, actor, DRAFT_KEY), in_force_id)
        st.session_state[LOADED] = actor.id
    if not st.session_state.get(DRAFT):
        st.session_state[BASE] = in_force_id


def keep_draft(engine: Engine, actor: Actor, in_force_id: int | None) -> None:
    """Save the session's draft when it changed (an edit, a new key, a rebase), or drop the
    saved one when every edit was undone. A draft saved meanwhile in another tab or on
    another server is not overwritten: the person loads it or saves this one over it."""
    local = _payload()
    if local == st.session_state.get(SAVED):
        return
    known = st.session_state.get(SAVED_VERSION)
    here = st.container()
    if local is None:
        done: object = ui.transact(
            lambda s: userdrafts.discard_draft(s, actor, DRAFT_KEY, known),
            "Your draft was not dropped. ",
            where=here,
        )
        if done is not None:
            st.session_state[SAVED], st.session_state[SAVED_VERSION] = None, None
            return
    else:
        version = ui.transact(
            lambda s: userdrafts.save_draft(s, actor, DRAFT_KEY, local, known),
            "Your last edit was not saved (it is still here). ",
            where=here,
        )
        if version is not None:
            st.session_state[SAVED], st.session_state[SAVED_VERSION] = local, version
            return
    _conflict(engine, actor, in_force_id, known)


def _conflict(engine: Engine, actor: Actor, in_force_id: int | None, known: int | None) -> None:
    """Another tab saved (or dropped) the draft after this one read it: load that one, or
    save this one over it."""
    saved = userdrafts.load_draft(engine, actor, DRAFT_KEY)
    newer = saved.version if saved else None
    if newer == known:
        return  # refused for another reason (too large): said above
    left, right = st.columns(2)
    if left.button("Load the saved draft (drops this tab's edits)", key="wd_load_saved"):
        _adopt(saved, in_force_id)
        st.rerun()
    if right.button("Save this tab's draft over it", key="wd_overwrite"):
        st.session_state[SAVED_VERSION] = newer
        st.session_state[SAVED] = saved.payload if saved else None
        st.rerun()


def drop_saved_draft(actor: Actor, where: Any = None) -> bool:
    """Drop the saved copy of the session's draft (proposed, or discarded by its owner);
    False, and why shown in ``where``, when a newer one saved in another tab is kept."""
    known = st.session_state.get(SAVED_VERSION)
    done = ui.transact(
        lambda s: userdrafts.discard_draft(s, actor, DRAFT_KEY, known),
        "Your draft was kept. ",
        where,
    )
    return done is not None


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
