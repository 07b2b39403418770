"""Monitoring of production traces: the weekly signals, and alerts (docs/monitoring-alerts.md).

Signals (per week, Monday to Sunday UTC, for the charts; every rate is a share of all traces):

* **no-answer rate**: decisions that do not answer (the taxonomy's ``answers: false``: abstain,
  clarify and escalate, i.e. refuse + follow-up + escalate);
* **caveat rate**: answers with reason code ``support_below_threshold`` (see review.traces.browse);
* **clarification** and **escalation** rates (decision clarify / escalate);
* **empty-retrieval rate**: ``hits_after_filter`` is 0;
* **ungrounded rate**: the groundedness check said ungrounded (whatever the decision);
* **negative feedback**: feedback ``negative``, ``expected_answer`` or ``answer_wrong``; the
  alert counts it on refusals only ("negative feedback on refusals");
* **decisions with no logged reason**: no decision, or a decision other than answer without a
  reason code (a count; it should be zero);
* the user's reformulation and citation interaction (review.traces.interaction).

Everything is read from the daily rollup (``trace_rollup``, kept in step with the traces by
the import and the purge, see review.traces.rollup): a few hundred rows per year and segment,
never by loading traces. Alert thresholds come from ``policies/monitoring.yaml``
(:class:`MonitoringPolicy`); "more than" and "above" are strict:

* ``no_answer_move`` (weekly, :func:`evaluate_alerts`): the no-answer rate moves by more than
  ``max_change_points`` points from the week before (critical at twice that);
* ``caveat_above_average`` (daily windows, :func:`evaluate_window_alerts`): the caveat rate
  over ``window_days`` (7) is more than ``points_above`` points above its rate over the
  ``baseline_days`` (28) before;
* ``ungrounded_rise``: the ungrounded rate over ``window_days`` (1: 24 hours) is above
  ``warn_ratio`` (warning) or ``critical_ratio`` (critical) times the ``baseline_days`` (14)
  before, with at least ``min_events`` events in the window (from a zero baseline: critical);
* ``negative_feedback_rise``: the same, over 7 days, for negative feedback on refusals as a
  share of the refusals;
* ``missing_reason`` (weekly): more than ``max_count`` decisions without a logged reason.

Rate alerts need ``min_traces_per_week`` traces (scaled to the window's length) in the window
and in its baseline. A windowed rule raises at most one alert per week (its worst window). Each
alert carries the action its rule names and the filters that list the traces behind it.
"""

# Long module: the weekly signals, the alert rules that read them and the charts that show
# both share SIGNALS, the rule-to-signal map and the Alert record.

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import altair as alt
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, model_validator
from sqlalchemy import Engine, func, select

from review.charts.style import colour_scale, no_data_chart, percent_axis
from review.charts.weekly import bottom_legend, week_tooltip, week_x, weekly_lines
from review.core import readable
from review.core.errors import InputError
from review.core.readable import percent
from review.core.taxonomy import Taxonomy, policies_dir
from review.core.yamlstrict import load_model, load_yaml_text, validate
from review.traces import rollup
from review.traces.formats.fields import EARLIEST_TRACE_TIME
from review.traces.interaction import INTERACTION_COUNTS, add_interaction_rates
from storage.db import read_session
from storage.models import Trace as TraceRow
from storage.models import TraceRollup

__all__ = [
    "COUNT_COLUMNS",
    "COUNT_LABELS",
    "DIMENSIONS",
    "RATE_COLUMNS",
    "SIGNALS",
    "Alert",
    "MonitorResult",
    "MonitoringPolicy",
    "alerts_between",
    "counts_chart",
    "daily_signals",
    "evaluate_alerts",
    "evaluate_window_alerts",
    "latest_week",
    "load_monitoring_policy",
    "monitor",
    "parse_monitoring_policy",
    "segment_chart",
    "segment_values",
    "signals_chart",
    "week_start",
    "weekly_by_segment",
    "weekly_signals",
]

# --------------------------------------------------------------------------------------
# The policy file


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class MoveRule(_Strict):
    enabled: bool = True
    max_change_points: float = Field(gt=0, le=100)
    action: str = Field(min_length=3, max_length=300)


class AboveAverageRule(_Strict):
    enabled: bool = True
    points_above: float = Field(gt=0, le=100)
    window_days: int = Field(ge=1, le=28)
    baseline_days: int = Field(ge=1, le=182)
    action: str = Field(min_length=3, max_length=300)


class RiseRule(_Strict):
    enabled: bool = True
    window_days: int = Field(ge=1, le=28)
    baseline_days: int = Field(ge=1, le=182)
    warn_ratio: float = Field(gt=1, le=100)
    critical_ratio: float = Field(gt=1, le=100)
    min_events: int = Field(ge=1)
    action: str = Field(min_length=3, max_length=300)

    @model_validator(mode="after")
    def _ordered(self) -> RiseRule:
        if self.critical_ratio < self.warn_ratio:
            raise ValueError("critical_ratio must be at least warn_ratio")
        return self


class MissingRule(_Strict):
    enabled: bool = True
    max_count: int = Field(ge=0)
    action: str = Field(min_length=3, max_length=300)


class AlertRules(_Strict):
    no_answer_move: MoveRule
    caveat_above_average: AboveAverageRule
    ungrounded_rise: RiseRule
    negative_feedback_rise: RiseRule
    missing_reason: MissingRule


class MonitoringPolicy(_Strict):
    version: int = Field(ge=1)
    min_traces_per_week: int = Field(ge=1)
    alerts: AlertRules

    def history_weeks(self) -> int:
        """Weeks before the first shown week that the weekly rules need."""
        return 1

    def history_days(self) -> int:
        """Days before the first shown day that the windowed rules need."""
        a = self.alerts
        return max(
            r.window_days + r.baseline_days
            for r in (a.caveat_above_average, a.ungrounded_rise, a.negative_feedback_rise)
        )

    def min_traces(self, days: int) -> int:
        """Traces a window of ``days`` days needs before its rate can raise an alert."""
        return max(1, math.ceil(self.min_traces_per_week * days / 7))

    def action(self, rule: str) -> str:
        return str(getattr(self.alerts, rule).action)


def load_monitoring_policy(path: Path | None = None) -> MonitoringPolicy:
    """Read and validate ``policies/monitoring.yaml`` (or ``path``)."""
    return load_model(MonitoringPolicy, path or policies_dir() / "monitoring.yaml")


def parse_monitoring_policy(text: str, source: str = "monitoring.yaml") -> MonitoringPolicy:
    return validate(MonitoringPolicy, load_yaml_text(text, source), source)


# --------------------------------------------------------------------------------------
# Signals in SQL

SIGNALS: Final[dict[str, str]] = {
    "no_answer_rate": "No-answer rate (refuse + follow-up + escalate)",
    "caveat_rate": "Caveat rate",
    "clarification_rate": "Clarification rate",
    "escalation_rate": "Escalation rate",
    "empty_retrieval_rate": "Empty-retrieval rate",
    "ungrounded_rate": "Ungrounded rate",
    "negative_feedback_rate": "Negative feedback rate",
}
# count column -> rate column
RATE_COLUMNS: Final[dict[str, str]] = {
    "no_answer": "no_answer_rate",
    "caveat": "caveat_rate",
    "clarify": "clarification_rate",
    "escalate": "escalation_rate",
    "empty_retrieval": "empty_retrieval_rate",
    "ungrounded": "ungrounded_rate",
    "negative_feedback": "negative_feedback_rate",
    "missing_reason": "missing_reason_rate",
}

COUNT_COLUMNS: Final[tuple[str, ...]] = ("traces", *RATE_COLUMNS, *INTERACTION_COUNTS)

#: Segments: trace columns, or ``version.<name>`` for one entry of ``versions``.
DIMENSIONS: Final[dict[str, str]] = rollup.DIMENSIONS


def week_start(d: dt.date | dt.datetime) -> dt.date:
    """The Monday of ``d``'s week (UTC for datetimes)."""
    if isinstance(d, dt.datetime):
        d = (d if d.tzinfo else d.replace(tzinfo=dt.UTC)).astimezone(dt.UTC).date()
    return d - dt.timedelta(days=d.weekday())


def _check_dimension(dim: str) -> None:
    if dim not in DIMENSIONS:
        raise InputError(f"unknown segment {dim!r} (one of {', '.join(DIMENSIONS)})")


def no_answer_decisions(tax: Taxonomy) -> tuple[str, ...]:
    return tuple(k for k, d in tax.decisions.items() if not d.answers)


_STORED = ("traces", *rollup.FLAGS)


#: Daily counts the windowed alerts read: traces, caveats, ungrounded traces, refusals and
#: negative feedback on refusals.
DAILY_COLUMNS: Final[tuple[str, ...]] = (
    "traces",
    "caveat",
    "ungrounded",
    "no_answer",
    "negative_on_refusals",
)


def _rollup_days(
    engine: Engine,
    tax: Taxonomy,
    dim: str,
    start: dt.date,
    end: dt.date,
    values: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Daily rollup rows of one segment (``""`` for all traces) between ``start`` and ``end``
    (exclusive), summed per day and value: day, value, the stored counts, and no_answer,
    clarify, escalate and negative_on_refusals (negative feedback on a non-answer)."""
    r = TraceRollup
    cols = [getattr(r, c) for c in _STORED]
    stmt = select(r.day, r.value, r.decision, *cols).where(
        r.dim == dim, r.day >= start, r.day < end
    )
    if values is not None:
        stmt = stmt.where(r.value.in_(list(values)))
    with read_session(engine) as s:
        frame = pd.DataFrame(s.execute(stmt).all(), columns=["day", "value", "decision", *_STORED])
    extra = ("no_answer", "clarify", "escalate", "negative_on_refusals")
    columns = ["day", "value", *_STORED, *extra]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    decision = frame["decision"]
    refused = decision.isin(no_answer_decisions(tax))
    frame["no_answer"] = frame["traces"].where(refused, 0)
    frame["clarify"] = frame["traces"].where(decision == "clarify", 0)
    frame["escalate"] = frame["traces"].where(decision == "escalate", 0)
    frame["negative_on_refusals"] = frame["negative_feedback"].where(refused, 0)
    frame["day"] = pd.to_datetime(frame["day"]).dt.date
    out = frame.groupby(["day", "value"], as_index=False)[[*_STORED, *extra]].sum()
    return out[columns]


def _rollup_frame(
    engine: Engine,
    tax: Taxonomy,
    dim: str,
    start: dt.date,
    end: dt.date,
    values: Sequence[str] | None = None,
) -> pd.DataFrame:
    """The daily rollup summed per week and value: week, value and COUNT_COLUMNS."""
    days = _rollup_days(engine, tax, dim, start, end, values)
    columns = ["week", "value", *COUNT_COLUMNS]
    if days.empty:
        return pd.DataFrame(columns=columns)
    day = pd.to_datetime(days["day"])
    days["week"] = (day - pd.to_timedelta(day.dt.day_of_week, unit="D")).dt.date
    out = days.groupby(["week", "value"], as_index=False)[list(COUNT_COLUMNS)].sum()
    return out[columns]


def daily_signals(
    engine: Engine,
    tax: Taxonomy,
    start: dt.date,
    end: dt.date,
    segment: tuple[str, str] | None = None,
) -> pd.DataFrame:
    """One row per day from ``start`` up to ``end`` (exclusive), days without traces included
    (counts 0): day and DAILY_COLUMNS."""
    if segment is not None:
        _check_dimension(segment[0])
        got = _rollup_days(engine, tax, segment[0], start, end, [segment[1]])
    else:
        got = _rollup_days(engine, tax, rollup.ALL, start, end)
    index = pd.Index([start + dt.timedelta(days=i) for i in range((end - start).days)], name="day")
    if got.empty:
        frame = pd.DataFrame(0, index=index, columns=list(DAILY_COLUMNS))
    else:
        summed = got.groupby("day")[list(DAILY_COLUMNS)].sum()
        frame = summed.reindex(index, fill_value=0)
    return frame.astype("int64").reset_index()


def _add_rates(frame: pd.DataFrame) -> pd.DataFrame:
    n = frame["traces"].astype("float64")
    for count, rate in RATE_COLUMNS.items():
        frame[rate] = (frame[count].astype("float64") / n).where(n > 0)
    return add_interaction_rates(frame)


def latest_week(engine: Engine) -> dt.date | None:
    """The Monday of the week of the newest trace from 2000 up to now (None without one): a
    row written into the database past the importers (year 9999) cannot move the window."""
    at, now = TraceRow.at, dt.datetime.now(dt.UTC)
    with read_session(engine) as s:
        newest = s.scalar(select(func.max(at)).where(at >= EARLIEST_TRACE_TIME, at <= now))
    if newest is None:
        return None
    if isinstance(newest, str):  # a raw SQLite value, should the type not be applied
        newest = dt.datetime.fromisoformat(newest)
    return week_start(newest)


def weekly_signals(
    engine: Engine,
    tax: Taxonomy,
    start: dt.date,
    end: dt.date,
    segment: tuple[str, str] | None = None,
) -> pd.DataFrame:
    """One row per week from ``start`` (a Monday) up to ``end`` (exclusive), weeks without
    traces included (rates NaN): week, the counts of COUNT_COLUMNS and their rates."""
    start, end = week_start(start), week_start(end)
    if segment is not None:
        _check_dimension(segment[0])
        got = _rollup_frame(engine, tax, segment[0], start, end, [segment[1]])
    else:
        got = _rollup_frame(engine, tax, rollup.ALL, start, end)
    counts = got[list(COUNT_COLUMNS)].itertuples(index=False)
    rows = {w: tuple(row) for w, row in zip(got["week"], counts, strict=True)}
    weeks: list[dt.date] = []
    w = start
    while w < end:
        weeks.append(w)
        w += dt.timedelta(weeks=1)
    data = [[w, *(int(v) for v in rows.get(w, (0,) * len(COUNT_COLUMNS)))] for w in weeks]
    frame = pd.DataFrame(data, columns=["week", *COUNT_COLUMNS])
    return _add_rates(frame)


def segment_values(
    engine: Engine, dim: str, start: dt.date, end: dt.date, limit: int = 20
) -> list[tuple[str, int]]:
    """The most common values of a segment between ``start`` and ``end``, with counts."""
    _check_dimension(dim)
    r = TraceRollup
    total = func.sum(r.traces)
    stmt = (
        select(r.value, total)
        .where(r.dim == dim, r.day >= start, r.day < end)
        .group_by(r.value)
        .order_by(total.desc(), r.value)
        .limit(limit)
    )
    with read_session(engine) as s:
        return [(str(v), int(n)) for v, n in s.execute(stmt)]


def weekly_by_segment(
    engine: Engine,
    tax: Taxonomy,
    dim: str,
    *,
    weeks: int = 12,
    end: dt.date | None = None,
    top: int = 8,
) -> pd.DataFrame:
    """Weekly signals per value of a segment (the ``top`` most common values), long format:
    week, segment, counts and rates. Weeks where a segment has no traces are absent."""
    stop = _end_week(engine, end)
    start = stop - dt.timedelta(weeks=weeks)
    keep = [v for v, _ in segment_values(engine, dim, start, stop, limit=top)]
    columns = ["week", "segment", *COUNT_COLUMNS]
    if not keep:
        return _add_rates(pd.DataFrame(columns=columns))
    got = _rollup_frame(engine, tax, dim, start, stop, keep)
    got = got.rename(columns={"value": "segment"}).sort_values(["week", "segment"])
    return _add_rates(got.reset_index(drop=True)[columns])


def _end_week(engine: Engine, end: dt.date | None) -> dt.date:
    """The first Monday after the shown window: after ``end``'s week, else after the newest
    trace's week, else after the current week."""
    if end is not None:
        return week_start(end) + dt.timedelta(weeks=1)
    newest = latest_week(engine)
    base = newest if newest is not None else week_start(dt.datetime.now(dt.UTC))
    return base + dt.timedelta(weeks=1)


# --------------------------------------------------------------------------------------
# Alerts


@dataclass(frozen=True)
class Alert:
    week: dt.date  # Monday of the week that raised it
    rule: str  # key under alerts: in the policy
    signal: str  # the column it watches
    severity: str  # "warning" or "critical"
    value: float
    baseline: float | None
    message: str
    filters: tuple[tuple[str, str], ...]  # Traces page query parameters behind the alert
    action: str = ""  # what to do (from the policy)
    first_day: dt.date | None = None  # the window it was measured on (windowed rules)
    last_day: dt.date | None = None

    def params(self) -> dict[str, str]:
        return dict(self.filters)


#: The order alerts of one week are listed in.
RULE_ORDER: Final = (
    "no_answer_move",
    "caveat_above_average",
    "ungrounded_rise",
    "negative_feedback_rise",
    "missing_reason",
)


def _eps(x: float) -> float:
    return round(x, 9)


def _rule_filters(rule: str, no_answer: Sequence[str]) -> tuple[tuple[str, str], ...]:
    return {
        "no_answer_move": (("decision", ",".join(no_answer)),),
        "caveat_above_average": (("caveat", "1"),),
        "ungrounded_rise": (("ungrounded", "1"),),
        "negative_feedback_rise": (("negative", "1"), ("decision", ",".join(no_answer))),
        "missing_reason": (("missing_reason", "1"),),
    }[rule]


def segment_params(segment: tuple[str, str] | None) -> tuple[tuple[str, str], ...]:
    """Traces page query parameters for a segment."""
    if segment is None:
        return ()
    dim, value = segment
    if dim.startswith("version."):
        return (("vkey", dim.split(".", 1)[1]), ("vval", value))
    return ((dim, value),)


def evaluate_alerts(
    frame: pd.DataFrame,
    policy: MonitoringPolicy,
    *,
    no_answer: Sequence[str] = ("abstain", "clarify", "escalate"),
    segment: tuple[str, str] | None = None,
) -> list[Alert]:
    """The weekly rules (``no_answer_move``, ``missing_reason``) over a weekly frame (as
    :func:`weekly_signals` returns, sorted by week). Pure; ordered by week, then rule."""
    rules = policy.alerts
    min_n = policy.min_traces_per_week
    weeks = list(frame["week"])
    n = [int(v) for v in frame["traces"]]
    rows = frame.to_dict("records")
    out: list[Alert] = []
    seg = segment_params(segment)

    def add(i: int, rule: str, signal: str, severity: str, value: float,
            base: float | None, message: str) -> None:  # fmt: skip
        wk: dt.date = weeks[i]
        period = (("from", wk.isoformat()), ("to", (wk + dt.timedelta(days=6)).isoformat()))
        out.append(
            Alert(wk, rule, signal, severity, value, base, message,
                  period + _rule_filters(rule, no_answer) + seg, policy.action(rule),
                  wk, wk + dt.timedelta(days=6))
        )  # fmt: skip

    for i in range(len(rows)):
        row = rows[i]
        big_enough = n[i] >= min_n
        r_move = rules.no_answer_move
        if r_move.enabled and big_enough and i > 0 and n[i - 1] >= min_n:
            now, before = float(row["no_answer_rate"]), float(rows[i - 1]["no_answer_rate"])
            delta = _eps((now - before) * 100)
            if abs(delta) > r_move.max_change_points:
                severity = "critical" if abs(delta) >= 2 * r_move.max_change_points else "warning"
                add(
                    i, "no_answer_move", "no_answer_rate", severity, now, before,
                    f"No-answer rate {percent(now)}, {delta:+.1f} points from "
                    f"{percent(before)} the week before (alert beyond "
                    f"±{r_move.max_change_points:g} points).",
                )  # fmt: skip
        r_miss = rules.missing_reason
        missing = int(row["missing_reason"])
        if r_miss.enabled and missing > r_miss.max_count:
            add(
                i, "missing_reason", "missing_reason", "critical", float(missing), None,
                f"{readable.count(missing, 'decision')} without a logged reason (should be "
                f"{r_miss.max_count}).",
            )  # fmt: skip
    return out


_SEVERITY_RANK: Final = {"warning": 1, "critical": 2}


def evaluate_window_alerts(
    daily: pd.DataFrame,
    policy: MonitoringPolicy,
    *,
    no_answer: Sequence[str] = ("abstain", "clarify", "escalate"),
    segment: tuple[str, str] | None = None,
) -> list[Alert]:
    """The windowed rules (caveat over 7 days against 4 weeks, ungrounded over 24
    hours against 14 days, negative feedback on refusals over 7 days against 14 days) on a
    daily frame (as :func:`daily_signals` returns: consecutive days, DAILY_COLUMNS). Pure.
    Each window ending on a day with the full window and baseline before it is checked;
    a rule keeps its worst window per week. Ordered by week, then rule."""
    rules = policy.alerts
    days = [d if isinstance(d, dt.date) else pd.Timestamp(d).date() for d in daily["day"]]
    sums = {c: [0, *pd.Series(daily[c], dtype="int64").cumsum().tolist()] for c in DAILY_COLUMNS}
    seg = segment_params(segment)

    def total(col: str, a: int, b: int) -> int:
        return int(sums[col][b] - sums[col][a])

    best: dict[tuple[str, dt.date], Alert] = {}

    def keep(alert: Alert) -> None:
        key = (alert.rule, alert.week)
        old = best.get(key)
        rank = (_SEVERITY_RANK[alert.severity], alert.value)
        if old is None or rank > (_SEVERITY_RANK[old.severity], old.value):
            best[key] = alert

    checks: list[tuple[str, AboveAverageRule | RiseRule, str, str, str]] = [
        ("caveat_above_average", rules.caveat_above_average, "caveat", "traces", "caveat_rate"),
        ("ungrounded_rise", rules.ungrounded_rise, "ungrounded", "traces", "ungrounded_rate"),
        (
            "negative_feedback_rise",
            rules.negative_feedback_rise,
            "negative_on_refusals",
            "no_answer",
            "negative_feedback_rate",
        ),
    ]
    for rule_key, rule, event_col, base_col, signal in checks:
        if not rule.enabled:
            continue
        w, b = rule.window_days, rule.baseline_days
        need_w, need_b = policy.min_traces(w), policy.min_traces(b)
        for end in range(w + b, len(days) + 1):  # the window is days[end - w : end]
            n_win, n_base = total(base_col, end - w, end), total(base_col, end - w - b, end - w)
            if n_win < need_w or n_base < need_b:
                continue
            events = total(event_col, end - w, end)
            now = events / n_win
            base = total(event_col, end - w - b, end - w) / n_base
            first, last = days[end - w], days[end - 1]
            span = "24 hours" if w == 1 else f"{w} days"
            when = (
                f"on {last.isoformat()}" if w == 1 else f"{first.isoformat()} to {last.isoformat()}"
            )
            of = "of refusals " if base_col == "no_answer" else ""
            if isinstance(rule, AboveAverageRule):
                above = _eps((now - base) * 100)
                if not above > rule.points_above:
                    continue
                severity = "warning"
                message = (
                    f"Caveat rate {percent(now)} over {span} ({when}) is {above:.1f} points above "
                    f"its rate of {percent(base)} over the {b} days before (alert above "
                    f"{rule.points_above:g} points)."
                )
            else:
                if events < rule.min_events:
                    continue
                ratio = math.inf if base == 0 else _eps(now / base)
                if ratio > rule.critical_ratio:
                    severity = "critical"
                elif ratio > rule.warn_ratio:
                    severity = "warning"
                else:
                    continue
                label = (
                    "Negative feedback on refusals"
                    if rule_key == "negative_feedback_rise"
                    else "Ungrounded rate"
                )
                times = "from zero" if base == 0 else f"{ratio:.2f}x"
                message = (
                    f"{label} {percent(now)} {of}over {span} ({when}, {events} traces) is {times} "
                    f"its rate of {percent(base)} over the {b} days before (warning above "
                    f"{rule.warn_ratio:g}x, critical above {rule.critical_ratio:g}x)."
                )
            period = (("from", first.isoformat()), ("to", last.isoformat()))
            keep(
                Alert(
                    week_start(last),
                    rule_key,
                    signal,
                    severity,
                    now,
                    base,
                    message,
                    period + _rule_filters(rule_key, no_answer) + seg,
                    rule.action,
                    first,
                    last,
                )
            )
    return sorted(best.values(), key=lambda a: (a.week, RULE_ORDER.index(a.rule)))


@dataclass(frozen=True)
class MonitorResult:
    weeks: pd.DataFrame  # the shown weeks (see weekly_signals)
    alerts: list[Alert]  # alerts of the shown weeks
    start: dt.date  # first shown Monday
    end: dt.date  # Monday after the last shown week
    segment: tuple[str, str] | None


def monitor(
    engine: Engine,
    tax: Taxonomy,
    policy: MonitoringPolicy,
    *,
    weeks: int = 12,
    end: dt.date | None = None,
    segment: tuple[str, str] | None = None,
) -> MonitorResult:
    """The weekly signals of the ``weeks`` weeks up to ``end`` (default: the newest trace's
    week) and their alerts; the baselines use earlier weeks too."""
    if not 1 <= weeks <= 260:
        raise InputError("weeks must be between 1 and 260")
    stop = _end_week(engine, end)
    start = stop - dt.timedelta(weeks=weeks)
    history = start - dt.timedelta(weeks=policy.history_weeks())
    frame = weekly_signals(engine, tax, history, stop, segment)
    no_answer = no_answer_decisions(tax)
    daily = daily_signals(
        engine, tax, start - dt.timedelta(days=policy.history_days()), stop, segment
    )
    found = [
        *evaluate_alerts(frame, policy, no_answer=no_answer, segment=segment),
        *evaluate_window_alerts(daily, policy, no_answer=no_answer, segment=segment),
    ]
    alerts = sorted(
        (a for a in found if a.week >= start),
        key=lambda a: (a.week, RULE_ORDER.index(a.rule)),
    )
    shown = frame[frame["week"] >= start].reset_index(drop=True)
    return MonitorResult(shown, alerts, start, stop, segment)


def alerts_between(
    engine: Engine, tax: Taxonomy, policy: MonitoringPolicy, first: dt.date, last: dt.date
) -> list[Alert]:
    """The alerts of every week that overlaps ``first`` to ``last`` (inclusive), e.g. the
    weeks of a month for the monthly review."""
    if last < first:
        raise InputError("the period ends before it starts")
    weeks = (week_start(last) - week_start(first)).days // 7 + 1
    return monitor(engine, tax, policy, weeks=weeks, end=last).alerts


# --------------------------------------------------------------------------------------
# Charts (pure: DataFrame in, Altair chart out)

_ALERT_SIGNAL = {
    "no_answer_move": "no_answer_rate",
    "caveat_above_average": "caveat_rate",
    "ungrounded_rise": "ungrounded_rate",
    "negative_feedback_rise": "negative_feedback_rate",
}


def signals_chart(
    frame: pd.DataFrame, alerts: Sequence[Alert] = (), signals: Sequence[str] | None = None
) -> alt.LayerChart:
    """The weekly rates as lines; the weeks and signals that raised an alert are ringed."""
    chosen = list(signals or SIGNALS)
    if frame.empty:
        return alt.LayerChart(layer=[no_data_chart("No trace in these weeks.")])
    long = frame.melt(id_vars=["week", "traces"], value_vars=chosen, var_name="key")
    long["signal"] = long["key"].map(SIGNALS)
    long["week"] = pd.to_datetime(long["week"])
    order = [SIGNALS[k] for k in chosen]
    base = alt.Chart(long).encode(
        x=week_x(),
        y=alt.Y("value:Q", axis=percent_axis("Share of traces")),
        color=alt.Color(
            "signal:N",
            title=None,
            sort=order,
            scale=colour_scale(order),
            legend=bottom_legend(columns=2),
        ),
        tooltip=[
            week_tooltip(),
            alt.Tooltip("signal:N"),
            alt.Tooltip("value:Q", title="rate", format=".1%"),
            alt.Tooltip("traces:Q", title="traces that week"),
        ],
    )
    lines = base.mark_line(point=True)
    marks = [
        {"week": pd.Timestamp(a.week), "signal": SIGNALS[_ALERT_SIGNAL[a.rule]], "rule": a.rule,
         "severity": a.severity, "value": a.value, "message": a.message}
        for a in alerts
        if a.rule in _ALERT_SIGNAL and _ALERT_SIGNAL[a.rule] in chosen
    ]  # fmt: skip
    ring_frame = pd.DataFrame(
        marks, columns=["week", "signal", "rule", "severity", "value", "message"]
    )
    rings = (
        alt.Chart(ring_frame)
        .mark_point(size=260, strokeWidth=2.5, color="#d62728", filled=False)
        .encode(
            x="week:T",
            y="value:Q",
            tooltip=[alt.Tooltip("message:N", title="alert"), alt.Tooltip("severity:N")],
        )
    )
    return alt.LayerChart(layer=[lines, rings], height=320)


COUNT_LABELS: Final[dict[str, str]] = {
    "negative_feedback": "Negative feedback",
    "ungrounded": "Ungrounded",
    "missing_reason": "No logged reason",
}


def counts_chart(frame: pd.DataFrame) -> alt.Chart:
    """Weekly counts of negative feedback, ungrounded traces and decisions without a logged
    reason (the last should stay at zero)."""
    if frame.empty:
        return no_data_chart("No trace in these weeks.")
    f = frame.copy()
    f["week"] = pd.to_datetime(f["week"])
    long = f.melt(id_vars=["week", "traces"], value_vars=list(COUNT_LABELS), var_name="key")
    long["count"] = long["key"].map(COUNT_LABELS)
    return weekly_lines(
        long,
        y=alt.Y("value:Q", title="Traces", axis=alt.Axis(titlePadding=10)),
        color=alt.Color(
            "count:N",
            title=None,
            sort=list(COUNT_LABELS.values()),
            # each count in the colour of its rate: one colour per metric
            scale=colour_scale(COUNT_LABELS.values()),
            legend=bottom_legend(),
        ),
        tooltip=[
            week_tooltip(),
            alt.Tooltip("count:N", title="what"),
            alt.Tooltip("value:Q", title="traces"),
            alt.Tooltip("traces:Q", title="traces that week"),
        ],
        height=220,
    )


def segment_chart(frame: pd.DataFrame, signal: str = "no_answer_rate") -> alt.Chart:
    """One line per segment value for one rate (frame from :func:`weekly_by_segment`)."""
    if signal not in SIGNALS:
        raise InputError(f"unknown signal {signal!r} (one of {', '.join(SIGNALS)})")
    if frame.empty:
        return no_data_chart("No trace in these weeks carries this segment.")
    f = frame.copy()
    f["week"] = pd.to_datetime(f["week"])
    return weekly_lines(
        f,
        y=alt.Y(f"{signal}:Q", axis=percent_axis(SIGNALS[signal])),
        color=alt.Color("segment:N", title=None, legend=bottom_legend()),
        tooltip=[
            week_tooltip(title=None),
            alt.Tooltip("segment:N", title="segment"),
            alt.Tooltip(f"{signal}:Q", title=SIGNALS[signal], format=".1%"),
            alt.Tooltip("traces:Q", title="traces"),
        ],
        height=280,
    )
