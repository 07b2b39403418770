"""Browser journey: a reviewer sends a closed audit batch's verdicts back to a real Phoenix
from the Audit page's Export tab, reads what happened under the button, and the annotations
are on the traces' root spans in Phoenix; pressing again sends nothing new.

Real components: ``phoenix serve`` (tests/live/phoenix_server.py), traces sent to it with the
OpenTelemetry SDK's exporter and imported through the live core, ``streamlit run`` and
Debian's chromium."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from playwright.sync_api import expect

from review.admin import users
from review.core.identity import SYSTEM
from storage.db import make_engine, migrate
from tests.helpers.actors import REVIEWER, make_actor
from tests.helpers.browser import chromium_page, streamlit_server, wait_idle
from tests.helpers.paths import ROOT
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
    wait_for_spans,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(1800), PHOENIX_GROUP]

PROJECT = "push-journey"
ADMIN = make_actor("admin", "admin@test.example", clearance=True, uid=41)
RAVI = "ravi@push.example"


def test_send_a_closed_batch_to_phoenix_from_the_audit_page(tmp_path: Path) -> None:
    with phoenix_server(tmp_path / "phoenix") as phx:
        send_rag_traces(phx.traces_url, rag_traces(2, seed=3), project=PROJECT)
        wait_for_spans(phx.base_url, PROJECT, 2 * SPANS_PER_TRACE)
        url = f"sqlite:///{tmp_path / 'wb.db'}"
        eng = make_engine(url)
        migrate(eng)
        users.add_user(eng, SYSTEM, RAVI, "Ravi", ["reviewer"], True)
        import_from_phoenix(eng, ADMIN, phx.base_url, PROJECT, "phoenix")
        closed_batch(eng, [REVIEWER], [UNSUPPORTED, CORRECT], name="June batch")
        eng.dispose()
        with (
            _server(url, tmp_path) as base,
            chromium_page(1400, 1600, base=base) as pg,
        ):
            expect(pg.get_by_role("heading", name="Audit")).to_be_visible()
            pg.get_by_role("tab", name="Export").click()
            wait_idle(pg)
            button = pg.get_by_role("button", name="Send the verdicts to Phoenix")
            expect(button).to_be_visible()
            button.click()
            wait_idle(pg)
            # one unsupported verdict (1 + 2 stages + 2 claims) and one correct refusal
            expect(
                pg.get_by_text("Pushed 6 annotations to Phoenix; 0 annotations already there;")
            ).to_be_visible()
            button.click()
            wait_idle(pg)
            expect(
                pg.get_by_text("Pushed 0 annotations to Phoenix; 6 annotations already there;")
            ).to_be_visible()
            assert pg.errors == []  # type: ignore[attr-defined]
        held = _all_annotations(phx.base_url)
        assert len(held) == 6
        assert {a["annotator_kind"] for a in held} == {"HUMAN"}
        assert {a["identifier"] for a in held} == {REVIEWER.email}


def _all_annotations(base_url: str) -> list[dict[str, object]]:
    roots = [s.span_id for s in phoenix_spans(base_url, PROJECT) if s.parent_id is None]
    return phoenix_annotations(base_url, PROJECT, roots)


def _server(url: str, tmp_path: Path) -> AbstractContextManager[str]:
    return streamlit_server(
        ROOT / "tests" / "apps" / "one_page.py",
        tmp_path,
        WORKBENCH_DATABASE_URL=url,
        WB_TEST_PAGE=str(ROOT / "pages" / "audit_page.py"),
        WB_TEST_USER=RAVI,
    )
