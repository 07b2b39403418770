"""Flat CSV traces (one row per trace; chunks and citations as JSON cells) read into canonical
traces."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from typing import Any

from review.traces.formats.canonical import CANONICAL_FIELDS, line_error, trace_from_mapping
from review.traces.formats.fields import BadField, json_text
from review.traces.model import DEFAULT_VOCAB, ParsedTrace, Rejected, TraceItem, TraceVocabulary

__all__ = ["iter_csv"]


# ---------------------------------------------------------------------------------------
# Flat CSV

_CSV_LIST = {"chunks", "citations"}


class _LineTap:
    """Feeds csv.reader and keeps the raw lines of the current record."""

    def __init__(self, fh: Iterable[str]) -> None:
        self._it = iter(fh)
        self.buf: list[str] = []
        self.count = 0

    def __iter__(self) -> _LineTap:
        return self

    def __next__(self) -> str:
        line = next(self._it)
        self.buf.append(line)
        self.count += 1
        return line

    def take(self) -> str:
        raw = "".join(self.buf).rstrip("\r\n")
        self.buf.clear()
        return raw


def _csv_record(header: list[str], cells: list[str]) -> dict[str, Any]:
    if len(cells) > len(header):
        raise BadField(None, f"the row has {len(cells)} cells but the header has {len(header)}")
    rec: dict[str, Any] = {}
    versions: dict[str, str] = {}
    attributes: dict[str, str] = {}
    for col, cell in zip(header, cells, strict=False):
        if not cell.strip():
            continue
        if col.startswith("version."):
            versions[col[8:]] = cell.strip()
        elif col.startswith("attr."):
            attributes[col[5:]] = cell.strip()
        elif col == "identity_scopes" and not cell.lstrip().startswith("["):
            rec[col] = [s.strip() for s in cell.split(";") if s.strip()]
        elif col in _CSV_LIST:
            rec[col] = json_text(cell, col)
        else:
            rec[col] = cell
    if versions:
        rec["versions"] = versions
    if attributes:
        rec["attributes"] = attributes
    return rec


def _csv_header(cells: list[str]) -> list[str]:
    header = [c.strip() for c in cells]
    if header:
        header[0] = header[0].removeprefix("\ufeff")
    allowed = set(CANONICAL_FIELDS) - {"versions", "attributes"}
    for i, col in enumerate(header):
        if col in header[:i]:
            raise BadField(f"column {col!r}", "appears twice in the header")
        ok = col in allowed or (
            col.startswith(("version.", "attr.")) and len(col.split(".", 1)[1]) > 0
        )
        if not ok:
            raise BadField(
                f"column {col!r}",
                "unknown column (use the canonical field names, version.<name> or attr.<name>)",
            )
    missing = [c for c in ("trace_id", "time", "query") if c not in header]
    if missing:
        raise BadField(f"column {missing[0]!r}", "required column is missing from the header")
    return header


def iter_csv(
    fh: Iterable[str],
    source: str,
    skip_bad: bool = False,
    *,
    vocab: TraceVocabulary | None = None,
) -> Iterator[TraceItem]:
    """A flat CSV, one trace per row (columns in the module docstring).

    A bad header always raises: no row of the file could be read correctly.
    """
    voc = vocab or DEFAULT_VOCAB
    tap = _LineTap(fh)
    reader = csv.reader(tap, strict=True)
    header: list[str] | None = None
    while True:
        start = tap.count + 1
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raw = tap.take()
            reason = f"not valid CSV ({exc})"
            if header is None or not skip_bad:
                raise line_error(source, start, reason) from None
            yield Rejected(start, raw, reason)
            if tap.count < start:
                break
            continue
        raw = tap.take()
        if not any(c.strip() for c in cells):
            continue
        if header is None:
            try:
                header = _csv_header(cells)
            except BadField as exc:
                raise line_error(source, start, exc.text()) from None
            continue
        try:
            trace = trace_from_mapping(_csv_record(header, cells), voc)
        except BadField as exc:
            if not skip_bad:
                raise line_error(source, start, exc.text()) from None
            yield Rejected(start, raw, exc.text())
            continue
        yield ParsedTrace(trace, start)
    if header is None:
        raise line_error(source, 1, "the file is empty (expected a header row)")
