"""Label Studio itself: its own validation accepts the workbench's labeling configuration and
the labels read back, and a live round trip (project, tasks, two annotators through the API,
JSON and JSON-MIN exports) reads back as submitted.

Label Studio lives in its own virtual environment (``make labelstudio-env`` creates
``.labelstudio-venv/`` from ``tools/labelstudio/requirements.txt``; ``WORKBENCH_LABEL_STUDIO``
names another ``label-studio`` executable). Without it these tests are skipped, except in CI
(``make test`` installs it first), where they fail.
"""

from __future__ import annotations

import io
import json
import os
import re
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from review.core.taxonomy import Taxonomy
from review.labels import labelstudio
from review.labels.external import Skipped
from tests.helpers.browser import chromium_page
from tests.helpers.labelstudio import check_exports, load_expected, sdk_validate
from tools import labelstudio_roundtrip as rt

DATA = Path(__file__).parent / "data" / "labelstudio"

#: one server per module, on one worker (``--dist loadgroup``); a start takes a minute of CPU
pytestmark = [pytest.mark.timeout(1800), pytest.mark.xdist_group("labelstudio")]


def _label_studio() -> str:
    exe = rt.label_studio_executable()
    if exe is None:
        msg = (
            "Label Studio is not installed: run `make labelstudio-env` "
            "(or set WORKBENCH_LABEL_STUDIO)"
        )
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return exe


def _python() -> str:
    """The Python of Label Studio's environment (it has label-studio-sdk)."""
    return str(Path(_label_studio()).with_name("python"))


def test_label_studio_accepts_the_labeling_configuration(tax: Taxonomy) -> None:
    done = sdk_validate(_python(), labelstudio.labeling_config(tax))
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    assert found["controls"] == sorted(labelstudio.CONTROLS)
    assert found["objects"] == sorted(["question", "claims", "identity", "documents", "case_key"])


def test_label_studio_refuses_a_broken_configuration(tax: Taxonomy) -> None:
    """The check is real: a control pointing at no object is refused."""
    broken = labelstudio.labeling_config(tax).replace('toName="question"', 'toName="nowhere"', 1)
    done = sdk_validate(_python(), broken)
    assert done.returncode != 0 and "nowhere" in done.stderr


def test_the_committed_exports_pass_label_studio_s_own_checks(tmp_path: Path) -> None:
    """Every task's data fits the configuration and every annotation's result is valid for
    it (choices among the configuration's), by label-studio-sdk; a bogus choice is caught."""
    config = (DATA / labelstudio.CONFIG_FILE).read_text("utf-8")
    for name in ("full.json", "full-emails.json"):
        done = sdk_validate(_python(), config, DATA / name)
        assert done.returncode == 0, done.stderr[-3000:]
        found = json.loads(done.stdout)
        assert found["bad_tasks"] == [] and found["bad_annotations"] == {}, name
    tasks = json.loads((DATA / "full.json").read_bytes())
    tasks[0]["annotations"][0]["result"][0]["value"]["choices"] = ["bogus"]
    (tmp_path / "bad.json").write_text(json.dumps(tasks))
    done = sdk_validate(_python(), config, tmp_path / "bad.json")
    assert list(json.loads(done.stdout)["bad_annotations"]) == [
        str(tasks[0]["annotations"][0]["id"])
    ]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[rt.Server]:
    """One Label Studio for the module (a start takes a minute of CPU)."""
    with rt.label_studio(_label_studio(), tmp_path_factory.mktemp("label-studio")) as running:
        yield running


def test_a_live_round_trip_reads_back_as_submitted(
    server: rt.Server, tmp_path: Path, tax: Taxonomy
) -> None:
    """The committed exports' script, run against the Label Studio of this checkout: the
    configuration and tasks it accepts, the annotations it exports, read back as submitted."""
    out = tmp_path / "out"
    out.mkdir()
    trip = rt.finish(server, tax, out, tmp_path)
    check_exports(out, trip.expected)
    committed = load_expected(DATA)
    assert trip.expected["case_keys"] == committed["case_keys"]
    assert [s["kind"] for s in trip.expected["steps"]] == [s["kind"] for s in committed["steps"]]
    assert (out / labelstudio.TASKS_FILE).read_bytes() == (
        DATA / labelstudio.TASKS_FILE
    ).read_bytes()
    tasks = {
        t["data"]["case_key"]: t["data"] for t in json.loads((out / "tasks.json").read_bytes())
    }
    for t in json.loads((out / "full.json").read_bytes()):
        assert t["data"] == tasks[t["data"]["case_key"]]  # hostile text came back unchanged


def _foreign(urls: list[str], base: str) -> list[str]:
    own = urllib.parse.urlsplit(base).netloc
    return [
        u
        for u in urls
        if urllib.parse.urlsplit(u).scheme not in ("data", "blob", "about")
        and urllib.parse.urlsplit(u).netloc != own
    ]


@pytest.mark.browser
def test_label_studio_shows_the_case_as_text_and_asks_reasons_only_for_a_non_answer(
    server: rt.Server,
) -> None:
    """In Label Studio's own editor (Debian's chromium): the hostile case's question, claims,
    identity and document are shown as text (no script runs, no markup becomes an element,
    nothing is fetched from elsewhere); the reason codes appear only while a decision that
    does not answer is picked; and the label submitted there reads back as given."""
    config = (DATA / labelstudio.CONFIG_FILE).read_text("utf-8")
    project = server.call(
        "POST", "/api/projects", {"title": "In the editor", "label_config": config}
    )
    pid = int(project["id"])
    server.call(
        "POST", f"/api/projects/{pid}/import", json.loads((DATA / "tasks.json").read_bytes())
    )
    listed = server.call("GET", f"/api/tasks?project={pid}&page_size=100")["tasks"]
    tid = next(int(t["id"]) for t in listed if t["data"]["case_key"] == rt.HOSTILE_KEY)
    email, password, _ = rt.ANNOTATORS[0]
    with chromium_page(base=server.base_url, open_base=False) as opened:
        pg: Any = opened
        requests: list[str] = []
        dialogs: list[str] = []
        pg.on("request", lambda r: requests.append(r.url))

        def on_dialog(d: Any) -> None:
            dialogs.append(d.message)
            d.dismiss()

        pg.on("dialog", on_dialog)
        pg.goto(server.base_url + "/user/login/")
        pg.fill("input[name=email]", email)
        pg.fill("input[name=password]", password)
        pg.click("button[type=submit]")
        pg.wait_for_load_state("networkidle")
        pg.goto(f"{server.base_url}/projects/{pid}/data?task={tid}")
        question = pg.get_by_text("Hostile question <script>window.__pwned=1</script>")
        question.first.wait_for(timeout=120_000)
        assert pg.get_by_text('onerror="window.__pwned=2"').count() >= 3  # question, claim, doc
        assert pg.get_by_text("=== LS-HOSTILE-DOC@1 ===").count() >= 1
        assert pg.evaluate("() => window.__pwned === undefined"), "a script ran"
        planted = pg.evaluate(
            """() => Array.from(document.querySelectorAll(
                'img[onerror], [src*="evil.example"], [href*="evil.example"], '
                + '[href^="javascript:"], b, iframe'
            )).map(e => e.outerHTML.slice(0, 200))"""
        )
        assert planted == [], "hostile markup became elements"

        def choice(value: str) -> Any:
            """A choice of the editor: its value, then its hotkey."""
            return pg.get_by_text(re.compile(f"^{re.escape(value)}(\\W|\\d|$)")).first

        reason = choice(rt_reason := _reason_codes()[0])
        expect(reason).to_be_hidden()  # waits: the editor may still be drawing
        choice("abstain").click()
        reason.wait_for(state="visible")
        choice("answer").click()
        reason.wait_for(state="hidden")
        choice("abstain").click()
        reason.click()
        pg.locator("textarea").first.fill("Typed in the editor <b>bold</b>")
        pg.keyboard.press("Shift+Enter")  # the TextArea keeps it
        pg.get_by_role("button", name="Submit").click()
        pg.wait_for_load_state("networkidle")
        assert dialogs == [] and _foreign(requests, server.base_url) == []

    body = server.download(f"/api/projects/{pid}/export?exportType=JSON")
    (label,) = list(labelstudio.read_export(io.BytesIO(body), Skipped()))
    assert (label.case_key, label.decision) == (rt.HOSTILE_KEY, "abstain")
    assert label.reason_codes == (rt_reason,)
    assert label.note == "Typed in the editor <b>bold</b>"
    assert label.user == "1" and label.lead_seconds is not None


def _reason_codes() -> list[str]:
    from review.core.taxonomy import taxonomy

    return list(taxonomy().case_reason_codes())
