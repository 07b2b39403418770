"""Pushing verdicts when Phoenix cannot take them (review.traces.live.push through
review.audits.pushback): traces without a Phoenix span are reported, a Phoenix that refuses
connections or never answers leaves a failure with its reason on every row and nothing
marked pushed, the next push retries; who may push, which batches, the command line.
The pushes that reach a real Phoenix are in test_push_phoenix.py."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine, func, select

from review.audits import plans as audit_plans
from review.audits import pushback
from review.cli.main import main
from review.core.errors import InputError, PermissionDenied
from storage.db import make_engine, migrate, read_session
from storage.models import AuditLog, VerdictPush
from tests.helpers.actors import REVIEWER, make_actor
from tests.helpers.pushing import (
    batch,
    expected_annotations,
)

ADMIN = make_actor("admin", "admin@test.example", clearance=True, uid=21)
ANNOTATOR = make_actor("annotator", "ann@test.example", uid=22)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rows(engine: Engine) -> list[VerdictPush]:
    with read_session(engine) as s:
        return list(s.scalars(select(VerdictPush).order_by(VerdictPush.id)))


def test_a_phoenix_that_refuses_connections_fails_every_row_with_its_reason_and_is_retried(
    any_engine: Engine,
) -> None:
    engine = any_engine  # SQLite and PostgreSQL
    url = f"http://127.0.0.1:{free_port()}"
    pid, source = batch(engine, url)
    want = expected_annotations(engine, pid)
    report = pushback.push_to_phoenix(engine, REVIEWER, plan_id=pid)
    assert report.pushed == 0 and report.already == 0
    assert report.failed == want
    assert report.not_pushable == 1
    assert report.unpushable == (("imported from a file (no Phoenix span)", 1),)
    [(reason, n)] = report.failures
    assert n == want and reason.startswith("phx: ") and "unreachable" in reason
    stored = rows(engine)
    assert len(stored) == want
    assert all(r.pushed_digest is None and r.pushed_at is None for r in stored)
    assert all(r.error and r.failed_at and r.attempts == 1 for r in stored)
    assert {r.source_id for r in stored} == {source}
    # the next push tries them all again
    again = pushback.push_to_phoenix(engine, REVIEWER, plan_id=pid)
    assert again.failed == want and again.already == 0
    assert {r.attempts for r in rows(engine)} == {2}
    with read_session(engine) as s:
        logged = s.scalar(select(func.count()).where(AuditLog.action == "push"))
    assert logged == 2


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A server that accepts connections and never answers."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
                held.append(conn)
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    stop.set()
    t.join()
    for c in held:
        c.close()
    srv.close()


def test_a_phoenix_that_never_answers_times_out_and_the_rest_is_not_tried(
    engine: Engine, silent_server: str
) -> None:
    pid, _ = batch(engine, silent_server)
    want = expected_annotations(engine, pid)
    report = pushback.push_to_phoenix(engine, REVIEWER, plan_id=pid, batch_size=2, timeout=1)
    assert report.pushed == 0 and report.failed == want
    reasons = dict(report.failures)
    assert reasons[f"phx: Phoenix at {silent_server} did not answer within 1 s"] == 2
    assert (
        reasons[f"phx: not sent: Phoenix at {silent_server} did not answer within 1 s"] == want - 2
    )
    assert all(r.pushed_digest is None for r in rows(engine))


def test_a_missing_api_key_is_a_failure_with_its_name(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid, _ = batch(engine, f"http://127.0.0.1:{free_port()}")
    with engine.begin() as c:
        c.exec_driver_sql("UPDATE trace_sources SET secret_name = 'PHX_TEST_KEY_UNSET'")
    monkeypatch.delenv("PHX_TEST_KEY_UNSET", raising=False)
    report = pushback.push_to_phoenix(engine, REVIEWER, plan_id=pid)
    [(reason, _)] = report.failures
    assert "API key named 'PHX_TEST_KEY_UNSET' is not set" in reason


def test_who_may_push_and_which_batches(engine: Engine) -> None:
    pid, _ = batch(engine, f"http://127.0.0.1:{free_port()}")
    with pytest.raises(PermissionDenied, match="may not send audit verdicts"):
        pushback.push_to_phoenix(engine, ANNOTATOR, plan_id=pid)
    # an administrator may (as a reviewer may)
    assert pushback.push_to_phoenix(engine, ADMIN, plan_id=pid).failed
    with pytest.raises(InputError, match="does not exist"):
        pushback.push_to_phoenix(engine, REVIEWER, plan_id=pid + 100)
    with pytest.raises(InputError, match="not both"):
        pushback.push_to_phoenix(engine, REVIEWER, plan_id=pid, all_plans=True)
    with pytest.raises(InputError, match="there is no trace source named 'nope'"):
        pushback.push_to_phoenix(engine, REVIEWER, plan_id=pid, source="nope")
    with pytest.raises(InputError, match="is a otlp source"):
        pushback.push_to_phoenix(engine, REVIEWER, plan_id=pid, source="receiver")
    # an open batch is refused: its verdicts may still change
    from review.audits.plans import PlanSpec
    from tests.helpers.transact import write

    open_id = write(engine, audit_plans.create_plan, REVIEWER, PlanSpec(name="open one", total=2))
    write(engine, audit_plans.draw_plan, REVIEWER, open_id)
    with pytest.raises(InputError, match="is open: its verdicts go back to Phoenix when"):
        pushback.push_to_phoenix(engine, REVIEWER, plan_id=open_id)
    # --all takes the closed batches only
    report = pushback.push_to_phoenix(engine, REVIEWER, all_plans=True)
    assert report.failed == expected_annotations(engine, pid)


def test_the_command_line_says_what_happened_and_fails_on_failures(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    eng = make_engine(url)
    migrate(eng)
    pid, _ = batch(eng, f"http://127.0.0.1:{free_port()}")
    eng.dispose()
    runner = CliRunner(env={"WORKBENCH_DATABASE_URL": url})
    res = runner.invoke(main, ["push", "phoenix", "--plan", str(pid)])
    assert res.exit_code == 1, res.output
    assert "Pushed 0 annotations to Phoenix" in res.stdout
    assert "1 trace not pushable" in res.stdout
    assert "Failed (" in res.stderr and "unreachable" in res.stderr
    res = runner.invoke(main, ["push", "phoenix"])
    assert res.exit_code == 2 and "give --plan ID or --all" in res.output
    res = runner.invoke(main, ["push", "phoenix", "--plan", str(pid), "--source", "nope"])
    assert res.exit_code == 1 and "error: there is no trace source named 'nope'" in res.stderr


def _read_request(conn: socket.socket) -> None:
    """Read one whole HTTP request (headers, then Content-Length bytes of body): a server that
    answers and closes with part of the request unread makes the kernel reset the connection,
    and the client can then lose the answer before reading it (a flake on a busy machine)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return
        body += chunk


class _Answering:
    """A TCP server that reads a request and answers every connection with ``answer`` (raw
    bytes), then closes: a Phoenix that misbehaves on the wire."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(16)
        self.srv.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.srv.getsockname()[1])

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.srv.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(5)
                try:
                    _read_request(conn)
                    conn.sendall(self.answer)
                    # FIN, not RST: close with nothing unread, or the client may lose the answer
                    conn.shutdown(socket.SHUT_WR)
                    while conn.recv(65536):
                        pass
                except OSError:
                    pass

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.srv.close()


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{",
            "not taken as acknowledged",  # cut short: whatever arrived is not the ids
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot json!",
            "Phoenix's answer is not the list of annotation ids; not taken as acknowledged",
        ),
        (
            b'HTTP/1.1 200 OK\r\nContent-Length: 11\r\nConnection: close\r\n\r\n{"data":[]}',
            "annotations (a Phoenix without synchronous annotation writes?)",
        ),
        (
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 25\r\nConnection: close\r\n\r\n"
            b'{"detail":"\x00overloaded"}',
            'Phoenix answered 503 Service Unavailable: {"detail":"overloaded"}',
        ),
        (b"SSH-2.0-OpenSSH_9.6\r\n", "not taken as acknowledged"),
    ],
)
def test_a_misbehaving_answer_is_never_taken_as_acknowledged(
    engine: Engine, answer: bytes, reason: str
) -> None:
    srv = _Answering(answer)
    try:
        pid, _ = batch(engine, f"http://127.0.0.1:{srv.port}/")
        report = pushback.push_to_phoenix(engine, REVIEWER, plan_id=pid, timeout=10)
    finally:
        srv.close()
    assert report.pushed == 0 and report.failed == expected_annotations(engine, pid)
    assert any(reason in why for why, _ in report.failures), report.failures
    assert all(r.pushed_digest is None and r.error for r in rows(engine))


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://user:s3cret@127.0.0.1:9/", "has a user name or password in its URL"),
        ("ftp://127.0.0.1/", "has no usable http or https URL"),
        ("http://127.0.0.1:port/", "has no usable http or https URL"),
    ],
)
def test_a_source_url_that_is_not_plain_http_is_refused_without_sending(
    engine: Engine, url: str, reason: str
) -> None:
    pid, _ = batch(engine, url)
    report = pushback.push_to_phoenix(engine, REVIEWER, plan_id=pid)
    [(why, n)] = report.failures
    assert reason in why and n == expected_annotations(engine, pid)
    assert "s3cret" not in why


@pytest.fixture
def dripping_server() -> Iterator[str]:
    """A server that answers every request with a 200 whose body arrives a byte at a time,
    each byte well within a per-read timeout (a slow proxy, a stuck Phoenix worker)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                _read_request(conn)
                body = b'{"data": []}' + b" " * 48
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body))
                for i in range(len(body)):
                    if stop.wait(0.5):
                        return
                    conn.sendall(body[i : i + 1])
            except OSError:
                return

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    stop.set()
    t.join()
    srv.close()


def test_the_timeout_bounds_the_whole_request_not_each_read(
    engine: Engine, dripping_server: str
) -> None:
    """A Phoenix answering a byte every half second never trips a per-read timeout of 2 s;
    the push's timeout is a deadline for the whole request, so it fails at it with the
    reason, and the rest of that source is not tried."""
    pid, _ = batch(engine, dripping_server)
    want = expected_annotations(engine, pid)
    report = pushback.push_to_phoenix(engine, REVIEWER, plan_id=pid, batch_size=2, timeout=2)
    assert report.pushed == 0 and report.failed == want
    reasons = dict(report.failures)
    assert reasons[f"phx: Phoenix at {dripping_server} did not answer within 2 s"] == 2, reasons
    assert all(r.pushed_digest is None and r.error for r in rows(engine))
