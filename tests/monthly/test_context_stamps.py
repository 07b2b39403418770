"""The stamps the Monthly review page keys its cached contexts by: the newest run's gate part
given by a cache is the same context as one gathered whole; the live stamp stays put while
nothing it stands for changes (a month opened is not part of it), moves when a plan's status
or the verdicts do, and differs between months. A report exported again draws no chart twice,
and reads the same."""

from __future__ import annotations

from typing import Any

import altair as alt
import pytest
from sqlalchemy import Engine, delete, update

from review.core.taxonomy import Taxonomy
from review.evaluation import evalruns
from review.monthly import report, reviews
from storage.db import write_session
from storage.models import AuditVerdict, SamplingPlan
from tests.helpers.actors import make_actor

RAVI = make_actor("reviewer", "ravi.menon@brightwave.example")


def _same(a: report.MonthContext, b: report.MonthContext) -> None:
    assert a.gate == b.gate and a.gate_run == b.gate_run
    assert [v.id for v in a.policy_changes] == [v.id for v in b.policy_changes]
    assert [t for t, _ in a.extra_sections] == [t for t, _ in b.extra_sections]
    for (_, x), (_, y) in zip(a.extra_sections, b.extra_sections, strict=True):
        assert x.equals(y)
    assert [(t, c.to_json()) for t, c in a.charts] == [(t, c.to_json()) for t, c in b.charts]
    assert a.names == b.names


def test_a_context_from_a_given_gate_part_is_the_whole_context(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    month = reviews.list_sessions(demo_engine)[0].month
    parts: list[Any] = []

    def gate_of(run: evalruns.RunRow) -> report.GatePart:
        parts.append(report.gate_stamp(demo_engine, run))
        return report.gate_part(demo_engine, tax, run)

    given = report.live_context(demo_engine, tax, month, gate_of=gate_of)
    assert len(parts) == 1 and given.gate_run is not None and given.charts
    _same(given, report.live_context(demo_engine, tax, month))
    assert parts[0] == report.gate_stamp(demo_engine, evalruns.list_runs(demo_engine)[0])


def test_the_gate_stamp_takes_the_outputs_stamp_the_live_stamp_read(demo_engine: Engine) -> None:
    """The page reads the newest run's outputs stamp once (0.5 s at 500,000 cases): the one in
    the live stamp is that run's, and the gate stamp made with it is the one read afresh; a
    stamp of another run is not taken."""
    month = reviews.list_sessions(demo_engine)[0].month
    runs = evalruns.list_runs(demo_engine)
    newest = runs[0]
    held = report.live_outputs_stamp(report.live_stamp(demo_engine, month))
    assert held == evalruns.outputs_stamp(demo_engine, newest.id)
    assert report.gate_stamp(demo_engine, newest, held) == report.gate_stamp(demo_engine, newest)
    other = next(r for r in runs if r.id != newest.id)
    assert report.gate_stamp(demo_engine, other, held) == report.gate_stamp(demo_engine, other)
    assert report.live_outputs_stamp(report.live_stamp(demo_engine, "1999-01")) is None


def test_the_live_stamp_moves_with_what_the_context_reads(demo_engine: Engine) -> None:
    month = reviews.list_sessions(demo_engine)[0].month
    before = report.live_stamp(demo_engine, month)
    assert report.live_stamp(demo_engine, month) == before
    reviews.open_month(demo_engine, RAVI, "2031-05")  # another month's review: not read
    assert report.live_stamp(demo_engine, month) == before
    with write_session(demo_engine) as s:  # a plan closed (its status changes in place)
        s.execute(
            update(SamplingPlan)
            .where(SamplingPlan.id == s.query(SamplingPlan.id).limit(1).scalar_subquery())
            .values(status="closed")
        )
    closed = report.live_stamp(demo_engine, month)
    assert closed != before
    with write_session(demo_engine) as s:  # a verdict fewer
        s.execute(
            delete(AuditVerdict).where(
                AuditVerdict.id == s.query(AuditVerdict.id).limit(1).scalar_subquery()
            )
        )
    assert report.live_stamp(demo_engine, month) != closed
    assert report.live_stamp(demo_engine, "2031-05") != report.live_stamp(demo_engine, month)


def test_a_report_exported_again_draws_no_chart_twice_and_reads_the_same(
    demo_engine: Engine, tax: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    view = reviews.list_sessions(demo_engine)[0]
    ctx = report.month_context(demo_engine, tax, view.month)
    assert ctx.charts
    monkeypatch.setattr(report, "SVG_MEMO", {})
    first = report.export_html(view, ctx)
    drawn: list[object] = []
    real = alt.TopLevelMixin.save

    def spy(self: alt.TopLevelMixin, *args: Any, **kwargs: Any) -> None:
        drawn.append(self)
        real(self, *args, **kwargs)

    monkeypatch.setattr(alt.TopLevelMixin, "save", spy)
    again = report.export_html(view, report.live_context(demo_engine, tax, view.month))
    assert again == first and drawn == []
    monkeypatch.setattr(report, "SVG_MEMO", {})
    assert report.export_html(view, ctx) == first and len(drawn) == len(ctx.charts)
