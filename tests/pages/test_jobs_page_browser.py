"""In a real browser, on two real servers: an import started on one server with workers in
charge says it waits for a worker; when a worker (run by the test) has done it, the page
shows the result by itself (its fragment reads the job every second), and the job's address
opened on the other server shows the same result (AppTest never runs a fragment's timer)."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import FilePayload, expect

from review.admin import users
from review.core.identity import SYSTEM
from review.jobs import catalog, runner
from storage.db import make_engine
from tests.helpers.browser import chromium_page, open_as, streamlit_server, wait_idle
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.browser

SAMPLE = (ROOT / "tests" / "data" / "traces" / "canonical.jsonl").read_bytes()


def test_an_import_is_watched_to_its_end_on_two_servers(empty_url: str, tmp_path: Path) -> None:
    assert "trace_import" in catalog.kinds.REGISTRY  # the worker below knows the kind
    eng = make_engine(empty_url)
    rev = users.add_user(eng, SYSTEM, "rev@jobs.example", "Rev", ["reviewer"])
    env = {"WORKBENCH_DATABASE_URL": empty_url, "WORKBENCH_JOBS": "workers"}
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    try:
        with (
            streamlit_server(ROOT / "app.py", tmp_path / "a", **env) as one,
            streamlit_server(ROOT / "app.py", tmp_path / "b", **env) as two,
            chromium_page() as page,
        ):
            open_as(page, f"{one}/traces?as={rev.id}")
            wait_idle(page)
            page.locator("input[type='file']").set_input_files(
                files=[FilePayload(name="a.jsonl", mimeType="application/jsonl", buffer=SAMPLE)]
            )
            expect(page.get_by_text("a.jsonl", exact=True)).to_be_visible()  # uploaded
            page.get_by_role("button", name="Import traces").click()
            expect(page.get_by_text("Waiting for a worker (none running)")).to_be_visible()
            assert "job=1" in page.url  # a reload or another browser finds it
            assert runner.run_worker(eng, name="browser-test-worker", once=True) == 1
            # no reload: the fragment reads the job and the page shows its end
            expect(page.get_by_text("Import finished.")).to_be_visible()
            expect(page.get_by_text("a.jsonl: 5 traces added")).to_be_visible()

            other = page.context.browser.new_page()  # type: ignore[union-attr]
            open_as(other, f"{two}/jobs?as={rev.id}&job=1")
            wait_idle(other)
            expect(other.get_by_text("Import finished.")).to_be_visible()
            expect(other.get_by_text("a.jsonl: 5 traces added")).to_be_visible()
            assert page.errors == []  # type: ignore[attr-defined]
    finally:
        eng.dispose()
