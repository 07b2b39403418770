"""Evaluation runs: the outputs format, import, pipeline execution and infrastructure failures."""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import Sequence
from typing import Any

import pytest
from sqlalchemy import Engine

from review.core.errors import InputError, PermissionDenied
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy
from review.demo.fixtures import DEMO_RUNS
from review.evaluation import evalruns, execution, refpipeline, runmetrics
from tests.helpers.actors import make_actor
from tests.helpers.transact import write


def out(**over: Any) -> str:
    base: dict[str, Any] = {
        "case": "CASE-001",
        "decision": "answer",
        "score": 0.7,
        "text": "14 days.",
        "cited_ids": ["POL-REFUND-MONTHLY@2"],
        "repeat": 0,
    }
    base.update(over)
    return json.dumps(base)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("{nope", "line 2: not valid JSON"),
        (out(decision="maybe"), "line 2: field decision: 'maybe' is not one of"),
        (out(decision=None), "line 2: field decision: required unless error is set"),
        (out(score="high"), "line 2: field score: must be a number"),
        (out(repeat=-1), "line 2: field repeat"),
        (out(colour="red"), "line 2: field colour: unknown field"),
        (out(reason_code="because"), "line 2: field reason_code"),
        ("[]", "line 2: expected a JSON object"),
    ],
)
def test_malformed_outputs_are_refused(tax: Taxonomy, line: str, expected: str) -> None:
    with pytest.raises(InputError) as info:
        list(evalruns.iter_outputs([out(), line], "run.jsonl", tax))
    assert expected in str(info.value)


def test_numbers_as_strings_and_errors_are_accepted(tax: Taxonomy) -> None:
    items = list(
        evalruns.iter_outputs(
            [out(score="0.25"), out(repeat=1, decision=None, error="timeout")], "r", tax
        )
    )
    assert items[0][1].score == 0.25 and items[1][1].error == "timeout"


def test_import_is_all_or_nothing(demo_engine: Engine, tax: Taxonomy, annotator: Actor) -> None:
    before = len(evalruns.list_runs(demo_engine))
    items = list(evalruns.iter_outputs([out(), out(case="CASE-999")], "r.jsonl", tax))
    with pytest.raises(InputError, match=r"r.jsonl: line 2: field case: 'CASE-999'"):
        evalruns.import_run(demo_engine, annotator, "x", "v", items, "r.jsonl")
    dup = list(evalruns.iter_outputs([out(), out()], "r.jsonl", tax))
    with pytest.raises(InputError, match="repeat 0 appears twice"):
        evalruns.import_run(demo_engine, annotator, "x", "v", dup, "r.jsonl")
    assert len(evalruns.list_runs(demo_engine)) == before
    with pytest.raises(PermissionDenied):
        evalruns.import_run(demo_engine, make_actor("compliance"), "x", "v", items[:1], "r")
    run_id = evalruns.import_run(demo_engine, annotator, "x", "v", items[:1], "r")
    with pytest.raises(InputError, match="already exists"):
        evalruns.import_run(demo_engine, annotator, "x", "v", items[:1], "r")
    df = evalruns.outputs_frame(demo_engine, run_id, tax)
    assert list(df["key"]) == ["CASE-001"] and bool(df["answered"].iloc[0])
    assert bool(df["citations_valid"].iloc[0])


def test_infrastructure_failures_are_recorded_apart(
    demo_engine: Engine, tax: Taxonomy, annotator: Actor
) -> None:
    calls = {"n": 0}

    def flaky(question: str, docs: Sequence[Any], identity: dict[str, Any]) -> Any:
        calls["n"] += 1
        k = calls["n"] % 4
        if k == 1:
            raise RuntimeError("index unavailable")
        if k == 2:
            return {"decision": "answer", "text": 42}
        if k == 3:
            time.sleep(0.5)
        return refpipeline.reference(question, docs, identity)

    run_id = execution.execute(
        demo_engine, annotator, flaky, tax, name="flaky", system_version="t", timeout_s=0.2
    )
    df = evalruns.outputs_frame(demo_engine, run_id, tax)
    errors = df.loc[df["infra"], "infra_error"]
    assert errors.str.contains("raised RuntimeError: index unavailable").any()
    assert errors.str.contains("malformed response: text must be a string").any()
    assert errors.str.contains("timed out").any()
    assert not df.loc[df["infra"], "answered"].any()  # never counted as answers
    assert df["infra"].sum() >= len(df) // 2


def test_repeats_and_reference_pipeline_behaviour(
    demo_engine: Engine, tax: Taxonomy, annotator: Actor
) -> None:
    run_id = execution.execute(
        demo_engine,
        annotator,
        refpipeline.reference,
        tax,
        name="ref x2",
        system_version="ref",
        repeats=2,
    )
    df = evalruns.outputs_frame(demo_engine, run_id, tax)
    assert set(df["repeat"]) == {0, 1}
    # deterministic: both repeats agree
    pivot = df.pivot_table(index="key", columns="repeat", values="decision", aggfunc="first")
    assert (pivot[0] == pivot[1]).all()
    assert not df["infra"].any()
    # the naive configuration answers more unanswerable cases than the reference
    naive_id = execution.execute(
        demo_engine, annotator, refpipeline.naive, tax, name="naive", system_version="naive"
    )
    nf = evalruns.outputs_frame(demo_engine, naive_id, tax)
    ref1 = df[df["repeat"] == 0]
    assert (nf["answered"] & ~nf["answerable"]).sum() > (
        ref1["answered"] & ~ref1["answerable"]
    ).sum()


def test_escalates_restricted_topics_and_abstains_without_evidence() -> None:
    r = refpipeline.reference("Can you give me legal advice on our lawsuit?", [], {})
    assert r["decision"] == "escalate"
    r = refpipeline.reference("How long is the refund window?", [], {})
    assert r["decision"] == "abstain" and r["reason_code"] == "no_answer_bearing_evidence"


# ---------------------------------------------------------------------------------------
# Metamorphic perturbations


def doc(doc_id: str, body: str = "Refunds are possible within 14 days of the charge.") -> Any:
    return execution.PipelineDocument(
        doc_id, 1, f"{doc_id} title", body, None, "policy", "global", "public"
    )


def test_reorder_moves_only_the_irrelevant_documents() -> None:
    a, b, c, d = doc("A"), doc("B"), doc("C"), doc("D")
    inp = execution.PipelineInput(
        "K", "How long?", (a, b, c, d), {}, roles=("decisive", "distractor", "context", "partial")
    )
    p = execution.reorder_irrelevant(inp)
    assert p is not None and [x.doc_id for x in p.documents] == ["D", "C", "B", "A"]
    assert p.detail == {"order": ["D@1", "C@1", "B@1", "A@1"], "was": ["A@1", "B@1", "C@1", "D@1"]}
    # one irrelevant document already first: it moves after the decisive one instead
    two = execution.PipelineInput("K", "q?", (b, a), {}, roles=("distractor", "decisive"))
    p2 = execution.reorder_irrelevant(two)
    assert p2 is not None and [x.doc_id for x in p2.documents] == ["A", "B"]
    # nothing to reorder
    assert (
        execution.reorder_irrelevant(
            execution.PipelineInput("K", "q", (a,), {}, roles=("decisive",))
        )
        is None
    )
    assert execution.reorder_irrelevant(execution.PipelineInput("K", "q", (), {})) is None


def test_distractor_repeats_the_question_and_keeps_no_sentence_of_its_source() -> None:
    src = doc(
        "POL-REFUND",
        "# Refunds\n\n2.1 A customer may ask for a refund within 14 days of the charge date.\n",
    )
    other = doc("POL-REFUND-OPEN-QUESTIONS")  # the natural id is taken: a suffix is added
    inp = execution.PipelineInput(
        "K",
        "We pay monthly. How many days do we have to ask for a refund",
        (other, src),
        {},
        roles=("distractor", "decisive"),
    )
    p = execution.add_distractor(inp)
    added = p.documents[0]
    assert p.documents[1:] == (other, src)
    assert added.doc_id == "POL-REFUND-OPEN-QUESTIONS-2" and added.title.startswith(src.title)
    assert p.detail["added"] == "POL-REFUND-OPEN-QUESTIONS-2@1"
    assert p.detail["source"] == "POL-REFUND@1" and p.detail["body"] == added.body
    # every query word is in it, nothing of the source's text, and it ends in a question
    assert refpipeline.content_words(inp.question) <= refpipeline.content_words(added.body)
    assert "14 days" not in added.body and "charge date" not in added.body
    assert "How many days do we have to ask for a refund?" in added.body
    assert execution.add_distractor(inp) == p  # deterministic
    empty = execution.add_distractor(execution.PipelineInput("K", "Why?", (), {}))
    assert empty.detail["source"] is None and empty.documents[0].doc_id == "CASE-OPEN-QUESTIONS"


def _checks(engine: Engine, run_id: int, tax: Taxonomy) -> Any:
    df = evalruns.outputs_frame(engine, run_id, tax)
    pf = evalruns.perturbed_frame(engine, run_id, tax)
    return runmetrics.metamorphic_checks(df, pf).set_index("check"), pf


REORDER = runmetrics.PERTURBATION_CHECKS["reorder"]
DISTRACTOR = runmetrics.PERTURBATION_CHECKS["distractor"]


def test_perturbed_reruns_are_stored_linked_and_judged(
    demo_engine: Engine, tax: Taxonomy, annotator: Actor
) -> None:
    ref_id = execution.execute(
        demo_engine, annotator, refpipeline.reference, tax, name="ref", system_version="r"
    )
    ref, pf = _checks(demo_engine, ref_id, tax)
    df = evalruns.outputs_frame(demo_engine, ref_id, tax)
    # one distractor re-run per output, a reorder where the case has two visible documents
    assert (pf["kind"] == "distractor").sum() == len(df)
    assert 0 < (pf["kind"] == "reorder").sum() < len(df)
    base = df.set_index("key")["decision"]
    assert (pf["base_decision"] == base.loc[pf["key"]].to_numpy()).all()  # linked
    # the reference passes both; the naive configuration fails the distractor check in its
    # known way: it takes the restated question as evidence and cites the distractor
    assert ref.loc[REORDER, "pass_rate"] == 1.0 and ref.loc[DISTRACTOR, "pass_rate"] == 1.0
    naive_id = execution.execute(
        demo_engine, annotator, refpipeline.naive, tax, name="naive", system_version="n"
    )
    naive, npf = _checks(demo_engine, naive_id, tax)
    assert naive.loc[DISTRACTOR, "pass_rate"] < 0.1
    judged = runmetrics.judge_perturbed(npf)
    assert (
        judged.loc[~judged["passed"].astype(bool), "why"].eq("answers citing the distractor").all()
    )
    # and cites superseded versions, so the current rules do not hold
    current = runmetrics.METAMORPHIC["conflicted"][0]
    assert naive.loc[current, "pass_rate"] < ref.loc[current, "pass_rate"]
    stale = runmetrics.family_outcomes(evalruns.outputs_frame(demo_engine, naive_id, tax))
    assert stale["why"].eq("cites a superseded version").any()
    # without perturbations there are none
    plain = execution.execute(
        demo_engine,
        annotator,
        refpipeline.reference,
        tax,
        name="p",
        system_version="r",
        perturb=False,
    )
    assert evalruns.perturbed_frame(demo_engine, plain, tax).empty


def test_a_pipeline_that_reads_only_its_first_document_fails_the_reorder_check(
    demo_engine: Engine, tax: Taxonomy, annotator: Actor
) -> None:
    def first_only(question: str, docs: Sequence[Any], identity: dict[str, Any]) -> Any:
        return refpipeline.reference(question, list(docs)[:1], identity)

    run_id = execution.execute(
        demo_engine, annotator, first_only, tax, name="first", system_version="f"
    )
    table, pf = _checks(demo_engine, run_id, tax)
    assert table.loc[REORDER, "pass_rate"] < 1.0
    judged = runmetrics.judge_perturbed(pf)
    assert judged["why"].str.startswith("decision changed:").any()


def test_a_pipeline_that_ignores_permissions_fails_the_forbidden_check(
    demo_engine: Engine, tax: Taxonomy, annotator: Actor
) -> None:
    def case_of(question: str, docs: Sequence[Any]) -> tuple[str, tuple[str, ...]]:
        return question, tuple(execution.doc_ref(d) for d in docs)

    hidden = {
        case_of(i.question, i.documents): i.forbidden
        for i in execution.pipeline_inputs(demo_engine)
    }

    def leaky(question: str, docs: Sequence[Any], identity: dict[str, Any]) -> Any:
        # deliberately broken: retrieves from the documents the identity may not see
        extra = hidden.get(case_of(question, docs), ())
        return refpipeline.reference(question, [*docs, *extra], identity)

    run_id = execution.execute(
        demo_engine, annotator, leaky, tax, name="leaky", system_version="l", perturb=False
    )
    df = evalruns.outputs_frame(demo_engine, run_id, tax)
    out = runmetrics.family_outcomes(df)
    forbidden = out[out["evidence_state"] == "forbidden"]
    assert forbidden["why"].str.contains("restricted text").any()
    assert df.loc[df["evidence_state"] == "forbidden", "leaked"].any()

    def leaky_uncited(question: str, docs: Sequence[Any], identity: dict[str, Any]) -> Any:
        return {**leaky(question, docs, identity), "citations": []}  # quotes, cites nothing

    quiet = execution.execute(
        demo_engine, annotator, leaky_uncited, tax, name="quiet", system_version="q", perturb=False
    )
    qf = evalruns.outputs_frame(demo_engine, quiet, tax)
    assert qf.loc[qf["evidence_state"] == "forbidden", "leaked"].any()  # found by its text
    ref_id = execution.execute(
        demo_engine,
        annotator,
        refpipeline.reference,
        tax,
        name="ref",
        system_version="r",
        perturb=False,
    )
    assert not evalruns.outputs_frame(demo_engine, ref_id, tax)["leaked"].any()


def test_repeats_report_every_run_never_the_best(
    demo_engine: Engine, tax: Taxonomy, annotator: Actor
) -> None:
    calls = {"n": 0}

    def alternating(question: str, docs: Sequence[Any], identity: dict[str, Any]) -> Any:
        # even calls: the reference; odd calls: answers everything without evidence
        calls["n"] += 1
        if calls["n"] % 2:
            return refpipeline.reference(question, docs, identity)
        return {"decision": "answer", "text": "Yes.", "citations": [], "score": 0.9}

    run_id = execution.execute(
        demo_engine,
        annotator,
        alternating,
        tax,
        name="alt",
        system_version="a",
        repeats=2,
        perturb=False,
    )
    df = evalruns.outputs_frame(demo_engine, run_id, tax)
    table = runmetrics.metamorphic_checks(df).set_index("check")
    removed = table.loc[runmetrics.METAMORPHIC["removed"][0]]
    first = runmetrics.family_outcomes(df[df["repeat"] == 0])
    best = first[first["evidence_state"] == "removed"]["passed"].mean()
    assert removed["runs"] == 2 * removed["cases"]
    assert removed["pass_rate"] == pytest.approx(best / 2)  # the second repeat never passes
    assert removed["varying"] > 0


def test_family_history_reads_runs_oldest_first(
    demo_engine: Engine, tax: Taxonomy, annotator: Actor
) -> None:
    old = execution.execute(
        demo_engine,
        annotator,
        refpipeline.naive,
        tax,
        name="backfilled (January)",
        system_version="n",
        perturb=False,
        created_at=dt.datetime(2025, 1, 10, tzinfo=dt.UTC),
    )
    drift = runmetrics.family_drift(evalruns.family_history(demo_engine, tax))
    order = drift.drop_duplicates("run")["run"].tolist()
    assert order[0] == "backfilled (January)"  # the newest id, the oldest date
    assert order[1:] == [r.name for r in sorted(DEMO_RUNS, key=lambda r: r.at)]
    assert drift.loc[drift["order"] == 1, "flips"].isna().all()
    # the naive run again in June: same decisions, no flips
    june = drift[(drift["run"] == "naive-v0 (June)")]
    assert june["compared"].gt(0).all()
    only = evalruns.family_history(demo_engine, tax, run_ids=[old])
    assert set(only["run"]) == {"backfilled (January)"} and only["family"].notna().all()


def test_evaluate_command_prints_every_check_and_can_skip_perturbations(
    demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from review.cli.main import main

    monkeypatch.setenv("WORKBENCH_DATABASE_URL", demo_url)
    args = ["evaluate", "--pipeline", "review.evaluation.refpipeline:naive", "--name"]
    r = CliRunner().invoke(main, [*args, "cli naive"])
    assert r.exit_code == 0, r.output
    line = next(x for x in r.output.splitlines() if DISTRACTOR in x)
    m = re.search(r": (\d+)/(\d+) passed", line)
    assert m is not None and int(m.group(1)) < int(m.group(2)) / 10  # the known failure
    assert REORDER in r.output and runmetrics.METAMORPHIC["removed"][0] in r.output
    r = CliRunner().invoke(main, [*args, "cli plain", "--no-perturbations"])
    assert r.exit_code == 0, r.output
    assert DISTRACTOR not in r.output and runmetrics.METAMORPHIC["removed"][0] in r.output


def test_metrics_use_the_agreed_label_then_the_adjudication(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    """Gold is the adjudication when there is one; otherwise the label the annotators agree
    on (two or more, same decision and codes); otherwise the author's expected decision."""
    from sqlalchemy import exists, select

    from review.labels import labeling
    from storage.db import read_session
    from storage.models import Case, Label

    run = evalruns.list_runs(demo_engine)[0]
    frame = evalruns.outputs_frame(demo_engine, run.id, tax)
    with read_session(demo_engine) as s:
        unlabeled = set(s.scalars(select(Case.id).where(~exists().where(Label.case_id == Case.id))))
    row = frame[frame["case_id"].isin(unlabeled) & (frame["gold"] != "escalate")].iloc[0]
    case, expected = int(row["case_id"]), str(row["gold"])

    stamps = [evalruns.outputs_stamp(demo_engine, run.id)]

    def gold() -> tuple[str, list[str]]:
        f = evalruns.outputs_frame(demo_engine, run.id, tax)
        r = f[f["case_id"] == case].iloc[0]
        # the cache key of this frame moves with every label and adjudication
        stamps.append(evalruns.outputs_stamp(demo_engine, run.id))
        assert stamps[-1] != stamps[-2]
        return str(r["gold"]), list(r["gold_reasons"])

    assert evalruns.outputs_stamp(demo_engine, run.id) == stamps[0]  # nothing changed

    a = make_actor("annotator", "a@example.org", clearance=True)
    b = make_actor("annotator", "b@example.org", clearance=True)
    esc = labeling.LabelIn("escalate", ("restricted_topic",))
    first = labeling.submit(demo_engine, a, case, esc, None, tax)
    assert gold()[0] == expected  # one label is not an agreement
    labeling.submit(
        demo_engine, b, case, labeling.LabelIn("abstain", ("restricted_topic",)), None, tax
    )
    assert gold()[0] == expected  # two labels that disagree: still the author's
    labeling.submit(demo_engine, b, case, esc, labeling.my_label(demo_engine, b, case).id, tax)  # type: ignore[union-attr]
    assert gold() == ("escalate", ["restricted_topic"])  # agreed
    labeling.submit(demo_engine, a, case, labeling.LabelIn("answer"), first.id, tax)
    assert gold()[0] == expected  # no longer agreed
    reviewer = make_actor("reviewer", "r@example.org")
    labeling.adjudicate(
        demo_engine, reviewer, case, "clarify", ["ambiguous_question"], "asks two things", tax
    )
    assert gold() == ("clarify", ["ambiguous_question"])  # the adjudication wins


def test_scored_outputs_lint_refusals_for_claims(demo_engine: Engine, tax: Taxonomy) -> None:
    lines = [
        '{"case": "CASE-002", "decision": "abstain", "reason_code": "no_answer_bearing_evidence",'
        ' "text": "I cannot confirm this, but refunds are usually approved within 60 days."}',
        '{"case": "CASE-035", "decision": "abstain", "reason_code": "no_answer_bearing_evidence",'
        ' "text": "The documents available to you do not establish this. Could you share the'
        ' contract?"}',
        '{"case": "CASE-001", "decision": "answer", "text": ""}',
    ]
    items = list(evalruns.iter_outputs(lines, "run.jsonl", tax))
    df = evalruns.score_outputs(demo_engine, items, "run.jsonl", tax).set_index("key")
    assert df.loc["CASE-002", "claim_after_refusal"]
    assert not df.loc["CASE-035", "claim_after_refusal"]
    # an answer with no text is an infrastructure failure, never an answer
    assert df.loc["CASE-001", "infra"] and not df.loc["CASE-001", "answered"]


def test_the_outputs_cache_key_moves_with_a_case_edit(demo_engine: Engine, tax: Taxonomy) -> None:
    """An edited case (its expected decision is the gold of an unlabeled case) gives the run
    frame a new cache key, so the Thresholds page reads the frame again."""
    from review.cases import cases

    run = evalruns.list_runs(demo_engine)[0]
    frame = evalruns.outputs_frame(demo_engine, run.id, tax)
    before = evalruns.outputs_stamp(demo_engine, run.id)
    view = cases.get_case(demo_engine, int(frame["case_id"].iloc[0]))
    assert view is not None
    edited = cases.CaseIn.model_validate({**view.record, "notes": view.record["notes"] + " +"})
    write(
        demo_engine,
        cases.update_case,
        make_actor("admin", "x@example.org"),
        view.id,
        view.version,
        edited,
        tax,
    )
    assert evalruns.outputs_stamp(demo_engine, run.id) != before


def test_the_outputs_cache_key_stays_when_only_other_cases_change(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    """The key aggregates the run's cases only: a label on a case without an output in the
    run leaves the key (and the frame) as they were; a label on one of its cases moves it."""
    from sqlalchemy import select

    from review.labels import labeling
    from storage.db import read_session
    from storage.models import Case, EvalOutput

    run = evalruns.list_runs(demo_engine)[0]
    with read_session(demo_engine) as s:
        inside = set(s.scalars(select(EvalOutput.case_id).where(EvalOutput.run_id == run.id)))
        outside = s.scalar(select(Case.id).where(Case.id.not_in(inside)).order_by(Case.id))
    assert outside is not None and inside
    before = evalruns.outputs_stamp(demo_engine, run.id)
    frame = evalruns.outputs_frame(demo_engine, run.id, tax)
    who = make_actor("annotator", "new.annotator@example.org")
    labeling.submit(demo_engine, who, int(outside), labeling.LabelIn("answer"), None, tax)
    assert evalruns.outputs_stamp(demo_engine, run.id) == before
    assert evalruns.outputs_frame(demo_engine, run.id, tax).equals(frame)
    labeling.submit(demo_engine, who, min(inside), labeling.LabelIn("answer"), None, tax)
    assert evalruns.outputs_stamp(demo_engine, run.id) != before
