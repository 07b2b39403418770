"""Streamlit served on a free port and Debian's chromium driven through Playwright."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.helpers.paths import ROOT

if TYPE_CHECKING:
    from playwright.sync_api import Page

# how long a browser assertion or action waits by default (Playwright's own default is 5 s)
EXPECT_TIMEOUT_MS = 30_000

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


def _start_streamlit(launch: list[str], port: int, env: dict[str, str], log_path: Path) -> Any:
    with log_path.open("w") as log:
        return subprocess.Popen(
            [
                *launch,
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


def _wait_healthy(proc: Any, base: str, deadline: float) -> bool:
    """Whether the server at ``base`` answers its health check before ``deadline``; false
    when the process ended first (a port taken meanwhile by another test worker, say)."""
    while True:
        try:
            with urllib.request.urlopen(base + "/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    return True
        except OSError:
            pass
        if proc.poll() is not None:
            return False
        if time.monotonic() > deadline:
            return False
        time.sleep(0.3)


@contextlib.contextmanager
def streamlit_server(script: Path, tmp_path: Path, **env_vars: str) -> Iterator[str]:
    """Run ``streamlit run script`` on a free port with extra environment; yield its URL.

    Tests run in parallel workers (pytest-xdist), so a port found free can be taken by another
    worker before the server binds it: a server that exits at once is started again on
    another port, up to three times."""
    env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false", **env_vars)
    # the workbench starts as `make run` starts it (serve.py: the router answers every address
    # from the first request); any other script with plain `streamlit run`
    launch = (
        [sys.executable, str(ROOT / "serve.py")]
        if script.resolve() == (ROOT / "app.py").resolve()
        else [sys.executable, "-m", "streamlit", "run", str(script)]
    )
    deadline = time.monotonic() + 90
    for attempt in range(3):
        port = _free_port()
        log_path = tmp_path / f"streamlit-{port}.log"
        proc = _start_streamlit(launch, port, env, log_path)
        base = f"http://127.0.0.1:{port}"
        if _wait_healthy(proc, base, deadline):
            break
        if proc.poll() is None or attempt == 2 or time.monotonic() > deadline:
            stop_process(proc)
            pytest.fail(f"streamlit did not start: {log_path.read_text()}")
    try:
        yield base
    finally:
        stop_process(proc)


def stop_process(proc: Any) -> None:
    """Stop a server process the tests started: SIGTERM, then SIGKILL after 10 s."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def chromium_page(
    width: int = 1400, height: int = 1000, base: str | None = None, open_base: bool = True
) -> Iterator[Page]:
    """A page of Debian's chromium (driven through Playwright) with a ``width`` x ``height``
    viewport; its page errors are in ``page.errors`` (a list attribute). With ``base`` the page
    keeps it as ``page.base`` and, unless ``open_base`` is false (a cold server), opens it and
    waits for the app to settle, so the router has run once before the test's deep links.

    Without chromium the test fails in CI and is skipped elsewhere."""
    chromium = shutil.which("chromium")
    if not chromium:
        if os.environ.get("CI"):
            pytest.fail("Debian's chromium is required in CI (apt-get install chromium)")
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import expect, sync_playwright

    # CI machines are busy: a rerun after a click can take longer than Playwright's default
    # 5 s, so every assertion and action waits up to EXPECT_TIMEOUT_MS unless it says otherwise
    expect.set_options(timeout=EXPECT_TIMEOUT_MS)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        pg = browser.new_page(viewport={"width": width, "height": height})
        pg.set_default_timeout(EXPECT_TIMEOUT_MS)
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.errors = errors  # type: ignore[attr-defined]
        if base is not None:
            pg.base = base  # type: ignore[attr-defined]
            if open_base:
                pg.goto(base)
                wait_idle(pg)
        yield pg
        browser.close()


def open_as(pg, url: str) -> None:
    """Open ``url`` (a link naming who acts, ``?as=ID``) as that person would, in a browser of
    their own: the cookies of whoever used this page before are cleared first. A link opened
    in a browser that acted as someone else asks "Continue as ...?" (issue 30, item 11);
    tests/browser/test_browser_nav.py checks that question."""
    # leave the app's document first: its remember script would write the cookie again
    # between the clearing and the navigation (seen in CI)
    pg.goto("about:blank")
    pg.context.clear_cookies()
    pg.goto(url)


def wait_idle(pg) -> None:
    pg.wait_for_selector(
        "[data-testid='stApp'][data-test-connection-state='CONNECTED']", timeout=60000
    )
    for _ in range(2):
        pg.wait_for_selector(
            "[data-testid='stApp'][data-test-script-state='notRunning']", timeout=60000
        )
        pg.wait_for_timeout(400)
