"""Evaluation runs: the outputs format, import, pipeline execution and infrastructure failures."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import pytest
from sqlalchemy import Engine

from review import evalruns, refpipeline
from review.errors import InputError, PermissionDenied
from review.identity import Actor
from review.taxonomy import Taxonomy
from tests.conftest import make_actor


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

    run_id = evalruns.execute(
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
    run_id = evalruns.execute(
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
    naive_id = evalruns.execute(
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
