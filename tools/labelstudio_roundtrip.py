"""A real Label Studio round trip: the workbench's labeling configuration and tasks in, two
annotators' labels out as Label Studio's own JSON and JSON-MIN exports.

This script made the exports committed under ``tests/labels/data/labelstudio/`` (run once;
run it again to remake them, e.g. for a newer Label Studio), and the live test
(``tests/labels/test_labelstudio_live.py``) runs the same round trip against the Label Studio
of ``.labelstudio-venv`` (``make labelstudio-env``, pinned in
``tools/labelstudio/requirements.txt``). Steps:

1. a workbench database: the demo without traces, plus one case whose question,
   claims, identity, document and notes are hostile text (:func:`fixture_database`);
2. the family :data:`FAMILY` exported with :func:`review.labels.labelstudio.write_project` by
   an administrator without clearance (restricted text leaves as the redaction text);
3. ``label-studio start`` on a free loopback port with a fresh data folder, an administrator
   and a second annotator (``label-studio init``), each with an API token;
4. a project created with the configuration (Label Studio validates it), the tasks imported
   (Label Studio checks them against it), and annotations submitted through the API by both
   users (:data:`PLAN`): one cancelled (skipped), one changed after submitting, a draft, a
   model prediction, a task left unlabeled, a note of hostile text;
5. the project exported as JSON and JSON-MIN, both as Label Studio's export button makes them
   (annotators by user id) and as a snapshot export with ``completed_by`` expanded (by e-mail);
6. ``expected.json``: what was submitted, the users and the Label Studio version.

Usage::

    .venv/bin/python tools/labelstudio_roundtrip.py [--label-studio PATH] [--out DIR]

Label Studio is pointed at loopback, with analytics and error reporting off.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: the workbench's packages beside it
    sys.path.insert(0, str(ROOT))

from sqlalchemy import Engine  # noqa: E402

from review.cases import cases  # noqa: E402
from review.core.identity import Actor, Role  # noqa: E402
from review.core.taxonomy import Taxonomy  # noqa: E402
from review.corpus import corpus  # noqa: E402
from review.corpus.docformat import parse_markdown  # noqa: E402
from review.demo import fixtures  # noqa: E402
from review.demo.people import DEMO_ACTOR  # noqa: E402
from review.labels import labelstudio  # noqa: E402
from storage.db import make_engine, migrate, run_write  # noqa: E402

LABEL_STUDIO = ROOT / ".labelstudio-venv" / "bin" / "label-studio"
FIXTURES = ROOT / "tests" / "labels" / "data" / "labelstudio"
#: the demo family exported (five cases: one relies on a restricted document, one lists a
#: forbidden one), with the hostile case added to it
FAMILY = "FAM-REFUND-WINDOW"
HOSTILE_KEY = "CASE-LS-HOSTILE"
HOSTILE_DOC = "LS-HOSTILE-DOC"
EVIL = "evil.example"
HOSTILE = (
    f'<script>window.__pwned=1</script> <img src=x onerror="window.__pwned=2"> '
    f"![pixel](http://{EVIL}/pixel.png) [click](javascript:alert(1)) "
    '=HYPERLINK("http://evil.example","x") +1+1 @SUM(A1) '
    "bell\x07 escape\x1b[31m red\u202eexe.txt\u202c tab\t</Text></View>"
)
#: the two Label Studio users: e-mail, password, legacy API token (loopback only)
ANNOTATORS: tuple[tuple[str, str, str], ...] = (
    ("ines.duarte@brightwave.example", "ls-pass-ines-1", "1" * 40),
    ("tom.becker@brightwave.example", "ls-pass-tom-1", "2" * 40),
)
START_SECONDS = float(os.environ.get("WORKBENCH_LABEL_STUDIO_START_SECONDS", "600"))
#: the exporting administrator: no clearance, so restricted text leaves redacted
EXPORTER = Actor(
    id=0, email="exporter@test.example", name="Exporter", roles=frozenset({Role.admin})
)


def label_studio_executable() -> str | None:
    """The ``label-studio`` executable (``WORKBENCH_LABEL_STUDIO`` or .labelstudio-venv), or
    None when it is not installed."""
    named = os.environ.get("WORKBENCH_LABEL_STUDIO")
    if named:
        return named if Path(named).is_file() else None
    return str(LABEL_STUDIO) if LABEL_STUDIO.is_file() else None


# ------------------------------------------------------------------------------------------
# The workbench side


def fixture_database(engine: Engine, tax: Taxonomy) -> None:
    """The demo (no traces) and a hostile case in :data:`FAMILY`."""
    migrate(engine)
    fixtures.build_demo(engine, tax, with_traces=False)
    md = (
        f"---\ndoc_id: {HOSTILE_DOC}\nversion: 1\ntitle: 'Hostile <b>title</b> "
        f"![t](http://{EVIL}/t.png)'\neffective_date: 2025-03-01\nauthority: policy\n"
        f"owner: 'Owner'\naccess_scope: public\njurisdiction: EU\n---\n# Hostile\n\n{HOSTILE}\n"
    )
    corpus.import_documents(engine, DEMO_ACTOR, [parse_markdown(md, "hostile.md", tax)])
    record: dict[str, Any] = {
        "key": HOSTILE_KEY,
        "question": f"Hostile question {HOSTILE}",
        "required_claims": [f"Claim {HOSTILE}"],
        "identity": {"name": f"who <b>{EVIL}</b>", "scopes": ["public"]},
        "documents": [
            {"doc_id": HOSTILE_DOC, "version": 1, "visibility": "visible", "role": "decisive"}
        ],
        "expected_decision": "answer",
        "reason_codes": [],
        "category": "in_scope",
        "slices": [],
        "split": "test",
        "family": FAMILY,
        "evidence_state": None,
        "status": "ready",
        "notes": f"The author's note gives the answer away {HOSTILE}",
    }
    case = cases.validate_case(record, "hostile", 1, tax)
    run_write(engine, lambda s: cases.create_case(s, DEMO_ACTOR, case, tax))


def export_family(engine: Engine, tax: Taxonomy, out: Path) -> list[dict[str, Any]]:
    """Write the configuration and the family's tasks into ``out``; the tasks."""
    labelstudio.write_project(engine, out, tax, cases.CaseFilter(family=FAMILY), viewer=EXPORTER)
    tasks: list[dict[str, Any]] = json.loads((out / labelstudio.TASKS_FILE).read_text("utf-8"))
    return tasks


# ------------------------------------------------------------------------------------------
# A Label Studio server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    """A running Label Studio and its users' tokens by e-mail."""

    base_url: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    tokens: dict[str, str] = field(default_factory=dict)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-6000:]
        except OSError:
            return "(no log)"

    def call(self, method: str, path: str, body: Any = None, *, user: str | None = None) -> Any:
        """One API call as ``user`` (default: the first annotator, the administrator); the
        decoded JSON answer. Raises RuntimeError with the answer on an HTTP error."""
        token = self.tokens[user or ANNOTATORS[0][0]]
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(
            self.base_url + path,
            method=method,
            data=data,
            headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                raw = r.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:2000].decode("utf-8", "replace")
            raise RuntimeError(f"{method} {path}: HTTP {exc.code}: {detail}") from None
        return json.loads(raw) if raw.strip() else None

    def download(self, path: str) -> bytes:
        req = urllib.request.Request(
            self.base_url + path,
            headers={"Authorization": f"Token {self.tokens[ANNOTATORS[0][0]]}"},
        )
        with urllib.request.urlopen(req, timeout=300) as r:
            return bytes(r.read())


def _environment(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABEL_STUDIO_")}
    env.update(
        LABEL_STUDIO_BASE_DATA_DIR=str(data_dir),
        COLLECT_ANALYTICS="false",
        SENTRY_DSN="",
        FRONTEND_SENTRY_DSN="",
        LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK="true",
    )
    return env


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=5) as r:
            return bool(r.status == 200)
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def label_studio(exe: str, workdir: Path, start_seconds: float = START_SECONDS) -> Iterator[Server]:
    """``label-studio start`` on a free loopback port with a data folder in ``workdir`` and
    the :data:`ANNOTATORS` as users; stopped (its process group) on leaving."""
    data_dir = workdir / "label-studio-data"
    data_dir.mkdir(parents=True, exist_ok=True)
    env = _environment(data_dir)
    port = _free_port()
    (email, password, token) = ANNOTATORS[0]
    log_path = workdir / "label-studio.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [exe, "start", "--no-browser", "--port", str(port), "--internal-host", "127.0.0.1",
             "--host", f"http://127.0.0.1:{port}", "--data-dir", str(data_dir),
             "--username", email, "--password", password, "--user-token", token,
             "--enable-legacy-api-token"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True,
        )  # fmt: skip
    server = Server(f"http://127.0.0.1:{port}", proc, log_path, {email: token})
    try:
        deadline = time.monotonic() + start_seconds
        while not _healthy(server.base_url):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Label Studio did not start:\n{server.log()}")
            time.sleep(1)
        for email, password, token in ANNOTATORS[1:]:
            subprocess.run(
                [exe, "init", "--data-dir", str(data_dir), "--username", email,
                 "--password", password, "--user-token", token, "--enable-legacy-api-token"],
                env=env, stdin=subprocess.DEVNULL, capture_output=True, check=True,
                timeout=start_seconds,
            )  # fmt: skip
            server.tokens[email] = token
        yield server
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


# ------------------------------------------------------------------------------------------
# The round trip


@dataclass(frozen=True)
class Step:
    """One thing an annotator does to the task at ``task`` (its index among the tasks,
    in case key order): ``kind`` label, cancel, change (edits that user's label on the same
    task), draft or prediction."""

    task: int
    user: int
    kind: str
    decision: str = ""
    reasons: tuple[int, ...] = ()
    note: str = ""


#: reason codes by their index in the taxonomy's labeler codes (built from the taxonomy)
PLAN: tuple[Step, ...] = (
    Step(0, 0, "label", "answer"),
    Step(0, 1, "label", "abstain", (0, 4), f"Stale source? {HOSTILE}"),
    Step(1, 1, "cancel"),
    Step(1, 0, "label", "abstain", (1,), "line one\nline two"),
    Step(2, 0, "draft", "answer"),
    Step(2, 0, "prediction", "abstain", (0,)),
    Step(3, 0, "label", "escalate", (7,)),
    Step(3, 1, "label", "escalate", (7,)),
    Step(4, 0, "label", "partial"),
    Step(4, 1, "label", "answer"),
    Step(0, 0, "change", "clarify", (6,), "changed my mind"),
)


def result(tax: Taxonomy, step: Step) -> list[dict[str, Any]]:
    """The annotation result Label Studio's editor would submit for ``step``."""
    codes = list(tax.case_reason_codes())
    out: list[dict[str, Any]] = [
        {"from_name": "decision", "to_name": "question", "type": "choices",
         "value": {"choices": [step.decision]}},
    ]  # fmt: skip
    if step.reasons:
        out.append(
            {"from_name": "reason_codes", "to_name": "question", "type": "choices",
             "value": {"choices": [codes[i] for i in step.reasons]}}
        )  # fmt: skip
    if step.note:
        out.append(
            {"from_name": "note", "to_name": "question", "type": "textarea",
             "value": {"text": [step.note]}}
        )  # fmt: skip
    return out


def _submit(
    server: Server, tax: Taxonomy, task_ids: list[int], keys: list[str]
) -> list[dict[str, Any]]:
    """Carry out :data:`PLAN`; what each step left, for ``expected.json``."""
    done: list[dict[str, Any]] = []
    mine: dict[tuple[int, int], int] = {}  # (task, user) -> annotation id
    codes = list(tax.case_reason_codes())
    for i, step in enumerate(PLAN):
        user = ANNOTATORS[step.user][0]
        tid = task_ids[step.task]
        lead = 10.0 + 7.5 * i
        if step.kind == "label":
            ann = server.call(
                "POST", f"/api/tasks/{tid}/annotations",
                {"result": result(tax, step), "lead_time": lead}, user=user,
            )  # fmt: skip
            mine[(step.task, step.user)] = int(ann["id"])
        elif step.kind == "cancel":
            ann = server.call(
                "POST", f"/api/tasks/{tid}/annotations",
                {"result": [], "was_cancelled": True, "lead_time": lead}, user=user,
            )  # fmt: skip
        elif step.kind == "change":
            aid = mine[(step.task, step.user)]
            ann = server.call(
                "PATCH", f"/api/annotations/{aid}", {"result": result(tax, step)}, user=user
            )
        elif step.kind == "draft":
            ann = server.call(
                "POST", f"/api/tasks/{tid}/drafts",
                {"result": result(tax, step), "lead_time": lead}, user=user,
            )  # fmt: skip
        else:
            ann = server.call(
                "POST", "/api/predictions",
                {"task": tid, "result": result(tax, step), "score": 0.42,
                 "model_version": "gate-v1"},
            )  # fmt: skip
        done.append(
            {
                "kind": step.kind,
                "id": ann["id"],
                "task_id": tid,
                "case_key": keys[step.task],
                "user": user,
                "decision": step.decision,
                "reason_codes": [codes[j] for j in step.reasons],
                "note": step.note,
            }
        )
    return done


def _snapshot(server: Server, pid: int) -> int:
    """A snapshot export with the annotators expanded (``completed_by`` with e-mail)."""
    snap = server.call(
        "POST",
        f"/api/projects/{pid}/exports",
        {
            "title": "workbench round trip",
            "serialization_options": {
                "annotations__completed_by": {"only_id": False},
                "drafts": {"only_id": False},
                "predictions": {"only_id": False},
            },
        },
    )
    eid = int(snap["id"])
    for _ in range(300):
        if server.call("GET", f"/api/projects/{pid}/exports/{eid}")["status"] == "completed":
            return eid
        time.sleep(1)
    raise RuntimeError("Label Studio's snapshot export did not complete")


def _converted(server: Server, pid: int, eid: int, fmt: str) -> bytes:
    server.call("POST", f"/api/projects/{pid}/exports/{eid}/convert", {"export_type": fmt})
    for _ in range(300):
        with contextlib.suppress(urllib.error.HTTPError):
            return server.download(f"/api/projects/{pid}/exports/{eid}/download?exportType={fmt}")
        time.sleep(1)
    raise RuntimeError(f"Label Studio did not convert the snapshot to {fmt}")


@dataclass
class RoundTrip:
    """Label Studio's exports by file name, and what was submitted (``expected.json``)."""

    exports: dict[str, bytes]
    expected: dict[str, Any]


def round_trip(
    server: Server, tax: Taxonomy, config: str, tasks: list[dict[str, Any]]
) -> RoundTrip:
    """Project, tasks, :data:`PLAN`, exports (see the module's docstring)."""
    project = server.call(
        "POST", "/api/projects", {"title": "Workbench cases", "label_config": config}
    )
    pid = int(project["id"])
    server.call("POST", f"/api/projects/{pid}/import", tasks)
    listed = server.call("GET", f"/api/tasks?project={pid}&page_size=1000")["tasks"]
    by_key = {t["data"]["case_key"]: int(t["id"]) for t in listed}
    keys = sorted(by_key)
    done = _submit(server, tax, [by_key[k] for k in keys], keys)
    exports = {
        "full.json": server.download(
            f"/api/projects/{pid}/export?exportType=JSON&download_all_tasks=true"
        ),
        "min.json": server.download(
            f"/api/projects/{pid}/export?exportType=JSON_MIN&download_all_tasks=true"
        ),
    }
    eid = _snapshot(server, pid)
    exports["full-emails.json"] = server.download(
        f"/api/projects/{pid}/exports/{eid}/download?exportType=JSON"
    )
    exports["min-emails.json"] = _converted(server, pid, eid, "JSON_MIN")
    users = {str(u["id"]): u["email"] for u in server.call("GET", "/api/users/")}
    version = server.call("GET", "/api/version")
    expected = {
        "label_studio": version.get("release"),
        "label_studio_sdk": version.get("label-studio-converter", {}).get("version"),
        "users": users,
        "case_keys": keys,
        "steps": done,
    }
    return RoundTrip(exports, expected)


def prepare(tax: Taxonomy, out: Path, workdir: Path) -> tuple[str, list[dict[str, Any]]]:
    """The workbench side: the database in ``workdir``, the configuration and the family's
    tasks written to ``out``; (configuration, tasks)."""
    engine = make_engine(f"sqlite:///{workdir / 'workbench.db'}")
    try:
        fixture_database(engine, tax)
        tasks = export_family(engine, tax, out)
    finally:
        engine.dispose()
    return (out / labelstudio.CONFIG_FILE).read_text("utf-8"), tasks


def finish(server: Server, tax: Taxonomy, out: Path, workdir: Path) -> RoundTrip:
    """:func:`prepare`, then the round trip against a running ``server``; its exports and
    ``expected.json`` written to ``out``."""
    config, tasks = prepare(tax, out, workdir)
    trip = round_trip(server, tax, config, tasks)
    for name, body in trip.exports.items():
        (out / name).write_bytes(body)
    (out / "expected.json").write_text(
        json.dumps(trip.expected, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return trip


def run(exe: str, tax: Taxonomy, out: Path, workdir: Path) -> RoundTrip:
    """The whole round trip in ``workdir`` with a Label Studio of its own (see
    :func:`finish`)."""
    with label_studio(exe, workdir) as server:
        return finish(server, tax, out, workdir)


def main(argv: list[str] | None = None) -> int:
    from review.core.taxonomy import load_taxonomy

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--label-studio", default=label_studio_executable())
    ap.add_argument("--out", type=Path, default=FIXTURES)
    args = ap.parse_args(argv)
    if not args.label_studio:
        ap.error("no label-studio: run `make labelstudio-env` or pass --label-studio")
    args.out.mkdir(parents=True, exist_ok=True)
    tax = load_taxonomy(ROOT / "policies" / "taxonomy.yaml")
    with tempfile.TemporaryDirectory(prefix="ls-roundtrip-") as tmp:
        trip = run(args.label_studio, tax, args.out, Path(tmp))
    print(f"Label Studio {trip.expected['label_studio']}: wrote {', '.join(trip.exports)} "
          f"and expected.json to {args.out}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
