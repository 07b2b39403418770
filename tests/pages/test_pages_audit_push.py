"""AppTest of the Audit page's push to Phoenix (Export tab, issue 31 item 3): on a closed batch
a reviewer or an administrator sends the verdicts and reads what happened right under the
button (pushed, already there, failed with reasons, not pushable), names from users shown as
typed; an annotator has no button, an open batch says when it can be sent."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from sqlalchemy import func, select
from streamlit.testing.v1 import AppTest

from review.admin import users
from review.audits import plans as audit_plans
from review.audits.plans import PlanSpec
from review.core.identity import SYSTEM
from storage.db import make_engine, migrate, read_session
from storage.models import VerdictPush
from tests.helpers.actors import REVIEWER
from tests.helpers.audits import add_trace
from tests.helpers.pages import no_exception, open_tab, page_app, readable
from tests.helpers.placement import said_under
from tests.helpers.pushing import CORRECT, UNSUPPORTED, closed_batch, phoenix_source, root_span
from tests.helpers.transact import write

PAGE = "pages/audit_page.py"
RAVI = "ravi@push.example"
ADA = "ada@push.example"
ANN = "ann@push.example"
HOSTILE = "**phx** <b>x</b> ![i](https://evil.example/x.png)"
BUTTON = "Send the verdicts to Phoenix"


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def url(tmp_path: Path) -> str:
    """Three traces (two sent by a Phoenix that is down, one from a file) in a closed batch,
    and an open batch."""
    url = f"sqlite:///{tmp_path / 'push.db'}"
    eng = make_engine(url)
    migrate(eng)
    users.add_user(eng, SYSTEM, RAVI, "Ravi", ["reviewer"], True)
    users.add_user(eng, SYSTEM, ADA, "Ada", ["admin"], True)
    users.add_user(eng, SYSTEM, ANN, "Ann", ["annotator"], False)
    tids = [f"{i:032x}" for i in (1, 2, 3)]
    for tid in tids:
        add_trace(eng, tid)
    source = phoenix_source(eng, HOSTILE, _dead_url())
    root_span(eng, source, tids[0], "00000000000000a1")
    root_span(eng, source, tids[1], "00000000000000a2")
    closed_batch(eng, [REVIEWER], [UNSUPPORTED, CORRECT], name="June <b>batch</b>")
    pid = write(eng, audit_plans.create_plan, REVIEWER, PlanSpec(name="still open", total=2))
    write(eng, audit_plans.draw_plan, REVIEWER, pid)
    eng.dispose()
    return url


def _export(url: str, monkeypatch: pytest.MonkeyPatch, user: str, plan: str) -> AppTest:
    at = page_app(url, monkeypatch, PAGE, user).run()
    no_exception(at)
    eng = make_engine(url)
    [pid] = [p.id for p in audit_plans.list_plans(eng) if p.name == plan]
    eng.dispose()
    at.selectbox(key="aud_plan").set_value(pid).run()
    open_tab(at, "Export", "aud_tab")
    no_exception(at)
    return at


def test_a_reviewer_sends_a_closed_batch_and_reads_what_happened_under_the_button(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = _export(url, monkeypatch, RAVI, "June <b>batch</b>")
    [button] = [b for b in at.button if b.label == BUTTON]
    assert said_under(at, "aud_push") == []
    button.click().run()
    no_exception(at)
    [said] = said_under(at, "aud_push")
    assert said.startswith("Pushed 0 annotations to Phoenix; 0 annotations already there; "), said
    assert "1 trace not pushable." in said
    assert "Not pushable (1 trace): imported from a file (no Phoenix span)" in said
    # the source's name, as typed (escaped for Markdown, read back as the person reads it)
    assert "Failed (" in said and f"{HOSTILE}: Phoenix at http://127.0.0.1:" in said
    assert "unreachable" in said
    [shown] = [w for w in at.warning if "Pushed 0" in readable(w)]
    assert "![i](https://evil" not in shown.value  # no live image link in the Markdown
    eng = make_engine(url)
    with read_session(eng) as s:
        failed = s.scalar(select(func.count()).where(VerdictPush.error.is_not(None)))
    eng.dispose()
    assert failed and failed > 0
    # said once: the next run (no press) does not repeat it
    at.run()
    assert said_under(at, "aud_push") == []


def test_an_administrator_may_push_an_annotator_may_not(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = _export(url, monkeypatch, ADA, "June <b>batch</b>")
    assert [b.label for b in at.button if b.label == BUTTON] == [BUTTON]
    at = _export(url, monkeypatch, ANN, "June <b>batch</b>")
    assert not [b for b in at.button if b.label == BUTTON]
    assert "Back to Phoenix" not in [readable(h) for h in at.subheader]


def test_an_open_batch_says_when_it_can_be_sent(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = _export(url, monkeypatch, RAVI, "still open")
    assert not [b for b in at.button if b.label == BUTTON]
    assert any("When the batch is closed" in readable(c) for c in at.caption)
