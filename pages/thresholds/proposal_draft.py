"""The proposal a person is adjusting on the "Calibrate and propose" tab, kept in the database
as their draft (review.core.userdrafts, key ``thresholds.proposal``): the outcomes picked
(run or audited traces, ranking mode, split) and the proposed Refuse below and Caveat below
of each ranking mode moved, with the policy version they were set against. A reload, or a
next request that lands on another server, finds the sliders where the person left them.

A draft is saved once a slider is away from the thresholds in force, dropped when the
sliders are back there (with the same outcomes picked), when a new version is put in force
(the sliders start again from it) and when the person proposes it. Only its owner reads it;
a session signed in as someone else loads theirs. A draft saved meanwhile in another tab is
not overwritten: the person is told and may save this one over it."""

from __future__ import annotations

import math
from typing import Any

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from review.core import userdrafts
from review.core.identity import Actor
from review.policy.inforce import PolicyInForce

DRAFT_KEY = "thresholds.proposal"
#: the pickers of the outcomes the sliders were set on
PICKS = ("thr_run", "thr_mode", "thr_mode_audit", "thr_split")
#: the sliders' session keys (and where the refuse slider keeps its range)
SLIDERS = ("thr_proposed_", "thr_caveat_")
LOADED = "thr_draft_loaded"  # whose draft this session read (their id)
SAVED = "thr_draft_saved"  # (payload, version) as last saved or read; (None, None): none
PROPOSED = "thr_draft_proposed"  # the picks and sliders last proposed in this session


def _in_force(pif: PolicyInForce) -> int | None:
    return pif.version.id if pif.version is not None else None


def _payload(pif: PolicyInForce) -> dict[str, Any]:
    return _payload_with(_in_force(pif))


def _payload_with(in_force: int | None) -> dict[str, Any]:
    state = st.session_state
    picks = {k: state[k] for k in PICKS if isinstance(state.get(k), str)}
    sliders: dict[str, Any] = {}
    for key in state:
        name = str(key)
        if not name.startswith(SLIDERS):
            continue
        value = state[key]
        if name.endswith("_range") and isinstance(value, tuple | list) and len(value) == 2:
            sliders[name] = [float(value[0]), float(value[1])]
        elif isinstance(value, int | float) and not isinstance(value, bool):
            sliders[name] = float(value)
    return {"in_force": in_force, "picks": picks, "sliders": sliders}


def _usable(payload: dict[str, Any]) -> bool:
    """Whether ``payload`` is a draft this module wrote (else it is replaced)."""
    picks, sliders = payload.get("picks"), payload.get("sliders")
    if not isinstance(picks, dict) or not isinstance(sliders, dict):
        return False
    if not all(k in PICKS and isinstance(v, str) for k, v in picks.items()):
        return False
    for key, value in sliders.items():
        if not str(key).startswith(SLIDERS):
            return False
        if str(key).endswith("_range"):
            if not (
                isinstance(value, list)
                and len(value) == 2
                and all(isinstance(v, float | int) and math.isfinite(v) for v in value)
            ):
                return False
        elif not (isinstance(value, float | int) and math.isfinite(value)):
            return False
    return True


def _forget_sliders() -> None:
    for key in [k for k in st.session_state if str(k).startswith((*SLIDERS, *PICKS))]:
        del st.session_state[key]


def open_draft(engine: Engine, actor: Actor, pif: PolicyInForce, choices: list[str]) -> None:
    """When the tab opens in a session (on any server), or signed in as someone else: the
    person's saved proposal, if it was set against the policy in force (else it is dropped:
    the sliders start from the thresholds in force). ``choices``: the outcomes one may pick
    now (a run deleted since is not picked)."""
    if st.session_state.get(LOADED) == actor.id:
        return
    if st.session_state.get(LOADED) is not None:
        _forget_sliders()  # the last person's sliders are not this one's
    st.session_state[LOADED] = actor.id
    st.session_state[SAVED] = (None, None)
    saved = userdrafts.load_draft(engine, actor, DRAFT_KEY)
    if saved is None:
        return
    st.session_state[SAVED] = (saved.payload, saved.version)
    if not _usable(saved.payload) or saved.payload.get("in_force") != _in_force(pif):
        return  # replaced or dropped by keep_draft at the end of this run
    for key, value in saved.payload["picks"].items():
        if key != "thr_run" or value in choices:
            st.session_state[key] = value
    for key, value in saved.payload["sliders"].items():
        st.session_state[key] = tuple(value) if key.endswith("_range") else float(value)


def keep_draft(engine: Engine, actor: Actor, pif: PolicyInForce, moved: bool) -> None:
    """Save the proposal when the sliders propose a change (``moved``) and it is not the one
    saved; drop the saved one when the sliders are back at the thresholds in force on the
    same outcomes, or it was set against another version than the one in force."""
    payload, version = st.session_state.get(SAVED, (None, None))
    now = _payload(pif)
    if moved:
        if now == payload or _body(now) == st.session_state.get(PROPOSED):
            return  # kept already, or proposed just now (no draft any more)
        here = st.container()
        new = ui.transact(
            lambda s: userdrafts.save_draft(s, actor, DRAFT_KEY, now, version),
            "Your proposal was not kept as a draft (the sliders are still here). ",
            where=here,
        )
        if new is not None:
            st.session_state[SAVED] = (now, new)
            return
        _conflict(engine, actor, version)
        return
    if payload is None:
        return
    stale = not _usable(payload) or payload.get("in_force") != now["in_force"]
    if stale or payload.get("picks") == now["picks"]:
        drop_draft(actor)


def _conflict(engine: Engine, actor: Actor, version: int | None) -> None:
    """Another tab saved (or dropped) the draft after this one read it."""
    newer = userdrafts.load_draft(engine, actor, DRAFT_KEY)
    if (newer.version if newer else None) == version:
        return  # refused for another reason: said above
    if st.button("Keep these sliders as my draft (replaces the other tab's)", key="thr_draft_over"):
        st.session_state[SAVED] = (
            newer.payload if newer else None,
            newer.version if newer else None,
        )
        ui.rerun_here()


def _body(payload: dict[str, Any]) -> dict[str, Any]:
    return {"picks": payload["picks"], "sliders": payload["sliders"]}


def proposed(actor: Actor) -> None:
    """The sliders were proposed for sign-off: they are no draft any more (until moved)."""
    st.session_state[PROPOSED] = _body(_payload_now())
    drop_draft(actor)


def _payload_now() -> dict[str, Any]:
    payload, _ = st.session_state.get(SAVED, (None, None))
    in_force = payload.get("in_force") if isinstance(payload, dict) else None
    return _payload_with(in_force)


def drop_draft(actor: Actor) -> None:
    """Drop the saved proposal (proposed, back at the thresholds in force, or out of date);
    one saved meanwhile in another tab is kept, and said."""
    payload, version = st.session_state.get(SAVED, (None, None))
    if payload is None:
        return
    done = ui.transact(
        lambda s: userdrafts.discard_draft(s, actor, DRAFT_KEY, version),
        "Your draft proposal was kept. ",
    )
    if done is not None:
        st.session_state[SAVED] = (None, None)
