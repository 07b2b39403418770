"""No "case(s)" on any screen or in any message: every string literal in pages/, review/ and
app.py (docstrings aside, which no user reads) is free of a word followed by "(s)"; a count
meets its noun through ``readable.count`` ("1 case", "3 cases")."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.helpers.paths import ROOT

PLACEHOLDER = re.compile(r"[a-z]\(s\)")


def _docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _sources() -> list[Path]:
    pages = sorted((ROOT / "pages").rglob("*.py"))
    return [ROOT / "app.py", *pages, *sorted((ROOT / "review").rglob("*.py"))]


def placeholders(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string literal (f-string parts included) with "word(s)"."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skip
        and PLACEHOLDER.search(node.value)
    ]


def test_the_scan_finds_a_placeholder_in_an_f_string_and_not_in_a_docstring() -> None:
    source = 'def f(n):\n    """case(s) here is a docstring"""\n    return f"{n} case(s) moved"\n'
    assert placeholders(source) == [(3, " case(s) moved")]


def test_no_message_says_word_s() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text.strip()[:80]!r}"
        for path in _sources()
        for line, text in placeholders(path.read_text(encoding="utf-8"))
    ]
    assert not found, "use readable.count(n, noun) instead of 'noun(s)':\n" + "\n".join(found)
