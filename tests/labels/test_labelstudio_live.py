"""Label Studio itself: its own validation accepts the workbench's labeling configuration and
the labels read back, and a live round trip (project, tasks, two annotators through the API,
JSON and JSON-MIN exports) reads back as submitted.

Label Studio lives in its own virtual environment (``make labelstudio-env`` creates
``.labelstudio-venv/`` from ``tools/labelstudio/requirements.txt``; ``WORKBENCH_LABEL_STUDIO``
names another ``label-studio`` executable). Without it these tests are skipped, except in CI
(``make test`` installs it first), where they fail.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from review.core.taxonomy import Taxonomy
from review.labels import labelstudio
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


def test_a_live_round_trip_reads_back_as_submitted(tmp_path: Path, tax: Taxonomy) -> None:
    """The committed exports' script, run against the Label Studio of this checkout: the
    configuration and tasks it accepts, the annotations it exports, read back as submitted."""
    out = tmp_path / "out"
    out.mkdir()
    trip = rt.run(_label_studio(), tax, out, tmp_path)
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
