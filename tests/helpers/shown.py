"""What a page shows in its tables and charts, as people read it: a table's column headers
(the label its column configuration gives, else the column's name) and its cells, a chart's
titles, legend and axis values and tooltips, and the notes of a caret view. Used to check
that no stored key (``product_owner``, ``refuse_below``, ``blames_user``, a decision stored as
``abstain``), no placeholder ("(none)") and no e-mail address in place of a name reaches a
screen."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import cache
from typing import Any

import pandas as pd
from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df
from streamlit.testing.v1 import AppTest

#: A stored key: lower-case words joined by underscores.
KEY_WORD = re.compile(r"\b[a-z]+_[a-z_]+\b")
#: A cell that is a stored key and nothing else.
WHOLE_KEY = re.compile(r"[a-z]+(?:_[a-z]+)+")
#: An e-mail address (a person must read as their name).
EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
#: What a value that is not there must never read as.
PLACEHOLDERS = ("(none)",)
#: Columns whose cells are e-mail addresses on purpose (the Admin page's users table).
EMAIL_COLUMNS = frozenset({"email", "e-mail"})


@cache
def single_word_keys() -> frozenset[str]:
    """Stored keys of one word whose label differs from the key (the decision ``abstain``
    reads "Abstain"): a cell holding one of them shows the key, not the label."""
    from review.core.taxonomy import load_taxonomy

    tax = load_taxonomy()
    found: set[str] = set()
    for section in ("decisions", "reason_codes", "categories", "evidence_states"):
        for key, term in getattr(tax, section).items():
            if "_" not in key and term.label != key:
                found.add(key)
    return frozenset(found)


@cache
def _known_keys() -> re.Pattern[str]:
    """Stored keys with an underscore that a sentence in a cell must not carry (a gate
    signal, a threshold, a wording rule, a role): "top_score NaN" shows the key."""
    from review.core.identity import Role
    from review.policy.policy import SIGNALS
    from review.wording.findings import RULES

    keys = {k for k in (*SIGNALS, *RULES, *(r.value for r in Role)) if "_" in k}
    keys |= {"refuse_below", "caveat_below", "min_hits_after_filter"}
    return re.compile(r"\b(" + "|".join(sorted(map(re.escape, keys))) + r")\b")


def column_config(element: Any) -> dict[str, dict[str, Any]]:
    """The column configuration of a shown dataframe (column name -> its settings)."""
    raw = getattr(element.proto, "columns", "") or "{}"
    config: dict[str, dict[str, Any]] = json.loads(raw)
    return config


def headers(element: Any) -> list[str]:
    """The headers a table shows: each visible column's label, else its name."""
    config = column_config(element)
    shown = []
    for name in element.value.columns:
        conf = config.get(str(name)) or config.get(f"col:{name}") or {}
        if conf.get("hidden"):
            continue
        shown.append(str(conf.get("label") or name))
    return shown


def key_cells(frame: pd.DataFrame) -> Iterator[tuple[str, str]]:
    """(column, cell) of every text cell that is a stored key and nothing else, a one-word
    key whose label differs, a sentence carrying a known key, a placeholder, or an e-mail
    address (outside an e-mail column)."""
    single = single_word_keys()
    known = _known_keys()
    for name in frame.columns:
        column = frame[name]
        if column.dtype != object and not isinstance(column.dtype, pd.StringDtype):
            continue
        for value in column.dropna().astype(str).unique():
            if value.startswith(("{", "[")):  # a stored record shown as it is (JSON)
                continue
            if (
                WHOLE_KEY.fullmatch(value)
                or value in single
                or known.search(value)
                or any(p in value for p in PLACEHOLDERS)
                or (EMAIL.search(value) and str(name).lower() not in EMAIL_COLUMNS)
            ):
                yield str(name), value


#: A caret view's line of marks and the notes after them ("^^^^  Blames the user").
_CARET_NOTE = re.compile(r"^[ ^]*\^ +(\S.*)$")


def caret_notes(at: AppTest) -> Iterator[str]:
    """The notes of every caret view (a code block of plain text) on the page."""
    for code in at.code:
        if code.language not in (None, "", "plaintext"):
            continue
        for line in str(code.value).splitlines():
            m = _CARET_NOTE.match(line)
            if m:
                yield m.group(1)


def _frames(data: bytes) -> pd.DataFrame | None:
    if not data:
        return None
    return convert_arrow_bytes_to_pandas_df(data)


def _shown_titles(node: object, layered: bool = False) -> Iterator[str]:
    """Every title a Vega-Lite spec shows: chart, axis, legend and tooltip titles, and the
    field name of an encoding that has no title (Vega-Lite then shows the field; an x or y
    of a layer without one takes the title another layer gives)."""
    if isinstance(node, list):
        for item in node:
            yield from _shown_titles(item, layered)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key in ("datasets", "data", "transform", "config", "$schema", "params"):
            continue
        if key == "title" and isinstance(value, str | list):
            yield from ([value] if isinstance(value, str) else [str(v) for v in value])
        elif key in ("encoding",) and isinstance(value, dict):
            for channel, enc in value.items():
                for one in enc if isinstance(enc, list) else [enc]:
                    if not isinstance(one, dict):
                        continue
                    if channel in ("x2", "y2", "detail", "order", "text"):
                        continue
                    if layered and channel in ("x", "y"):
                        continue
                    titled = "title" in one or (
                        isinstance(one.get("axis"), dict) and "title" in one["axis"]
                    )
                    hidden = one.get("legend", 0) is None or one.get("axis", 0) is None
                    if "field" in one and not titled and not hidden:
                        yield str(one["field"])
                    yield from _shown_titles(one, layered)
        else:
            yield from _shown_titles(value, layered or key == "layer")


def _encoded_fields(node: object) -> set[str]:
    """The fields a spec draws (its encodings' fields): the data columns a person sees."""
    found: set[str] = set()
    if isinstance(node, list):
        for item in node:
            found |= _encoded_fields(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key == "field" and isinstance(value, str):
                found.add(value)
            elif key not in ("datasets", "data", "transform"):
                found |= _encoded_fields(value)
    return found


def raw_keys(at: AppTest, where: str) -> list[str]:
    """Every stored key the page shows in a table or a chart, each as "where: what"."""
    found: list[str] = []
    for df in at.dataframe:
        for header in headers(df):
            if KEY_WORD.search(header):
                found.append(f"{where}: column {header!r}")
        hidden = {
            name
            for name, conf in column_config(df).items()
            if isinstance(conf, dict) and conf.get("hidden")
        }
        frame = df.value.drop(columns=[c for c in df.value.columns if str(c) in hidden])
        found += [f"{where}: cell {v!r} in {c!r}" for c, v in key_cells(frame)]
    for note in caret_notes(at):
        if KEY_WORD.search(note):
            found.append(f"{where}: caret note {note!r}")
    for chart in at.get("vega_lite_chart"):
        proto = chart.proto
        spec = json.loads(proto.spec)
        found += [f"{where}: chart title {t!r}" for t in _shown_titles(spec) if KEY_WORD.search(t)]
        drawn = _encoded_fields(spec)
        tables = [_frames(ds.data.data) for ds in proto.datasets] + [_frames(proto.data.data)]
        for table in tables:
            if table is not None:
                table = table[[c for c in table.columns if str(c) in drawn]]
                found += [f"{where}: chart value {v!r} in {c!r}" for c, v in key_cells(table)]
    return sorted(set(found))
