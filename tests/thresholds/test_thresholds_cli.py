"""Thresholds service and the CI commands: gate exit codes, tamper detection, export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from sqlalchemy import Engine, text

from review.cli.main import main
from review.core.errors import InputError
from review.core.taxonomy import Taxonomy
from review.evaluation import evalruns
from review.policy import inforce, signoff
from review.policy.policy import parse_policy
from review.thresholds import replay, thresholds
from tests.helpers.paths import ROOT


def _write_run(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def keys(demo_engine: Engine, tax: Taxonomy) -> list[str]:
    run = evalruns.list_runs(demo_engine)[0]
    return list(evalruns.outputs_frame(demo_engine, run.id, tax)["key"])


def test_gate_refuses_a_case_it_does_not_know(
    demo_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", demo_url)
    policy = ROOT / "policies" / "no-answer-policy.yaml"
    r = CliRunner().invoke(
        main,
        [
            "gate",
            "--policy",
            str(policy),
            "--run",
            str(_write_run(tmp_path / "bad.jsonl", [{"case": "NOPE", "decision": "answer"}])),
        ],
    )
    assert r.exit_code == 1 and "'NOPE' is not a case" in r.output


def test_verify_signoffs_and_export(
    demo_url: str, demo_engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", demo_url)
    run = CliRunner().invoke
    r = run(main, ["verify-signoffs"])
    assert r.exit_code == 0 and "intact" in r.output
    out = tmp_path / "approved.yaml"
    r = run(main, ["export-policy", str(out)])
    assert r.exit_code == 0
    exported = yaml.safe_load(out.read_text())
    assert exported["approved_on"] is not None
    assert exported["change_record"][-1]["version"] == exported["version"]
    with demo_engine.begin() as c:
        c.execute(text("update signoffs set meaning = 'approve', note = 'forged' where id = 1"))
    r = run(main, ["verify-signoffs"])
    assert r.exit_code == 1 and "TAMPERED: sign-off 1: its content was altered" in r.output


def test_analysis_points_flips_and_split_discipline(demo_engine: Engine, tax: Taxonomy) -> None:
    pif = inforce.in_force(demo_engine)
    assert pif.version is not None and pif.version.status == "approved"
    run = next(r for r in evalruns.list_runs(demo_engine) if r.name.startswith("reference"))
    frame = thresholds.outcomes(demo_engine, run.id, tax, pif.policy, "vector")
    same = thresholds.analyse(frame, pif.policy, "vector", 0.55, 0.55)
    assert same.flips.empty
    stricter = thresholds.analyse(frame, pif.policy, "vector", 0.55, 0.70)
    assert not stricter.flips.empty and set(stricter.flips["after"]) == {"refuse"}
    ops = stricter.ops.set_index(["policy", "split"])
    assert (
        ops.loc[("proposed", "validation"), "coverage"]
        <= ops.loc[("current", "validation"), "coverage"]
    )
    assert set(stricter.ops["split"]) == {"validation", "test"}
    snap = stricter.snapshot()
    json.dumps(snap)  # storable
    assert snap["tuned_on"] == "validation" and snap["report_on"] == "test"
    with pytest.raises(InputError, match="no scored outcomes on the holdout split"):
        thresholds.analyse(frame, pif.policy, "vector", 0.55, 0.6, tuned_on="holdout")


def test_proposal_diff_and_export_of_the_new_version(demo_engine: Engine) -> None:
    from tests.helpers.actors import make_actor

    omar = make_actor("product_owner", "omar.haddad@brightwave.example")
    paula = make_actor("product_owner", "paula.kim@brightwave.example")
    chen = make_actor("compliance", "chen.li@brightwave.example")
    for v in signoff.versions(demo_engine, inforce.KIND):
        if v.status == "pending":
            signoff.sign(demo_engine, chen, v.id, "reject", note="clearing the demo proposal")
    vid = thresholds.propose_thresholds(
        demo_engine,
        omar,
        "vector",
        0.62,
        0.7,
        "Fewer unsupported answers.",
        tuned_on_split="validation",
    )
    v = signoff.get_version(demo_engine, vid)
    d = thresholds.diff(inforce.in_force(demo_engine).text, v.yaml_text)
    assert "-    refuse_below: 0.55" in d and "+    refuse_below: 0.62" in d
    assert "+    author: omar.haddad@brightwave.example" in d
    signoff.sign(demo_engine, paula, vid, "approve")
    signoff.sign(demo_engine, chen, vid, "approve")
    assert inforce.in_force(demo_engine).policy.thresholds_for("vector").refuse_below == 0.62
    assert "approved_on: 20" in thresholds.export_approved(demo_engine)


def test_replay_on_traces_counts_flips_by_slice(demo_engine: Engine) -> None:
    from review.policy.policy import parse_policy, replace_thresholds
    from tests.helpers.actors import make_actor

    pif = inforce.in_force(demo_engine)
    same = replay.replay_traces(
        demo_engine, make_actor("reviewer", clearance=True), pif.policy, pif.policy
    )
    assert same.traces > 0 and same.flips.empty
    # traces the gate cannot decide from what they logged are not replayable (never a flip):
    # counted here one by one with the single-request gate
    from sqlalchemy import select as sql_select

    from review.policy.gate import Signals, decide
    from storage.db import read_session as session
    from storage.models import Trace as T

    with session(demo_engine) as s:
        rows = s.execute(
            sql_select(
                T.ranking_mode,
                T.hits_after_filter,
                T.top_score,
                T.answerable,
                T.ambiguous,
                T.ungrounded,
                T.topics,
            )
        ).all()
    lacking: dict[str, int] = {}
    for row in rows:
        topics = None if row[6] is None else tuple(row[6])
        result = decide(pif.policy, Signals(row[0], row[1], row[2], row[3], row[4], row[5], topics))
        if result.rule == "signal_missing":
            lacking[result.missing[0]] = lacking.get(result.missing[0], 0) + 1
    assert same.not_replayable == sum(lacking.values()) > 0
    assert same.missing_signals == lacking
    # the two wording-demo traces were logged without a topic classification
    assert lacking.get("topics") == 2
    assert f"{same.not_replayable:,} not replayable" in replay.not_replayable_text(same)
    stricter = parse_policy(
        replace_thresholds(pif.text, "vector", refuse_below=0.7, caveat_below=0.75), "p"
    )
    r = replay.replay_traces(
        demo_engine, make_actor("reviewer", clearance=True), pif.policy, stricter
    )
    assert not r.flips.empty and set(r.flips["after"]) <= {"abstain", "answer (caveat)"}
    assert int(r.flips["traces"].sum()) <= r.traces
    assert {"trace_id", "before", "after", "audit verdict"} <= set(r.examples.columns)
    # restricted traces are counted for everyone but listed only for users with clearance
    from sqlalchemy import select

    from storage.db import read_session
    from storage.models import Trace

    with read_session(demo_engine) as s:
        restricted = set(s.scalars(select(Trace.trace_id).where(Trace.restricted.is_(True))))
    big = replay.replay_traces(
        demo_engine, make_actor("reviewer", clearance=True), pif.policy, stricter, examples=10**6
    )
    assert restricted & set(big.examples["trace_id"]), "the demo has restricted flips"
    plain = replay.replay_traces(
        demo_engine, make_actor("reviewer"), pif.policy, stricter, examples=10**6
    )
    assert not restricted & set(plain.examples["trace_id"])
    assert plain.flips.equals(big.flips)
    with pytest.raises(Exception, match="traces"):
        replay.replay_traces(demo_engine, make_actor("annotator"), pif.policy, stricter)
    # every audited flip is counted with what the change does to it
    judged = big.examples[big.examples["audit verdict"] != ""]
    assert int(big.audited["traces"].sum()) == len(judged) > 0
    for row in big.audited.itertuples(index=False):
        assert row.effect == replay.flip_effect(row.verdict, row.before, row.after)


def test_flip_effect_by_verdict() -> None:
    fx = replay.flip_effect
    assert fx("false_refusal", "abstain", "answer") == "fixes"
    assert fx("false_refusal", "answer", "abstain") == "breaks"
    assert fx("supported_answer", "answer (caveat)", "escalate") == "breaks"
    assert fx("unsupported_answer", "answer", "abstain") == "fixes"
    assert fx("correct_refusal", "clarify", "answer (caveat)") == "breaks"
    assert fx("correct_refusal", "answer", "abstain") == "fixes"
    assert fx("supported_answer", "answer", "answer (caveat)") == "neutral"
    assert fx("wording_violation", "answer", "abstain") == "neutral"


def test_rollback_to_an_earlier_approved_version_is_a_new_version_signed_again(
    demo_engine: Engine,
) -> None:
    from review.core.errors import PermissionDenied
    from tests.helpers.actors import make_actor

    omar = make_actor("product_owner", "omar.haddad@brightwave.example")
    paula = make_actor("product_owner", "paula.kim@brightwave.example")
    chen = make_actor("compliance", "chen.li@brightwave.example")
    for v in signoff.versions(demo_engine, inforce.KIND):
        if v.status == "pending":
            signoff.sign(demo_engine, chen, v.id, "reject", note="clearing the demo proposal")
    first = inforce.in_force(demo_engine)
    assert first.version is not None
    # a change is approved; then the team goes back to the version before it
    vid = thresholds.propose_thresholds(
        demo_engine, omar, "vector", 0.66, 0.72, "Stricter.", tuned_on_split="validation"
    )
    signoff.sign(demo_engine, paula, vid, "approve")
    signoff.sign(demo_engine, chen, vid, "approve")
    assert inforce.in_force(demo_engine).policy.thresholds_for("vector").refuse_below == 0.66
    back = first.version.number
    with pytest.raises(PermissionDenied):
        thresholds.propose_rollback(demo_engine, make_actor("annotator"), back, "undo")
    with pytest.raises(InputError, match="rationale"):
        thresholds.propose_rollback(demo_engine, paula, back, " ")
    with pytest.raises(InputError, match="not an approved version"):
        thresholds.propose_rollback(demo_engine, paula, 999, "undo")
    now = signoff.get_version(demo_engine, vid).number
    with pytest.raises(InputError, match="is the policy in force"):
        thresholds.propose_rollback(demo_engine, paula, now, "undo")
    rid = thresholds.propose_rollback(demo_engine, paula, back, "Too many false refusals.")
    r = signoff.get_version(demo_engine, rid)
    assert r.status == "pending" and r.number == now + 1 and r.author == paula.email
    rolled = parse_policy(r.yaml_text, "rollback")
    old = first.policy
    assert rolled.ranking_modes == old.ranking_modes
    for mode in old.ranking_modes:
        assert rolled.thresholds_for(mode) == old.thresholds_for(mode), mode
    assert rolled.version == inforce.in_force(demo_engine).policy.version + 1
    assert "rollback to version" in rolled.change_record[-1].summary
    signoff.sign(demo_engine, omar, rid, "approve")
    signoff.sign(demo_engine, chen, rid, "approve")
    assert inforce.in_force(demo_engine).policy.thresholds_for("vector") == old.thresholds_for(
        "vector"
    )
    assert signoff.verify_chain(demo_engine) == []
