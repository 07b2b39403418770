"""Audits: plans counted and drawn in SQL, reproducibility, population-change detection,
the queue (overlap, reservations, blind review, clearance), verdicts with claim review,
weighted estimates against hand-worked numbers, promotion to cases, export, demo data."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
import threading
from collections import Counter
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import Engine, delete, func, select, update

from review.audits import estimates, export, population, promote, queue, verdicts, vocabulary
from review.audits import items as audit_items
from review.audits import plans as audit_plans
from review.audits.items import ClaimDraft
from review.audits.plans import PlanSpec
from review.audits.population import PopulationFilter
from review.audits.verdicts import VerdictIn
from review.cases import cases
from review.core.clearance import REDACTED
from review.core.errors import InputError, PermissionDenied, StaleWriteError
from review.core.identity import SYSTEM, Actor
from review.core.sampling import (
    KEY_SPACE,
    draw_sample_by_key,
    key_offset,
    weighted_estimate,
    wilson_bounds,
    wilson_interval,
)
from review.core.taxonomy import Taxonomy
from review.demo import batches
from storage.db import read_session, run_write
from storage.models import AuditItem, AuditVerdict, Case, SamplingPlan, Trace
from tests.helpers.actors import REVIEWER, make_actor
from tests.helpers.audits import (
    CONTRACT,
    PLANS,
    REFUND,
    add_trace,
    bulk_traces,
    realistic_traces,
    sql_bulk_traces,
)
from tests.helpers.transact import write


@pytest.fixture
def demo_url(tmp_path: Path, demo_notraces_template: Path) -> str:
    """These tests add and count their own traces: start from the demo without traces."""
    from tests.helpers.databases import copy_db

    return copy_db(demo_notraces_template, tmp_path)


REVIEWER2 = make_actor("reviewer", "rev2@test.example", clearance=True, uid=12)
UNCLEARED = make_actor("reviewer", "rev3@test.example", clearance=False, uid=13)
ANNOTATOR = make_actor("annotator", uid=14)
Z95 = 1.959963984540054


def two_strata(engine: Engine, abstain: int = 100, answer: int = 300) -> None:
    """``abstain`` abstentions then ``answer`` answers, one minute apart."""
    bulk_traces(
        engine,
        abstain + answer,
        decide=lambda i: "abstain" if i < abstain else "answer",
    )


def plan(engine: Engine, name: str = "p", **kw: object) -> int:
    spec = PlanSpec(name=name, **kw)  # type: ignore[arg-type]
    return write(engine, audit_plans.create_plan, REVIEWER, spec)


def drawn_ids(engine: Engine, plan_id: int) -> list[int]:
    with read_session(engine) as s:
        return list(
            s.scalars(
                select(AuditItem.trace_pk)
                .where(AuditItem.plan_id == plan_id)
                .order_by(AuditItem.position)
            )
        )


def judge(engine: Engine, who: Actor, item_id: int, verdict: str, **kw: object) -> None:
    stages = ("policy_too_strict",) if verdict in vocabulary.NEEDS_STAGE else ()
    notes = "see trace" if verdict in vocabulary.NEEDS_NOTE else ""
    v = VerdictIn(verdict, stages=stages, notes=notes, **kw)  # type: ignore[arg-type]
    write(engine, verdicts.submit_verdict, who, item_id, v, None)


# --- plans, allocation, population -------------------------------------------------------


def test_plan_stores_population_per_stratum_allocation_and_fingerprint(engine: Engine) -> None:
    two_strata(engine)
    pid = plan(engine, strata=("decision",), total=40)
    view = audit_plans.get_plan(engine, pid)
    assert view is not None and view.status == "planned"
    assert {c.stratum: c.count for c in view.population} == {"abstain": 100, "answer": 300}
    assert view.allocation == {"abstain": 10, "answer": 30}  # 40 * 100/400 and 40 * 300/400
    assert view.fingerprint.startswith("pop1:")
    frame = view.strata_frame()
    assert list(frame["weight"]) == [10.0, 10.0]

    equal = plan(engine, "eq", strata=("decision",), total=40, allocation="equal")
    assert audit_plans.get_plan(engine, equal).allocation == {"abstain": 20, "answer": 20}  # type: ignore[union-attr]

    sizes = audit_plans.parse_explicit_sizes("abstain: 25\n# comment\nanswer: 5\n")
    ex = plan(engine, "ex", strata=("decision",), total=30, allocation="explicit",
              explicit_sizes=sizes)  # fmt: skip
    assert audit_plans.get_plan(engine, ex).allocation == {"abstain": 25, "answer": 5}  # type: ignore[union-attr]


def test_plan_input_errors_write_nothing(engine: Engine) -> None:
    two_strata(engine, 10, 10)
    with pytest.raises(InputError, match="name the plan"):
        plan(engine, "  ")
    with pytest.raises(InputError, match="unknown stratum"):
        plan(engine, strata=("colour",))
    with pytest.raises(InputError, match="add up to 12, not to the sample size 10"):
        plan(engine, strata=("decision",), total=10, allocation="explicit",
             explicit_sizes={"abstain": 6, "answer": 6})  # fmt: skip
    with pytest.raises(InputError, match="asks for 11 but the population holds only 10"):
        plan(engine, strata=("decision",), total=11, allocation="explicit",
             explicit_sizes={"abstain": 11})  # fmt: skip
    with pytest.raises(InputError, match="population is empty"):
        plan(engine, filter=PopulationFilter(decisions=("escalate",)))
    with pytest.raises(InputError, match=r"ends .* before it starts"):
        plan(engine, filter=PopulationFilter(dt.date(2025, 7, 1), dt.date(2025, 6, 1)))
    with pytest.raises(InputError, match="line 2: 'x' is not a whole number"):
        audit_plans.parse_explicit_sizes("a: 1\nb: x")
    with pytest.raises(PermissionDenied):
        write(engine, audit_plans.create_plan, ANNOTATOR, PlanSpec(name="nope"))
    plan(engine, "same")
    with pytest.raises(InputError, match="already exists"):
        plan(engine, "same")
    with read_session(engine) as s:
        assert s.scalar(select(func.count(SamplingPlan.id))) == 1


def test_population_filter_dates_values_missing_values_and_attributes(engine: Engine) -> None:
    day = dt.datetime(2025, 6, 10, 23, 59, tzinfo=dt.UTC)
    add_trace(engine, "a", at=day, decision="answer", language="en", feedback="answer_wrong",
              attributes={"region": "EU"})  # fmt: skip
    add_trace(engine, "b", at=day + dt.timedelta(minutes=2), decision="abstain", language="de")
    add_trace(engine, "c", at=day - dt.timedelta(days=30), decision=None, restricted=True)
    flt = PopulationFilter(date_from=dt.date(2025, 6, 10), date_to=dt.date(2025, 6, 10))
    assert sum(c.count for c in audit_plans.count_population(engine, flt, ())) == 1  # 'a' only
    flt = PopulationFilter(decisions=("answer", population.NONE))
    counts = audit_plans.count_population(engine, flt, ("decision",))
    assert {c.stratum: c.count for c in counts} == {"(none)": 1, "answer": 1}
    flt = PopulationFilter(attributes=(("region", ("EU",)),))
    assert [c.count for c in audit_plans.count_population(engine, flt, ("attr.region",))] == [1]
    flt = PopulationFilter(include_restricted=False)
    assert sum(c.count for c in audit_plans.count_population(engine, flt, ())) == 2
    strata = audit_plans.count_population(engine, PopulationFilter(), ("decision", "feedback"))
    assert [c.stratum for c in strata] == [
        "(none) · (none)",
        "abstain · (none)",
        "answer · answer_wrong",
    ]
    back = PopulationFilter.from_json(
        PopulationFilter(dt.date(2025, 6, 1), decisions=("answer",)).to_json()
    )
    assert back == PopulationFilter(dt.date(2025, 6, 1), decisions=("answer",))
    assert audit_plans.dimension_values(engine, "decision") == ["(none)", "abstain", "answer"]


def test_same_plan_on_same_data_draws_the_same_sample_in_sql(engine: Engine) -> None:
    bulk_traces(engine, 2000, feedback=lambda i: "expected_answer" if i % 7 == 0 else None)
    spec = dict(strata=("decision", "feedback"), total=120, seed=42)
    first, second = plan(engine, "first", **spec), plan(engine, "second", **spec)
    other_seed = plan(engine, "third", **{**spec, "seed": 43})
    for pid in (first, second, other_seed):
        write(engine, audit_plans.draw_plan, REVIEWER, pid)
    a, b, c = (drawn_ids(engine, p) for p in (first, second, other_seed))
    assert a == b  # same plan, same data: the same traces in the same queue order
    assert len(a) == 120 == len(set(a))  # no trace twice
    assert set(a) != set(c)
    assert audit_plans.verify_sample(engine, first) is True
    assert audit_plans.preview_sample(engine, first) == [
        (tid, st) for tid, st in audit_plans.preview_sample(engine, second)
    ]
    # the SQL draw is the draw that review.core.sampling computes in memory, in queue order
    with read_session(engine) as s:
        rows = s.execute(select(Trace.id, Trace.sample_key, Trace.decision, Trace.feedback)).all()
    ids, keys = [r[0] for r in rows], [cast("int", r[1]) for r in rows]
    strata = [f"{r[2]} · {r[3] or '(none)'}" for r in rows]
    view = audit_plans.get_plan(engine, first)
    assert view is not None
    assert draw_sample_by_key(42, ids, keys, strata, view.allocation) == a
    with pytest.raises(InputError, match="already drawn"):
        write(engine, audit_plans.draw_plan, REVIEWER, first)


def test_a_changed_population_is_detected_and_explained(engine: Engine) -> None:
    two_strata(engine, 10, 20)
    pid = plan(engine, strata=("decision",), total=6)
    assert audit_plans.check_population(engine, pid).changed is False

    add_trace(engine, "late-1", decision="abstain")
    check = audit_plans.check_population(engine, pid)
    assert check.changed and (check.stored_total, check.current_total) == (30, 31)
    assert "abstain: 10 → 11 (+1 traces)" in check.message()
    with pytest.raises(audit_plans.PopulationChanged, match=r"30 → 31 traces"):
        write(engine, audit_plans.draw_plan, REVIEWER, pid)
    assert write(engine, audit_plans.recount_plan, REVIEWER, pid).changed is True
    assert audit_plans.check_population(engine, pid).changed is False

    # a trace that moves to another stratum, and one replaced by another of the same stratum
    def move(s: object) -> None:
        from sqlalchemy.orm import Session

        assert isinstance(s, Session)
        first_answer = s.scalar(select(func.min(Trace.id)).where(Trace.decision == "answer"))
        s.execute(update(Trace).where(Trace.id == first_answer).values(decision="escalate"))
        s.execute(delete(Trace).where(Trace.trace_id == "t-0000000"))

    run_write(engine, move)
    add_trace(engine, "late-2", decision="abstain")
    text = audit_plans.check_population(engine, pid).message()
    assert "abstain: 11 → 11 (same count, different traces)" in text
    assert "answer: 20 → 19 (-1 traces)" in text
    assert "escalate: 0 → 1 (new stratum, +1)" in text
    write(engine, audit_plans.recount_plan, REVIEWER, pid)
    write(engine, audit_plans.draw_plan, REVIEWER, pid)
    add_trace(engine, "after-draw", decision="answer")
    assert audit_plans.check_population(engine, pid).changed
    assert audit_plans.verify_sample(engine, pid) is None  # a different draw is expected now
    with pytest.raises(InputError, match="already drawn"):
        write(engine, audit_plans.recount_plan, REVIEWER, pid)


def test_sql_draw_of_400_from_200000_traces(engine: Engine) -> None:
    sql_bulk_traces(engine, 200_000)
    pid = plan(engine, "big", strata=("decision", "feedback"), total=400, seed=2025)
    view = audit_plans.get_plan(engine, pid)
    assert view is not None and view.population_total == 200_000
    result = write(engine, audit_plans.draw_plan, REVIEWER, pid)
    ids = drawn_ids(engine, pid)
    assert result.items == 400 == len(set(ids))
    assert result.by_stratum == {k: v for k, v in view.allocation.items() if v}
    with read_session(engine) as s:
        got = Counter(
            f"{d} · {f or '(none)'}"
            for d, f in s.execute(select(Trace.decision, Trace.feedback).where(Trace.id.in_(ids)))
        )
    assert dict(got) == result.by_stratum
    # the key windows give exactly the draw over every key
    with read_session(engine) as s:
        row = s.get(SamplingPlan, pid)
        assert row is not None
        every = dict.fromkeys((k for k, v in view.allocation.items() if v), KEY_SPACE)
        full = audit_plans.key_rows(s, row, key_offset(2025), every)
    assert sorted(r[0] for r in full) == sorted(ids)


def test_plans_and_draws_agree_on_sqlite_and_postgresql(any_engine: Engine) -> None:
    bulk_traces(any_engine, 300, feedback=lambda i: "negative" if i % 4 == 0 else None)
    add_trace(any_engine, "attr", decision="answer", attributes={"region": "EU"})
    pid = plan(any_engine, strata=("decision", "attr.region"), total=25, seed=9)
    write(any_engine, audit_plans.draw_plan, REVIEWER, pid)
    ids = drawn_ids(any_engine, pid)
    with read_session(any_engine) as s:
        rows = s.execute(select(Trace.id, Trace.sample_key, Trace.decision, Trace.attributes)).all()
    strata = [f"{d} · {(a or {}).get('region') or '(none)'}" for _i, _k, d, a in rows]
    view = audit_plans.get_plan(any_engine, pid)
    assert view is not None
    keys = [r[1] for r in rows]
    assert draw_sample_by_key(9, [r[0] for r in rows], keys, strata, view.allocation) == ids
    item = write(any_engine, queue.next_item, REVIEWER, pid)
    assert item is not None
    judge(any_engine, REVIEWER, item, "correct_refusal")
    assert estimates.estimates(any_engine, pid).audited == 1


def forty_versioned(engine: Engine) -> None:
    """Traces 0..39: index idx-1 when i % 4 is 0 or 1, idx-2 when 2, no index entry when 3;
    prompt p-a before trace 25, p-b from it."""

    def versions(i: int) -> dict[str, str]:
        out = {"model": "m1", "prompt": "p-a" if i < 25 else "p-b"}
        if i % 4 != 3:
            out["index"] = "idx-1" if i % 4 < 2 else "idx-2"
        return out

    bulk_traces(engine, 40, versions=versions)


def test_stratify_and_filter_by_index_and_prompt_version(any_engine: Engine) -> None:
    forty_versioned(any_engine)

    def counts(flt: PopulationFilter, strata: tuple[str, ...]) -> dict[str, int]:
        return {c.stratum: c.count for c in audit_plans.count_population(any_engine, flt, strata)}

    every = PopulationFilter()
    assert counts(every, ("version.index",)) == {"(none)": 10, "idx-1": 20, "idx-2": 10}
    # idx-1 and p-a: 0,1,4,5,8,9,12,13,16,17,20,21,24; idx-1 and p-b: 25,28,29,32,33,36,37
    idx1 = PopulationFilter(index_versions=("idx-1",))
    assert counts(idx1, ("version.prompt",)) == {"p-a": 13, "p-b": 7}
    assert counts(every, ("version.index", "version.prompt")) == {
        "(none) · p-a": 6,  # 3, 7, 11, 15, 19, 23
        "(none) · p-b": 4,  # 27, 31, 35, 39
        "idx-1 · p-a": 13,
        "idx-1 · p-b": 7,
        "idx-2 · p-a": 6,  # 2, 6, 10, 14, 18, 22
        "idx-2 · p-b": 4,  # 26, 30, 34, 38
    }
    assert counts(
        PopulationFilter(index_versions=("idx-2", population.NONE)), ("version.index",)
    ) == {
        "(none)": 10,
        "idx-2": 10,
    }
    both = PopulationFilter(index_versions=("idx-2",), prompt_versions=("p-b",))
    assert counts(both, ()) == {"all": 4}
    assert counts(PopulationFilter(embedding_versions=("e1",)), ()) == {}
    assert counts(PopulationFilter(reranker_versions=(population.NONE,)), ()) == {"all": 40}
    assert "index versions: idx-1" in idx1.describe()
    # the filter pickers read the rollup and agree with the traces
    assert audit_plans.dimension_values(any_engine, "version.index") == ["(none)", "idx-1", "idx-2"]
    assert audit_plans.dimension_values(any_engine, "version.prompt") == ["p-a", "p-b"]
    assert audit_plans.dimension_values(any_engine, "version.reranker") == ["(none)"]

    # a plan stores the version filter, draws only idx-1 traces, the same ones every time
    spec = dict(filter=idx1, strata=("version.prompt",), total=10, seed=5)
    first, second = plan(any_engine, "first", **spec), plan(any_engine, "second", **spec)
    with read_session(any_engine) as s:
        row = s.get(SamplingPlan, first)
        assert row is not None and row.population_filter == {"index_versions": ["idx-1"]}
    view = audit_plans.get_plan(any_engine, first)
    assert view is not None and view.spec.filter == idx1
    assert {c.stratum: c.count for c in view.population} == {"p-a": 13, "p-b": 7}
    for pid in (first, second):
        write(any_engine, audit_plans.draw_plan, REVIEWER, pid)
    a, b = drawn_ids(any_engine, first), drawn_ids(any_engine, second)
    assert a == b and len(a) == 10 == len(set(a))
    assert audit_plans.verify_sample(any_engine, first) is True
    with read_session(any_engine) as s:
        rows = s.execute(select(Trace.id, Trace.sample_key, Trace.versions).order_by(Trace.id))
        pop = [(i, k, v) for i, k, v in rows if v.get("index") == "idx-1"]
    expected = draw_sample_by_key(
        5, [p[0] for p in pop], [p[1] for p in pop], [p[2]["prompt"] for p in pop], view.allocation
    )
    assert expected == a


def test_a_filter_stored_before_the_version_filters_reads_as_any_version(
    any_engine: Engine,
) -> None:
    forty_versioned(any_engine)
    old = {"decisions": ["answer", "abstain"], "include_restricted": False}
    flt = PopulationFilter.from_json(old)
    assert flt == PopulationFilter(decisions=("answer", "abstain"), include_restricted=False)
    assert flt.index_versions == flt.prompt_versions == flt.reranker_versions == ()
    assert flt.to_json() == old  # filters without a version filter are stored as before
    # a plan row written before: its population reads the same, and it draws
    pid = plan(any_engine, "old", filter=flt, strata=("decision",), total=4, seed=3)

    def rewrite(s: object) -> None:
        from sqlalchemy.orm import Session

        assert isinstance(s, Session)
        s.execute(update(SamplingPlan).where(SamplingPlan.id == pid).values(population_filter=old))

    run_write(any_engine, rewrite)
    assert audit_plans.check_population(any_engine, pid).changed is False
    view = audit_plans.get_plan(any_engine, pid)
    assert view is not None
    assert {c.stratum: c.count for c in view.population} == {"abstain": 8, "answer": 8}
    assert write(any_engine, audit_plans.draw_plan, REVIEWER, pid).items == 4


# --- queue, reservations, concurrency ------------------------------------------------------


def test_queue_respects_overlap_reservations_and_their_expiry(engine: Engine) -> None:
    two_strata(engine, 5, 5)
    pid = plan(engine, total=3, overlap=2)
    write(engine, audit_plans.draw_plan, REVIEWER, pid)
    t0 = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    a = write(engine, queue.next_item, REVIEWER, pid, now=t0)
    b = write(engine, queue.next_item, REVIEWER2, pid, now=t0)
    assert a is not None and b is not None and a != b  # a held item is not handed out
    assert write(engine, queue.next_item, REVIEWER, pid, now=t0) == a  # mine comes back to me
    # after the reservation expires the slot returns to the queue
    later = t0 + dt.timedelta(minutes=audit_plans.RESERVATION_MINUTES + 1)
    third = make_actor("reviewer", "rev4@test.example", clearance=True)
    assert write(engine, queue.next_item, third, pid, now=later) == a
    judge(engine, REVIEWER, a, "correct_refusal")
    judge(engine, third, a, "false_refusal")
    with pytest.raises(InputError, match="already has its 2 verdict"):
        judge(engine, REVIEWER2, a, "correct_refusal")
    prog = queue.progress(engine, REVIEWER, pid)
    assert (prog.items, prog.complete, prog.verdicts, prog.mine) == (3, 1, 2, 1)
    write(engine, queue.release_item, REVIEWER2, b)
    assert write(engine, queue.next_item, REVIEWER2, pid, exclude=[b]) not in (a, b)


def test_two_reviewers_at_once_get_different_items_and_both_verdicts_land(
    engine: Engine,
) -> None:
    two_strata(engine, 20, 20)
    pid = plan(engine, total=8)
    write(engine, audit_plans.draw_plan, REVIEWER, pid)
    people = [make_actor("reviewer", f"r{i}@test.example", clearance=True) for i in range(4)]
    got: dict[str, int | None] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(people))

    def go(who: Actor) -> None:
        barrier.wait()
        try:
            item = write(engine, queue.next_item, who, pid)
            got[who.email] = item
            assert item is not None
            judge(engine, who, item, "correct_refusal")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(p,)) for p in people]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(set(got.values())) == len(people)  # nobody got someone else's item
    assert queue.progress(engine, REVIEWER, pid).verdicts == len(people)


def test_verdicts_are_append_only_and_a_stale_edit_is_refused(engine: Engine) -> None:
    two_strata(engine, 3, 3)
    pid = plan(engine, total=2)
    write(engine, audit_plans.draw_plan, REVIEWER, pid)
    item = write(engine, queue.next_item, REVIEWER, pid)
    assert item is not None
    first = write(
        engine, verdicts.submit_verdict, REVIEWER, item, VerdictIn("correct_refusal"), None
    )
    with pytest.raises(StaleWriteError, match=r"changed .* after you opened it"):
        write(engine, verdicts.submit_verdict, REVIEWER, item, VerdictIn("correct_refusal"), None)
    edit = VerdictIn("false_refusal", ("retrieval_missed",), "the FAQ answers it")
    second = write(engine, verdicts.submit_verdict, REVIEWER, item, edit, first.id)
    assert second.replaces_id == first.id
    with pytest.raises(StaleWriteError):
        write(
            engine, verdicts.submit_verdict, REVIEWER, item, VerdictIn("correct_refusal"), first.id
        )
    history = verdicts.verdict_history(engine, REVIEWER, item)
    assert [h.verdict for h in history] == ["correct_refusal", "false_refusal"]
    mine = verdicts.my_verdict(engine, REVIEWER, item)
    assert mine is not None and mine.verdict == "false_refusal"


def test_blind_review_hides_other_verdicts_until_mine_is_in(engine: Engine) -> None:
    two_strata(engine, 3, 3)
    blind = plan(engine, "blind", total=1, overlap=2)
    open_ = plan(engine, "open", total=1, overlap=2, blind=False)
    for pid in (blind, open_):
        write(engine, audit_plans.draw_plan, REVIEWER, pid)
        item = write(engine, queue.next_item, REVIEWER, pid)
        assert item is not None
        judge(engine, REVIEWER, item, "correct_refusal")
        seen = verdicts.item_verdicts(engine, REVIEWER2, item)
        assert (seen is None) == (pid == blind)
        assert len(verdicts.verdict_history(engine, REVIEWER2, item)) == (0 if pid == blind else 1)
        judge(engine, REVIEWER2, item, "correct_refusal")
        assert len(verdicts.item_verdicts(engine, REVIEWER2, item) or []) == 2


def test_restricted_traces_only_reach_reviewers_with_clearance(engine: Engine) -> None:
    add_trace(engine, "secret", restricted=True, query="What did the Halvorsen dispute settle?",
              answer_text="It settled for a confidential sum.")  # fmt: skip
    add_trace(engine, "open", chunks=[REFUND, CONTRACT])
    pid = plan(engine, total=2)
    write(engine, audit_plans.draw_plan, REVIEWER, pid)
    with read_session(engine) as s:
        by_trace = dict(
            s.execute(
                select(Trace.trace_id, AuditItem.id).join(AuditItem, AuditItem.trace_pk == Trace.id)
            ).all()
        )
    assert write(engine, queue.next_item, UNCLEARED, pid) == by_trace["open"]
    judge(engine, UNCLEARED, by_trace["open"], "correct_refusal")
    assert write(engine, queue.next_item, UNCLEARED, pid) is None
    assert queue.progress(engine, UNCLEARED, pid).waiting_for_clearance == 1
    with pytest.raises(PermissionDenied, match="restricted"):
        audit_items.get_item(engine, UNCLEARED, by_trace["secret"])
    with pytest.raises(PermissionDenied):
        write(engine, queue.reserve_item, UNCLEARED, by_trace["secret"])
    with pytest.raises(PermissionDenied):
        judge(engine, UNCLEARED, by_trace["secret"], "correct_refusal")
    # chunks removed by authorization: their text only with clearance
    view = audit_items.get_item(engine, UNCLEARED, by_trace["open"])
    assert view is not None
    hidden = [c for c in view.chunks if c.filtered]
    assert hidden and hidden[0].hidden and CONTRACT["text"] not in hidden[0].text
    assert view.context_ids == (REFUND["chunk_id"],)
    cleared = audit_items.get_item(engine, REVIEWER, by_trace["open"])
    assert cleared is not None and CONTRACT["text"] in [c.text for c in cleared.chunks]
    out = io.StringIO()
    export.export_jsonl(engine, UNCLEARED, pid, out)
    assert "Halvorsen" not in out.getvalue() and REDACTED in out.getvalue()
    out = io.StringIO()
    export.export_jsonl(engine, REVIEWER, pid, out)
    assert "Halvorsen" in out.getvalue()


# --- verdicts and claims -------------------------------------------------------------------

ANSWER = (
    f"Monthly charges can be refunded within 14 days [{REFUND['chunk_id']}]. "
    "The Team plan has 20 seats. Enterprise gets a credit for unused months."
)
CITATIONS = [
    {"claim": "The Team plan includes 20 seats.", "chunk_ids": [PLANS["chunk_id"]]},
    {"claim": "Enterprise credit for unused prepaid months", "chunk_ids": [CONTRACT["chunk_id"]]},
]


def test_claims_are_proposed_with_their_citations() -> None:
    claims = audit_items.propose_claims(ANSWER, CITATIONS)
    assert [c.text for c in claims] == [
        f"Monthly charges can be refunded within 14 days [{REFUND['chunk_id']}].",
        "The Team plan has 20 seats.",
        "Enterprise gets a credit for unused months.",
    ]
    assert [c.cited for c in claims] == [
        (REFUND["chunk_id"],),
        (PLANS["chunk_id"],),  # by shared words: team, plan, seats
        (CONTRACT["chunk_id"],),
    ]
    assert audit_items.propose_claims("Yes.", [{"claim": "x", "chunk_ids": ["c1"]}]) == [
        ClaimDraft("Yes.", ("c1",))
    ]
    assert audit_items.propose_claims("") == []


def test_an_answer_passes_only_if_every_claim_is_supported_by_its_context(
    engine: Engine,
) -> None:
    add_trace(engine, "ans", answer_text=ANSWER, citations=CITATIONS,
              chunks=[REFUND, PLANS, CONTRACT])  # fmt: skip
    pid = plan(engine, total=1)
    write(engine, audit_plans.draw_plan, REVIEWER, pid)
    item = write(engine, queue.next_item, REVIEWER, pid)
    assert item is not None
    view = audit_items.get_item(engine, REVIEWER, item)
    assert view is not None
    claims = audit_items.propose_claims(view.answer_text, view.citations)
    all_ok = [ClaimDraft(c.text, c.cited, "supported") for c in claims]
    report = audit_items.check_claims(all_ok, view.context_ids)
    # the third claim cites a chunk that authorization filtered out: not in the context
    assert report.answer_passes is False
    assert report.invalid_ids == (CONTRACT["chunk_id"],)
    with pytest.raises(InputError, match=r"claim 3 .*not in the context"):
        write(
            engine,
            verdicts.submit_verdict,
            REVIEWER,
            item,
            VerdictIn("supported_answer", claims=tuple(all_ok)),
            None,
        )
    contradicted = [*all_ok[:2], ClaimDraft(claims[2].text, (), "contradicted")]
    with pytest.raises(InputError, match=r"claim 3 .*contradicted"):
        write(
            engine,
            verdicts.submit_verdict,
            REVIEWER,
            item,
            VerdictIn("supported_answer", claims=tuple(contradicted)),
            None,
        )
    with pytest.raises(InputError, match="say where it failed"):
        write(
            engine, verdicts.submit_verdict, REVIEWER, item, VerdictIn("partially_supported"), None
        )
    with pytest.raises(InputError, match="has no failing stage"):
        write(
            engine,
            verdicts.submit_verdict,
            REVIEWER,
            item,
            VerdictIn("supported_answer", ("retrieval_missed",)),
            None,
        )
    with pytest.raises(InputError, match="needs a note"):
        write(engine, verdicts.submit_verdict, REVIEWER, item, VerdictIn("restricted_leak"), None)
    with pytest.raises(InputError, match="claim 2 is empty"):
        write(engine, verdicts.submit_verdict, REVIEWER, item,
            VerdictIn("supported_answer", claims=(all_ok[0], ClaimDraft("  "))), None,
        )  # fmt: skip
    only_two = tuple(all_ok[:2])  # the reviewer removed the third claim from the list
    with pytest.raises(InputError, match="every claim is supported"):
        write(engine, verdicts.submit_verdict, REVIEWER, item,
            VerdictIn("unsupported_answer", ("generator_ignored_signal",), claims=only_two), None,
        )  # fmt: skip
    saved = write(
        engine,
        verdicts.submit_verdict,
        REVIEWER,
        item,
        VerdictIn("partially_supported", ("citation_partial",), "3rd claim", tuple(contradicted)),
        None,
    )
    assert [c["status"] for c in saved.claims] == ["pass", "pass", "fail"]
    assert saved.claim_drafts[2] == ClaimDraft(claims[2].text, (), "contradicted")


# --- estimates -----------------------------------------------------------------------------


def audited_plan(engine: Engine) -> int:
    """100 abstentions and 300 answers; 10 audited from each: 2 false refusals among the
    abstentions, 5 unsupported answers among the answers."""
    two_strata(engine, 100, 300)
    pid = plan(engine, strata=("decision",), total=20, allocation="equal")
    write(engine, audit_plans.draw_plan, REVIEWER, pid)
    seen: Counter[str] = Counter()
    while (item := write(engine, queue.next_item, REVIEWER, pid)) is not None:
        view = audit_items.get_item(engine, REVIEWER, item)
        assert view is not None
        seen[view.stratum] += 1
        if view.stratum == "abstain":
            judge(engine, REVIEWER, item,
                  "false_refusal" if seen["abstain"] <= 2 else "correct_refusal")  # fmt: skip
        else:
            judge(engine, REVIEWER, item,
                  "unsupported_answer" if seen["answer"] <= 5 else "supported_answer")  # fmt: skip
    return pid


def test_weighted_rates_and_intervals_match_hand_worked_numbers(engine: Engine) -> None:
    pid = audited_plan(engine)
    report = estimates.estimates(engine, pid)
    rates = report.rates.set_index("verdict")
    assert (report.population, report.sampled, report.audited) == (400, 20, 20)
    assert list(report.rates["verdict"][:4]) == list(vocabulary.HEADLINE)

    # false refusals: W_abstain = 100/400 = 0.25, p = 2/10 -> 0.25 * 0.2 = 0.05
    # Cochran: variance 0.25^2 * (10/9 * 0.2*0.8)/10 * (1 - 10/100) = 0.001
    # interval: Wilson on the effective sample size 0.05 * 0.95 / 0.001 = 47.5
    fr = rates.loc["false_refusal"]
    assert fr["population_rate"] == pytest.approx(0.05)
    lo, hi = wilson_bounds(0.05 * 47.5, 47.5, Z95)
    assert fr["population_lo"] == pytest.approx(float(lo))
    assert fr["population_hi"] == pytest.approx(float(hi))
    assert 0 < fr["population_lo"] < 0.05 < fr["population_hi"]
    assert (fr["count"], fr["audited"], fr["sample_rate"]) == (2, 20, 0.1)  # raw: 2 / 20
    raw = wilson_interval(2, 20)
    assert raw is not None
    assert (fr["sample_lo"], fr["sample_hi"]) == (pytest.approx(raw[0]), pytest.approx(raw[1]))
    assert fr["estimated_traces"] == 20.0  # 0.05 * 400

    # unsupported answers: W_answer = 0.75, p = 5/10 -> 0.375 (the raw rate says 0.25)
    # variance 0.75^2 * (10/9 * 0.25)/10 * (1 - 10/300) = 0.015104166...
    un = rates.loc["unsupported_answer"]
    assert un["population_rate"] == pytest.approx(0.375)
    assert un["sample_rate"] == 0.25
    var = 0.75**2 * (10 / 9 * 0.25) / 10 * (1 - 10 / 300)
    lo, hi = wilson_bounds(0.375 * (0.375 * 0.625 / var), 0.375 * 0.625 / var, Z95)
    assert (un["population_lo"], un["population_hi"]) == (
        pytest.approx(float(lo)),
        pytest.approx(float(hi)),
    )
    assert rates.loc["correct_refusal", "population_rate"] == pytest.approx(0.25 * 0.8)
    assert rates.loc["restricted_leak", "count"] == 0

    strata = report.strata.set_index("stratum")
    assert strata.loc["answer", "weight"] == 30.0  # 300 / 10
    assert strata.loc[
        "abstain", ["population", "planned", "audited", "false_refusal"]
    ].tolist() == [
        100,
        10,
        10,
        2,
    ]

    # by slice: decision is a slice here too, so each slice is one stratum
    sl = estimates.by_slice(engine, pid, "decision", "unsupported_answer").set_index("slice")
    assert sl.loc["answer", "population_rate"] == pytest.approx(0.5)
    assert sl.loc["answer", "estimated_traces_in_slice"] == 300.0
    assert sl.loc["abstain", "count"] == 0


def test_domain_estimate_against_a_hand_worked_ratio_estimate() -> None:
    # stratum A: N=100, 4 audited; B: N=200, 2 audited. (in slice, failure) per item:
    items = pd.DataFrame(
        {
            "stratum": ["A", "A", "A", "A", "B", "B"],
            "in_domain": [True, True, False, False, True, False],
            "success": [True, False, False, True, True, False],
        }
    )
    est = estimates.domain_estimate(items, {"A": 100, "B": 200})
    # weights 25 and 100: X = 25*2 + 100*1 = 150, Y = 25*1 + 100*1 = 125, R = 5/6
    assert est.estimate == pytest.approx(5 / 6)
    assert est.estimated_size == pytest.approx(150)
    # residuals e = y - R x: A (1/6, -5/6, 0, 0): sample variance (n-1) 11/54;
    # B (1/6, 0): 1/72. 100^2 (1 - 4/100) (11/54)/4 + 200^2 (1 - 2/200) (1/72)/2
    # = 4400/9 + 275 = 6875/9
    assert est.std_error == pytest.approx(math.sqrt(6875 / 9) / 150)
    assert est.single_item_strata == ()
    assert (est.sample, est.successes) == (3, 2) and est.raw_rate == pytest.approx(2 / 3)
    # over the whole population it is the stratified estimate
    whole = estimates.domain_estimate(items.assign(in_domain=True), {"A": 100, "B": 200})
    ref = weighted_estimate(
        pd.DataFrame(
            {
                "stratum": ["A", "B"],
                "population": [100, 200],
                "sample": [4, 2],
                "successes": [2, 1],
            }
        )
    )
    assert whole.estimate == pytest.approx(ref.estimate)
    assert whole.std_error == pytest.approx(ref.std_error)
    empty = estimates.domain_estimate(items.assign(in_domain=False), {"A": 100, "B": 200})
    assert empty.estimate is None
    with pytest.raises(InputError, match="not in the population"):
        estimates.domain_estimate(items, {"A": 100})


def test_majority_verdict_counts_and_ties_go_to_the_more_severe() -> None:
    assert vocabulary.outcome(["correct_refusal", "false_refusal", "correct_refusal"]) == (
        "correct_refusal"
    )
    assert vocabulary.outcome(["supported_answer", "unsupported_answer"]) == "unsupported_answer"
    assert vocabulary.outcome([]) is None


# --- promotion, export, demo ---------------------------------------------------------------


def test_promote_an_audited_trace_to_a_draft_case(demo_engine: Engine, tax: Taxonomy) -> None:
    add_trace(
        demo_engine,
        "refused-wrongly",
        query="Can we still get a refund for last week's monthly charge?",
        decision="abstain",
        reason_code="support_below_threshold",
        answer_text="The sources available to you do not establish this.",
        chunks=[REFUND, CONTRACT, {"chunk_id": "GONE@1#1", "doc_id": "GONE", "doc_version": 1}],
        feedback="expected_answer",
        user_role="customer_admin",
    )
    pid = plan(demo_engine, total=1)
    write(demo_engine, audit_plans.draw_plan, REVIEWER, pid)
    item = write(demo_engine, queue.next_item, REVIEWER, pid)
    assert item is not None
    with pytest.raises(InputError, match="record your verdict"):
        write(demo_engine, promote.promote_to_case, REVIEWER, item, tax)
    judge(demo_engine, REVIEWER, item, "false_refusal")
    case_id = write(demo_engine, promote.promote_to_case, REVIEWER, item, tax, split="validation")
    view = cases.get_case(demo_engine, case_id=case_id)
    assert view is not None
    assert view.status == "draft" and view.expected_decision == "answer"
    assert view.question == "Can we still get a refund for last week's monthly charge?"
    assert {(d.ref, d.visibility) for d in view.documents} == {
        ("POL-REFUND-MONTHLY@2", "visible"),
        ("CTR-MSA-ENT@2", "forbidden"),  # authorization filtered it out of the context
    }  # GONE@1 is not in the corpus and is left out
    assert "refused-wrongly" in view.notes
    assert "access_filtered_answer" in view.slices
    mine = verdicts.my_verdict(demo_engine, REVIEWER, item)
    assert mine is not None and mine.promoted_case_id == case_id
    assert promote.promoted_from(demo_engine, case_id)[0]["trace_id"] == "refused-wrongly"
    with pytest.raises(InputError, match="already a case"):
        write(demo_engine, promote.promote_to_case, REVIEWER, item, tax)
    # an edit of the verdict keeps the link
    edit = VerdictIn("false_refusal", ("filter_removed",), "filter")
    assert write(
        demo_engine, verdicts.submit_verdict, REVIEWER, item, edit, mine.id
    ).promoted_case_id
    assert promote.suggested_decision("unsupported_answer", "answer", None, tax) == (
        "abstain",
        ("required_claim_not_covered",),
        "near_miss",
    )
    assert promote.suggested_decision("correct_refusal", "escalate", None, tax) == (
        "escalate",
        ("restricted_topic",),
        "restricted_topic",
    )


def _judged_item(engine: Engine, trace_id: str) -> int:
    add_trace(engine, trace_id, decision="abstain", chunks=[REFUND], feedback="expected_answer")
    pid = plan(engine, total=1)
    write(engine, audit_plans.draw_plan, REVIEWER, pid)
    item = write(engine, queue.next_item, REVIEWER, pid)
    assert item is not None
    judge(engine, REVIEWER, item, "false_refusal")
    return item


def _case_count(engine: Engine) -> int:
    with read_session(engine) as s:
        return int(s.scalar(select(func.count(Case.id))) or 0)


def test_a_promotion_that_loses_the_race_leaves_no_unlinked_case(
    demo_engine: Engine, tax: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another reviewer's promotion of the same trace lands between the checks and the link:
    the case and the link are one transaction, so nothing of this promotion is written."""
    item = _judged_item(demo_engine, "raced")
    before = _case_count(demo_engine)
    calls: list[int | None] = []

    def raced(s: object, item_id: int, verdict_id: int | None) -> int | None:
        calls.append(verdict_id)
        return None if verdict_id is None else 999_999  # the link finds it taken

    monkeypatch.setattr(promote, "_promoted_elsewhere", raced)
    with pytest.raises(InputError, match=r"at the same moment.*nothing was saved"):
        write(demo_engine, promote.promote_to_case, REVIEWER, item, tax)
    assert len(calls) == 2  # checked before the case was inserted and again at the link
    assert _case_count(demo_engine) == before
    mine = verdicts.my_verdict(demo_engine, REVIEWER, item)
    assert mine is not None and mine.promoted_case_id is None


def test_a_failure_after_the_case_is_inserted_rolls_the_case_back(
    demo_engine: Engine, tax: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    item = _judged_item(demo_engine, "broken-link")
    before = _case_count(demo_engine)
    inserted: list[int] = []

    def broken(s: object, actor: object, verdict_id: int, item_id: int, case_id: int) -> None:
        inserted.append(case_id)
        raise RuntimeError("the link failed")

    monkeypatch.setattr(promote, "_link", broken)
    with pytest.raises(RuntimeError, match="the link failed"):
        write(demo_engine, promote.promote_to_case, REVIEWER, item, tax)
    assert inserted  # the case had been inserted when the link failed
    assert _case_count(demo_engine) == before
    monkeypatch.undo()
    case_id = write(demo_engine, promote.promote_to_case, REVIEWER, item, tax)
    assert _case_count(demo_engine) == before + 1
    mine = verdicts.my_verdict(demo_engine, REVIEWER, item)
    assert mine is not None and mine.promoted_case_id == case_id


def test_export_a_batch_as_jsonl_and_csv(engine: Engine) -> None:
    pid = audited_plan(engine)
    out = io.StringIO()
    assert export.export_jsonl(engine, REVIEWER, pid, out) == 20
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    head, items = lines[0], lines[1:]
    assert head["record"] == "plan" and head["seed"] == 0 and head["allocation_method"] == "equal"
    assert head["population"] == {"abstain": 100, "answer": 300}
    assert len(items) == 20 and {i["record"] for i in items} == {"item"}
    assert [i["position"] for i in items] == list(range(1, 21))
    assert Counter(i["outcome"] for i in items)["unsupported_answer"] == 5
    assert items[0]["verdicts"][0]["reviewer"] == REVIEWER.email

    out = io.StringIO()
    assert export.export_csv(engine, REVIEWER, pid, out) == 20
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert list(rows[0]) == export.CSV_COLUMNS
    assert Counter(r["verdict"] for r in rows)["false_refusal"] == 2
    assert {r["stratum_population"] for r in rows} == {"100", "300"}


def test_demo_builder_makes_one_finished_and_one_open_batch(
    engine: Engine, demo_engine: Engine, tax: Taxonomy
) -> None:
    assert batches.build_demo_audits(engine, tax) == 0  # no traces: nothing to audit
    built = 0
    if not audit_plans.list_plans(demo_engine):  # (once the demo loads traces, it has them)
        realistic_traces(demo_engine)
        built = batches.build_demo_audits(demo_engine, tax)
        assert built > 0
    assert batches.build_demo_audits(demo_engine, tax) == 0  # idempotent
    plans = {p.name: p for p in audit_plans.list_plans(demo_engine)}
    done = next(p for name, p in plans.items() if name.startswith(batches.DEMO_COMPLETE))
    running = plans[batches.DEMO_OPEN]
    assert done.status == "closed" and done.complete == done.items > 0
    assert running.status == "open" and 0 < running.complete < running.items
    assert built in (0, done.verdicts + running.verdicts)
    with read_session(demo_engine) as s:
        promoted = s.scalar(
            select(func.count(AuditVerdict.id)).where(AuditVerdict.promoted_case_id.is_not(None))
        )
        drafts = s.scalar(select(func.count(Case.id)).where(Case.notes.like("Promoted from%")))
    assert promoted == drafts == 1
    assert audit_plans.verify_sample(demo_engine, done.id) is True
    with pytest.raises(InputError, match="closed"):
        judge(
            demo_engine, REVIEWER, queue.list_items(demo_engine, done.id)[0].id, "correct_refusal"
        )


def test_rank_order_mixes_strata_in_the_queue(engine: Engine) -> None:
    two_strata(engine, 50, 50)
    pid = plan(engine, strata=("decision",), total=20)
    write(engine, audit_plans.draw_plan, REVIEWER, pid)
    strata = [r.stratum for r in queue.list_items(engine, pid, 1, 20)]
    assert set(strata[:8]) == {"abstain", "answer"}
    assert queue.count_items(engine, pid) == 20
    assert np.diff([r.position for r in queue.list_items(engine, pid, 1, 20)]).min() == 1


def test_the_draw_skips_the_recount_only_while_no_trace_was_added_or_deleted(
    engine: Engine,
) -> None:
    from review.traces import importer
    from tests.helpers.traces import make_trace

    two_strata(engine, 10, 20)
    pid = plan(engine, strata=("decision",), total=6)

    # the newest trace is deleted and one imported in its place: SQLite hands the new row
    # the same id, so rows and highest id match the count; the import still shows
    def drop_newest(s: object) -> None:
        from sqlalchemy.orm import Session

        assert isinstance(s, Session)
        s.execute(delete(Trace).where(Trace.id == s.scalar(select(func.max(Trace.id)))))

    run_write(engine, drop_newest)
    importer.import_items(
        engine, SYSTEM, [make_trace("replacement", decision="clarify")], source="test"
    )
    check = audit_plans.check_population(engine, pid)
    assert check.changed and "clarify: 0 → 1" in check.message()
    with pytest.raises(audit_plans.PopulationChanged):
        write(engine, audit_plans.draw_plan, REVIEWER, pid)
    write(engine, audit_plans.recount_plan, REVIEWER, pid)
    assert write(engine, audit_plans.draw_plan, REVIEWER, pid).items == 6


def test_domain_estimate_flags_one_item_strata_and_stays_honest_at_zero() -> None:
    items = pd.DataFrame(
        {
            "stratum": ["A"] * 20 + ["B"],
            "in_domain": [True] * 21,
            "success": [False] * 20 + [True],
        }
    )
    est = estimates.domain_estimate(items, {"A": 1000, "B": 50})
    assert est.single_item_strata == ("B",)
    assert est.lo is not None and est.hi is not None and est.hi - est.lo > 0.01
    none = estimates.domain_estimate(items.assign(success=False), {"A": 1000, "B": 50})
    assert none.estimate == 0 and none.lo == 0
    assert none.hi is not None and none.hi > 0.1  # Wilson's bound for 0 of 21, not 0.0
