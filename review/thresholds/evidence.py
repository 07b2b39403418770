"""What a signer of a threshold proposal sees and signs with: the proposal analysed on its own
calibration source, the one its author calibrated on and the proposal records (a run with the
split tuned on and the split reported, or the audited traces of named batches), in the
ranking mode it changes. When the data of that source changed after the proposal, the figures
the author saw (stored with the proposal) are shown beside the current ones, and both go into
the signature. A proposal that records no source (made before sources were recorded) is
reported on the test split of the reference run (else the newest run), and says so. The
analysis's snapshot, data fingerprint and case ids are stored with the signature; without a
source or outcomes they are empty."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import pandas as pd
from sqlalchemy import Engine

from review.core.taxonomy import Taxonomy
from review.evaluation import evalruns
from review.policy.policy import NoAnswerPolicy
from review.thresholds import thresholds
from review.thresholds.thresholds import Analysis

__all__ = [
    "THRESHOLD_MODES",
    "SignoffEvidence",
    "audit_source",
    "changed_mode",
    "run_source",
    "signoff_evidence",
    "source_label",
]

#: The ranking modes whose refuse threshold a proposal may change, in the order looked at.
THRESHOLD_MODES: Final = ("vector", "bm25", "semantic_reranker")


@dataclass(frozen=True)
class SignoffEvidence:
    """The source and mode a proposal is reported on, and its analysis (None: no source, or
    no scored outcome in that mode)."""

    run_name: str | None = None
    mode: str = "vector"
    analysis: Analysis | None = None
    snapshot: dict[str, Any] = field(default_factory=dict)
    fingerprint: str = ""
    case_ids: list[int] = field(default_factory=list)
    #: where the figures come from, in words
    source: str = ""
    #: a problem with the source (it was deleted, the proposal records none)
    note: str = ""
    #: the figures the author saw when proposing (from the proposal), when they differ
    proposed_ops: pd.DataFrame | None = None
    data_changed: bool = False


def run_source(run: evalruns.RunRow, mode: str, tuned_on: str, report_on: str) -> dict[str, Any]:
    """A proposal's calibration source: a run, the split tuned on and the split reported."""
    return {
        "kind": "run",
        "run_id": run.id,
        "run_name": run.name,
        "mode": mode,
        "tuned_on": tuned_on,
        "report_on": report_on,
    }


def audit_source(plan_ids: list[int], mode: str) -> dict[str, Any]:
    """A proposal's calibration source: the audited traces of these audit batches."""
    return {"kind": "audit", "plan_ids": sorted(plan_ids), "mode": mode}


def source_label(source: dict[str, Any]) -> str:
    if source.get("kind") == "audit":
        ids = ", ".join(str(i) for i in source.get("plan_ids", []))
        return f"audited traces of batch(es) {ids} · mode {source.get('mode')}"
    return (
        f"run {source.get('run_name')!r}, tuned on {source.get('tuned_on')}, reported on "
        f"{source.get('report_on')} · mode {source.get('mode')}"
    )


def changed_mode(policy: NoAnswerPolicy, proposed: NoAnswerPolicy) -> str:
    """The first mode whose refuse threshold ``proposed`` changes ("vector" when none)."""
    changed = [
        m
        for m in THRESHOLD_MODES
        if proposed.thresholds_for(m).refuse_below != policy.thresholds_for(m).refuse_below
    ]
    return changed[0] if changed else "vector"


def _analysed(
    frame: pd.DataFrame,
    policy: NoAnswerPolicy,
    proposed: NoAnswerPolicy,
    mode: str,
    tuned_on: str,
    report_on: str,
) -> Analysis:
    return thresholds.analyse(
        frame,
        proposed,
        mode,
        policy.thresholds_for(mode).refuse_below,
        proposed.thresholds_for(mode).refuse_below,
        tuned_on=tuned_on,
        report_on=report_on,
    )


def _stored_ops(snapshot: dict[str, Any] | None) -> pd.DataFrame | None:
    rows = (snapshot or {}).get("operating_points")
    return pd.DataFrame(rows) if isinstance(rows, list) and rows else None


#: Reads a run's outputs frame (review.evaluation.evalruns.outputs_frame) by run id.
OutputsReader = Callable[[int], pd.DataFrame]


def _reader(engine: Engine, tax: Taxonomy, outputs: OutputsReader | None) -> OutputsReader:
    if outputs is not None:
        return outputs
    return lambda run_id: evalruns.outputs_frame(engine, run_id, tax)


def signoff_evidence(
    engine: Engine,
    tax: Taxonomy,
    policy: NoAnswerPolicy,
    proposed: NoAnswerPolicy,
    proposal_snapshot: dict[str, Any] | None = None,
    *,
    outputs: OutputsReader | None = None,
) -> SignoffEvidence:
    """The proposal ``proposed`` against the policy in force ``policy``, on the calibration
    source its ``proposal_snapshot`` records (see the module). ``outputs``: how a run's
    outputs frame is read (a page passes its copy kept per data stamp); read afresh when not
    given."""
    stored = proposal_snapshot or {}
    source = stored.get("source") if isinstance(stored.get("source"), dict) else None
    read = _reader(engine, tax, outputs)
    if source is None:
        return _fallback(engine, read, policy, proposed, bool(proposal_snapshot))
    mode = str(source.get("mode") or changed_mode(policy, proposed))
    label = source_label(source)
    if source.get("kind") == "audit":
        plan_ids = [int(i) for i in source.get("plan_ids", [])]
        frame = thresholds.audited_trace_outcomes(engine, policy, mode, plan_ids)
        name = None
        tuned_on = report_on = "audit"
    else:
        runs = {r.id: r for r in evalruns.list_runs(engine)}
        run = runs.get(int(source.get("run_id", -1)))
        if run is None:
            return SignoffEvidence(
                None,
                mode,
                source=label,
                note=(
                    f"The calibration run {source.get('run_name')!r} no longer exists: only "
                    "the figures stored with the proposal remain."
                ),
                proposed_ops=_stored_ops(stored),
            )
        frame = thresholds.outcomes_of(read(run.id), policy, mode)
        name = run.name
        tuned_on = str(source.get("tuned_on", "validation"))
        report_on = str(source.get("report_on", "test"))
    if frame.empty:
        return SignoffEvidence(
            name,
            mode,
            source=label,
            note="The calibration source has no scored outcomes in this mode any more.",
            proposed_ops=_stored_ops(stored),
        )
    a = _analysed(frame, policy, proposed, mode, tuned_on, report_on)
    then = stored.get("fingerprint")
    changed = bool(then) and then != a.fingerprint
    snapshot = {
        **a.snapshot(),
        "source": source,
        "fingerprint": a.fingerprint,
        "proposed_fingerprint": then,
        "data_changed": changed,
    }
    if changed:
        snapshot["proposed_operating_points"] = stored.get("operating_points")
    return SignoffEvidence(
        name,
        mode,
        a,
        snapshot,
        a.fingerprint,
        a.case_ids,
        source=label,
        proposed_ops=_stored_ops(stored) if changed else None,
        data_changed=changed,
    )


def _fallback(
    engine: Engine,
    read: OutputsReader,
    policy: NoAnswerPolicy,
    proposed: NoAnswerPolicy,
    is_proposal: bool,
) -> SignoffEvidence:
    """A proposal that records no calibration source: the test split of the reference run
    (else the newest run), said in ``note``."""
    runs = evalruns.list_runs(engine)
    if not runs:
        return SignoffEvidence()
    run = next((r for r in runs if r.name.startswith("reference")), runs[0])
    mode = changed_mode(policy, proposed)
    label = f"run {run.name!r}, reported on test · mode {mode}"
    note = (
        "This proposal does not record its calibration source; its figures are shown on "
        "the test split of the reference run."
        if is_proposal
        else ""
    )
    frame = thresholds.outcomes_of(read(run.id), policy, mode)
    if frame.empty:
        return SignoffEvidence(run.name, mode, source=label, note=note)
    a = _analysed(frame, policy, proposed, mode, "validation", "test")
    return SignoffEvidence(
        run.name, mode, a, a.snapshot(), a.fingerprint, a.case_ids, source=label, note=note
    )
