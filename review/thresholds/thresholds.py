"""Thresholds: calibrate the no-answer policy on outcomes, propose a change, sign it off.

Outcomes come from evaluation runs on labeled cases (gold = adjudication, else the case's
expected decision). Thresholds are chosen on the validation split and reported on the test
split; a proposal tuned on the test split carries a flag that blocks approval without an
override note.
"""

from __future__ import annotations

import datetime as dt
import difflib
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import yaml
from sqlalchemy import Engine

from review.charts.charts import downsample
from review.core.errors import InputError
from review.core.identity import Actor, Permission, require
from review.core.taxonomy import Taxonomy
from review.evaluation import evalruns
from review.policy import signoff
from review.policy.gate import confidence
from review.policy.inforce import KIND, in_force
from review.policy.policy import (
    NoAnswerPolicy,
    default_policy_path,
    policy_sha256,
    record_change,
    replace_thresholds,
)
from review.policy.selective import (
    aurc,
    evaluate_targets,
    metrics_by_slice,
    operating_point,
    risk_coverage,
    sweep,
)


def configured_pipeline(engine: Engine, pipeline: Any) -> tuple[Any, dict[str, str]]:
    """A bundled pipeline set up to decide with the policy in force and word its non-answers
    with the wording in force (thresholds come from configuration, not code), and
    what it was set up with, for the run's configuration. An outside pipeline (no
    ``configure`` method) is returned as it is, with nothing recorded."""
    from review.evaluation.refpipeline import configure_pipeline
    from review.wording import versions as wording_versions
    from review.wording.messages import render

    if not callable(getattr(pipeline, "configure", None)):
        return pipeline, {}
    pif = in_force(engine)
    wif = wording_versions.in_force(engine)
    words = wif.wording

    def wording(key: str, values: Mapping[str, str]) -> str:
        return render(words.message(key), values)

    used = {
        "policy": f"version {pif.version.number}" if pif.version else "shipped file",
        "policy_sha256": policy_sha256(pif.text),
        "wording": wif.label,
    }
    return configure_pipeline(pipeline, pif.policy, wording, words.company_names), used


def outcomes(
    engine: Engine, run_id: int, tax: Taxonomy, policy: NoAnswerPolicy, mode: str | None = None
) -> pd.DataFrame:
    """Scored outputs of a run as calibration outcomes: one row per case and repeat with
    ``score`` (a confidence: higher answers), ``answerable``, ``acceptable``,
    ``expects_abstain``, ``split``, ``slice`` (list) and the observed decision.
    Infrastructure failures and outputs without a score (escalations decided before scoring)
    are left out."""
    return outcomes_of(evalruns.outputs_frame(engine, run_id, tax), policy, mode)


def outcomes_of(
    outputs: pd.DataFrame, policy: NoAnswerPolicy, mode: str | None = None
) -> pd.DataFrame:
    """:func:`outcomes` of a run's :func:`review.evaluation.evalruns.outputs_frame` already
    read (a cached one, say): the frame given is left as it is."""
    df = outputs
    if df.empty:
        return df
    df = df[~df["infra"] & df["score"].notna()].copy()
    if mode is not None:
        df = df[df["ranking_mode"].fillna(mode) == mode]
    if df.empty:
        return df
    known = df["ranking_mode"].dropna()
    used_mode = mode or (str(known.iloc[0]) if not known.empty else "vector")
    df["raw_score"] = df["score"].astype(float)
    df["score"] = confidence(policy, used_mode, df["raw_score"].to_numpy())
    df["slice"] = [list(s) for s in df["slices"]]
    df["mode"] = used_mode
    # abstention recall is over the cases expecting abstain (a threshold refusal is
    # an abstention; cases expecting clarify or escalate are in neither count)
    df["expects_abstain"] = df["gold"] == "abstain"
    return df.reset_index(drop=True)


def modes_in(outputs: pd.DataFrame) -> list[str]:
    """The ranking modes of a run's outputs frame (``vector`` when none is recorded)."""
    if outputs.empty:
        return ["vector"]
    return sorted({str(m) for m in outputs["ranking_mode"].dropna()}) or ["vector"]


def data_fingerprint(frame: pd.DataFrame) -> str:
    """sha256 over the labeled data a figure was computed on (case, repeat, split, gold,
    score), so a signature records exactly which outcomes it saw."""
    if frame.empty:
        return hashlib.sha256(b"").hexdigest()
    cols = frame[["key", "repeat", "split", "gold", "raw_score"]].sort_values(["key", "repeat"])
    payload = cols.to_csv(index=False, float_format="%.6g")
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def confidence_of(policy: NoAnswerPolicy, mode: str, raw: float | None) -> float:
    """A raw threshold as the 'answer when confidence >= t' threshold of the sweep."""
    if raw is None:
        return float("-inf")
    th = policy.thresholds_for(mode)
    t = raw if th.higher_is_better else -raw
    if th.inclusive:
        # equal scores are refused: the smallest confidence strictly above t answers
        return float(np.nextafter(t, np.inf))
    return float(t)


@dataclass(frozen=True)
class Analysis:
    mode: str
    tuned_on: str
    report_on: str
    curve: pd.DataFrame
    sweep: pd.DataFrame
    aurc: float
    points: dict[str, float]  # name -> confidence threshold
    ops: pd.DataFrame  # operating points (current, proposed) x (tuning split, report split)
    targets: pd.DataFrame  # proposed policy targets on the report split
    flips: pd.DataFrame
    n_tuning: int
    n_report: int
    fingerprint: str
    case_ids: list[int]

    def snapshot(self) -> dict[str, Any]:
        """What a signer saw: operating points, targets, the sweep and the chart data."""
        keep = [v for v in self.points.values() if np.isfinite(v)]
        small = downsample(self.sweep, "threshold", max_points=120, keep=keep)
        return {
            "mode": self.mode,
            "tuned_on": self.tuned_on,
            "report_on": self.report_on,
            "aurc": self.aurc,
            "points": self.points,
            "n_tuning": self.n_tuning,
            "n_report": self.n_report,
            "operating_points": self.ops.to_dict(orient="records"),
            "targets": self.targets.to_dict(orient="records"),
            "sweep": small.replace([np.inf, -np.inf], None).to_dict(orient="records"),
            "flips": len(self.flips),
        }


def analyse(
    frame: pd.DataFrame,
    policy: NoAnswerPolicy,
    mode: str,
    current_raw: float | None,
    proposed_raw: float | None,
    tuned_on: str = "validation",
    report_on: str = "test",
) -> Analysis:
    """Risk-coverage on the tuning split; current and proposed operating points on both
    splits; the proposed policy's targets on the report split; decisions that flip."""
    if frame.empty:
        raise InputError("no scored outcomes in this run")
    tune = frame[frame["split"] == tuned_on] if tuned_on != "all" else frame
    report = frame[frame["split"] == report_on] if report_on != "all" else frame
    if tune.empty:
        raise InputError(f"the run has no scored outcomes on the {tuned_on} split")
    costs = policy.costs
    cur_t = confidence_of(policy, mode, current_raw)
    new_t = confidence_of(policy, mode, proposed_raw)
    curve = risk_coverage(tune["score"], tune["acceptable"])
    rows = []
    for name, t in (("current", cur_t), ("proposed", new_t)):
        parts = (
            ((tuned_on, tune), (report_on, report))
            if report_on != tuned_on
            else ((tuned_on, tune),)
        )
        for split_name, part in parts:
            if part.empty:
                continue
            op = operating_point(part, t, costs)
            rows.append(
                {
                    "policy": name,
                    "split": split_name,
                    "threshold (raw)": current_raw if name == "current" else proposed_raw,
                    **op,
                }
            )
    ops = pd.DataFrame(rows)
    target_rows: list[dict[str, Any]] = []
    if not report.empty:
        overall = operating_point(report, new_t, costs)
        by_slice = metrics_by_slice(report, new_t, costs)
        for r in evaluate_targets(policy, overall, by_slice):
            target_rows.append(
                {
                    "target": r.name,
                    "scope": r.scope,
                    "metric": r.metric,
                    "rule": f"{r.comparison} {r.bound:g}",
                    "value": r.value,
                    "passed": r.passed,
                }
            )
    answered_before = frame["score"].to_numpy() >= cur_t
    answered_after = frame["score"].to_numpy() >= new_t
    flipped = answered_before != answered_after
    flips = frame.loc[flipped, ["key", "repeat", "split", "gold", "raw_score"]].copy()
    flips["before"] = np.where(answered_before[flipped], "answer", "refuse")
    flips["after"] = np.where(answered_after[flipped], "answer", "refuse")
    acceptable = frame["acceptable"].to_numpy()[flipped]
    flips["effect"] = np.where(
        flips["after"] == "answer",
        np.where(acceptable, "fixes a false refusal", "breaks: unsupported answer"),
        np.where(acceptable, "breaks: false refusal", "fixes an unsupported answer"),
    )
    used = (
        frame[frame["split"].isin({tuned_on, report_on})]
        if "all" not in (tuned_on, report_on)
        else frame
    )
    return Analysis(
        mode,
        tuned_on,
        report_on,
        curve,
        sweep(tune, costs),
        aurc(curve),
        {"current": cur_t, "proposed": new_t},
        ops,
        pd.DataFrame(target_rows),
        flips,
        len(tune),
        len(report),
        data_fingerprint(used),
        sorted({int(c) for c in used["case_id"]}),
    )


def propose_thresholds(
    engine: Engine,
    actor: Actor,
    mode: str,
    refuse_below: float | None,
    caveat_below: float | None,
    rationale: str,
    *,
    tuned_on_split: str,
    override_note: str | None = None,
    snapshot: dict[str, Any] | None = None,
) -> int:
    """Write the proposal as the next policy version (YAML diffable against the one in
    force) and store it for sign-off."""
    require(actor, Permission.propose_policy)
    base = in_force(engine)
    text = replace_thresholds(base.text, mode, refuse_below=refuse_below, caveat_below=caveat_below)
    summary = re.sub(r"\s+", " ", rationale.strip())[:200]
    if not summary:
        raise InputError("say why: a rationale is required for every change")
    text = record_change(text, author=actor.email, summary=summary, on=dt.date.today())
    return signoff.propose(
        engine,
        actor,
        KIND,
        text,
        rationale,
        tuned_on_split=tuned_on_split,
        override_note=override_note,
        snapshot=snapshot,
    )


def propose_rollback(engine: Engine, actor: Actor, number: int, rationale: str) -> int:
    """Propose going back to an earlier approved version: a new version whose policy (every
    threshold, target, topic and cost) equals version ``number``'s, numbered after the one in
    force with a change-record entry saying so, signed again like any change."""
    require(actor, Permission.propose_policy)
    summary = re.sub(r"\s+", " ", rationale.strip())[:160]
    if not summary:
        raise InputError("say why: a rationale is required for every change")
    old = next((v for v in signoff.versions(engine, KIND) if v.number == number), None)
    if old is None or old.approved_on is None:
        raise InputError(f"version {number} is not an approved version of the policy")
    base = in_force(engine)
    if base.version is not None and base.version.number == number:
        raise InputError(f"version {number} is the policy in force: nothing to roll back")
    data = yaml.safe_load(old.yaml_text)
    current = yaml.safe_load(base.text)
    if not isinstance(data, dict) or not isinstance(current, dict):
        raise InputError("a stored policy version is not a YAML mapping")
    data["version"] = current.get("version", data.get("version"))
    data["change_record"] = list(current.get("change_record") or [])
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False)
    text = record_change(
        text,
        author=actor.email,
        summary=f"rollback to version {number}: {summary}",
        on=dt.date.today(),
    )
    return signoff.propose(engine, actor, KIND, text, f"Rollback to version {number}: {rationale}")


def shipped_text() -> str:
    """The shipped policy file's text (what is in force before anything is approved)."""
    return default_policy_path().read_text(encoding="utf-8")


def diff(old: str, new: str, old_name: str = "in force", new_name: str = "proposed") -> str:
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), old_name, new_name
        )
    )


def export_approved(engine: Engine) -> str:
    """The approved policy as YAML with approved_on filled in from its signatures, and the
    sign-off chain head in a leading comment (to record elsewhere and compare later with
    ``workbench verify-signoffs --head``). Refused (TamperedPolicyError) while the sign-off
    record does not verify: an export is what people record as the truth."""
    problems = signoff.verify_chain(engine)
    if problems:
        raise signoff.TamperedPolicyError(
            f"the sign-off record does not verify, so nothing is exported: {'; '.join(problems)}"
        )
    v = signoff.in_force_version(engine, KIND)
    if v is None or v.approved_on is None:
        raise InputError("no approved policy version in this workbench yet")
    day = v.approved_on.date().isoformat()
    text = v.yaml_text
    if re.search(r"(?m)^approved_on:.*$", text):
        text = re.sub(r"(?m)^approved_on:.*$", f"approved_on: {day}", text, count=1)
    else:
        text = text.rstrip("\n") + f"\napproved_on: {day}\n"
    return signoff.with_chain_head(engine, text)


# Verdicts that say an answer was the right outcome (a gold answer exists), and those where
# answering was acceptable.
_ANSWER_EXPECTED = {
    "false_refusal",
    "supported_answer",
    "unsupported_answer",
    "partially_supported",
}
_ANSWER_ACCEPTABLE = {"false_refusal", "supported_answer"}


def audited_plan_ids(engine: Engine) -> list[int]:
    """The audit batches whose verdicts calibration on audited traces reads (all of them)."""
    from review.audits import plans as audit_plans

    return sorted(p.id for p in audit_plans.list_plans(engine))


def audited_trace_outcomes(
    engine: Engine, policy: NoAnswerPolicy, mode: str, plan_ids: list[int] | None = None
) -> pd.DataFrame:
    """Outcomes from audited production traces: the trace's top score (as a confidence) joined
    to its audit verdict (the majority of its reviewers). ``answerable``: the verdict says an
    answer was called for; ``acceptable``: answering it was (or would have been) acceptable.
    Split is "audit"; the slice is the customer tier."""
    from review.audits import estimates
    from review.audits import plans as audit_plans

    plans = plan_ids if plan_ids is not None else [p.id for p in audit_plans.list_plans(engine)]
    frames = []
    for pid in plans:
        items = estimates.item_outcomes(engine, pid)
        if not items.empty:
            frames.append(items[items["outcome"].notna()])
    if not frames:
        return pd.DataFrame()
    items = pd.concat(frames, ignore_index=True).drop_duplicates("trace_id")
    from sqlalchemy import select

    from storage.db import one_of, read_session
    from storage.models import Trace

    with read_session(engine) as s:
        rows = dict(
            (r.trace_id, r)
            for r in s.execute(
                select(
                    Trace.id,
                    Trace.trace_id,
                    Trace.top_score,
                    Trace.ranking_mode,
                    Trace.customer_tier,
                    Trace.decision,
                ).where(one_of(s, Trace.trace_id, [str(t) for t in items["trace_id"]]))
            )
        )
    out = []
    for t_id, verdict in zip(items["trace_id"], items["outcome"], strict=True):
        r = rows.get(t_id)
        if r is None or r.top_score is None or (r.ranking_mode or mode) != mode:
            continue
        out.append(
            {
                "key": t_id,
                "case_id": -int(r.id),
                "repeat": 0,
                "split": "audit",
                "gold": verdict,
                "raw_score": float(r.top_score),
                "answerable": verdict in _ANSWER_EXPECTED,
                "acceptable": verdict in _ANSWER_ACCEPTABLE,
                "slice": [r.customer_tier] if r.customer_tier else [],
                "mode": mode,
                "decision": r.decision,
            }
        )
    df = pd.DataFrame(out)
    if df.empty:
        return df
    df["score"] = confidence(policy, mode, df["raw_score"].to_numpy())
    return df
