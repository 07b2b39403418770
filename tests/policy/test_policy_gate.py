"""No-answer policy file and decision gate: what a policy owner and a reviewer would notice.

The shipped policy loads with the demo thresholds; malformed policies are refused naming the
file, the key and the problem; the hash ignores layout but not values; proposals keep the file's
comments; the gate applies its checks in order (first match wins) honouring direction and
inequality; the vectorised replay agrees with the one-request gate on random data.
"""

from __future__ import annotations

import copy
import datetime as dt
import difflib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from review.core.errors import InputError, PolicyFileError
from review.policy.gate import (
    GateResult,
    Signals,
    confidence,
    confidence_threshold,
    decide,
    decide_frame,
    policy_threshold,
)
from review.policy.policy import (
    GATE_RULES,
    KEEP,
    NoAnswerPolicy,
    canonical_text,
    load_policy,
    parse_policy,
    policy_sha256,
    record_change,
    replace_thresholds,
)
from tests.helpers.paths import ROOT

POLICY_PATH = ROOT / "policies" / "no-answer-policy.yaml"
TEXT = POLICY_PATH.read_text(encoding="utf-8")
SLICES = {
    "empty_retrieval",
    "near_neighbour_distractor",
    "temporal_mismatch",
    "entity_collision",
    "compound_insufficiency",
    "access_filtered_answer",
    "adversarial_instruction",
}


def demo_data() -> dict[str, Any]:
    data = yaml.safe_load(TEXT)
    assert isinstance(data, dict)
    return data


def from_data(data: dict[str, Any], source: str = "test-policy.yaml") -> NoAnswerPolicy:
    return parse_policy(yaml.safe_dump(data, sort_keys=False), source, SLICES)


@pytest.fixture(scope="module")
def policy() -> NoAnswerPolicy:
    return load_policy(POLICY_PATH)


# The shipped policy ------------------------------------------------------------------------------


def test_shipped_policy_has_the_demo_thresholds(policy: NoAnswerPolicy) -> None:
    modes = policy.ranking_modes
    assert set(modes) == {"bm25", "vector", "semantic_reranker", "hybrid"}
    assert (modes["vector"].refuse_below, modes["vector"].caveat_below) == (0.55, 0.65)
    assert (modes["semantic_reranker"].refuse_below, modes["semantic_reranker"].caveat_below) == (
        1.2,
        2.0,
    )
    assert (modes["bm25"].refuse_below, modes["bm25"].caveat_below) == (8.0, 12.0)
    assert modes["hybrid"].threshold_on == "semantic_reranker"
    assert modes["hybrid"].refuse_below is None and modes["hybrid"].caveat_below is None
    hybrid = policy.thresholds_for("hybrid")
    assert (hybrid.refuse_below, hybrid.caveat_below, hybrid.scored_mode) == (
        1.2,
        2.0,
        "semantic_reranker",
    )
    assert tuple(policy.gate_order) == GATE_RULES
    assert policy.costs.unsupported_answer > policy.costs.false_refusal > 0
    assert policy.change_record[-1].version == policy.version
    for mode in modes.values():
        assert len(mode.scale) > 40  # every mode documents its score scale


def test_unknown_mode_is_an_input_error(policy: NoAnswerPolicy) -> None:
    with pytest.raises(InputError, match="'splade' is not defined"):
        policy.thresholds_for("splade")


# Malformed policies ------------------------------------------------------------------------------


def _set(path: str, value: Any) -> Any:
    def mutate(d: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = d
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return mutate


def _drop(path: str) -> Any:
    def mutate(d: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = d
        for p in parents:
            node = node[p]
        del node[last]

    return mutate


BAD_POLICIES = [
    pytest.param(
        _set("ranking_modes.hybrid.refuse_below", 0.02),
        ["ranking_modes.hybrid.refuse_below", "volatile", "threshold_on"],
        id="hybrid-raw-threshold",
    ),
    pytest.param(
        _set("ranking_modes.hybrid.caveat_below", 0.03),
        ["ranking_modes.hybrid.caveat_below", "rank-based"],
        id="hybrid-raw-caveat",
    ),
    pytest.param(
        _set("ranking_modes.vector.caveat_below", 0.5),
        ["ranking_modes.vector.caveat_below", "at or above refuse_below (0.55)"],
        id="caveat-below-refuse",
    ),
    pytest.param(
        _set("ranking_modes.vector.score_direction", "lower_is_better"),
        ["ranking_modes.vector.caveat_below", "at or below refuse_below"],
        id="caveat-wrong-side-for-distances",
    ),
    pytest.param(
        _drop("ranking_modes.bm25.score_direction"),
        ["ranking_modes.bm25.score_direction", "required when a threshold is set"],
        id="direction-missing",
    ),
    pytest.param(
        _set("ranking_modes.vector.threshold_on", "semantic_reranker"),
        ["ranking_modes.vector.threshold_on", "only the hybrid mode"],
        id="threshold-on-outside-hybrid",
    ),
    pytest.param(
        _set("ranking_modes.splade", {"scale": "learned sparse", "min_hits_after_filter": 1}),
        ["ranking_modes.splade", "unknown ranking mode"],
        id="unknown-mode",
    ),
    pytest.param(
        _set("ranking_modes.vector.inequality", "loose"),
        ["ranking_modes.vector.inequality", "strict", "inclusive"],
        id="bad-inequality",
    ),
    pytest.param(
        _set("ranking_modes.vector.refuse_below", True),
        ["ranking_modes.vector.refuse_below", "valid number"],
        id="bool-threshold",
    ),
    pytest.param(
        _set("ranking_modes.vector.refuse_below", float("nan")),
        ["ranking_modes.vector.refuse_below", "finite"],
        id="nan-threshold",
    ),
    pytest.param(
        _set("ranking_modes.vector.min_hits_after_filter", -1),
        ["ranking_modes.vector.min_hits_after_filter", "greater than or equal to 0"],
        id="negative-min-hits",
    ),
    pytest.param(
        _set("ranking_modes.vector.colour", "blue"),
        ["ranking_modes.vector.colour", "unknown key"],
        id="unknown-key",
    ),
    pytest.param(
        _set("gate_order", [r for r in GATE_RULES if r != "ungrounded"]),
        ["gate_order", "missing rule ungrounded"],
        id="gate-rule-missing",
    ),
    pytest.param(
        _set("gate_order", [*GATE_RULES[:-1], "ambiguous", "answer"]),
        ["gate_order", "listed twice: ambiguous"],
        id="gate-rule-twice",
    ),
    pytest.param(
        _set("gate_order", ["no_hits", "restricted_topic", *GATE_RULES[2:]]),
        ["gate_order", "restricted_topic must come first"],
        id="restricted-not-first",
    ),
    pytest.param(
        _set("gate_order", [*GATE_RULES[:-2], "answer", "low_score_caveat"]),
        ["gate_order", "answer must come last"],
        id="answer-not-last",
    ),
    pytest.param(
        _set(
            "gate_order",
            [
                "restricted_topic",
                "no_hits",
                "low_score_refuse",
                "low_score_caveat",
                "not_answerable",
                "ambiguous",
                "ungrounded",
                "answer",
            ],
        ),
        ["gate_order", "low_score_caveat must come after", "not_answerable, ambiguous, ungrounded"],
        id="caveat-before-blocking-rules",
    ),
    pytest.param(
        _set("targets.min_abstention_recall", 0.0),
        ["targets.min_abstention_recall", "answering everything would pass"],
        id="answer-all-would-pass",
    ),
    pytest.param(
        _set("targets.min_answer_rate_answerable", 0.0),
        ["targets.min_answer_rate_answerable", "refusing everything would pass"],
        id="refuse-all-would-pass",
    ),
    pytest.param(
        _set("targets.max_false_refusal_rate", 1.0),
        ["targets.max_false_refusal_rate", "refusing everything would pass"],
        id="false-refusals-unbounded",
    ),
    pytest.param(
        _set("targets.max_unsupported_answer_rate", 1.5),
        ["targets.max_unsupported_answer_rate", "less than or equal to 1"],
        id="rate-above-one",
    ),
    pytest.param(
        _drop("targets.min_abstention_recall"),
        ["targets.min_abstention_recall", "required key is missing"],
        id="one-side-unconstrained",
    ),
    pytest.param(
        _set("targets.slice_gates.moon_phase", {"min_abstention_recall": 0.9}),
        ["targets.slice_gates.moon_phase", "not a slice in the taxonomy"],
        id="unknown-slice",
    ),
    pytest.param(
        _set("targets.slice_gates.temporal_mismatch", {"min_vibes": 0.9}),
        ["targets.slice_gates.temporal_mismatch.min_vibes", "unknown metric"],
        id="unknown-metric",
    ),
    pytest.param(
        _set("costs.unsupported_answer", 0),
        ["costs.unsupported_answer", "greater than 0"],
        id="free-unsupported-answers",
    ),
    pytest.param(
        _set("change_record.0.date", "2025-13-45"),
        ["change_record.0.date", "month"],
        id="impossible-date",
    ),
    pytest.param(
        _set("change_record.0.date", 20250303),
        ["change_record.0.date", "YYYY-MM-DD"],
        id="number-as-date",
    ),
    pytest.param(
        _set("version", 5),
        ["change_record", "last entry must describe version 5"],
        id="version-without-record",
    ),
    pytest.param(
        _set("approved_on", "2025-01-01"),
        ["approved_on", "before the change it approves"],
        id="approved-before-change",
    ),
    pytest.param(
        _set("restricted_topics", ["legal dispute"]),
        ["restricted_topics.0", "not a topic key"],
        id="bad-topic-key",
    ),
]


@pytest.mark.parametrize(("mutate", "expected"), BAD_POLICIES)
def test_malformed_policy_is_refused_naming_key_and_problem(
    mutate: Any, expected: list[str]
) -> None:
    data = demo_data()
    mutate(data)
    with pytest.raises(PolicyFileError) as info:
        from_data(data, "bad-policy.yaml")
    msg = str(info.value)
    assert msg.startswith("bad-policy.yaml: ")
    for part in expected:
        assert part in msg, msg


def test_every_problem_is_reported_at_once() -> None:
    data = demo_data()
    data["ranking_modes"]["hybrid"]["refuse_below"] = 0.02
    data["targets"]["min_abstention_recall"] = 0.0
    with pytest.raises(PolicyFileError) as info:
        from_data(data, "p.yaml")
    lines = str(info.value).splitlines()
    assert len(lines) == 2 and all(line.startswith("p.yaml: ") for line in lines)


def test_distance_scores_may_caveat_below_refuse() -> None:
    data = demo_data()
    vec = data["ranking_modes"]["vector"]
    vec.update(score_direction="lower_is_better", refuse_below=0.45, caveat_below=0.35)
    policy = from_data(data)
    assert policy.thresholds_for("vector").higher_is_better is False


def test_duplicate_key_and_bad_yaml_name_the_line(tmp_path: Path) -> None:
    dup = TEXT.replace(
        "    refuse_below: 0.55\n", "    refuse_below: 0.55\n    refuse_below: 0.5\n"
    )
    with pytest.raises(PolicyFileError, match=r"p\.yaml: line \d+.*duplicate key 'refuse_below'"):
        parse_policy(dup, "p.yaml", SLICES)
    with pytest.raises(PolicyFileError, match=r"p\.yaml: line \d+"):
        parse_policy("version: [1\n", "p.yaml", SLICES)
    with pytest.raises(PolicyFileError, match=r"p\.yaml: \(top level\)"):
        parse_policy("- just\n- a list\n", "p.yaml", SLICES)
    missing = tmp_path / "absent.yaml"
    with pytest.raises(PolicyFileError, match=r"absent\.yaml: cannot be read"):
        load_policy(missing)


# Hash and proposals ------------------------------------------------------------------------------


def test_hash_ignores_layout_and_comments_but_not_values() -> None:
    relaid = yaml.safe_dump(demo_data(), sort_keys=True, default_flow_style=True, width=10_000)
    relaid = "# reformatted\n" + relaid.replace("refuse_below: 8.0", "refuse_below: 8")
    assert relaid != TEXT
    assert policy_sha256(relaid) == policy_sha256(TEXT)
    assert canonical_text(relaid) == canonical_text(TEXT)
    changed = TEXT.replace("caveat_below: 0.65", "caveat_below: 0.66")
    assert policy_sha256(changed) != policy_sha256(TEXT)
    assert len(policy_sha256(TEXT)) == 64
    with pytest.raises(PolicyFileError):
        policy_sha256(TEXT.replace("caveat_below: 0.65", "caveat_below: 0.5"))


def _changed_lines(before: str, after: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def test_replace_thresholds_changes_only_those_values_and_keeps_comments() -> None:
    new = replace_thresholds(TEXT, "vector", refuse_below=0.5, caveat_below=0.6)
    assert _changed_lines(TEXT, new) == [
        "-    refuse_below: 0.55",
        "-    caveat_below: 0.65",
        "+    refuse_below: 0.5",
        "+    caveat_below: 0.6",
    ]
    policy = parse_policy(new, "p", SLICES)
    assert policy.thresholds_for("vector").refuse_below == 0.5
    assert policy.thresholds_for("semantic_reranker").refuse_below == 1.2
    assert policy_sha256(new) != policy_sha256(TEXT)


def test_replace_thresholds_keep_clear_and_insert() -> None:
    kept = replace_thresholds(TEXT, "semantic_reranker", caveat_below=2.5)
    p = parse_policy(kept, "p", SLICES).thresholds_for("hybrid")  # hybrid follows the reranker
    assert (p.refuse_below, p.caveat_below) == (1.2, 2.5)
    cleared = replace_thresholds(TEXT, "bm25", caveat_below=None)
    assert parse_policy(cleared, "p", SLICES).ranking_modes["bm25"].caveat_below is None
    assert "# No-answer policy" in cleared
    # a key that is absent from the file is inserted into the mode's block
    inserted = replace_thresholds(
        cleared.replace("    caveat_below: null\n", ""), "bm25", caveat_below=13.0
    )
    assert parse_policy(inserted, "p", SLICES).ranking_modes["bm25"].caveat_below == 13.0
    assert "# No-answer policy" in inserted
    unchanged = replace_thresholds(TEXT, "vector", refuse_below=KEEP)
    assert unchanged == TEXT


def test_replace_thresholds_rewrites_flow_style_files_validly() -> None:
    flow = yaml.safe_dump(demo_data(), default_flow_style=True, width=10_000)
    new = replace_thresholds(flow, "vector", refuse_below=0.6, caveat_below=0.7)
    p = parse_policy(new, "p", SLICES).ranking_modes["vector"]
    assert (p.refuse_below, p.caveat_below) == (0.6, 0.7)


def test_replace_thresholds_refuses_invalid_proposals() -> None:
    with pytest.raises(PolicyFileError, match=r"ranking_modes\.vector\.caveat_below"):
        replace_thresholds(TEXT, "vector", caveat_below=0.4)
    with pytest.raises(InputError, match=r"hybrid.*semantic_reranker"):
        replace_thresholds(TEXT, "hybrid", refuse_below=0.02)
    with pytest.raises(InputError, match="'dense' is not defined"):
        replace_thresholds(TEXT, "dense", refuse_below=0.5)


def test_record_change_bumps_version_appends_record_and_clears_approval() -> None:
    approved = TEXT.replace("approved_on: null", "approved_on: 2025-06-20")
    assert parse_policy(approved, "p", SLICES).approved_on == dt.date(2025, 6, 20)
    new = record_change(
        approved,
        author="ines.okafor@brightwave.example",
        summary="Vector refuse threshold lowered after the July review.",
        on=dt.date(2025, 7, 8),
    )
    policy = parse_policy(new, "p", SLICES)
    assert policy.version == 5 and policy.approved_on is None
    assert policy.change_record[-1].version == 5
    assert policy.change_record[-1].date == dt.date(2025, 7, 8)
    assert policy.change_record[-1].author == "ines.okafor@brightwave.example"
    assert len(_changed_lines(approved, new)) == 8  # version, approved_on, 4 new lines
    assert "# Release gates" in new


# The gate ----------------------------------------------------------------------------------------


def S(
    mode: str | None,
    hits: int | float | None,
    score: float | None = None,
    answerable: bool | None = None,
    ambiguous: bool | None = False,
    ungrounded: bool | None = False,
    topics: tuple[str, ...] | None = (),
) -> Signals:
    """Signals with the flags and topics logged unless a test says otherwise."""
    return Signals(mode, hits, score, answerable, ambiguous, ungrounded, topics)  # type: ignore[arg-type]


GATE_CASES = [
    # restricted topic beats every other signal
    (
        S("vector", 0, 0.1, False, True, True, ("security_incident",)),
        "escalate",
        "restricted_topic",
    ),
    (S("vector", 0, 0.9, True, False, False), "abstain", "no_hits"),
    (S("vector", 3, 0.54, True), "abstain", "low_score_refuse"),
    # a score equal to the refuse threshold is not below it (strict): caveat band instead
    (S("vector", 3, 0.55, True), "answer", "low_score_caveat"),
    (S("vector", 3, 0.6499, True), "answer", "low_score_caveat"),
    (S("vector", 3, 0.65, True), "answer", "answer"),
    (S("vector", 3, 0.9, False), "abstain", "not_answerable"),
    (S("vector", 3, 0.9, True, True), "clarify", "ambiguous"),
    (S("vector", 3, 0.9, True, False, True), "abstain", "ungrounded"),
    (S("vector", 3, 0.9, True, False, False, ("pricing",)), "answer", "answer"),
    # an ungrounded answer is blocked even inside the caveat band
    (S("vector", 3, 0.6, True, False, True), "abstain", "ungrounded"),
    # fail closed: a check whose signal is missing, NaN or out of range does not answer
    (S("vector", 1, None, None, None, None), "abstain", "signal_missing"),
    (S("vector", 1, float("nan"), True), "abstain", "signal_missing"),
    (S("vector", 1, 1.5, True), "abstain", "signal_missing"),  # cosine above 1
    (S("semantic_reranker", 1, 4.2, True), "abstain", "signal_missing"),
    (S("vector", 3, 0.9, None), "abstain", "signal_missing"),
    (S("vector", 3, 0.9, True, None), "abstain", "signal_missing"),
    (S("vector", 3, 0.9, True, False, None), "abstain", "signal_missing"),
    (S("vector", 3, 0.9, True, topics=None), "escalate", "signal_missing"),
    # ... but a check earlier in the order still decides first
    (S("vector", 0, None, None, None, None), "abstain", "no_hits"),
    (S("vector", 3, 0.2, None, None, None), "abstain", "low_score_refuse"),
    # hybrid thresholds on the reranker score
    (S("hybrid", 2, 1.0, True), "abstain", "low_score_refuse"),
    (S("hybrid", 2, 1.5, True), "answer", "low_score_caveat"),
    (S("hybrid", 2, 3.1, True), "answer", "answer"),
    (S("semantic_reranker", 5, 1.19, True), "abstain", "low_score_refuse"),
    (S("bm25", 4, 11.9, True), "answer", "low_score_caveat"),
    (S("bm25", 4, 7.0, True), "abstain", "low_score_refuse"),
]


@pytest.mark.parametrize(("signals", "decision", "rule"), GATE_CASES)
def test_gate_first_matching_rule_decides(
    policy: NoAnswerPolicy, signals: Signals, decision: str, rule: str
) -> None:
    result = decide(policy, signals)
    assert (result.decision, result.rule) == (decision, rule)
    assert result.caveat == (rule == "low_score_caveat")


def test_gate_reports_reason_and_message_key() -> None:
    assert GateResult("abstain", "ungrounded").message_key == "R3"
    assert GateResult("abstain", "not_answerable").message_key == "R2"
    assert GateResult("escalate", "restricted_topic").reason_code == "restricted_topic"
    assert GateResult("answer", "low_score_caveat", True).message_key == "C1"
    assert GateResult("answer", "answer").reason_code is None


def test_inequality_and_direction_decide_ties(policy: NoAnswerPolicy) -> None:
    data = demo_data()
    data["ranking_modes"]["vector"]["inequality"] = "inclusive"
    inclusive = from_data(data)
    assert decide(inclusive, S("vector", 3, 0.55, True)).rule == "low_score_refuse"
    assert decide(inclusive, S("vector", 3, 0.65, True)).rule == "low_score_caveat"
    data["ranking_modes"]["vector"].update(
        score_direction="lower_is_better", inequality="strict", refuse_below=0.5, caveat_below=0.3
    )
    distance = from_data(data)
    assert decide(distance, S("vector", 3, 0.51, True)).rule == "low_score_refuse"
    assert decide(distance, S("vector", 3, 0.5, True)).rule == "low_score_caveat"
    assert decide(distance, S("vector", 3, 0.3, True)).rule == "answer"
    assert decide(distance, S("vector", 3, 0.1, True)).rule == "answer"


def test_gate_order_from_the_file_is_applied() -> None:
    data = demo_data()
    data["gate_order"] = [
        "restricted_topic",
        "ambiguous",
        "no_hits",
        "low_score_refuse",
        "not_answerable",
        "ungrounded",
        "low_score_caveat",
        "answer",
    ]
    reordered = from_data(data)
    signals = S("vector", 0, 0.1, False, True)
    assert decide(reordered, signals).rule == "ambiguous"
    assert decide(from_data(demo_data()), signals).rule == "no_hits"


def test_min_hits_zero_never_refuses_for_hits() -> None:
    data = demo_data()
    data["ranking_modes"]["hybrid"]["min_hits_after_filter"] = 0
    data["ranking_modes"]["hybrid"]["threshold_on"] = None
    p = from_data(data)
    assert decide(p, S("hybrid", 0, None, True)).rule == "answer"
    assert decide(p, S("hybrid", 0, 0.001, True)).rule == "answer"  # fused score ignored


def test_gate_names_the_signals_it_lacked(policy: NoAnswerPolicy) -> None:
    unknown = decide(policy, S("dense", 1, 0.9, True))
    assert (unknown.decision, unknown.rule, unknown.missing) == (
        "abstain",
        "signal_missing",
        ("ranking_mode",),
    )
    assert "'dense' is not a mode the policy defines" in unknown.detail
    negative = decide(policy, S("vector", -1, 0.9, True))
    assert negative.missing == ("hits_after_filter",) and "-1" in negative.detail
    many = decide(policy, S("vector", 3, float("nan"), None, None, None))
    assert many.missing == ("top_score", "answerable", "ambiguous", "ungrounded")
    assert many.detail.startswith("top_score: NaN; answerable: not logged")
    assert many.reason_code == "signal_missing" and many.message_key == "R1"
    unclassified = decide(policy, S("vector", 3, 0.9, True, topics=None))
    assert unclassified.message_key == "E1" and unclassified.missing == ("topics",)


def test_signals_the_policy_says_are_not_produced_do_not_block() -> None:
    data = demo_data()
    data["missing_signal"]["not_produced"] = ["ambiguous", "ungrounded"]
    p = from_data(data)
    assert decide(p, S("vector", 3, 0.9, True, None, None)).rule == "answer"
    # a value that is logged still counts
    assert decide(p, S("vector", 3, 0.9, True, None, True)).rule == "ungrounded"
    assert decide(p, S("vector", 3, 0.9, None, None, None)).rule == "signal_missing"


def test_missing_signal_section_is_validated() -> None:
    for mutate, expected in [
        (lambda d: d["missing_signal"].update(decision="answer"), "missing_signal.decision"),
        (lambda d: d["missing_signal"]["per_signal"].update(mood="abstain"), "unknown signal"),
        (
            lambda d: d["missing_signal"].update(not_produced=["top_score"]),
            "'top_score' cannot be switched off",
        ),
        (
            lambda d: d["missing_signal"].update(not_produced=["ungrounded", "ungrounded"]),
            "listed twice",
        ),
    ]:
        data = demo_data()
        mutate(data)
        with pytest.raises(PolicyFileError, match=expected):
            from_data(data)


def test_a_policy_without_the_section_fails_closed_and_keeps_old_hashes() -> None:
    data = demo_data()
    del data["missing_signal"], data["evidence_gate"]
    old = from_data(data)
    assert decide(old, S("vector", 3, 0.9, True, topics=None)).decision == "abstain"
    assert decide(old, S("vector", 3, 0.9, True, None)).rule == "signal_missing"
    assert "missing_signal" not in canonical_text(yaml.safe_dump(data), "p", SLICES)
    assert "missing_signal" in canonical_text(TEXT, "p", SLICES)


@pytest.mark.parametrize(
    ("mode", "key", "value"),
    [("vector", "refuse_below", 1.2), ("semantic_reranker", "caveat_below", 4.5)],
)
def test_a_threshold_outside_the_modes_range_is_refused(mode: str, key: str, value: float) -> None:
    data = demo_data()
    data["ranking_modes"][mode][key] = value
    if key == "refuse_below":
        data["ranking_modes"][mode]["caveat_below"] = value
    with pytest.raises(PolicyFileError, match=f"{mode}.{key}: .* is outside the range"):
        from_data(data)


# Fail closed, exhaustively: every signal missing or broken, alone and in every combination --------

BROKEN: dict[str, list[Any]] = {
    "topics": [None],
    "ranking_mode": [None, "dense"],
    "hits_after_filter": [None, float("nan"), -1, 1.5],
    "top_score": [None, float("nan"), float("inf"), float("-inf"), 9.0],
    "answerable": [None],
    "ambiguous": [None],
    "ungrounded": [None],
}
ANSWERING = {
    "vector": 0.9,  # answers
    "semantic_reranker": 1.5,  # answers with a caveat
    "bm25": 20.0,
    "hybrid": 3.0,
}


def _broken_rows() -> list[tuple[Signals, tuple[str, ...]]]:
    import itertools

    rows: list[tuple[Signals, tuple[str, ...]]] = []
    names = list(BROKEN)
    for mode, score in ANSWERING.items():
        base = {
            "ranking_mode": mode,
            "hits_after_filter": 3,
            "top_score": score,
            "answerable": True,
            "ambiguous": False,
            "ungrounded": False,
            "topics": (),
        }
        for k in range(1, len(names) + 1):
            for subset in itertools.combinations(names, k):
                variant = k * len(subset) % 4  # walk through each signal's broken values
                values: dict[str, Any] = dict(base)
                for i, name in enumerate(subset):
                    pool = BROKEN[name]
                    values[name] = pool[(variant + i) % len(pool)]
                rows.append((Signals(**values), subset))
    return rows


BROKEN_ROWS = _broken_rows()


def test_a_missing_or_broken_signal_never_answers(policy: NoAnswerPolicy) -> None:
    data = demo_data()
    data["missing_signal"] = {"decision": "escalate", "per_signal": {"top_score": "abstain"}}
    escalating = from_data(data)
    assert len(BROKEN_ROWS) == 4 * (2**7 - 1)
    for p in (policy, escalating):
        for signals, broken in BROKEN_ROWS:
            result = decide(p, signals)
            assert result.decision != "answer", (signals, broken, result)
            if result.rule == "signal_missing":
                assert result.missing and result.missing[0] in broken
                assert result.decision == p.on_missing(result.missing[0])
        frame = _frame([s for s, _ in BROKEN_ROWS])
        out = decide_frame(p, frame)
        assert not (out["decision"] == "answer").any()
        expected = [decide(p, s) for s, _ in BROKEN_ROWS]
        assert out["rule"].tolist() == [r.rule for r in expected]
        assert out["decision"].tolist() == [r.decision for r in expected]
        assert [None if m != m else m for m in out["missing_signal"].tolist()] == [
            r.missing[0] if r.missing else None for r in expected
        ]


def test_every_signal_logged_and_good_answers(policy: NoAnswerPolicy) -> None:
    for mode, score in ANSWERING.items():
        result = decide(policy, S(mode, 3, score, True))
        assert result.decision == "answer" and result.rule in ("answer", "low_score_caveat")


# Vectorised gate ---------------------------------------------------------------------------------

MIDDLE = ("no_hits", "low_score_refuse", "not_answerable", "ambiguous", "ungrounded")
SCORE_POOL = [None, float("nan"), -1.0, 0.3, 0.5, 0.55, 0.6, 0.65, 0.8, 1.2, 1.5, 2.0, 3.0]


@st.composite
def policies(draw: st.DrawFn) -> NoAnswerPolicy:
    data = demo_data()
    for mode in ("bm25", "vector", "semantic_reranker"):
        lower = draw(st.booleans())
        a, b = sorted(
            draw(st.lists(st.sampled_from([0.3, 0.5, 0.55, 0.65, 0.9]), min_size=2, max_size=2))
        )
        refuse, caveat = (b, a) if lower else (a, b)
        data["ranking_modes"][mode] = {
            "scale": "test scale",
            "min_hits_after_filter": draw(st.integers(0, 2)),
            "score_direction": "lower_is_better" if lower else "higher_is_better",
            "inequality": draw(st.sampled_from(["strict", "inclusive"])),
            "refuse_below": draw(st.sampled_from([refuse, None])),
            "caveat_below": draw(st.sampled_from([caveat, None])),
        }
    hybrid_on = draw(st.sampled_from([None, "bm25", "vector", "semantic_reranker"]))
    if hybrid_on and all(
        data["ranking_modes"][hybrid_on][k] is None for k in ("refuse_below", "caveat_below")
    ):
        hybrid_on = None
    data["ranking_modes"]["hybrid"] = {
        "scale": "fused ranks",
        "min_hits_after_filter": draw(st.integers(0, 2)),
        "threshold_on": hybrid_on,
    }
    middle = draw(st.permutations(MIDDLE))
    data["gate_order"] = ["restricted_topic", *middle, "low_score_caveat", "answer"]
    data["missing_signal"] = {
        "decision": draw(st.sampled_from(["abstain", "escalate"])),
        "per_signal": {"topics": draw(st.sampled_from(["abstain", "escalate"]))},
        "not_produced": draw(
            st.lists(st.sampled_from(["answerable", "ambiguous", "ungrounded"]), unique=True)
        ),
    }
    return from_data(data)


signals_strategy = st.builds(
    Signals,
    ranking_mode=st.sampled_from(["bm25", "vector", "semantic_reranker", "hybrid", None, "x"]),
    hits_after_filter=st.sampled_from([0, 1, 2, 3, None, -1]),
    top_score=st.sampled_from(SCORE_POOL),
    answerable=st.sampled_from([None, True, False]),
    ambiguous=st.sampled_from([None, True, False]),
    ungrounded=st.sampled_from([None, True, False]),
    topics=st.none()
    | st.lists(
        st.sampled_from(["legal_dispute", "pricing", " refunds", "security_incident,x"]),
        max_size=2,
    ).map(tuple),
)


def _frame(rows: list[Signals]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ranking_mode": [s.ranking_mode for s in rows],
            "hits_after_filter": pd.array(
                [
                    np.nan if s.hits_after_filter is None else float(s.hits_after_filter)
                    for s in rows
                ],
                dtype="float64",
            ),
            "top_score": [np.nan if s.top_score is None else s.top_score for s in rows],
            "answerable": pd.array([s.answerable for s in rows], dtype="boolean"),
            "ambiguous": [s.ambiguous for s in rows],  # object column with None
            "ungrounded": pd.array([s.ungrounded for s in rows], dtype="boolean"),
            "topics": [None if s.topics is None else list(s.topics) for s in rows],
        },
        index=pd.RangeIndex(100, 100 + len(rows)),
    )


@settings(max_examples=150, deadline=None)
@given(policy=policies(), rows=st.lists(signals_strategy, min_size=1, max_size=60))
def test_decide_frame_matches_decide_row_by_row(
    policy: NoAnswerPolicy, rows: list[Signals]
) -> None:
    frame = _frame(rows)
    out = decide_frame(policy, frame)
    assert list(out.index) == list(frame.index)
    expected = [decide(policy, s) for s in rows]
    assert out["decision"].tolist() == [r.decision for r in expected]
    assert out["rule"].tolist() == [r.rule for r in expected]
    assert out["caveat"].tolist() == [r.caveat for r in expected]
    assert [None if m != m else m for m in out["missing_signal"].tolist()] == [
        r.missing[0] if r.missing else None for r in expected
    ]


def test_topic_keys_are_read_the_same_way_one_by_one(policy: NoAnswerPolicy) -> None:
    assert decide(policy, S("vector", 3, 0.9, True, topics=(" legal_dispute",))).rule == (
        "restricted_topic"
    )
    assert decide(policy, S("vector", 3, 0.9, True, topics=("pricing,legal_dispute",))).rule == (
        "restricted_topic"
    )
    assert decide(policy, S("vector", 3, 0.9, True, topics=("legal",))).rule == "answer"


def test_decide_frame_accepts_text_topics_and_optional_columns(policy: NoAnswerPolicy) -> None:
    frame = pd.DataFrame(
        {
            "ranking_mode": ["vector", "vector", "vector", "hybrid"],
            "hits_after_filter": [2, 2, 0, 1],
            "top_score": [0.9, 0.9, None, 3.0],
            "answerable": [True, True, None, True],
            "ambiguous": [False, False, None, False],
            "ungrounded": [False, False, None, False],
            "topics": ["pricing, legal_dispute", "pricing", None, []],
        }
    )
    out = decide_frame(policy, frame)
    assert out["rule"].tolist() == ["restricted_topic", "answer", "signal_missing", "answer"]
    assert out["decision"].tolist() == ["escalate", "answer", "escalate", "answer"]
    assert out["missing_signal"].tolist()[2] == "topics"


def test_decide_frame_fails_closed_on_absent_columns_and_unknown_modes(
    policy: NoAnswerPolicy,
) -> None:
    out = decide_frame(policy, pd.DataFrame({"ranking_mode": ["vector"]}))
    assert out["rule"].tolist() == ["signal_missing"]
    assert out["missing_signal"].tolist() == ["topics"]
    full = {"top_score": [0.9, 0.9], "answerable": [True, True], "topics": [[], []]}
    full |= {"ambiguous": [False, False], "ungrounded": [False, False]}
    out = decide_frame(
        policy,
        pd.DataFrame({"ranking_mode": ["vector", "dense"], "hits_after_filter": [1, 1], **full}),
    )
    assert out["decision"].tolist() == ["answer", "abstain"]
    assert out["missing_signal"].tolist()[1] == "ranking_mode"
    out = decide_frame(
        policy,
        pd.DataFrame(
            {"ranking_mode": ["vector", "vector"], "hits_after_filter": [None, 2], **full}
        ),
    )
    assert out["missing_signal"].tolist()[0] == "hits_after_filter"


def test_decide_frame_refuses_bad_tables(policy: NoAnswerPolicy) -> None:
    with pytest.raises(InputError, match="'answerable'"):
        decide_frame(
            policy,
            pd.DataFrame(
                {"ranking_mode": ["vector"], "hits_after_filter": [1], "answerable": ["perhaps"]}
            ),
        )
    with pytest.raises(InputError, match="'topics'"):
        decide_frame(
            policy,
            pd.DataFrame({"ranking_mode": ["vector"], "hits_after_filter": [1], "topics": [[7]]}),
        )


def test_decide_frame_replays_a_million_traces(policy: NoAnswerPolicy) -> None:
    rng = np.random.default_rng(7)
    n = 1_000_000
    modes = np.array(["bm25", "vector", "semantic_reranker", "hybrid"])
    frame = pd.DataFrame(
        {
            "ranking_mode": modes[rng.integers(0, 4, n)],
            "hits_after_filter": rng.integers(0, 5, n),
            "top_score": rng.uniform(0, 4, n).round(2),
            "answerable": rng.random(n) < 0.8,
            "ambiguous": rng.random(n) < 0.05,
            "ungrounded": rng.random(n) < 0.05,
            "topics": pd.Series([(), ("pricing",), ("legal_dispute",)], dtype=object)
            .iloc[rng.integers(0, 3, n)]
            .to_numpy(),
        }
    )
    out = decide_frame(policy, frame)
    assert len(out) == n
    sample = frame.sample(300, random_state=1)
    for idx, row in sample.iterrows():
        got = out.loc[idx]
        want = decide(
            policy,
            Signals(
                str(row.ranking_mode),
                int(row.hits_after_filter),
                float(row.top_score),
                bool(row.answerable),
                bool(row.ambiguous),
                bool(row.ungrounded),
                tuple(row.topics),
            ),
        )
        assert (got["decision"], got["rule"], bool(got["caveat"])) == (
            want.decision,
            want.rule,
            want.caveat,
        )


# Bridge to the risk-coverage analysis ------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(
    policy=policies(),
    mode=st.sampled_from(["bm25", "vector", "semantic_reranker", "hybrid"]),
    scores=st.lists(
        st.sampled_from([s for s in SCORE_POOL if s is not None and s == s]),
        min_size=1,
        max_size=30,
    ),
)
def test_confidence_threshold_reproduces_the_refuse_rule(
    policy: NoAnswerPolicy, mode: str, scores: list[float]
) -> None:
    th = policy.thresholds_for(mode)
    t = confidence_threshold(policy, mode, "refuse")
    if th.refuse_below is None:
        assert t is None
        return
    assert t is not None
    conf = confidence(policy, mode, scores)
    refused = [th.is_below(s, th.refuse_below) for s in scores]
    assert list(conf < t) == refused
    assert policy_threshold(policy, mode, t) == th.refuse_below


def test_policy_is_immutable(policy: NoAnswerPolicy) -> None:
    clone = copy.deepcopy(policy)
    with pytest.raises(Exception, match="frozen"):
        clone.version = 9  # type: ignore[misc]


# Fail closed under any policy (issue 30, item 12): with generated policies (directions,
# inequalities, gate orders, missing-signal sections) and generated signals with one or more of
# them removed, NaN, infinite or out of range, no request is answered, unless the broken signal
# is one the signed policy says is not produced or the mode reads no score. The vectorised gate
# that replay, re-decision and the pipelines use decides the same. --------------------------

#: A logged value that is absent, not a number or out of range for each signal (-1.0 is out of
#: range except for the vector mode, whose cosine scores reach it; 9.0 is a fine BM25 score).
_BROKEN = {**BROKEN, "top_score": [None, float("nan"), float("inf"), float("-inf"), -1.0]}
_BREAKABLE = sorted(_BROKEN)


@st.composite
def broken_signals(draw: st.DrawFn) -> tuple[Signals, tuple[str, ...]]:
    """Signals that would answer in some mode, with at least one signal broken."""
    values: dict[str, Any] = {
        "ranking_mode": draw(st.sampled_from(["bm25", "vector", "semantic_reranker", "hybrid"])),
        "hits_after_filter": draw(st.integers(3, 50)),
        "top_score": draw(st.sampled_from([0.3, 0.6, 0.9])),  # in range for every mode
        "answerable": True,
        "ambiguous": False,
        "ungrounded": False,
        "topics": (),
    }
    broken = tuple(draw(st.lists(st.sampled_from(_BREAKABLE), min_size=1, unique=True)))
    for name in broken:
        values[name] = draw(st.sampled_from(_BROKEN[name]))
    return Signals(**values), broken


def _reads_score(policy: NoAnswerPolicy, mode: str | None) -> bool:
    """Whether the gate reads ``top_score`` in ``mode``: only where a threshold is set (for
    hybrid, on the mode its ``threshold_on`` names)."""
    th = policy.ranking_modes.get(mode or "")
    if th is not None and mode == "hybrid":
        th = policy.ranking_modes.get(th.threshold_on or "")
    return th is not None and (th.refuse_below is not None or th.caveat_below is not None)


@settings(max_examples=100, deadline=None)
@given(policy=policies(), rows=st.lists(broken_signals(), min_size=1, max_size=20))
def test_a_broken_signal_never_answers_under_any_policy(
    policy: NoAnswerPolicy, rows: list[tuple[Signals, tuple[str, ...]]]
) -> None:
    declared = set(policy.missing_signal.not_produced if policy.missing_signal else ())
    out = decide_frame(policy, _frame([s for s, _ in rows]))
    for (signals, broken), frame_decision in zip(rows, out["decision"], strict=True):
        result = decide(policy, signals)
        assert frame_decision == result.decision
        needed = set(broken) - declared  # the signed policy's not_produced may be missing
        if not _reads_score(policy, signals.ranking_mode):
            needed.discard("top_score")  # a mode without score thresholds reads no score
        elif (
            policy.thresholds_for(str(signals.ranking_mode)).score_problem(signals.top_score)
            is None
        ):
            needed.discard("top_score")  # -1.0 is a cosine score the vector mode documents
        if not needed:
            continue
        assert result.decision != "answer", (signals, broken, result)
        if result.rule == "signal_missing":
            assert result.missing[0] in broken, (signals, broken, result)


def test_the_values_a_proposal_changes_are_listed_leaf_by_leaf() -> None:
    from review.policy.display import changed_values

    shipped = (ROOT / "policies" / "no-answer-policy.yaml").read_text(encoding="utf-8")
    proposed = (
        shipped.replace("refuse_below: 0.55", "refuse_below: 0.6")
        .replace("version: 4", "version: 5")
        .replace("  - security_incident\n", "")
    )
    assert changed_values(shipped, proposed) == [
        "ranking_modes.vector.refuse_below: 0.55 → 0.6",
        "restricted_topics: removed security_incident",
    ]
    assert changed_values(shipped, shipped) == []
    assert changed_values(shipped, "ranking_modes: [") is None
