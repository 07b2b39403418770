"""The team deployment of deploy/ for real (issue 33): one throwaway PostgreSQL, two app
servers (serve.py) and one `workbench worker`, all with WORKBENCH_JOBS=workers, behind Debian's
haproxy started on the shipped deploy/haproxy.cfg; two people in two browsers (Debian's
chromium through Playwright), each held by haproxy's sticky cookie on a different server.

A product owner proposes a threshold change through server 1; compliance, on server 2, finds
it waiting and signs it; the product owner, still on server 1, sees the signature. A server
taken out of haproxy's rotation sends its people to the other server as themselves. A trace
import started on server 1 is run by the worker and watched to its end on server 2. Nothing
of it passes through one server's memory: proposals, signatures and jobs live in the database.

Every browser assertion waits (``expect``); every process is stopped in ``finally`` (the
fixtures' context managers), also when the test fails. The module runs on one test worker
(its xdist_group): the deployment is started once for its tests."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, FilePayload, Page, expect
from sqlalchemy import text

from review.admin import users
from review.core.taxonomy import load_taxonomy
from review.jobs import catalog, queue
from review.policy import inforce, signoff
from review.thresholds import signing
from storage.db import make_engine, read_session
from tests.helpers.browser import chromium_page, streamlit_server, wait_idle
from tests.helpers.haproxy import Proxy, haproxy
from tests.helpers.paths import ROOT
from tests.helpers.team import ADA, CHEN, PAULA, RAVI, demo_database, person_on, wait_for

pytestmark = [
    pytest.mark.browser,
    pytest.mark.xdist_group("team-deployment"),
    pytest.mark.timeout(1800),
]

#: traces in the import a worker runs (a few seconds of work, about 3 MB to upload)
IMPORTED = 2_000
TIMEOUT = 60_000
#: the cookie every app server signs with (deploy/workbench.env): the same on all of them
COOKIE_SECRET = "team-deployment-test-cookie-secret-0123456789"
#: the sign-off record's key, the same on every server and worker (deploy/workbench.env): a
#: signature made on one server verifies on the other only so
SIGNING_KEY = "team-deployment-test-signing-key-0123456789"
# How many times the journey runs (`make soak` runs it more: WORKBENCH_TEAM_ROUNDS)
ROUNDS = int(os.environ.get("WORKBENCH_TEAM_ROUNDS", "1"))


@dataclass(frozen=True)
class Team:
    """The running deployment: the database, the proxy, the people's user ids."""

    url: str
    proxy: Proxy
    ids: dict[str, int]
    worker_log: Path


def _env_file_names() -> set[str]:
    """The settings deploy/workbench.env gives every process (set or commented out)."""
    text = (ROOT / "deploy" / "workbench.env").read_text(encoding="utf-8")
    return set(re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", text, re.M))


def _ids(url: str) -> dict[str, int]:
    eng = make_engine(url)
    try:
        out = {}
        for email in (PAULA, CHEN, RAVI, ADA):
            row = users.get_by_email(eng, email)
            assert row is not None
            out[email] = row.id
        return out
    finally:
        eng.dispose()


@contextlib.contextmanager
def _worker(env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """One `workbench worker`, stopped (then killed) after."""
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "review.cli.main", "worker", "--poll", "0.5", "--name", "w1"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.terminate()  # the second SIGTERM stops at once, not after the running job
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def team(pg_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    tmp = tmp_path_factory.mktemp("team")
    url = demo_database(pg_server)
    # the settings deploy/workbench.env says every process shares (test values; no secrets
    # file, so local mode: the browsers say who acts with ?as=)
    shared = {
        "WORKBENCH_DATABASE_URL": url,
        "WORKBENCH_JOBS": "workers",
        "WORKBENCH_SIGNING_KEY": SIGNING_KEY,
        "WORKBENCH_POLICIES_DIR": str(ROOT / "policies"),
        "STREAMLIT_SERVER_COOKIE_SECRET": COOKIE_SECRET,
        "STREAMLIT_SERVER_ENABLE_XSRF_PROTECTION": "true",
        "STREAMLIT_SERVER_ENABLE_CORS": "true",
        "STREAMLIT_SERVER_ALLOWED_HOSTS": "127.0.0.1",
    }
    assert set(shared) <= _env_file_names()
    # the deployment takes its key once, before anything runs (README: adopt-signing-key)
    adopted = subprocess.run(
        [sys.executable, "-m", "review.cli.main", "adopt-signing-key", "--yes"],
        cwd=ROOT,
        env=dict(os.environ, **shared),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert adopted.returncode == 0, adopted.stdout + adopted.stderr
    with contextlib.ExitStack() as stack:
        # every process gets the same shared settings (deploy/workbench.env)
        worker_log = tmp / "worker.log"
        stack.enter_context(_worker(dict(os.environ, **shared), worker_log))
        one = stack.enter_context(streamlit_server(ROOT / "app.py", tmp, **shared))
        two = stack.enter_context(streamlit_server(ROOT / "app.py", tmp, **shared))
        apps = [b.removeprefix("http://") for b in (one, two)]
        proxy = stack.enter_context(haproxy(apps, tmp))
        yield Team(url, proxy, _ids(url), worker_log)


@pytest.fixture(scope="module")
def browser(team: Team) -> Iterator[Browser]:
    with chromium_page() as page:
        browser = page.context.browser
        assert browser is not None
        yield browser


def _connected(proxy: Proxy, server: str) -> bool:
    """Whether haproxy holds an open session (a browser's WebSocket) to ``server``."""
    return int(proxy.servers()[server]["scur"] or 0) >= 1


def _propose(page: Page, team: Team) -> int:
    """The product owner proposes refuse_below 0.6 (it fails release targets); its number."""
    page.goto(f"{team.proxy.base}/thresholds?as={team.ids[PAULA]}")
    wait_idle(page)
    expect(
        page.get_by_text("Nothing is proposed: the sliders are at the thresholds")
    ).to_be_visible(timeout=TIMEOUT)
    thumb = page.get_by_role("slider").first
    thumb.focus()
    for _ in range(40):  # 0.55 -> 0.60 in steps of 0.005, by keyboard
        value = float(thumb.input_value())
        if abs(value - 0.6) < 1e-9:
            break
        thumb.press("ArrowRight" if value < 0.6 else "ArrowLeft")
        wait_idle(page)
    expect(thumb).to_have_value("0.6", timeout=TIMEOUT)
    page.get_by_label("Rationale (goes into the change record)").fill(
        "Fewer unsupported answers on plan questions, at a cost in coverage."
    )
    page.get_by_role("button", name="Propose for sign-off").click()
    wait_idle(page)
    done = page.get_by_text(re.compile(r"Proposed as version \d+"))
    expect(done).to_be_visible(timeout=TIMEOUT)
    found = re.search(r"Proposed as version (\d+)", done.inner_text())
    assert found is not None
    return int(found.group(1))


def _sign(page: Page, team: Team, n: int) -> None:
    """Compliance finds version ``n`` waiting on their Overview and approves it."""
    page.goto(f"{team.proxy.base}/?as={team.ids[CHEN]}")
    wait_idle(page)
    link = page.get_by_role("link", name=f"Open Thresholds: version {n} on the Sign-off tab")
    expect(link).to_be_visible(timeout=TIMEOUT)
    link.click()
    wait_idle(page)
    expect(page.get_by_role("tab", name="Sign-off")).to_have_attribute(
        "aria-selected", "true", timeout=TIMEOUT
    )
    item = page.locator(f".st-key-thr_proposal_{n}")
    item.get_by_label(re.compile(r"^Reason")).fill("Compliance accepts the lower coverage.")
    item.get_by_text("I approve this change although it fails these targets").click()
    item.get_by_role("button", name="Approve").click()
    wait_idle(page)
    expect(
        page.get_by_text(f"Version {n} approved as Compliance; it still needs: Product owner.")
    ).to_be_visible(timeout=TIMEOUT)


def _sees_signature(page: Page, team: Team, n: int) -> None:
    """The product owner, on their server, sees compliance's signature on their proposal."""
    page.goto(f"{team.proxy.base}/?as={team.ids[PAULA]}")
    wait_idle(page)
    expect(
        page.get_by_text(f"Your proposal v{n} (threshold change) waits for product owner.")
    ).to_be_visible(timeout=TIMEOUT)
    page.goto(f"{team.proxy.base}/thresholds?as={team.ids[PAULA]}&tab=signoff&version={n}")
    wait_idle(page)
    item = page.locator(f".st-key-thr_proposal_{n}")
    expect(
        item.get_by_text(re.compile(r"signatures so far: Compliance approve \(Chen Li\)"))
    ).to_be_visible(timeout=TIMEOUT)


def _withdraw(team: Team, n: int) -> None:
    """Reject version ``n`` as the other product owner, so the next round proposes again."""
    eng = make_engine(team.url)
    try:
        omar = users.to_actor(users.get_by_email(eng, "omar.haddad@brightwave.example"))  # type: ignore[arg-type]
        v = next(v for v in signoff.versions(eng, inforce.KIND) if v.number == n)
        signing.sign_thresholds(eng, omar, load_taxonomy(), v.id, "reject", note="Next round.")
    finally:
        eng.dispose()


def test_two_people_on_two_servers_sign_off_one_change(
    team: Team, browser: Browser, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_SIGNING_KEY", SIGNING_KEY)  # this process checks and signs too
    with person_on(browser, team.proxy, "app1") as paula:
        paula.goto(f"{team.proxy.base}/?as={team.ids[PAULA]}")
        wait_idle(paula)
        wait_for("the product owner's WebSocket on app1", lambda: _connected(team.proxy, "app1"))
        # local mode (no [auth]) behind the proxy: every page says anyone can act as anyone
        expect(
            paula.get_by_text("open to the network in local mode, through a reverse proxy")
        ).to_be_visible(timeout=TIMEOUT)
        with person_on(browser, team.proxy, "app2") as chen:
            chen.goto(f"{team.proxy.base}/?as={team.ids[CHEN]}")
            wait_idle(chen)
            wait_for("compliance's WebSocket on app2", lambda: _connected(team.proxy, "app2"))
            for round_no in range(ROUNDS):
                n = _propose(paula, team)
                _sign(chen, team, n)
                _sees_signature(paula, team, n)
                if round_no + 1 < ROUNDS:
                    _withdraw(team, n)
    eng = make_engine(team.url)
    try:
        newest = signoff.versions(eng, inforce.KIND)[0]
        assert newest.author == PAULA and newest.status == "pending"
        assert [(s.signer, s.role) for s in newest.signatures] == [(CHEN, "compliance")]
        assert signoff.verify_chain(eng) == []
        # the record is keyed: a process without the deployment's key cannot check it
        monkeypatch.delenv("WORKBENCH_SIGNING_KEY")
        assert signoff.verify_chain(eng) != []
    finally:
        eng.dispose()


def test_a_server_taken_out_sends_its_people_to_the_other_as_themselves(
    team: Team, browser: Browser
) -> None:
    """What a rolling restart does to a person (deploy/README.md, Upgrading): app1 is taken
    out of haproxy's rotation and its connections closed; the browser reconnects through the
    proxy to app2, which has never seen it, and acts as the same person on the same page (the
    address's ``?as=`` and the browser's ``wb_acting`` cookie, nothing of app1's memory)."""
    proxy = team.proxy
    with person_on(browser, proxy, "app1", stays=False) as page:
        page.goto(f"{proxy.base}/thresholds?as={team.ids[CHEN]}")
        wait_idle(page)
        expect(page.get_by_role("heading", name="Thresholds", exact=True)).to_be_visible(
            timeout=TIMEOUT
        )
        wait_for("a WebSocket on app1", lambda: _connected(proxy, "app1"))
        before = int(proxy.servers()["app2"]["stot"] or 0)
        try:
            assert proxy.command("set server workbench_app/app1 state maint").strip() == ""
            proxy.command("shutdown sessions server workbench_app/app1")
            wait_for(
                "the browser's new connection on app2",
                lambda: (
                    int(proxy.servers()["app2"]["stot"] or 0) > before and _connected(proxy, "app2")
                ),
            )
            wait_idle(page)
            expect(page.get_by_role("heading", name="Thresholds", exact=True)).to_be_visible(
                timeout=TIMEOUT
            )
            expect(page.get_by_role("combobox", name="Acting as")).to_match_aria_snapshot(
                '- combobox "Acting as": Chen Li · compliance', timeout=TIMEOUT
            )
            expect(page.get_by_text("Who is working?")).to_have_count(0)
        finally:
            proxy.command("set server workbench_app/app1 state ready")


def _trace_file(count: int) -> bytes:
    """``count`` canonical traces: the sample's traces again under new ids."""
    sample = [
        json.loads(line)
        for line in (ROOT / "tests" / "data" / "traces" / "canonical.jsonl")
        .read_text()
        .splitlines()
        if line.strip()
    ]
    out = []
    for i in range(count):
        trace = dict(sample[i % len(sample)], trace_id=f"team-{i:06d}")
        out.append(json.dumps(trace))
    return ("\n".join(out) + "\n").encode("utf-8")


def test_an_import_started_on_one_server_is_watched_to_its_end_on_the_other(
    team: Team, browser: Browser
) -> None:
    """A reviewer uploads a trace file through server 1 (the upload goes to the server that
    holds the page: the sticky cookie); with WORKBENCH_JOBS=workers neither server runs it, the
    worker does; an admin on server 2 opens the job's address and watches it end there."""
    assert "trace_import" in catalog.kinds.REGISTRY  # what the worker and the pages know
    proxy = team.proxy
    with person_on(browser, proxy, "app1") as ravi, person_on(browser, proxy, "app2") as ada:
        ravi.goto(f"{proxy.base}/traces?as={team.ids[RAVI]}")
        wait_idle(ravi)
        # the demo has traces: the import form is folded away under its expander
        ravi.get_by_text("Import traces", exact=True).first.click()
        ravi.locator("input[type='file']").set_input_files(
            files=[
                FilePayload(
                    name="team.jsonl", mimeType="application/jsonl", buffer=_trace_file(IMPORTED)
                )
            ]
        )
        expect(ravi.get_by_text("team.jsonl", exact=True)).to_be_visible(timeout=TIMEOUT)
        ravi.get_by_role("button", name="Import traces").click()
        expect(ravi).to_have_url(re.compile(r"[?&]job=\d+"), timeout=TIMEOUT)
        found = re.search(r"[?&]job=(\d+)", ravi.url)
        assert found is not None
        job_id = int(found.group(1))

        ada.goto(f"{proxy.base}/jobs?as={team.ids[ADA]}&job={job_id}")
        wait_idle(ada)
        expect(ada.get_by_text("Import finished.")).to_be_visible(timeout=TIMEOUT)
        expect(ada.get_by_text(f"team.jsonl: {IMPORTED:,} traces added")).to_be_visible(
            timeout=TIMEOUT
        )
        # and on server 1, where it started, without a reload
        expect(ravi.get_by_text("Import finished.")).to_be_visible(timeout=TIMEOUT)
    eng = make_engine(team.url)
    try:
        with read_session(eng) as s:
            importer = users.to_actor(users.get_by_email(eng, RAVI))  # type: ignore[arg-type]
            job = queue.get(s, importer, job_id)
            assert job is not None and job.status == "done"
            assert job.worker == "w1", job.worker  # the worker ran it, not a page
            n = s.scalar(text("SELECT count(*) FROM traces WHERE trace_id LIKE 'team-%'"))
        assert n == IMPORTED
    finally:
        eng.dispose()
