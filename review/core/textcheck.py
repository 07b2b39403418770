"""Text the database can store: PostgreSQL's text type cannot hold a NUL character."""

from __future__ import annotations

from collections.abc import Mapping

NUL_PROBLEM = "contains a NUL character (\\x00), which cannot be stored"


def nul_field(data: object, path: str = "") -> str | None:
    """The dotted path of the first text in ``data`` (nested mappings and lists, keys
    included) that holds a NUL character; ``(record)`` for the top level; None when clean."""
    if isinstance(data, str):
        return (path or "(record)") if "\x00" in data else None
    if isinstance(data, Mapping):
        for k, v in data.items():
            here = f"{path}.{k}" if path else str(k)
            if isinstance(k, str) and "\x00" in k:
                return here
            found = nul_field(v, here)
            if found is not None:
                return found
    elif isinstance(data, list | tuple):
        for i, v in enumerate(data):
            found = nul_field(v, f"{path}.{i}" if path else str(i))
            if found is not None:
                return found
    return None
