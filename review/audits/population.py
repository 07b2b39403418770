"""The population of an audit: the filter over the traces, the strata (decision, reason code,
feedback, tier, language, versions or a trace attribute) as SQL expressions, and counting
the population per stratum."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, String, func, literal_column, or_

from review.core.errors import InputError
from storage.models import Trace

__all__ = [
    "DIMENSIONS",
    "GROUPED_DIMENSIONS",
    "NONE",
    "PROMOTED_ATTRIBUTES",
    "PopulationFilter",
    "grouped_column",
    "stratum_column",
    "stratum_expr",
    "stratum_of",
]


NONE = "(none)"  # the stratum value (and filter value) of a missing field


SEP = " · "


ALL = "all"


DIMENSIONS: dict[str, str] = {
    "decision": "Decision",
    "reason_code": "Reason code",
    "feedback": "User feedback",
    "customer_tier": "Customer tier",
    "language": "Language",
    "document_type": "Document type",
    "policy_version": "Policy version",
    "model_version": "Model version",
    "ranking_mode": "Ranking mode",
    "user_role": "User role",
    # entries of the traces' ``versions`` JSON (the monitoring rollup keeps these segments)
    "version.index": "Index version",
    "version.prompt": "Prompt version",
    "version.embedding": "Embedding model",
    "version.reranker": "Reranker",
}


_VERSION_PREFIX = "version."


_ATTR_RE = re.compile(r"^attr\.([A-Za-z0-9_][A-Za-z0-9_.-]{0,59})$")


#: attributes every trace writer also stores in a column of the same name (str of the value)
PROMOTED_ATTRIBUTES = ("language", "customer_tier", "document_type")


def stratum_column(dim: str, promoted: bool = False) -> ColumnElement[Any]:
    """The SQL expression of a stratum dimension (a trace column, ``version.<key>`` for an
    entry of the ``versions`` JSON, or ``attr.<key>``). With ``promoted`` (plans of sampling
    algorithm 2), ``attr.<key>`` of a promoted attribute reads its indexed column instead of
    the JSON: the same text for every string value (the column holds ``str`` of the value)."""
    if dim in DIMENSIONS:
        if dim.startswith(_VERSION_PREFIX):
            version: ColumnElement[Any] = Trace.versions[
                dim.removeprefix(_VERSION_PREFIX)
            ].as_string()
            return version
        col: ColumnElement[Any] = getattr(Trace, dim)
        return col
    m = _ATTR_RE.match(dim)
    if m:
        if promoted and m.group(1) in PROMOTED_ATTRIBUTES:
            promoted_col: ColumnElement[Any] = getattr(Trace, m.group(1))
            return promoted_col
        attr: ColumnElement[Any] = Trace.attributes[m.group(1)].as_string()
        return attr
    raise InputError(
        f"unknown stratum {dim!r}: use one of {', '.join(DIMENSIONS)} or attr.<attribute name>"
    )


def _sql_text(value: str) -> ColumnElement[str]:
    """A constant string rendered inline (so GROUP BY / PARTITION BY compare equal)."""
    return literal_column("'" + value.replace("'", "''") + "'", String)


def stratum_expr(strata: Sequence[str], promoted: bool = False) -> ColumnElement[str]:
    return stratum_of([stratum_column(dim, promoted) for dim in strata])


def stratum_of(columns: Sequence[ColumnElement[Any]]) -> ColumnElement[str]:
    """The stratum name of a row from its values of the strata (in order): ``ALL`` for no
    strata, else each value (``NONE`` when missing) joined by ``SEP``. The same text, in SQL,
    whatever table the columns come from."""
    if not columns:
        return _sql_text(ALL)
    expr: ColumnElement[str] = func.coalesce(columns[0], _sql_text(NONE))
    for col in columns[1:]:
        expr = expr + _sql_text(SEP) + func.coalesce(col, _sql_text(NONE))
    return expr


def grouped_column(dim: str) -> str | None:
    """The column of ``dim`` (a stratum or filter dimension) in the population groups
    (storage.population_groups), None when the groups do not keep it. ``attr.<key>`` of a
    promoted attribute reads its column (as plans of sampling algorithm 2 do)."""
    m = _ATTR_RE.match(dim)
    name = m.group(1) if m and m.group(1) in PROMOTED_ATTRIBUTES else dim
    return name if name in GROUPED_DIMENSIONS else None


#: the dimensions the population groups keep (storage.population_groups.DIMENSIONS but the flag)
GROUPED_DIMENSIONS = (
    "decision",
    "reason_code",
    "feedback",
    "customer_tier",
    "language",
)


# --- the population filter ------------------------------------------------------------------

#: PopulationFilter field -> the dimension (trace column or ``version.<key>``) it filters.
#: A field absent from a stored filter's JSON means "any" (filters stored before it existed).
_FILTER_COLUMNS: tuple[tuple[str, str], ...] = (
    ("decisions", "decision"),
    ("reason_codes", "reason_code"),
    ("feedback", "feedback"),
    ("languages", "language"),
    ("customer_tiers", "customer_tier"),
    ("document_types", "document_type"),
    ("policy_versions", "policy_version"),
    ("model_versions", "model_version"),
    ("index_versions", "version.index"),
    ("prompt_versions", "version.prompt"),
    ("embedding_versions", "version.embedding"),
    ("reranker_versions", "version.reranker"),
)


@dataclass(frozen=True)
class PopulationFilter:
    """Which traces form the population. Empty tuples mean "any"; ``NONE`` in a tuple matches
    traces where the field is missing. ``date_to`` is inclusive (the whole day, UTC)."""

    date_from: dt.date | None = None
    date_to: dt.date | None = None
    decisions: tuple[str, ...] = ()
    reason_codes: tuple[str, ...] = ()
    feedback: tuple[str, ...] = ()
    languages: tuple[str, ...] = ()
    customer_tiers: tuple[str, ...] = ()
    document_types: tuple[str, ...] = ()
    policy_versions: tuple[str, ...] = ()
    model_versions: tuple[str, ...] = ()
    index_versions: tuple[str, ...] = ()
    prompt_versions: tuple[str, ...] = ()
    embedding_versions: tuple[str, ...] = ()
    reranker_versions: tuple[str, ...] = ()
    attributes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    include_restricted: bool = True

    def check(self) -> None:
        if self.date_from and self.date_to and self.date_from > self.date_to:
            raise InputError(
                f"population filter: the date range ends ({self.date_to}) before it starts "
                f"({self.date_from})"
            )
        for key, _values in self.attributes:
            if not _ATTR_RE.match(f"attr.{key}"):
                raise InputError(f"population filter: attribute name {key!r} is not valid")

    def conditions(self) -> list[ColumnElement[bool]]:
        self.check()
        conds: list[ColumnElement[bool]] = []
        if self.date_from:
            conds.append(Trace.at >= _day_start(self.date_from))
        if self.date_to:
            conds.append(Trace.at < _day_start(self.date_to + dt.timedelta(days=1)))
        for attr, dim in _FILTER_COLUMNS:
            values: tuple[str, ...] = getattr(self, attr)
            if values:
                conds.append(_in_values(stratum_column(dim), values))
        for key, values in self.attributes:
            if values:
                conds.append(_in_values(Trace.attributes[key].as_string(), values))
        if not self.include_restricted:
            conds.append(Trace.restricted.is_(False))
        return conds

    def time_range(self) -> tuple[dt.datetime | None, dt.datetime | None]:
        """The filter's range of ``traces.at`` as [start, end), naive UTC (None: open)."""
        start = _day_start(self.date_from).replace(tzinfo=None) if self.date_from else None
        end = (
            _day_start(self.date_to + dt.timedelta(days=1)).replace(tzinfo=None)
            if self.date_to
            else None
        )
        return start, end

    def value_conditions(
        self, column_of: Callable[[str], ColumnElement[Any] | None]
    ) -> list[ColumnElement[bool]] | None:
        """The filter's conditions but the date range, over the columns ``column_of`` gives
        for each dimension filtered (and ``"restricted"`` when restricted traces are left
        out); None when it gives None for one of them or the filter reads attributes."""
        self.check()
        if any(values for _key, values in self.attributes):
            return None
        conds: list[ColumnElement[bool]] = []
        for attr, dim in _FILTER_COLUMNS:
            values: tuple[str, ...] = getattr(self, attr)
            if values:
                col = column_of(dim)
                if col is None:
                    return None
                conds.append(_in_values(col, values))
        if not self.include_restricted:
            flag = column_of("restricted")
            if flag is None:
                return None
            conds.append(flag.is_(False))
        return conds

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.date_from:
            out["date_from"] = self.date_from.isoformat()
        if self.date_to:
            out["date_to"] = self.date_to.isoformat()
        for attr, _col in _FILTER_COLUMNS:
            values = getattr(self, attr)
            if values:
                out[attr] = list(values)
        if self.attributes:
            out["attributes"] = {k: list(v) for k, v in self.attributes}
        if not self.include_restricted:
            out["include_restricted"] = False
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PopulationFilter:
        def day(key: str) -> dt.date | None:
            raw = data.get(key)
            return dt.date.fromisoformat(raw) if raw else None

        lists = {attr: tuple(data.get(attr) or ()) for attr, _col in _FILTER_COLUMNS}
        attrs = tuple((str(k), tuple(v)) for k, v in (data.get("attributes") or {}).items())
        return cls(
            date_from=day("date_from"),
            date_to=day("date_to"),
            attributes=attrs,
            include_restricted=bool(data.get("include_restricted", True)),
            **lists,
        )

    def describe(self) -> str:
        """The filter in one line, for plan lists and exports."""
        parts = []
        if self.date_from or self.date_to:
            parts.append(f"{self.date_from or '…'} to {self.date_to or '…'}")
        for attr, _col in _FILTER_COLUMNS:
            values = getattr(self, attr)
            if values:
                parts.append(f"{attr.replace('_', ' ')}: {', '.join(values)}")
        for key, values in self.attributes:
            parts.append(f"{key}: {', '.join(values)}")
        if not self.include_restricted:
            parts.append("restricted traces left out")
        return "; ".join(parts) or "every trace"


def _day_start(day: dt.date) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)


def _in_values(col: ColumnElement[Any], values: Sequence[str]) -> ColumnElement[bool]:
    real = [v for v in values if v != NONE]
    parts: list[ColumnElement[bool]] = []
    if real:
        parts.append(col.in_(real))
    if NONE in values:
        parts.append(col.is_(None))
    return or_(*parts)
