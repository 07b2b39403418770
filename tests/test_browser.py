"""Main journeys in a real browser: Playwright driving Debian's chromium against `streamlit run`."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server(demo_url: str, tmp_path: Path) -> Iterator[str]:
    port = _free_port()
    env = dict(
        os.environ, WORKBENCH_DATABASE_URL=demo_url, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false"
    )
    log = (tmp_path / "streamlit.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(ROOT / "app.py"),
            "--server.headless",
            "true",
            "--server.port",
            str(port),
            "--server.fileWatcherType",
            "none",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            with urllib.request.urlopen(base + "/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            log.close()
            pytest.fail(f"streamlit did not start: {(tmp_path / 'streamlit.log').read_text()}")
        time.sleep(0.3)
    yield base
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


@pytest.fixture
def page(server: str) -> Iterator[object]:
    chromium = shutil.which("chromium")
    if not chromium:
        if os.environ.get("CI"):
            pytest.fail("Debian's chromium is required in CI (apt-get install chromium)")
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        pg = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.base = server  # type: ignore[attr-defined]
        pg.errors = errors  # type: ignore[attr-defined]
        yield pg
        browser.close()


def wait_idle(pg) -> None:  # type: ignore[no-untyped-def]
    pg.wait_for_selector(
        "[data-testid='stApp'][data-test-connection-state='CONNECTED']", timeout=60000
    )
    for _ in range(2):
        pg.wait_for_selector(
            "[data-testid='stApp'][data-test-script-state='notRunning']", timeout=60000
        )
        pg.wait_for_timeout(400)


def test_open_the_app_switch_user_and_open_a_case(page) -> None:  # type: ignore[no-untyped-def]
    pg = page
    pg.goto(pg.base)
    wait_idle(pg)
    assert pg.get_by_role("heading", name="Overview").is_visible()
    # switch user in the sidebar (local mode)
    pg.locator("[data-testid='stSidebar'] [data-testid='stSelectbox']").click()
    pg.get_by_role("option", name="Inés Duarte · annotator").click()
    wait_idle(pg)
    assert pg.get_by_text("Signed in as Inés Duarte (annotator)").is_visible()
    # go to the cases page and open the first case through its deep link
    pg.locator("[data-testid='stSidebarNav'] a", has_text="Cases").click()
    wait_idle(pg)
    assert pg.get_by_role("heading", name="Cases").is_visible()
    pg.goto(pg.base + "/cases?case=1")
    wait_idle(pg)
    assert pg.locator("h3", has_text="Case CASE-001").is_visible()
    assert pg.get_by_text("Required claims").is_visible()
    assert not pg.locator("[data-testid='stException']").count()
    assert pg.errors == []  # type: ignore[attr-defined]
