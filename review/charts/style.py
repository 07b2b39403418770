"""How every chart reads (issue 17, item 13): one colour per metric in every chart, rates on
axes in %, labels and titles that are not clipped, and a panel with no data that says why.

The palette is keyed by metric: a metric's key (``false_refusal_rate``) or the label a chart
shows for it ("False-refusal rate", "No-answer rate (refuse + follow-up + escalate)") gives the
same colour, so the false-refusal rate is the same orange on the Thresholds, Runs and Monitoring
pages and in the exported report. The chart builders of traces/ and evaluation/ use it too
(charts is a layer under them).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable
from typing import Any, Final

import altair as alt
import pandas as pd

__all__ = [
    "METRIC_COLOURS",
    "colour",
    "colour_scale",
    "metric_key",
    "no_data_chart",
    "percent_axis",
]

#: One colour per metric (key -> colour), the same in every chart.
METRIC_COLOURS: Final[dict[str, str]] = {
    # the two failure sides and the rates of the notes
    "coverage": "#4c78a8",
    "answer_rate_answerable": "#72b7b2",
    "false_refusal_rate": "#f58518",
    "unsupported_answer_rate": "#e45756",
    "abstention_recall": "#54a24b",
    "non_answer_recall": "#88d27a",
    "selective_risk": "#b279a2",
    "expected_cost": "#444444",
    "decision_accuracy": "#9d755d",
    "supported_answer_rate": "#1f77b4",
    "reason_code_accuracy": "#bab0ac",
    "citation_validity": "#17becf",
    "wording_key_match": "#bcbd22",
    "refusals_citing_distractor": "#8c564b",
    "answers_contradicting_claim": "#d62728",
    "crag_score": "#7f7f7f",
    "flips": "#636363",
    # production signals (Monitoring), their counts in the same colour as their rates
    "no_answer_rate": "#ff9da6",
    "caveat_rate": "#eeca3b",
    "clarification_rate": "#8c6d31",
    "escalation_rate": "#7b4173",
    "empty_retrieval_rate": "#393b79",
    "ungrounded_rate": "#9467bd",
    "negative_feedback_rate": "#ad494a",
    "missing_reason": "#3182bd",
    "reformulation_rate": "#637939",
    "citation_interaction_rate": "#9edae5",
}

#: Labels the charts show whose words do not spell their key.
_ALIASES: Final[dict[str, str]] = {
    "answer_rate": "answer_rate_answerable",
    "coverage_answered": "coverage",
    "expected_cost_per_item": "expected_cost",
    "flips_vs_previous_run": "flips",
    "refusals_citing_a_distractor": "refusals_citing_distractor",
    "answers_contradicting_a_required_claim": "answers_contradicting_claim",
    "negative_feedback": "negative_feedback_rate",
    "negative_feedback_on_refusals": "negative_feedback_rate",
    "ungrounded": "ungrounded_rate",
    "no_logged_reason": "missing_reason",
    "user_reformulation_rate": "reformulation_rate",
}

#: Colours for series that are not metrics of the palette (picked by name, so stable).
_OTHERS: Final = ("#4e79a7", "#59a14f", "#9c755f", "#edc948", "#af7aa1", "#76b7b2", "#ff9da7")


def metric_key(name: str) -> str:
    """The palette key of a metric's key or label: words lower-cased and joined by ``_``,
    a parenthesised note dropped ("Coverage (answered)" -> ``coverage``)."""
    text = re.sub(r"\(.*?\)", "", str(name)).strip().lower()
    key = re.sub(r"[^a-z0-9]+", "_", text).strip("_")
    return _ALIASES.get(key, key)


def colour(name: str) -> str:
    """The colour of a metric (key or label); a series that is no metric of the palette
    gets a colour picked by its name (the same on every run)."""
    key = metric_key(name)
    if key in METRIC_COLOURS:
        return METRIC_COLOURS[key]
    return _OTHERS[zlib.crc32(key.encode("utf-8")) % len(_OTHERS)]


def colour_scale(names: Iterable[str]) -> alt.Scale:
    """A colour scale over ``names`` (the labels a chart shows) in the palette's colours."""
    domain = list(dict.fromkeys(str(n) for n in names))
    return alt.Scale(domain=domain, range=[colour(n) for n in domain])


def percent_axis(title: str | None = None, **kwargs: Any) -> alt.Axis:
    """An axis of rates (0..1) read in %, its title kept clear of the labels."""
    return alt.Axis(format="%", title=title, titlePadding=10, labelLimit=200, **kwargs)


def no_data_chart(reason: str, title: str | None = None) -> alt.Chart:
    """What a panel with nothing to plot shows: the reason, in words (never an empty frame
    of axes)."""
    chart: alt.Chart = (
        alt.Chart(pd.DataFrame({"reason": [reason]}))
        .mark_text(align="left", baseline="middle", fontSize=14, color="#555555", limit=700)
        .encode(text="reason:N", x=alt.value(8), y=alt.value(20))
        .properties(height=40, width=700)
    )
    if title:
        chart = chart.properties(title=alt.TitleParams(title, anchor="start"))
    return chart
