"""The end of the "Calibrate and propose" tab: replaying the proposed threshold on the
production traces (which decisions flip, and what the audited ones say about it) and the
form that proposes the change for sign-off (product owners and compliance)."""

from __future__ import annotations

from typing import Any

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from pages.thresholds import cached, proposal_draft
from review.core import readable
from review.core.identity import Actor, Permission
from review.core.terms import VersionStatus
from review.policy import display as policy_display
from review.policy import inforce, signoff
from review.policy.inforce import PolicyInForce
from review.policy.policy import replace_thresholds
from review.thresholds import display, thresholds
from review.thresholds import replay as trace_replay
from review.thresholds.caveat import CaveatCalibration
from review.thresholds.thresholds import Analysis


@st.fragment(key="thr_replay_section")
def replay_section(
    engine: Engine, actor: Actor, pif: PolicyInForce, mode: str, proposed: float, caveat: float
) -> None:
    """A fragment inside the Calibrate tab's: the replay button reruns this section alone,
    with the thresholds the sliders had when the tab was last drawn (a slider step draws the
    tab, and so this section, again), not the charts and tables above it."""
    st.subheader("Replay on production traces")
    st.caption(
        "Both policies applied to the logged signals of every imported trace: which "
        "decisions flip, by customer tier, with the audit verdicts of flipped "
        "traces (what the change fixes and what it breaks)."
    )
    if not st.button("Replay the proposed thresholds on the traces", key="thr_replay"):
        return
    with ui.reported():
        proposed_text = replace_thresholds(
            pif.text, mode, refuse_below=float(proposed), caveat_below=float(caveat)
        )
        replay = cached.replay(engine, actor, pif, proposed_text)
        banner = trace_replay.lacking_banner(replay.missing_signals)
        if banner:
            st.warning(ui.plain(banner))
        st.caption(
            f"{replay.traces - replay.not_replayable:,} of "
            f"{readable.count(replay.traces, 'trace')} "
            "replayed. " + ui.plain(trace_replay.not_replayable_text(replay))
        )
        if replay.flips.empty:
            st.info("No trace changes its decision.")
        else:
            st.dataframe(replay.flips, hide_index=True, width="stretch")
            if replay.audited.empty:
                st.caption("None of the flipped traces has been audited.")
            else:
                st.caption(ui.plain(display.audited_effects(replay.audited)))
                st.dataframe(replay.audited, hide_index=True, width="stretch")
            st.dataframe(replay.examples, hide_index=True, width="stretch")


def propose_form(
    engine: Engine,
    actor: Actor,
    mode: str,
    proposed: float,
    caveat: float,
    a: Analysis,
    cal: CaveatCalibration | None,
    source: dict[str, Any],
) -> None:
    if not actor.can(Permission.propose_policy):
        st.caption("Proposals are made by product owners and compliance.")
        return
    st.subheader("Propose this change")
    everything = signoff.versions(engine, inforce.KIND)
    current = signoff.current_approved(engine, inforce.KIND)
    base = "the shipped file" if current is None else f"version {current.number}"
    waiting = [
        v.number
        for v in everything
        if v.status == VersionStatus.pending and v.parent_id == (current.id if current else None)
    ]
    if waiting:
        st.warning(ui.plain(policy_display.competing_draft(waiting, base)))
    with st.form("thr_propose"):
        st.markdown(
            ui.plain(f"{mode}: Refuse below {proposed:g}, Caveat below {caveat:g}")
            + " (set with the sliders above)"
        )
        rationale = st.text_area("Rationale (goes into the change record)")
        override = (
            st.text_area(
                "Override note (required to approve a proposal tuned on the data it is reported on)"
            )
            if signoff.needs_override(a.tuned_on)
            else ""
        )
        go = st.form_submit_button("Propose for sign-off", type="primary")
    if go:
        with ui.reported():
            # the figures the author saw, on the source every signer will see them on
            snapshot = {**a.snapshot(), "source": source, "fingerprint": a.fingerprint}
            if cal is not None:
                snapshot["caveat"] = cal.snapshot()
            vid = thresholds.propose_thresholds(
                engine,
                actor,
                mode,
                float(proposed),
                float(caveat),
                rationale,
                tuned_on_split=a.tuned_on,
                override_note=override or None,
                snapshot=snapshot,
            )
            # said under this form, with no rerun: nothing drawn on this tab depends on the
            # pending proposals, and the Sign-off and History tabs, which list them, are
            # drawn afresh when opened (lazy tabs); a rerun of the whole page drew the
            # figures above a second time
            v = signoff.get_version(engine, vid)
            st.success(
                f"Proposed as version {v.number:d}."
                " A product owner and compliance, not you, must approve it."
            )
            others = [x.number for x in signoff.competing(signoff.versions(engine, v.kind), v)]
            if others:
                st.warning(ui.plain(policy_display.competing_on_propose(v.number, others, base)))
            proposal_draft.proposed(actor)  # proposed: no draft any more
