"""One reader of JSON-lines records for every importer (documents, cases, run outputs, traces).

A record is read in three steps, each refusing with a reason the importer places at its file
and line (``file.jsonl: line 3: field decision: ...``):

* :func:`parse_json` decodes one JSON text; a text that is not JSON, is nested deeper than
  Python reads, or holds a number of more digits than Python converts raises
  :class:`JsonProblem` (``not valid JSON (...)``), and so does an object that gives one key
  twice (``json.loads`` keeps the last silently, so the two values could mean different
  things to different readers): ``field KEY: appears twice in one JSON object``;
* :func:`json_object` also requires an object and text the database can store (no NUL);
* :func:`validate_record` checks the object against a pydantic model and names the first
  field that is wrong (``unknown field``, ``required field is missing`` or the model's own
  message).

:func:`json_lines` yields the non-blank lines of a file with their numbers, so blank lines are
allowed everywhere and a byte-order mark on the first line is ignored.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from review.core.errors import InputError
from review.core.textcheck import NUL_PROBLEM, nul_field

__all__ = [
    "JsonProblem",
    "describe",
    "first_problem",
    "json_lines",
    "json_object",
    "parse_json",
    "quoted",
    "read_record",
    "validate_record",
]

M = TypeVar("M", bound=BaseModel)


class JsonProblem(ValueError):
    """Why a text is not a record; ``field`` is the field it concerns (None: the record)."""

    def __init__(self, reason: str, field: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.field = field

    def where(self, where: str) -> InputError:
        """The problem as an InputError at ``where`` (``file: line N``)."""
        at = f" field {self.field}:" if self.field else ""
        return InputError(f"{where}:{at} {self.reason}")


def json_lines(lines: Iterable[str]) -> Iterator[tuple[int, str, str]]:
    """(line number, the line without its newline, its stripped text) for non-blank lines."""
    for n, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n")
        if n == 1:
            line = line.removeprefix("\ufeff")
        text = line.strip()
        if text:
            yield n, line, text


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise JsonProblem("appears twice in one JSON object", key)
            seen.add(key)
    return out


def parse_json(text: str, field: str | None = None) -> Any:
    """Decode one JSON text, or raise :class:`JsonProblem` saying why it cannot be read."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except JsonProblem as exc:
        if field is not None:
            exc.field = f"{field}.{exc.field}"
        raise
    except json.JSONDecodeError as exc:
        raise JsonProblem(f"not valid JSON ({exc.msg} at column {exc.colno})", field) from None
    except RecursionError:
        raise JsonProblem("not valid JSON (nested too deeply)", field) from None
    except ValueError:  # an integer of more digits than Python converts
        raise JsonProblem("not valid JSON (a number too long to read)", field) from None


#: the most words of a value that a message quotes: two fewer than the run of words by which
#: a text retells a restricted document (``review.core.clearance.RUN``), so that with the
#: message's word before and after it the quote still makes no run, and an error message
#: about an untrusted value never carries a document's words on to a page, a log, a trace
#: source's last error or the sender of the value
QUOTED_WORDS = 3
#: the most characters of a value that a message quotes
QUOTED_CHARS = 40
_WORD = re.compile(r"[^\W_]+")


def quoted(v: str) -> str:
    """``v`` as a message may quote it, in quotes (``repr``): at most :data:`QUOTED_WORDS`
    words and :data:`QUOTED_CHARS` characters, ``...`` where it was cut."""
    cut = len(v)
    words = list(itertools.islice(_WORD.finditer(v), QUOTED_WORDS + 1))
    if len(words) > QUOTED_WORDS:
        cut = words[QUOTED_WORDS - 1].end()
    if cut > QUOTED_CHARS:
        cut = QUOTED_CHARS - 3
    return repr(v) if cut >= len(v) else repr(v[:cut].rstrip() + "...")


def describe(v: object) -> str:
    """A JSON value named for a message ("a list", "number 3", "text 'abc'")."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"boolean {str(v).lower()}"
    if isinstance(v, int | float):
        return f"number {v!r}"
    if isinstance(v, str):
        return f"text {quoted(v)}"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


def json_object(data: Any) -> dict[str, Any]:
    """``data`` as a record: a JSON object whose texts hold no NUL character."""
    if not isinstance(data, dict):
        raise JsonProblem(f"expected a JSON object, got {describe(data)}")
    nul = nul_field(data)
    if nul is not None:
        raise JsonProblem(NUL_PROBLEM, nul)
    return data


def first_problem(exc: ValidationError) -> tuple[str, str]:
    """The first field pydantic refused and why, in the importers' words."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "(record)"
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] in ("extra_forbidden", "extra_forbid"):
        msg = "unknown field"
    elif err["type"] == "missing":
        msg = "required field is missing"
    return loc, msg


def validate_record(model: type[M], data: Any, where: str) -> M:
    """``data`` (a decoded JSON value) as ``model``; InputError at ``where`` otherwise."""
    try:
        record = json_object(data)
    except JsonProblem as exc:
        raise exc.where(where) from None
    try:
        return model.model_validate(record)
    except ValidationError as exc:
        fld, msg = first_problem(exc)
        raise InputError(f"{where}: field {fld}: {msg}") from None


def read_record(text: str, model: type[M], where: str) -> M:
    """One JSON-lines record: decoded, checked and validated, or InputError at ``where``."""
    try:
        data = parse_json(text)
    except JsonProblem as exc:
        raise exc.where(where) from None
    return validate_record(model, data, where)
