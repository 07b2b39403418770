"""The documentation as the tests read it: README.md and the pages of docs/ (the site that
`make docs` serves), so a figure or example a page quotes is checked where it is written."""

from __future__ import annotations

import re
from functools import cache

from tests.helpers.paths import ROOT

DOCS = ROOT / "docs"
#: the example files the docs include (docs/import.md)
EXAMPLES = ROOT / "examples" / "formats"


def example(name: str) -> str:
    """The text of an example file of the docs (``"cases.jsonl"``)."""
    return (EXAMPLES / name).read_text(encoding="utf-8")


@cache
def text(name: str) -> str:
    """``"README"`` (README.md), or the docs page ``name`` (``"import"``: docs/import.md)."""
    path = ROOT / "README.md" if name == "README" else DOCS / f"{name}.md"
    return path.read_text(encoding="utf-8")


def flat(name: str) -> str:
    """The page's text with its line breaks and runs of spaces as single spaces."""
    return " ".join(text(name).split())


def block(name: str, lang: str, after: str) -> str:
    """The first ```lang code block of page ``name`` after the text ``after``."""
    page = text(name)
    m = re.compile(rf"```{lang}\n(.*?)\n```", re.S).search(page, page.index(after))
    assert m is not None, f"no {lang} block after {after!r} in {name}"
    return m.group(1)
