"""Browser journeys of "Say why" (issue 35, item 6): a trace import whose traces cite documents
the corpus has never seen says so on the Traces page (how many, which ids, the way forward),
and a Monthly review dry run on outputs that lack signals lists every signal they lacked."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import FilePayload, Page, expect

from review.admin import users
from review.core.taxonomy import Taxonomy
from review.monthly import validation
from storage.db import make_engine
from tests.helpers.browser import chromium_page, open_as, streamlit_server, wait_idle
from tests.helpers.dryrun import break_validation_signals
from tests.helpers.paths import ROOT
from tests.helpers.traces import canonical_lines, chunk, make_trace

pytestmark = pytest.mark.browser


@pytest.fixture
def page() -> Iterator[Page]:
    with chromium_page(width=1280, height=720) as pg:
        yield pg


def test_an_import_of_traces_citing_unknown_documents_says_how_many_which_and_what_to_do(
    page: Page, empty_url: str, tmp_path: Path
) -> None:
    """25 traces of a public QA set, each citing a document the corpus has never seen."""
    items = [
        make_trace(f"qa-{i}", chunks=[chunk(f"c{i}", doc=f"QA-DOC-{i:03d}")]) for i in range(25)
    ]
    payload = "\n".join(canonical_lines(items)).encode("utf-8")
    with streamlit_server(ROOT / "app.py", tmp_path, WORKBENCH_DATABASE_URL=empty_url) as base:
        open_as(page, f"{base}/traces?as=1")
        wait_idle(page)
        if not page.get_by_text("Skip bad lines (and report them)").is_visible():
            page.get_by_text("Import traces", exact=True).first.click()
        page.locator("input[type='file']").set_input_files(
            files=[FilePayload(name="qa.jsonl", mimeType="application/jsonl", buffer=payload)]
        )
        expect(page.get_by_text("qa.jsonl", exact=True)).to_be_visible()
        page.get_by_role("button", name="Import traces").click()
        wait_idle(page)
        # the count ...
        expect(
            page.get_by_text(
                re.compile(
                    r"^25 of 25 imported traces are restricted because they cite documents "
                    r"the corpus has never seen"
                )
            )
        ).to_be_visible()
        # ... the ids: the first 20 of 25, one per line ...
        expect(page.get_by_text("Unknown document ids: the first 20 of 25")).to_be_visible()
        ids = page.locator("[data-testid='stCode']").filter(has_text="QA-DOC-000")
        expect(ids).to_be_visible()
        expect(ids).to_contain_text("QA-DOC-019")
        expect(ids).not_to_contain_text("QA-DOC-020")
        # ... and the way forward
        expect(
            page.get_by_text(re.compile(r"^Way forward: import those documents into the corpus"))
        ).to_be_visible()
        expect(page.get_by_text("Traces citing unknown documents are restricted")).to_be_visible()
        assert page.errors == []  # type: ignore[attr-defined]


def test_a_dry_run_on_outputs_lacking_signals_lists_each_lacking_signal(
    page: Page, demo_url: str, tmp_path: Path, tax: Taxonomy
) -> None:
    """The reference run's validation outputs: a NaN score, the score and a flag not logged,
    or no signals at all. The dry run fails every case and says why for each."""
    eng = make_engine(demo_url)
    try:
        _, keys = break_validation_signals(eng, tax)
        ravi = users.get_by_email(eng, "ravi.menon@brightwave.example")
        assert ravi is not None
    finally:
        eng.dispose()
    with streamlit_server(ROOT / "app.py", tmp_path, WORKBENCH_DATABASE_URL=demo_url) as base:
        open_as(page, f"{base}/review?as={ravi.id}")
        wait_idle(page)
        page.get_by_role("tab", name="Validation check").click()
        form = page.locator("[data-testid='stForm']").filter(has_text="Policy version to dry-run")
        form.get_by_role("combobox", name="Run", exact=True).click()
        page.get_by_role("option", name=re.compile(r"^reference")).first.click()
        page.get_by_role("button", name="Run and store the validation check").click()
        wait_idle(page)
        banner = page.get_by_text(re.compile(r"^Refused for a missing signal: "))
        expect(banner).to_be_visible()
        # every signal the outputs lacked is named, with how many lacked it
        for said in (
            re.compile(r"Counting every signal an output lacked: .*top score \d"),
            re.compile(r"answerable flag \d"),
            re.compile(rf"logged no signals {len(keys[2::3]):,}"),
        ):
            expect(banner).to_contain_text(said)
        listed = min(len(keys), validation.LACKING_LISTED)
        expect(page.get_by_text(re.compile(r"^The signals each output lacked"))).to_be_visible()
        # the grid is drawn on a canvas; its cells are also in the table a screen reader reads
        grid = page.locator("[data-testid='stDataFrame']").filter(
            has=page.locator("th", has_text=re.compile(r"^lacked$"))
        )
        expect(grid).to_be_visible()
        expect(grid.locator("table")).to_have_attribute("aria-rowcount", str(listed + 1))
        # each output with every signal it lacked
        wants = [
            "top score missing (NaN)",
            "top score not logged; answerable flag not logged",
            "logged no signals",
        ]
        for key, want in zip(keys[:3], wants, strict=True):
            expect(grid.locator("tr").filter(has_text=key)).to_contain_text(want)
        assert page.errors == []  # type: ignore[attr-defined]
