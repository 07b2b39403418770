"""Signing a threshold change: the headline a signer reads (coverage, false-refusal and
unsupported-answer rates with the notes' denominators, counts and intervals, pass/fail against
the targets), and the rule that approving a change that fails a target needs a written reason
and an explicit confirmation, enforced by the service and stored with the signature."""

from __future__ import annotations

import pandas as pd
import pytest
from sqlalchemy import Engine

from review.core.errors import InputError
from review.core.taxonomy import Taxonomy
from review.demo.people import demo_actor
from review.monthly import overview
from review.policy import inforce, signoff
from review.policy.policy import default_policy_path, parse_policy
from review.thresholds import headline as hl
from review.thresholds import signing, thresholds

PAULA = "paula.kim@brightwave.example"
OMAR = "omar.haddad@brightwave.example"
CHEN = "chen.li@brightwave.example"


def _pending(engine: Engine) -> signoff.VersionView:
    pending = [v for v in signoff.versions(engine, inforce.KIND) if v.status == "pending"]
    assert len(pending) == 1
    return pending[0]


def test_the_demo_proposal_fails_targets_and_its_headline_says_which(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    v = _pending(demo_engine)
    review = signing.review_proposal(demo_engine, tax, v)
    h = review.headline
    assert h is not None and h.proposed and h.report_on == "test"
    rows = {r.metric: r for r in h.rows}
    assert list(rows) == ["coverage", "false_refusal_rate", "unsupported_answer_rate"]
    # the rates are the analysis's, with the notes' denominators
    a = review.evidence.analysis
    assert a is not None
    ops = a.ops[a.ops["split"] == "test"].set_index("policy")
    for which, fig in (("current", "current"), ("proposed", "proposed")):
        op = ops.loc[which]
        cov = getattr(rows["coverage"], fig)
        assert cov.denominator == op["n"] and cov.value == pytest.approx(op["coverage"])
        frr = getattr(rows["false_refusal_rate"], fig)
        assert frr.denominator == op["n_answerable"]
        assert frr.value == pytest.approx(op["false_refusal_rate"])
        uar = getattr(rows["unsupported_answer_rate"], fig)
        assert uar.denominator == op["n_unanswerable"]
        assert uar.value == pytest.approx(op["unsupported_answer_rate"])
    # the demo: coverage falls from 50% to 10% of the 30 test outcomes
    assert rows["coverage"].current.text == "50% (33–67%) · 15 of 30"
    assert rows["coverage"].proposed is not None
    assert rows["coverage"].proposed.text.endswith("· 3 of 30")
    assert rows["coverage"].target == "none set in the policy"
    assert rows["false_refusal_rate"].target == "≤ 10%"
    assert rows["false_refusal_rate"].proposed_ok is False
    assert rows["unsupported_answer_rate"].proposed_ok is False
    assert h.targets_total == 8 and len(h.failing) == 4
    assert "False-refusal rate, overall: 88%, target ≤ 10%" in h.failing
    assert "Unsupported-answer rate, slice Adversarial instruction: 100%, target ≤ 0%" in h.failing
    assert "fails 4 of 8" in review.confirmation


def test_approving_a_failing_change_needs_a_reason_and_the_confirmation(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    v = _pending(demo_engine)
    omar = demo_actor(OMAR)
    for note, confirm, missing in (
        ("", False, "a written reason and the confirmation"),
        ("", True, "a written reason."),
        ("Agreed with support: fewer unsupported answers first.", False, "the confirmation"),
        ("   ", True, "a written reason."),
    ):
        with pytest.raises(InputError, match="fails 4 of 8 release target") as err:
            signing.sign_thresholds(
                demo_engine, omar, tax, v.id, "approve", note=note, confirm_failing_targets=confirm
            )
        assert missing in str(err.value)
        assert f"Version {v.number} was not approved" in str(err.value)
    assert signoff.get_version(demo_engine, v.id).signatures == ()
    # with both, the approval is stored with the reason and what it was given for
    why = "Agreed with support: fewer unsupported answers first."
    signing.sign_thresholds(
        demo_engine, omar, tax, v.id, "approve", note=why, confirm_failing_targets=True
    )
    (sig,) = signoff.get_version(demo_engine, v.id).signatures
    assert sig.meaning == "approve" and sig.note == why and sig.role == "product_owner"
    given = sig.metrics_snapshot["approved_despite"]
    assert given["reason"] == why and given["confirmed"] is True
    assert len(given["failing_targets"]) == 4
    assert [r["rate"] for r in sig.metrics_snapshot["headline"]] == [
        "Coverage",
        "False-refusal rate",
        "Unsupported-answer rate",
    ]
    assert sig.data_fingerprint and sig.metrics_snapshot["source"]["kind"] == "run"
    # the history shows the reason, and what it was the reason for
    from review.thresholds import display

    in_force = inforce.in_force(demo_engine).version
    history = display.history_frame(
        signoff.versions(demo_engine, inforce.KIND), in_force.id if in_force else None
    )
    assert history.loc[history["version"] == v.number, "reasons"].iloc[0] == (
        f"Product owner: {why} (approved although it failed release targets)"
    )
    assert signoff.verify_chain(demo_engine) == []


def test_a_rejection_needs_a_note_but_no_confirmation(demo_engine: Engine, tax: Taxonomy) -> None:
    v = _pending(demo_engine)
    with pytest.raises(InputError, match="rejection needs a note"):
        signing.sign_thresholds(demo_engine, demo_actor(CHEN), tax, v.id, "reject")
    signing.sign_thresholds(
        demo_engine, demo_actor(CHEN), tax, v.id, "reject", note="Coverage falls too far."
    )
    assert signoff.get_version(demo_engine, v.id).status == "rejected"


def test_the_author_still_cannot_sign_with_a_reason(demo_engine: Engine, tax: Taxonomy) -> None:
    from review.core.errors import PermissionDenied

    v = _pending(demo_engine)
    with pytest.raises(PermissionDenied, match="author"):
        signing.sign_thresholds(
            demo_engine,
            demo_actor(PAULA),
            tax,
            v.id,
            "approve",
            note="mine",
            confirm_failing_targets=True,
        )


def _outcomes(scores: list[float], answerable: list[bool]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "key": [f"c{i}" for i in range(len(scores))],
            "case_id": list(range(len(scores))),
            "repeat": 0,
            "split": "test",
            "gold": ["answer" if a else "abstain" for a in answerable],
            "raw_score": scores,
            "score": scores,
            "answerable": answerable,
            "acceptable": answerable,
            "expects_abstain": [not a for a in answerable],
            "slice": [[] for _ in scores],
        }
    )


def test_a_change_that_meets_every_target_needs_no_confirmation() -> None:
    policy = parse_policy(default_policy_path().read_text(encoding="utf-8"), "p")
    frame = _outcomes([0.9] * 10 + [0.1] * 10, [True] * 10 + [False] * 10)
    a = thresholds.analyse(frame, policy, "vector", 0.05, 0.5, tuned_on="test", report_on="test")
    h = hl.headline(a, policy)
    rows = {r.metric: r for r in h.rows}
    assert rows["false_refusal_rate"].proposed_ok is True
    assert rows["unsupported_answer_rate"].proposed_ok is True
    # the in-force threshold answers everything: every unanswerable case is answered
    assert rows["unsupported_answer_rate"].current_ok is False
    assert rows["unsupported_answer_rate"].current.text.startswith("100% (")
    overall_failing = [f for f in h.failing if ", overall:" in f]
    assert overall_failing == []


def test_a_rate_without_a_denominator_reads_undefined_with_the_reason() -> None:
    fig = hl.figure(0, 0, "no answerable case on this split")
    assert fig.value is None and fig.text == "undefined: no answerable case on this split"
    policy = parse_policy(default_policy_path().read_text(encoding="utf-8"), "p")
    frame = _outcomes([0.9, 0.8, 0.7], [False, False, False])
    a = thresholds.analyse(frame, policy, "vector", 0.5, 0.85, tuned_on="test", report_on="test")
    rows = {r.metric: r for r in hl.headline(a, policy).rows}
    assert rows["false_refusal_rate"].current.text == (
        "undefined: no answerable case on this split"
    )
    assert rows["coverage"].current.text.endswith("· 3 of 3")
    assert rows["unsupported_answer_rate"].proposed is not None
    assert rows["unsupported_answer_rate"].proposed.text.endswith("· 1 of 3")


def test_nothing_proposed_shows_the_figures_in_force_without_a_verdict(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    from review.thresholds.evidence import signoff_evidence

    pif = inforce.in_force(demo_engine)
    ev = signoff_evidence(demo_engine, tax, pif.policy, pif.policy)
    assert ev.analysis is not None
    h = hl.headline(ev.analysis, pif.policy, proposed=False)
    assert h.failing == () and all(r.proposed is None for r in h.rows)
    assert hl.verdict(h).startswith("Nothing is proposed")
    assert "fail" not in hl.verdict(h)


def test_overview_links_the_signers_to_the_item_and_tells_the_author_it_waits(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    v = _pending(demo_engine)
    chen = overview.build_overview(demo_engine, demo_actor(CHEN), tax).attention
    item = next(a for a in chen if a.page == "thresholds")
    # the author by name: the text read "by product_owner@…" (an e-mail on the Overview)
    assert item.text == f"Threshold change version {v.number} by Paula Kim waits for sign-off."
    assert item.params == {"tab": "signoff", "version": str(v.number)}
    assert item.opens == f"version {v.number} on the Sign-off tab"
    paula = overview.build_overview(demo_engine, demo_actor(PAULA), tax).attention
    mine = [a for a in paula if a.page == "thresholds"]
    assert [a.text for a in mine] == [
        f"Your proposal v{v.number} (threshold change) waits for compliance and product owner."
    ]
    assert mine[0].params == item.params
    # after Omar approves, it waits for compliance only
    signing.sign_thresholds(
        demo_engine, demo_actor(OMAR), tax, v.id, "approve", note="ok", confirm_failing_targets=True
    )
    paula = overview.build_overview(demo_engine, demo_actor(PAULA), tax).attention
    assert [a.text for a in paula if a.page == "thresholds"] == [
        f"Your proposal v{v.number} (threshold change) waits for compliance."
    ]
    omar = overview.build_overview(demo_engine, demo_actor(OMAR), tax).attention
    assert not [a for a in omar if a.page == "thresholds"]


def test_the_sliders_propose_nothing_until_they_leave_the_thresholds_in_force() -> None:
    from review.thresholds import display

    policy = parse_policy(default_policy_path().read_text(encoding="utf-8"), "p")
    th = policy.thresholds_for("vector")
    assert (th.refuse_below, th.caveat_below) == (0.55, 0.65)
    bounds = display.SliderRange(0.32, 1.01, 0.55)
    assert not display.is_change(th, bounds, 0.55, 0.65)
    assert display.is_change(th, bounds, 0.6, 0.65)
    assert display.is_change(th, bounds, 0.55, 0.7)


def test_a_link_to_a_version_that_waits_no_more_says_what_it_is(demo_engine: Engine) -> None:
    from review.thresholds import display

    allv = signoff.versions(demo_engine, inforce.KIND)
    in_force = inforce.in_force(demo_engine).version
    assert in_force is not None
    older = next(v for v in allv if v.status == "approved" and v.id != in_force.id)
    assert (
        display.not_pending_message(99, None, in_force) == "There is no version 99 of the policy."
    )
    assert display.not_pending_message(in_force.number, in_force, in_force) == (
        f"Version {in_force.number} is approved: it is the policy in force."
    )
    assert display.not_pending_message(older.number, older, in_force) == (
        f"Version {older.number} no longer waits for sign-off: it is approved."
    )


def test_a_target_that_cannot_be_measured_is_told_apart_from_a_bad_figure() -> None:
    """The public MuSiQue sample covers two of the seven slices: the sign-off said "fails 8 of
    8 release targets" when four of the eight had nothing to measure (issue 35)."""
    from review.thresholds import headline as hl

    failing = (
        "False-refusal rate, overall: 58%, target ≤ 10%",
        f"Unsupported-answer rate, slice Adversarial instruction: {hl.UNMEASURED}, target ≤ 0%",
        f"Abstention recall, slice Temporal mismatch: {hl.UNMEASURED}, target ≥ 85%",
    )
    h = hl.Headline("test", 24, (), failing=failing, targets_total=8)
    said = hl.verdict(h)
    assert said.startswith("The proposal fails 3 of 8 release targets on the test split")
    assert "(2 of them cannot be measured: no outcome in that slice on the split" in said
    assert hl.unmeasured_note(failing[:1]) == ""
    assert "(it cannot be measured" in hl.unmeasured_note(failing[1:2])
