"""Browser journeys of the navigation: deep links on a freshly started server, the sidebar
by role, and an upload over the size limit. Each test starts its own server (as `make run`
does, through serve.py) and opens it straight at the address under test."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import FilePayload, Page, expect

from review.admin import users
from review.cases import cases
from storage.db import make_engine
from tests.helpers import docs
from tests.helpers.browser import chromium_page, open_as, streamlit_server, wait_idle
from tests.helpers.pages import page_table
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.browser


@pytest.fixture
def page(server: str) -> Iterator[Page]:
    """A browser page; nothing has been opened on the server yet (a cold server)."""
    with chromium_page() as pg:
        yield pg


def _user_id(url: str, email: str) -> int:
    eng = make_engine(url)
    try:
        row = users.get_by_email(eng, email)
        assert row is not None
        return row.id
    finally:
        eng.dispose()


def _case_id(url: str, key: str) -> int:
    eng = make_engine(url)
    try:
        case = cases.get_case(eng, key=key)
        assert case is not None
        return case.id
    finally:
        eng.dispose()


@pytest.mark.cold
def test_a_deep_link_on_a_cold_server_opens_the_page_without_page_not_found(
    page: Page, server: str, demo_url: str
) -> None:
    ines = _user_id(demo_url, "ines.duarte@brightwave.example")
    case = _case_id(demo_url, "CASE-001")
    open_as(page, f"{server}/cases?case={case}&as={ines}")
    wait_idle(page)
    expect(page.locator("h3", has_text="Case CASE-001")).to_be_visible()
    expect(page.get_by_text("Page not found")).not_to_be_visible()
    expect(page.get_by_role("combobox", name="Acting as")).to_have_value("Inés Duarte · annotator")
    assert f"case={case}" in page.url
    # the home page answers at its own address, and the root opens it there, keeping `as`
    for address in ("/overview", "/"):
        open_as(page, f"{server}{address}?as={ines}")
        wait_idle(page)
        expect(page.locator("h1", has_text="Overview")).to_be_visible()
        expect(page.get_by_text("Page not found")).not_to_be_visible()
        expect(page).to_have_url(re.compile(rf"/overview\?as={ines}$"))
        expect(page.get_by_role("combobox", name="Acting as")).to_have_value(
            "Inés Duarte · annotator"
        )


def test_the_sidebar_lists_the_persons_work_first_and_always_shows_the_page_they_are_on(
    page: Page, server: str, demo_url: str
) -> None:
    ines = _user_id(demo_url, "ines.duarte@brightwave.example")
    # the last page of the table, which is not an annotator's work
    open_as(page, f"{server}/review?as={ines}")
    wait_idle(page)
    expect(page.get_by_role("heading", name="Monthly review", exact=True)).to_be_visible()
    links = page.locator("[data-testid='stSidebarNav'] [data-testid='stSidebarNavLink']")
    expect(links.nth(0)).to_have_accessible_name("Overview")
    expect(links.nth(1)).to_have_accessible_name("Label")
    current = page.locator("[data-testid='stSidebarNav'] a[aria-current='page']")
    expect(current).to_have_accessible_name("Monthly review")
    expect(current).to_be_visible()
    expect(page.get_by_test_id("stSidebarNavViewButton")).not_to_be_visible()  # never "View more"
    # a page an annotator cannot use is not listed; its link says who uses it
    expect(links.filter(has_text="Traces")).to_have_count(0)
    open_as(page, f"{server}/traces?as={ines}")
    wait_idle(page)
    expect(page.get_by_text("Browsing production traces is for reviewers")).to_be_visible()
    expect(page.get_by_text("Page not found")).not_to_be_visible()
    expect(current).to_have_accessible_name("Traces")  # listed while Inés is on it
    expect(current).to_be_visible()
    # a reviewer's own work comes first for them
    ravi = _user_id(demo_url, "ravi.menon@brightwave.example")
    open_as(page, f"{server}/overview?as={ravi}")
    wait_idle(page)
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    expect(links).to_contain_text(["Overview", "Label", "Adjudicate", "Audit", "Monthly review"])
    expect(links.nth(2)).to_have_accessible_name("Adjudicate")


def test_a_link_naming_someone_else_asks_before_the_browser_switches_user(
    page: Page, server: str, demo_url: str
) -> None:
    """Issue 30, item 11: the browser acts as an annotator; the address bar is changed to
    ``/admin?as=<admin>`` (a new session, as after a reload): the workbench asks before it
    acts as the administrator, and the annotator can stay."""
    ines = _user_id(demo_url, "ines.duarte@brightwave.example")
    ada = _user_id(demo_url, "ada.admin@brightwave.example")
    open_as(page, f"{server}/label?as={ines}")
    wait_idle(page)
    expect(page.get_by_role("combobox", name="Acting as")).to_have_value("Inés Duarte · annotator")
    page.goto(f"{server}/admin?as={ada}")  # same browser: its cookie says Inés
    wait_idle(page)
    question = page.get_by_role("heading", name="Continue as Ada Okafor (admin)?")
    expect(question).to_be_visible()
    expect(page.get_by_role("combobox", name="Acting as")).to_have_count(0)
    expect(page.get_by_role("heading", name="Admin", exact=True)).to_have_count(0)
    page.get_by_role("button", name="Stay as Inés Duarte (annotator)").click()
    wait_idle(page)
    expect(page.get_by_role("combobox", name="Acting as")).to_have_value("Inés Duarte · annotator")
    expect(page).to_have_url(re.compile(rf"as={ines}"))
    # the same link again; this time the person says yes
    page.goto(f"{server}/admin?as={ada}")
    wait_idle(page)
    expect(question).to_be_visible()
    page.get_by_role("button", name="Continue as Ada Okafor (admin)").click()
    wait_idle(page)
    expect(page.get_by_role("combobox", name="Acting as")).to_have_value(
        re.compile(r"^Ada Okafor · admin")
    )
    expect(page.get_by_role("heading", name="Admin", exact=True)).to_be_visible()
    # a new browser (no cookie) opening a link still acts as the user it names
    open_as(page, f"{server}/overview?as={ines}")
    wait_idle(page)
    expect(page.get_by_role("combobox", name="Acting as")).to_have_value("Inés Duarte · annotator")


#: What a page says to someone whose roles do not include it.
_TURNED_AWAY = re.compile(r"is for |do not include|Only administrators|are shown to reviewers")


def test_every_readme_link_opens_its_page_for_the_user_it_names(
    page: Page, server: str, demo_url: str
) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\[([^\]]+)\]\((http://localhost:8501/(\w+)\?as=(\d+))\)", readme)
    assert len(links) >= 5
    titles = {spec.url_path: spec.title for spec in page_table()}
    for text, url, path, who in links:
        name = " ".join(text.split()[:2])  # the link's text starts with the person's name
        eng = make_engine(demo_url)
        try:
            row = next(u for u in users.list_users(eng) if u.name == name)
        finally:
            eng.dispose()
        assert row.id == int(who), (url, row.id)
        open_as(page, url.replace("http://localhost:8501", server))  # each in their own browser
        wait_idle(page)
        expect(page.get_by_role("heading", name=titles[path], exact=True)).to_be_visible()
        expect(page.get_by_text("Page not found")).not_to_be_visible()
        expect(page.get_by_role("combobox", name="Acting as")).to_have_value(
            re.compile("^" + re.escape(name))
        )
        # the pages turn people away in an alert (document text may say "do not include")
        alerts = page.locator("[data-testid^='stAlertContent']")
        expect(alerts.filter(has_text=_TURNED_AWAY)).to_have_count(0)
        expect(page.locator("[data-testid='stException']")).to_have_count(0)


@pytest.fixture
def small_limit_server(demo_url: str, tmp_path: Path) -> Iterator[str]:
    with streamlit_server(
        ROOT / "app.py",
        tmp_path,
        WORKBENCH_DATABASE_URL=demo_url,
        WORKBENCH_MAX_UPLOAD_MB="0.01",  # 10,485 bytes
    ) as base:
        yield base


def test_an_upload_over_the_limit_names_its_size_the_limit_and_the_command(
    page: Page, small_limit_server: str, demo_url: str
) -> None:
    ines = _user_id(demo_url, "ines.duarte@brightwave.example")
    open_as(page, f"{small_limit_server}/cases?as={ines}")
    wait_idle(page)
    page.get_by_text("Import and export (canonical JSONL)").click()
    expect(
        page.get_by_text(
            "The workbench takes up to 0.01 MB per file here (the box rounds it up to 1 MB); for "
            "a larger file use the command line: workbench import-cases FILE"
        )
    ).to_be_visible()
    payload = b'{"key": "x"}' + b" " * 29_987 + b"\n"  # 30,000 bytes
    page.locator("input[type='file']").set_input_files(
        files=[FilePayload(name="cases.jsonl", mimeType="application/jsonl", buffer=payload)]
    )
    expect(page.get_by_text("cases.jsonl", exact=True)).to_be_visible()  # the widget took it
    page.get_by_role("button", name="Import cases").click()
    wait_idle(page)
    expect(
        page.get_by_text(
            "cases.jsonl is 30,000 bytes, above the upload limit of 0.01 MB "
            "(WORKBENCH_MAX_UPLOAD_MB); nothing was imported. Import it with the command line, "
            "which has no limit: workbench import-cases cases.jsonl"
        )
    ).to_be_visible()


def _download(page: Page, button: str) -> bytes:
    with page.expect_download(timeout=60000) as info:
        page.get_by_role("button", name=button).click()
    path = info.value.path()
    return Path(path).read_bytes()


def test_an_import_shows_progress_and_two_downloads_in_a_row_both_work(
    page: Page, server: str, demo_url: str
) -> None:
    import json

    ada = _user_id(demo_url, "ada.admin@brightwave.example")
    example = json.loads(docs.example("traces.jsonl"))
    good = dict(example, trace_id="nav-download-1")
    bad = dict(example, trace_id="nav-download-2", chunks="not a list")
    payload = (json.dumps(good) + "\n" + json.dumps(bad) + "\n").encode()
    open_as(page, f"{server}/traces?as={ada}")
    wait_idle(page)
    if not page.get_by_text("Skip bad lines (and report them)").is_visible():
        page.get_by_text("Import traces", exact=True).first.click()
    page.locator("input[type='file']").set_input_files(
        files=[FilePayload(name="two.jsonl", mimeType="application/jsonl", buffer=payload)]
    )
    page.get_by_text("Skip bad lines (and report them)").click()
    page.get_by_role("button", name="Import traces").click()
    wait_idle(page)
    # the importer's progress callback drives a bar that ends on "Done"
    expect(page.get_by_test_id("stProgress")).to_contain_text("Done")
    expect(page.get_by_text("Import finished.")).to_be_visible()
    button = "Download the rejected lines (JSONL)"
    first = _download(page, button)
    wait_idle(page)
    second = _download(page, button)
    assert first == second and b"nav-download-2" in first
    # the monthly report's two files one after the other (each made when clicked)
    open_as(page, f"{server}/review?as={ada}")
    wait_idle(page)
    page.get_by_role("tab", name="Report").click()
    wait_idle(page)
    html = _download(page, "Download the report (self-contained HTML)")
    # a click while the page still runs (each file is made when clicked) may be lost
    wait_idle(page)
    archive = _download(page, "Download Markdown with PNG charts (zip)")
    assert html.startswith(b"<!") and archive.startswith(b"PK")
    wait_idle(page)
    again = _download(page, "Download the report (self-contained HTML)")
    assert again == html
