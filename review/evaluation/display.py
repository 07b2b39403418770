"""The Runs page's tables as people read them (review.core.readable): rates as percentages
with their 95% interval and the count behind them, decision states and groups by their
taxonomy labels, never a raw float or a key."""

from __future__ import annotations

from typing import Final

import pandas as pd

from review.core import readable
from review.core.taxonomy import Taxonomy

__all__ = [
    "FLIP_HEADERS",
    "GROUP_SECTIONS",
    "flips_table",
    "group_table",
    "outputs_table",
    "recall_table",
    "summary_rows",
]

#: The "group by" columns whose values are keys of a taxonomy section.
GROUP_SECTIONS: Final[dict[str, str]] = {
    "split": "splits",
    "category": "categories",
    "evidence_state": "evidence_states",
    "slices": "slices",
}


def _rate_with_count(value: float, low: float, high: float, k: object, n: object) -> str:
    if readable.is_missing(value):
        return "undefined"
    counts = "" if readable.is_missing(n) else f", {readable.number(k)} of {readable.number(n)}"
    return readable.percent_interval(value, low, high) + counts


def summary_rows(summary: pd.DataFrame) -> pd.DataFrame:
    """``runmetrics.summary_table`` as read: each rate "38% (18–64%), 5 of 13", the CRAG
    score (not a rate, from -1 to 1) as a number, what n counts, and why a figure is
    undefined."""
    rows = []
    for r in summary.to_dict(orient="records"):
        if r["metric"] == "CRAG score":
            value = readable.number(r["value"])
            value += "" if readable.is_missing(r["value"]) else f" over {r['n']:,} cases"
        else:
            value = _rate_with_count(r["value"], r["low"], r["high"], r["k"], r["n"])
        rows.append({"metric": r["metric"], "value (95% interval)": value, "over": r["over"]})
        rows[-1]["note"] = r.get("note", "")
    return pd.DataFrame(rows, columns=["metric", "value (95% interval)", "over", "note"])


def recall_table(recall: pd.DataFrame, tax: Taxonomy) -> pd.DataFrame:
    """``runmetrics.state_recall`` as read: the expected decision by its label, its recall
    with the interval and count."""
    return pd.DataFrame(
        {
            "expected": [readable.term(tax, "decisions", k) for k in recall["expected"]],
            "recall (95% interval)": [
                _rate_with_count(v, lo, hi, k, n)
                for v, lo, hi, k, n in zip(
                    recall["recall"],
                    recall["low"],
                    recall["high"],
                    recall["k"],
                    recall["n"],
                    strict=True,
                )
            ],
            "note": recall["note"],
        }
    )


def group_table(table: pd.DataFrame, column: str, tax: Taxonomy) -> pd.DataFrame:
    """``runmetrics.by_group`` with the group values by their taxonomy labels (the rates
    stay numbers, for sorting; the page shows them in %)."""
    section = GROUP_SECTIONS.get(column)
    if table.empty or section is None or column not in table:
        return table
    return table.assign(**{column: [readable.term(tax, section, str(v)) for v in table[column]]})


#: The columns of a run's outputs whose cells are keys of a taxonomy section.
_OUTPUT_TERMS: Final[dict[str, str]] = {
    "gold": "decisions",
    "decision": "decisions",
    "base_decision": "decisions",
    "reason_code": "reason_codes",
}


def outputs_table(outputs: pd.DataFrame, tax: Taxonomy) -> pd.DataFrame:
    """A run's outputs as read: decisions and reason codes by their taxonomy labels (an empty
    cell stays empty), never as stored keys."""
    out = outputs.copy()
    for column, section in _OUTPUT_TERMS.items():
        if column in out.columns:
            out[column] = [
                "" if readable.is_missing(v) or v == "" else readable.term(tax, section, str(v))
                for v in out[column]
            ]
    return out


#: The headers of the decision flips table (its columns keep their names: the blinding of
#: judged columns and the tests read them).
FLIP_HEADERS: Final[dict[str, str]] = {
    "gold": "expected decision",
    "A": "run A (before)",
    "B": "run B (after)",
}


def flips_table(flips: pd.DataFrame, tax: Taxonomy) -> pd.DataFrame:
    """``runmetrics.decision_flips`` as read: the expected decision and each run's decision
    by their taxonomy labels ("Abstain", never ``abstain``); a withheld judgement or an
    infrastructure failure reads as it is."""
    out = flips.copy()
    for column in ("gold", "A", "B"):
        if column in out.columns:
            out[column] = [
                "" if readable.is_missing(v) or v == "" else readable.term(tax, "decisions", str(v))
                for v in out[column]
            ]
    return out
