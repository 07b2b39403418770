"""Names people give things (a run, a user, a case family, an audit batch, a review's findings)
are shown as typed and never make the browser fetch an image or follow a link: on the Monthly
review page (a run named with a Markdown image used to make it fetch that image), on the
Overview and in the Case builder, and in the Markdown report export. The data is the demo's,
with hostile names put where people put names."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from sqlalchemy import Engine, update

from review.admin import users
from review.audits import plans as audit_plans
from review.audits.plans import PlanSpec
from review.core.taxonomy import Taxonomy
from review.evaluation import evalruns
from review.monthly import records, report, reviews
from storage.db import run_write
from storage.models import CaseFamily, EvalRun
from tests.helpers.actors import make_actor
from tests.helpers.pages import (
    ADA,
    INES,
    app,
    live_markdown,
    markdown_shown,
    no_exception,
    page_app,
    readable,
)
from tests.helpers.transact import write

EVIL = "http://evil.example"
RUN = f"run ![pixel]({EVIL}/pixel.png) [click]({EVIL}/go) www.evil.example <b>x</b> _em_"
USER = f"Mallory ![face]({EVIL}/face.png) **[me]({EVIL})** mallory@evil.example"
PLAN = f'Batch ![p]({EVIL}/p.png) =HYPERLINK("{EVIL}")'
FINDING = f"Finding ![f]({EVIL}/f.png) [more]({EVIL}/more)"
FAMILY = "__www.evil.example__"  # a valid family key (letters, dots, underscores)
RAVI = "ravi.menon@brightwave.example"
MALLORY = "mallory@brightwave.example"


def assert_inert(shown: list[str]) -> None:
    live = {text: found for text in shown if (found := live_markdown(text))}
    assert not live, live


def _month_run(engine: Engine, month: str) -> evalruns.RunRow:
    """The run the month's review reads: the newest created by the month's end."""
    _, last = records.month_bounds(month)
    end = dt.datetime.combine(last + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC)
    return next(r for r in evalruns.list_runs(engine) if r.created_at < end)


@pytest.fixture
def hostile_month(demo_engine: Engine) -> str:
    """The open review's month, its run renamed to RUN, a finding and an audit batch with
    hostile names, and a reviewer whose name is Markdown."""
    month = reviews.list_sessions(demo_engine)[0].month
    run = _month_run(demo_engine, month)
    run_write(
        demo_engine,
        lambda s: s.execute(update(EvalRun).where(EvalRun.id == run.id).values(name=RUN)),
    )
    view = reviews.get_session(demo_engine, month)
    assert view is not None
    ravi = make_actor("reviewer", RAVI)
    reviews.add_finding(demo_engine, ravi, view.id, FINDING, "high")
    write(demo_engine, audit_plans.create_plan, ravi, PlanSpec(name=PLAN, total=5))
    admin = users.get_by_email(demo_engine, ADA)
    assert admin is not None
    users.add_user(demo_engine, users.to_actor(admin), MALLORY, USER, ["reviewer"])
    return month


def test_the_monthly_review_shows_a_hostile_run_name_as_text(
    demo_url: str, demo_engine: Engine, hostile_month: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = app(demo_url, monkeypatch, MALLORY).run()
    at.switch_page("pages/review_page.py").run()
    no_exception(at)
    shown = markdown_shown(at)
    assert_inert(shown)
    # the run's name is in the subheaders (release gate, risk-coverage chart), as typed
    headers = [readable(h) for h in at.subheader]
    assert f"Release gate of the latest run ({RUN}, test split)" in headers
    assert any(h.startswith("Risk vs coverage") and RUN in h for h in headers)
    # a closed review names who closed it (an email: no mailto link either)
    closed = next(s for s in reviews.list_sessions(demo_engine) if s.closed)
    at.selectbox(key="rev_month").set_value(closed.month).run()
    no_exception(at)
    assert any(readable(i).startswith("Closed by ") for i in at.info)
    assert_inert(markdown_shown(at))


def test_the_overview_shows_a_hostile_user_name_as_text(
    demo_url: str, hostile_month: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = app(demo_url, monkeypatch, MALLORY).run()
    no_exception(at)
    assert_inert(markdown_shown(at))
    assert any(readable(c).startswith(f"Signed in as {USER} (") for c in at.caption)


def test_the_case_builder_shows_a_hostile_family_key_as_text(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = "FAM-REFUND-WINDOW"
    run_write(
        demo_engine,
        lambda s: s.execute(update(CaseFamily).where(CaseFamily.key == old).values(key=FAMILY)),
    )
    at = page_app(demo_url, monkeypatch, "pages/builder_page.py", INES, family=FAMILY).run()
    no_exception(at)
    assert f"Family {FAMILY}" in [readable(h) for h in at.subheader]
    assert_inert(markdown_shown(at))


def test_the_markdown_report_makes_no_link_or_image_of_a_name(
    demo_engine: Engine, hostile_month: str, tax: Taxonomy
) -> None:
    view = reviews.get_session(demo_engine, hostile_month)
    assert view is not None
    ravi = make_actor("reviewer", RAVI)
    reviews.update_session(
        demo_engine, ravi, view.id, view.version, attendees=[RAVI], summary=f"Summary {FINDING}"
    )
    view = reviews.get_session(demo_engine, hostile_month)
    assert view is not None
    ctx = report.month_context(demo_engine, tax, hostile_month)
    md, _ = report.export_markdown(view, ctx, render_images=False)
    # the report's one kind of image is its own chart file, the title escaped as alt text;
    # nothing else is an image, a link or HTML
    chart_line = re.compile(r"^!\[((?:\\.|[^\\\]])*)\]\(chart-\d+\.png\)$")
    charts = 0
    for line in md.splitlines():
        if m := chart_line.match(line):
            charts += 1
            assert not live_markdown(m.group(1)), line
        else:
            assert not live_markdown(line), line
    assert charts == len(ctx.charts) > 0
    # every hostile name is there, escaped, and reads as typed
    text = readable(md)
    for name in (RUN, FINDING, PLAN, f"Summary {FINDING}"):
        assert name in text, name
    assert RUN not in md and FINDING not in md  # never raw
