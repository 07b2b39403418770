"""AppTest of the router (app.py) or of a single page through tests/apps/one_page.py, signed in
as a given user, and the demo users the page tests act as."""

from __future__ import annotations

import ast
import re
from typing import Any

import pytest
from sqlalchemy import Engine, inspect
from streamlit.testing.v1 import AppTest

from review.admin import users
from review.core.identity import Actor
from storage.db import make_engine
from tests.helpers.paths import ROOT


def page_app(
    url: str, monkeypatch: pytest.MonkeyPatch, page: str, user: str, **query: str
) -> AppTest:
    """``page`` is relative to the project root, e.g. "pages/traces.py"."""
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", url)
    monkeypatch.setenv("WB_TEST_PAGE", str(ROOT / page))
    monkeypatch.setenv("WB_TEST_USER", user)
    at = AppTest.from_file(str(ROOT / "tests" / "apps" / "one_page.py"), default_timeout=90)
    for k, v in query.items():
        at.query_params[k] = v
    return at


TIMEOUT = 60


def open_tab(at: AppTest, label: str, key: str = "thr_tab") -> AppTest:
    """Open the tab ``label`` of a page's lazy tabs (``st.tabs`` with ``key`` and
    ``on_change="rerun"``, which draw the open tab only), as a click on it does: a run with the
    tabs' state set to it."""
    at.session_state[key] = label
    return at.run()


def app(
    url: str,
    monkeypatch: pytest.MonkeyPatch,
    user: str | None = None,
    *,
    pick: bool = True,
    **query: str,
) -> AppTest:
    """An AppTest of the router, signed in (local mode) as ``user`` from the first run; with
    no ``user``, as the first active user by name, as a person picking on the user picker
    would (``pick=False`` leaves the session on the picker).

    The picker stores its choice under ``wb_user_id``; the browser journeys click it.
    """
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", url)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    eng = make_engine(url)
    try:
        if user is not None:
            row = users.get_by_email(eng, user)
            assert row is not None
            at.session_state["wb_user_id"] = row.id
        elif pick and not query.get("as") and inspect(eng).has_table("users"):
            people = users.list_users(eng, include_inactive=False)
            if people:
                at.session_state["wb_user_id"] = people[0].id
    finally:
        eng.dispose()
    for k, v in query.items():
        at.query_params[k] = v
    return at


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


ADA = "ada.admin@brightwave.example"


INES = "ines.duarte@brightwave.example"


PAULA = "paula.kim@brightwave.example"


RAVI = "ravi.menon@brightwave.example"


CHEN = "chen.li@brightwave.example"


_ESCAPED = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>~$:])")


def readable(element: object) -> str:
    """What the person reads in an alert, caption or header: its Markdown with the backslashes
    and word joiners of the pages' escaper (``ui.plain``) taken out."""
    value = str(getattr(element, "value", element))
    return _ESCAPED.sub(r"\1", value).replace("\u2060", "")


def page_table() -> tuple[Any, ...]:
    """app.py's ``PAGES`` (its PageSpec table) as objects, read without running the router:
    only app.py's imports and its module-level constants are executed."""
    tree = ast.parse((ROOT / "app.py").read_text(encoding="utf-8"))
    keep: list[ast.stmt] = [
        node
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
        or (
            isinstance(node, ast.Assign)
            and all(isinstance(t, ast.Name) and t.id.lstrip("_").isupper() for t in node.targets)
        )
    ]
    namespace: dict[str, Any] = {}
    exec(compile(ast.Module(body=keep, type_ignores=[]), "app.py", "exec"), namespace)
    return tuple(namespace["PAGES"])


def page_files() -> list[str]:
    """Every page app.py registers ("pages/x_page.py"), read from its PageSpec table."""
    source = (ROOT / "app.py").read_text(encoding="utf-8")
    return [f"pages/{f}" for f in re.findall(r'PageSpec\(\s*"\w+",\s*"(\w+\.py)"', source)]


_MARKDOWN_VALUES = {
    *("markdown", "caption", "title", "header", "subheader", "latex"),
    *("info", "warning", "error", "success", "toast"),
}


def markdown_shown(at: AppTest) -> list[str]:
    """Every text of the page that Streamlit renders as Markdown: the bodies of markdown,
    captions, titles, headers and alerts, and the labels (and radio options) of every
    widget, expander, tab, metric and page link."""
    found: list[str] = []

    def walk(node: object) -> None:
        for child in getattr(node, "children", {}).values():
            kind = getattr(child, "type", None)
            if kind in _MARKDOWN_VALUES and isinstance(getattr(child, "value", None), str):
                found.append(child.value)
            label = getattr(child, "label", None)
            if isinstance(label, str):
                found.append(label)
            if kind == "radio":
                found.extend(str(o) for o in child.options)
            walk(child)

    walk(at._tree)
    return found


_UNESCAPED = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>~$:])")


def live_markdown(markdown: str) -> list[str]:
    """What ``markdown`` would make live: an image or link (``![``, ``](``), HTML (``<``),
    or an address GFM turns into a link (``http://``, ``www.``, ``name@host.tld``) after
    reading the escapes. Empty when everything in it shows as text."""
    bare = re.sub(r"\\.", "_", markdown)  # an escaped character is text
    live = [m for m in ("![", "](", "<") if m in bare]
    as_read = _UNESCAPED.sub(r"\1", markdown)  # what the autolink pass sees
    live += re.findall(r"(?i)\b[a-z][a-z0-9+.-]*://|\bwww\.|[\w.+-]@[\w-]+\.\w", as_read)
    return live


def actor_of(engine: Engine, email: str) -> Actor:
    """The demo user ``email`` as the pages would act for them."""
    row = users.get_by_email(engine, email)
    assert row is not None
    return users.to_actor(row)
