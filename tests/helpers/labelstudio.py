"""What a Label Studio round trip should read back: the labels and skipped counts that
``expected.json`` (written by tools/labelstudio_roundtrip.py) implies, and the check that a
reader gave exactly those."""

from __future__ import annotations

import io
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from review.labels import labelstudio
from review.labels.external import ExternalLabel, Skipped

EXPORTS = ("full.json", "min.json", "full-emails.json", "min-emails.json")


def expected_labels(expected: dict[str, Any], by_email: bool) -> set[tuple[Any, ...]]:
    """(ref, case key, user, decision, reason codes, note) of every submitted label as it
    stands after the round trip (a changed label reads as changed); the user as the export
    names them: e-mail, or Label Studio's user id."""
    ids = {email: uid for uid, email in expected["users"].items()}
    final: dict[tuple[str, str], dict[str, Any]] = {}
    for step in expected["steps"]:
        if step["kind"] in ("label", "change"):
            final[(step["case_key"], step["user"])] = step
    return {
        (
            str(s["id"]),
            s["case_key"],
            s["user"] if by_email else ids[s["user"]],
            s["decision"],
            tuple(s["reason_codes"]),
            s["note"].strip(),
        )
        for s in final.values()
    }


def expected_skipped(expected: dict[str, Any], name: str) -> dict[str, int]:
    """What the reader should count as skipped in the export ``name``: the full JSON has the
    cancelled annotations, drafts and predictions; JSON-MIN leaves them out (Label Studio's
    converter drops cancelled annotations and has no drafts or predictions). Both name the
    tasks nobody annotated."""
    steps = expected["steps"]
    annotated = {s["case_key"] for s in steps if s["kind"] in ("label", "cancel")}
    counts: dict[str, int] = {}
    unannotated = len(set(expected["case_keys"]) - annotated)
    if unannotated:
        counts["task without annotation"] = unannotated
    if name.startswith("full"):
        for kind, why in (
            ("cancel", "cancelled"),
            ("draft", "draft"),
            ("prediction", "prediction"),
        ):
            n = sum(s["kind"] == kind for s in steps)
            if n:
                counts[why] = n
    return counts


def read(body: bytes) -> tuple[list[ExternalLabel], Skipped]:
    skipped = Skipped()
    return list(labelstudio.read_export(io.BytesIO(body), skipped)), skipped


def check_exports(folder: Path, expected: dict[str, Any]) -> None:
    """Every export in ``folder`` reads back as the labels and skipped counts expected."""
    for name in EXPORTS:
        labels, skipped = read((folder / name).read_bytes())
        got = {(x.ref, x.case_key, x.user, x.decision, x.reason_codes, x.note) for x in labels}
        assert len(labels) == len(got), name
        assert got == expected_labels(expected, by_email="emails" in name), name
        assert skipped.counts == expected_skipped(expected, name), name
        for x in labels:
            assert x.tool == "label-studio"
            assert x.labeled_at is not None and x.labeled_at.tzinfo is not None, name
            assert x.lead_seconds is not None and x.lead_seconds > 0, name
            assert x.where.startswith("task ") and f"annotation {x.ref}" in x.where


def sdk_validate(
    python: str, config: str, export: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Label Studio's own checks, in the Python that has label-studio-sdk: the labeling
    configuration (``LabelInterface.validate``, as the server checks a project's), and, given
    a full JSON export, each task's data and each annotation's result against it. Prints
    ``{"controls", "objects", "bad_tasks", "bad_annotations"}`` as JSON."""
    code = (
        "import json, sys\n"
        "from label_studio_sdk.label_interface import LabelInterface\n"
        "li = LabelInterface(open(sys.argv[1], encoding='utf-8').read())\n"
        "li.validate()\n"
        "bad_tasks, bad = [], {}\n"
        "if len(sys.argv) > 2:\n"
        "    for t in json.load(open(sys.argv[2], encoding='utf-8')):\n"
        "        if not li.validate_task({'data': t['data']}):\n"
        "            bad_tasks.append(t['id'])\n"
        "        for a in t['annotations']:\n"
        "            errors = li.validate_prediction(a, return_errors=True)\n"
        "            if errors:\n"
        "                bad[str(a['id'])] = errors\n"
        "print(json.dumps({'controls': sorted(c.name for c in li.controls),\n"
        "    'objects': sorted(o.name for o in li.objects), 'bad_tasks': bad_tasks,\n"
        "    'bad_annotations': bad}))\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.xml"
        path.write_text(config, encoding="utf-8")
        args = [python, "-c", code, str(path)] + ([str(export)] if export else [])
        return subprocess.run(args, capture_output=True, text=True, timeout=300, check=False)


def load_expected(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "expected.json").read_text("utf-8"))
    return data
