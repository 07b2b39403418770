"""Text the database can store (PostgreSQL's text type cannot hold a NUL character), and
JSON lines read with a clear error."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from review.core.errors import InputError

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


def load_json_line(line: str, where: str) -> Any:
    """One JSON-lines record; a line that is not JSON (or nested or numbered beyond what
    Python reads) raises InputError naming ``where`` (e.g. ``"file.jsonl: line 3"``)."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise InputError(f"{where}: not valid JSON (nested too deeply)") from None
    except ValueError:  # an integer of more digits than Python converts
        raise InputError(f"{where}: not valid JSON (a number too long to read)") from None
