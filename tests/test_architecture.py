"""The layout keeps its rules (issue 19): each area of review/ imports only the areas its
``__init__`` docstring names, there is no import cycle, no module grows past the size limit
without saying why, and app.py reaches the database only through review/. The layers and the
order of the areas are import-linter contracts in pyproject.toml, run by ``make lint``."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

import grimp
import pytest

from tests.helpers.paths import ROOT

REVIEW = ROOT / "review"
AREAS = sorted(p.name for p in REVIEW.iterdir() if (p / "__init__.py").exists())
MAX_LINES = 800
LONG_MARK = "# Long module:"


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("review", "storage", cache_dir=None)


def declared_uses(area: str) -> set[str]:
    """The areas named on the "May use:" line of the area's docstring ("every area" and
    "every area except X" are spelled out)."""
    doc = ast.get_docstring(ast.parse((REVIEW / area / "__init__.py").read_text())) or ""
    m = re.search(r"May use: ([^.]+)\.", doc)
    assert m, f"review/{area}/__init__.py: no 'May use:' line"
    text = " ".join(m.group(1).split())
    if text.startswith("every area"):
        excluded = set(re.findall(r"\w+", text.removeprefix("every area").replace("except", "")))
        return set(AREAS) - excluded - {area}
    return {u.strip() for u in text.split(",")} - {"storage"}


def area_imports(graph: grimp.ImportGraph, area: str) -> dict[str, list[str]]:
    """Other areas imported by modules of ``area`` -> one example import for each."""
    found: dict[str, list[str]] = {}
    for mod in [*sorted(graph.find_children(f"review.{area}")), f"review.{area}"]:
        for imp in sorted(graph.find_modules_directly_imported_by(mod)):
            parts = imp.split(".")
            if parts[0] == "review" and len(parts) > 1 and parts[1] != area:
                found.setdefault(parts[1], []).append(f"{mod} -> {imp}")
    return found


def test_every_area_says_what_it_owns_and_what_it_may_use() -> None:
    assert {"core", "demo", "cli"} <= set(AREAS)
    for area in AREAS:
        doc = ast.get_docstring(ast.parse((REVIEW / area / "__init__.py").read_text()))
        assert doc and len(doc.split()) >= 8, f"review/{area}: say what the area owns"
        assert declared_uses(area) <= set(AREAS), f"review/{area}: names an unknown area"
    assert not [p.name for p in REVIEW.glob("*.py") if p.name != "__init__.py"], (
        "every module of review/ belongs to an area package"
    )


@pytest.mark.parametrize("area", AREAS)
def test_an_area_imports_only_the_areas_it_declares(graph: grimp.ImportGraph, area: str) -> None:
    undeclared = {
        other: examples[:2]
        for other, examples in area_imports(graph, area).items()
        if other not in declared_uses(area)
    }
    assert undeclared == {}


def test_the_declarations_are_checked_not_decorative(graph: grimp.ImportGraph) -> None:
    """The check sees real imports: the areas that use others are found using them."""
    assert set(area_imports(graph, "audits")) == {"cases", "core", "corpus", "traces"}
    assert area_imports(graph, "core") == {}


def _cycles(graph: grimp.ImportGraph, modules: Iterable[str]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative so
    the interpreter's recursion limit, which other tests rely on, stays as it is)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def successors(v: str) -> list[str]:
        return sorted(w for w in graph.find_modules_directly_imported_by(v) if w in graph.modules)

    for root in sorted(modules):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, successors(root))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, todo = work[-1]
            if todo:
                w = todo.pop()
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, successors(w)))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_there_is_no_import_cycle(graph: grimp.ImportGraph) -> None:
    assert _cycles(graph, graph.modules) == []


def test_the_cycle_finder_finds_a_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "cyc"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from cyc import b\n")
    (pkg / "b.py").write_text("from cyc import a\n")
    (pkg / "c.py").write_text("from cyc import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _cycles(grimp.build_graph("cyc", cache_dir=None), ["cyc.a", "cyc.b", "cyc.c"]) == [
        ["cyc.a", "cyc.b"]
    ]


def test_a_long_module_says_why_at_its_top() -> None:
    unexplained = []
    for path in sorted(REVIEW.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        if len(lines) > MAX_LINES and not any(ln.startswith(LONG_MARK) for ln in lines[:60]):
            unexplained.append(f"{path.relative_to(ROOT)} ({len(lines)} lines)")
    assert unexplained == []


def test_app_reaches_the_database_only_through_review() -> None:
    tree = ast.parse((ROOT / "app.py").read_text(encoding="utf-8"))
    modules = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    assert not [m for m in modules if m.split(".")[0] == "storage"]


def test_no_test_module_imports_another() -> None:
    """Shared helpers live in tests/helpers and fixtures in conftest.py; a test module that
    imports another test module (or conftest) would run its tests twice or hide a helper."""
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                last = node.module.split(".")[-1]
                if node.module.startswith("tests.") and (
                    last.startswith("test_") or last == "conftest"
                ):
                    offenders.append(f"{path.relative_to(ROOT)}: {node.module}")
    assert offenders == []


def test_tests_mirror_the_areas() -> None:
    folders = {p.name for p in (ROOT / "tests").iterdir() if (p / "__init__.py").exists()}
    assert set(AREAS) <= folders, "every area has its tests folder"


def test_one_writer_of_document_versions_and_one_of_cases() -> None:
    """Every service adds documents through corpus.insert_version and cases through
    cases.insert_case (the builder, the importers, the forms and promotion alike)."""
    made: dict[str, list[str]] = {"Document": [], "Case": []}
    for path in sorted(REVIEW.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in made
            ):
                made[node.func.id].append(str(path.relative_to(ROOT)))
    assert made == {"Document": ["review/corpus/corpus.py"], "Case": ["review/cases/cases.py"]}


def test_pages_are_functions_with_a_short_main_and_no_module_over_400_lines() -> None:
    """A page runs nothing at import time (so a test can import it): every statement at module
    level defines something, and the file ends by calling main() under the __main__ guard."""
    long_ones = []
    for path in sorted((ROOT / "pages").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > 400:
            long_ones.append(path.name)
        tree = ast.parse(text)
        for node in tree.body:
            definition = isinstance(
                node,
                ast.Import
                | ast.ImportFrom
                | ast.FunctionDef
                | ast.ClassDef
                | ast.Assign
                | ast.AnnAssign,
            ) or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
            guard = isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)
            assert definition or guard, f"{path.relative_to(ROOT)}:{node.lineno} runs at import"
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                calls = [n for n in ast.walk(node.value) if isinstance(n, ast.Call)]
                names = {ast.unparse(c.func) for c in calls}
                assert not {n for n in names if n.startswith(("st.", "ui."))} - {
                    "st.column_config.LinkColumn",
                    "st.column_config.NumberColumn",
                    "st.column_config.TextColumn",
                    "st.column_config.ProgressColumn",
                }, f"{path.relative_to(ROOT)}:{node.lineno} calls Streamlit at import"
        if path.name.endswith("_page.py"):
            last = tree.body[-1]
            assert isinstance(last, ast.If) and ast.unparse(last.body[0]) == "main()", path.name
    assert long_ones == []


def test_the_suite_keeps_only_the_folders_of_failed_tests(pytestconfig: pytest.Config) -> None:
    """Each page test copies a 15 MB demo database into its tmp_path: kept for every test, one
    run wrote 6 GB and pytest keeps three runs, which filled CI's disk (every test after that
    errored at setup). A failed test's folder stays for a post-mortem."""
    assert pytestconfig.getini("tmp_path_retention_policy") == "failed"
