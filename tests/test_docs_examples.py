"""The example files of the docs (examples/formats/) are complete and go in as the docs say:
the command sequence of docs/import.md runs on an empty database, every field of the run and
judge formats is in its example and in its table, and every example file is on a page."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select

from review.cli.main import main
from review.evaluation.evalruns import OutputIn, SignalsIn
from review.evaluation.judges import JudgeIn
from storage.db import make_engine
from storage.models import Case, Document, EvalOutput, Trace
from tests.helpers import docs
from tests.helpers.paths import ROOT

EXAMPLES = docs.EXAMPLES


def _lines(name: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in docs.example(name).splitlines() if line.strip()]


def test_the_examples_go_in_with_the_commands_the_docs_give(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'examples.db'}"
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", url)
    monkeypatch.chdir(ROOT)
    commands = docs.block("import", "sh", "## The examples, end to end").splitlines()
    assert len(commands) == 6
    said = []
    for command in commands:
        words = shlex.split(command)
        assert words[0] == "workbench", command
        done = CliRunner().invoke(main, words[1:])
        assert done.exit_code == 0, f"{command}\n{done.output}"
        said.append(done.output)
    assert "2 document versions added" in said[1]
    assert "2 cases added" in said[2]
    assert "with 3 outputs" in said[3]
    assert "2 judge labels stored" in said[4]
    assert "1 trace added" in said[5]
    engine = make_engine(url)
    with engine.connect() as c:
        counts = [
            c.execute(select(func.count()).select_from(t)).scalar_one()
            for t in (Document, Case, EvalOutput, Trace)
        ]
    engine.dispose()
    assert counts == [2, 2, 3, 1]


def _table_fields(section: str) -> dict[str, str]:
    """Field -> its "Required" cell, from the table of ``section`` in docs/import.md."""
    text = docs.text("import")
    part = text[text.index(section) :]
    rows = re.findall(r"^\| `(\w+)` \| [^|]+ \| ([^|]+) \|", part.split("\n## ", 1)[0], re.M)
    return {name: required.strip() for name, required in rows}


@pytest.mark.parametrize(
    ("section", "model", "example"),
    [
        ("## Evaluation run outputs", OutputIn, "run.jsonl"),
        ("## LLM-judge labels", JudgeIn, "judge.jsonl"),
    ],
)
def test_each_field_is_in_the_table_and_in_the_example(
    section: str, model: type[OutputIn] | type[JudgeIn], example: str
) -> None:
    table = _table_fields(section)
    fields = model.model_fields
    assert set(table) == set(fields)
    for name, field in fields.items():
        assert table[name].startswith("yes") == field.is_required(), name
    shown = set().union(*(set(line) for line in _lines(example)))
    assert shown == set(fields)
    if model is OutputIn:
        signals = [line["signals"] for line in _lines(example) if isinstance(line["signals"], dict)]
        assert signals and set(signals[0]) == set(SignalsIn.model_fields)


def test_every_example_file_is_on_a_page() -> None:
    pages = "\n".join(docs.text(p.stem) for p in docs.DOCS.glob("*.md"))
    files = sorted(p for p in EXAMPLES.rglob("*") if p.is_file())
    assert len(files) >= 6
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        assert rel in pages or f"{path.parent.relative_to(ROOT).as_posix()}/" in pages, rel


def test_every_policy_file_is_on_its_page_and_loads_as_shown() -> None:
    from review.core.taxonomy import load_taxonomy
    from review.policy.policy import load_policy
    from review.traces.monitoring import load_monitoring_policy
    from review.traces.redaction import load_redaction_policy
    from review.wording.messages import load_wording

    loaders: dict[str, Callable[[Path], object]] = {
        "no-answer-policy.yaml": load_policy,
        "refusal-wording.yaml": load_wording,
        "taxonomy.yaml": load_taxonomy,
        "monitoring.yaml": load_monitoring_policy,
        "redaction.yaml": load_redaction_policy,
    }
    policies = ROOT / "policies"
    assert sorted(p.name for p in policies.glob("*.yaml")) == sorted(loaders)
    page = docs.text("policy-files")
    for name, load in loaders.items():
        assert f"```{{literalinclude}} ../policies/{name}" in page, name
        assert f"| `{name}` |" in page, name
        assert load(policies / name) is not None


def test_the_ragas_and_deepeval_examples_are_what_the_export_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", f"sqlite:///{tmp_path / 'export.db'}")
    monkeypatch.chdir(ROOT)
    for command in docs.block("import", "sh", "## The examples, end to end").splitlines()[:3]:
        done = CliRunner().invoke(main, shlex.split(command)[1:])
        assert done.exit_code == 0, f"{command}\n{done.output}"
    commands = docs.block("integrations", "sh", "## Exporting cases to Ragas or DeepEval")
    written = {}
    for command in commands.splitlines():
        words = shlex.split(command)
        out = tmp_path / words[2]
        done = CliRunner().invoke(main, [words[1], str(out), *words[3:]])
        assert done.exit_code == 0 and "2 cases exported" in done.output, done.output
        written[words[-1]] = out.read_text(encoding="utf-8")
    exported = EXAMPLES / "exported"
    assert written["ragas"] == (exported / "ragas.jsonl").read_text(encoding="utf-8")
    assert written["deepeval"] == (exported / "deepeval.json").read_text(encoding="utf-8")
    samples = [json.loads(line) for line in written["ragas"].splitlines()]
    goldens = json.loads(written["deepeval"])
    assert [s["expected_decision"] for s in samples] == ["answer", "abstain"]
    # the fields the page names are the fields written, and nothing else
    page = docs.flat("integrations")
    for key in {k for s in samples for k in s} | {k for g in goldens for k in g}:
        assert f"`{key}`" in page, key
    for key in goldens[0]["additional_metadata"]:
        assert f"`{key}`" in page or key in samples[0], key
