"""A dry run that fails every case says which signal each output lacked (issue 35 item 6a):
per output, every signal the gate needed and could not use with what was wrong with it
("top_score NaN; answerable not logged"), the first 50 by case key with the total, and how
many outputs lacked each signal; on the Monthly review's validation tab too."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from review.core.taxonomy import Taxonomy
from review.monthly import validation
from review.policy.gate import decide
from review.policy.policy import SIGNAL_MISSING, default_policy_path, load_policy
from review.thresholds import redecide
from tests.helpers.actors import make_actor
from tests.helpers.dryrun import break_validation_signals
from tests.helpers.pages import app, no_exception, readable

RAVI = make_actor("reviewer", "ravi.menon@brightwave.example")
RAVI_EMAIL = "ravi.menon@brightwave.example"
TEMPLATES = ["The documents available to you do not establish this."]
POLICY = load_policy(default_policy_path())
GOOD: dict[str, Any] = {
    "ranking_mode": "vector",
    "hits_after_filter": 4,
    "top_score": 0.9,
    "answerable": True,
    "ambiguous": False,
    "ungrounded": False,
    "topics": [],
}


def test_every_lacking_signal_is_named_with_what_was_wrong() -> None:
    assert redecide.lacked(POLICY, GOOD) == []
    nan = redecide.lacked(POLICY, GOOD | {"top_score": math.nan})
    assert nan[0] == ("top_score", "NaN")
    both = redecide.lacked(POLICY, GOOD | {"top_score": math.nan, "answerable": None})
    assert ("top_score", "NaN") in both and ("answerable", "not logged") in both
    assert redecide.lacked_text(both).startswith("top score missing (NaN)")
    # a value of the wrong kind is named as given, not as "not logged"
    wrong = redecide.lacked(POLICY, GOOD | {"answerable": "yes"})
    assert wrong == [("answerable", "not usable ('yes')")]
    mode = redecide.lacked(POLICY, GOOD | {"ranking_mode": "bm42"})
    assert mode[0] == ("ranking_mode", "'bm42' is not a mode the policy defines")


signal_values = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-5, 50),
    st.text(max_size=5),
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(GOOD)), signal_values, max_size=7))
def test_the_reasons_follow_the_gate_and_fail_closed(changes: dict[str, Any]) -> None:
    """Whatever an output logged, the gate (as a dry run re-decides) refuses exactly when a
    reason names a signal, and then never answers."""
    logged = GOOD | changes
    problems = redecide.lacked(POLICY, logged)
    got = decide(POLICY, redecide.signals_of(logged))
    assert bool(problems) == (got.rule == SIGNAL_MISSING)
    if problems:
        assert got.decision != "answer"
        assert {name for name, _ in problems} == set(got.missing)


def test_a_dry_run_that_fails_every_case_says_why_for_each(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    run_id, keys = break_validation_signals(demo_engine, tax)
    r = validation.run_validation(demo_engine, RAVI, tax, run_id, "validation", TEMPLATES)
    assert r["passed"] is False and r["answered"] == 0
    assert r["lacking_outputs_total"] == len(keys)
    listed = {row["case"]: row["lacked"] for row in r["lacking_outputs"]}
    assert list(listed) == keys[: validation.LACKING_LISTED]
    for i, key in enumerate(keys[: validation.LACKING_LISTED]):
        want = ["top score missing (NaN)", "top score not logged", "logged no signals"][i % 3]
        assert want in listed[key], (key, listed[key])
    by_signal = r["lacking_by_signal"]
    assert by_signal[redecide.NO_SIGNALS] == len(keys[2::3])
    assert by_signal["top_score"] == len(keys[0::3]) + len(keys[1::3])
    assert by_signal["answerable"] >= len(keys[1::3])
    banner = validation.lacking_banner(r)
    assert "Counting every signal an output lacked: top score" in banner
    assert f"logged no signals {len(keys[2::3]):,}" in banner


def test_the_validation_tab_lists_each_output_and_what_it_lacked(
    demo_url: str, demo_engine: Engine, tax: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, keys = break_validation_signals(demo_engine, tax)
    at = app(demo_url, monkeypatch, RAVI_EMAIL).run()
    at.switch_page("pages/review_page.py").run()
    picker = next(s for s in at.selectbox if s.label == "Run")
    picker.select(next(o for o in picker.options if o.startswith("reference")))
    next(b for b in at.button if b.label == "Run and store the validation check").click().run()
    no_exception(at)
    assert "Counting every signal an output lacked" in readable(at.warning[0])
    table = next(d.value for d in at.dataframe if list(d.value.columns) == ["case", "lacked"])
    assert len(table) == min(len(keys), validation.LACKING_LISTED)
    assert set(table["case"]) <= set(keys)
    assert table["lacked"].str.len().gt(0).all()
    assert any(readable(c).startswith("The signals each output lacked") for c in at.caption), [
        readable(c) for c in at.caption
    ]
