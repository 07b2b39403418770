"""What the Thresholds page shows, as plain data, and what a signer signs with: the outcome
source and report split, the slider's range, the summaries of an analysis of the demo run,
the sign-off evidence of a proposal, and the history's tables, rollback choices and stored
snapshots."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from typing import Any

import pandas as pd
import pytest
from sqlalchemy import Engine

from review.core import readable
from review.core.identity import Role
from review.core.taxonomy import Taxonomy
from review.evaluation import evalruns
from review.policy import display as policy_display
from review.policy import inforce, signoff
from review.policy.policy import ModeThresholds, parse_policy, replace_thresholds
from review.thresholds import display, evidence, thresholds
from tests.helpers.actors import make_actor

AT = dt.datetime(2025, 6, 2, 9, 30, tzinfo=dt.UTC)
PAULA = make_actor("product_owner", "paula@example.org", uid=10)
CHEN = make_actor("compliance", "chen@example.org", clearance=True, uid=12)


def signature(
    role: str,
    meaning: str = "approve",
    fingerprint: str = "",
    snapshot: dict[str, Any] | None = None,
) -> signoff.Signature:
    return signoff.Signature(
        1, f"{role}@example.org", role, meaning, "", AT, "", fingerprint, snapshot or {}
    )


def version(
    number: int, *sigs: signoff.Signature, tuned_on: str | None = None, note: str | None = None
) -> signoff.VersionView:
    return signoff.VersionView(
        id=number,
        kind=inforce.KIND,
        number=number,
        yaml_text="",
        sha256="fedcba9876543210fedc",
        parent_id=None,
        author="omar@example.org",
        rationale="why",
        tuned_on_split=tuned_on,
        override_note=note,
        snapshot=None,
        created_at=AT,
        signatures=sigs,
        required_roles=frozenset({Role.product_owner, Role.compliance}),
    )


APPROVED = (signature("product_owner"), signature("compliance"))


def test_outcome_sources_and_report_splits(engine: Engine) -> None:
    policy = inforce.in_force(engine).policy
    modes = display.audit_modes(policy)
    assert modes[0] == "vector" and "hybrid" not in modes
    assert modes[1:] == sorted(modes[1:])
    assert set(modes) == set(policy.ranking_modes) - {"hybrid"}
    assert display.report_split_for("validation") == "test"
    assert display.report_split_for("train") == "test"
    assert display.report_split_for("test") == "validation"


def test_the_slider_holds_the_scores_and_the_current_threshold() -> None:
    frame = pd.DataFrame({"raw_score": [0.2, 0.55, 0.9]})
    r = display.slider_range(frame, 0.5)
    assert (r.min_value, r.max_value, r.value) == (0.19, 0.91, 0.5)
    r = display.slider_range(frame, 1.5)  # a current threshold above every score
    assert (r.max_value, r.value) == (1.51, 1.5)
    r = display.slider_range(frame, None)  # no threshold yet: start at the lowest score
    assert (r.min_value, r.value) == (0.19, 0.2)


def _mode(refuse: float | None, caveat: float | None) -> ModeThresholds:
    return ModeThresholds("vector", "vector", 1, refuse, caveat, True, True)


def test_the_caveat_never_starts_below_the_refuse_threshold() -> None:
    assert display.caveat_start(_mode(0.5, 0.6), 0.55) == 0.6
    assert display.caveat_start(_mode(0.5, 0.6), 0.7) == 0.7
    assert display.caveat_start(_mode(0.5, None), 0.55) == 0.55


def test_target_verdicts_flip_counts_and_audited_effects() -> None:
    assert display.targets_verdict(pd.DataFrame({"passed": [True, True]})) == (
        True,
        "Every target passes.",
    )
    assert display.targets_verdict(pd.DataFrame({"passed": [True, False, False]})) == (
        False,
        "2 of 3 targets fail.",
    )
    flips = pd.DataFrame({"effect": ["fixes a false refusal", "breaks", "fixes a false refusal"]})
    assert display.flip_counts(flips) == "fixes a false refusal: 2, breaks: 1"
    audited = pd.DataFrame({"effect": ["fixes", "breaks", "fixes"], "traces": [2, 1, 3]})
    assert display.audited_effects(audited) == (
        "Audited traces among the flips, by their verdict: 5 fixed, 1 broken, 0 neutral"
    )


@pytest.fixture
def demo_run(demo_engine: Engine) -> evalruns.RunRow:
    runs = evalruns.list_runs(demo_engine)
    return next((r for r in runs if r.name.startswith("reference")), runs[0])


def test_an_analysis_of_the_demo_run_in_summaries(
    demo_engine: Engine, demo_run: evalruns.RunRow, tax: Taxonomy
) -> None:
    policy = inforce.in_force(demo_engine).policy
    frame = thresholds.outcomes(demo_engine, demo_run.id, tax, policy, "vector")
    current = policy.thresholds_for("vector").refuse_below
    a = thresholds.analyse(frame, policy, "vector", current, 0.6)
    caption = display.analysis_caption(a)
    assert caption.startswith(
        f"{readable.count(a.n_tuning, 'outcome')} on validation, {a.n_report} on test"
    )
    assert f"AURC on validation: {a.aurc:.3f}" in caption
    points = display.coverage_points(a)
    assert set(points) == {"current", "proposed"}
    ops = a.ops[a.ops["split"] == "validation"].set_index("policy")
    assert points["proposed"] == (
        float(ops.loc["proposed", "coverage"]),
        float(ops.loc["proposed", "selective_risk"]),
    )
    assert set(display.OP_COLUMNS) <= set(a.ops.columns)


def test_sign_off_evidence_reports_the_changed_mode_on_the_reference_run(
    demo_engine: Engine, demo_run: evalruns.RunRow, tax: Taxonomy
) -> None:
    pif = inforce.in_force(demo_engine)
    same = parse_policy(pif.text, "same")
    assert evidence.changed_mode(pif.policy, same) == "vector"
    moved = parse_policy(replace_thresholds(pif.text, "bm25", refuse_below=0.42), "moved")
    assert evidence.changed_mode(pif.policy, moved) == "bm25"
    proposed = parse_policy(replace_thresholds(pif.text, "vector", refuse_below=0.6), "p")
    ev = evidence.signoff_evidence(demo_engine, tax, pif.policy, proposed)
    assert ev.run_name == demo_run.name and ev.mode == "vector"
    assert ev.analysis is not None and ev.analysis.report_on == "test"
    assert ev.snapshot["mode"] == "vector" and ev.fingerprint == ev.analysis.fingerprint
    assert ev.case_ids and ev.case_ids == sorted(ev.case_ids)


def test_sign_off_evidence_without_runs_is_empty(engine: Engine, tax: Taxonomy) -> None:
    pif = inforce.in_force(engine)
    ev = evidence.signoff_evidence(engine, tax, pif.policy, pif.policy)
    assert ev == evidence.SignoffEvidence()
    assert (ev.snapshot, ev.fingerprint, ev.case_ids, ev.analysis) == ({}, "", [], None)


def test_captions_of_versions_and_signatures() -> None:
    done = version(4, *APPROVED)
    assert display.in_force_caption(done) == (
        "In force: sign-off v4, approved 2025-06-02 · sha256 fedcba987654…"
    )
    # the file's own version: field is labelled apart from the sign-off number
    with_file = replace(done, yaml_text="# policy\nversion: 3\nranking_modes: {}\n")
    assert display.in_force_caption(with_file).startswith(
        "In force: sign-off v4 · file version 3, approved"
    )
    assert policy_display.signatures_text(version(5)) == "none"
    signed = version(5, signature("compliance", "reject"), signature("product_owner"))
    # signers by name, roles in words; without a name, never the whole address
    assert policy_display.signatures_text(signed, {"compliance@example.org": "Chen Li"}) == (
        "Compliance reject (Chen Li), Product owner approve (product_owner)"
    )
    assert policy_display.roles_text(["compliance", "product_owner"]) == (
        "Compliance, Product owner"
    )
    assert policy_display.roles_text([]) == "nothing"
    assert display.override_message(version(5, tuned_on="test")) == (
        "Tuned on the test data it is reported on. No override note: it cannot be approved."
    )
    assert display.override_message(version(5, tuned_on="audit", note="ok")).endswith(
        "reported on. Override note on the record:"
    )


def test_who_may_sign_a_proposal() -> None:
    half = version(5, signature("product_owner"))
    assert display.signing_roles(PAULA, half) == []
    assert display.signing_roles(CHEN, half) == [Role.compliance]
    assert display.signing_roles(PAULA, version(6)) == [Role.product_owner]


def test_history_rollback_choices_and_chain() -> None:
    allv = [version(3), version(2, *APPROVED, tuned_on="validation"), version(1, *APPROVED)]
    frame = display.history_frame(allv, 2, {"compliance@example.org": "Chen Li"})
    assert list(frame["version"]) == [3, 2, 1]
    assert list(frame["status"]) == [
        "stale: superseded by version 2",  # proposed on the shipped file, not on version 2
        "in force",
        "approved, replaced by version 2",
    ]
    assert list(frame["tuned on"]) == ["", "validation", ""]
    assert frame["signatures"].iloc[1] == (
        "Product owner: approve by product_owner at 2025-06-02 09:30; "  # no name: not the e-mail
        "Compliance: approve by Chen Li at 2025-06-02 09:30"
    )
    assert display.rollback_choices(allv, 2) == [1]
    assert display.rollback_choices(allv, None) == [2, 1]
    assert display.chain_message([]).endswith("intact (every signature hash verifies)")
    assert display.chain_message(["a", "b"]) == "Sign-off chain: a; b"


def test_a_stored_snapshot_shows_its_main_parts_cut_to_size() -> None:
    s = signature(
        "compliance",
        fingerprint="0123456789abcdef0123",
        snapshot={"mode": "vector", "aurc": 0.12, "sweep": [1, 2, 3], "points": {"a": 1}},
    )
    v = version(2, s)
    assert display.signature_caption(v, s) == (
        "Version 2, compliance approve by compliance@example.org: data fingerprint 0123456789abcdef"
    )
    shown = json.loads(display.snapshot_json(s))
    assert list(shown) == list(display.SNAPSHOT_KEYS)
    assert shown["mode"] == "vector" and shown["tuned_on"] is None and "sweep" not in shown
    big = signature("compliance", snapshot={"targets": ["x" * 50] * 200})
    assert len(display.snapshot_json(big)) == display.SNAPSHOT_CHARS
    assert display.signature_caption(v, big).endswith("data fingerprint —")


def test_sign_off_evidence_uses_the_proposals_own_calibration_source(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    pif = inforce.in_force(demo_engine)
    proposed = parse_policy(replace_thresholds(pif.text, "vector", refuse_below=0.6), "p")
    runs = evalruns.list_runs(demo_engine)
    naive = next(r for r in runs if r.name.startswith("naive"))
    frame = thresholds.outcomes(demo_engine, naive.id, tax, pif.policy, "vector")
    a = thresholds.analyse(frame, proposed, "vector", 0.55, 0.6, "validation", "test")
    source = evidence.run_source(naive, "vector", "validation", "test")
    stored = {**a.snapshot(), "source": source, "fingerprint": a.fingerprint}
    ev = evidence.signoff_evidence(demo_engine, tax, pif.policy, proposed, stored)
    # the run the author calibrated on, not the first run named "reference"
    assert ev.run_name == naive.name and not ev.note and not ev.data_changed
    assert ev.snapshot["source"] == source and ev.fingerprint == a.fingerprint
    assert ev.proposed_ops is None
    assert "naive" in ev.source and "tuned on validation" in ev.source
    # the data changed since the proposal: the author's figures are kept beside the new ones
    older = {**stored, "fingerprint": "0" * 64}
    ev = evidence.signoff_evidence(demo_engine, tax, pif.policy, proposed, older)
    assert ev.data_changed and ev.proposed_ops is not None
    assert ev.snapshot["proposed_fingerprint"] == "0" * 64
    assert ev.snapshot["proposed_operating_points"] == stored["operating_points"]
    # the run is gone: said, with only the stored figures
    gone = {**stored, "source": {**source, "run_id": 10**6}}
    ev = evidence.signoff_evidence(demo_engine, tax, pif.policy, proposed, gone)
    assert ev.analysis is None and "no longer exists" in ev.note
    assert ev.proposed_ops is not None
    # a proposal without a recorded source says so
    ev = evidence.signoff_evidence(demo_engine, tax, pif.policy, proposed, {"mode": "vector"})
    assert "does not record its calibration source" in ev.note


def test_sign_off_evidence_on_audited_traces(demo_engine: Engine, tax: Taxonomy) -> None:
    pif = inforce.in_force(demo_engine)
    proposed = parse_policy(replace_thresholds(pif.text, "vector", refuse_below=0.6), "p")
    plan_ids = thresholds.audited_plan_ids(demo_engine)
    source = evidence.audit_source(plan_ids, "vector")
    ev = evidence.signoff_evidence(demo_engine, tax, pif.policy, proposed, {"source": source})
    assert "audited traces" in ev.source
    if ev.analysis is not None:
        assert ev.analysis.report_on == "audit" and ev.snapshot["source"]["kind"] == "audit"
    else:
        assert "no scored outcomes" in ev.note


def test_the_demo_proposal_records_its_calibration_source(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    from review.core.terms import VersionStatus
    from review.policy import signoff

    pending = [
        v for v in signoff.versions(demo_engine, inforce.KIND) if v.status == VersionStatus.pending
    ]
    assert pending and pending[0].snapshot is not None
    source = pending[0].snapshot["source"]
    assert source["kind"] == "run" and source["run_name"].startswith("reference")
    pif = inforce.in_force(demo_engine)
    proposed = parse_policy(pending[0].yaml_text, "p")
    ev = evidence.signoff_evidence(demo_engine, tax, pif.policy, proposed, pending[0].snapshot)
    assert not ev.note and not ev.data_changed and ev.analysis is not None
