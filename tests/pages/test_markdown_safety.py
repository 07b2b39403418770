"""Every value a page shows where Streamlit renders Markdown goes through the one escaper.

Titles, headers, captions, alerts, expander and tab labels, metric labels, every widget label,
tooltip (``help=``), placeholder and radio/pills option render GitHub-flavoured Markdown: a name
holding ``![x](http://evil/x.png)`` would make the browser fetch that image. This test reads the
source of app.py and every page (AST) and fails on a call that puts a value there which is not
a literal, a number formatted as a number, a call of ``ui.plain`` / ``plain`` or an entry of the
justified allowlist below. A new page or a new caption cannot forget the rule.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.paths import ROOT

# Calls whose first positional argument is Markdown (a body or a label).
FIRST_ARG = frozenset(
    {
        *("title", "header", "subheader", "markdown", "caption", "write", "toast"),
        *("info", "warning", "error", "success", "exception"),
        *("expander", "popover", "status", "spinner", "dialog", "metric"),
        *("button", "download_button", "form_submit_button", "link_button"),
        *("checkbox", "toggle", "radio", "selectbox", "multiselect", "select_slider"),
        *("slider", "text_input", "text_area", "number_input", "date_input", "time_input"),
        *("file_uploader", "color_picker", "camera_input", "audio_input", "chat_input"),
        *("pills", "segmented_control", "feedback"),
    }
)
# Calls with Markdown elsewhere: the labels of st.tabs, the text of st.progress.
OTHER_POSITIONS = {"tabs": 0, "progress": 1}
# Calls with Markdown only in keywords: st.page_link's label, a dataframe column's help.
KEYWORDS_ONLY = frozenset({"page_link"})
# Keyword arguments that render Markdown wherever they appear in those calls.
MARKDOWN_KEYWORDS = frozenset(
    {"label", "body", "help", "placeholder", "caption", "captions", "text", "title"}
)
# Widgets whose options are rendered as Markdown: their options (or format_func) must be safe.
MARKDOWN_OPTIONS = frozenset({"radio", "pills", "segmented_control"})
# st.table renders every cell as Markdown: pages show tables with st.dataframe instead.
FORBIDDEN = frozenset({"table"})

# Calls that return text without Markdown from anything: the escaper, and numbers.
SAFE_CALLS = frozenset({"plain", "len", "int", "round", "float", "sum", "min", "max", "abs"})

# Expressions that are safe though the test cannot see it, and why: "expression" anywhere, or
# "file::expression" in that file only. Keep it short: wrapping a value in ui.plain (or
# formatting a number as a number, ``{n:d}``) is always the better fix.
ALLOWED: dict[str, str] = {
    "pages/admin_page.py::ROLE_HELP_TEXT": "Markdown built from the fixed Role enum and the "
    "ROLE_HELP constants of review.core.identity: code, no stored value",
    "display.terms_help": "builds a Markdown list; every taxonomy label and definition in it "
    "goes through review.core.escape.markdown_text (tests/cases/test_display.py)",
    "display.category_defaults_help": "builds a Markdown list; every taxonomy value in it "
    "goes through review.core.escape.markdown_text (tests/cases/test_display.py)",
    "ui.link": "a URL of the app, its query values encoded by ui.link (the link's text is "
    "checked like any other value)",
    "pages/audit/plan_form.py::audit_plans.ALLOCATIONS": "the fixed allocation names of "
    "review/audits/plans.py: code, not data",
    "pages/audit/queue_tab.py::vocabulary.VERDICTS[v]": "the fixed verdict labels of "
    "review/audits/vocabulary.py: code, not data",
    "pages/builder/params.py::p.label": "an operator parameter's label, written in the "
    "operator's code (review/builder/operators_*.py), not data",
    "pages/builder/params.py::f.help": "an operator parameter's help, written in the "
    "operator's code (review/builder/operators_*.py), not data",
    "DIFF_LEGEND": "a constant of pages/wording/common.py (the diff markers' legend)",
    "pages/review_page.py::readable.badge": "a coloured badge of fixed words (pass, fail, "
    "undefined) from a stored boolean: review/core/readable.py, no stored text",
    "pages/runs_page.py::runmetrics.DRIFT_METRICS.__getitem__": "the fixed metric names of "
    "review/evaluation/runmetrics.py: code, not data",
    "pages/thresholds/headline_view.py::readable.badge": "a coloured pass/fail badge of "
    "review/core/readable.py around fixed words written in that file, no stored value",
    "pages/ui.py::label": "the label of ui.text, which this test checks at every call of "
    "ui.text (see MARKDOWN_KEYWORDS: label=)",
    **{
        f"pages/ui.py::{n}": "a whole number paginate computes (ui.paginate)"
        for n in ("first", "last", "total", "page", "pages")
    },
}

# A format spec a str cannot take (``d``, ``.2f``, ``,``, ``%``, ``%Y-%m-%d``): the value is a
# number or a date, which carries no Markdown. A spec a str accepts (``>10``, ``.5``) is not.
_STR_SPEC = re.compile(r"^(.?[<>^=])?0?\d*(\.\d+)?s?$")


def _dotted(node: ast.expr) -> str:
    return ast.unparse(node)


def _module_constants(tree: ast.Module) -> set[str]:
    """Module-level names bound once to a literal str, or to a list/tuple of literal strs."""
    names: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
            value = stmt.value
            literal = isinstance(value, ast.Constant) and isinstance(value.value, str)
            literal = literal or (
                isinstance(value, ast.List | ast.Tuple)
                and all(isinstance(e, ast.Constant) for e in value.elts)
            )
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if literal:
                names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


class Names:
    """What the names of one source file are bound to: module constants, and every value a
    plain assignment gives a name anywhere in the file (a name is safe when all of them are;
    a name that is also a parameter, a loop variable or unpacked is never safe)."""

    def __init__(self, tree: ast.Module) -> None:
        self.constants = _module_constants(tree)
        self.values: dict[str, list[ast.expr]] = {}
        self.opaque: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        self.values.setdefault(t.id, []).append(node.value)
                    else:
                        self.opaque.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
            elif isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(
                node.target, ast.Name
            ):
                if isinstance(node, ast.AnnAssign) and node.value is not None:
                    self.values.setdefault(node.target.id, []).append(node.value)
                else:
                    self.opaque.add(node.target.id)
            elif isinstance(node, ast.arg):
                self.opaque.add(node.arg)
            elif isinstance(node, ast.For | ast.comprehension | ast.withitem | ast.NamedExpr):
                target = getattr(node, "target", None) or getattr(node, "optional_vars", None)
                if target is not None:
                    self.opaque.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        self._checking: set[str] = set()
        self.path = ""

    def allowed(self, node: ast.expr) -> bool:
        text = ast.unparse(node)
        return text in ALLOWED or f"{self.path}::{text}" in ALLOWED

    def safe(self, name: str) -> bool:
        if name in self.constants:
            return True
        if name in self.opaque or name not in self.values or name in self._checking:
            return False
        self._checking.add(name)
        try:
            return all(not list(_unsafe(v, self)) for v in self.values[name])
        finally:
            self._checking.discard(name)


def _number_format(part: ast.FormattedValue) -> bool:
    """``{n:d}``, ``{day:%Y-%m-%d}``: formatted as a number or a date, not as text."""
    spec = ""
    if isinstance(part.format_spec, ast.JoinedStr):
        spec = "".join(str(v.value) for v in part.format_spec.values if isinstance(v, ast.Constant))
    return bool(spec) and not _STR_SPEC.match(spec)


def _pieces(node: ast.expr) -> list[ast.expr] | None:
    """The parts a composite expression shows (None: ``node`` is not one)."""
    if isinstance(node, ast.JoinedStr):
        return [
            part.value
            for part in node.values
            if isinstance(part, ast.FormattedValue) and not _number_format(part)
        ]
    if isinstance(node, ast.BinOp):
        return [node.left, node.right]
    if isinstance(node, ast.IfExp):
        return [node.body, node.orelse]
    if isinstance(node, ast.BoolOp):
        return list(node.values)
    if isinstance(node, ast.List | ast.Tuple):
        return list(node.elts)
    return None


def _call_pieces(node: ast.Call, names: Names) -> list[ast.expr] | None:
    """The parts of a call's result to check: none when the call escapes, each part of
    ``"sep".join(parts)``; None for any other call."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else None
    name = func.id if isinstance(func, ast.Name) else name
    if name in SAFE_CALLS or names.allowed(func):
        return []
    # readable.count(n, noun) formats n as a number ("{n:,}", which a str cannot take) and
    # readable.plural(n, word, words) does not show n: what it shows are the words, checked
    if name in ("count", "plural") and _dotted(func) in ("readable.count", "readable.plural"):
        return [*node.args[1:], *(k.value for k in node.keywords)]
    # "sep".join(parts): safe when every part is
    if name == "join" and isinstance(func, ast.Attribute) and len(node.args) == 1:
        arg = node.args[0]
        if isinstance(func.value, ast.Constant) and isinstance(
            arg, ast.GeneratorExp | ast.ListComp
        ):
            return [arg.elt]
    return None


def _unsafe(node: ast.expr, names: Names) -> Iterator[ast.expr]:
    """The parts of ``node`` that may put unescaped text into Markdown."""
    if isinstance(node, ast.Constant):
        return
    parts = _pieces(node)
    if parts is None and isinstance(node, ast.Call):
        parts = _call_pieces(node, names)
    if parts is not None:
        for part in parts:
            yield from _unsafe(part, names)
        return
    if isinstance(node, ast.Name) and names.safe(node.id):
        return
    if names.allowed(node):
        return
    yield node


def _imported_modules(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for stmt in ast.walk(tree):
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in stmt.names)
    return names - {"st"}


def _markdown_arguments(call: ast.Call, name: str) -> Iterator[ast.expr]:
    if name in FIRST_ARG and call.args:
        yield call.args[0]
    position = OTHER_POSITIONS.get(name)
    if position is not None and len(call.args) > position:
        yield call.args[position]
    for kw in call.keywords:
        if kw.arg in MARKDOWN_KEYWORDS:
            yield kw.value
    if name in MARKDOWN_OPTIONS:
        fmt = next((kw.value for kw in call.keywords if kw.arg == "format_func"), None)
        if isinstance(fmt, ast.Lambda):
            yield fmt.body
        elif fmt is not None:
            yield fmt  # a named function: allowed only when it is the escaper
        else:
            options = call.args[1] if len(call.args) > 1 else None
            options = next((kw.value for kw in call.keywords if kw.arg == "options"), options)
            if options is not None:
                yield options


def violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = Names(tree)
    names.path = str(path.relative_to(ROOT))
    modules = _imported_modules(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.IfExp):  # (st.success if ok else st.warning)(message)
            func = func.body
        if not isinstance(func, ast.Attribute):
            continue
        name = func.attr
        receiver = func.value
        where = f"{path.relative_to(ROOT)}:{node.lineno}"
        if _dotted(func) == "ui.text":  # its label is a caption
            for kw in node.keywords:
                found += [
                    f"{where}: ui.text(label=...) shows {_dotted(bad)!r} unescaped"
                    for bad in _unsafe(kw.value, names)
                    if kw.arg == "label"
                ]
            continue
        if isinstance(receiver, ast.Name) and receiver.id in modules:
            continue  # a function of another module (queue.progress), not a Streamlit call
        if name in FORBIDDEN and _dotted(receiver) == "st":
            found.append(f"{where}: st.{name} renders its cells as Markdown")
            continue
        keyed = name in KEYWORDS_ONLY or name.endswith("Column")
        if name not in FIRST_ARG and name not in OTHER_POSITIONS and not keyed:
            continue
        for arg in _markdown_arguments(node, name):
            if isinstance(arg, ast.Name | ast.Attribute) and _dotted(arg) in {"ui.plain", "plain"}:
                continue  # format_func=ui.plain
            for bad in _unsafe(arg, names):
                found.append(f"{where}: {name}(...) shows {_dotted(bad)!r} unescaped")
    return found


def page_sources() -> list[Path]:
    return sorted([ROOT / "app.py", *(ROOT / "pages").rglob("*.py")])


def test_every_value_shown_in_markdown_goes_through_the_escaper() -> None:
    found = [v for p in page_sources() for v in violations(p)]
    assert not found, "wrap these in ui.plain (or format numbers as numbers, {n:d}):\n" + "\n".join(
        found
    )


def test_the_scanner_sees_what_it_must(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check itself: each way a value reaches Markdown is caught, each safe form passes."""
    src = tmp_path / "pages" / "probe.py"
    src.parent.mkdir()
    src.write_text(
        "import streamlit as st\nfrom pages import ui\nfrom review.audits import queue\n"
        "TABS = ['a', 'b']\n"
        "st.subheader(title)\n"  # 5: bad
        "st.caption(f'Run {run.name} of {n:d} at {day:%Y-%m-%d}')\n"  # 6: run.name
        "c1.info('Closed by ' + view.closed_by)\n"  # 7: bad
        "st.expander(ui.plain(name))\n"
        "st.tabs([f'{ui.plain(n)}', 'x'])\n"
        "st.tabs(TABS)\n"
        "st.selectbox('Run', runs, help=run.note)\n"  # 11: bad help
        "st.radio('Pick', names)\n"  # 12: options render Markdown
        "st.radio('Pick', names, format_func=ui.plain)\n"
        "st.radio('Pick', names, format_func=lambda n: labels[n])\n"  # 14: bad
        "queue.progress(engine, actor, 1)\n"
        "bar.progress(0.5, text=f'{done:d} of {total:d}')\n"
        "st.table(frame)\n"  # 17: forbidden
        "st.caption(', '.join(ui.plain(a) for a in view.attendees))\n"
        "st.caption(', '.join(a for a in view.attendees))\n"  # 19: bad
        "st.page_link('pages/x.py', label=f'Open {run.name}')\n"  # 20: bad
        "st.column_config.TextColumn('Name', help=term.definition)\n"  # 21: bad
        "(st.success if ok else st.warning)(message)\n",  # 22: bad
        encoding="utf-8",
    )
    import tests.pages.test_markdown_safety as me

    monkeypatch.setattr(me, "ROOT", tmp_path)
    found = violations(src)
    lines = sorted(int(v.split(":")[1]) for v in found)
    assert lines == [5, 6, 7, 11, 12, 14, 17, 19, 20, 21, 22], found
