"""Property tests (Hypothesis) over the paths that re-decide logged outputs or gate a release:
re-decision and the dry run (:mod:`review.thresholds.redecide`, :mod:`review.monthly.
validation`), the trace replay (:mod:`review.thresholds.replay`), the release gate
(:mod:`review.thresholds.release`) and the bundled pipelines (:mod:`review.evaluation.
refpipeline`, which decide from the signals they log). For generated outputs with a signal the
signed policy needs removed, NaN or out of range, none of them answers; a run with an output
missing, or a non-answer without a reason code, never passes the release gate. A run's own
``not_produced`` list never changes that."""

from __future__ import annotations

import math
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from review.cases import splits
from review.core.taxonomy import Taxonomy
from review.evaluation import refpipeline
from review.evaluation.execution import PipelineDocument
from review.monthly import validation
from review.policy.policy import OPTIONAL_SIGNALS, SIGNALS, NoAnswerPolicy, load_policy
from review.thresholds import redecide, release
from review.thresholds.replay import Tally
from storage.db import make_engine
from tests.helpers.paths import ROOT
from tests.helpers.release_runs import correct_output, ready_cases, scored_frame

POLICY = ROOT / "policies" / "no-answer-policy.yaml"
SHIPPED = load_policy(POLICY)
ANSWERING = {"answer", "partial"}
#: a request every version of the policy generated here answers
GOOD: dict[str, Any] = {
    "ranking_mode": "vector",
    "hits_after_filter": 5,
    "top_score": 0.97,
    "answerable": True,
    "ambiguous": False,
    "ungrounded": False,
    "topics": [],
}
#: ways to spoil a signal: removed from the record, logged as null, NaN or out of range
SPOILED: dict[str, list[Any]] = {
    "ranking_mode": [None, "no_such_mode", ""],
    "hits_after_filter": [None, float("nan"), -1, 2.5, float("inf")],
    "top_score": [None, float("nan"), 1.5, -3.0, float("inf"), float("-inf")],
    "answerable": [None, "yes", float("nan")],
    "ambiguous": [None, "no", float("nan")],
    "ungrounded": [None, "false", float("nan")],
    "topics": [None, float("nan")],
}
REMOVED = object()


@st.composite
def policies(draw: st.DrawFn) -> NoAnswerPolicy:
    """The shipped policy with its vector thresholds moved, its non-answer on a missing
    signal and the signals it declares not produced drawn."""
    refuse = draw(st.sampled_from([0.4, 0.55, 0.7, 0.85]))
    caveat = draw(st.sampled_from([None, refuse, min(refuse + 0.05, 0.95)]))
    vector = SHIPPED.ranking_modes["vector"].model_copy(
        update={"refuse_below": refuse, "caveat_below": caveat}
    )
    ms = SHIPPED.missing_signal
    assert ms is not None
    declared = draw(st.lists(st.sampled_from(OPTIONAL_SIGNALS), unique=True, max_size=3))
    ms = ms.model_copy(
        update={
            "decision": draw(st.sampled_from(["abstain", "escalate"])),
            "not_produced": declared,
        }
    )
    topics = draw(st.sampled_from([[], ["legal_dispute"], list(SHIPPED.restricted_topics)]))
    return SHIPPED.model_copy(
        update={
            "ranking_modes": {**SHIPPED.ranking_modes, "vector": vector},
            "missing_signal": ms,
            "restricted_topics": topics,
        }
    )


def needed(policy: NoAnswerPolicy) -> list[str]:
    """The signals the policy needs to let GOOD through to an answer."""
    out = [s for s in SIGNALS if s != "topics" and policy.produces(s)]
    return out + (["topics"] if policy.restricted_topics else [])


@st.composite
def runs(draw: st.DrawFn) -> tuple[NoAnswerPolicy, list[dict[str, Any]], list[bool]]:
    """A policy and a run's logged signals: each output either GOOD or with one signal the
    policy needs spoiled (the affected ones), each with any ``not_produced`` list of its own."""
    policy = draw(policies())
    wanted = needed(policy)
    n = draw(st.integers(1, 12))
    rows: list[dict[str, Any]] = []
    affected: list[bool] = []
    for _ in range(n):
        signals = dict(GOOD)
        hit = draw(st.booleans())
        if hit:
            name = draw(st.sampled_from(wanted))
            value = draw(st.sampled_from([REMOVED, *SPOILED[name]]))
            if value is REMOVED:
                del signals[name]
            else:
                signals[name] = value
        signals["not_produced"] = draw(
            st.lists(st.sampled_from(OPTIONAL_SIGNALS), unique=True, max_size=3)
        )
        rows.append(signals)
        affected.append(hit)
    return policy, rows, affected


def _outputs(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "key": [f"CASE-{i:03d}" for i in range(len(rows))],
            "decision": ["answer"] * len(rows),
            "infra": [False] * len(rows),
            "signals": rows,
        }
    )


@settings(max_examples=100, deadline=None)
@given(run=runs())
def test_re_decision_and_the_dry_run_never_answer_an_affected_output(
    run: tuple[NoAnswerPolicy, list[dict[str, Any]], list[bool]],
) -> None:
    policy, rows, affected = run
    frame = _outputs(rows)
    again = redecide.redecide(policy, frame)
    hit = pd.Series(affected, index=frame.index)
    assert not again.loc[hit, "decision"].isin(ANSWERING).any()
    assert (again.loc[hit, "rule"] == "signal_missing").all()
    assert (again.loc[~hit, "decision"] == "answer").all()  # the good ones still answer
    assert sum(redecide.lacking(frame, again).values()) == sum(affected)
    # the dry run decides the same way
    dry = validation.redecided(policy, frame)
    assert not dry.loc[hit, "decision"].isin(ANSWERING).any()
    # the release gate's reproduction row: a run that answered them is not reproduced
    row = redecide.reproduction_row(policy, frame)
    assert row is not None
    k, n, why = row
    assert (k == n) is (not any(affected))
    if any(affected):
        assert "lacked" in why


def _trace_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    table = pd.DataFrame({name: [r.get(name) for r in rows] for name in SIGNALS})
    for name in ("hits_after_filter", "top_score"):
        table[name] = pd.to_numeric(table[name], errors="coerce").astype(float)
    for name in ("answerable", "ambiguous", "ungrounded"):
        # a trace column holds true, false or nothing
        table[name] = pd.Series(
            [v if isinstance(v, bool) else None for v in table[name]], dtype=object
        )
    return table


@settings(max_examples=100, deadline=None)
@given(run=runs(), other=policies())
def test_the_replay_counts_affected_traces_as_not_replayable_never_as_answers(
    run: tuple[NoAnswerPolicy, list[dict[str, Any]], list[bool]], other: NoAnswerPolicy
) -> None:
    policy, rows, affected = run
    # the proposal needs at least what the policy in force needs
    proposed = other.model_copy(
        update={
            "missing_signal": policy.missing_signal,
            "restricted_topics": policy.restricted_topics,
        }
    )
    tally = Tally(policy, proposed)
    flipped = tally.add(_trace_table(rows))
    assert tally.not_replayable == sum(affected)
    assert sum(tally.missing_signals.values()) == sum(affected)
    # only traces the gate could decide under both policies can flip
    assert len(flipped) <= len(rows) - sum(affected)


@pytest.fixture(scope="module")
def correct_run(
    tmp_path_factory: pytest.TempPathFactory, demo_template: Path, tax: Taxonomy
) -> Iterator[tuple[pd.DataFrame, pd.DataFrame]]:
    """A correct run over every ready case of the demo, scored, and the test cases in scope
    (read from a copy of the demo database made once for this module)."""
    path = tmp_path_factory.mktemp("props") / "demo.db"
    shutil.copy(demo_template, path)
    engine: Engine = make_engine(f"sqlite:///{path}")
    try:
        frame = scored_frame(engine, tax, [correct_output(c) for c in ready_cases(engine)])
        yield frame, splits.cases_in_scope(engine, "test")
    finally:
        engine.dispose()


def test_the_correct_run_passes_the_gate(correct_run: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    frame, scope = correct_run
    assert release.release_gate(SHIPPED, frame, in_scope=scope).passed


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_a_run_with_a_missing_output_or_reason_or_signal_never_passes(
    correct_run: tuple[pd.DataFrame, pd.DataFrame], data: st.DataObject
) -> None:
    frame, scope = correct_run
    test = frame[frame["split"] == "test"]
    keys = sorted(test["key"])
    spoil = data.draw(st.sets(st.sampled_from(["output", "reason", "signal"]), min_size=1))
    run = frame.copy()
    if "output" in spoil:
        gone = data.draw(st.sets(st.sampled_from(keys), min_size=1, max_size=6))
        run = run[~run["key"].isin(gone)]
    if "reason" in spoil:
        refusals = sorted(run.loc[(run["split"] == "test") & ~run["answered"], "key"])
        if refusals:
            blank = data.draw(st.sets(st.sampled_from(refusals), min_size=1, max_size=3))
            value = data.draw(st.sampled_from([None, float("nan"), "", "  "]))
            run.loc[run["key"].isin(blank), "reason_code"] = value
        else:
            spoil = spoil | {"output"}
    if "signal" in spoil:
        answered = sorted(run.loc[(run["split"] == "test") & run["answered"], "key"])
        if answered:
            key = data.draw(st.sampled_from(answered))
            name = data.draw(st.sampled_from(needed(SHIPPED)))
            signals = dict(GOOD)
            signals[name] = data.draw(st.sampled_from(SPOILED[name]))
            signals["not_produced"] = list(OPTIONAL_SIGNALS)  # ignored: the policy decides
            run["signals"] = [signals if k == key else None for k in run["key"]]
    if len(run[run["split"] == "test"]) == 0:
        return  # nothing left to gate: the CLI refuses the run outright
    report = release.release_gate(SHIPPED, run, in_scope=scope)
    assert not report.passed
    failed = {r.row for r in report.failed}
    if "output" in spoil and len(run) < len(frame):
        assert "Every case in scope has an output" in failed
    if "signal" in spoil:
        assert "Decisions reproduce under this policy" in failed


def _documents(texts: list[str]) -> list[PipelineDocument]:
    return [
        PipelineDocument(
            doc_id=f"DOC-{i}",
            version=1,
            title=f"Document {i}",
            body=text,
            effective_date=None,
            authority="policy",
            jurisdiction="EU",
            access_scope="public",
        )
        for i, text in enumerate(texts)
    ]


@settings(max_examples=100, deadline=None)
@given(
    policy=policies(),
    question=st.sampled_from(
        [
            "How many days do I have to ask for a refund on a monthly plan?",
            "Can I sue Brightwave over a billing dispute?",
            "What is the price of the Starter plan?",
        ]
    ),
    texts=st.lists(
        st.sampled_from(
            [
                "Refunds on a monthly plan can be asked for within 14 days.",
                "The Starter plan costs 12 USD per month.",
                "Our offices are closed on public holidays.",
                "How many days do I have to ask for a refund?",
            ]
        ),
        max_size=3,
    ),
)
def test_the_bundled_pipelines_log_signals_the_signed_policy_decides(
    policy: NoAnswerPolicy, question: str, texts: list[str]
) -> None:
    """The bundled pipelines log what they decided on; re-deciding their outputs with the
    signed policy answers none that lack a signal the policy needs (they log no answerable
    or ambiguous flag, whatever their own not_produced list says)."""
    docs = _documents(texts)
    for pipeline in (refpipeline.reference, refpipeline.naive):
        out = pipeline.configure(policy, lambda k, v: k)(question, docs, {})
        signals = out["signals"]
        frame = _outputs([signals]).assign(decision=[out["decision"]])
        again = redecide.redecide(policy, frame)
        lacks = [
            s
            for s in needed(policy)
            if signals.get(s) is None
            or (isinstance(signals.get(s), float) and math.isnan(signals[s]))
        ]
        if lacks:
            assert again.loc[0, "decision"] not in ANSWERING, (signals, again.loc[0].to_dict())
