"""The evidence gate of note 002: its six-fixture matrix row by row, fail-closed on every
missing or broken signal alone and in combination, and ``workbench decide`` on good, missing and
malformed input."""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from review.cli.main import main
from review.core.errors import InputError, PolicyFileError
from review.policy.evidence import (
    PREDICATES,
    decide_evidence,
    parse_input,
    read_inputs,
)
from review.policy.policy import NoAnswerPolicy, load_policy, parse_policy
from tests.helpers.paths import ROOT

POLICY_PATH = ROOT / "policies" / "no-answer-policy.yaml"
FIXTURES = ROOT / "examples" / "evidence-gate-fixtures.jsonl"

# Note 002, "The six-fixture run used this matrix": fixture, expected status, observed reason.
NOTE_MATRIX = [
    ("supported", "answer", set()),
    (
        "no_answer_bearing_evidence",
        "abstain",
        {"no_answer_bearing_evidence", "support_below_threshold", "required_claim_not_covered"},
    ),
    ("partial", "abstain", {"required_claim_not_covered"}),
    ("conflicting", "abstain", {"conflicting_evidence"}),
    ("stale", "abstain", {"evidence_stale"}),
    ("disallowed", "abstain", {"source_not_allowed"}),
]


@pytest.fixture(scope="module")
def policy() -> NoAnswerPolicy:
    return load_policy(POLICY_PATH)


def fixtures() -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in FIXTURES.read_text(encoding="utf-8").splitlines()]
    return {r["id"]: r for r in rows}


def test_the_notes_six_fixtures_give_the_notes_table(policy: NoAnswerPolicy) -> None:
    rows = fixtures()
    assert list(rows) == [name for name, _, _ in NOTE_MATRIX]
    for name, status, reasons in NOTE_MATRIX:
        state = decide_evidence(parse_input(rows[name]), policy)
        assert state.status == status, name
        assert set(state.reason_codes) == reasons, name
        # every abstention returns a reason code, and an answer none
        assert bool(state.reason_codes) == (status != "answer")
        failed = {p for p, r in state.predicates.items() if r == "fail"}
        assert len(failed) == len(reasons)


def test_states_say_what_supports_what_is_missing_and_what_next(policy: NoAnswerPolicy) -> None:
    rows = fixtures()
    supported = decide_evidence(parse_input(rows["supported"]), policy)
    assert supported.supporting_passage_ids == ["p1"] and supported.missing_claims == []
    assert supported.answer.endswith("[p1]") and supported.rule == "all_predicates_hold"
    partial = decide_evidence(parse_input(rows["partial"]), policy)
    assert partial.missing_claims == ["c2"] and partial.supporting_passage_ids == ["p1"]
    assert partial.answer == "" and "c2" in partial.next_step and partial.rule == "claim_coverage"
    conflicting = decide_evidence(parse_input(rows["conflicting"]), policy)
    assert "p1/p2" in conflicting.next_step and conflicting.rule == "agreement"
    # restricted evidence is never listed, quoted or named
    disallowed = decide_evidence(parse_input(rows["disallowed"]), policy)
    assert disallowed.supporting_passage_ids == [] and disallowed.answer == ""
    assert "board" not in json.dumps(disallowed.as_json()).lower()


def test_regression_checks_of_the_note(policy: NoAnswerPolicy) -> None:
    rows = fixtures()
    # remove the decisive passage: a supported case changes to abstain
    removed = copy.deepcopy(rows["supported"])
    removed["passages"] = [p for p in removed["passages"] if p["id"] != "p1"]
    assert decide_evidence(parse_input(removed), policy).status == "abstain"
    # add an answer-bearing passage: a no-answer case becomes eligible to answer
    added = copy.deepcopy(rows["no_answer_bearing_evidence"])
    added["passages"].append(copy.deepcopy(rows["supported"]["passages"][0]) | {"id": "p9"})
    assert decide_evidence(parse_input(added), policy).status == "answer"


def test_thresholds_come_from_the_policy(policy: NoAnswerPolicy) -> None:
    rows = fixtures()
    text = POLICY_PATH.read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    data["evidence_gate"]["min_support"] = 0.95
    strict = parse_policy(yaml.safe_dump(data), "p")
    state = decide_evidence(parse_input(rows["supported"]), strict)
    assert state.reason_codes == ["support_below_threshold"]
    data["evidence_gate"].update(min_support=0.75, required_coverage=0.5)
    lenient = parse_policy(yaml.safe_dump(data), "p")
    assert decide_evidence(parse_input(rows["partial"]), lenient).status == "answer"
    data["evidence_gate"].update(required_coverage=1.0, superseded="current", max_age_days=None)
    keeps_old = parse_policy(yaml.safe_dump(data), "p")
    assert decide_evidence(parse_input(rows["stale"]), keeps_old).status == "answer"
    data["evidence_gate"]["max_age_days"] = 30
    recent = parse_policy(yaml.safe_dump(data), "p")
    assert decide_evidence(parse_input(rows["supported"]), recent).reason_codes == [
        "evidence_stale"
    ]


def test_two_half_good_passages_do_not_make_a_good_one(policy: NoAnswerPolicy) -> None:
    row = copy.deepcopy(fixtures()["supported"])
    first = row["passages"][0]
    row["passages"] = [
        first | {"id": "a", "allowed": False},  # allowed is missing here...
        first | {"id": "b", "superseded": True},  # ...and current is missing here
    ]
    state = decide_evidence(parse_input(row), policy)
    assert state.status == "abstain"
    assert "evidence_stale" in state.reason_codes


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda g: g.update(min_support=1.5), "evidence_gate.min_support"),
        (lambda g: g.update(required_coverage=0), "evidence_gate.required_coverage"),
        (lambda g: g.update(superseded="sometimes"), "evidence_gate.superseded"),
        (lambda g: g.update(on_missing_signal="answer"), "evidence_gate.on_missing_signal"),
        (lambda g: g.pop("max_age_days"), "evidence_gate.max_age_days"),
        (lambda g: g.update(extra=1), "evidence_gate.extra"),
    ],
)
def test_the_section_is_validated_strictly(mutate: Any, expected: str) -> None:
    data = yaml.safe_load(POLICY_PATH.read_text(encoding="utf-8"))
    mutate(data["evidence_gate"])
    with pytest.raises(PolicyFileError, match=expected):
        parse_policy(yaml.safe_dump(data), "p")


def test_a_policy_without_the_section_is_refused(policy: NoAnswerPolicy) -> None:
    data = yaml.safe_load(POLICY_PATH.read_text(encoding="utf-8"))
    del data["evidence_gate"]
    bare = parse_policy(yaml.safe_dump(data), "p")
    with pytest.raises(InputError, match="no evidence_gate section"):
        decide_evidence(parse_input(fixtures()["supported"]), bare)


# Fail closed ------------------------------------------------------------------------------------

BROKEN: dict[str, list[Any]] = {
    "support_score": [None, float("nan"), float("inf"), -0.1, 1.7],
    "allowed": [None],
    "superseded": [None],
    "effective_date": [None],
}


def _without(row: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(row)
    for p in out["passages"]:
        if p["supports"]:
            if value is None:
                p.pop(field)  # a key left out and a null are the same: not logged
            else:
                p[field] = value
    return out


def test_every_missing_signal_alone_and_in_combination_never_answers(
    policy: NoAnswerPolicy,
) -> None:
    base = fixtures()["supported"]
    names = list(BROKEN)
    tried = 0
    for k in range(1, len(names) + 1):
        for subset in itertools.combinations(names, k):
            for values in itertools.product(*(BROKEN[n] for n in subset)):
                row = base
                for name, value in zip(subset, values, strict=True):
                    row = _without(row, name, value)
                for drop_as_of in (False, True):
                    if drop_as_of:
                        row = copy.deepcopy(row) | {"as_of": None}
                    state = decide_evidence(parse_input(row), policy)
                    tried += 1
                    assert state.status != "answer", (subset, values)
                    assert state.reason_codes == ["signal_missing"]
                    assert state.rule == "signal_missing" and state.answer == ""
                    assert state.missing_signals
                    assert set(state.predicates.values()) == {"not_evaluated"}
    assert tried == 2 * sum(
        len(list(itertools.product(*(BROKEN[n] for n in subset))))
        for k in range(1, 5)
        for subset in itertools.combinations(names, k)
    )
    only_as_of = copy.deepcopy(base) | {"as_of": None}
    state = decide_evidence(parse_input(only_as_of), policy)
    assert state.status == "abstain" and state.missing_signals[0].startswith("as_of")
    no_claims = copy.deepcopy(base) | {"required_claims": []}
    for p in no_claims["passages"]:
        p["supports"] = []
    state = decide_evidence(parse_input(no_claims), policy)
    assert state.reason_codes == ["signal_missing"]
    assert state.missing_signals[0].startswith("required_claims")


def test_the_policy_names_the_non_answer_for_a_missing_signal() -> None:
    data = yaml.safe_load(POLICY_PATH.read_text(encoding="utf-8"))
    data["evidence_gate"]["on_missing_signal"] = "escalate"
    escalating = parse_policy(yaml.safe_dump(data), "p")
    row = _without(fixtures()["supported"], "support_score", float("nan"))
    assert decide_evidence(parse_input(row), escalating).status == "escalate"


passage_values = st.fixed_dictionaries(
    {
        "support_score": st.one_of(
            st.none(), st.floats(allow_nan=True, allow_infinity=True), st.floats(0, 1)
        ),
        "allowed": st.one_of(st.none(), st.booleans()),
        "superseded": st.one_of(st.none(), st.booleans()),
        "effective_date": st.one_of(st.none(), st.sampled_from(["2020-01-01", "2026-06-01"])),
    }
)


@settings(max_examples=300, deadline=None)
@given(values=st.lists(passage_values, min_size=1, max_size=4), as_of=st.booleans())
def test_an_answer_always_rests_on_complete_good_signals(
    policy: NoAnswerPolicy, values: list[dict[str, Any]], as_of: bool
) -> None:
    row = copy.deepcopy(fixtures()["supported"])
    template = row["passages"][0]
    row["passages"] = [template | v | {"id": f"p{i}"} for i, v in enumerate(values)]
    row["as_of"] = "2026-08-23" if as_of else None
    state = decide_evidence(parse_input(row), policy)
    if state.status == "answer":
        assert as_of
        chosen = [p for p in row["passages"] if p["id"] in state.supporting_passage_ids]
        assert chosen
        for p in row["passages"]:  # every answer-bearing passage logged every signal
            assert p["allowed"] is not None and p["superseded"] is not None
            assert p["effective_date"] is not None
            assert p["support_score"] is not None and 0 <= p["support_score"] <= 1
        for p in chosen:
            assert p["allowed"] and not p["superseded"] and p["support_score"] >= 0.75
    else:
        assert state.reason_codes and state.answer == ""
        assert set(state.predicates) == set(PREDICATES)


# Input ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"id": "a", "question": "q", "required_claims": [], "passages": [], "x": 1}', "field x"),
        ('{"id": "a", "question": "q", "required_claims": [], "passages": {}}', "field passages"),
        (
            '{"id": "a", "question": "q", "required_claims": [{"id": "c"}], '
            '"passages": [{"id": "p", "support_score": "high"}]}',
            "field passages.0.support_score",
        ),
        (
            '{"id": "a", "question": "q", "required_claims": [{"id": "c"}], '
            '"passages": [{"id": "p", "support_score": true}]}',
            "field passages.0.support_score",
        ),
        (
            '{"id": "a", "question": "q", "required_claims": [{"id": "c"}], '
            '"passages": [{"id": "p", "effective_date": "yesterday"}]}',
            "field passages.0.effective_date",
        ),
        (
            '{"id": "a", "question": "q", "required_claims": [{"id": "c"}], '
            '"passages": [{"id": "p", "supports": ["nope"]}]}',
            "field passages.0.supports.0",
        ),
        (
            '{"id": "a", "question": "q", "required_claims": [{"id": "c"}, {"id": "c"}], '
            '"passages": []}',
            "field required_claims.1.id",
        ),
        (
            '{"id": "a", "question": "q", "required_claims": [], '
            '"passages": [{"id": "p"}], "contradictions": [["p", "q"]]}',
            "field contradictions.0.1",
        ),
        ('{"id": "a", "question": "q", "required_claims": []}', "field passages"),
    ],
)
def test_malformed_lines_are_refused_with_line_and_field(line: str, field: str) -> None:
    good = json.dumps(fixtures()["supported"])
    with pytest.raises(InputError) as info:
        list(read_inputs([good + "\n", "\n", line + "\n"], "in.jsonl"))
    assert str(info.value).startswith("in.jsonl: line 3:")
    assert field in str(info.value)


def test_limits_bound_the_input() -> None:
    row = fixtures()["supported"] | {"passages": [{"id": f"p{i}"} for i in range(2_001)]}
    with pytest.raises(InputError, match="field passages"):
        parse_input(row)


def test_cli_prints_one_state_per_line_and_refuses_malformed_input() -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["decide", str(FIXTURES), "--policy", str(POLICY_PATH)])
    assert result.exit_code == 0, result.output
    states = [json.loads(line) for line in result.output.splitlines()]
    assert [(s["id"], s["status"], set(s["reason_codes"])) for s in states] == NOTE_MATRIX
    assert all(
        set(s)
        >= {
            "status",
            "answer",
            "supporting_passage_ids",
            "missing_claims",
            "reason_codes",
            "next_step",
            "rule",
        }
        for s in states
    )
    missing = json.dumps(_without(fixtures()["supported"], "support_score", float("nan")))
    result = runner.invoke(main, ["decide", "--policy", str(POLICY_PATH)], input=missing + "\n")
    assert result.exit_code == 0
    assert json.loads(result.output)["status"] == "abstain"
    assert "NaN" in json.loads(result.output)["missing_signals"][0]
    bad = FIXTURES.read_text(encoding="utf-8") + '{"id": "x"}\n'
    result = runner.invoke(main, ["decide", "-", "--policy", str(POLICY_PATH)], input=bad)
    assert result.exit_code == 1
    assert result.stdout == ""  # nothing is written when a line is refused
    assert "line 7: field question: required field is missing" in result.stderr
