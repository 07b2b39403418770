"""The Monitoring page's tables: rates from summed counts, alert rules in words, links."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from review.traces import monitoring, weekly


@pytest.fixture(scope="module")
def policy() -> monitoring.MonitoringPolicy:
    return monitoring.load_monitoring_policy()


def test_segment_rates_come_from_summed_counts_busiest_first() -> None:
    rows = []
    for seg, week, traces, no_answer in [("a", 1, 10, 5), ("a", 2, 30, 0), ("b", 1, 50, 10)]:
        row: dict[str, object] = {c: 0 for c in monitoring.COUNT_COLUMNS}
        row.update({"segment": seg, "week": week, "traces": traces, "no_answer": no_answer})
        rows.append(row)
    table = weekly.segment_totals(pd.DataFrame(rows))
    label = monitoring.SIGNALS["no_answer_rate"]
    assert table["segment"].tolist() == ["b", "a"]
    # a: (5 + 0) / (10 + 30) = 12.5 %, not the mean of the weekly rates (25 %)
    assert table.set_index("segment")[label].to_dict() == {"b": 20.0, "a": 12.5}


def test_alert_rules_quote_the_policy(policy: monitoring.MonitoringPolicy) -> None:
    lines = weekly.alert_rules(policy)
    assert len(lines) == 6
    assert f"at least {policy.min_traces_per_week} traces" in lines[0]
    assert f"more than {policy.alerts.missing_reason.max_count} in a week" in lines[-1]


def test_alerts_are_listed_newest_first_with_a_link_to_their_traces() -> None:
    def alert(day: int, rule: str) -> monitoring.Alert:
        return monitoring.Alert(
            week=dt.date(2025, 6, day),
            rule=rule,
            signal="no_answer_rate",
            severity="warning",
            value=0.5,
            baseline=None,
            message=f"{rule} moved",
            filters=(("date_from", f"2025-06-{day:02d}"),),
        )

    frame = weekly.alerts_frame(
        [alert(2, "first"), alert(9, "second")], lambda p: "traces?" + p["date_from"]
    )
    assert frame["what happened"].tolist() == ["second moved", "first moved"]
    assert list(frame.columns) == [
        "week of", "measured", "severity", "what happened", "what to do", "traces",
    ]  # fmt: skip
    assert frame["traces"].tolist() == ["traces?2025-06-09", "traces?2025-06-02"]
    assert weekly.alerts_frame([], str).empty


def test_weekly_table_shows_rates_in_percent() -> None:
    row: dict[str, object] = {k: 0.0 for k in monitoring.SIGNALS}
    row.update(
        {"week": dt.date(2025, 6, 2), "traces": 8, "no_answer_rate": 0.125, "negative_feedback": 1,
         "missing_reason": 2}
    )  # fmt: skip
    table = weekly.weekly_table(pd.DataFrame([row]))
    assert table.iloc[0]["week of"] == "2025-06-02"
    assert table.iloc[0][monitoring.SIGNALS["no_answer_rate"]] == 12.5
    assert table.iloc[0]["no logged reason (count)"] == 2
