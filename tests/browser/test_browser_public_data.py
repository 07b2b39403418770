"""Browser journey on public data (issue 35, "Try it as users would"): the MuSiQue sample of
examples/public, converted by tools/public_multisource.py and imported with the documented
commands, and a reviewer taking the answer out of every decisive document of a 3-hop case in
the Case builder at 1280x720.

Found on this data: "Remove the answer" split "Albert ( , ; c. 1338 – 1 April 1412) was King
of Sweden ..." after "c." and left "Albert ( , ; c." as the derived document; and removing a
document's only sentence failed at the save with the validator's raw words. The preview now
says which document would be left with no text, and the edit saves without it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from playwright.sync_api import expect

from review.admin import users
from review.cases import cases
from review.cli.main import main
from review.core.identity import SYSTEM
from storage.db import make_engine
from tests.helpers.browser import chromium_page, open_as, streamlit_server, wait_idle
from tests.helpers.paths import ROOT
from tools import public_multisource as pm

pytestmark = pytest.mark.browser

SAMPLE = ROOT / "examples" / "public" / "musique-sample.json"
CASE = "MSQ-3hop1-101981-387516-145746"  # Strandberg -> Sweden -> Albert -> Mecklenburg
ALBERT = "MSQ-Albert-King-of-Sweden-171c0969"


@pytest.fixture
def public_url(empty_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    out = tmp_path / "msq"
    assert pm.main(["convert", str(SAMPLE), str(out)]) == 0
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", empty_url)
    for args in (
        ["import-docs", str(out / "documents.jsonl")],
        ["import-cases", str(out / "cases.jsonl")],
    ):
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 0, r.output
    eng = make_engine(empty_url)
    users.add_user(eng, SYSTEM, "ravi@example.org", "Ravi", ["reviewer"], True)
    eng.dispose()
    return empty_url


@pytest.fixture
def server(public_url: str, tmp_path: Path) -> Iterator[str]:
    with streamlit_server(ROOT / "app.py", tmp_path, WORKBENCH_DATABASE_URL=public_url) as base:
        yield base


def test_a_reviewer_takes_the_answer_out_of_a_multi_hop_case(server: str, public_url: str) -> None:
    eng = make_engine(public_url)
    ravi = users.get_by_email(eng, "ravi@example.org")
    base = cases.get_case(eng, key=CASE)
    assert ravi is not None and base is not None
    with chromium_page(1280, 720) as pg:
        open_as(pg, f"{server}/builder?case={base.id}&as={ravi.id}")
        wait_idle(pg)
        expect(pg.get_by_role("heading", name=f"Base case {CASE}")).to_be_visible()
        pg.get_by_role("combobox", name="Operator").click()
        pg.keyboard.type("Remove the answer")
        pg.keyboard.press("Enter")
        wait_idle(pg)
        also = pg.get_by_role("combobox", name=re.compile("^Also take it out of these decisive"))
        expect(also).to_be_visible()
        pg.get_by_role("button", name="Preview the edit").click()
        wait_idle(pg)
        # Albert's passage is one sentence ("c. 1338" does not end it): removing it would
        # leave no text, and the preview says so, naming the document
        refused = pg.get_by_text(
            re.compile(rf"{ALBERT}@.?1: Remove the answer would leave this document with no text")
        )
        expect(refused).to_be_visible()
        expect(pg.get_by_text("Albert ( , ; c.", exact=True)).to_have_count(0)
        expect(pg.get_by_text("validation error")).to_have_count(0)
        # leave Albert out: the other two documents lose their answering sentences
        pg.get_by_role("button", name=re.compile(rf"^Remove {ALBERT}@1")).click()
        wait_idle(pg)
        pg.get_by_role("button", name="Preview the edit").click()
        wait_idle(pg)
        expect(pg.get_by_text("One edit of 2 decisive documents", exact=False)).to_be_visible()
        pg.get_by_role("button", name=f"Save as a variant of FAM-{CASE}").click()
        wait_idle(pg)
        saved = pg.get_by_text(re.compile(rf"^Saved {CASE}-CF-1 \(draft;"))
        expect(saved).to_be_visible()
        expect(saved).to_contain_text("MSQ-Mikael-Strandberg-4d9c9040-CF-1@")
        expect(saved).to_contain_text("MSQ-Nicholas-I-Lord-of-Mecklenburg-d9ccef0e-CF-1@")
        expect(pg.locator("[data-testid='stException']")).to_have_count(0)
        assert pg.errors == []  # type: ignore[attr-defined]
    variant = cases.get_case(eng, key=f"{CASE}-CF-1")
    eng.dispose()
    assert variant is not None and variant.status == "draft"
