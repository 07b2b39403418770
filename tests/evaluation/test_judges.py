"""LLM-judge labels of a run against the experts (note 000): import all or nothing, and the
agreement per field against reference computations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from sklearn.metrics import cohen_kappa_score
from sqlalchemy import Engine

from review.cli.main import main
from review.core.errors import InputError
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy
from review.evaluation import evalruns, judges


def _run(engine: Engine) -> evalruns.RunRow:
    return next(r for r in evalruns.list_runs(engine) if r.name.startswith("reference"))


def _labels(engine: Engine, tax: Taxonomy, flip_every: int = 4) -> list[str]:
    """A judge that agrees with the experts' decision except on every ``flip_every``-th case."""
    frame = evalruns.outputs_frame(engine, _run(engine).id, tax)
    frame = frame[frame["repeat"] == 0].sort_values("key").head(24)
    lines = []
    for i, r in enumerate(frame.itertuples(index=False)):
        decision = r.gold if i % flip_every else ("abstain" if r.gold == "answer" else "answer")
        reasons = list(r.gold_reasons or [])[:1] if decision != "answer" else []
        if decision != "answer" and not reasons:
            reasons = ["no_answer_bearing_evidence"]
        lines.append(
            json.dumps(
                {
                    "case": r.key,
                    "judge": "judge-a",
                    "decision": decision,
                    "reason_codes": reasons,
                    "output_acceptable": bool(r.decision == r.gold) if i % 3 else True,
                }
            )
        )
    return lines


def test_agreement_per_field_matches_reference_computations(
    demo_engine: Engine, tax: Taxonomy, annotator: Actor
) -> None:
    run = _run(demo_engine)
    lines = _labels(demo_engine, tax)
    items = list(judges.iter_judge_labels(lines, "judge.jsonl", tax))
    assert judges.import_judge_labels(demo_engine, annotator, run.id, items, "judge.jsonl") == 24
    table = judges.agreement(demo_engine, run.id, tax).set_index("field")
    frame = evalruns.outputs_frame(demo_engine, run.id, tax)
    gold = dict(zip(frame["key"], frame["gold"], strict=True))
    judged = [json.loads(x) for x in lines]
    a = [j["decision"] for j in judged]
    b = [gold[j["case"]] for j in judged]
    row = table.loc[judges.FIELDS["decision"]]
    assert row["items"] == 24 and row["agree"] == sum(x == y for x, y in zip(a, b, strict=True))
    assert row["agree"] == 18  # every 4th of 24 flipped
    assert row["kappa"] == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    assert 0 < row["alpha"] < 1 and row["note"] == ""
    acc = table.loc[judges.FIELDS["output_acceptable"]]
    # the experts' side: the right decision, an acceptable answer, a refusal without a claim
    ok = {
        r.key: r.decision == r.gold
        and (not r.answered or bool(r.answer_ok))
        and not r.claim_after_refusal
        for r in frame.itertuples(index=False)
    }
    ja = [j["output_acceptable"] for j in judged]
    ea = [ok[j["case"]] for j in judged]
    assert acc["items"] == 24
    assert acc["agree"] == sum(x == y for x, y in zip(ja, ea, strict=True))
    assert judges.judges(demo_engine, run.id) == ["judge-a"]


def test_a_bad_file_is_refused_with_its_line_and_writes_nothing(
    demo_engine: Engine, tax: Taxonomy, annotator: Actor
) -> None:
    run = _run(demo_engine)
    with pytest.raises(InputError, match=r"line 2: field decision: 'maybe'"):
        list(
            judges.iter_judge_labels(
                ['{"case": "CASE-001", "judge": "j", "decision": "answer"}',
                 '{"case": "CASE-002", "judge": "j", "decision": "maybe"}'],
                "j.jsonl",
                tax,
            )
        )  # fmt: skip
    with pytest.raises(InputError, match="line 1: give at least one"):
        list(judges.iter_judge_labels(['{"case": "CASE-001", "judge": "j"}'], "j.jsonl", tax))
    lines = [
        '{"case": "CASE-001", "judge": "j", "decision": "answer"}',
        '{"case": "NOPE-9", "judge": "j", "decision": "answer"}',
    ]
    items = list(judges.iter_judge_labels(lines, "j.jsonl", tax))
    with pytest.raises(InputError, match="line 2: field case: the run has no output"):
        judges.import_judge_labels(demo_engine, annotator, run.id, items, "j.jsonl")
    assert judges.judges(demo_engine, run.id) == []
    twice = list(judges.iter_judge_labels([lines[0], lines[0]], "j.jsonl", tax))
    with pytest.raises(InputError, match="line 2: judge 'j' already labeled case CASE-001"):
        judges.import_judge_labels(demo_engine, annotator, run.id, twice, "j.jsonl")
    assert judges.agreement(demo_engine, run.id, tax).empty


def test_no_variation_is_undefined_not_perfect(
    demo_engine: Engine, tax: Taxonomy, annotator: Actor
) -> None:
    run = _run(demo_engine)
    frame = evalruns.outputs_frame(demo_engine, run.id, tax)
    answers = frame[(frame["gold"] == "answer") & (frame["repeat"] == 0)].head(5)
    lines = [
        json.dumps({"case": k, "judge": "yes-man", "decision": "answer"}) for k in answers["key"]
    ]
    items = list(judges.iter_judge_labels(lines, "j.jsonl", tax))
    judges.import_judge_labels(demo_engine, annotator, run.id, items, "j.jsonl")
    row = (
        judges.agreement(demo_engine, run.id, tax).set_index("field").loc[judges.FIELDS["decision"]]
    )
    assert row["raw"] == 1.0 and row["kappa"] is None and "undefined" in row["note"]
    shown = judges.display_table(judges.agreement(demo_engine, run.id, tax)).set_index("field")
    assert shown.loc[judges.FIELDS["decision"], "kappa"] == "undefined"
    assert shown.loc[judges.FIELDS["decision"], "raw"] == "100%"


def test_the_command_imports_and_prints_the_agreement(
    demo_url: str, demo_engine: Engine, tax: Taxonomy, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", demo_url)
    path = tmp_path / "judge.jsonl"
    path.write_text("\n".join(_labels(demo_engine, tax)) + "\n", encoding="utf-8")
    run = _run(demo_engine)
    r = CliRunner().invoke(main, ["import-judge", str(path), "--run", run.name])
    assert r.exit_code == 0, r.output
    assert "24 judge labels stored" in r.output and "judge-a" in r.output
    r = CliRunner().invoke(main, ["import-judge", str(path), "--run", "no such run"])
    assert r.exit_code != 0 and "no run named" in r.output
