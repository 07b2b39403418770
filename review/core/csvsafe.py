"""CSV that is safe to open in a spreadsheet: the one way the workbench writes CSV.

A spreadsheet runs a cell that starts with ``=``, ``+``, ``-`` or ``@`` as a formula (and a
leading tab or carriage return can smuggle one past a trim), so a trace query such as
``=HYPERLINK("http://x", "y")`` in an export would become a live link or worse on the
reviewer's machine. Following OWASP's advice on CSV injection, such a text cell is written
with a single quote (``'``) in front, which the spreadsheet shows as text and hides. A formula
character behind leading blanks, line breaks, a byte-order mark or other invisible characters
counts too: spreadsheets trim some of them on import, so ``" =1+1"``, ``"\n=1"`` and
``"\ufeff@SUM(A1)"`` are neutralised like ``"=1+1"``. Only text
is touched: a number (a negative score written from a float column) stays a number, and
empty cells, dates and booleans are written as they are. Rows end with CRLF, as RFC 4180
says, so a carriage return or line break inside a cell is quoted and cannot split a row.
tests/core/test_csvsafe.py fails when code under review/ or pages/ writes CSV another way.
"""

from __future__ import annotations

import csv
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

import pandas as pd

#: The first characters that make a spreadsheet read a cell as a formula.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
#: RFC 4180's row end: with it, the csv module quotes a cell holding "\r" as well as "\n".
LINE_END = "\r\n"


def _invisible(ch: str) -> bool:
    """A character a spreadsheet may trim or not show before a cell's first visible one:
    white space and line breaks, and control, format (the byte-order mark, zero-width
    characters) and separator characters."""
    return ch.isspace() or unicodedata.category(ch)[0] in "CZ"


def formula_like(text: str) -> bool:
    """Whether a spreadsheet could read ``text`` as a formula: it starts with a formula
    character, or has one right after leading invisible characters (:func:`_invisible`)."""
    if text.startswith(FORMULA_START):
        return True
    start = next((i for i, ch in enumerate(text) if not _invisible(ch)), len(text))
    return start > 0 and text[start:].startswith(FORMULA_START)


def safe_cell(value: Any) -> Any:
    """``value`` as a CSV cell: text a spreadsheet could read as a formula
    (:func:`formula_like`) gets a leading single quote; anything that is not text (numbers
    included) is returned unchanged."""
    if isinstance(value, str) and formula_like(value):
        return "'" + value
    return value


def safe_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` with every text cell and column name made safe (:func:`safe_cell`);
    numeric columns are left as they are, so they are written as numbers."""
    out = frame.copy()
    for col in out.columns:
        if not (pd.api.types.is_numeric_dtype(out[col]) or pd.api.types.is_bool_dtype(out[col])):
            out[col] = out[col].map(safe_cell)
    out.columns = pd.Index([safe_cell(c) for c in out.columns])
    return out


def frame_csv(frame: pd.DataFrame, **to_csv: Any) -> str:
    """``frame`` as CSV text (pandas' ``to_csv`` options, no index unless asked, rows ending
    with :data:`LINE_END`), every text cell made safe."""
    to_csv.setdefault("index", False)
    to_csv["lineterminator"] = LINE_END
    return str(safe_frame(frame).to_csv(**to_csv))


if TYPE_CHECKING:
    _DictWriter = csv.DictWriter[str]
else:  # not subscriptable at run time before Python 3.12
    _DictWriter = csv.DictWriter


class DictWriter(_DictWriter):
    """:class:`csv.DictWriter` whose header and rows are made safe cell by cell, rows ending
    with CRLF (:data:`LINE_END`)."""

    def __init__(self, f: IO[str], fieldnames: Sequence[str], **kwargs: Any) -> None:
        kwargs["lineterminator"] = LINE_END
        super().__init__(f, fieldnames, **kwargs)

    def writeheader(self) -> Any:
        return self.writer.writerow([safe_cell(name) for name in self.fieldnames])

    def writerow(self, rowdict: Mapping[str, Any]) -> Any:
        return super().writerow({k: safe_cell(v) for k, v in rowdict.items()})

    def writerows(self, rowdicts: Iterable[Mapping[str, Any]]) -> None:
        for row in rowdicts:
            self.writerow(row)
