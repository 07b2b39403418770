"""The Monitoring page's tables, as plain frames: the weekly signals in percent, the alerts with
a link to the traces behind each, the alert rules in words, and a segment comparison."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from review.traces import monitoring

__all__ = ["alert_rules", "alerts_frame", "segment_totals", "weekly_table"]


def weekly_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per week: traces, every signal in percent (one decimal), and the counts."""
    out = pd.DataFrame({"week of": [w.isoformat() for w in frame["week"]]})
    out["traces"] = frame["traces"]
    for key, label in monitoring.SIGNALS.items():
        out[label] = (frame[key] * 100).round(1)
    out["negative feedback (count)"] = frame["negative_feedback"]
    out["no logged reason (count)"] = frame["missing_reason"]
    return out


def alerts_frame(
    alerts: list[monitoring.Alert], link: Callable[[dict[str, str]], str]
) -> pd.DataFrame:
    """Newest first; ``link`` turns an alert's trace filters into a link to the Traces page."""
    return pd.DataFrame(
        [
            {
                "week of": a.week.isoformat(),
                "severity": a.severity,
                "what happened": a.message,
                "traces": link(a.params()),
            }
            for a in reversed(alerts)
        ],
        columns=["week of", "severity", "what happened", "traces"],
    )


def alert_rules(policy: monitoring.MonitoringPolicy) -> list[str]:
    """The policy's alert rules in words, one line each."""
    a = policy.alerts
    return [
        f"Rate alerts need at least {policy.min_traces_per_week} traces in the week.",
        f"No-answer rate: moves by more than {a.no_answer_move.max_change_points:g} "
        "points week on week.",
        f"Caveat rate: {a.caveat_above_average.points_above:g} points or more above its "
        f"{a.caveat_above_average.baseline_weeks}-week average.",
        f"Ungrounded rate: {a.ungrounded_rise.warn_ratio:g}x (warning) or "
        f"{a.ungrounded_rise.critical_ratio:g}x (critical) its "
        f"{a.ungrounded_rise.baseline_weeks}-week baseline.",
        f"Negative feedback: {a.negative_feedback_rise.warn_ratio:g}x or "
        f"{a.negative_feedback_rise.critical_ratio:g}x its "
        f"{a.negative_feedback_rise.baseline_weeks}-week baseline.",
        f"Decisions with no logged reason: more than {a.missing_reason.max_count} in a week.",
    ]


def segment_totals(seg_frame: pd.DataFrame) -> pd.DataFrame:
    """Per segment over the shown weeks, busiest first: traces and each signal in percent,
    from the summed counts (not an average of weekly rates)."""
    totals = (
        seg_frame.groupby("segment", as_index=False)[list(monitoring.COUNT_COLUMNS)]
        .sum()
        .sort_values("traces", ascending=False)
    )
    table = pd.DataFrame({"segment": totals["segment"], "traces": totals["traces"]})
    for count, rate in monitoring.RATE_COLUMNS.items():
        if rate in monitoring.SIGNALS:
            table[monitoring.SIGNALS[rate]] = (100 * totals[count] / totals["traces"]).round(1)
    return table
