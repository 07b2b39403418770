"""A replay of a proposal on production traces counts exactly the flips the single-request gate
gives trace by trace: the batched, vectorised replay (topics decoded once per distinct value,
flips compared without building words for every trace) against a plain loop over ``decide``."""

from __future__ import annotations

import random

from sqlalchemy import Engine

from review.policy import inforce
from review.policy.gate import decide
from review.policy.policy import (
    SIGNAL_MISSING,
    NoAnswerPolicy,
    default_policy_path,
    parse_policy,
    replace_thresholds,
)
from review.thresholds import replay
from storage.models import Trace
from tests.helpers.actors import make_actor
from tests.helpers.signals import trace_signals
from tests.helpers.traces import import_traces, make_trace


def _reference(
    engine: Engine, current: NoAnswerPolicy, proposed: NoAnswerPolicy
) -> tuple[dict[tuple[str, str, str], int], int, dict[str, int]]:
    """Trace by trace: flips by (before, after, slice), not replayable, first missing signal."""
    rows = trace_signals(engine, Trace.customer_tier)
    flips: dict[tuple[str, str, str], int] = {}
    lacking = 0
    missing: dict[str, int] = {}
    for signals, (tier,) in rows:
        b, a = decide(current, signals), decide(proposed, signals)
        if SIGNAL_MISSING in (b.rule, a.rule):
            lacking += 1
            first = (b if b.rule == SIGNAL_MISSING else a).missing[0]
            missing[first] = missing.get(first, 0) + 1
            continue
        bw = b.decision + (" (caveat)" if b.caveat else "")
        aw = a.decision + (" (caveat)" if a.caveat else "")
        if bw != aw:
            key = (bw, aw, tier or "(none)")
            flips[key] = flips.get(key, 0) + 1
    return flips, lacking, missing


def _counted(r: replay.Replay) -> dict[tuple[str, str, str], int]:
    return {
        (str(row.before), str(row.after), str(row.slice)): int(row.traces)
        for row in r.flips.itertuples()
    }


def test_the_demo_replay_counts_the_flips_of_the_gate_trace_by_trace(
    trace_demo_engine: Engine,
) -> None:
    pif = inforce.in_force(trace_demo_engine)
    vector = pif.policy.thresholds_for("vector")
    proposed = parse_policy(
        replace_thresholds(
            pif.text,
            "vector",
            refuse_below=round((vector.refuse_below or 0.5) + 0.05, 3),
            caveat_below=round((vector.caveat_below or 0.6) + 0.05, 3),
        ),
        "proposal",
    )
    got = replay.replay_traces(
        trace_demo_engine, make_actor("reviewer", clearance=True), pif.policy, proposed
    )
    flips, lacking, missing = _reference(trace_demo_engine, pif.policy, proposed)
    assert sum(flips.values()) > 100  # the change flips many demo traces, by several slices
    assert _counted(got) == flips
    assert (got.not_replayable, got.missing_signals) == (lacking, missing)


def test_random_traces_on_both_databases_give_the_flips_of_the_gate(any_engine: Engine) -> None:
    rng = random.Random(18)
    topics_choices: list[tuple[str, ...] | None] = [
        None,
        (),
        ("billing",),
        ("legal_dispute",),
        ("billing", "security_incident"),
        ("refunds", "payroll_data"),
    ]
    items = []
    for i in range(400):
        mode = rng.choice(["vector", "bm25", "hybrid", "semantic_reranker", None, "unknown"])
        items.append(
            make_trace(
                f"r{i}",
                ranking_mode=mode,
                hits_after_filter=rng.choice([0, 1, 3, 8, None]),
                top_score=rng.choice([None, round(rng.random(), 3), 0.5, 0.55, 0.6, 0.65]),
                answerable=rng.choice([True, False, None]),
                ambiguous=rng.choice([True, False, None]),
                ungrounded=rng.choice([True, False, None]),
                topics=rng.choice(topics_choices),
                attributes={"customer_tier": rng.choice(["gold", "silver", "free"])}
                if rng.random() < 0.8
                else {},
            )
        )
    import_traces(any_engine, items)
    text = default_policy_path().read_text(encoding="utf-8")
    current = parse_policy(text, "in force")
    proposed = parse_policy(replace_thresholds(text, "vector", refuse_below=0.6), "proposal")
    got = replay.replay_traces(
        any_engine, make_actor("reviewer", clearance=True), current, proposed, batch=97
    )
    flips, lacking, missing = _reference(any_engine, current, proposed)
    assert got.traces == 400 and lacking > 0 and sum(flips.values()) > 0
    assert _counted(got) == flips
    assert (got.not_replayable, got.missing_signals) == (lacking, missing)
