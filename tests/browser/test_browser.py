"""Main journeys in a real browser: Playwright driving Debian's chromium against `streamlit run`."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.helpers.browser import chromium_page, open_as, streamlit_server, wait_idle
from tests.helpers.guideshots import guide_shot
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.browser


@pytest.fixture
def page(server: str, request: pytest.FixtureRequest) -> Iterator[object]:
    # a `cold` test opens the server itself (see the first-request test)
    cold = request.node.get_closest_marker("cold") is not None
    with chromium_page(base=server, open_base=not cold) as pg:
        yield pg


@pytest.mark.cold
def test_the_first_request_to_a_deep_link_goes_through_the_router(page) -> None:
    """Streamlit serves pages/ files directly until the router has run once in the process;
    page files are named *_page.py so no URL of the app can reach them that way."""
    pg = page
    pg.goto(pg.base + "/cases?case=1")
    wait_idle(pg)
    if pg.get_by_text("Page not found").count():  # first request of a fresh server only
        pg.keyboard.press("Escape")
    # a new session acts as nobody: the person picks their name, then the link opens
    _pick(pg, "Ada Okafor · admin")
    expect(pg.locator("h3", has_text="Case CASE-001")).to_be_visible()
    assert not pg.get_by_text("No user is signed in").count()
    expect(pg.get_by_text("Acting as")).to_be_visible()
    assert "case=1" in pg.url


def _pick(pg, label: str) -> None:
    """Choose a name on the user picker a new local-mode session starts on."""
    expect(pg.get_by_role("heading", name="Who is working?")).to_be_visible()
    pg.get_by_role("combobox", name="Your name").click()
    pg.get_by_role("option", name=label).click()
    pg.get_by_role("button", name="Continue").click()
    wait_idle(pg)


def test_a_link_naming_an_unknown_user_is_refused_not_replaced(page) -> None:
    pg = page
    open_as(pg, pg.base + "/cases?case=1&as=999999")
    wait_idle(pg)
    expect(pg.get_by_text("The link names user 999999")).to_be_visible()
    expect(pg.get_by_role("heading", name="Who is working?")).to_be_visible()
    assert not pg.locator("h3", has_text="Case CASE-001").count()
    assert not pg.get_by_text("Acting as").count()
    _pick(pg, "Inés Duarte · annotator")
    expect(pg.locator("h3", has_text="Case CASE-001")).to_be_visible()
    expect(pg.get_by_role("combobox", name="Acting as")).to_have_value("Inés Duarte · annotator")
    assert "as=999999" not in pg.url


def test_open_the_app_switch_user_and_open_a_case(page) -> None:
    pg = page
    pg.goto(pg.base)
    wait_idle(pg)
    _pick(pg, "Ada Okafor · admin")
    expect(pg.get_by_role("heading", name="Overview")).to_be_visible()
    # switch user in the sidebar (local mode)
    pg.locator("[data-testid='stSidebar'] [data-testid='stSelectbox']").click()
    pg.get_by_role("option", name="Inés Duarte · annotator").click()
    wait_idle(pg)
    expect(pg.get_by_text("Signed in as Inés Duarte (annotator)")).to_be_visible()
    # go to the cases page and open the first case through its deep link
    pg.locator("[data-testid='stSidebarNav'] a", has_text="Cases").click()
    wait_idle(pg)
    expect(pg.get_by_role("heading", name="Cases")).to_be_visible()
    # the address keeps who is acting, so a link opened from it (a reload, a new tab) does too
    who = urllib.parse.parse_qs(urllib.parse.urlsplit(pg.url).query)["as"][0]
    open_as(pg, f"{pg.base}/cases?case=1&as={who}")
    wait_idle(pg)
    expect(pg.locator("h3", has_text="Case CASE-001")).to_be_visible()
    expect(pg.get_by_text("Required claims")).to_be_visible()
    expect(pg.get_by_role("combobox", name="Acting as")).to_have_value("Inés Duarte · annotator")
    assert not pg.locator("[data-testid='stException']").count()
    assert pg.errors == []


def _user_id(demo_url: str, email: str) -> int:
    from review.admin import users
    from storage.db import make_engine

    eng = make_engine(demo_url)
    row = users.get_by_email(eng, email)
    eng.dispose()
    assert row is not None
    return row.id


def test_label_a_case_with_keyboard_shortcuts(page, demo_url: str) -> None:
    from review.cases import cases
    from review.labels import labeling
    from storage.db import make_engine

    pg = page
    eng = make_engine(demo_url)
    target = cases.get_case(eng, key="CASE-080")
    assert target is not None
    ines = _user_id(demo_url, "ines.duarte@brightwave.example")
    open_as(pg, f"{pg.base}/label?case={target.id}&as={ines}")
    # every step waits for its rerun (expect), so a busy machine makes this slower, not red
    expect(pg.locator("strong", has_text="Case CASE-080")).to_be_visible(timeout=60_000)
    expect(pg.get_by_text("Page not found")).to_have_count(0)
    # the page's key script is in place once the page has drawn; a key pressed before that
    # is Streamlit's own, and nothing of the page takes it (it went missing on a busy run)
    pg.wait_for_function("window.__labelKeys === true", timeout=60_000)
    pg.locator("h1").first.click()
    pg.keyboard.press("2")  # Abstain
    expect(pg.get_by_text("Why Abstain? (one or more reasons)")).to_be_visible(timeout=60_000)
    pg.get_by_role("button", name="No answer-bearing evidence").click()
    picked = pg.get_by_role("button", name="No answer-bearing evidence", pressed=True)
    expect(picked).to_be_visible(timeout=60_000)
    pg.keyboard.press("Control+Enter")
    expect(pg.get_by_text("Saved your label on CASE-080")).to_be_visible(timeout=60_000)
    from review.core.identity import Actor, Role

    me = Actor(
        id=ines,
        email="ines.duarte@brightwave.example",
        name="Inés",
        roles=frozenset({Role.annotator}),
    )
    mine = labeling.my_label(eng, me, target.id)
    assert mine is not None and mine.decision == "abstain"
    assert mine.reason_codes == ("no_answer_bearing_evidence",)
    eng.dispose()
    assert pg.errors == []


def test_threshold_proposal_to_approval(page, demo_url: str) -> None:
    from review.policy import inforce, signoff
    from storage.db import make_engine

    pg = page
    omar = _user_id(demo_url, "omar.haddad@brightwave.example")
    open_as(pg, f"{pg.base}/thresholds?as={omar}")
    wait_idle(pg)
    pg.get_by_label("Rationale (goes into the change record)").fill(
        "Browser journey: keep the current thresholds but re-sign them with a new rationale."
    )
    pg.get_by_role("button", name="Propose for sign-off").click()
    wait_idle(pg)
    pg.get_by_text("Proposed as version").wait_for(state="visible", timeout=30_000)
    guide_shot(pg, "owner-proposed")
    eng = make_engine(demo_url)
    newest = signoff.versions(eng, inforce.KIND)[0]
    assert newest.author == "omar.haddad@brightwave.example" and newest.status == "pending"
    for email in ("paula.kim@brightwave.example", "chen.li@brightwave.example"):
        open_as(pg, f"{pg.base}/thresholds?as={_user_id(demo_url, email)}")
        wait_idle(pg)
        pg.get_by_role("tab", name="Sign-off").click()
        wait_idle(pg)
        # the figures in force already fail the demo's targets: a reason and a confirmation
        item = pg.locator(f".st-key-thr_proposal_{newest.number}")
        item.get_by_label(re.compile(r"^Reason")).fill("Browser journey: accepted as it is.")
        item.get_by_text("I approve this change although it fails these targets").click()
        if email.startswith("chen"):
            wait_idle(pg)
            guide_shot(pg, "owner-sign")
        item.get_by_role("button", name="Approve").click()
        wait_idle(pg)
        # the message appears when the rerun after the click ends (slow on a loaded machine)
        pg.get_by_text(f"Version {newest.number} approved").wait_for(
            state="visible", timeout=30_000
        )
    done = signoff.get_version(eng, newest.id)
    assert done.status == "approved"
    assert signoff.verify_chain(eng) == []
    eng.dispose()
    assert pg.errors == []


def test_the_monthly_report_opens_without_any_network_request(
    demo_engine,
    tax,
    tmp_path: Path,
) -> None:
    from review.monthly import report, reviews

    view = reviews.list_sessions(demo_engine)[1]  # a closed month
    html_file = tmp_path / "report.html"
    html_file.write_text(
        report.export_html(view, report.month_context(demo_engine, tax, view.month)),
        encoding="utf-8",
    )
    with chromium_page(1280, 720) as pg:  # Playwright's default viewport
        requests: list[str] = []
        pg.on("request", lambda r: requests.append(r.url))
        pg.goto(html_file.as_uri())
        pg.wait_for_load_state("load")
        assert pg.locator("h1").inner_text() == f"Monthly review {view.month}"
        for section in ("Attendees", "Validation check", "Findings", "Actions"):
            assert pg.get_by_role("heading", name=section).count() == 1
        assert pg.locator("svg").count() >= 1  # charts are inline SVG
    assert requests == [html_file.as_uri()]


def test_an_unexpected_error_shows_no_traceback_or_server_path(tmp_path: Path) -> None:
    """The shipped config (showErrorDetails = "none"): the browser gets a generic message,
    the details (type, message, traceback) go to the server's log only."""
    with (
        streamlit_server(ROOT / "tests" / "apps" / "raises.py", tmp_path) as base,
        chromium_page(base=base) as pg,
    ):
        expect(pg.get_by_role("heading", name="About to fail")).to_be_visible()
        expect(pg.get_by_text("This app has encountered an error")).to_be_visible()
        shown = pg.evaluate("() => document.body.innerText")
        for secret in ("/srv/workbench", "RuntimeError", "Traceback", "raises.py", str(ROOT)):
            assert secret not in shown, secret
    logged = "".join(f.read_text() for f in tmp_path.glob("streamlit-*.log"))
    logged = re.sub(r"\x1b\[[0-9;]*m", "", logged)  # the log's colours
    assert "RuntimeError: cannot open /srv/workbench/secret-dir/workbench.db" in logged
