"""The Monitoring page's tables, as plain frames: the weekly signals in percent, the alerts with
a link to the traces behind each, the alert rules in words, and a segment comparison."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from review.traces import interaction, monitoring

__all__ = ["alert_rules", "alerts_frame", "segment_totals", "weekly_table"]


def weekly_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per week: traces, every signal in percent (one decimal), and the counts."""
    out = pd.DataFrame({"week of": [w.isoformat() for w in frame["week"]]})
    out["traces"] = frame["traces"]
    for key, label in monitoring.SIGNALS.items():
        out[label] = (frame[key] * 100).round(1)
    out["negative feedback (count)"] = frame["negative_feedback"]
    out["no logged reason (count)"] = frame["missing_reason"]
    for rate in interaction.logged_interactions(frame):
        label, _, logged = interaction.INTERACTION_SIGNALS[rate]
        out[label] = (frame[rate] * 100).round(1)
        out[f"{label.split(' (')[0].lower()}: traces logging it"] = frame[logged]
    return out


def alerts_frame(
    alerts: list[monitoring.Alert], link: Callable[[dict[str, str]], str]
) -> pd.DataFrame:
    """Newest first; ``link`` turns an alert's trace filters into a link to the Traces page.
    Each row says what happened, when (the window measured), and what to do."""
    return pd.DataFrame(
        [
            {
                "week of": a.week.isoformat(),
                "measured": (
                    ""
                    if a.first_day is None or a.last_day is None
                    else a.last_day.isoformat()
                    if a.first_day == a.last_day
                    else f"{a.first_day.isoformat()} to {a.last_day.isoformat()}"
                ),
                "severity": a.severity,
                "what happened": a.message,
                "what to do": a.action,
                "traces": link(a.params()),
            }
            for a in reversed(alerts)
        ],
        columns=["week of", "measured", "severity", "what happened", "what to do", "traces"],
    )


def alert_rules(policy: monitoring.MonitoringPolicy) -> list[str]:
    """The policy's alert rules in words , one line each."""
    a = policy.alerts
    cav, ung, neg = a.caveat_above_average, a.ungrounded_rise, a.negative_feedback_rise

    def span(days: int) -> str:
        return "24 hours" if days == 1 else f"{days} days"

    return [
        f"Rate alerts need at least {policy.min_traces_per_week} traces a week (scaled to the "
        "window) in the window and in its baseline. 'More than' and 'above' are strict.",
        f"No-answer rate: moves by more than {a.no_answer_move.max_change_points:g} "
        "points week on week.",
        f"Caveat rate: over {span(cav.window_days)}, more than {cav.points_above:g} points "
        f"above its rate over the {cav.baseline_days} days before.",
        f"Ungrounded rate: over {span(ung.window_days)}, above {ung.warn_ratio:g}x (warning) "
        f"or {ung.critical_ratio:g}x (critical) its rate over the {ung.baseline_days} days "
        f"before, with at least {ung.min_events} ungrounded traces.",
        f"Negative feedback on refusals (share of refusals): over {span(neg.window_days)}, "
        f"above {neg.warn_ratio:g}x or {neg.critical_ratio:g}x its rate over the "
        f"{neg.baseline_days} days before, with at least {neg.min_events} such traces.",
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
    rates = interaction.add_interaction_rates(totals.copy())
    for rate in interaction.logged_interactions(totals):
        table[interaction.INTERACTION_SIGNALS[rate][0]] = (100 * rates[rate]).round(1)
    return table
