"""A push through a Phoenix that fails mid-batch in every way a server can, then a push
through one that works: what Phoenix acknowledged is never sent again, what failed is sent
again, and Phoenix ends up holding each annotation once (issue 31 items 3 and 5).

Faults a real Phoenix cannot be made to show on demand are played by a small HTTP server
with Phoenix's upsert on (span, name, identifier); Hypothesis draws the sequence of answers:
acknowledged, written but answered with malformed JSON, 500, an answer cut off mid-body, an
answer with fewer ids than annotations, no answer until the deadline. The pushes that reach
a real Phoenix are in test_push_phoenix.py."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from review.audits import pushback
from storage.db import make_engine, migrate, read_session
from storage.models import VerdictPush
from tests.helpers.actors import REVIEWER
from tests.helpers.pushing import batch, expected_annotations

FAULTS = ["ok", "written-malformed", "500", "cut", "short", "hang"]


class FakePhoenix:
    """Phoenix's span annotation endpoint: upserts, then answers as the script says."""

    def __init__(self) -> None:
        self.held: dict[tuple[str, str, str], str] = {}  # key -> digest of the payload
        self.sent: list[tuple[tuple[str, str, str], str]] = []  # every annotation received
        self.script: list[str] = []
        self.lock = threading.Lock()
        self.release = threading.Event()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    fault = fake.script.pop(0) if fake.script else "ok"
                data = body["data"]
                if fault == "500":
                    self._answer(500, b'{"detail": "database is locked"}')
                    return
                if fault == "hang":
                    fake.release.wait(30)
                    return
                with fake.lock:
                    for a in data:
                        key = (a["span_id"], a["name"], a["identifier"])
                        digest = json.dumps(a, sort_keys=True)
                        fake.sent.append((key, digest))
                        fake.held[key] = digest
                ids = [{"id": f"ann-{i}"} for i in range(len(data))]
                if fault == "short":
                    ids = ids[:-1]
                answer = json.dumps({"data": ids}).encode()
                if fault == "written-malformed":
                    answer = answer[: len(answer) // 2]
                if fault == "cut":
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(answer)))
                    self.end_headers()
                    self.wfile.write(answer[:5])
                    self.wfile.flush()
                    self.connection.shutdown(2)
                    return
                self._answer(200, answer)

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def fake() -> Iterator[FakePhoenix]:
    f = FakePhoenix()
    yield f
    f.close()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.sampled_from(FAULTS), min_size=1, max_size=6), st.integers(1, 4))
def test_faults_mid_push_then_a_clean_push_leave_each_annotation_once(
    tmp_path_factory: pytest.TempPathFactory, fake: FakePhoenix, script: list[str], size: int
) -> None:
    eng = make_engine(f"sqlite:///{tmp_path_factory.mktemp('faults') / 'wb.db'}")
    migrate(eng)
    try:
        with fake.lock:
            fake.held.clear()
            fake.sent.clear()
            fake.script[:] = script
        pid, _ = batch(eng, fake.url)
        want = expected_annotations(eng, pid)
        first = pushback.push_to_phoenix(eng, REVIEWER, plan_id=pid, batch_size=size, timeout=1)
        assert first.pushed + first.failed == want, first.summary()
        with read_session(eng) as s:
            acked = {
                (r.span_id, r.name, r.reviewer): r.pushed_digest
                for r in s.scalars(select(VerdictPush).where(VerdictPush.pushed_at.is_not(None)))
            }
        assert len(acked) == first.pushed
        # only what Phoenix acknowledged is recorded as pushed, and Phoenix holds all of it
        assert set(acked) <= set(fake.held)
        with fake.lock:
            fake.script.clear()
            before = len(fake.sent)
        second = pushback.push_to_phoenix(eng, REVIEWER, plan_id=pid, batch_size=size, timeout=5)
        assert second.ok and second.already == first.pushed, second.summary()
        assert second.pushed == first.failed
        with fake.lock:
            resent = {key for key, _ in fake.sent[before:]}
        assert not resent & set(acked), "an acknowledged annotation was sent again"
        assert len(fake.held) == want  # each annotation once (Phoenix upserts)
        third = pushback.push_to_phoenix(eng, REVIEWER, plan_id=pid, batch_size=size)
        assert (third.pushed, third.failed, third.already) == (0, 0, want)
    finally:
        eng.dispose()


def test_the_fake_is_what_a_phoenix_answers(tmp_path: Path, fake: FakePhoenix) -> None:
    """With no fault the fake acknowledges as Phoenix does (the same push as the real one)."""
    eng = make_engine(f"sqlite:///{tmp_path / 'wb.db'}")
    migrate(eng)
    pid, _ = batch(eng, fake.url)
    report = pushback.push_to_phoenix(eng, REVIEWER, plan_id=pid)
    assert report.ok and report.pushed == expected_annotations(eng, pid)
    eng.dispose()
