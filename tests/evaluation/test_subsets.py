"""Runs on a chosen subset (issue 15 item 10): a team's own cases, kept apart from the demo's
by their import batch, or a family, slice, split, category or named keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine, select

from review.cases import cases
from review.cli.main import main
from review.core.errors import InputError
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy, load_taxonomy
from review.demo.files import DEMO_CASE_BATCH, DEMO_CASES
from review.evaluation import evalruns, execution, refpipeline
from storage.db import read_session
from storage.models import Case, CaseSlice, EvalRun


def _own_cases(tmp_path: Path) -> Path:
    """Two of the demo's cases under new keys: a team's own file."""
    lines = DEMO_CASES.read_text(encoding="utf-8").splitlines()[:2]
    out = []
    for i, line in enumerate(lines):
        data = json.loads(line)
        data["key"] = f"TEAM-{i + 1}"
        data["family"] = None
        data["evidence_state"] = None
        out.append(json.dumps(data))
    path = tmp_path / "team-cases.jsonl"
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


def _ready(engine: Engine, **where: str) -> set[str]:
    with read_session(engine) as s:
        stmt = select(Case.key).where(Case.status == "ready")
        for field, value in where.items():
            if field == "slice":
                stmt = stmt.where(
                    Case.id.in_(select(CaseSlice.case_id).where(CaseSlice.slice == value))
                )
            else:
                stmt = stmt.where(getattr(Case, field) == value)
        return set(s.scalars(stmt))


def test_an_import_records_its_batch_and_a_run_can_take_it_alone(
    demo_url: str,
    demo_engine: Engine,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", demo_url)
    run = CliRunner().invoke
    r = run(main, ["import-cases", str(_own_cases(tmp_path)), "--batch", "team launch set"])
    assert r.exit_code == 0, r.output
    assert "import batch 'team launch set'" in r.output
    batches = dict(cases.import_batches(demo_engine))
    assert batches["team launch set"] == 2
    assert batches[DEMO_CASE_BATCH] == len(DEMO_CASES.read_text().splitlines())
    r = run(
        main,
        [
            "evaluate",
            "--pipeline",
            "review.evaluation.refpipeline:reference",
            "--batch",
            "team launch set",
            "--name",
            "team only",
            "--no-perturbations",
        ],
    )
    assert r.exit_code == 0, r.output
    stored = next(x for x in evalruns.list_runs(demo_engine) if x.name == "team only")
    frame = evalruns.outputs_frame(demo_engine, stored.id, load_taxonomy())
    assert set(frame["key"]) == _ready(demo_engine, import_batch="team launch set")
    assert set(frame["key"]) <= {"TEAM-1", "TEAM-2"}
    with read_session(demo_engine) as s:
        config = s.scalar(select(EvalRun.config).where(EvalRun.id == stored.id))
    assert config is not None and config["subset"] == {"import_batch": "team launch set"}
    # a batch label given by nobody: the file's name and the time
    assert cases.import_batch_label("/x/y/cases.jsonl").startswith("cases.jsonl 20")


@pytest.mark.parametrize(
    "subset",
    [
        {"split": "test"},
        {"slice": "temporal_mismatch"},
        {"category": "near_miss"},
        {"split": "validation", "slice": "near_neighbour_distractor"},
    ],
)
def test_a_subset_runs_exactly_its_cases(
    demo_engine: Engine, tax: Taxonomy, annotator: Actor, subset: dict[str, str]
) -> None:
    run_id = execution.execute(
        demo_engine,
        annotator,
        refpipeline.reference,
        tax,
        name=f"subset {subset}",
        system_version="ref",
        perturb=False,
        subset=execution.CaseSubset(**subset),  # type: ignore[arg-type]
    )
    frame = evalruns.outputs_frame(demo_engine, run_id, tax)
    assert set(frame["key"]) == _ready(demo_engine, **subset)


def test_keys_and_families_and_an_empty_subset(
    demo_engine: Engine, tax: Taxonomy, annotator: Actor
) -> None:
    choices = execution.subset_choices(demo_engine)
    assert "test" in choices["split"] and DEMO_CASE_BATCH in choices["import_batch"]
    family = choices["family"][0]
    sub = execution.CaseSubset(family=family)
    assert execution.subset_size(demo_engine, sub) > 0
    keys = execution.CaseSubset(keys=("CASE-001", "CASE-003"))
    assert execution.subset_size(demo_engine, keys) == 2
    with pytest.raises(InputError, match="no ready case matches"):
        execution.execute(
            demo_engine,
            annotator,
            refpipeline.reference,
            tax,
            name="nothing",
            system_version="ref",
            subset=execution.CaseSubset(import_batch="no such batch"),
        )
    assert not [r for r in evalruns.list_runs(demo_engine) if r.name == "nothing"]


def test_targeted_regression_on_the_cases_using_a_document(
    demo_engine: Engine, tax: Taxonomy, annotator: Actor
) -> None:
    """Note 000: after a document changes, re-run the cases it affects, one click away."""
    from storage.models import CaseDocument, Document

    with read_session(demo_engine) as s:
        using = set(
            s.scalars(
                select(Case.key)
                .join(CaseDocument, CaseDocument.case_id == Case.id)
                .join(Document, Document.id == CaseDocument.document_id)
                .where(Document.doc_key == "POL-REFUND-MONTHLY", Case.status == "ready")
            )
        )
    assert using
    assert "POL-REFUND-MONTHLY" in execution.subset_choices(demo_engine)["document"]
    run_id = execution.execute(
        demo_engine,
        annotator,
        refpipeline.reference,
        tax,
        name="after the refund policy changed",
        system_version="ref",
        perturb=False,
        subset=execution.CaseSubset(document="POL-REFUND-MONTHLY"),
    )
    frame = evalruns.outputs_frame(demo_engine, run_id, tax)
    assert set(frame["key"]) == using


def test_targeted_regression_on_the_cases_mentioning_an_entity(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    """Note 000: after an entity (a product, a plan) changes, the cases whose question or a
    required claim mentions it, case-insensitively; LIKE wildcards in the text are literal."""
    from storage.models import CaseClaim

    with read_session(demo_engine) as s:
        ready = list(s.scalars(select(Case).where(Case.status == "ready")))
        claims: dict[int, list[str]] = {}
        for cid, text in s.execute(select(CaseClaim.case_id, CaseClaim.text)):
            claims.setdefault(cid, []).append(text)

    def mentioning(needle: str) -> set[str]:
        return {
            c.key
            for c in ready
            if needle in c.question.lower()
            or any(needle in t.lower() for t in claims.get(c.id, []))
        }

    expected = mentioning("sla")
    assert expected
    sub = execution.CaseSubset(mentions="SLA")
    assert execution.subset_size(demo_engine, sub) == len(expected)
    assert sub.describe() == {"mentions": "SLA"}
    # "%" and "_" are themselves, not wildcards ("99.95%" has one, nothing has "a_b")
    percent = execution.subset_size(demo_engine, execution.CaseSubset(mentions="%"))
    assert 0 < percent == len(mentioning("%")) < len(ready)
    assert execution.subset_size(demo_engine, execution.CaseSubset(mentions="a_b")) == 0
    both = execution.CaseSubset(mentions="SLA", language="en")
    assert execution.subset_size(demo_engine, both) == len(expected)
    assert execution.subset_size(demo_engine, execution.CaseSubset(language="de")) == 0
    assert execution.subset_choices(demo_engine)["language"] == ["en"]
