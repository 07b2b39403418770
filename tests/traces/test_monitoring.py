"""Monitoring: weekly signals in SQL against hand-counted traces, the alert rules against
hand-worked numbers, the demo drift, charts, the policy file."""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import pandas as pd
import pytest
from sqlalchemy import Engine

from review.core.errors import InputError, PolicyFileError
from review.core.taxonomy import Taxonomy
from review.demo import tracedemo
from review.demo.fixtures import EXTRA_DEMO_TRACES
from review.traces import interaction, monitoring
from tests.helpers.paths import ROOT
from tests.helpers.traces import import_traces, make_trace

W1 = dt.date(2025, 6, 2)  # a Monday
WEEK = dt.timedelta(weeks=1)


@pytest.fixture
def policy() -> monitoring.MonitoringPolicy:
    return monitoring.load_monitoring_policy(ROOT / "policies" / "monitoring.yaml")


# ---------------------------------------------------------------------------------------
# The policy file


def test_shipped_policy_has_the_domain_thresholds(policy: monitoring.MonitoringPolicy) -> None:
    """Note 004's table: no-answer week on week by more than 5 points; caveat more than 5
    points above the 4-week average for 7 days; ungrounded above 2x the 14-day baseline for
    24 hours; negative feedback on refusals above 1.5x the 14-day baseline for 7 days; any
    decision without a reason; each with the action its rule names."""
    a = policy.alerts
    assert a.no_answer_move.max_change_points == 5
    cav = a.caveat_above_average
    assert (cav.points_above, cav.window_days, cav.baseline_days) == (5, 7, 28)
    ung = a.ungrounded_rise
    assert (ung.window_days, ung.baseline_days, ung.warn_ratio) == (1, 14, 2.0)
    neg = a.negative_feedback_rise
    assert (neg.window_days, neg.baseline_days, neg.warn_ratio) == (7, 14, 1.5)
    assert a.missing_reason.max_count == 0
    assert policy.history_days() == 35
    assert a.no_answer_move.action.startswith("Sample 20 refusals")
    assert policy.action("missing_reason").startswith("Fix logging before the next release")
    assert policy.min_traces(7) == 50 and policy.min_traces(1) == 8


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            "max_change_points: 5",
            "alerts.no_answer_move.max_change_points: Input should be greater",
        ),
        (
            "baseline_days: 28",
            "alerts.caveat_above_average.baseline_days: Input should be a valid",
        ),
        ("min_traces_per_week: 50", "min_traces_per_week: required key is missing"),
    ],
)
def test_invalid_policy_names_the_key(change: str, message: str) -> None:
    text = (ROOT / "policies" / "monitoring.yaml").read_text(encoding="utf-8")
    broken = {
        "max_change_points: 5": "max_change_points: -1",
        "baseline_days: 28": "baseline_days: four",
        "min_traces_per_week: 50": "",
    }[change]
    with pytest.raises(PolicyFileError, match=message):
        monitoring.parse_monitoring_policy(text.replace(change, broken, 1))
    with pytest.raises(PolicyFileError, match="unknown key"):
        monitoring.parse_monitoring_policy(text.replace("alerts:", "alerts:\n  typo: 1", 1))


# ---------------------------------------------------------------------------------------
# Weekly signals in SQL (hand-counted)


@pytest.fixture
def counted(engine: Engine) -> Engine:
    t = "2025-06-0{}T10:00:00Z".format
    items = [
        make_trace("a1", t(2), hits_after_filter=3, feedback="positive", ranking_mode="vector"),
        make_trace("a2", t(3), hits_after_filter=2, ranking_mode="vector"),
        make_trace("a3", t(3), ungrounded=True, feedback="answer_wrong", ranking_mode="vector"),
        make_trace("a4", t(4), reason="support_below_threshold"),
        make_trace("a5", t(4), decision="abstain", reason="no_answer_bearing_evidence",
                   hits_after_filter=0),
        make_trace("a6", t(5), decision="abstain", hits_after_filter=0,
                   feedback="expected_answer"),
        make_trace("a7", t(6), decision="clarify", reason="ambiguous_question"),
        make_trace("a8", t(7), decision="escalate", reason="restricted_topic"),
        make_trace("a9", "2025-06-08T23:59:59Z", decision="partial",
                   reason="required_claim_not_covered"),
        make_trace("a10", "2025-06-09T01:00:00+02:00", decision=None),  # Sunday 23:00 UTC
        make_trace("c1", "2025-06-16T00:00:00Z", ranking_mode="vector"),
        make_trace("c2", "2025-06-17T10:00:00Z"),
        make_trace("c3", "2025-06-18T10:00:00Z", decision="abstain",
                   reason="no_answer_bearing_evidence", ranking_mode="vector"),
        make_trace("c4", "2025-06-22T23:59:59Z", decision="escalate", reason="restricted_topic"),
        make_trace("later", "2025-06-23T00:00:00Z"),  # the week after the window
    ]  # fmt: skip
    import_traces(engine, items)
    return engine


def test_weekly_signals_hand_counted(counted: Engine, tax: Taxonomy) -> None:
    f = monitoring.weekly_signals(counted, tax, dt.date(2025, 6, 4), dt.date(2025, 6, 23))
    assert list(f["week"]) == [W1, W1 + WEEK, W1 + 2 * WEEK]
    first = f.iloc[0]
    assert {c: int(first[c]) for c in monitoring.COUNT_COLUMNS} == {
        "traces": 10,
        "no_answer": 4,  # abstain x2, clarify, escalate (partial answers)
        "caveat": 1,
        "clarify": 1,
        "escalate": 1,
        "empty_retrieval": 2,
        "ungrounded": 1,
        "negative_feedback": 2,  # answer_wrong, expected_answer (positive is not)
        "missing_reason": 2,  # an abstain without a reason, a trace without a decision
        # no trace of the fixture logs what the user did next
        "reformulation_logged": 0,
        "reformulated": 0,
        "citation_logged": 0,
        "citation_opened": 0,
    }
    assert interaction.logged_interactions(f) == []
    assert math.isnan(first["reformulation_rate"])
    assert (first["no_answer_rate"], first["caveat_rate"], first["missing_reason_rate"]) == (
        0.4,
        0.1,
        0.2,
    )
    empty = f.iloc[1]
    assert int(empty["traces"]) == 0 and math.isnan(empty["no_answer_rate"])
    third = f.iloc[2]
    assert (int(third["traces"]), third["no_answer_rate"], third["escalation_rate"]) == (
        4,
        0.5,
        0.25,
    )
    seg = monitoring.weekly_signals(
        counted, tax, W1, W1 + 3 * WEEK, segment=("ranking_mode", "vector")
    )
    assert list(seg["traces"]) == [3, 0, 2]
    assert list(seg["negative_feedback"]) == [1, 0, 0]


def test_interaction_signals_are_shares_of_the_traces_that_log_them(
    engine: Engine, tax: Taxonomy
) -> None:
    """Note 000's user reformulation and citation interaction: each over the traces that log
    it (not over all traces), counted in the rollup, and rebuilt the same from the traces."""
    from review.traces import rollup, weekly

    t = "2025-06-0{}T10:00:00Z".format
    import_traces(
        engine,
        [
            make_trace("r1", t(2), reformulated=True, citation_opened=False),
            make_trace("r2", t(3), reformulated=False, citation_opened=True),
            make_trace("r3", t(3), reformulated=False),  # cited nothing: not logged
            make_trace("r4", t(4), decision="abstain", reason="no_answer_bearing_evidence",
                       reformulated=True),
            make_trace("r5", t(5)),  # logs neither
            make_trace("r6", "2025-06-10T10:00:00Z"),  # a week that logs neither
        ],
    )  # fmt: skip

    def check() -> None:
        f = monitoring.weekly_signals(engine, tax, W1, W1 + 2 * WEEK)
        first, second = f.iloc[0], f.iloc[1]
        counts = {c: int(first[c]) for c in interaction.INTERACTION_COUNTS}
        assert counts == {
            "reformulation_logged": 4,
            "reformulated": 2,
            "citation_logged": 2,
            "citation_opened": 1,
        }
        assert first["reformulation_rate"] == 0.5  # 2 of the 4 logging it, not 2 of 5
        assert first["citation_interaction_rate"] == 0.5
        assert math.isnan(second["reformulation_rate"])  # undefined, never 0
        assert interaction.logged_interactions(f) == [
            "reformulation_rate",
            "citation_interaction_rate",
        ]
        table = weekly.weekly_table(f)
        assert table["User reformulation rate (of traces logging it)"].iloc[0] == 50.0
        spec = interaction.interaction_chart(f, interaction.logged_interactions(f)).to_dict()
        values = next(iter(spec["datasets"].values()))
        assert len(values) == 2  # the week without logging has no point

    check()
    rollup.rebuild(engine)
    check()


def test_segments_and_latest_week(counted: Engine, tax: Taxonomy) -> None:
    assert monitoring.latest_week(counted) == W1 + 3 * WEEK
    assert monitoring.segment_values(counted, "ranking_mode", W1, W1 + 3 * WEEK) == [("vector", 5)]
    by = monitoring.weekly_by_segment(counted, tax, "ranking_mode", weeks=4, end=W1 + 2 * WEEK)
    assert [(r.week, r.segment, r.traces) for r in by.itertuples()] == [
        (W1, "vector", 3),
        (W1 + 2 * WEEK, "vector", 2),
    ]
    with pytest.raises(InputError, match="unknown segment"):
        monitoring.segment_values(counted, "colour", W1, W1 + WEEK)


def test_a_future_dated_trace_cannot_move_the_window(counted: Engine) -> None:
    """The importers refuse times more than a day ahead; one written into the database
    directly (next month, year 9999) or before 2000 is left out of the newest week."""
    soon = dt.datetime.now(dt.UTC) + dt.timedelta(days=30)
    for at in (f"{soon:%Y-%m-%d %H:%M:%S}.000000", "9999-12-31 12:00:00.000000", "0001-01-01"):
        with counted.begin() as c:
            c.exec_driver_sql("UPDATE traces SET at = ? WHERE trace_id = 'a1'", (at,))
        assert monitoring.latest_week(counted) == W1 + 3 * WEEK


def test_empty_database(engine: Engine, tax: Taxonomy, policy: monitoring.MonitoringPolicy) -> None:
    assert monitoring.latest_week(engine) is None
    result = monitoring.monitor(engine, tax, policy, weeks=4)
    assert len(result.weeks) == 4 and result.alerts == []
    assert int(result.weeks["traces"].sum()) == 0
    assert monitoring.weekly_by_segment(engine, tax, "version.index").empty


# ---------------------------------------------------------------------------------------
# Alert rules (hand-worked)


def frame(traces: list[int], **counts: list[int]) -> pd.DataFrame:
    n = len(traces)
    data: dict[str, Any] = {"week": [W1 + i * WEEK for i in range(n)], "traces": traces}
    for col in monitoring.RATE_COLUMNS:
        data[col] = counts.get(col, [0] * n)
    f = pd.DataFrame(data)
    for col, rate in monitoring.RATE_COLUMNS.items():
        f[rate] = f[col] / f["traces"]
    return f


def found(alerts: list[monitoring.Alert], rule: str) -> list[tuple[int, str]]:
    return [((a.week - W1).days // 7 + 1, a.severity) for a in alerts if a.rule == rule]


def test_no_answer_moves_more_than_five_points(policy: monitoring.MonitoringPolicy) -> None:
    f = frame([100] * 6, no_answer=[30, 36, 36, 41, 30, 35])
    alerts = monitoring.evaluate_alerts(f, policy)
    # +6 warns; +5 is not "more than 5"; -11 is twice the threshold: critical
    assert found(alerts, "no_answer_move") == [(2, "warning"), (5, "critical")]
    a = next(x for x in alerts if x.rule == "no_answer_move")
    assert a.params() == {
        "from": "2025-06-09",
        "to": "2025-06-15",
        "decision": "abstain,clarify,escalate",
    }
    assert "+6.0 points from 30%" in a.message


def test_small_weeks_raise_no_rate_alert(policy: monitoring.MonitoringPolicy) -> None:
    f = frame([100, 49, 100, 100], no_answer=[30, 45, 30, 30])
    assert monitoring.evaluate_alerts(f, policy) == []


D1 = dt.date(2025, 5, 1)


def days(traces: list[int], **counts: list[int]) -> pd.DataFrame:
    """A daily frame (as daily_signals returns) from D1 on."""
    n = len(traces)
    data: dict[str, Any] = {"day": [D1 + dt.timedelta(days=i) for i in range(n)]}
    data["traces"] = traces
    for col in monitoring.DAILY_COLUMNS[1:]:
        data[col] = counts.get(col, [0] * n)
    return pd.DataFrame(data)


def daily_found(alerts: list[monitoring.Alert], rule: str) -> list[tuple[dt.date, str]]:
    return [(a.last_day, a.severity) for a in alerts if a.rule == rule]  # type: ignore[misc]


def test_caveat_more_than_five_points_above_its_four_week_rate_over_seven_days(
    policy: monitoring.MonitoringPolicy,
) -> None:
    # 28 baseline days at 10 caveats in 100 traces (10%), then 7 days at 16%: 6 points above
    f = days([100] * 35, caveat=[10] * 28 + [16] * 7)
    alerts = monitoring.evaluate_window_alerts(f, policy)
    found = daily_found(alerts, "caveat_above_average")
    assert found == [(D1 + dt.timedelta(days=34), "warning")]
    # exactly 5 points above is not "more than" 5
    at_bound = days([100] * 35, caveat=[10] * 28 + [15] * 7)
    assert monitoring.evaluate_window_alerts(at_bound, policy) == []
    first = next(a for a in alerts if a.rule == "caveat_above_average")
    assert first.action.startswith("Check for corpus gaps")
    assert first.params()["caveat"] == "1"
    assert first.first_day is not None and first.last_day is not None
    assert (first.last_day - first.first_day).days == 6  # a 7-day window


def test_ungrounded_is_measured_over_24_hours_against_14_days(
    policy: monitoring.MonitoringPolicy,
) -> None:
    # 14 days at 2 of 100 ungrounded (2%); day 15: 4 of 100 is exactly 2x (no alert: strict,
    # and only 4 events); day 16: 5 of 100 against 30 of 1400 (2.3x, warning); day 17: 8 of
    # 100 against 33 of 1400 (3.4x, critical)
    f = days([100] * 17, ungrounded=[2] * 14 + [4, 5, 8])
    alerts = monitoring.evaluate_window_alerts(f, policy)
    found = daily_found(alerts, "ungrounded_rise")
    # one alert per week at most: days 16 and 17 fall in the same week (2025-05-12)
    assert found == [(D1 + dt.timedelta(days=16), "critical")]
    base = next(a for a in alerts if a.rule == "ungrounded_rise").baseline
    assert base is not None and base == pytest.approx(33 / 1400)
    # a day in a later week with too few traces raises nothing
    thin = days([100] * 14 + [7], ungrounded=[2] * 14 + [7])
    assert monitoring.evaluate_window_alerts(thin, policy) == []


def test_negative_feedback_counts_refusals_only(policy: monitoring.MonitoringPolicy) -> None:
    # refusals: 100 a day; negative feedback on them 2 a day for 14 days, then 5 a day
    f = days(
        [300] * 21,
        no_answer=[100] * 21,
        negative_on_refusals=[2] * 14 + [5] * 7,
    )
    alerts = monitoring.evaluate_window_alerts(f, policy, segment=("version.index", "kb-2"))
    found = daily_found(alerts, "negative_feedback_rise")
    assert found == [(D1 + dt.timedelta(days=20), "critical")]  # 5% of refusals, 2.5x 2%
    a = next(x for x in alerts if x.rule == "negative_feedback_rise")
    assert "of refusals" in a.message and a.action.startswith("Add those questions")
    assert a.params() == {
        "from": (D1 + dt.timedelta(days=14)).isoformat(),
        "to": (D1 + dt.timedelta(days=20)).isoformat(),
        "negative": "1",
        "decision": "abstain,clarify,escalate",
        "vkey": "index",
        "vval": "kb-2",
    }
    # the same feedback on answers does not count
    answers = days([300] * 21, no_answer=[100] * 21, negative_on_refusals=[2] * 21)
    assert monitoring.evaluate_window_alerts(answers, policy) == []


def test_negative_feedback_from_a_zero_baseline(policy: monitoring.MonitoringPolicy) -> None:
    f = days([100] * 21, no_answer=[60] * 21, negative_on_refusals=[0] * 14 + [1] * 7)
    alerts = monitoring.evaluate_window_alerts(f, policy)
    assert daily_found(alerts, "negative_feedback_rise") == [
        (D1 + dt.timedelta(days=20), "critical")
    ]
    assert "from zero" in alerts[0].message


def test_any_decision_without_a_reason_alerts_even_in_a_small_week(
    policy: monitoring.MonitoringPolicy,
) -> None:
    f = frame([10, 10, 10], missing_reason=[0, 1, 0])
    alerts = monitoring.evaluate_alerts(f, policy)
    assert found(alerts, "missing_reason") == [(2, "critical")]
    assert alerts[0].params()["missing_reason"] == "1"


def test_disabled_rules_stay_quiet(policy: monitoring.MonitoringPolicy) -> None:
    text = (ROOT / "policies" / "monitoring.yaml").read_text(encoding="utf-8")
    quiet = monitoring.parse_monitoring_policy(text.replace("enabled: true", "enabled: false"))
    f = frame([100] * 3, no_answer=[10, 40, 10], missing_reason=[1, 1, 1])
    assert monitoring.evaluate_alerts(f, quiet) == []
    assert monitoring.evaluate_alerts(f, policy)


# ---------------------------------------------------------------------------------------
# The demo drift


def test_alerts_fire_on_the_demo_drift(
    trace_demo_engine: Engine,
    tax: Taxonomy,
    policy: monitoring.MonitoringPolicy,
) -> None:
    result = monitoring.monitor(trace_demo_engine, tax, policy, weeks=12)
    assert len(result.weeks) == 12
    assert int(result.weeks["traces"].sum()) == tracedemo.DEMO_TRACES + EXTRA_DEMO_TRACES

    def week_no(a: monitoring.Alert) -> int:
        return (a.week - result.start).days // 7 + 1

    fired = {(week_no(a), a.rule) for a in result.alerts}
    # the designed events fire in their weeks
    assert {
        (tracedemo.DRIFT_WEEK, "no_answer_move"),
        (tracedemo.DRIFT_WEEK, "negative_feedback_rise"),
        (tracedemo.MISSING_REASON_WEEK, "missing_reason"),
    } <= fired
    # the weekly rules fire nowhere else; the daily windows (24 hours, 7 days) also catch
    # day-to-day noise in the demo's random days, as note 004's rules would in production,
    # and each says what it measured
    weekly_rules = {(w, r) for w, r in fired if r in ("no_answer_move", "missing_reason")}
    assert weekly_rules == {
        (tracedemo.DRIFT_WEEK, "no_answer_move"),
        (tracedemo.MISSING_REASON_WEEK, "missing_reason"),
    }
    drift = next(
        a
        for a in result.alerts
        if a.rule == "negative_feedback_rise" and week_no(a) == tracedemo.DRIFT_WEEK
    )
    assert "of refusals over 7 days" in drift.message
    assert drift.baseline is not None and drift.value > 1.5 * drift.baseline
    assert all(a.action for a in result.alerts)
    rates = list(result.weeks["no_answer_rate"])
    jump = rates[tracedemo.DRIFT_WEEK - 1] - rates[tracedemo.DRIFT_WEEK - 2]
    assert jump > 0.08
    by_index = monitoring.weekly_by_segment(trace_demo_engine, tax, "version.index", weeks=12)
    assert by_index["segment"].nunique() == 2
    after = by_index[by_index["week"] >= result.start + (tracedemo.DRIFT_WEEK - 1) * WEEK]
    assert after["segment"].str.endswith("-rechunked").all()
    drift_week = result.start + (tracedemo.DRIFT_WEEK - 1) * WEEK
    in_drift = monitoring.alerts_between(
        trace_demo_engine,
        tax,
        policy,
        drift_week + dt.timedelta(days=2),
        drift_week + dt.timedelta(days=3),
    )
    assert {"no_answer_move", "negative_feedback_rise"} <= {a.rule for a in in_drift}
    with pytest.raises(InputError, match="ends before it starts"):
        monitoring.alerts_between(trace_demo_engine, tax, policy, drift_week, W1)
    segmented = monitoring.monitor(
        trace_demo_engine, tax, policy, weeks=12, segment=("ranking_mode", "vector")
    )
    assert 0 < int(segmented.weeks["traces"].sum()) < tracedemo.DEMO_TRACES
    assert all(dict(a.filters)["ranking_mode"] == "vector" for a in segmented.alerts)


# ---------------------------------------------------------------------------------------
# Charts


def test_charts_build_from_the_frames(policy: monitoring.MonitoringPolicy) -> None:
    f = frame([100] * 6, no_answer=[30, 36, 36, 41, 30, 35], negative_feedback=[1, 2, 3, 4, 5, 9])
    alerts = monitoring.evaluate_alerts(f, policy)
    spec = monitoring.signals_chart(f, alerts).to_dict()
    assert len(spec["layer"]) == 2
    rings = spec["datasets"][spec["layer"][1]["data"]["name"]]
    assert len(rings) == len([a for a in alerts if a.rule != "missing_reason"])
    counts = monitoring.counts_chart(f).to_dict()
    assert len(counts["datasets"][counts["data"]["name"]]) == 3 * len(f)
    seg = f.assign(segment="kb-1")
    assert monitoring.segment_chart(seg, "caveat_rate").to_dict()["mark"]["type"] == "line"
    with pytest.raises(InputError, match="unknown signal"):
        monitoring.segment_chart(seg, "traces")


# ---------------------------------------------------------------------------------------
# SQLite and PostgreSQL


@pytest.mark.postgres
def test_week_buckets_on_both_databases(any_engine: Engine, tax: Taxonomy) -> None:
    items = [
        make_trace("m1", "2025-06-02T00:00:00Z"),
        make_trace("m2", "2025-06-09T01:00:00+02:00", decision="abstain", reason="false_premise"),
        make_trace("m3", "2025-06-09T00:00:00Z", decision="clarify"),
        make_trace("m4", "2025-06-15T23:59:59Z", versions={"index": "kb-2"}),
    ]
    import_traces(any_engine, items)
    f = monitoring.weekly_signals(any_engine, tax, W1, W1 + 2 * WEEK)
    assert list(f["traces"]) == [2, 2]
    assert list(f["no_answer"]) == [1, 1]
    assert list(f["missing_reason"]) == [0, 1]
    seg = monitoring.weekly_signals(
        any_engine, tax, W1, W1 + 2 * WEEK, segment=("version.index", "kb-2")
    )
    assert list(seg["traces"]) == [0, 1]
