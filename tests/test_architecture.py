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


OUR_PACKAGES = ("review", "storage", "pages")
SEAM_CHECKED = ("review", "storage", "pages", "app.py", "serve.py", "tests", "benchmarks")
PATCHERS = {"setattr", "delattr", "patch"}
#: private names a test may patch, each with why it stays private
PATCHED_PRIVATE = {
    "review.traces.importer._close_import": "a killed import never closes its run; public, it"
    " would be a write service without a role check of its own (tests/test_access.py)",
    "review.audits.promote._promoted_elsewhere": "another reviewer's promotion landing between"
    " the checks and the link of one transaction can only be staged by patching this look-up",
    "review.audits.promote._link": "a failure after the case is inserted is staged here to show"
    " the case rolls back; public, it would be a write service without a role check",
}


def _is_private(name: str) -> bool:
    """``_name`` is private to its module; dunders (``__all__``, ``__file__``) are not."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _ours(module: str) -> bool:
    return module.split(".")[0] in OUR_PACKAGES


def _imported_from(own: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module of a ``from ... import``, relative ones resolved."""
    if node.level == 0:
        return node.module or ""
    package = own.split(".") if is_package else own.split(".")[:-1]
    package = package[: len(package) - (node.level - 1)]
    return ".".join([*package, *([node.module] if node.module else [])])


def _call_name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _bindings(tree: ast.Module, own: str, is_package: bool) -> dict[str, str]:
    """Local name -> the module (or module.object) of ours it was imported as."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = _imported_from(own, is_package, node)
            for alias in node.names:
                if _ours(module):
                    bound[alias.asname or alias.name] = f"{module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _ours(alias.name):
                    top = alias.name.split(".")[0]
                    bound[alias.asname or top] = alias.name if alias.asname else top
    return bound


def _patched(node: ast.Call, bound: dict[str, str]) -> str | None:
    """``monkeypatch.setattr(module, "_name", ...)`` or ``patch("review.x._name")``."""
    first = node.args[0] if node.args else None
    second = node.args[1] if len(node.args) > 1 else None
    name = second.value if isinstance(second, ast.Constant) else None
    if isinstance(first, ast.Name) and first.id in bound and isinstance(name, str):
        return f"{bound[first.id]}.{name}" if _is_private(name) else None
    dotted = first.value if isinstance(first, ast.Constant) else None
    if isinstance(dotted, str) and _ours(dotted) and _is_private(dotted.rsplit(".", 1)[-1]):
        return dotted
    return None


def private_uses(source: str, own: str, is_package: bool = False) -> list[tuple[int, str]]:
    """Where module ``own`` uses a private name of another of our modules: ``from <ours>
    import _name``, ``<something imported from ours>._name``, and a test's patching of one
    (``monkeypatch.setattr(module, "_name", ...)``, ``patch("review.x._name")``). A module may
    use its own private names (importparts runs itself as a subprocess)."""
    tree = ast.parse(source)
    bound = _bindings(tree, own, is_package)
    found: set[tuple[int, str]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = _imported_from(own, is_package, node)
            for alias in node.names:
                if _ours(module) and module != own and _is_private(alias.name):
                    found.add((node.lineno, f"from {module} import {alias.name}"))
        elif isinstance(node, ast.Attribute) and _is_private(node.attr):
            chain, base = [node.attr], node.value
            while isinstance(base, ast.Attribute):
                chain.append(base.attr)
                base = base.value
            if isinstance(base, ast.Name) and base.id in bound:
                dotted = ".".join([bound[base.id], *reversed(chain)])
                if dotted.rsplit(".", 1)[0] != own:
                    found.add((node.lineno, dotted))
        elif isinstance(node, ast.Call) and _call_name(node.func) in PATCHERS:
            target = _patched(node, bound)
            if target and target.rsplit(".", 1)[0] != own and target not in PATCHED_PRIVATE:
                found.add((node.lineno, f"{target} patched"))
    return sorted(found)


def test_modules_use_only_the_public_names_of_others() -> None:
    """Each module's interface is its public names (issue 36): no module, test or benchmark
    imports or patches another's ``_private`` name, so a split module keeps a seam to change
    behind. Other libraries' underscore APIs (``row._mapping``, ``_asdict``) are not ours and
    stay allowed."""
    offenders = []
    for name in SEAM_CHECKED:
        top = ROOT / name
        for path in [top] if top.is_file() else sorted(top.rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            package = parts[-1] == "__init__"
            own = ".".join(parts[:-1] if package else parts)
            for line, use in private_uses(path.read_text(encoding="utf-8"), own, package):
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {use}")
    assert offenders == []


def test_the_seam_check_finds_private_uses() -> None:
    """Made-up private names (the probe is parsed, never run), so no rename touches them."""
    source = (
        "import review.traces.importer as imp\n"
        "from review.cases import cases\n"
        "from review.audits.plans import _probe_plan, plan_stats\n"
        "from .rows import _probe_copy\n"
        "from review.traces import importparts\n"
        "def t(monkeypatch, row):\n"
        "    cases._probe_norm(1)\n"
        "    imp._probe_insert\n"
        "    monkeypatch.setattr(cases, '_probe_cores', lambda: 1)\n"
        "    monkeypatch.setattr('review.traces.importer._probe_close', None)\n"
        "    monkeypatch.setattr('review.traces.importer._close_import', None)\n"
        "    row._mapping, cases.__name__, plan_stats, importparts._probe_serve\n"
    )
    assert private_uses(source, "review.traces.importparts") == [
        (3, "from review.audits.plans import _probe_plan"),
        (4, "from review.traces.rows import _probe_copy"),
        (7, "review.cases.cases._probe_norm"),
        (8, "review.traces.importer._probe_insert"),
        (9, "review.cases.cases._probe_cores patched"),
        (10, "review.traces.importer._probe_close patched"),
    ]
