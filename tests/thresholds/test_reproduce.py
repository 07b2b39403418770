"""Replaying the policy in force on the demo traces reproduces every logged decision whose
signals were logged; traces that cannot be replayed are counted by what they lack."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, select, update

from review.policy import inforce
from review.policy.gate import decide
from review.policy.policy import NoAnswerPolicy, parse_policy, replace_thresholds
from review.thresholds import replay
from storage.db import write_session
from storage.models import Trace
from tests.helpers.actors import make_actor
from tests.helpers.signals import trace_signals


def _reference(engine: Engine, policy: NoAnswerPolicy) -> tuple[int, dict[str, int], int]:
    """Trace by trace with the single-request gate: (reproduced, lacking, differing)."""
    rows = trace_signals(engine, Trace.decision, Trace.reason_code)
    reproduced = differing = 0
    lacking: dict[str, int] = {}
    for signals, (decision, reason_code) in rows:
        g = decide(policy, signals)
        if g.rule == "signal_missing":
            lacking[g.missing[0]] = lacking.get(g.missing[0], 0) + 1
            continue
        if decision is None:
            lacking["decision"] = lacking.get("decision", 0) + 1
            continue
        if decision == "partial" and g.decision == "answer":
            lacking["claim_coverage"] = lacking.get("claim_coverage", 0) + 1
            continue
        logged = decision
        if logged == "answer" and reason_code == "support_below_threshold":
            logged = "answer (caveat)"
        replayed = g.decision + (" (caveat)" if g.caveat else "")
        if logged == replayed:
            reproduced += 1
        else:
            differing += 1
    return reproduced, lacking, differing


def test_the_policy_in_force_reproduces_every_replayable_demo_decision(
    demo_engine: Engine,
) -> None:
    pif = inforce.in_force(demo_engine)
    r = replay.reproduce_logged(demo_engine, make_actor("reviewer", clearance=True), pif.policy)
    assert r.differing.empty and r.differing_traces == 0
    reproduced, lacking, differing = _reference(demo_engine, pif.policy)
    assert differing == 0
    assert r.reproduced == reproduced > 0
    assert r.missing_signals == lacking
    assert r.reproduced + r.not_replayable == r.traces
    # the demo's partial answers passed the gate; what cut them down is not in the trace
    assert lacking["claim_coverage"] > 0 and lacking["topics"] == 2
    text = replay.reproduction_text(r, "The policy in force")
    assert "none differs" in text and f"{r.not_replayable:,} of {r.traces:,}" in text
    assert "partial answers whose claim coverage is not logged" in text


def test_a_decision_the_policy_would_not_make_is_counted_with_its_policy_version(
    demo_engine: Engine,
) -> None:
    with write_session(demo_engine) as s:
        answered = s.scalars(
            select(Trace.id)
            .where(Trace.decision == "answer", Trace.reason_code.is_(None))
            .order_by(Trace.id)
            .limit(3)
        ).all()
        s.execute(update(Trace).where(Trace.id.in_(answered[:2])).values(decision="abstain"))
        s.execute(update(Trace).where(Trace.id == answered[2]).values(decision=None))
        s.execute(update(Trace).where(Trace.id == answered[0]).values(restricted=True))
    pif = inforce.in_force(demo_engine)
    cleared = replay.reproduce_logged(
        demo_engine, make_actor("reviewer", clearance=True), pif.policy
    )
    assert cleared.differing_traces == 2
    assert set(cleared.differing["logged"]) == {"abstain"}
    assert set(cleared.differing["replayed"]) == {"answer"}
    assert set(cleared.differing["policy"]) <= {"no-answer-policy@2", "no-answer-policy@3"}
    assert cleared.missing_signals["decision"] == 1
    assert len(cleared.examples) == 2
    assert "2 differ" in replay.reproduction_text(cleared, "x")
    # restricted traces are counted for everyone, listed only with clearance
    plain = replay.reproduce_logged(demo_engine, make_actor("reviewer"), pif.policy)
    assert plain.differing.equals(cleared.differing) and len(plain.examples) == 1
    with pytest.raises(Exception, match="traces"):
        replay.reproduce_logged(demo_engine, make_actor("annotator"), pif.policy)


def test_another_policy_differs_where_its_thresholds_do(demo_engine: Engine) -> None:
    pif = inforce.in_force(demo_engine)
    stricter = parse_policy(
        replace_thresholds(pif.text, "vector", refuse_below=0.7, caveat_below=0.75), "p"
    )
    r = replay.reproduce_logged(demo_engine, make_actor("reviewer", clearance=True), stricter)
    reproduced, _, differing = _reference(demo_engine, stricter)
    assert r.differing_traces == differing > 0 and r.reproduced == reproduced
    assert set(r.differing["replayed"]) <= {"abstain", "answer (caveat)"}


def test_imported_traces_on_both_databases(any_engine: Engine) -> None:
    from review.policy.policy import load_policy
    from tests.helpers.traces import import_traces, make_trace

    policy = load_policy()
    reviewer = make_actor("reviewer", clearance=True)
    empty = replay.reproduce_logged(any_engine, reviewer, policy)
    assert (empty.traces, empty.not_replayable) == (0, 0)
    assert replay.reproduction_text(empty, "x") == (
        "No traces are stored: there is nothing to replay."
    )
    signals: dict[str, Any] = {
        "ranking_mode": "vector",
        "hits_after_filter": 3,
        "answerable": True,
        "ambiguous": False,
        "ungrounded": False,
    }
    import_traces(
        any_engine,
        [
            make_trace("ok", top_score=0.9, topics=("refunds",), **signals),
            make_trace(
                "cav", top_score=0.6, topics=(), reason="support_below_threshold", **signals
            ),
            make_trace(
                "esc", decision="escalate", top_score=0.9, topics=("legal_dispute",), **signals
            ),
            make_trace("wrong", decision="clarify", top_score=0.9, topics=(), **signals),
            make_trace("untold", top_score=0.9, **signals),  # topics not classified
        ],
    )
    r = replay.reproduce_logged(any_engine, reviewer, policy)
    assert (r.traces, r.reproduced, r.differing_traces) == (5, 3, 1)
    assert r.missing_signals == {"topics": 1}
    assert r.differing.to_dict(orient="records") == [
        {"logged": "clarify", "replayed": "answer", "policy": "(none)", "traces": 1}
    ]
    assert list(r.examples["trace_id"]) == ["wrong"]
