"""One OS process of the concurrency test (tests/storage/test_concurrency.py): a person labeling
and auditing through the real services until a deadline, logging every outcome as JSON lines.

Run as ``python -m tests.helpers.concurrency_worker URL PLAN_ID EMAIL SEED SECONDS LOG GO_FILE``.
Two processes share each e-mail (the same person in two tabs), so edits race each other.

Each outcome line is one of:
  {"op": "label"|"verdict", "id": .., "target": .., "based_on": .., "edit": bool}  a success
  {"op": ..., "conflict": "natural"|"forced", "target": ..}                       StaleWriteError
  {"op": ..., "refused": message}                                                 InputError
  {"op": ..., "forced_stale_saved": id}        a submit based on an old version that landed
  {"error": type, "message": ..}                                                  anything else
"""

from __future__ import annotations

import json
import random
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from sqlalchemy import Engine

from review.audits import queue, verdicts
from review.core.errors import InputError, StaleWriteError
from review.core.identity import Actor, Role
from review.core.taxonomy import Taxonomy, load_taxonomy
from review.labels import labeling
from storage.db import make_engine
from tests.helpers.transact import write

LABELS = (
    labeling.LabelIn("answer"),
    labeling.LabelIn("abstain", ("no_answer_bearing_evidence",)),
)
VERDICTS = (
    verdicts.VerdictIn("correct_refusal"),
    verdicts.VerdictIn("supported_answer"),
    verdicts.VerdictIn("false_refusal", stages=("policy_too_strict",)),
)


def main(argv: list[str]) -> int:
    url, plan_id, email, seed, seconds, log_path, go_file = argv
    rng = random.Random(int(seed))
    actor = Actor(
        id=1000 + int(seed),
        email=email,
        name=email,
        roles=frozenset({Role.annotator, Role.reviewer}),
        clearance=True,
    )
    tax = load_taxonomy()
    engine = make_engine(url)
    engine.connect().close()  # connect before the start signal
    with Path(log_path).open("a", encoding="utf-8") as log:
        return _work(engine, actor, tax, rng, int(plan_id), float(seconds), log, log_path, go_file)


def _work(
    engine: Engine,
    actor: Actor,
    tax: Taxonomy,
    rng: random.Random,
    plan_id: int,
    seconds: float,
    log: TextIO,
    log_path: str,
    go_file: str,
) -> int:
    Path(log_path + ".ready").touch()
    while not Path(go_file).exists():
        time.sleep(0.01)
    deadline = time.monotonic() + seconds
    person = _Person(engine, actor, tax, rng, plan_id, log)
    try:
        while time.monotonic() < deadline:
            if person.act() and rng.random() < 0.02:
                person.skip_a_case()
    except Exception as exc:  # the test fails on any of these
        person.out(error=type(exc).__name__, message=str(exc), trace=traceback.format_exc())
        return 3
    finally:
        engine.dispose()
    return 0


@dataclass
class _Person:
    """One person labeling and auditing: each action picked at random, each outcome logged."""

    engine: Engine
    actor: Actor
    tax: Taxonomy
    rng: random.Random
    plan_id: int
    log: TextIO
    labeled: list[int] = field(default_factory=list)
    judged: list[int] = field(default_factory=list)
    skip_cases: set[int] = field(default_factory=set)
    skip_items: set[int] = field(default_factory=set)

    def out(self, **rec: Any) -> None:
        self.log.write(json.dumps(rec) + "\n")

    def act(self) -> bool:
        """One action picked at random; False when the queue it drew from was empty."""
        engine, actor, rng = self.engine, self.actor, self.rng
        step = rng.random()
        if step < 0.3:  # take the next case from the queue and label it
            case_id = labeling.next_case(engine, actor, exclude=self.skip_cases)
            if case_id is None:
                return False
            self.label_again(case_id)
        elif step < 0.45 and self.labeled:  # edit my label (my other tab may edit it too)
            self.label_again(rng.choice(self.labeled))
        elif step < 0.5 and self.labeled:  # an edit from a tab opened before my last save
            case_id = rng.choice(self.labeled)
            hist = [h.id for h in labeling.history(engine, case_id) if h.annotator == actor.email]
            if len(hist) >= 2:
                self.label(case_id, rng.choice(hist[:-1]), True)
        elif step < 0.8:  # the next audit item
            item_id = write(engine, queue.next_item, actor, self.plan_id, exclude=self.skip_items)
            if item_id is None:
                return False
            self.judge_again(item_id)
        elif step < 0.95 and self.judged:  # edit my verdict
            self.judge_again(rng.choice(self.judged))
        elif self.judged:  # a stale verdict edit
            item_id = rng.choice(self.judged)
            hist = [
                v.id
                for v in verdicts.verdict_history(engine, actor, item_id)
                if v.reviewer == actor.email
            ]
            if len(hist) >= 2:
                self.verdict(item_id, rng.choice(hist[:-1]), True)
        return True

    def skip_a_case(self) -> None:
        """Skip a case now and then (gives it back to the queue)."""
        held = labeling.next_case(self.engine, self.actor, exclude=self.skip_cases)
        if held is not None:
            labeling.release(self.engine, self.actor, held)
            self.skip_cases.add(held)
            self.out(op="skip", target=held)

    def label_again(self, case_id: int) -> None:
        mine = labeling.my_label(self.engine, self.actor, case_id)
        self.label(case_id, mine.id if mine else None, False)

    def judge_again(self, item_id: int) -> None:
        mine = verdicts.my_verdict(self.engine, self.actor, item_id)
        self.verdict(item_id, mine.id if mine else None, False)

    def label(self, case_id: int, based_on: int | None, forced: bool) -> None:
        try:
            row = labeling.submit(
                self.engine, self.actor, case_id, self.rng.choice(LABELS), based_on, self.tax
            )
        except StaleWriteError:
            self.out(op="label", conflict="forced" if forced else "natural", target=case_id)
            return
        except InputError as exc:
            self.out(op="label", refused=str(exc), target=case_id)
            return
        if forced:
            self.out(op="label", forced_stale_saved=row.id, target=case_id)
        self.out(
            op="label", id=row.id, target=case_id, based_on=based_on, edit=based_on is not None
        )
        if case_id not in self.labeled:
            self.labeled.append(case_id)

    def verdict(self, item_id: int, based_on: int | None, forced: bool) -> None:
        try:
            row = write(
                self.engine,
                verdicts.submit_verdict,
                self.actor,
                item_id,
                self.rng.choice(VERDICTS),
                based_on,
            )
        except StaleWriteError:
            self.out(op="verdict", conflict="forced" if forced else "natural", target=item_id)
            return
        except InputError as exc:
            self.out(op="verdict", refused=str(exc), target=item_id)
            return
        if forced:
            self.out(op="verdict", forced_stale_saved=row.id, target=item_id)
        self.out(
            op="verdict", id=row.id, target=item_id, based_on=based_on, edit=based_on is not None
        )
        if item_id not in self.judged:
            self.judged.append(item_id)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
