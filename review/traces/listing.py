"""The filters of the traces list as plain data: the query parameters of a deep link (from a
monitoring alert or a shared address) read into filter values, the choices the pickers offer,
and the values of the filter widgets turned into a :class:`~review.traces.browse.TraceFilter`.

Filter values are keyed by the name of their widget (``decisions``, ``reason``, ``feedback``,
``ungrounded``, ``missing``, a column of :data:`~review.traces.browse.COLUMN_FILTERS`, ...);
the page keeps them in its session state under its own prefix."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from review.traces.browse import COLUMN_FILTERS, TraceFilter
from review.traces.model import FEEDBACK_VALUES

__all__ = [
    "FILTER_PARAMS",
    "NEGATIVE",
    "NO_DECISION",
    "build_filter",
    "dates_reversed",
    "feedback_options",
    "link_key",
    "picker_options",
    "values_from_query",
]

#: The feedback choice that means any negative feedback.
NEGATIVE = "(any negative)"

#: The decision choice that means "no decision logged".
NO_DECISION = "(none)"

#: The query parameters a deep link may set.
FILTER_PARAMS = (
    "from", "to", "decision", "reason", "negative", "feedback", "ungrounded", "empty",
    "missing_reason", "caveat", "vkey", "vval", "q", *COLUMN_FILTERS,
)  # fmt: skip

#: Flag parameters (set by "1") and the filter they switch on.
_FLAGS = (
    ("ungrounded", "ungrounded"),
    ("empty", "empty"),
    ("missing_reason", "missing"),
    ("caveat", "caveat"),
)


def link_key(query: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The filter parameters of a link, sorted: the same link gives the same key (the page
    applies a link once, so later changes to the widgets are kept)."""
    return tuple(sorted((k, query[k]) for k in FILTER_PARAMS if k in query))


def _day(query: Mapping[str, str], name: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(query.get(name, ""))
    except ValueError:
        return None


def values_from_query(
    query: Mapping[str, str], decisions: Collection[str], reason_codes: Collection[str]
) -> dict[str, Any]:
    """The filter values a deep link sets, by widget name. Unknown decisions and reason codes
    and malformed dates are left out; ``negative=1`` wins over ``feedback``; a version filter
    needs both ``vkey`` and ``vval``."""
    out: dict[str, Any] = {}
    date_from, date_to = _day(query, "from"), _day(query, "to")
    if date_from:
        out["from"] = date_from
    if date_to:
        out["to"] = date_to
    if query.get("decision"):
        out["decisions"] = [
            d for d in query["decision"].split(",") if d in decisions or d == NO_DECISION
        ]
    if query.get("reason") in reason_codes:
        out["reason"] = query["reason"]
    if query.get("negative") == "1":
        out["feedback"] = NEGATIVE
    elif query.get("feedback"):
        out["feedback"] = query["feedback"]
    for flag, key in _FLAGS:
        if query.get(flag) == "1":
            out[key] = True
    for name in COLUMN_FILTERS:
        if query.get(name):
            out[name] = query[name]
    if query.get("vkey") and query.get("vval"):
        out["vkey"] = query["vkey"]
        out["vval"] = query["vval"]
    if query.get("q"):
        out["q"] = query["q"]
    return out


def picker_options(values: Iterable[str], current: str | None) -> list[str]:
    """The choices of a single-value picker: "" (any), the known values, and the current
    value when it is not among them (set by a deep link: it stays selectable)."""
    options = ["", *values]
    if current and current not in options:
        options.append(current)
    return options


def feedback_options(seen: Iterable[str]) -> list[str]:
    """Any, any negative, the standard feedback values, then other values seen in traces."""
    options = ["", NEGATIVE, *FEEDBACK_VALUES]
    return options + [v for v in seen if v not in options]


def build_filter(values: Mapping[str, Any]) -> TraceFilter:
    """The filter for the values of the filter widgets (by widget name; a missing or empty
    value means any). Dates that are not dates (an unset or half-set range) are ignored."""

    def text(name: str) -> str | None:
        value = values.get(name)
        return str(value) if value else None

    date_from, date_to = values.get("from"), values.get("to")
    feedback = values.get("feedback") or ""
    return TraceFilter(
        date_from=date_from if isinstance(date_from, dt.date) else None,
        date_to=date_to if isinstance(date_to, dt.date) else None,
        decisions=tuple(values.get("decisions") or ()),
        reason_code=text("reason"),
        feedback=feedback if feedback and feedback != NEGATIVE else None,
        negative_feedback=feedback == NEGATIVE,
        ranking_mode=text("ranking_mode"),
        policy_version=text("policy_version"),
        model_version=text("model_version"),
        language=text("language"),
        customer_tier=text("customer_tier"),
        document_type=text("document_type"),
        user_role=text("user_role"),
        version_key=text("vkey"),
        version_value=text("vval"),
        score_min=values.get("smin"),
        score_max=values.get("smax"),
        text=str(values.get("q") or ""),
        ungrounded=bool(values.get("ungrounded")),
        empty_retrieval=bool(values.get("empty")),
        missing_reason=bool(values.get("missing")),
        caveat=bool(values.get("caveat")),
        restricted_only=bool(values.get("restricted")),
    )


def dates_reversed(flt: TraceFilter) -> bool:
    """Whether the "From" date is after the "To" date (the list would be empty)."""
    return bool(flt.date_from and flt.date_to and flt.date_from > flt.date_to)
