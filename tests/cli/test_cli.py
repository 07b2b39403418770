"""The command line end to end: every command on a fresh database, errors as messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from review.cli.main import main
from tests.helpers.corpus import GOOD


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
    assert r.exit_code == 0 and "1 document version(s) added" in r.output
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
        "reason_codes": [],
        "category": "in_scope",
        "slices": [],
        "split": "test",
        "family": None,
        "evidence_state": None,
        "status": "ready",
        "notes": "",
    }
    (tmp_path / "cases.jsonl").write_text(json.dumps(case) + "\n", encoding="utf-8")
    r = run(main, ["import-cases", str(tmp_path / "cases.jsonl")])
    assert r.exit_code == 0 and "1 case(s) added" in r.output
    out = tmp_path / "out.jsonl"
    r = run(main, ["export-cases", str(out)])
    assert r.exit_code == 0 and "1 case(s) exported" in r.output
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
    assert "2 output(s) on 1 case(s), 0 infrastructure failure(s)" in r.output
    r = run(main, ["evaluate", "--pipeline", "review.nope:missing"])
    assert r.exit_code == 2 and "cannot load review.nope:missing" in r.output
    (tmp_path / "run.jsonl").write_text(
        json.dumps({"case": "C1", "decision": "abstain", "score": 0.1}) + "\n", encoding="utf-8"
    )
    r = run(main, ["import-run", str(tmp_path / "run.jsonl"), "--name", "imported"])
    assert r.exit_code == 0 and "imported (id 2) with 1 output(s)" in r.output
    r = run(main, ["import-run", str(tmp_path / "run.jsonl"), "--name", "imported"])
    assert r.exit_code == 1 and "already exists" in r.output
    r = run(main, ["seed-demo", "--if-empty"])
    assert r.exit_code == 0 and "already has data" in r.output
