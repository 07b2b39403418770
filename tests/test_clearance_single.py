"""Clearance is decided in one module (issue 36): review/core/clearance.py says whether a user
may see a document, a passage, a case's text, a trace or a run output, and holds the one text
shown in place of what they may not see. This test reads review/ and pages/ for any other
spelling of that rule: a redaction text of their own, a check of the clearance flag, a
comparison with the restricted access scope, or a visibility function of their own."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from review.core import clearance
from tests.helpers.paths import ROOT

MODULE = ROOT / "review" / "core" / "clearance.py"
#: where a user's clearance is the data being managed (the users table, the admin form, the
#: command that adds a user), not a decision about what someone may see
MANAGES_CLEARANCE = {
    ROOT / "review" / "admin" / "users.py",
    ROOT / "review" / "cli" / "main.py",
    ROOT / "pages" / "admin_page.py",
    ROOT / "review" / "core" / "identity.py",
}
#: a string that is only a placeholder such as "(restricted title hidden)" or "[restricted]"
PLACEHOLDER = re.compile(
    r"^[\[(][^\[\]()]*\b(restricted|filtered|hidden|withheld|clearance)\b[^\[\]()]*[\])]$",
    re.IGNORECASE,
)
VISIBILITY_FUNCTION = re.compile(r"^_?(can|may)_see")


def sources() -> list[Path]:
    files = sorted((ROOT / "review").rglob("*.py")) + sorted((ROOT / "pages").rglob("*.py"))
    return [f for f in files if f != MODULE and "demo" not in f.relative_to(ROOT).parts[:2]]


def other_spellings(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found: list[str] = []
    where = path.relative_to(root)
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) in docstrings:
                continue
            if node.value == clearance.REDACTED or PLACEHOLDER.match(node.value):
                found.append(f"{where}:{line}: redaction text {node.value!r}")
        elif isinstance(node, ast.Attribute) and node.attr == "clearance":
            is_module = isinstance(node.value, ast.Name) and node.value.id == "clearance"
            if not is_module and path not in MANAGES_CLEARANCE:
                found.append(f"{where}:{line}: reads .clearance")
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(isinstance(o, ast.Constant) and o.value == "restricted" for o in operands):
                found.append(f"{where}:{line}: compares with 'restricted'")
        elif isinstance(node, ast.FunctionDef) and VISIBILITY_FUNCTION.match(node.name):
            found.append(f"{where}:{line}: defines {node.name}")
    return found


def test_clearance_is_decided_only_in_its_module() -> None:
    files = sources()
    assert len(files) > 100, "the scan no longer finds the sources"
    found = [hit for f in files for hit in other_spellings(f)]
    assert found == []


def test_the_scan_finds_each_old_spelling(tmp_path: Path) -> None:
    """The spellings the module replaced are each found by the scan above."""
    old = tmp_path / "old.py"
    old.write_text(
        "HIDDEN = '(restricted title hidden)'\n"
        "MASK = '[restricted]'\n"
        "ID = '(filtered chunk)'\n"
        "def can_see(actor, scope):\n"
        "    return scope != 'restricted' or actor.clearance\n",
        encoding="utf-8",
    )
    hits = other_spellings(old, tmp_path)
    assert len(hits) == 6, hits
