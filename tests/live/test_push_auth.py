"""Verdicts back to a REAL Phoenix that requires authentication (PHOENIX_ENABLE_AUTH, its
admin secret as the bearer token): the source names the secret, the push reads it from the
environment and sends it; a secret set nowhere, or a wrong one (401), is recorded as a failure
on every row with its reason, nothing marked pushed, and the key never appears in a reason."""

from __future__ import annotations

import secrets
import time
import urllib.error
from pathlib import Path

import pytest
from sqlalchemy import select

from review.audits import pushback
from storage.db import make_engine, migrate, read_session
from storage.models import VerdictPush
from tests.helpers.actors import REVIEWER, make_actor
from tests.helpers.pushing import (
    CORRECT,
    UNSUPPORTED,
    closed_batch,
    import_from_phoenix,
    phoenix_annotations,
    phoenix_spans,
)
from tests.live.phoenix_server import (
    PHOENIX_GROUP,
    SPANS_PER_TRACE,
    phoenix_server,
    rag_traces,
    send_rag_traces,
)

pytestmark = [pytest.mark.timeout(1800), PHOENIX_GROUP]

PROJECT = "push-auth"
KEY_NAME = "WB_TEST_PHOENIX_PUSH_KEY"
ADMIN = make_actor("admin", "admin@test.example", clearance=True, uid=51)


def _secret() -> str:
    return "Ab1" + secrets.token_hex(24)


def _stored(base_url: str, token: str) -> int:
    """Spans Phoenix has stored in the project (0 before the project exists)."""
    try:
        return len(phoenix_spans(base_url, PROJECT, token))
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return 0
        raise


def test_push_to_a_phoenix_that_requires_an_api_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin_key = _secret()
    # the Phoenix process inherits these
    monkeypatch.setenv("PHOENIX_ENABLE_AUTH", "true")
    monkeypatch.setenv("PHOENIX_SECRET", _secret())
    monkeypatch.setenv("PHOENIX_ADMIN_SECRET", admin_key)
    monkeypatch.delenv(KEY_NAME, raising=False)
    with phoenix_server(tmp_path / "phoenix") as phx:
        auth = {"Authorization": f"Bearer {admin_key}"}
        send_rag_traces(phx.traces_url, rag_traces(2, seed=5), project=PROJECT, headers=auth)
        deadline = time.monotonic() + 300
        while _stored(phx.base_url, admin_key) < 2 * SPANS_PER_TRACE:
            assert time.monotonic() < deadline, "Phoenix did not store the spans"
            time.sleep(0.5)
        eng = make_engine(f"sqlite:///{tmp_path / 'wb.db'}")
        migrate(eng)
        monkeypatch.setenv(KEY_NAME, admin_key)  # the sync reads it too
        import_from_phoenix(
            eng, ADMIN, phx.base_url, PROJECT, "phx-auth", secret_name=KEY_NAME, token=admin_key
        )
        pid = closed_batch(eng, [REVIEWER], [UNSUPPORTED, CORRECT])
        monkeypatch.delenv(KEY_NAME)

        # the secret is set nowhere: nothing is sent, every row says which name is missing
        missing = pushback.push_to_phoenix(eng, REVIEWER, plan_id=pid)
        assert missing.pushed == 0 and missing.failed == 6
        [(why, _)] = missing.failures
        assert f"the API key named {KEY_NAME!r} is not set" in why

        # a wrong key: Phoenix refuses (401), the rest of the source is not tried
        wrong = _secret()
        monkeypatch.setenv(KEY_NAME, wrong)
        refused = pushback.push_to_phoenix(eng, REVIEWER, plan_id=pid, batch_size=2)
        assert refused.pushed == 0 and refused.failed == 6
        reasons = " ".join(why for why, _ in refused.failures)
        assert "Phoenix answered 401" in reasons
        assert wrong not in reasons and admin_key not in reasons

        # the right key: everything goes
        monkeypatch.setenv(KEY_NAME, admin_key)
        done = pushback.push_to_phoenix(eng, REVIEWER, plan_id=pid)
        assert (done.pushed, done.failed) == (6, 0), done.summary()
        with read_session(eng) as s:
            rows = s.scalars(select(VerdictPush)).all()
            assert len(rows) == 6
            assert all(r.pushed_digest and r.error is None and r.attempts == 3 for r in rows)
            assert not any(admin_key in (r.error or "") for r in rows)
        eng.dispose()
        roots = [
            s.span_id
            for s in phoenix_spans(phx.base_url, PROJECT, admin_key)
            if s.parent_id is None
        ]
        held = phoenix_annotations(phx.base_url, PROJECT, roots, admin_key)
        assert len(held) == 6
        assert {a["identifier"] for a in held} == {REVIEWER.email}
        assert {a["annotator_kind"] for a in held} == {"HUMAN"}
