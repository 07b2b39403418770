"""Pages show untrusted text as text: never HTML, and messages quoting input go through ui.plain."""

from __future__ import annotations

import ast
import re

from tests.helpers.pages import readable
from tests.helpers.paths import ROOT


def _literal_constants(tree: ast.Module) -> set[str]:
    """Module-level names bound once to a plain string literal (no f-string, no concatenation
    of values)."""
    bound: dict[str, int] = {}
    literal: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                bound[target.id] = bound.get(target.id, 0) + 1
                if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                    literal.add(target.id)
    return {name for name in literal if bound[name] == 1}


def test_untrusted_text_is_never_rendered_as_html() -> None:
    """No page renders HTML from a value: ``st.html`` only ever gets a module constant bound
    to a string literal (the Label page's style and key script), never text built at run
    time, and ``unsafe_allow_html`` is never used."""
    seen = 0
    for p in [ROOT / "app.py", *(ROOT / "pages").rglob("*.py")]:
        src = p.read_text(encoding="utf-8")
        assert "unsafe_allow_html=True" not in src, p
        tree = ast.parse(src)
        constants = _literal_constants(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "html"
            ):
                seen += 1
                first = node.args[0] if node.args else None
                assert isinstance(first, ast.Name) and first.id in constants, (
                    f"{p.name}:{node.lineno}: st.html of something other than a literal constant"
                )
    assert seen >= 2  # the Label page's style and key script are checked, not skipped


def test_messages_that_quote_input_go_through_ui_plain() -> None:
    """Error and status messages quote uploaded values, names and spans of documents; shown
    raw, markdown would fetch remote images and make links. Every exception a page shows in
    st.error/warning/info/success/toast is passed through ui.plain."""
    raw = re.compile(
        r"st\.(error|warning|info|success|toast)\((str\((exc|e)\)|f\"[^\"]*\{(exc|e)[!:}])"
    )
    for p in [ROOT / "app.py", *(ROOT / "pages").rglob("*.py")]:
        src = p.read_text(encoding="utf-8")
        bad = [m.group(0) for m in raw.finditer(src)]
        assert not bad, f"{p.name}: {bad[:3]}"


def test_ui_plain_escapes_markdown_and_breaks_links() -> None:
    from pages.ui import plain

    raw = "line 9: field jurisdiction: '![p](http://evil.example/x.png)' <b>x</b> *y* :smile:"
    shown = plain(raw)
    # every character Markdown gives a meaning to is escaped, the address is broken
    assert not re.search(r"(?<!\\)[\[\]<>()*!:`_#|~$]", shown.replace("\u2060", ""))
    assert "http://" not in shown and "\\!\\[p\\]\\(http\\:\u2060//evil\\.example" in shown
    assert readable(shown) == raw  # and reads exactly as written
    assert plain("www.evil.example") == "www\u2060\\.evil\\.example"
    assert plain("\\[x](y)") == "\\\\\\[x\\]\\(y\\)"  # an escape in the input stays text
    assert readable(plain("\\[x](y)")) == "\\[x](y)"


def test_errors_meant_for_the_user_share_one_base_class() -> None:
    from review.core.errors import (
        InputError,
        PermissionDenied,
        PolicyFileError,
        StaleWriteError,
        WorkbenchError,
    )
    from review.core.uploads import UploadTooLarge

    for cls in (InputError, PermissionDenied, PolicyFileError, StaleWriteError, UploadTooLarge):
        assert issubclass(cls, WorkbenchError), cls
    try:
        raise StaleWriteError("changed by someone else")
    except WorkbenchError as exc:  # what pages and the command line catch
        assert "someone else" in str(exc)


def test_pages_catch_workbench_errors_not_lists_of_classes() -> None:
    """One rule: pages show errors meant for the user through ui.reported / ui.show_error
    (or catch WorkbenchError), never by listing the classes again."""
    listed = re.compile(r"except \((?:InputError|PermissionDenied|PolicyFileError|StaleWriteError)")
    for p in [ROOT / "app.py", *(ROOT / "pages").rglob("*.py")]:
        assert not listed.search(p.read_text(encoding="utf-8")), p.name


def test_pages_show_errors_only_through_ui() -> None:
    """One way to show an error: ``ui.error`` (a message), ``ui.reported`` or
    ``ui.show_error`` (an exception), each through the escaper; no page or app.py calls
    ``.error`` of Streamlit or of a container itself. pages/ui.py is where it happens."""
    ui_module = ROOT / "pages" / "ui.py"
    found = []
    for p in [ROOT / "app.py", *(ROOT / "pages").rglob("*.py")]:
        if p == ui_module:
            continue
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            # st.error or a container's .error, called or passed on as a value
            # ((st.error if bad else st.success)(text)); ui.error is the one allowed
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "error"
                and not (isinstance(node.value, ast.Name) and node.value.id == "ui")
            ):
                found.append(f"{p.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "show errors through ui.error / ui.reported:\n" + "\n".join(
        sorted(set(found))
    )
