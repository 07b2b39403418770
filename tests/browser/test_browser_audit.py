"""Browser journey: a reviewer creates a sampling plan, draws it, and records a verdict.

Runs the Audit page through the one-page router (tests/apps/one_page.py) with Debian's
chromium, so it works whether or not the page is registered in app.py yet.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect
from sqlalchemy import func, select

from storage.db import make_engine, read_session
from storage.models import AuditItem, AuditVerdict
from tests.helpers.audits import realistic_traces
from tests.helpers.browser import chromium_page, streamlit_server, wait_idle
from tests.helpers.guideshots import guide_shot
from tests.helpers.paths import ROOT


@pytest.fixture
def demo_url(tmp_path: Path, demo_notraces_template: Path) -> str:
    """These tests add and count their own traces: start from the demo without traces."""
    from tests.helpers.databases import copy_db

    return copy_db(demo_notraces_template, tmp_path)


pytestmark = pytest.mark.browser


@pytest.fixture
def audit_server(demo_url: str, tmp_path: Path) -> Iterator[str]:
    eng = make_engine(demo_url)
    realistic_traces(eng)
    eng.dispose()
    with streamlit_server(
        ROOT / "tests" / "apps" / "one_page.py",
        tmp_path,
        WORKBENCH_DATABASE_URL=demo_url,
        WB_TEST_PAGE=str(ROOT / "pages" / "audit_page.py"),
        WB_TEST_USER="ravi.menon@brightwave.example",
    ) as base:
        yield base


def test_draw_a_sample_and_record_a_verdict(audit_server: str, demo_url: str) -> None:
    with chromium_page(1400, 1600, base=audit_server) as pg:
        expect(pg.get_by_role("heading", name="Audit")).to_be_visible()
        if not pg.get_by_label("Plan name").is_visible():  # open by default without plans
            pg.get_by_text("New sampling plan").click()
        pg.get_by_label("Plan name").fill("Browser journey")
        pg.get_by_label("Sample size").fill("6")
        pg.get_by_role("button", name="Create plan").click()
        wait_idle(pg)
        expect(pg.get_by_text("Plan 'Browser journey' created")).to_be_visible()
        pg.get_by_role("button", name="Draw the sample").click()
        wait_idle(pg)
        expect(pg.get_by_text("Drew 6 traces")).to_be_visible()
        guide_shot(pg, "reviewer-audit-drawn")

        pg.get_by_role("tab", name="My queue").click()
        pg.get_by_role("button", name="Next trace").click()
        wait_idle(pg)
        expect(pg.get_by_role("heading", name="Your verdict")).to_be_visible()
        pg.get_by_text("False refusal (I expected an answer)").click()
        wait_idle(pg)
        claims = pg.get_by_label("Review the answer claim by claim")
        if claims.is_checked():
            claims.uncheck(force=True)
            wait_idle(pg)
        pg.get_by_role("button", name="Answer policy too strict").click()  # the stage's pill
        expect(
            pg.get_by_role("button", name="Answer policy too strict", pressed=True)
        ).to_be_visible()
        wait_idle(pg)
        guide_shot(pg, "reviewer-audit-verdict")
        pg.get_by_role("button", name="Save verdict").click()
        wait_idle(pg)
        expect(pg.get_by_text("Saved your verdict")).to_be_visible()
        assert pg.errors == []  # type: ignore[attr-defined]

    eng = make_engine(demo_url)
    with read_session(eng) as s:
        items = s.scalar(select(func.count(AuditItem.id)))
        verdicts = s.scalars(select(AuditVerdict.verdict)).all()
    eng.dispose()
    assert items == 6
    assert verdicts == ["false_refusal"]


# every label and its descendants show whole: nothing is cut to "Add…" by its column
_WHOLE = "b => [b, ...b.querySelectorAll('*')].every(e => e.scrollWidth <= e.clientWidth + 1)"


def test_the_claim_buttons_read_whole_at_1280(audit_server: str) -> None:
    """At 1280x720 the claims sit in the narrow half of the page: the buttons under them
    read "Add…" and "Spli…" in fixed column fractions (found in the public data trial)."""
    with chromium_page(1280, 720, base=audit_server) as pg:
        expect(pg.get_by_role("heading", name="Audit")).to_be_visible()
        if not pg.get_by_label("Plan name").is_visible():
            pg.get_by_text("New sampling plan").click()
        pg.get_by_label("Plan name").fill("Claims at 1280")
        pg.get_by_label("Sample size").fill("3")
        pg.get_by_role("button", name="Create plan").click()
        wait_idle(pg)
        pg.get_by_role("button", name="Draw the sample").click()
        expect(pg.get_by_text("Drew 3 traces")).to_be_visible()
        pg.get_by_role("tab", name="My queue").click()
        pg.get_by_role("button", name="Next trace").click()
        expect(pg.get_by_role("heading", name="Your verdict")).to_be_visible()
        claims = pg.get_by_label("Review the answer claim by claim")
        if not claims.is_checked():
            claims.check(force=True)
        for name in ("Add a claim", "Split the answer again"):
            button = pg.get_by_role("button", name=name, exact=True)
            expect(button).to_be_visible()
            wait_idle(pg)
            assert button.evaluate(_WHOLE), f"{name!r} is cut off"
        assert pg.errors == []  # type: ignore[attr-defined]
