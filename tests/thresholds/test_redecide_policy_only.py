"""Issue 30 item 3: the signed policy alone says which gate signals may be missing. A run's
own ``not_produced`` list is information, never a reason to skip a check; a dry run or replay
that refuses says first how many outputs lacked which signal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
from sqlalchemy import Engine, select

from review.core.taxonomy import Taxonomy
from review.evaluation import evalruns
from review.monthly import validation
from review.policy.policy import load_policy
from review.thresholds import redecide
from storage.db import write_session
from storage.models import EvalOutput
from tests.helpers.actors import make_actor
from tests.helpers.paths import ROOT

POLICY = ROOT / "policies" / "no-answer-policy.yaml"
RAVI = make_actor("reviewer", "ravi.menon@brightwave.example")
#: a well-supported request, as the reference pipeline logs it: no answerable flag
LOGGED: dict[str, Any] = {
    "ranking_mode": "vector",
    "hits_after_filter": 4,
    "top_score": 0.92,
    "answerable": None,
    "ambiguous": None,
    "ungrounded": False,
    "topics": [],
    "not_produced": ["answerable", "ambiguous"],
}


def _frame(signals: Sequence[dict[str, Any] | None]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "key": [f"CASE-{i:03d}" for i in range(len(signals))],
            "decision": ["answer"] * len(signals),
            "infra": [False] * len(signals),
            "signals": signals,
        }
    )


def test_93_outputs_without_answerable_are_never_re_decided_as_answers() -> None:
    policy = load_policy(POLICY)
    assert policy.missing_signal is not None and policy.missing_signal.not_produced == []
    with_flags = LOGGED | {"answerable": True, "ambiguous": False, "not_produced": []}
    no_score = with_flags | {"top_score": None}
    frame = _frame([dict(LOGGED) for _ in range(93)] + [dict(no_score) for _ in range(4)])
    again = redecide.redecide(policy, frame)
    assert again["redecidable"].all()
    assert not (again["decision"] == "answer").any()
    assert set(again["rule"]) == {"signal_missing"}
    assert redecide.lacking(frame, again) == {"answerable": 93, "top_score": 4}
    assert (
        redecide.lacking_sentence(redecide.lacking(frame, again))
        == "93 outputs lacked the answerable flag; 4 lacked the top score"
    )
    assert redecide.declared_not_produced(frame) == {"answerable": 93, "ambiguous": 93}
    # the same outputs with the flags logged are answers: only the missing flag refused them
    logged = redecide.redecide(policy, _frame([dict(with_flags) for _ in range(93)]))
    assert (logged["decision"] == "answer").all()


def test_the_release_gate_does_not_reproduce_decisions_the_policy_would_not_make() -> None:
    policy = load_policy(POLICY)
    frame = _frame([dict(LOGGED) for _ in range(93)])
    row = redecide.reproduction_row(policy, frame)
    assert row == (0, 93, "93 outputs lacked the answerable flag")


def test_the_dry_run_reports_first_what_the_outputs_lacked(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    ref = next(r for r in evalruns.list_runs(demo_engine) if r.name.startswith("reference"))
    # the run as a pipeline that logs no answerable flag (and declares it "not produced" on its
    # own) would have stored it
    with write_session(demo_engine) as s:
        for out in s.scalars(select(EvalOutput).where(EvalOutput.run_id == ref.id)):
            if out.signals:
                out.signals = out.signals | {"answerable": None, "not_produced": ["answerable"]}
    result = validation.run_validation(
        demo_engine, RAVI, tax, ref.id, "all", validation.refusal_templates(demo_engine)
    )
    lacked = result["lacking"]
    assert set(lacked) == {"answerable"} and lacked["answerable"] > 0
    assert result["lacking_text"] == f"{lacked['answerable']} outputs lacked the answerable flag"
    assert result["declared_not_produced"]["answerable"] == result["cases"]
    banner = validation.lacking_banner(result)
    assert banner.startswith(f"Refused for a missing signal: {lacked['answerable']} outputs")
    assert "only the policy's missing_signal.not_produced decides" in banner
    rows = validation.validation_rows(result, {})
    assert rows.iloc[0]["check"] == "refused for a missing signal"
    assert result["answered"] == 0  # the answerable cases were not answered without the flag
