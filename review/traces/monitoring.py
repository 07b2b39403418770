"""Weekly monitoring of production traces: the signals of the monthly review, and alerts.

Signals (per week, Monday to Sunday UTC; every rate is a share of all traces of the week):

* **no-answer rate**: decisions that do not answer (the taxonomy's ``answers: false``: abstain,
  clarify and escalate, i.e. refuse + follow-up + escalate);
* **caveat rate**: answers with reason code ``support_below_threshold`` (see review.traces.browse);
* **clarification** and **escalation** rates (decision clarify / escalate);
* **empty-retrieval rate**: ``hits_after_filter`` is 0;
* **ungrounded rate**: the groundedness check said ungrounded (whatever the decision);
* **negative feedback**: feedback ``negative``, ``expected_answer`` or ``answer_wrong``;
* **decisions with no logged reason**: no decision, or a decision other than answer without a
  reason code (a count; it should be zero).

Everything is read from the daily rollup (``trace_rollup``, kept in step with the traces by
the import and the purge, see review.traces.rollup): a few hundred rows per year and segment, summed
into weeks, never by loading traces. Alert thresholds come from
``policies/monitoring.yaml`` (:class:`MonitoringPolicy`); :func:`evaluate_alerts` is a pure
function over the weekly frame:

* ``no_answer_move``: the no-answer rate moves by more than ``max_change_points`` points from
  the week before (critical at twice that);
* ``caveat_above_average``: the caveat rate is ``points_above`` points or more above its
  average over the previous ``baseline_weeks`` weeks;
* ``ungrounded_rise`` / ``negative_feedback_rise``: the rate is ``warn_ratio`` (warning) or
  ``critical_ratio`` (critical) times its average over the previous ``baseline_weeks`` weeks,
  with at least ``min_events`` events in the week (from a zero baseline: critical);
* ``missing_reason``: more than ``max_count`` decisions without a logged reason.

Rate alerts need ``min_traces_per_week`` traces in the week and in each baseline week used;
baseline weeks with fewer traces are skipped. Each alert carries the filters that list the
traces behind it on the Traces page.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import altair as alt
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Engine, func, select

from review.core.errors import InputError
from review.core.taxonomy import Taxonomy, policies_dir
from review.core.yamlstrict import load_model, load_yaml_text, validate
from review.traces import rollup
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
    "evaluate_alerts",
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


class AboveAverageRule(_Strict):
    enabled: bool = True
    points_above: float = Field(gt=0, le=100)
    baseline_weeks: int = Field(ge=1, le=26)


class RiseRule(_Strict):
    enabled: bool = True
    baseline_weeks: int = Field(ge=1, le=26)
    warn_ratio: float = Field(gt=1, le=100)
    critical_ratio: float = Field(gt=1, le=100)
    min_events: int = Field(ge=1)


class MissingRule(_Strict):
    enabled: bool = True
    max_count: int = Field(ge=0)


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
        """Weeks before the first shown week that the alert baselines need."""
        a = self.alerts
        return max(
            1,
            a.caveat_above_average.baseline_weeks,
            a.ungrounded_rise.baseline_weeks,
            a.negative_feedback_rise.baseline_weeks,
        )


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
COUNT_COLUMNS: Final[tuple[str, ...]] = ("traces", *RATE_COLUMNS)

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


def _rollup_frame(
    engine: Engine,
    tax: Taxonomy,
    dim: str,
    start: dt.date,
    end: dt.date,
    values: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Daily rollup rows of one segment (``""`` for all traces) between ``start`` and
    ``end`` (exclusive), summed per week and value: week, value and COUNT_COLUMNS."""
    r = TraceRollup
    cols = [getattr(r, c) for c in _STORED]
    stmt = select(r.day, r.value, r.decision, *cols).where(
        r.dim == dim, r.day >= start, r.day < end
    )
    if values is not None:
        stmt = stmt.where(r.value.in_(list(values)))
    with read_session(engine) as s:
        frame = pd.DataFrame(s.execute(stmt).all(), columns=["day", "value", "decision", *_STORED])
    columns = ["week", "value", *COUNT_COLUMNS]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    day = pd.to_datetime(frame["day"])
    frame["week"] = (day - pd.to_timedelta(day.dt.day_of_week, unit="D")).dt.date
    decision = frame["decision"]
    frame["no_answer"] = frame["traces"].where(decision.isin(no_answer_decisions(tax)), 0)
    frame["clarify"] = frame["traces"].where(decision == "clarify", 0)
    frame["escalate"] = frame["traces"].where(decision == "escalate", 0)
    out = frame.groupby(["week", "value"], as_index=False)[list(COUNT_COLUMNS)].sum()
    return out[columns]


def _add_rates(frame: pd.DataFrame) -> pd.DataFrame:
    n = frame["traces"].astype("float64")
    for count, rate in RATE_COLUMNS.items():
        frame[rate] = (frame[count].astype("float64") / n).where(n > 0)
    return frame


def latest_week(engine: Engine) -> dt.date | None:
    """The Monday of the week of the newest trace (None without traces)."""
    with read_session(engine) as s:
        newest = s.scalar(select(func.max(TraceRow.at)))
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

    def params(self) -> dict[str, str]:
        return dict(self.filters)


def _eps(x: float) -> float:
    return round(x, 9)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _rule_filters(rule: str, no_answer: Sequence[str]) -> tuple[tuple[str, str], ...]:
    return {
        "no_answer_move": (("decision", ",".join(no_answer)),),
        "caveat_above_average": (("caveat", "1"),),
        "ungrounded_rise": (("ungrounded", "1"),),
        "negative_feedback_rise": (("negative", "1"),),
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
    """Alerts over a weekly frame (as :func:`weekly_signals` returns, sorted by week).

    Pure: every rule of the module docs, evaluated for each week that has the history it
    needs. Alerts are ordered by week, then rule.
    """
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
                  period + _rule_filters(rule, no_answer) + seg)
        )  # fmt: skip

    def baseline(i: int, col: str, k: int) -> float | None:
        prev = [float(rows[j][col]) for j in range(max(0, i - k), i) if n[j] >= min_n]
        return sum(prev) / len(prev) if prev else None

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
                    f"No-answer rate {_pct(now)}, {delta:+.1f} points from {_pct(before)} the "
                    f"week before (alert beyond ±{r_move.max_change_points:g} points).",
                )  # fmt: skip
        r_cav = rules.caveat_above_average
        if r_cav.enabled and big_enough:
            base = baseline(i, "caveat_rate", r_cav.baseline_weeks)
            now = float(row["caveat_rate"])
            if base is not None and _eps((now - base) * 100) >= r_cav.points_above:
                add(
                    i, "caveat_above_average", "caveat_rate", "warning", now, base,
                    f"Caveat rate {_pct(now)} is {100 * (now - base):.1f} points above its "
                    f"{r_cav.baseline_weeks}-week average of {_pct(base)} (alert at "
                    f"{r_cav.points_above:g} points).",
                )  # fmt: skip
        for rule_key, count_col, label in (
            ("ungrounded_rise", "ungrounded", "Ungrounded rate"),
            ("negative_feedback_rise", "negative_feedback", "Negative feedback"),
        ):
            r: RiseRule = getattr(rules, rule_key)
            events = int(row[count_col])
            if not (r.enabled and big_enough and events >= r.min_events):
                continue
            rate_col = RATE_COLUMNS[count_col]
            base = baseline(i, rate_col, r.baseline_weeks)
            if base is None:
                continue
            now = float(row[rate_col])
            ratio = math.inf if base == 0 else _eps(now / base)
            if ratio >= r.critical_ratio:
                severity = "critical"
            elif ratio >= r.warn_ratio:
                severity = "warning"
            else:
                continue
            times = "from zero" if base == 0 else f"{ratio:.2f}x"
            add(
                i, rule_key, rate_col, severity, now, base,
                f"{label} {_pct(now)} ({events} traces) is {times} its "
                f"{r.baseline_weeks}-week baseline of {_pct(base)} (warning at "
                f"{r.warn_ratio:g}x, critical at {r.critical_ratio:g}x).",
            )  # fmt: skip
        r_miss = rules.missing_reason
        missing = int(row["missing_reason"])
        if r_miss.enabled and missing > r_miss.max_count:
            add(
                i, "missing_reason", "missing_reason", "critical", float(missing), None,
                f"{missing} decision(s) without a logged reason (should be "
                f"{r_miss.max_count}).",
            )  # fmt: skip
    return out


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
    alerts = [
        a
        for a in evaluate_alerts(frame, policy, no_answer=no_answer_decisions(tax), segment=segment)
        if a.week >= start
    ]
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
    long = frame.melt(id_vars=["week", "traces"], value_vars=chosen, var_name="key")
    long["signal"] = long["key"].map(SIGNALS)
    long["week"] = pd.to_datetime(long["week"])
    order = [SIGNALS[k] for k in chosen]
    base = alt.Chart(long).encode(
        x=alt.X("week:T", title="Week (Monday)", axis=alt.Axis(format="%d %b")),
        y=alt.Y("value:Q", title="Share of traces", axis=alt.Axis(format="%")),
        color=alt.Color("signal:N", title=None, sort=order, legend=alt.Legend(orient="bottom")),
        tooltip=[
            alt.Tooltip("week:T", title="week of", format="%Y-%m-%d"),
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
    f = frame.copy()
    f["week"] = pd.to_datetime(f["week"])
    long = f.melt(id_vars=["week", "traces"], value_vars=list(COUNT_LABELS), var_name="key")
    long["count"] = long["key"].map(COUNT_LABELS)
    chart: alt.Chart = (
        alt.Chart(long)
        .mark_line(point=True)
        .encode(
            x=alt.X("week:T", title="Week (Monday)", axis=alt.Axis(format="%d %b")),
            y=alt.Y("value:Q", title="Traces"),
            color=alt.Color(
                "count:N",
                title=None,
                sort=list(COUNT_LABELS.values()),
                legend=alt.Legend(orient="bottom"),
            ),
            tooltip=[
                alt.Tooltip("week:T", title="week of", format="%Y-%m-%d"),
                alt.Tooltip("count:N", title="what"),
                alt.Tooltip("value:Q", title="traces"),
                alt.Tooltip("traces:Q", title="traces that week"),
            ],
        )
        .properties(height=220)
    )
    return chart


def segment_chart(frame: pd.DataFrame, signal: str = "no_answer_rate") -> alt.Chart:
    """One line per segment value for one rate (frame from :func:`weekly_by_segment`)."""
    if signal not in SIGNALS:
        raise InputError(f"unknown signal {signal!r} (one of {', '.join(SIGNALS)})")
    f = frame.copy()
    f["week"] = pd.to_datetime(f["week"])
    chart: alt.Chart = (
        alt.Chart(f)
        .mark_line(point=True)
        .encode(
            x=alt.X("week:T", title="Week (Monday)", axis=alt.Axis(format="%d %b")),
            y=alt.Y(f"{signal}:Q", title="Share of traces", axis=alt.Axis(format="%")),
            color=alt.Color("segment:N", title=None, legend=alt.Legend(orient="bottom")),
            tooltip=[
                alt.Tooltip("week:T", format="%Y-%m-%d"),
                "segment:N",
                alt.Tooltip(f"{signal}:Q", format=".1%"),
                "traces:Q",
            ],
        )
        .properties(height=280)
    )
    return chart
