"""Users and roles, the command line, and the layering rule."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine, select

from review.admin import users
from review.cli.main import main
from review.core.errors import InputError, PermissionDenied, StaleWriteError
from review.core.identity import Actor, Permission, Role, require
from storage.db import read_session
from storage.models import AuditLog
from tests.conftest import make_actor
from tests.test_corpus import GOOD

ROOT = Path(__file__).resolve().parent.parent


def test_only_admins_manage_users_and_changes_are_audited(engine: Engine, admin: Actor) -> None:
    with pytest.raises(PermissionDenied, match="manage users"):
        users.add_user(engine, make_actor("annotator"), "x@example.org", "X", ["annotator"])
    u = users.add_user(engine, admin, "Ines@Example.org", "Inés", ["annotator"])
    assert u.email == "ines@example.org" and u.roles == ("annotator",)
    with pytest.raises(InputError, match="already exists"):
        users.add_user(engine, admin, "ines@example.org", "Dup", ["annotator"])
    with pytest.raises(InputError, match="unknown role 'boss'"):
        users.add_user(engine, admin, "b@example.org", "B", ["boss"])
    with pytest.raises(InputError, match="not a valid address"):
        users.add_user(engine, admin, "nope", "B", ["annotator"])
    with pytest.raises(InputError, match="at least one role"):
        users.add_user(engine, admin, "c@example.org", "C", [])
    users.update_user(
        engine,
        admin,
        u.id,
        1,
        name="Inés D.",
        roles=["annotator", "reviewer"],
        clearance=True,
        active=True,
    )
    with pytest.raises(StaleWriteError, match=admin.email):
        users.update_user(
            engine, admin, u.id, 1, name="Other", roles=["annotator"], clearance=False, active=True
        )
    with read_session(engine) as s:
        log = s.scalars(
            select(AuditLog).where(AuditLog.entity == "user").order_by(AuditLog.id)
        ).all()
    assert [e.action for e in log] == ["create", "update"]
    assert log[1].before["roles"] == ["annotator"]  # type: ignore[index]
    assert log[1].after["roles"] == ["annotator", "reviewer"]  # type: ignore[index]


def test_bootstrap_admin_only_on_an_empty_database(engine: Engine) -> None:
    first = users.bootstrap_admin(engine, "first@example.org", "First")
    assert first.roles == ("admin",)
    with pytest.raises(InputError, match="users already exist"):
        users.bootstrap_admin(engine, "second@example.org", "Second")


def test_role_grants() -> None:
    assert make_actor("annotator").can(Permission.label)
    assert not make_actor("annotator").can(Permission.approve_policy)
    assert make_actor("compliance").can(Permission.approve_policy)
    assert not make_actor("product_owner").can(Permission.edit_cases)
    with pytest.raises(PermissionDenied, match="needs one of the roles: admin"):
        require(make_actor("reviewer"), Permission.manage_users)
    assert set(Role) == {
        Role(r) for r in ("annotator", "reviewer", "product_owner", "compliance", "admin")
    }


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


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_untrusted_text_is_never_rendered_as_html() -> None:
    for p in [ROOT / "app.py", *(ROOT / "pages").glob("*.py")]:
        src = p.read_text(encoding="utf-8")
        assert "unsafe_allow_html=True" not in src, p
        assert "st.html(" not in src, p


def test_messages_that_quote_input_go_through_ui_plain() -> None:
    """Error and status messages quote uploaded values, names and spans of documents; shown
    raw, markdown would fetch remote images and make links. Every exception a page shows in
    st.error/warning/info/success/toast is passed through ui.plain."""
    raw = re.compile(
        r"st\.(error|warning|info|success|toast)\((str\((exc|e)\)|f\"[^\"]*\{(exc|e)[!:}])"
    )
    for p in [ROOT / "app.py", *(ROOT / "pages").glob("*.py")]:
        src = p.read_text(encoding="utf-8")
        bad = [m.group(0) for m in raw.finditer(src)]
        assert not bad, f"{p.name}: {bad[:3]}"


def test_ui_plain_escapes_markdown_and_breaks_links() -> None:
    from pages.ui import plain

    shown = plain("line 9: field jurisdiction: '![p](http://evil.example/x.png)' <b>x</b> *y*")
    assert not re.search(r"(?<!\\)[\[\]<]", shown)  # every bracket and "<" escaped
    assert "http://" not in shown
    assert "!\\[p\\](http:\u2060//evil.example/x.png)" in shown
    assert "line 9: field jurisdiction" in shown  # the message reads as written
    assert plain("www.evil.example") == "www\u2060.evil.example"
    assert plain("\\[x](y)") == "\\\\\\[x\\](y)"  # an escape in the input stays text
