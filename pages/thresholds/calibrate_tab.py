"""The "Calibrate and propose" tab of the Thresholds page: pick the outcomes (an evaluation
run and the split to tune on, or the audited production traces) and a ranking mode, slide the
proposed refuse threshold, and see what it buys and costs: operating points, risk-coverage,
expected cost, release targets, the decisions that flip, and sweeps per slice. The replay on
production traces and the proposal form are in pages/thresholds/proposal.py; the picks and
sliders are the person's draft in the database (pages/thresholds/proposal_draft.py), so a
reload or another server finds them where they were left."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st
from sqlalchemy import Engine

from pages import ui
from pages.thresholds import cached, headline_view, proposal_draft
from pages.thresholds.downloads import chart_downloads
from pages.thresholds.proposal import propose_form, replay_section
from review.charts import charts
from review.core import readable
from review.core.errors import WorkbenchError
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy
from review.evaluation import blinding, evalruns
from review.labels import blind
from review.policy import inforce, signoff
from review.policy.inforce import PolicyInForce
from review.policy.policy import ModeThresholds, NoAnswerPolicy
from review.thresholds import caveat as caveat_cal
from review.thresholds import display, evidence, headline, thresholds
from review.thresholds.thresholds import Analysis


@dataclass(frozen=True)
class Outcomes:
    """The chosen outcomes in one ranking mode, the split to tune on and the one reported."""

    frame: pd.DataFrame
    mode: str
    tuned_on: str
    report_on: str
    #: the calibration source a proposal records (evidence.run_source / audit_source)
    source: dict[str, Any]
    #: the run's outputs stamp (evalruns.outputs_stamp); None: audited traces
    stamp: tuple[Any, ...] | None = None


def _offered(key: str, options: list[str]) -> None:
    """Forget a pick (restored from a draft, or held from before) that is no option now: the
    picker starts from its first option."""
    if key in st.session_state and st.session_state[key] not in options:
        del st.session_state[key]


def _outcomes(
    engine: Engine, tax: Taxonomy, policy: NoAnswerPolicy, runs: list[evalruns.RunRow]
) -> Outcomes:
    """The pickers of the outcome source, ranking mode and tuning split."""
    by_name = {r.name: r for r in runs}
    _offered("thr_run", [*by_name, display.AUDITED])
    c1, c2, c3 = st.columns([2, 1, 1])
    run_name = c1.selectbox(
        "Outcomes from",
        [*by_name, display.AUDITED],
        key="thr_run",
        help="Evaluation runs on labeled cases, or audited traces joined to their verdicts.",
    )
    if run_name == display.AUDITED:
        modes = display.audit_modes(policy)
        _offered("thr_mode_audit", modes)
        mode = c2.selectbox("Ranking mode", modes, key="thr_mode_audit")
        c3.caption(
            "Audited traces form one sample: tuned and reported on it, so a proposal is "
            "flagged and needs an override note to be approved."
        )
        plan_ids = thresholds.audited_plan_ids(engine)
        return Outcomes(
            thresholds.audited_trace_outcomes(engine, policy, mode, plan_ids),
            mode,
            "audit",
            "audit",
            evidence.audit_source(plan_ids, mode),
        )
    run = by_name[run_name]
    outputs, stamp = cached.outputs(engine, tax, run.id)
    modes = thresholds.modes_in(outputs)
    _offered("thr_mode", modes)
    _offered("thr_split", list(display.SPLITS))
    mode = c2.selectbox("Ranking mode", modes, key="thr_mode")
    tuned_on = c3.selectbox(
        "Tune on split",
        list(display.SPLITS),
        key="thr_split",
        help="Choose thresholds on validation; the sign-off view reports the test split.",
    )
    if tuned_on == "test":
        ui.error(
            "Tuning on the test split: the proposal will be flagged and cannot be "
            "approved without an override note that stays on the record."
        )
    frame = thresholds.outcomes_of(outputs, policy, mode)
    report_on = display.report_split_for(tuned_on)
    return Outcomes(
        frame,
        mode,
        tuned_on,
        report_on,
        evidence.run_source(run, mode, tuned_on, report_on),
        stamp,
    )


def _operating_points(a: Analysis, policy: NoAnswerPolicy) -> None:
    """The current and proposed operating points, risk-coverage and expected cost."""
    cols = list(display.OP_COLUMNS)
    st.subheader("What the change buys and costs")
    st.dataframe(
        a.ops[["policy", "split", "threshold (raw)", *cols, "n"]],
        hide_index=True,
        width="stretch",
        column_config={
            "policy": st.column_config.TextColumn("Policy"),
            "split": st.column_config.TextColumn("Split"),
            "n": st.column_config.NumberColumn("Items", format="localized"),
            **{
                c: st.column_config.NumberColumn(
                    readable.humanize(c), format="%.3f" if c == "expected_cost" else "percent"
                )
                for c in cols
            },
        },
    )
    left, right = st.columns(2)
    with left:
        st.caption(
            f"Risk vs coverage ({ui.plain(a.tuned_on)}); undefined where nothing is answered"
        )
        rc = charts.risk_coverage_chart(a.curve, display.coverage_points(a))
        st.altair_chart(rc, width="stretch")
        chart_downloads(rc, a.curve, "risk_coverage")
    with right:
        st.caption(
            f"Expected cost per item vs threshold ({ui.plain(a.tuned_on)}); false refusal "
            f"{policy.costs.false_refusal:g}, unsupported answer "
            f"{policy.costs.unsupported_answer:g}"
        )
        cc = charts.cost_chart(a.sweep, a.points)
        st.altair_chart(cc, width="stretch")
        chart_downloads(cc, a.sweep, "expected_cost")


def _targets_and_flips(
    a: Analysis,
    policy: NoAnswerPolicy,
    changed: bool,
    flips: pd.DataFrame | None = None,
    basis: str = "",
) -> None:
    """``flips``: the flips as the user may see them (a blind case's gold withheld);
    ``basis``: which decisions the targets are on (display.gate_basis)."""
    st.subheader("What the change does" if changed else "The policy in force")
    if not changed:
        st.info(
            "Nothing is proposed: the sliders are at the thresholds in force. Move a slider "
            "to see what a change does against the targets."
        )
    headline_view.show(headline.headline(a, policy, proposed=changed), key="calibrate", basis=basis)
    if changed and not a.targets.empty:
        st.caption(f"Release targets of the proposed threshold on {ui.plain(a.report_on)}")
        st.dataframe(
            display.figures_table(a.targets),
            hide_index=True,
            width="stretch",
            column_config={"value": st.column_config.NumberColumn(format="%.3f")},
        )
    st.subheader(f"Decisions that flip ({len(a.flips)})")
    if a.flips.empty:
        st.info("No outcome changes between answer and refuse.")
    else:
        st.caption(ui.plain(display.flip_counts(a.flips)))
        st.dataframe(a.flips if flips is None else flips, hide_index=True, width="stretch")


#: The key of the "Sweep and per-slice curves" expander (open or closed).
SWEEPS = "thr_sweeps"


def _sweeps(a: Analysis, src: Outcomes, pif: PolicyInForce, engine: Engine) -> None:
    """The sweep and per-slice curves, drawn only while their expander is open: two charts,
    the sweep table and a sweep per slice that a slider step would otherwise draw unseen."""
    box = st.expander("Sweep and per-slice curves", key=SWEEPS, on_change="rerun")
    if not box.open:
        return
    with box:
        st.caption(
            f"Both failure sides against the threshold ({ui.plain(a.tuned_on)}): coverage, "
            "false-refusal and unsupported-answer rates, abstention recall; current and "
            "proposed marked"
        )
        sc = charts.sweep_chart(a.sweep, a.points)
        st.altair_chart(sc, width="stretch")
        chart_downloads(sc, a.sweep, "sweep")
        sweep = display.figures_table(a.sweep.replace([np.inf], np.nan))
        st.dataframe(sweep, hide_index=True, width="stretch")
        try:
            by_slice = cached.slice_sweeps(
                src.frame, pif.policy, pif.text, engine, src.stamp, src.mode, a.tuned_on
            )
            sm = charts.slice_small_multiples(by_slice, a.points)
            st.altair_chart(sm)
            chart_downloads(sm, by_slice, "slices")
        except WorkbenchError as exc:
            st.info(ui.plain(exc))


def _caveat_slider(
    src: Outcomes, th: ModeThresholds, bounds: display.SliderRange, proposed: float
) -> float:
    """The proposed caveat_below, kept on the better side of the proposed refuse_below."""
    lo, hi, start = display.caveat_range(bounds, th, proposed)
    key = f"thr_caveat_{src.mode}"
    if hi <= lo:
        # the proposed refuse_below sits at the end of the range: no room for a caveat band
        st.session_state.pop(key, None)
        st.caption(ui.plain(display.no_caveat_room(src.mode, proposed)))
        return float(proposed)
    held = st.session_state.get(key)
    st.session_state[key] = start if held is None else float(min(max(held, lo), hi))
    return float(
        st.slider(
            f"Proposed Caveat below for {ui.plain(src.mode)} (current: "
            f"{ui.plain(th.caveat_below)}): answers between"
            " the two thresholds carry the caveat (C1)",
            min_value=lo,
            max_value=hi,
            step=0.005,
            format="%.3f",
            key=key,
        )
    )


def _caveat_band(
    src: Outcomes, policy: NoAnswerPolicy, proposed: float, caveat: float
) -> caveat_cal.CaveatCalibration | None:
    """Where the caveat falls (both thresholds are calibrated together)."""
    st.subheader(f"Where the caveat falls ({ui.plain(src.tuned_on)})")
    try:
        cal = caveat_cal.calibrate_caveat(
            src.frame, policy, src.mode, proposed, caveat, src.tuned_on
        )
    except WorkbenchError as exc:
        st.info(ui.plain(exc))
        return None
    st.caption(ui.plain(caveat_cal.calibration_text(cal)))
    pct = st.column_config.NumberColumn(format="%.3f")
    st.dataframe(
        cal.bands,
        hide_index=True,
        width="stretch",
        column_config={"share": pct, "unacceptable rate": pct},
    )
    with st.expander("Caveat threshold against plain-answer, caveat and refusal rates"):
        st.dataframe(display.figures_table(cal.grid), hide_index=True, width="stretch")
    return cal


#: Where the sliders remember the policy version they were set against.
SLIDERS_OF = "thr_sliders_of"


def _follow_in_force(pif: PolicyInForce) -> None:
    """After a new version is put in force, the sliders start again from its thresholds (a
    slider still at the value just approved would read as a new proposal)."""
    now = pif.version.id if pif.version is not None else None
    if st.session_state.get(SLIDERS_OF, now) != now:
        for key in [
            k for k in st.session_state if str(k).startswith(("thr_proposed_", "thr_caveat_"))
        ]:
            del st.session_state[key]
    st.session_state[SLIDERS_OF] = now


def _moved_on(engine: Engine, pif: PolicyInForce) -> bool:
    """Whether the policy in force is no longer the one this page was drawn with (approved
    meanwhile by someone else): then the whole page is drawn again, not this tab alone."""
    try:
        now = signoff.in_force_version(engine, inforce.KIND)
    except WorkbenchError:  # the page says why the policy cannot be read
        return True
    return (now.id if now else None) != (pif.version.id if pif.version else None)


@st.fragment(key="thr_calibrate")
def calibrate(engine: Engine, actor: Actor, tax: Taxonomy, pif: PolicyInForce) -> None:
    """The tab as a fragment: a slider step or a pick here reruns this tab only (the other
    tabs and the in-force caption do not depend on it)."""
    if _moved_on(engine, pif):
        st.rerun(scope="app")
    policy = pif.policy
    runs = evalruns.list_runs(engine)
    if not runs:
        st.info("Calibration needs outcomes: import or run an evaluation on the Runs page.")
        st.page_link("pages/runs_page.py", label="Open Runs", icon=":material/arrow_forward:")
        return
    proposal_draft.open_draft(engine, actor, pif, [r.name for r in runs])
    src = _outcomes(engine, tax, policy, runs)
    if src.frame.empty:
        st.info("No scored outcomes here in this ranking mode.")
        return
    th = policy.thresholds_for(src.mode)
    current = th.refuse_below
    bounds = display.slider_range(src.frame, current)
    _follow_in_force(pif)
    key = f"thr_proposed_{src.mode}"
    # set here, not as the widget's default: a value the browser still holds from before an
    # approval gives way to the thresholds now in force (_follow_in_force forgets it); a new
    # range (other outcomes) starts again from the threshold in force
    span = (bounds.min_value, bounds.max_value)
    if st.session_state.get(key) is None or st.session_state.get(f"{key}_range") != span:
        st.session_state[key] = bounds.value
    st.session_state[f"{key}_range"] = span
    proposed = st.slider(
        f"Proposed Refuse below for {ui.plain(src.mode)} (current: {ui.plain(current)})",
        min_value=bounds.min_value,
        max_value=bounds.max_value,
        step=0.005,
        format="%.3f",
        key=key,
    )
    caveat = _caveat_slider(src, th, bounds, float(proposed))
    try:
        a = thresholds.analyse(
            src.frame,
            policy,
            src.mode,
            current,
            proposed,
            tuned_on=src.tuned_on,
            report_on=src.report_on,
        )
    except WorkbenchError as exc:
        ui.show_error(exc)
        return
    st.caption(ui.plain(display.analysis_caption(a)))
    _operating_points(a, policy)
    _targets_and_flips(
        a,
        policy,
        display.is_change(th, bounds, float(proposed), caveat),
        blinding.outputs_table(engine, blind.sight(engine, actor), a.flips),
        display.gate_basis(src.source, runs[0].id),
    )
    cal = _caveat_band(src, policy, float(proposed), caveat)
    replay_section(engine, actor, pif, src.mode, proposed, caveat)
    _sweeps(a, src, pif, engine)
    proposal_draft.keep_draft(
        engine, actor, pif, display.is_change(th, bounds, float(proposed), caveat)
    )
    propose_form(engine, actor, src.mode, proposed, caveat, a, cal, src.source)
