"""Streamlit served on a free port and Debian's chromium driven through Playwright."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.paths import ROOT

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


@contextlib.contextmanager
def streamlit_server(script: Path, tmp_path: Path, **env_vars: str) -> Iterator[str]:
    """Run ``streamlit run script`` on a free port with extra environment; yield its URL."""
    port = _free_port()
    env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false", **env_vars)
    log_path = tmp_path / f"streamlit-{port}.log"
    log = log_path.open("w")
    # the workbench starts as `make run` starts it (serve.py: the router answers every address
    # from the first request); any other script with plain `streamlit run`
    launch = (
        [sys.executable, str(ROOT / "serve.py")]
        if script.resolve() == (ROOT / "app.py").resolve()
        else [sys.executable, "-m", "streamlit", "run", str(script)]
    )
    proc = subprocess.Popen(
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
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    try:
        while True:
            try:
                with urllib.request.urlopen(base + "/_stcore/health", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"streamlit did not start: {log_path.read_text()}")
            time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def wait_idle(pg) -> None:  # type: ignore[no-untyped-def]
    pg.wait_for_selector(
        "[data-testid='stApp'][data-test-connection-state='CONNECTED']", timeout=60000
    )
    for _ in range(2):
        pg.wait_for_selector(
            "[data-testid='stApp'][data-test-script-state='notRunning']", timeout=60000
        )
        pg.wait_for_timeout(400)
