"""A trace import as a background job on the pages (AppTest, real worker runs): started on
the Traces page with workers in charge, it says it waits for a worker; a worker runs it; a
second AppTest (another server, another browser) opens the job's address and shows the
result, on the Traces page and on the Background work page. Hostile file names and lines show
as text; an annotator sees neither the job nor its result; the rejected lines (unredacted) go
to the person who imported them and to people with clearance only."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session
from streamlit.testing.v1 import AppTest

from review.admin import users
from review.core.identity import SYSTEM
from review.jobs import queue, runner
from review.jobs.queue import JobView
from storage.db import make_engine
from tests.helpers.pages import live_markdown, markdown_shown, no_exception, page_app, readable
from tests.helpers.paths import ROOT

TRACES = "pages/traces_page.py"
JOBS = "pages/jobs_page.py"
SAMPLE = (ROOT / "tests" / "data" / "traces" / "canonical.jsonl").read_bytes()
N = len(SAMPLE.splitlines())
REV = "rev@jobs.example"  # reviewer, no clearance: imports traces
REV2 = "rev2@jobs.example"  # another reviewer, no clearance
ANN = "ann@jobs.example"  # annotator: may not import traces
ADMIN = "solo@example.org"  # the empty database's administrator
HOSTILE = "![x](http://evil.example/x.png) <img src=x onerror=alert(1)> [y](javascript:z).jsonl"


@pytest.fixture
def url(empty_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("WORKBENCH_JOBS", "workers")
    eng = make_engine(empty_url)
    for email, roles in ((REV, ["reviewer"]), (REV2, ["reviewer"]), (ANN, ["annotator"])):
        users.add_user(eng, SYSTEM, email, email.split("@")[0].title(), roles)
    eng.dispose()
    return empty_url


@pytest.fixture
def engine(url: str) -> Iterator[Engine]:
    eng = make_engine(url)
    yield eng
    eng.dispose()


def hostile_file() -> bytes:
    """The sample with its second line broken, quoting Markdown and HTML."""
    lines = SAMPLE.decode().splitlines()
    bad = json.loads(lines[1])
    bad["top_score"] = "![t](http://evil.example/t.png) <script>alert(2)</script>"
    return "\n".join([lines[0], json.dumps(bad), *lines[2:]]).encode()


def button(at: AppTest, label: str) -> Any:
    return next(b for b in at.button if b.label == label)


def said(at: AppTest) -> list[str]:
    return [readable(e) for kind in (at.info, at.warning, at.success, at.error) for e in kind]


def texts(at: AppTest) -> str:
    return "\n".join([t.value for t in at.text] + [c.value for c in at.code])


def inert(at: AppTest) -> None:
    live = {t: found for t in markdown_shown(at) if (found := live_markdown(t))}
    assert live == {}


def only_job(engine: Engine, email: str) -> JobView:
    row = users.get_by_email(engine, email)
    assert row is not None
    with Session(engine) as s:
        [job] = queue.recent(s, users.to_actor(row))
    return job


def start_import(url: str, monkeypatch: pytest.MonkeyPatch, *, skip_bad: bool) -> AppTest:
    at = page_app(url, monkeypatch, TRACES, REV).run()
    no_exception(at)
    at.file_uploader[0].set_value([(HOSTILE, hostile_file(), "application/jsonl")])
    if skip_bad:
        next(c for c in at.checkbox if c.label.startswith("Skip bad lines")).check()
    button(at, "Import traces").click().run()
    no_exception(at)
    return at


def test_an_import_waits_for_a_worker_and_another_server_shows_its_result(
    url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = start_import(url, monkeypatch, skip_bad=True)
    job = only_job(engine, REV)
    assert job.status == "queued"
    assert at.query_params["job"] == str(job.id)  # a reload or another browser shows it
    assert any("Waiting for a worker (none running)" in s for s in said(at)), said(at)
    assert "Cancel" in [b.label for b in at.button]
    assert not any(s == "Import finished." for s in said(at))
    inert(at)

    assert runner.run_worker(engine, name="page-test-worker", once=True) == 1

    # another server: a new session opening the job's address
    other = page_app(url, monkeypatch, TRACES, REV, job=str(job.id)).run()
    no_exception(other)
    assert "Import finished." in said(other)
    shown = texts(other)
    assert f"{N - 1} traces added" in shown and "1 rejected" in shown
    assert HOSTILE in shown  # the name, as text
    assert "line 2: field top_score" in shown
    assert other.get("download_button")
    inert(other)
    # the page that started it shows the result on its next run too
    at.run()
    no_exception(at)
    assert "Import finished." in said(at)

    # the Background work page: the list, and the job opened
    listing = page_app(url, monkeypatch, JOBS, REV).run()
    no_exception(listing)
    frame = next(d.value for d in listing.dataframe if "attempts" in d.value.columns)
    assert list(frame["job"]) == [job.id]
    assert list(frame["status"]) == ["Done"]
    assert list(frame["worker"]) == ["page-test-worker"]
    captions = [readable(c) for c in listing.caption]
    assert any(c.startswith("Mode (WORKBENCH_JOBS=workers): Workers:") for c in captions)
    assert "No worker is running." in captions
    inert(listing)
    opened = page_app(url, monkeypatch, JOBS, REV, job=str(job.id)).run()
    no_exception(opened)
    assert "Import finished." in said(opened) and HOSTILE in texts(opened)
    inert(opened)

    # another reviewer sees the import, not the unredacted rejected lines
    peer = page_app(url, monkeypatch, JOBS, REV2, job=str(job.id)).run()
    no_exception(peer)
    assert "Import finished." in said(peer)
    assert "top_score" not in texts(peer) and not peer.get("download_button")

    # an annotator sees neither the job nor its result
    for query in ({}, {"job": str(job.id)}):
        away = page_app(url, monkeypatch, JOBS, ANN, **query).run()
        no_exception(away)
        assert "Import finished." not in said(away)
        assert HOSTILE not in texts(away) and not away.dataframe
    assert f"There is no job {job.id} that you may see." in said(away)


def test_a_failed_import_says_why_as_text_and_a_queued_one_can_be_cancelled(
    url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = start_import(url, monkeypatch, skip_bad=False)
    job = only_job(engine, REV)
    assert runner.run_worker(engine, name="w", once=True) == 1
    at.run()
    no_exception(at)
    assert any(s.startswith("Nothing was imported. The file has a problem:") for s in said(at))
    assert f"{HOSTILE}: line 2: field top_score" in texts(at)
    inert(at)
    with Session(engine) as s:
        assert queue.get(s, SYSTEM, job.id).status == "failed"  # type: ignore[union-attr]

    # a queued import, cancelled from the Background work page
    at = start_import(url, monkeypatch, skip_bad=True)
    with Session(engine) as s:
        newest = queue.recent(s, SYSTEM, limit=1)[0]
    peer = page_app(url, monkeypatch, JOBS, REV2, job=str(newest.id)).run()
    no_exception(peer)
    assert any("Waiting for a worker" in s for s in said(peer))
    assert "Cancel" not in [b.label for b in peer.button]  # not theirs: its starter or an admin
    opened = page_app(url, monkeypatch, JOBS, REV, job=str(newest.id)).run()
    button(opened, "Cancel").click().run()
    no_exception(opened)
    with Session(engine) as s:
        assert queue.get(s, SYSTEM, newest.id).status == "cancelled"  # type: ignore[union-attr]
    assert any("cancelled" in s for s in said(opened)), said(opened)
    assert runner.run_worker(engine, name="w", once=True) == 0

    # an administrator sees every job and cancels any
    start_import(url, monkeypatch, skip_bad=True)
    with Session(engine) as s:
        third = queue.recent(s, SYSTEM, limit=1)[0]
    admin = page_app(url, monkeypatch, JOBS, ADMIN).run()
    no_exception(admin)
    frame = next(d.value for d in admin.dataframe if "attempts" in d.value.columns)
    assert list(frame["job"]) == [third.id, newest.id, job.id]
    admin = page_app(url, monkeypatch, JOBS, ADMIN, job=str(third.id)).run()
    button(admin, "Cancel").click().run()
    no_exception(admin)
    with Session(engine) as s:
        assert queue.get(s, SYSTEM, third.id).status == "cancelled"  # type: ignore[union-attr]


def test_a_mode_the_runner_refuses_is_said_on_the_page(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_JOBS", "sometimes")
    at = page_app(url, monkeypatch, JOBS, REV).run()
    no_exception(at)
    assert any("WORKBENCH_JOBS='sometimes' must be one of" in s for s in said(at)), said(at)
