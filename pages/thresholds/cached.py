"""Cached reads of the Thresholds page. A run's outputs joined to their cases and gold labels
(review.evaluation.evalruns.outputs_frame), read once per database and data stamp
(evalruns.outputs_stamp: it moves with every output, case edit, label, adjudication or
document version), so a slider step or a pick on the Calibrate tab does not read them again.
The sweeps per slice of a run's outcomes, which no slider changes, keyed by that stamp, the
ranking mode, the split and the policy text the scores and costs come from. Neither depends
on who reads it (nothing clearance-dependent is filtered in them): one copy serves everyone."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st
from sqlalchemy import Engine

from review.core import clearance
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy
from review.evaluation import evalruns
from review.policy.inforce import PolicyInForce
from review.policy.policy import NoAnswerPolicy, parse_policy, policy_sha256
from review.policy.selective import sweep_by_slice
from review.thresholds import replay as trace_replay
from review.traces import browse


@st.cache_data(ttl=600, show_spinner=False, max_entries=16)
def _outputs(_engine: Engine, _tax: Taxonomy, url: str, stamp: tuple[Any, ...]) -> pd.DataFrame:
    return evalruns.outputs_frame(_engine, int(stamp[0]), _tax)


def outputs(engine: Engine, tax: Taxonomy, run_id: int) -> tuple[pd.DataFrame, tuple[Any, ...]]:
    """The outputs frame of run ``run_id`` (a copy of the cached one: free to change) and the
    stamp it was read at."""
    stamp = evalruns.outputs_stamp(engine, run_id)
    return _outputs(engine, tax, str(engine.url), stamp), stamp


@st.cache_data(ttl=600, show_spinner=False, max_entries=32)
def _slice_sweeps(
    _frame: pd.DataFrame,
    _policy: NoAnswerPolicy,
    url: str,
    stamp: tuple[Any, ...],
    mode: str,
    split: str,
    policy_sha: str,
) -> pd.DataFrame:
    return sweep_by_slice(_frame[_frame["split"] == split], _policy.costs)


def slice_sweeps(
    frame: pd.DataFrame,
    policy: NoAnswerPolicy,
    policy_text: str,
    engine: Engine,
    stamp: tuple[Any, ...] | None,
    mode: str,
    split: str,
) -> pd.DataFrame:
    """The sweep per slice of the outcomes ``frame`` on ``split`` (review.policy.selective.
    sweep_by_slice); cached when the frame is a run's (``stamp``: its outputs stamp), read
    afresh otherwise (audited traces)."""
    if stamp is None:
        return sweep_by_slice(frame[frame["split"] == split], policy.costs)
    return _slice_sweeps(
        frame, policy, str(engine.url), stamp, mode, split, policy_sha256(policy_text)
    )


@st.cache_data(ttl=600, show_spinner=False, max_entries=8)
def _replay(
    _engine: Engine,
    _actor: Actor,
    _current: NoAnswerPolicy,
    url: str,
    stamp: tuple[int, ...],
    cleared: bool,
    current_sha: str,
    proposed_text: str,
) -> trace_replay.Replay:
    return trace_replay.replay_traces(
        _engine, _actor, _current, parse_policy(proposed_text, "proposal")
    )


def replay(
    engine: Engine, actor: Actor, pif: PolicyInForce, proposed_text: str
) -> trace_replay.Replay:
    """The replay of the policy in force ``pif`` and the proposal ``proposed_text`` on every
    trace (review.thresholds.replay.replay_traces), kept per database, replay stamp (the
    traces and audit verdicts, replay.replay_stamp), the two policies' texts (the in-force
    one by its sha256, the proposal's whole) and whether the reader has clearance (the
    examples list restricted traces only for those who have it): replaying the same
    thresholds again, or after moving a slider back, reads nothing. Who may replay is
    checked on every call."""
    browse.require_view(actor)
    return _replay(
        engine,
        actor,
        pif.policy,
        str(engine.url),
        trace_replay.replay_stamp(engine),
        clearance.cleared(actor),
        policy_sha256(pif.text),
        proposed_text,
    )
