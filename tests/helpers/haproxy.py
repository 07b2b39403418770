"""Debian's haproxy started on the shipped deploy/haproxy.cfg, with a test's own ports.

The file is used as shipped: its addresses are environment variables haproxy expands
(``"${WB_APP1}"``), so the test gives its own through the environment."""

from __future__ import annotations

import contextlib
import csv
import grp
import io
import os
import pwd
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.browser import stop_process
from tests.helpers.paths import ROOT

CONFIG = ROOT / "deploy" / "haproxy.cfg"
#: the backend of the app servers in deploy/haproxy.cfg, and its sticky cookie
BACKEND = "workbench_app"
COOKIE = "WB_SERVER"


def require_haproxy() -> str:
    """haproxy's executable; without it the test fails in CI (.ci/run installs it) and is
    skipped elsewhere."""
    exe = shutil.which("haproxy") or (
        "/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None
    )
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("Debian's haproxy is required in CI (apt-get install haproxy)")
        pytest.skip("Debian's haproxy is not installed (apt-get install haproxy)")
    return exe


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Proxy:
    """A running haproxy: the address browsers use and its status page."""

    base: str
    stats: str
    log: Path
    socket: Path

    def command(self, line: str) -> str:
        """One command on haproxy's admin socket (``set server workbench_app/app1 state
        drain``, ``shutdown sessions server workbench_app/app1``), as socat would send it."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(10)
            s.connect(str(self.socket))
            s.sendall(line.encode("utf-8") + b"\n")
            out = b""
            while chunk := s.recv(65536):
                out += chunk
        return out.decode("utf-8")

    def servers(self) -> dict[str, dict[str, str]]:
        """The app servers' rows of haproxy's status table (``/stats;csv``) by server name:
        ``status`` (UP, DOWN, ...), ``scur`` (open sessions: a browser's WebSocket is one),
        ``stot`` (sessions so far)."""
        with urllib.request.urlopen(self.stats + ";csv", timeout=5) as r:
            text = r.read().decode("utf-8").lstrip("# ")
        rows = csv.DictReader(io.StringIO(text))
        return {
            row["svname"]: row
            for row in rows
            if row["pxname"] == BACKEND and row["svname"] not in ("FRONTEND", "BACKEND")
        }


def _environment(bind: str, stats: str, apps: Sequence[str], socket_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        WB_PROXY_BIND=bind,
        WB_STATS_BIND=stats,
        WB_HAPROXY_SOCKET=str(socket_path),
        WB_HAPROXY_LOG="stdout",
        # haproxy drops to this account after binding: the one running the test
        WB_HAPROXY_USER=pwd.getpwuid(os.getuid()).pw_name,
        WB_HAPROXY_GROUP=grp.getgrgid(os.getgid()).gr_name,
    )
    for i, app in enumerate(apps, start=1):
        env[f"WB_APP{i}"] = app
    return env


@contextlib.contextmanager
def haproxy(
    apps: Sequence[str], tmp_path: Path, *, up_within: float = 90, port: int | None = None
) -> Iterator[Proxy]:
    """haproxy on deploy/haproxy.cfg in front of ``apps`` (``host:port`` of app1, app2, ...),
    on free ports (or on ``port``, chosen before the app servers started because their
    settings name the proxy's address); yields once every app server passed its health
    check. Stopped after."""
    exe = require_haproxy()
    deadline = time.monotonic() + up_within
    wanted = port
    attempts = 1 if wanted is not None else 3
    for attempt in range(attempts):
        port, stats_port = wanted or free_port(), free_port()
        log = tmp_path / f"haproxy-{port}.log"
        sock = tmp_path / f"haproxy-{port}.sock"
        env = _environment(f"127.0.0.1:{port}", f"127.0.0.1:{stats_port}", apps, sock)
        check = subprocess.run(
            [exe, "-c", "-f", str(CONFIG)], env=env, capture_output=True, text=True, timeout=60
        )
        assert check.returncode == 0, check.stdout + check.stderr
        with log.open("w") as out:
            proc = subprocess.Popen(
                [exe, "-db", "-f", str(CONFIG)],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=tmp_path,
            )
        proxy = Proxy(f"http://127.0.0.1:{port}", f"http://127.0.0.1:{stats_port}/stats", log, sock)
        try:
            if _wait_up(proc, proxy, len(apps), deadline):
                break
            if proc.poll() is None or attempt == attempts - 1 or time.monotonic() > deadline:
                pytest.fail(f"haproxy did not come up: {log.read_text()}")
        except BaseException:
            stop_process(proc)
            raise
        stop_process(proc)  # exited at once: a port taken meanwhile by another test worker
    try:
        yield proxy
    finally:
        stop_process(proc)


def _wait_up(proc: subprocess.Popen[bytes], proxy: Proxy, count: int, deadline: float) -> bool:
    """Whether every app server is UP in haproxy's table before ``deadline``; false when
    haproxy ended first."""
    while True:
        if proc.poll() is not None:
            return False
        try:
            servers = proxy.servers()
            if len(servers) >= count and all(r["status"] == "UP" for r in servers.values()):
                return True
        except OSError:
            pass
        if time.monotonic() > deadline:
            return False
        time.sleep(0.3)
