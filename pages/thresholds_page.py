"""Thresholds: calibrate on validation, see what a change buys and costs, propose, sign off."""

from __future__ import annotations

import io
import json

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from pages import ui
from review.charts import charts
from review.core.errors import InputError, WorkbenchError
from review.core.identity import Permission, Role
from review.core.terms import VersionStatus
from review.evaluation import evalruns
from review.policy import signoff
from review.policy.policy import replace_thresholds
from review.policy.selective import sweep_by_slice
from review.thresholds import thresholds

engine = ui.engine()
actor = ui.actor()
tax = ui.tax()

st.title("Thresholds")
try:
    pif = thresholds.in_force(engine)
except WorkbenchError as exc:
    st.error("The policy in force cannot be read.")
    st.code(str(exc), language=None)
    st.stop()
policy = pif.policy
if pif.version is None:
    st.warning(
        "No policy has been signed in this workbench yet: the figures use the shipped "
        "file policies/no-answer-policy.yaml."
    )
else:
    v = pif.version
    st.caption(
        f"In force: version {v.number}, approved {v.approved_on:%Y-%m-%d} · sha256 {v.sha256[:12]}…"
    )


def chart_downloads(chart: alt.Chart, data: pd.DataFrame, name: str) -> None:
    """PNG or SVG of a chart when the renderer is installed, and its data as CSV."""
    c1, c2, c3 = st.columns(3)
    c1.download_button(
        "Data (CSV)",
        data.replace([np.inf, -np.inf], np.nan).to_csv(index=False),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=f"thr_csv_{name}",
    )
    for col, fmt, mime in ((c2, "svg", "image/svg+xml"), (c3, "png", "image/png")):

        def render(fmt: str = fmt) -> bytes:
            # made only when someone clicks: rendering every chart on every run is slow
            buf = io.BytesIO()
            chart.save(buf, format=fmt)
            return buf.getvalue()

        col.download_button(
            fmt.upper(),
            render,
            file_name=f"{name}.{fmt}",
            mime=mime,
            key=f"thr_{fmt}_{name}",
        )


tab_cal, tab_sign, tab_hist = st.tabs(["Calibrate and propose", "Sign-off", "History"])


# ---------------------------------------------------------------------------------------
def calibrate() -> None:
    runs = evalruns.list_runs(engine)
    if not runs:
        st.info("Calibration needs outcomes: import or run an evaluation on the Runs page.")
        return
    audited = "Audited production traces"
    by_name = {r.name: r for r in runs}
    c1, c2, c3 = st.columns([2, 1, 1])
    run_name = c1.selectbox(
        "Outcomes from",
        [*by_name, audited],
        key="thr_run",
        help="Evaluation runs on labeled cases, or audited traces joined to their verdicts.",
    )
    if run_name == audited:
        modes = sorted(
            (m for m in policy.ranking_modes if m != "hybrid"), key=lambda m: (m != "vector", m)
        )
        mode = c2.selectbox("Ranking mode", modes, key="thr_mode_audit")
        tuned_on = "audit"
        c3.caption(
            "Audited traces form one sample: tuned and reported on it, so a proposal is "
            "flagged and needs an override note to be approved."
        )
        frame = thresholds.audited_trace_outcomes(engine, policy, mode)
        report_split = "audit"
    else:
        run = by_name[run_name]
        modes = thresholds.modes_of_run(engine, run.id, tax)
        mode = c2.selectbox("Ranking mode", modes, key="thr_mode")
        splits = ["validation", "train", "test"]
        tuned_on = c3.selectbox(
            "Tune on split",
            splits,
            key="thr_split",
            help="Choose thresholds on validation; the sign-off view reports the test split.",
        )
        if tuned_on == "test":
            st.error(
                "Tuning on the test split: the proposal will be flagged and cannot be "
                "approved without an override note that stays on the record."
            )
        frame = thresholds.outcomes(engine, run.id, tax, policy, mode)
        report_split = "test" if tuned_on != "test" else "validation"
    if frame.empty:
        st.info("No scored outcomes here in this ranking mode.")
        return
    th = policy.thresholds_for(mode)
    lo, hi = float(frame["raw_score"].min()), float(frame["raw_score"].max())
    current = th.refuse_below
    default = float(current) if current is not None else lo
    proposed = st.slider(
        f"Proposed refuse_below for {mode} (current: {current})",
        min_value=round(min(lo, default) - 0.01, 3),
        max_value=round(max(hi, default) + 0.01, 3),
        value=round(default, 3),
        step=0.005,
        key=f"thr_proposed_{mode}",
    )
    try:
        a = thresholds.analyse(
            frame,
            policy,
            mode,
            current,
            proposed,
            tuned_on=tuned_on,
            report_on=report_split,
        )
    except WorkbenchError as exc:
        st.error(ui.plain(exc))
        return
    st.caption(
        f"{a.n_tuning} outcome(s) on {a.tuned_on}, {a.n_report} on {a.report_on} · "
        f"AURC on {a.tuned_on}: {a.aurc:.3f} · an outcome is acceptable to answer "
        "when its gold decision answers"
    )
    ops = a.ops.set_index(["policy", "split"])
    cols = [
        "coverage",
        "selective_risk",
        "false_refusal_rate",
        "unsupported_answer_rate",
        "abstention_recall",
        "expected_cost",
    ]
    st.subheader("What the change buys and costs")
    st.dataframe(
        a.ops[["policy", "split", "threshold (raw)", *cols, "n"]],
        hide_index=True,
        width="stretch",
        column_config={c: st.column_config.NumberColumn(c, format="%.3f") for c in cols},
    )
    points_cov = {
        name: (
            float(ops.loc[(name, a.tuned_on), "coverage"]),
            float(ops.loc[(name, a.tuned_on), "selective_risk"]),
        )
        for name in ("current", "proposed")
    }
    left, right = st.columns(2)
    with left:
        st.caption(f"Risk vs coverage ({a.tuned_on}); undefined where nothing is answered")
        rc = charts.risk_coverage_chart(a.curve, points_cov)
        st.altair_chart(rc, width="stretch")
        chart_downloads(rc, a.curve, "risk_coverage")
    with right:
        st.caption(
            f"Expected cost per item vs threshold ({a.tuned_on}); false refusal "
            f"{policy.costs.false_refusal:g}, unsupported answer "
            f"{policy.costs.unsupported_answer:g}"
        )
        cc = charts.cost_chart(a.sweep, a.points)
        st.altair_chart(cc, width="stretch")
        chart_downloads(cc, a.sweep, "expected_cost")
    st.subheader(f"Release targets of the proposed threshold on {a.report_on}")
    if a.targets.empty:
        st.info(f"No outcomes on the {a.report_on} split.")
    else:
        failed = int((~a.targets["passed"]).sum())
        (st.warning if failed else st.success)(
            f"{failed} of {len(a.targets)} target(s) fail." if failed else "Every target passes."
        )
        st.dataframe(
            a.targets,
            hide_index=True,
            width="stretch",
            column_config={"value": st.column_config.NumberColumn(format="%.3f")},
        )
    st.subheader(f"Decisions that flip ({len(a.flips)})")
    if a.flips.empty:
        st.info("No outcome changes between answer and refuse.")
    else:
        st.caption(", ".join(f"{k}: {v}" for k, v in a.flips["effect"].value_counts().items()))
        st.dataframe(a.flips, hide_index=True, width="stretch")
    st.subheader("Replay on production traces")
    st.caption(
        "Both policies applied to the logged signals of every imported trace: which "
        "decisions flip, by customer tier, with the audit verdicts of flipped "
        "traces (what the change fixes and what it breaks)."
    )
    if st.button("Replay the proposed threshold on the traces", key="thr_replay"):
        with ui.reported():
            proposed_text = replace_thresholds(pif.text, mode, refuse_below=float(proposed))
            replay = thresholds.replay_traces(
                engine, actor, policy, thresholds.parse_policy(proposed_text, "proposal")
            )
            st.caption(
                f"{replay.traces} trace(s) replayed, {replay.skipped} without the "
                "signals the gate needs."
            )
            if replay.flips.empty:
                st.info("No trace changes its decision.")
            else:
                st.dataframe(replay.flips, hide_index=True, width="stretch")
                if replay.audited.empty:
                    st.caption("None of the flipped traces has been audited.")
                else:
                    effect = replay.audited.groupby("effect")["traces"].sum()
                    st.caption(
                        "Audited traces among the flips, by their verdict: "
                        f"{int(effect.get('fixes', 0))} fixed, "
                        f"{int(effect.get('breaks', 0))} broken, "
                        f"{int(effect.get('neutral', 0))} neutral"
                    )
                    st.dataframe(replay.audited, hide_index=True, width="stretch")
                st.dataframe(replay.examples, hide_index=True, width="stretch")
    with st.expander("Sweep and per-slice curves"):
        st.caption(
            f"Both failure sides against the threshold ({a.tuned_on}): coverage, false-refusal "
            "and unsupported-answer rates, abstention recall; current and proposed marked"
        )
        sc = charts.sweep_chart(a.sweep, a.points)
        st.altair_chart(sc, width="stretch")
        chart_downloads(sc, a.sweep, "sweep")
        st.dataframe(a.sweep.replace([np.inf], np.nan), hide_index=True, width="stretch")
        try:
            by_slice = sweep_by_slice(frame[frame["split"] == a.tuned_on], policy.costs)
            sm = charts.slice_small_multiples(by_slice, a.points)
            st.altair_chart(sm)
            chart_downloads(sm, by_slice, "slices")
        except WorkbenchError as exc:
            st.info(ui.plain(exc))
    if actor.can(Permission.propose_policy):
        st.subheader("Propose this change")
        with st.form("thr_propose"):
            caveat_default = th.caveat_below if th.caveat_below is not None else proposed
            caveat = st.number_input(
                "caveat_below",
                value=float(max(caveat_default, proposed)),
                step=0.005,
                format="%.3f",
            )
            rationale = st.text_area("Rationale (goes into the change record)")
            override = (
                st.text_area(
                    "Override note (required to approve a proposal tuned on the data it is "
                    "reported on)"
                )
                if signoff.needs_override(tuned_on)
                else ""
            )
            go = st.form_submit_button("Propose for sign-off", type="primary")
        if go:
            with ui.reported():
                vid = thresholds.propose_thresholds(
                    engine,
                    actor,
                    mode,
                    float(proposed),
                    float(caveat),
                    rationale,
                    tuned_on_split=tuned_on,
                    override_note=override or None,
                    snapshot=a.snapshot(),
                )
                st.success(
                    f"Proposed as version {signoff.get_version(engine, vid).number}."
                    " A product owner and compliance, not you, must approve it."
                )
    else:
        st.caption("Proposals are made by product owners and compliance.")


with tab_cal:
    calibrate()


# ---------------------------------------------------------------------------------------
with tab_sign:
    pending = [
        v for v in signoff.versions(engine, thresholds.KIND) if v.status == VersionStatus.pending
    ]
    if not pending:
        st.info("No proposal is waiting for sign-off.")
    for v in pending:
        with st.container(border=True):
            st.subheader(f"Version {v.number} · proposed by {v.author}")
            ui.text(v.rationale, label="Rationale")
            if signoff.needs_override(v.tuned_on_split):
                st.error(
                    f"Tuned on the {v.tuned_on_split} data it is reported on."
                    + (
                        " Override note on the record:"
                        if v.override_note
                        else " No override note: it cannot be approved."
                    )
                )
                if v.override_note:
                    st.text(v.override_note)
            st.caption(
                f"Needs: {', '.join(v.missing_roles) or 'nothing'} · signatures so far: "
                + (", ".join(f"{s.role} {s.meaning} ({s.signer})" for s in v.signatures) or "none")
            )
            st.code(thresholds.diff(pif.text, v.yaml_text), language="diff")
            proposed_policy = thresholds.parse_policy(v.yaml_text, f"version {v.number}")
            runs = evalruns.list_runs(engine)
            if runs:
                run = next((r for r in runs if r.name.startswith("reference")), runs[0])
                changed = [
                    m
                    for m in ("vector", "bm25", "semantic_reranker")
                    if proposed_policy.thresholds_for(m).refuse_below
                    != policy.thresholds_for(m).refuse_below
                ]
                mode = changed[0] if changed else "vector"
                frame = thresholds.outcomes(engine, run.id, tax, policy, mode)
                if not frame.empty:
                    a = thresholds.analyse(
                        frame,
                        proposed_policy,
                        mode,
                        policy.thresholds_for(mode).refuse_below,
                        proposed_policy.thresholds_for(mode).refuse_below,
                    )
                    st.caption(
                        f"Reported on the test split of run {ui.plain(repr(run.name))} "
                        f"({a.n_report} outcomes) · mode {mode}"
                    )
                    test_ops = a.ops[a.ops["split"] == "test"]
                    st.dataframe(test_ops, hide_index=True, width="stretch")
                    if not a.targets.empty:
                        st.dataframe(a.targets, hide_index=True, width="stretch")
                    snap, fp, ids = a.snapshot(), a.fingerprint, a.case_ids
                else:
                    snap, fp, ids = {}, "", []
            else:
                snap, fp, ids = {}, "", []
            roles = [
                r
                for r in (Role.product_owner, Role.compliance)
                if r in actor.roles and r.value in v.missing_roles
            ]
            if actor.email == v.author:
                st.info("You proposed this change: someone else must sign it.")
            elif roles and actor.can(Permission.approve_policy):
                with st.form(f"thr_sign_{v.id}"):
                    role = st.selectbox("Sign as", [r.value for r in roles])
                    note = st.text_area("Note (required to reject)")
                    c1, c2 = st.columns(2)
                    approve = c1.form_submit_button("Approve", type="primary")
                    reject = c2.form_submit_button("Reject")
                if approve or reject:
                    with ui.reported():
                        signoff.sign(
                            engine,
                            actor,
                            v.id,
                            "approve" if approve else "reject",
                            role=Role(role),
                            note=note,
                            data_fingerprint=fp,
                            metrics_snapshot=snap,
                            lock_case_ids=ids,
                        )
                        st.session_state["thr_flash"] = (
                            f"Version {v.number} {'approved' if approve else 'rejected'} as {role}."
                        )
                        st.rerun()
            else:
                st.caption("Signatures come from a product owner and compliance.")
    flash = st.session_state.pop("thr_flash", None)
    if flash:
        st.success(flash)

# ---------------------------------------------------------------------------------------
with tab_hist:
    allv = signoff.versions(engine, thresholds.KIND)
    if not allv:
        st.info("No versions yet.")
    else:
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "version": v.number,
                        "status": v.status,
                        "author": v.author,
                        "created": v.created_at,
                        "approved": v.approved_on,
                        "tuned on": v.tuned_on_split or "",
                        "sha256": v.sha256[:16],
                        "signatures": "; ".join(
                            f"{s.role}: {s.meaning} by {s.signer} at {s.at:%Y-%m-%d %H:%M}"
                            for s in v.signatures
                        ),
                    }
                    for v in allv
                ]
            ),
            hide_index=True,
            width="stretch",
        )
        nums = {v.number: v for v in allv}
        c1, c2 = st.columns(2)
        a_num = c1.selectbox(
            "Compare version", list(nums), index=min(1, len(nums) - 1), key="thr_hist_a"
        )
        b_num = c2.selectbox("with version", list(nums), index=0, key="thr_hist_b")
        st.code(
            thresholds.diff(
                nums[a_num].yaml_text, nums[b_num].yaml_text, f"version {a_num}", f"version {b_num}"
            )
            or "(identical)",
            language="diff",
        )
        in_force_number = pif.version.number if pif.version is not None else None
        earlier = [
            v.number for v in allv if v.approved_on is not None and v.number != in_force_number
        ]
        if actor.can(Permission.propose_policy) and earlier:
            with st.form("thr_rollback"):
                st.markdown("**Roll back** to an earlier approved version (signed again)")
                back = st.selectbox("Version to go back to", earlier, key="thr_rollback_to")
                why = st.text_area("Why (goes into the change record)", key="thr_rollback_why")
                if st.form_submit_button("Propose the rollback"):
                    with ui.reported():
                        rid = thresholds.propose_rollback(engine, actor, int(back), why)
                        n = signoff.get_version(engine, rid).number
                        st.success(f"Proposed as version {n}: it waits for sign-off.")
        problems = signoff.verify_chain(engine)
        (st.error if problems else st.success)(
            "Sign-off chain: "
            + ("; ".join(problems) if problems else "intact (every signature hash verifies)")
        )
        try:
            approved_yaml = thresholds.export_approved(engine)
        except InputError:
            approved_yaml = None
        if approved_yaml:
            st.download_button(
                "Export the approved policy (YAML)",
                approved_yaml,
                file_name="no-answer-policy.yaml",
                mime="application/yaml",
            )
        with st.expander("Metrics snapshot stored with each signature"):
            for v in allv:
                for s in v.signatures:
                    st.caption(
                        f"Version {v.number}, {s.role} {s.meaning} by {s.signer}: "
                        f"data fingerprint {s.data_fingerprint[:16] or '—'}"
                    )
                    st.code(
                        json.dumps(
                            {
                                k: s.metrics_snapshot.get(k)
                                for k in (
                                    "mode",
                                    "tuned_on",
                                    "report_on",
                                    "aurc",
                                    "points",
                                    "operating_points",
                                    "targets",
                                )
                            },
                            default=str,
                            indent=1,
                        )[:3000],
                        language="json",
                    )
