"""The receiver beside the app (review.traces.live.beside): its settings from the environment
(a bad value stops the app with the variable named), and the supervisor around a REAL
``workbench receive`` child: listening, killed (the Traces page's panel says it stopped, how,
and its last lines), started again, stopped with nothing left running. serve.py starting it
beside a real app is tests/browser/test_browser_receiver_beside.py."""

from __future__ import annotations

import datetime as dt
import os
import signal
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine

from review.core.errors import InputError
from review.traces.live import beside, display
from review.traces.live.beside import BesideReceiver, BesideSettings, BesideStatus
from storage.db import make_engine
from tests.helpers.pages import ADA, no_exception, page_app, readable
from tests.helpers.paths import ROOT

WAIT = 180.0
TRACES = "pages/traces_page.py"
NOW = dt.datetime(2026, 12, 5, 3, 0, tzinfo=dt.UTC)


def test_no_port_no_receiver() -> None:
    assert beside.settings_from_env({}) is None
    assert beside.settings_from_env({"WORKBENCH_RECEIVE_PORT": "  "}) is None


def test_the_settings_and_the_command() -> None:
    got = beside.settings_from_env(
        {
            "WORKBENCH_RECEIVE_PORT": "4318",
            "WORKBENCH_RECEIVE_HOST": "::1",
            "WORKBENCH_RECEIVE_TOKEN_ENV": "OTLP_TOKEN",
            "WORKBENCH_RECEIVE_SOURCE": "Checkout bot",
        }
    )
    assert got == BesideSettings(4318, "::1", "OTLP_TOKEN", "Checkout bot")
    cmd = got.command("python")
    assert cmd == [
        "python", "-m", "review.cli.main", "receive", "--host", "::1", "--port", "4318",
        "--source", "Checkout bot", "--token-env", "OTLP_TOKEN",
    ]  # fmt: skip
    # the token's value is never on the command line, only the variable's name
    assert beside.settings_from_env({"WORKBENCH_RECEIVE_PORT": "4318"}) == BesideSettings(4318)


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("WORKBENCH_RECEIVE_PORT", "0"),
        ("WORKBENCH_RECEIVE_PORT", "65536"),
        ("WORKBENCH_RECEIVE_PORT", "-1"),
        ("WORKBENCH_RECEIVE_PORT", "43 18"),
        ("WORKBENCH_RECEIVE_PORT", "4318; rm -rf /"),
        ("WORKBENCH_RECEIVE_PORT", "٤٣١٨"),  # Arabic-Indic digits: isdigit, not a port
        ("WORKBENCH_RECEIVE_HOST", "127.0.0.1 --token-env X"),
        ("WORKBENCH_RECEIVE_TOKEN_ENV", "OTLP TOKEN"),
        ("WORKBENCH_RECEIVE_TOKEN_ENV", "--host=0.0.0.0"),
        ("WORKBENCH_RECEIVE_SOURCE", "x" * 201),
    ],
)
def test_a_bad_setting_is_refused_naming_its_variable(var: str, value: str) -> None:
    env = {"WORKBENCH_RECEIVE_PORT": "4318", var: value}
    with pytest.raises(InputError, match=var):
        beside.settings_from_env(env)


@given(st.dictionaries(st.sampled_from(["WORKBENCH_RECEIVE_" + v for v in
       ("PORT", "HOST", "TOKEN_ENV", "SOURCE")]), st.text(max_size=300)))  # fmt: skip
def test_any_setting_is_taken_or_refused_never_passed_on_half_read(env: dict[str, str]) -> None:
    try:
        got = beside.settings_from_env(env)
    except InputError:
        return
    if got is None:
        assert not env.get("WORKBENCH_RECEIVE_PORT", "").strip()
        return
    assert 1 <= got.port <= 65535
    assert not any(c.isspace() for c in got.host)
    cmd = got.command("python")
    assert cmd[cmd.index("--port") + 1] == str(got.port)


def _status(**kw: object) -> BesideStatus:
    base: dict[str, object] = {
        "settings": BesideSettings(4318),
        "state": "listening",
        "pid": 4242,
        "url": "http://127.0.0.1:4318/v1/traces",
        "restarts": 0,
        "exit_code": None,
        "exited_at": None,
        "restart_at": None,
        "last_lines": (),
    }
    return BesideStatus(**{**base, **kw})  # type: ignore[arg-type]


def test_the_words_of_the_receiver_beside_the_app() -> None:
    text, kind = display.beside_text(_status(), NOW)
    assert kind == "info"
    assert text == (
        "The receiver beside the app listens on http://127.0.0.1:4318/v1/traces for the "
        "source 'OTLP receiver' (process 4242)."
    )
    text, kind = display.beside_text(
        _status(
            state="restarting",
            pid=None,
            url=None,
            exit_code=-9,
            exited_at=NOW - dt.timedelta(seconds=3),
            restart_at=NOW + dt.timedelta(seconds=5),
        ),
        NOW,
    )
    assert kind == "error"
    assert text.startswith(
        "The receiver beside the app stopped 2026-12-05 02:59 UTC (3 seconds ago) (killed by "
        "signal 9, SIGKILL); it is started again in 5 seconds. Exporters sending to "
        "127.0.0.1:4318 get no answer meanwhile (they retry)."
    )
    text, kind = display.beside_text(
        _status(restarts=2, exit_code=1, exited_at=NOW - dt.timedelta(minutes=2)), NOW
    )
    assert kind == "warning"
    assert text.endswith(
        "(process 4242); it stopped 2 times so far (the last time 2026-12-05 02:58 UTC "
        "(2 minutes ago): exit status 1) and was started again."
    )
    assert display.panel_label([], receiver_down=True) == (
        "Live sources: none (traces arrive by file import; the receiver beside the app stopped)"
    )


# ---------------------------------------------------------------------------------------
# A real child


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(what: Callable[[], bool], why: str) -> None:
    deadline = time.monotonic() + WAIT
    while not what():
        assert time.monotonic() < deadline, why
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for this purpose (its parent has not reaped it yet)
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ", 1)[1].startswith("Z"))


@pytest.fixture
def started(trace_demo_url: str) -> Iterator[Callable[[float], BesideReceiver]]:
    made: list[BesideReceiver] = []

    def go(first_backoff: float) -> BesideReceiver:
        env = {
            **os.environ,
            "WORKBENCH_DATABASE_URL": trace_demo_url,
            "WORKBENCH_RECEIVE_PORT": str(_free_port()),
        }
        r = BesideReceiver(
            beside.settings_from_env(env) or BesideSettings(0),
            env,
            str(ROOT),
            first_backoff=first_backoff,
        )
        r.start()
        made.append(r)
        beside.set_current(r)  # what serve.py's start_from_env does
        _wait(lambda: r.status().state == "listening", "the receiver did not start")
        return r

    yield go
    beside.set_current(None)
    for r in made:
        r.stop()


def test_the_panel_says_where_it_listens_and_that_it_stopped_when_killed(
    trace_demo_url: str, monkeypatch: pytest.MonkeyPatch, started: Callable[..., BesideReceiver]
) -> None:
    r = started(first_backoff=3600)  # killed, it waits: the page reads the stopped state
    st0 = r.status()
    assert st0.url == f"http://127.0.0.1:{r.settings.port}/v1/traces" and st0.pid is not None
    at = page_app(trace_demo_url, monkeypatch, TRACES, ADA).run()
    no_exception(at)
    assert any(
        readable(i.value).startswith(f"The receiver beside the app listens on {st0.url}")
        for i in at.info
    )
    os.kill(st0.pid, signal.SIGKILL)
    _wait(lambda: r.status().state == "restarting", "the supervisor did not see it end")
    at.run()
    no_exception(at)
    label = next(e.label for e in at.expander if readable(e.label).startswith("Live sources"))
    assert readable(label).endswith("(the receiver beside the app stopped)")
    [err] = [readable(e.value) for e in at.error]
    assert err.startswith("The receiver beside the app stopped 20")
    assert "(killed by signal 9, SIGKILL); it is started again in" in err
    # its last lines, as text
    assert any("receiving OTLP/HTTP traces on" in c.value for c in at.code)
    assert r.stop() == -signal.SIGKILL
    assert not _alive(st0.pid)


def test_a_receiver_that_ends_is_started_again_and_stopped_for_good(
    started: Callable[..., BesideReceiver],
) -> None:
    r = started(first_backoff=0.2)
    first = r.status().pid
    assert first is not None
    os.kill(first, signal.SIGTERM)
    _wait(
        lambda: (s := r.status()).state == "listening" and s.restarts == 1,
        "the receiver was not started again",
    )
    second = r.status().pid
    assert second is not None and second != first and not _alive(first)
    text, kind = display.beside_text(r.status(), dt.datetime.now(dt.UTC))
    # SIGTERM ends workbench receive cleanly (its counts flushed): exit status 0
    assert kind == "warning" and "it stopped 1 time so far (the last time 20" in text
    assert text.endswith(": exit status 0) and was started again.")
    assert r.stop() == 0
    assert r.status().state == "stopped"
    assert not _alive(second)
    time.sleep(0.5)  # no restart after a stop
    assert r.status().pid is None


def test_the_database_the_receiver_writes_to_is_the_apps(
    trace_demo_url: str, started: Callable[..., BesideReceiver]
) -> None:
    started(first_backoff=3600)
    eng: Engine = make_engine(trace_demo_url)
    try:
        from review.traces.live import sources

        names = [s.name for s in sources.list_sources(eng)]
    finally:
        eng.dispose()
    assert "OTLP receiver" in names  # added by the child when missing
