"""Faults (issue 11, item 3): a process killed with SIGKILL in the middle of a label save or
of a sign-off, on SQLite and PostgreSQL, leaves the database consistent (no label without its
audit row, no signature that breaks the hash chain, no half-applied split lock) and the work
resumable: the same operation succeeds afterwards. The killed import is in test_traces.py.

The child process runs the real service with a SQLAlchemy session hook that stops it inside
the transaction, either right after the flush that INSERTs the row or just before COMMIT, and
tells the test, which kills it there."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from review.core.taxonomy import Taxonomy
from review.labels import labeling
from review.policy import signoff
from review.thresholds import thresholds
from storage.db import read_session, run_write
from storage.models import AuditLog, Case, Label, Reservation, Setting, SignOff, SplitLock
from tests.helpers.actors import make_actor
from tests.helpers.paths import ROOT

ANNOTATOR = make_actor("annotator", "ines@test.example")
PO = make_actor("product_owner", "paula@test.example", uid=31)
PO2 = make_actor("product_owner", "omar@test.example", uid=32)
COMP = make_actor("compliance", "chen@test.example", uid=33)

CHILD = """
import json, sys, time
from pathlib import Path
from sqlalchemy import event
from sqlalchemy.orm import Session

args = json.loads(sys.argv[1])
sys.path.insert(0, args["root"])
from review.core.taxonomy import load_taxonomy
from review.labels import labeling
from review.policy import signoff
from review.thresholds import thresholds
from storage.db import make_engine
from storage.models import Label, SignOff
from tests.helpers.actors import make_actor

target = {"label": Label, "signoff": SignOff}[args["op"]]
marker = Path(args["marker"])
wrote = []

def stop_here():
    marker.touch()
    time.sleep(600)  # killed here, inside the open transaction

@event.listens_for(Session, "after_flush")
def after_flush(session, ctx):
    if any(isinstance(o, target) for o in session.new):
        wrote.append(True)
        if args["when"] == "insert":
            stop_here()

@event.listens_for(Session, "before_commit")
def before_commit(session):
    if wrote and args["when"] == "commit":
        stop_here()

engine = make_engine(args["url"])
if args["op"] == "label":
    who = make_actor("annotator", args["email"])
    labeling.submit(engine, who, args["case_id"], labeling.LabelIn("answer"), None,
                    load_taxonomy())
else:
    who = make_actor("compliance", args["email"], uid=33)
    signoff.sign(engine, who, args["version_id"], "approve", note="ok",
                 data_fingerprint="fp", metrics_snapshot={"risk": 0.1},
                 lock_case_ids=[args["case_id"]])
print("finished without being killed")
"""


def _ready_case(engine: Engine, tax: Taxonomy) -> int:
    def work(s: Session) -> int:
        case = Case(
            key="KILL-1",
            question="How long do refunds take?",
            identity_name="customer",
            expected_decision="answer",
            category=next(iter(tax.categories)),
            split="validation",
            status="ready",
        )
        s.add(case)
        s.flush()
        return case.id

    return run_write(engine, work)


def _kill_inside(url: str, tmp_path: Path, **args: object) -> None:
    """Run the operation in a child process and SIGKILL it where the hook stops it."""
    marker = tmp_path / f"stopped-{args['op']}-{args['when']}"
    payload = json.dumps({"root": str(ROOT), "url": url, "marker": str(marker), **args})
    output = tmp_path / f"child-{args['op']}-{args['when']}.log"
    with output.open("wb") as out:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, payload], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT
        )
        try:
            limit = time.monotonic() + 120
            while not marker.exists():
                if child.poll() is not None:
                    pytest.fail(f"the child ended before the stop point:\n{output.read_text()}")
                assert time.monotonic() < limit, "the child never reached the stop point"
                time.sleep(0.02)
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert child.returncode == -signal.SIGKILL


def _sqlite_intact(engine: Engine) -> None:
    if engine.dialect.name != "sqlite":
        return
    path = engine.url.database
    assert path
    con = sqlite3.connect(path)
    try:
        assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert con.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        con.close()


def _labels_and_log(engine: Engine, case_id: int) -> tuple[list[int], list[int]]:
    with read_session(engine) as s:
        labels = list(s.scalars(select(Label.id).where(Label.case_id == case_id)))
        logged = [
            int((a.after or {})["id"])
            for a in s.scalars(
                select(AuditLog).where(AuditLog.action == "label", AuditLog.entity_id == "KILL-1")
            )
        ]
    return labels, logged


@pytest.mark.parametrize("when", ["insert", "commit"])
def test_a_label_save_killed_mid_transaction_leaves_nothing_and_can_be_redone(
    any_engine: Engine, any_url: str, tmp_path: Path, tax: Taxonomy, when: str
) -> None:
    case_id = _ready_case(any_engine, tax)
    assert labeling.next_case(any_engine, ANNOTATOR) == case_id  # the case is reserved to me

    _kill_inside(any_url, tmp_path, op="label", when=when, case_id=case_id, email=ANNOTATOR.email)

    _sqlite_intact(any_engine)
    assert _labels_and_log(any_engine, case_id) == ([], [])  # no label, no orphan audit row
    with read_session(any_engine) as s:  # the reservation the save would have cleared is kept
        held = s.scalar(select(func.count(Reservation.id)).where(Reservation.case_id == case_id))
    assert held == 1
    # resumable: the locks died with the process and the same save now succeeds, once
    assert labeling.next_case(any_engine, ANNOTATOR) == case_id
    saved = labeling.submit(any_engine, ANNOTATOR, case_id, labeling.LabelIn("answer"), None, tax)
    assert _labels_and_log(any_engine, case_id) == ([saved.id], [saved.id])
    assert labeling.next_case(any_engine, ANNOTATOR) is None


def _chain_state(engine: Engine) -> tuple[int, dict[str, object] | None, int, int]:
    with read_session(engine) as s:
        head = s.get(Setting, signoff.CHAIN_KEY)
        return (
            int(s.scalar(select(func.count(SignOff.id))) or 0),
            dict(head.value) if head else None,
            int(s.scalar(select(func.count(SplitLock.case_id))) or 0),
            int(s.scalar(select(func.count(AuditLog.id)).where(AuditLog.action == "approve")) or 0),
        )


@pytest.mark.parametrize("when", ["insert", "commit"])
def test_a_signoff_killed_mid_transaction_keeps_the_chain_and_can_be_signed_again(
    any_engine: Engine, any_url: str, tmp_path: Path, tax: Taxonomy, when: str
) -> None:
    case_id = _ready_case(any_engine, tax)
    vid = thresholds.propose_thresholds(
        any_engine, PO, "vector", 0.45, 0.55, "fewer false refusals", tuned_on_split="validation"
    )
    signoff.sign(any_engine, PO2, vid, "approve", data_fingerprint="fp")
    before = _chain_state(any_engine)
    assert before[0] == 1 and signoff.verify_chain(any_engine) == []

    _kill_inside(
        any_url, tmp_path, op="signoff", when=when, version_id=vid, case_id=case_id,
        email=COMP.email,
    )  # fmt: skip

    _sqlite_intact(any_engine)
    assert _chain_state(any_engine) == before  # no signature, head, split lock or log row
    assert signoff.verify_chain(any_engine) == []
    assert signoff.get_version(any_engine, vid).status == "pending"
    assert signoff.locked_case_ids(any_engine, [case_id]) == set()

    # resumable: the same approval succeeds and the chain verifies
    signoff.sign(
        any_engine, COMP, vid, "approve", note="ok", data_fingerprint="fp",
        metrics_snapshot={"risk": 0.1}, lock_case_ids=[case_id],
    )  # fmt: skip
    after = _chain_state(any_engine)
    assert after[0] == 2 and after[2] == 1 and after[3] == before[3] + 1
    assert signoff.verify_chain(any_engine) == []
    assert signoff.get_version(any_engine, vid).status == "approved"
    assert signoff.locked_case_ids(any_engine, [case_id]) == {case_id}
