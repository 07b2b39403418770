"""Speed as the user feels it: every page and the common interactions, timed in a real browser.

    .venv/bin/python benchmarks/browser.py --workdir DIR [--pg-server] [--repeat 3]
                                           [--record [PATH]] [--compare PATH] [--only WORDS]
    .venv/bin/python benchmarks/browser.py --url sqlite:////tmp/demo.db      # any database
    .venv/bin/python benchmarks/browser.py --table RECORD [RECORD ...]

``--workdir DIR`` is the folder of a database built by ``benchmarks/scale.py --workdir DIR
--keep`` (its ``scale.db``, or with ``--pg-server`` the PostgreSQL cluster kept in ``DIR/pg``,
started for the run and stopped after it). The app is started as ``make run`` starts it
(``serve.py``) and driven by Playwright on Debian's chromium, one browser context per person,
signed in with a ``?as=`` link as the person who does that work (names from the demo, which
scale.py's database holds).

What is timed, each the median of ``--repeat`` tries:

- **every page's first view** (a new browser tab opening the page's address, after one untimed
  visit that warms the server's caches and the browser's copy of Streamlit's static files: it
  includes starting Streamlit's frontend), the same page **reached from the sidebar** (from
  another page of the menu in the open tab, as a person moves between pages while working) and
  its **rerun** (the ``r`` key, Streamlit's own rerun);
- **the common interactions**: a decision key and a submit on Label, adjudicating an item,
  creating an audit plan, drawing it, taking a trace from the queue, a claim key and saving a
  verdict, a step of the Thresholds slider, replaying a proposal, proposing and signing it,
  picking a run and comparing two, looking a trace up by id, a text search, a filter change,
  and opening and exporting a monthly review (see ``steps``). The steps that write (a label,
  an adjudication, a plan, a verdict, a proposal and its sign-off, a review) add those few rows
  to the database on every run.

For each: the **wall time** from the action (or the navigation) until Streamlit reports that
the script run finished and no other run followed within a quiet spell (the app's own
``data-test-script-state``, watched in the page by a MutationObserver), the **server's CPU**
(the serve.py process: on SQLite the SQL runs in it), the **database server's CPU** (on
PostgreSQL: the postmaster and its backends) and **the browser's CPU** (every chromium
process). Each is printed with its ratio to the reference measured in the same run: the same
measurement on a minimal Streamlit app (two pages of a title and a button) served the same way:
first view for first views, a switch from its sidebar for the sidebar, rerun for the rest. A
machine busy with other work slows a figure and its reference alike, so runs are compared by
that ratio: every run first prints the
regressions against ``benchmarks/recorded/browser-ENGINE.json`` (``--record`` writes it), then
the improvements, then the table with each row's target and whether it is met: every page's
first view and every interaction within 1 s of wall time, and keystroke-level actions (a
decision or claim key, a slider step, a filter change) within 0.3 s of CPU (the server's and
the database's together). Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import figures  # noqa: E402
from benchmarks.proccpu import TreeCpu, descendants, postmaster_pid  # noqa: E402
from tests.helpers.browser import CHROMIUM_ARGS  # noqa: E402  (the browser tests' flags)

__all__ = ["Measure", "Step", "main", "render_engines", "steps"]

REFERENCE_APP = ROOT / "benchmarks" / "apps" / "reference.py"
WALL_TARGET = figures.target_s(1.0)
KEY_TARGET = figures.Target("max_s", 1.0, "≤ 1 s; CPU ≤ 0.3 s", cpu_value=0.3)
QUIET_MS = 800  # no run started this long after the last one ended: the page has settled
FIRST_VIEW_QUIET_MS = 1500  # a first view may rerun once its identity script reports back
TIMEOUT_MS = 90_000

ADMIN = "ada.admin@brightwave.example"
ANNOTATOR = "ines.duarte@brightwave.example"
REVIEWER = "ravi.menon@brightwave.example"
OWNER = "omar.haddad@brightwave.example"
COMPLIANCE = "chen.li@brightwave.example"


# Logs, with the page's clock (performance.now()), every change of Streamlit's script state
# and every message from the server: a fragment's rerun (a decision key on Label) leaves the
# app's script state alone, so the messages of the run are what say it happened and ended.
WATCH_RUNS = """
(() => {
  window.__wbRuns = [];
  window.__wbMsgs = [];
  const log = (s) => window.__wbRuns.push([performance.now(), s]);
  const Socket = window.WebSocket;
  window.WebSocket = class extends Socket {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', () => window.__wbMsgs.push(performance.now()));
    }
  };
  const watch = () => new MutationObserver((changes) => {
    for (const c of changes) log(c.target.getAttribute('data-test-script-state'));
  }).observe(document.documentElement,
             {attributes: true, subtree: true, attributeFilter: ['data-test-script-state']});
  if (document.documentElement) watch(); else document.addEventListener('DOMContentLoaded', watch);
})();
"""

MARK = "() => { window.__wbRuns = []; window.__wbMsgs = []; return performance.now(); }"

# True once a run was asked for or started, or the server sent something, after the mark, no
# run is going on, and nothing has happened for ``quiet`` ms. (A fast run may go from
# 'rerunRequested' to 'notRunning' with no 'running' drawn between.)
SETTLED = """(quiet) => {
  const runs = window.__wbRuns || [];
  const msgs = window.__wbMsgs || [];
  if (!msgs.length && !runs.some((r) => r[1] === 'running' || r[1] === 'rerunRequested')) {
    return false;
  }
  const app = document.querySelector("[data-testid='stApp']");
  if (!app || app.getAttribute('data-test-script-state') === 'running') return false;
  const last = Math.max(runs.length ? runs[runs.length - 1][0] : 0,
                        msgs.length ? msgs[msgs.length - 1] : 0);
  return performance.now() - last >= quiet;
}"""

# When the work ended: the last state change out of a run, or the last message, if later.
ENDED = """() => {
  const runs = (window.__wbRuns || [])
    .filter((r) => r[1] !== 'running' && r[1] !== 'rerunRequested');
  const msgs = window.__wbMsgs || [];
  return Math.max(runs.length ? runs[runs.length - 1][0] : 0,
                  msgs.length ? msgs[msgs.length - 1] : 0);
}"""


# ---------------------------------------------------------------------------------------
# The app and the browser


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve(script: Path, env_extra: dict[str, str], log: Path) -> Iterator[tuple[str, int]]:
    """The app (serve.py for the workbench, ``streamlit run`` otherwise) on a free port;
    yields (base URL, server pid)."""
    env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false", **env_extra)
    launch = (
        [sys.executable, str(ROOT / "serve.py")]
        if script.name == "app.py"
        else [sys.executable, "-m", "streamlit", "run", str(script)]
    )
    port = _free_port()
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*launch, *_SERVER_FLAGS, "--server.port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if _healthy(base):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the app did not start: {log.read_text()[-2000:]}")
            time.sleep(0.3)
        yield base, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


_SERVER_FLAGS = ["--server.headless", "true", "--server.fileWatcherType", "none"]


def _healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(base + "/_stcore/health", timeout=2) as r:
            return bool(r.read().strip() == b"ok")
    except OSError:
        return False


@dataclasses.dataclass
class Measure:
    """One timed try: wall seconds, and CPU seconds of the server, database and browser."""

    wall_s: float
    server_cpu_s: float | None
    db_cpu_s: float | None
    browser_cpu_s: float | None


class Meter:
    """Reads the CPU of the app server, the database server and the browser around an action,
    and the page's own log of script runs for its wall time."""

    def __init__(self, server: TreeCpu, db: TreeCpu, browser: TreeCpu) -> None:
        self.trees = (server, db, browser)

    def _cpu(self) -> list[float | None]:
        return [t.read() for t in self.trees]

    def action(
        self, pg: Any, act: Callable[[], None], quiet_ms: int = QUIET_MS, timeout_ms: int = 0
    ) -> Measure:
        """Time ``act`` (a click or a key) until the run it starts has finished and settled;
        an action that starts no run within ``timeout_ms`` (default TIMEOUT_MS) raises."""
        t0 = float(pg.evaluate(MARK))
        before = self._cpu()
        act()
        end = self._settle(pg, quiet_ms, timeout_ms or TIMEOUT_MS)
        return self._measure((end - t0) / 1000, before)

    def navigation(self, pg: Any, url: str) -> Measure:
        """Time opening ``url`` in ``pg`` from the start of the navigation (the page's clock
        starts there) until its runs have settled."""
        before = self._cpu()
        pg.goto(url)
        end = self._settle(pg, FIRST_VIEW_QUIET_MS, TIMEOUT_MS)
        return self._measure(end / 1000, before)

    def _settle(self, pg: Any, quiet_ms: int, timeout_ms: int) -> float:
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        try:
            pg.wait_for_function(SETTLED, arg=quiet_ms, timeout=timeout_ms, polling=50)
        except PlaywrightTimeout:
            runs = pg.evaluate("window.__wbRuns || []")
            raise RuntimeError(
                f"no script run settled within {timeout_ms / 1000:.0f} s; states seen: {runs}"
            ) from None
        return float(pg.evaluate(ENDED))

    def _measure(self, wall: float, before: list[float | None]) -> Measure:
        after = self._cpu()
        used = [
            None if a is None or b is None else max(0.0, a - b)
            for a, b in zip(after, before, strict=True)
        ]
        return Measure(wall, used[0], used[1], used[2])


def _median(values: Sequence[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.median(got) if got else None


# ---------------------------------------------------------------------------------------
# What is timed


@dataclasses.dataclass(frozen=True)
class Step:
    """One timed interaction: ``act`` does it (a click or a key) and the time runs until the
    script run it started has settled; with ``runs`` false the action makes no script run (a
    download) and ``act`` itself waits for what it does. ``check`` (untimed) says whether it
    did what it should (an error text, or ""). ``keystroke`` steps have the CPU target."""

    key: str
    page: str
    what: str
    act: Callable[[Any], None]
    keystroke: bool = False
    check: Callable[[Any], str] | None = None
    runs: bool = True
    before: Callable[[Any], None] | None = None  # untimed, right before ``act``


@dataclasses.dataclass(frozen=True)
class Journey:
    """A person's short piece of work on one page: opened untimed in a new tab (address
    ``path``, signed in as ``user``), then ``steps`` in order, each timed. A journey is repeated
    whole, so each try starts where a person would (the next case, a new plan, ...)."""

    name: str
    page: str
    path: str
    user: str
    steps: tuple[Step, ...]
    prepare: Callable[[Any, int], None] | None = None  # untimed, after opening; gets the try


def _rerun_key(pg: Any) -> Callable[[], None]:
    """Streamlit's own rerun: the ``r`` key on the page."""
    return lambda: pg.locator("body").press("r")


def _press(key: str) -> Callable[[Any], None]:
    def act(pg: Any) -> None:
        pg.locator("body").press(key)

    return act


def _click(name: str | re.Pattern[str], role: str = "button") -> Callable[[Any], None]:
    def act(pg: Any) -> None:
        pg.get_by_role(role, name=name).first.click()

    return act


def _shows(text: str | re.Pattern[str]) -> Callable[[Any], str]:
    def check(pg: Any) -> str:
        found = pg.get_by_text(text).count()
        return "" if found else f"the page did not show {text!r} afterwards"

    return check


def _pick(label: str, option: int = 1) -> Callable[[Any], None]:
    """Open the select box ``label`` and take its ``option``-th entry (0: the first)."""

    def act(pg: Any) -> None:
        pg.get_by_role("combobox", name=label).first.click()
        pg.get_by_role("option").nth(option).click()

    return act


def _pick_named(label: str, option: str) -> Callable[[Any], None]:
    """Open the picker ``label`` and take the entry ``option`` (a multiselect's first entry
    may be "Select all")."""

    def act(pg: Any) -> None:
        pg.get_by_role("combobox", name=label).first.click()
        pg.get_by_role("option", name=option, exact=True).click()

    return act


def _search(text: str) -> Callable[[Any], None]:
    def act(pg: Any) -> None:
        box = pg.get_by_role("textbox", name="Search question, answer or trace id")
        box.fill(text)
        box.press("Enter")

    return act


def _slider_step(pg: Any) -> None:
    thumb = pg.get_by_role("slider").first
    thumb.focus()
    thumb.press("ArrowRight")


def _undecided_case(pg: Any) -> None:
    """Skip (S) cases that already hold Answer from an earlier try, so the key 1 changes the
    choice (a key on the chosen decision starts no run)."""
    for _ in range(5):
        if not pg.get_by_role("button", name=re.compile("^Answer"), pressed=True).count():
            return
        pg.evaluate(MARK)
        pg.locator("body").press("s")
        _wait_idle(pg)


def _label_keys() -> Journey:
    return Journey(
        "label", "Label", "label", ANNOTATOR,
        (
            Step("label.next", "Label", "next case (N)", _press("n"), keystroke=True),
            Step(
                "label.key", "Label", "decision key (1: Answer)", _press("1"), keystroke=True,
                before=_undecided_case,
            ),
            Step(
                "label.submit", "Label", "submit (Ctrl+Enter)", _press("Control+Enter"),
                check=_shows(re.compile("Saved your label")),
            ),
        ),
    )  # fmt: skip


def _adjudicate() -> Journey:
    return Journey(
        "adjudicate", "Adjudicate", "adjudicate", REVIEWER,
        (
            Step(
                "adjudicate.set", "Adjudicate", "set the gold label", _click("Set gold label"),
                check=_shows(re.compile("[Gg]old label")),
            ),
        ),
    )  # fmt: skip


def _audit_plan(pg: Any, attempt: int) -> None:
    if not pg.get_by_label("Plan name").is_visible():
        pg.get_by_text("New sampling plan").click()
    pg.get_by_label("Plan name").fill(
        f"Browser benchmark {dt.datetime.now(dt.UTC):%H%M%S} #{attempt}"
    )
    pg.get_by_label("Sample size").fill("400")


def _audit() -> Journey:
    return Journey(
        "audit", "Audit", "audit", REVIEWER,
        (
            Step(
                "audit.create", "Audit", "create a plan (counts the population)",
                _click("Create plan"), check=_shows(re.compile("created")),
            ),
            Step(
                "audit.draw", "Audit", "draw 400 traces", _click("Draw the sample"),
                check=_shows(re.compile(r"Drew \d+ traces")),
            ),
            Step("audit.next", "Audit", "next trace from my queue", _next_trace),
            Step(
                "audit.verdict", "Audit", "claim key (1: Supported) or a refusal's verdict",
                _judge, keystroke=True,
            ),
            Step(
                "audit.save", "Audit", "save the verdict", _save_verdict,
                check=_shows(re.compile("Saved your verdict")), before=_judge_the_rest,
            ),
        ),
        prepare=_audit_plan,
    )  # fmt: skip


def _next_trace(pg: Any) -> None:
    pg.get_by_role("tab", name="My queue").click()
    pg.get_by_role("button", name="Next trace").first.click()


def _judge(pg: Any) -> None:
    """An answer is judged claim by claim (the key 1 marks the open claim supported); a
    refusal gets its verdict."""
    if pg.get_by_role("button", name=re.compile("^Supported")).count():
        pg.locator("body").press("1")
    else:
        pg.get_by_text("False refusal (I expected an answer)").click()


def _judge_the_rest(pg: Any) -> None:
    """Every claim still unjudged marked supported (1, then J for the next claim); a
    refusal's failure stage named."""
    for _ in range(40):
        told = pg.get_by_text(re.compile(r"\d+ of \d+ claims supported")).first
        if not told.count():
            break
        done, total = (int(x) for x in re.findall(r"(\d+) of (\d+)", told.inner_text())[0])
        if done >= total:
            break
        unjudged = pg.get_by_text("(not judged)").count()
        pg.evaluate(MARK)
        pg.locator("body").press("1" if unjudged else "j")
        _wait_idle(pg)
    verdicts = pg.get_by_role("radiogroup", name="Verdict")
    if verdicts.count() and not verdicts.get_by_role("radio", checked=True).count():
        pg.evaluate(MARK)  # an answer judged supported claim by claim: a supported answer
        pg.get_by_text(re.compile(r"^(\w · )?Supported answer$")).first.click()
        _wait_idle(pg)
        return
    stage = pg.get_by_role("button", name=re.compile("Answer policy too strict"))  # a pill
    if stage.count():
        pg.evaluate(MARK)
        stage.first.click()
        _wait_idle(pg)


def _save_verdict(pg: Any) -> None:
    pg.get_by_role("button", name=re.compile("Save verdict")).first.click()


def _thresholds() -> Journey:
    return Journey(
        "thresholds", "Thresholds", "thresholds", OWNER,
        (
            Step("thresholds.step", "Thresholds", "slider step", _slider_step, keystroke=True),
            Step(
                "thresholds.replay", "Thresholds", "replay the proposal on every trace",
                _click("Replay the proposed thresholds on the traces"),
            ),
            Step(
                "thresholds.propose", "Thresholds", "propose for sign-off", _propose,
                check=_shows(re.compile(r"Proposed as version \d+")),
            ),
        ),
    )  # fmt: skip


def _propose(pg: Any) -> None:
    pg.get_by_label("Rationale (goes into the change record)").fill("Browser benchmark.")
    pg.get_by_role("button", name="Propose for sign-off").click()


def _unsigned_proposal(pg: Any) -> Any:
    """The first pending proposal this person has not signed yet (it asks for a reason)."""
    return (
        pg.locator("[class*='st-key-thr_proposal_']")
        .filter(has=pg.get_by_label(re.compile(r"^Reason")))
        .first
    )


def _sign_prepare(pg: Any, attempt: int) -> None:
    item = _unsigned_proposal(pg)
    item.get_by_label(re.compile(r"^Reason")).first.fill("Browser benchmark: compliance signs.")
    sure = item.get_by_text("I approve this change although it fails these targets")
    if sure.count():
        sure.first.click()


def _approve(pg: Any) -> None:
    _unsigned_proposal(pg).get_by_role("button", name="Approve").first.click()


def _sign() -> Journey:
    return Journey(
        "sign", "Thresholds", "thresholds?tab=signoff", COMPLIANCE,
        (
            Step(
                "thresholds.sign", "Thresholds", "sign a proposal (compliance approves)",
                _approve,
                check=_shows(re.compile(r"approved as compliance", re.IGNORECASE)),
            ),
        ),
        prepare=_sign_prepare,
    )  # fmt: skip


def _runs() -> Journey:
    return Journey(
        "runs", "Runs", "runs", OWNER,
        (
            Step("runs.pick", "Runs", "pick another run", _pick("Run", 1)),
            Step("runs.compare", "Runs", "compare two runs (pick the second)", _compare),
        ),
    )  # fmt: skip


def _compare(pg: Any) -> None:
    """On the Compare tab, Run B set to a third run (A and B start as the two newest)."""
    pg.get_by_role("tab", name="Compare two runs").click()
    pg.get_by_role("combobox", name="Run B (after)").first.click()
    options = pg.get_by_role("option")
    options.nth(2 if options.count() > 2 else 1).click()


def _traces() -> Journey:
    return Journey(
        "traces", "Traces", "traces", REVIEWER,
        (
            Step("traces.id", "Traces", "look a trace up by id", _search_first_id),
            Step("traces.search", "Traces", 'text search "refund"', _search("refund")),
            Step("traces.rare", "Traces", 'text search "zzqx" (in no trace)', _search("zzqx")),
            Step("traces.short", "Traces", 'text search "qz" (2 letters, none)', _search("qz")),
            Step("traces.clear", "Traces", "clear the filters", _click("Clear filters")),
            Step(
                "traces.filter", "Traces", "filter: one decision (Abstain)",
                _pick_named("Decision", "Abstain"),
                keystroke=True,
            ),
        ),
    )  # fmt: skip


def _search_first_id(pg: Any) -> None:
    # the id of the trace on the first row, read from the page's own table is not reachable
    # (a canvas grid): the benchmark looks up the id it read from the database instead
    _search(pg.context.benchmark_trace_id)(pg)


def _review() -> Journey:
    return Journey(
        "review", "Monthly review", "review", REVIEWER,
        (
            Step("review.open", "Monthly review", "open a month's review", _open_review),
            Step(
                "review.export", "Monthly review", "export the report (HTML download)",
                _export_report, runs=False,
            ),
        ),
    )  # fmt: skip


def _open_review(pg: Any) -> None:
    box = pg.get_by_role("textbox", name="Open the review of month (YYYY-MM)")
    box.fill(pg.context.benchmark_month)
    pg.get_by_role("button", name="Open review").click()


def _export_report(pg: Any) -> None:
    pg.get_by_role("tab", name="Report").click()
    with pg.expect_download(timeout=TIMEOUT_MS) as download:
        pg.get_by_role("button", name=re.compile("Download the report")).click()
    download.value.path()


def journeys() -> list[Journey]:
    return [
        _label_keys(), _adjudicate(), _audit(), _thresholds(), _sign(), _runs(), _traces(),
        _review(),
    ]  # fmt: skip


def steps() -> list[Step]:
    return [s for j in journeys() for s in j.steps]


def _wait_idle(pg: Any) -> None:
    pg.wait_for_function(SETTLED, arg=QUIET_MS, timeout=TIMEOUT_MS, polling=50)


# ---------------------------------------------------------------------------------------
# The run


@dataclasses.dataclass
class Context:
    """What a run needs beside the browser: the app's URL, the people's ids, the meters."""

    base: str
    people: dict[str, int]
    trace_id: str
    month: str


def _people_and_facts(url: str) -> tuple[dict[str, int], str, str]:
    """The demo people's ids by email, a trace id to look up, and a month with no review yet."""
    from sqlalchemy import text

    from storage.db import make_engine

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            people = {str(e): int(i) for i, e in conn.execute(text("SELECT id, email FROM users"))}
            trace_id = str(
                conn.scalar(text("SELECT trace_id FROM traces ORDER BY id DESC LIMIT 1")) or ""
            )
            months = {str(m) for (m,) in conn.execute(text("SELECT month FROM review_sessions"))}
    finally:
        engine.dispose()
    year = 2100
    while f"{year}-01" in months:
        year += 1
    return people, trace_id, f"{year}-01"


class Browser:
    """One chromium, one context per person (a person's own cookies), pages opened in them."""

    def __init__(self, playwright: Any, ctx: Context) -> None:
        chromium = shutil.which("chromium")
        if not chromium:
            raise SystemExit("Debian's chromium is required (apt-get install chromium)")
        self.browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        self.ctx = ctx
        self.contexts: dict[str, Any] = {}

    def page(self, user: str) -> Any:
        if user not in self.contexts:
            c = self.browser.new_context(viewport={"width": 1280, "height": 900})
            c.add_init_script(WATCH_RUNS)
            c.set_default_timeout(TIMEOUT_MS)
            c.benchmark_trace_id = self.ctx.trace_id
            c.benchmark_month = self.ctx.month
            self.contexts[user] = c
        return self.contexts[user].new_page()

    def url(self, path: str, user: str) -> str:
        sep = "&" if "?" in path else "?"
        who = self.ctx.people.get(user)
        return f"{self.ctx.base}/{path}" + (f"{sep}as={who}" if who is not None else "")

    def close(self) -> None:
        self.browser.close()


def _driver_pid() -> int | None:
    """Playwright's driver (a node process started by this one): chromium runs under it."""
    for pid in descendants(os.getpid()):
        with contextlib.suppress(OSError):
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"playwright" in cmd and b"node" in cmd:
                return pid
    return None


@dataclasses.dataclass
class Timed:
    key: str
    area: str
    what: str
    tries: list[Measure]
    target: figures.Target | None
    ref: str
    error: str = ""

    def figure(self) -> figures.Figure:
        ok = self.tries
        return figures.Figure(
            key=self.key,
            area=self.area,
            what=self.what,
            wall_s=_median([m.wall_s for m in ok]) if ok else None,
            cpu_s=_median([m.server_cpu_s for m in ok]) if ok else None,
            ref=self.ref,
            target=self.target,
            db_cpu_s=_median([m.db_cpu_s for m in ok]) if ok else None,
            browser_cpu_s=_median([m.browser_cpu_s for m in ok]) if ok else None,
            notes=f"median of {len(ok)}" if ok else "",
            error=self.error,
        )


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def time_views(
    br: Browser, meter: Meter, pages: Sequence[tuple[str, str, str]], repeat: int
) -> list[Timed]:
    """Each page's first view (a new tab) and rerun (the ``r`` key), ``repeat`` times after one
    untimed visit."""
    out: list[Timed] = []
    for area, path, user in pages:
        first = Timed(f"view.{path}", area, "first view", [], WALL_TARGET, "first view")
        switch = Timed(f"switch.{path}", area, "from the sidebar", [], WALL_TARGET, "switch")
        again = Timed(f"rerun.{path}", area, "rerun (r)", [], WALL_TARGET, "rerun")
        try:
            for attempt in range(repeat + 1):
                pg = br.page(user)
                m = meter.navigation(pg, br.url(path, user))
                r = meter.action(pg, _rerun_key(pg))
                # away to another page of the menu (untimed), then back from the sidebar
                meter.action(pg, sidebar_link(pg, path, away=True).click)
                s = meter.action(pg, sidebar_link(pg, path).click)
                pg.close()
                if attempt:  # the first visit warms the caches
                    first.tries.append(m)
                    again.tries.append(r)
                    switch.tries.append(s)
        except Exception as exc:  # a failed page is a figure with its error
            first.error = again.error = switch.error = (
                f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
            )
        log(
            f"  {area}: first view {_brief(first)}; from the sidebar {_brief(switch)}; "
            f"rerun {_brief(again)}"
        )
        out += [first, switch, again]
    return out


def sidebar_link(pg: Any, path: str, away: bool = False) -> Any:
    """The sidebar menu's link to the page at ``path`` (with ``away``: the first link to any
    other page), as a person clicks it: Streamlit switches pages in the open tab, without
    loading its frontend again."""
    links = pg.locator('[data-testid="stSidebarNav"] a')
    links.first.wait_for()
    for i in range(links.count()):
        link = links.nth(i)
        href = (link.get_attribute("href") or "").split("?")[0].rstrip("/")
        if href.endswith("/" + path) != away:
            return link
    raise RuntimeError(f"the sidebar has no link {'away from' if away else 'to'} {path!r}")


def time_journeys(br: Browser, meter: Meter, chosen: Sequence[Journey], repeat: int) -> list[Timed]:
    """Each journey ``repeat`` times (plus an untimed first try), its steps timed in order."""
    out: list[Timed] = []
    for j in chosen:
        timed = [
            Timed(s.key, s.page, s.what, [], KEY_TARGET if s.keystroke else WALL_TARGET, "rerun")
            for s in j.steps
        ]
        for attempt in range(repeat + 1):
            pg = br.page(j.user)
            current = timed[0]
            try:
                meter.navigation(pg, br.url(j.path, j.user))
                if j.prepare is not None:
                    j.prepare(pg, attempt)
                for s, t in zip(j.steps, timed, strict=True):
                    if t.error:
                        break
                    current = t
                    m = _time_step(meter, pg, s)
                    problem = s.check(pg) if s.check else ""
                    if problem:
                        t.error = problem
                        _snapshot(pg, t.key)
                        break
                    if attempt:
                        t.tries.append(m)
            except Exception as exc:  # the step that failed says why
                current.error = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
                _snapshot(pg, current.key)
                log(f"  {j.name}, {current.what}: {type(exc).__name__}: {str(exc)[:1500]}")
            finally:
                pg.close()
        for t in timed:
            log(f"  {t.area}: {t.what}: {_brief(t)}")
        out += timed
    return out


def _snapshot(pg: Any, key: str) -> None:
    """A screenshot of a failed step, for the person reading the log."""
    path = Path(tempfile.gettempdir()) / f"wb-browser-failed-{key}.png"
    with contextlib.suppress(Exception):
        pg.screenshot(path=str(path), full_page=True)
        log(f"  screenshot of the failed step: {path}")


def _time_step(meter: Meter, pg: Any, s: Step) -> Measure:
    if s.before is not None:
        s.before(pg)
    if s.runs:
        return meter.action(pg, lambda: s.act(pg))
    before = meter._cpu()
    t0 = time.perf_counter()
    s.act(pg)
    return meter._measure(time.perf_counter() - t0, before)


def _brief(t: Timed) -> str:
    if t.error:
        return f"failed: {t.error}"
    f = t.figure()
    return (
        f"{f.wall_s:.2f} s wall, server CPU {_num(f.cpu_s)}, database CPU {_num(f.db_cpu_s)}, "
        f"browser CPU {_num(f.browser_cpu_s)}"
        if f.wall_s is not None
        else "no figure"
    )


def _num(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f} s"


def time_reference(br: Browser, meter: Meter, base: str, repeat: int) -> list[figures.Reference]:
    """The minimal app's first view and rerun, measured like the workbench's pages."""
    first: list[Measure] = []
    again: list[Measure] = []
    switch: list[Measure] = []
    for attempt in range(repeat + 1):
        pg = br.browser.new_page()
        pg.add_init_script(WATCH_RUNS)
        m = meter.navigation(pg, base)
        r = meter.action(pg, _rerun_key(pg))
        meter.action(pg, sidebar_link(pg, "other").click)  # its second page, then back
        s = meter.action(pg, sidebar_link(pg, "other", away=True).click)
        pg.close()
        if attempt:
            first.append(m)
            again.append(r)
            switch.append(s)
    what = "the same measurement of a Streamlit app of two pages, each a title and a button"
    return [
        _reference("first view", f"{what}: first view (median of {repeat})", first),
        _reference("switch", f"{what}: from the sidebar (median of {repeat})", switch),
        _reference("rerun", f"{what}: rerun (r) (median of {repeat})", again),
    ]


def _reference(key: str, what: str, tries: list[Measure]) -> figures.Reference:
    return figures.Reference(
        key=key,
        what=what,
        wall_s=_median([m.wall_s for m in tries]),
        cpu_s=_median([m.server_cpu_s for m in tries]),
        browser_cpu_s=_median([m.browser_cpu_s for m in tries]),
    )


def page_table() -> list[tuple[str, str, str]]:
    """(title, url path, who opens it) of every page registered in app.py, in its order."""
    from benchmarks.scale import registered_pages

    out = []
    for path, title, url_path in registered_pages():
        user = ADMIN if "admin" in path else REVIEWER
        out.append((title, url_path, user))
    return out


# ---------------------------------------------------------------------------------------
# Report


def render_engines(records: Sequence[dict[str, Any]], sources: Sequence[str]) -> str:
    """Recorded runs (SQLite and PostgreSQL) side by side, one Markdown table: each figure's
    wall time with the CPU of the app server, the database server and the browser, its ratio
    to the run's reference, its target and whether each run meets it."""
    if not records:
        raise ValueError("no records to render")
    labels = [figures.engine_label(r) for r in records]
    lines = ["# Browser benchmark: " + " and ".join(labels), ""]
    for label, rec, src in zip(labels, records, sources, strict=True):
        m = rec.get("machine", {})
        sz = rec.get("sizes", {})
        lines.append(
            f"- **{label}** ({src}, recorded {rec.get('recorded_at', 'unknown')}): "
            f"{m.get('cpus', '?')} CPUs ({m.get('cpu', '?')}), {m.get('memory', '?')} RAM; "
            f"{m.get('database', m.get('sqlite', '?'))}; chromium {m.get('chromium', '?')}; "
            f"code {m.get('code', 'unknown')}; load average {m.get('load', '?')} at the start. "
            f"{sz.get('traces', 0):,} traces, {sz.get('cases', 0):,} cases, "
            f"{sz.get('labels', 0):,} labels."
        )
        for ref in figures.references_of(rec).values():
            lines.append(f"  - *{ref.key}*: {ref.what}: {_cell_of(ref)}")
    lines += [
        "",
        "Each cell: wall time until the run finished (app server CPU; database server CPU on "
        "PostgreSQL; browser CPU; ratio of wall time to the run's reference).",
        "",
        "| Page | What | Target | " + " | ".join(f"{label} | Met" for label in labels) + " |",
        "|---|---|---|" + "---:|---|" * len(labels),
    ]
    lines += figures.side_by_side_rows(records, _fig_cell, _met_cell)
    return "\n".join(lines) + "\n"


def _cell_of(f: figures.Figure | figures.Reference) -> str:
    if f.wall_s is None:
        return "n/a"
    parts = [f"server {_num(f.cpu_s)}"]
    if f.db_cpu_s is not None:
        parts.append(f"database {_num(f.db_cpu_s)}")
    parts.append(f"browser {_num(f.browser_cpu_s)}")
    return f"{f.wall_s:.2f} s (CPU: " + ", ".join(parts) + ")"


def _fig_cell(fig: figures.Figure | None, refs: dict[str, figures.Reference]) -> str:
    if fig is None:
        return "not run"
    if fig.error:
        return f"failed: {fig.error[:120]}"
    r = figures.ratio(fig, refs)
    cell = _cell_of(fig)
    return cell[:-1] + (f"; {r:.3g}× {fig.ref})" if r is not None else ")")


def _met_cell(fig: figures.Figure | None, refs: dict[str, figures.Reference]) -> str:
    if fig is None:
        return ""
    if fig.error:
        return "failed"
    m = figures.met(fig, refs)
    return "" if m is None else "yes" if m else "**no**"


def _machine(url: str) -> dict[str, str]:
    from benchmarks.scale import machine

    info = machine()
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        info["chromium"] = (
            subprocess.run(
                ["chromium", "--version"], capture_output=True, text=True, check=True, timeout=30
            )
            .stdout.strip()
            .removeprefix("Chromium ")
        )
    info["load"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    if url.startswith("postgresql"):
        from sqlalchemy import text

        from storage.db import make_engine

        engine = make_engine(url)
        try:
            with engine.connect() as conn:
                info["database"] = "PostgreSQL " + str(conn.scalar(text("SHOW server_version")))
        finally:
            engine.dispose()
    else:
        info["database"] = f"SQLite {info.get('sqlite', '?')}"
    return info


def _sizes(url: str) -> dict[str, int]:
    from sqlalchemy import text

    from storage.db import make_engine

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return {
                t: int(conn.scalar(text(f"SELECT COUNT(*) FROM {t}")) or 0)
                for t in ("traces", "cases", "labels")
            }
    finally:
        engine.dispose()


# ---------------------------------------------------------------------------------------
# Command line


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="Browser benchmark of the Abstention Workbench.")
    ap.add_argument("--workdir", help="folder of a database kept by benchmarks/scale.py --keep")
    ap.add_argument(
        "--pg-server", action="store_true", help="the PostgreSQL cluster kept in WORKDIR/pg"
    )
    ap.add_argument("--url", help="any workbench database (instead of --workdir)")
    ap.add_argument("--repeat", type=int, default=3, help="timed tries of each figure")
    ap.add_argument("--only", default="", help="comma list: only pages and journeys naming one")
    ap.add_argument("--record", nargs="?", const="", default=None, metavar="PATH")
    ap.add_argument("--compare", metavar="PATH")
    ap.add_argument("--table", nargs="+", metavar="RECORD")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "out"))
    return ap.parse_args(argv)


@contextlib.contextmanager
def database(args: argparse.Namespace) -> Iterator[tuple[str, int | None, dict[str, Any]]]:
    """(URL, postmaster pid or None, sizes the database was built for) of the run."""
    built: dict[str, Any] = {}
    if args.workdir:
        marker = Path(args.workdir) / "built.json"
        with contextlib.suppress(OSError, ValueError):
            built = json.loads(marker.read_text()).get("sizes", {})
    if args.pg_server:
        if not args.workdir:
            raise SystemExit("--pg-server needs --workdir (the folder scale.py kept)")
        from benchmarks.scale import start_pg_server

        folder = Path(args.workdir) / "pg"
        server, url = start_pg_server(folder, fresh=False)
        try:
            yield url, postmaster_pid(folder / "data"), built
        finally:
            server.stop()
    elif args.url:
        yield args.url, None, built
    elif args.workdir:
        yield f"sqlite:///{Path(args.workdir) / 'scale.db'}", None, built
    else:
        raise SystemExit("say which database: --workdir DIR [--pg-server] or --url URL")


def measure(
    args: argparse.Namespace,
    url: str,
    postmaster: int | None,
    people: dict[str, int],
    trace_id: str,
    month: str,
    words: list[str],
) -> tuple[list[figures.Reference], list[Timed]]:
    """The reference app and the workbench served side by side, one chromium driving both."""
    from playwright.sync_api import sync_playwright

    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="wb-browser-")))
        pw = stack.enter_context(sync_playwright())
        ref_base, ref_pid = stack.enter_context(serve(REFERENCE_APP, {}, tmp / "reference.log"))
        base, pid = stack.enter_context(
            serve(ROOT / "app.py", {"WORKBENCH_DATABASE_URL": url}, tmp / "app.log")
        )
        br = Browser(pw, Context(base, people, trace_id, month))
        stack.callback(br.close)
        browser_cpu = TreeCpu(_driver_pid())
        log("reference ...")
        refs = time_reference(
            br, Meter(TreeCpu(ref_pid), TreeCpu(None), browser_cpu), ref_base, args.repeat
        )
        meter = Meter(TreeCpu(pid), TreeCpu(postmaster), browser_cpu)
        pages = [p for p in page_table() if not words or any(w in p[1] for w in words)]
        chosen = [j for j in journeys() if not words or any(w in j.name for w in words)]
        log("pages ...")
        timed = time_views(br, meter, pages, args.repeat)
        log("interactions ...")
        timed += time_journeys(br, meter, chosen, args.repeat)
    return refs, timed


def main(argv: Sequence[str] | None = None) -> None:
    # stopped with SIGTERM, the run still stops the servers it started (finally blocks)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args = parse_args(argv)
    if args.table:
        recs = [figures.load_record(Path(p)) for p in args.table]
        print(render_engines(recs, args.table))
        return
    from storage.db import make_engine, migrate

    words = [w.strip() for w in args.only.split(",") if w.strip()]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with database(args) as (url, postmaster, built):
        engine = make_engine(url)
        migrate(engine)  # a database kept by an older commit: bring it to this schema
        engine.dispose()
        people, trace_id, month = _people_and_facts(url)
        info = _machine(url)
        sizes = _sizes(url)
        log(f"database {url}: {sizes}")
        refs, timed = measure(args, url, postmaster, people, trace_id, month, words)
    engine_name = "postgresql" if url.startswith("postgresql") else "sqlite"
    record = figures.make_record(
        engine=engine_name,
        machine=info,
        requested={"built": built, "repeat": args.repeat, "only": words},
        sizes=sizes,
        references=refs,
        figures=[t.figure() for t in timed],
        recorded_at=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    )
    recorded = Path(
        args.compare or ROOT / "benchmarks" / "recorded" / f"browser-{engine_name}.json"
    )
    report = []
    if recorded.exists():
        try:
            report.append(
                figures.render_comparison(record, figures.load_record(recorded), str(recorded))
            )
        except (OSError, ValueError, KeyError) as exc:
            report.append(f"## Regressions\n\n{recorded} could not be read: {exc}\n")
    else:
        report.append(f"## Regressions\n\nNo recorded run to compare with ({recorded}).\n")
    report.append(render_engines([record], [f"this run ({engine_name})"]))
    text_out = "\n".join(report)
    print(text_out)
    (out / f"browser-{engine_name}.md").write_text(text_out, encoding="utf-8")
    figures.save_record(out / f"browser-{engine_name}.json", record)
    if args.record is not None:
        path = (
            Path(args.record)
            if args.record
            else ROOT / "benchmarks" / "recorded" / f"browser-{engine_name}.json"
        )
        figures.save_record(path, record)
        log(f"recorded: {path}")


if __name__ == "__main__":
    main()
