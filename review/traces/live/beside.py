"""The OTLP/HTTP receiver started beside the app: ``make run RECEIVE=4318``, or
``WORKBENCH_RECEIVE_PORT=4318 python serve.py``.

``serve.py`` reads the settings (:func:`settings_from_env`) and starts ``workbench receive`` as
a child process (:class:`BesideReceiver`), not as a thread of the Streamlit process: the
receiver decodes and stores spans under its own interpreter lock, and a crash of either leaves
the other running. The child

* listens where ``workbench receive`` would (127.0.0.1 unless ``WORKBENCH_RECEIVE_HOST`` says
  otherwise), with the bearer token read from the variable ``WORKBENCH_RECEIVE_TOKEN_ENV``
  names, for the source ``WORKBENCH_RECEIVE_SOURCE`` ("OTLP receiver" by default);
* is stopped when the app stops (SIGTERM, then SIGKILL after a grace period), and on Linux gets
  SIGTERM from the kernel should the app's process die without stopping it (killed), so no
  receiver outlives its app;
* is watched: its standard error goes on to the app's (the last lines are kept), and when it
  ends on its own it is started again after a pause that doubles up to a minute, the Traces
  page saying that it stopped, why (its exit status and last lines) and when it restarts
  (:func:`current` and :meth:`BesideReceiver.status`, read in the app's process).

Settings that are not valid stop the app before it starts, with the reason.
"""

from __future__ import annotations

import collections
import ctypes
import datetime as dt
import logging
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import IO

from review.core.errors import InputError

__all__ = [
    "BesideReceiver",
    "BesideSettings",
    "BesideStatus",
    "current",
    "set_current",
    "settings_from_env",
    "start_from_env",
]

log = logging.getLogger(__name__)

PORT_VAR = "WORKBENCH_RECEIVE_PORT"
HOST_VAR = "WORKBENCH_RECEIVE_HOST"
TOKEN_VAR = "WORKBENCH_RECEIVE_TOKEN_ENV"
SOURCE_VAR = "WORKBENCH_RECEIVE_SOURCE"
DEFAULT_SOURCE = "OTLP receiver"
#: the line ``workbench receive`` prints once it listens
READY = "receiving OTLP/HTTP traces on "
#: lines of the child's standard error kept for the page
TAIL_LINES = 12
#: seconds before the first restart, doubled each time up to MAX_BACKOFF
FIRST_BACKOFF = 2.0
MAX_BACKOFF = 60.0

_PR_SET_PDEATHSIG = 1
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,199}")


@dataclass(frozen=True, slots=True)
class BesideSettings:
    """Where the receiver beside the app listens and what it receives for."""

    port: int
    host: str = "127.0.0.1"
    token_env: str | None = None
    source: str = DEFAULT_SOURCE

    def command(self, python: str = sys.executable) -> list[str]:
        cmd = [python, "-m", "review.cli.main", "receive", "--host", self.host]
        cmd += ["--port", str(self.port), "--source", self.source]
        if self.token_env:
            cmd += ["--token-env", self.token_env]
        return cmd


def settings_from_env(env: Mapping[str, str] | None = None) -> BesideSettings | None:
    """The receiver's settings from the environment; None when ``WORKBENCH_RECEIVE_PORT`` is
    unset or empty (no receiver beside the app). InputError naming the variable when a value
    is not valid."""
    env = os.environ if env is None else env
    raw = env.get(PORT_VAR, "").strip()
    if not raw:
        return None
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= 65535:
        raise InputError(f"{PORT_VAR} must be a port number from 1 to 65535, not {raw[:40]!r}")
    host = env.get(HOST_VAR, "").strip() or "127.0.0.1"
    if len(host) > 255 or any(c.isspace() for c in host):
        raise InputError(f"{HOST_VAR} must be a host name or address")
    token_env = env.get(TOKEN_VAR, "").strip() or None
    if token_env is not None and not _VARIABLE.fullmatch(token_env):
        raise InputError(f"{TOKEN_VAR} must name an environment variable, like OTLP_TOKEN")
    source = env.get(SOURCE_VAR, "").strip() or DEFAULT_SOURCE
    if len(source) > 200:
        raise InputError(f"{SOURCE_VAR} must be at most 200 characters")
    return BesideSettings(int(raw), host, token_env, source)


@dataclass(frozen=True, slots=True)
class BesideStatus:
    """The receiver beside the app as its supervisor sees it.

    ``state``: ``starting`` (started, not listening yet), ``listening``, ``restarting`` (it
    ended on its own; started again at ``restart_at``) or ``stopped`` (the app is stopping)."""

    settings: BesideSettings
    state: str
    pid: int | None
    url: str | None
    restarts: int
    exit_code: int | None
    exited_at: dt.datetime | None
    restart_at: dt.datetime | None
    last_lines: tuple[str, ...]


def _death_signal() -> Callable[[], None] | None:
    """A function the child runs before ``exec`` asking Linux to send it SIGTERM when its
    parent dies (the app killed); None elsewhere. libc is loaded here, in the parent: the
    child between fork and exec only makes the one call."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None

    def set_death_signal() -> None:  # pragma: no cover - runs in the child
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)

    return set_death_signal


class BesideReceiver:
    """``workbench receive`` as a supervised child process of the app."""

    def __init__(
        self,
        settings: BesideSettings,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        first_backoff: float = FIRST_BACKOFF,
    ) -> None:
        self.settings = settings
        self.first_backoff = first_backoff
        self._env = dict(os.environ if env is None else env)
        self._cwd = cwd
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._proc: subprocess.Popen[bytes] | None = None
        self._tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self._url: str | None = None
        self._restarts = 0
        self._exit_code: int | None = None
        self._exited_at: dt.datetime | None = None
        self._restart_at: dt.datetime | None = None
        self._watcher: threading.Thread | None = None

    # -- running -----------------------------------------------------------------------

    def start(self) -> None:
        """Start the child and its watcher (returns at once)."""
        self._spawn()
        self._watcher = threading.Thread(target=self._watch, name="receiver-watch", daemon=True)
        self._watcher.start()

    def _spawn(self) -> None:
        proc = subprocess.Popen(
            self.settings.command(),
            cwd=self._cwd,
            env=self._env,
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            # its own session: a Ctrl-C in the terminal reaches the app, which stops it
            start_new_session=True,
            preexec_fn=_death_signal(),
        )
        with self._lock:
            self._proc = proc
            self._url = None
        assert proc.stderr is not None
        threading.Thread(
            target=self._read, args=(proc.stderr,), name="receiver-stderr", daemon=True
        ).start()
        log.info("receiver beside the app started (pid %d)", proc.pid)

    def _read(self, stream: IO[bytes]) -> None:
        """Pass the child's standard error on, keeping its last lines and its address."""
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")[:2000]
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
            with self._lock:
                self._tail.append(line)
                if READY in line:
                    self._url = line.split(READY, 1)[1].split(" ", 1)[0]
        stream.close()

    def _watch(self) -> None:
        backoff = self.first_backoff
        while True:
            with self._lock:
                proc = self._proc
            assert proc is not None
            code = proc.wait()
            if self._stopping.is_set():
                return
            now = dt.datetime.now(dt.UTC)
            with self._lock:
                self._exit_code = code
                self._exited_at = now
                self._restart_at = now + dt.timedelta(seconds=backoff)
            log.warning(
                "the receiver beside the app stopped (exit status %s); restarting in %g s",
                code,
                backoff,
            )
            if self._stopping.wait(backoff):
                return
            with self._lock:
                self._restarts += 1
                self._restart_at = None
            self._spawn()
            backoff = min(backoff * 2, MAX_BACKOFF)

    def stop(self, timeout: float = 15.0) -> int | None:
        """Stop the child (SIGTERM, SIGKILL after ``timeout``); its exit status."""
        self._stopping.set()
        with self._lock:
            proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._watcher is not None:
            self._watcher.join(timeout=timeout)
        return proc.returncode

    # -- what the page shows -----------------------------------------------------------

    def status(self) -> BesideStatus:
        with self._lock:
            proc = self._proc
            running = proc is not None and proc.poll() is None
            if self._stopping.is_set():
                state = "stopped"
            elif running and self._url is not None:
                state = "listening"
            elif running:
                state = "starting"
            else:
                state = "restarting"
            return BesideStatus(
                settings=self.settings,
                state=state,
                pid=proc.pid if proc is not None and running else None,
                url=self._url if running else None,
                restarts=self._restarts,
                exit_code=self._exit_code,
                exited_at=self._exited_at,
                restart_at=self._restart_at,
                last_lines=tuple(self._tail),
            )


_current: BesideReceiver | None = None


def current() -> BesideReceiver | None:
    """The receiver this process started beside the app, if any."""
    return _current


def set_current(receiver: BesideReceiver | None) -> None:
    """Make ``receiver`` the one :func:`current` gives (:func:`start_from_env` does; tests)."""
    global _current
    _current = receiver


def start_from_env(
    env: Mapping[str, str] | None = None, cwd: str | None = None
) -> BesideReceiver | None:
    """Start the receiver the environment asks for (None when it asks for none); it is then
    :func:`current`. InputError when the settings are not valid."""
    settings = settings_from_env(env)
    if settings is None:
        return None
    receiver = BesideReceiver(settings, env, cwd)
    receiver.start()
    set_current(receiver)
    return receiver
