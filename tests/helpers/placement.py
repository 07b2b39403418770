"""Where an AppTest shows a message: right under the control that caused it (issue 35 item 4),
read from the element tree in page order."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from streamlit.testing.v1 import AppTest

from tests.helpers.pages import readable

MESSAGES = frozenset({"success", "info", "warning", "error"})


def leaves(node: Any) -> Iterator[Any]:
    """Every element under ``node`` in page order (containers are walked, not yielded)."""
    children = getattr(node, "children", None)
    if isinstance(children, dict):
        for i in sorted(children):
            yield from leaves(children[i])
    else:
        yield node


def said_under(at: AppTest, control: str) -> list[str]:
    """The messages shown right after the control whose key or label is ``control`` (a
    button, a form's submit button), or after the element whose text is ``control`` (where
    a control was), before any other element; fails when there is no such element."""
    shown = list(leaves(at.main))
    at_control = [
        i
        for i, e in enumerate(shown)
        if getattr(e, "key", None) == control
        or (getattr(e, "type", "") == "button" and getattr(e, "label", None) == control)
        or (getattr(e, "type", "") not in MESSAGES and readable(e) == control)
    ]
    assert at_control, f"no control {control!r} on the page"
    out: list[str] = []
    for e in shown[at_control[-1] + 1 :]:
        if getattr(e, "type", "") not in MESSAGES:
            break
        out.append(readable(e))
    return out
