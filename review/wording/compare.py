"""Comparing wording versions: per-message changes with word diffs, setting changes and a line
diff of the YAML files."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import pandas as pd

from review.core.clearance import REDACTED
from review.wording.messages import WordingSet, needs_compliance
from review.wording.versions import key_order

__all__ = ["MessageChange", "compare", "compare_frame", "setting_changes", "word_diff", "yaml_diff"]


# ---------------------------------------------------------------------------------------------
# Comparing versions
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MessageChange:
    key: str
    status: Literal["added", "removed", "changed", "unchanged"]
    fields: tuple[str, ...]
    old_text: str | None
    new_text: str | None
    needs_compliance: bool

    @property
    def diff(self) -> str:
        """Word-level diff, ``[-removed-]`` and ``{+added+}`` (plain text)."""
        return word_diff(self.old_text or "", self.new_text or "")


_TOKEN = re.compile(r"\S+\s*|\s+")


def word_diff(old: str, new: str) -> str:
    """Word-level diff in git's plain word-diff style: ``[-old-]{+new+}``."""
    a, b = _TOKEN.findall(old), _TOKEN.findall(new)
    out: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append("".join(a[i1:i2]))
            continue
        if i2 > i1:
            out.append("[-" + "".join(a[i1:i2]) + "-]")
        if j2 > j1:
            out.append("{+" + "".join(b[j1:j2]) + "+}")
    return "".join(out)


def compare(old: WordingSet | None, new: WordingSet) -> list[MessageChange]:
    """One row per message key of either set: added, removed, changed (which fields) or
    unchanged, with both texts. Required keys first, then custom keys by name."""
    rows: list[MessageChange] = []
    old_keys = set(old.messages) if old is not None else set()
    for key in key_order(old_keys | set(new.messages)):
        a = old.messages.get(key) if old is not None else None
        b = new.messages.get(key)
        if a is None:
            status: Literal["added", "removed", "changed", "unchanged"] = "added"
            fields: tuple[str, ...] = ("text",)
        elif b is None:
            status, fields = "removed", ("text",)
        else:
            assert old is not None
            diffs = []
            if a.text != b.text:
                diffs.append("text")
            if list(a.placeholders) != list(b.placeholders):
                diffs.append("placeholders")
            if old.locale_for(key) != new.locale_for(key):
                diffs.append("locale")
            if a.description != b.description:
                diffs.append("description")
            fields = tuple(diffs)
            status = "changed" if diffs else "unchanged"
        rows.append(
            MessageChange(
                key,
                status,
                fields,
                a.text if a is not None else None,
                b.text if b is not None else None,
                needs_compliance(key),
            )
        )
    return rows


def setting_changes(
    old: WordingSet | None, new: WordingSet, *, reveal_restricted: bool = True
) -> list[tuple[str, str]]:
    """Changes outside the messages: (field, what changed). Without ``reveal_restricted``
    (a viewer without clearance) restricted titles are counted, not named."""
    if old is None:
        return []
    out: list[tuple[str, str]] = []
    if old.locale != new.locale:
        out.append(("locale", f"{old.locale} -> {new.locale}"))
    for name in ("allowed_contacts", "restricted_titles", "company_names"):
        before, after = list(getattr(old, name)), list(getattr(new, name))
        hide = name == "restricted_titles" and not reveal_restricted
        for item in after:
            if item not in before:
                out.append((name, "added: " + (REDACTED if hide else item)))
        for item in before:
            if item not in after:
                out.append((name, "removed: " + (REDACTED if hide else item)))
    return out


def yaml_diff(old: str, new: str, old_name: str = "before", new_name: str = "after") -> str:
    """Unified line diff of two wording files (plain text, for ``st.code``)."""
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), old_name, new_name
        )
    )


def compare_frame(changes: Sequence[MessageChange]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "key": c.key,
                "status": c.status,
                "fields": ", ".join(c.fields),
                "compliance signs": "yes" if c.needs_compliance else "",
                "before": c.old_text or "",
                "after": c.new_text or "",
            }
            for c in changes
        ],
        columns=["key", "status", "fields", "compliance signs", "before", "after"],
    )
