"""The bundled pipelines decide with the policy in force and word with the wording in force:
thresholds and restricted topics come from configuration, not code (note 004)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import pytest
from sqlalchemy import Engine

from review.core.identity import Actor
from review.core.taxonomy import Taxonomy
from review.evaluation import evalruns, execution, refpipeline
from review.evaluation.execution import PipelineDocument
from review.policy.policy import load_policy, parse_policy, replace_thresholds
from review.thresholds import thresholds
from review.wording.messages import load_wording, render
from tests.helpers.paths import ROOT

DOC = PipelineDocument(
    "POL-REFUND-MONTHLY",
    2,
    "Refunds of monthly plans",
    "A customer may ask for a refund of a monthly charge within 14 days of the charge date.\n",
    dt.date(2025, 3, 1),
    "policy",
    "global",
    "public",
)
QUESTION = "Is a refund of a monthly charge possible after a migration?"


def _keys(key: str, values: Mapping[str, str]) -> str:
    return f"<{key}:{','.join(f'{k}={v}' for k, v in sorted(values.items()))}>"


def _policy_text(**changes: Any) -> str:
    text = (ROOT / "policies" / "no-answer-policy.yaml").read_text(encoding="utf-8")
    return replace_thresholds(text, "vector", **changes) if changes else text


def test_company_names_of_the_wording_are_stopwords_of_the_retrieval() -> None:
    """A question naming the deployment's company scores as the same question without it,
    when the wording lists the name (the wording file's company_names, not the code)."""
    shipped = load_policy()
    plain = refpipeline.reference.configure(shipped, _keys)(QUESTION, [DOC], {})
    named_q = QUESTION.replace("possible", "possible at Acme Cloud")
    named = refpipeline.reference.configure(shipped, _keys, ["Acme Cloud"])(named_q, [DOC], {})
    assert named["score"] == plain["score"]
    unnamed = refpipeline.reference.configure(shipped, _keys)(named_q, [DOC], {})
    assert unnamed["score"] < plain["score"]


def test_thresholds_come_from_the_policy() -> None:
    shipped = load_policy()
    answered = refpipeline.reference.configure(shipped, _keys)(QUESTION, [DOC], {})
    assert answered["decision"] == "answer" and answered["citations"] == ["POL-REFUND-MONTHLY@2"]
    score = answered["score"]
    strict = parse_policy(
        _policy_text(refuse_below=round(score + 0.01, 3), caveat_below=round(score + 0.02, 3)),
        "p",
    )
    refused = refpipeline.reference.configure(strict, _keys)(QUESTION, [DOC], {})
    assert refused["decision"] == "abstain"
    assert refused["reason_code"] == "support_below_threshold"
    assert refused["text"].startswith("<R1:")  # the message the gate names, from the wording
    assert refused["message_key"] == "R1" and answered["message_key"] is None
    # between refuse_below and caveat_below: an answer with the caveat naming the document
    band = parse_policy(
        _policy_text(refuse_below=round(score - 0.01, 3), caveat_below=round(score + 0.01, 3)),
        "p",
    )
    cav = refpipeline.reference.configure(band, _keys)(QUESTION, [DOC], {})
    assert cav["decision"] == "answer" and cav["reason_code"] == "support_below_threshold"
    assert cav["text"].endswith("<C1:document=Refunds of monthly plans>")
    assert cav["message_key"] == "C1"
    # the naive configuration keeps its own (deliberately low) refuse threshold
    naive = refpipeline.naive.configure(strict, _keys)(QUESTION, [DOC], {})
    assert naive["decision"] == "answer"


def test_restricted_topics_come_from_the_policy() -> None:
    q = "Our lawsuit with a customer: what should we file in court?"
    shipped = load_policy()
    esc = refpipeline.reference.configure(shipped, _keys)(q, [DOC], {})
    assert esc["decision"] == "escalate" and esc["reason_code"] == "restricted_topic"
    assert esc["text"].startswith("<E1:") and "role=the Legal team" in esc["text"]
    assert esc["message_key"] == "E1"
    lifted = shipped.model_copy(
        update={"restricted_topics": [t for t in shipped.restricted_topics if t != "legal_dispute"]}
    )
    not_restricted = refpipeline.reference.configure(lifted, _keys)(q, [DOC], {})
    assert not_restricted["decision"] != "escalate"


def test_refusals_use_the_approved_wording_text() -> None:
    ws = load_wording()

    def wording(key: str, values: Mapping[str, str]) -> str:
        return render(ws.message(key), values)

    r = refpipeline.reference.configure(load_policy(), wording)("How long is it?", [], {})
    assert r["decision"] == "abstain" and r["reason_code"] == "no_answer_bearing_evidence"
    expected = render(
        ws.message("R1"),
        {"topic": "long", "missing_item": refpipeline.MISSING_ITEM},
    )
    assert r["text"] == expected


def test_the_pipeline_declares_what_it_does_not_produce_instead_of_guessing() -> None:
    # a policy that fails closed on everything missing still decides every demo question:
    # the pipeline declares answerable and ambiguous as not produced
    shipped = load_policy()
    pipe = refpipeline.reference.configure(shipped, _keys)
    for q in (QUESTION, "What is the weather on Mars?", "lawsuit"):
        assert pipe(q, [DOC], {})["reason_code"] != "signal_missing"


def test_runs_use_the_policy_in_force_and_record_it(
    demo_engine: Engine, tax: Taxonomy, annotator: Actor
) -> None:
    from review.admin import users
    from review.policy import signoff

    def run(name: str) -> tuple[int, dict[str, str]]:
        pipe, used = thresholds.configured_pipeline(demo_engine, refpipeline.reference)
        rid = execution.execute(
            demo_engine, annotator, pipe, tax, name=name, system_version="r",
            config={"pipeline": "reference", **used}, perturb=False,
        )  # fmt: skip
        df = evalruns.outputs_frame(demo_engine, rid, tax)
        return int((df["decision"] == "abstain").sum()), used

    before, used_before = run("before")
    omar, paula, chen = (
        users.to_actor(users.get_by_email(demo_engine, f"{e}@brightwave.example"))  # type: ignore[arg-type]
        for e in ("omar.haddad", "paula.kim", "chen.li")
    )
    vid = thresholds.propose_thresholds(
        demo_engine, omar, "vector", 0.9, 0.95, "stricter", tuned_on_split="validation"
    )
    for who in (paula, chen):
        signoff.sign(demo_engine, who, vid, "approve")
    after, used_after = run("after")
    assert after > before
    assert used_before["policy_sha256"] != used_after["policy_sha256"]
    assert str(used_after["policy"]).startswith("version ")

    # an outside pipeline is left as it is
    def outside(q: str, d: object, i: object) -> dict[str, object]:
        return {"decision": "abstain"}

    assert thresholds.configured_pipeline(demo_engine, outside) == (outside, {})


@pytest.mark.parametrize("spec", ["reference", "naive", "sampled"])
def test_cli_records_the_policy_and_wording_of_a_run(
    spec: str, demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from review.cli.main import main

    monkeypatch.setenv("WORKBENCH_DATABASE_URL", demo_url)
    res = CliRunner().invoke(
        main,
        ["evaluate", "--pipeline", f"review.evaluation.refpipeline:{spec}", "--name", spec,
         "--no-perturbations"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    from sqlalchemy import select

    from storage.db import read_session
    from storage.models import EvalRun

    with read_session(demo_engine) as s:
        cfg = s.scalar(select(EvalRun.config).where(EvalRun.name == spec))
    assert cfg is not None
    assert cfg["pipeline"] == f"review.evaluation.refpipeline:{spec}"
    assert cfg["policy"].startswith("version ") and len(cfg["policy_sha256"]) == 64
    assert "wording" in cfg
