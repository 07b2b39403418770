"""The Agreement page's tables as people read them (review.core.readable): reason codes,
slices and categories by their taxonomy labels, annotators by their names (never their
addresses); the statistics stay numbers for sorting."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from review.core import readable
from review.core.taxonomy import Taxonomy

__all__ = ["agreement_frame", "annotators_frame", "csv_name", "fleiss_frame", "groups_frame"]

#: The "group by" choices of the page and the taxonomy section of their values.
GROUP_SECTIONS = {"slice": "slices", "category": "categories"}


def agreement_frame(
    table: pd.DataFrame,
    tax: Taxonomy,
    names: Mapping[str, str],
    section: str | None = None,
) -> pd.DataFrame:
    """An agreement table (``agreement.TABLE_COLUMNS``) as read: the ``field`` by its label
    in ``section`` (e.g. ``reason_codes``) when given, the annotators by name."""
    out = table.copy()
    if section is not None and "field" in out:
        out["field"] = [readable.term(tax, section, str(v)) for v in out["field"]]
    for col in ("annotator_a", "annotator_b"):
        if col in out:
            out[col] = [readable.person(v, names, "") for v in out[col]]
    return out


def groups_frame(groups: pd.DataFrame, tax: Taxonomy, group_by: str) -> pd.DataFrame:
    """The per-group table with each group (a slice or a category) by its label."""
    section = GROUP_SECTIONS.get(group_by)
    if section is None or groups.empty or "group" not in groups:
        return groups
    return groups.assign(group=[readable.term(tax, section, str(g)) for g in groups["group"]])


def fleiss_frame(table: pd.DataFrame, tax: Taxonomy, section: str | None = None) -> pd.DataFrame:
    """A Fleiss table (``agreement.FLEISS_COLUMNS``) with its ``field`` by its label in
    ``section`` when given."""
    out = table.copy()
    if section is not None and "field" in out:
        out["field"] = [readable.term(tax, section, str(v)) for v in out["field"]]
    return out


def annotators_frame(table: pd.DataFrame, names: Mapping[str, str]) -> pd.DataFrame:
    """The per-annotator table (``annotator_figures.ANNOTATOR_COLUMNS``) with each annotator
    by name."""
    out = table.copy()
    if "annotator" in out:
        out["annotator"] = [readable.person(v, names, "") for v in out["annotator"]]
    return out


def csv_name(table: str, scope: Mapping[str, object]) -> str:
    """The file name of a table's CSV download: the table and the filters in use, in
    letters, digits, dots and dashes only (a slice or family key cannot make a path)."""
    parts = [table, *(f"{k.strip('_')}-{v}" for k, v in scope.items() if v)]
    cleaned = [
        "".join(ch if ch.isascii() and (ch.isalnum() or ch in ".-") else "-" for ch in p)
        for p in parts
    ]
    return "agreement-" + "_".join(cleaned)[:120] + ".csv"
