"""The command line end to end: every command on a fresh database, errors as messages."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from review.cli.main import main
from tests.helpers.corpus import GOOD
from tests.helpers.paths import ROOT


def test_cli_commands_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    run = CliRunner().invoke
    r = run(main, ["migrate"])
    assert r.exit_code == 0, r.output
    r = run(
        main, ["add-user", "ada@example.org", "--name", "Ada", "--role", "admin", "--clearance"]
    )
    assert r.exit_code == 0 and "ada@example.org added with roles admin" in r.output
    r = run(main, ["add-user", "bad", "--name", "B", "--role", "admin"])
    assert r.exit_code == 1 and "not a valid address" in r.output
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text(GOOD, encoding="utf-8")
    r = run(main, ["import-docs", str(docs)])
    assert r.exit_code == 0 and "1 document version added" in r.output
    (docs / "b.md").write_text(GOOD.replace("POL-REFUND", "X").replace("version: 2", "version: 0"))
    r = run(main, ["import-docs", str(docs)])
    assert r.exit_code == 1 and "b.md: line 3: field version" in r.output
    case = {
        "key": "C1",
        "question": "How long is the refund window?",
        "required_claims": [],
        "identity": {"name": "c", "scopes": ["public"]},
        "documents": [
            {"doc_id": "POL-REFUND", "version": 2, "visibility": "visible", "role": "decisive"}
        ],
        "expected_decision": "answer",
        "expected_message": None,
        "reason_codes": [],
        "category": "in_scope",
        "slices": [],
        "split": "test",
        "family": None,
        "evidence_state": None,
        "language": None,
        "status": "ready",
        "notes": "",
    }
    (tmp_path / "cases.jsonl").write_text(json.dumps(case) + "\n", encoding="utf-8")
    r = run(main, ["import-cases", str(tmp_path / "cases.jsonl")])
    assert r.exit_code == 0 and "1 case added" in r.output
    out = tmp_path / "out.jsonl"
    r = run(main, ["export-cases", str(out)])
    assert r.exit_code == 0 and "1 case exported" in r.output
    assert json.loads(out.read_text()) == case
    r = run(
        main,
        [
            "evaluate",
            "--pipeline",
            "review.evaluation.refpipeline:reference",
            "--name",
            "r1",
            "--repeats",
            "2",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "2 outputs on 1 case, 0 infrastructure failures" in r.output
    r = run(main, ["evaluate", "--pipeline", "review.nope:missing"])
    assert r.exit_code == 2 and "cannot load review.nope:missing" in r.output
    (tmp_path / "run.jsonl").write_text(
        json.dumps({"case": "C1", "decision": "abstain", "score": 0.1}) + "\n", encoding="utf-8"
    )
    r = run(main, ["import-run", str(tmp_path / "run.jsonl"), "--name", "imported"])
    assert r.exit_code == 0 and "imported (id 2) with 1 output" in r.output
    r = run(main, ["import-run", str(tmp_path / "run.jsonl"), "--name", "imported"])
    assert r.exit_code == 1 and "already exists" in r.output
    r = run(main, ["seed-demo", "--if-empty"])
    assert r.exit_code == 0 and "already has data" in r.output


def test_every_command_reports_errors_through_one_handler() -> None:
    """Errors meant for the user are caught once (review.cli.common), not per command."""
    from review.cli.common import WorkbenchCommand

    assert main.commands and all(isinstance(c, WorkbenchCommand) for c in main.commands.values())
    for p in (ROOT / "review" / "cli").glob("*.py"):
        src = p.read_text(encoding="utf-8")
        assert not re.search(r"except \(?(InputError|PermissionDenied|PolicyFileError)", src), p


def test_a_refused_command_says_error_and_exits_1(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"key": "X"}\n\xff\n')
    runner = CliRunner(env={"WORKBENCH_DATABASE_URL": f"sqlite:///{tmp_path / 'wb.db'}"})
    out = runner.invoke(main, ["import-cases", str(bad)])
    assert out.exit_code == 1 and out.output.startswith("error: ") and out.exception
    out = runner.invoke(main, ["add-user", "not-an-email", "--name", "X", "--role", "admin"])
    assert out.exit_code == 1 and "error: " in out.output


def test_the_workbench_console_script_points_at_the_command_line() -> None:
    """make run starts with `workbench migrate`: the entry point must name the click group."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, attr = scripts["workbench"].partition(":")
    assert getattr(__import__(module, fromlist=[attr]), attr) is main
