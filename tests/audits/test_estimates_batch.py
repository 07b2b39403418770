"""Estimates of many plans at once (``estimates.tallies``/``estimates_of``, as the Monthly
review reads every open plan) equal the per-plan computation they replace (the reference in
tests/helpers/estimates_reference.py), value for value, on the demo and on random verdicts
over several plans on both databases; and ``estimate_from_counts`` equals
``weighted_estimate``."""

from __future__ import annotations

import datetime as dt
import random

import pandas as pd
import pytest
from sqlalchemy import Engine, event, insert, select, update

from review.audits import display, estimates
from review.audits import plans as audit_plans
from review.audits.plans import PlanSpec
from review.audits.population import PopulationFilter
from review.audits.vocabulary import VERDICTS
from review.core.errors import InputError
from review.core.sampling import estimate_from_counts, weighted_estimate
from review.core.taxonomy import load_taxonomy
from review.core.terms import PlanStatus
from review.monthly import report
from review.monthly.records import month_bounds
from storage.db import read_session, run_write
from storage.models import AuditItem, AuditVerdict, SamplingPlan
from tests.helpers.actors import REVIEWER
from tests.helpers.audits import bulk_traces
from tests.helpers.estimates_reference import (
    reference_audit_section,
    reference_estimates,
    same_report,
)
from tests.helpers.transact import write


def _plan_ids(engine: Engine) -> list[int]:
    with read_session(engine) as s:
        return list(s.scalars(select(SamplingPlan.id).order_by(SamplingPlan.id)))


def _same_month_section(engine: Engine) -> None:
    """The Monthly review's audit section equals the one built plan by plan, for the month
    of each plan (and a month with none of them)."""
    with read_session(engine) as s:
        days = set(s.scalars(select(SamplingPlan.created_at)).all())
    months = {f"{d:%Y-%m}" for d in days} | {"2001-01"}
    tax = load_taxonomy()
    for month in sorted(months):
        first, last = month_bounds(month)
        [(title, got)], charts = report.audit_hook(engine, tax, month, first, last)
        assert title == "Audit batches and weighted estimates" and charts == []
        pd.testing.assert_frame_equal(
            got, reference_audit_section(engine, first, last), check_exact=True
        )


def _compare_all(engine: Engine, confidence: float = 0.95) -> int:
    ids = _plan_ids(engine)
    batch = estimates.estimates_of(engine, ids, confidence)
    compared = 0
    for pid in ids:
        try:
            ref = reference_estimates(engine, pid, confidence)
        except InputError as exc:
            got = batch[pid]
            assert isinstance(got, InputError) and str(got) == str(exc)
            with pytest.raises(InputError, match="strata"):
                estimates.estimates(engine, pid, confidence)
            continue
        got = batch[pid]
        assert not isinstance(got, InputError), got
        same_report(got, ref)
        same_report(estimates.estimates(engine, pid, confidence), ref)
        # each rate reads as its row of the Audit page's rates table
        assert [display.rate_cells(r) for r in got.rate_rows] == display.rates_table(
            ref.rates
        ).to_dict(orient="records")
        compared += 1
    return compared


def test_demo_plans_match_the_per_plan_computation(demo_engine: Engine) -> None:
    assert _compare_all(demo_engine) >= 2
    assert _compare_all(demo_engine, 0.9) >= 2
    _same_month_section(demo_engine)


def _random_verdicts(engine: Engine, rng: random.Random, plan_ids: list[int]) -> None:
    """Verdicts by up to three reviewers on a random share of each plan's items, some
    revised (the newest per reviewer counts), ties between reviewers included."""
    with read_session(engine) as s:
        items = s.execute(
            select(AuditItem.id, AuditItem.plan_id).where(AuditItem.plan_id.in_(plan_ids))
        ).all()
    reviewers = ["a@test.example", "b@test.example", "c@test.example"]
    names = list(VERDICTS)
    rows = []
    share = {pid: rng.choice([0.0, 0.05, 0.5, 1.0]) for pid in plan_ids}
    for item_id, pid in items:
        if rng.random() >= share[pid]:
            continue
        for who in rng.sample(reviewers, rng.choice([1, 1, 2, 3])):
            for _ in range(rng.choice([1, 1, 2])):  # a revision appends a newer row
                rows.append({"item_id": item_id, "reviewer": who, "verdict": rng.choice(names)})
    rng.shuffle(rows)  # ids in no particular order of item or reviewer

    def work(s: object) -> None:
        for start in range(0, len(rows), 500):
            s.execute(insert(AuditVerdict), rows[start : start + 500])  # type: ignore[attr-defined]

    if rows:
        run_write(engine, work)


@pytest.mark.parametrize("seed", [1, 2])
def test_random_plans_match_the_per_plan_computation(any_engine: Engine, seed: int) -> None:
    rng = random.Random(seed)
    bulk_traces(
        any_engine,
        400,
        decide=lambda i: ("answer", "abstain", "clarify")[(i * 7) % 3] if i % 41 else None,
        feedback=lambda i: ("up", "down", None)[(i * 5) % 3],
    )
    specs = [
        PlanSpec(name="by decision", strata=("decision",), total=60, seed=rng.randrange(999)),
        PlanSpec(
            name="by decision and feedback",
            strata=("decision", "feedback"),
            allocation="equal",
            total=25,
            seed=rng.randrange(999),
        ),
        PlanSpec(name="one stratum", total=30, seed=rng.randrange(999)),
        PlanSpec(
            name="answers only",
            filter=PopulationFilter(decisions=("answer",)),
            strata=("feedback",),
            total=12,
            seed=rng.randrange(999),
        ),
        PlanSpec(name="never drawn", strata=("decision",), total=10),
        PlanSpec(name="census", strata=("feedback",), total=400, seed=3),
    ]
    ids = [write(any_engine, audit_plans.create_plan, REVIEWER, spec) for spec in specs]
    for pid in ids[:-2] + ids[-1:]:
        write(any_engine, audit_plans.draw_plan, REVIEWER, pid)
    _random_verdicts(any_engine, rng, ids)
    assert _compare_all(any_engine) == len(ids)
    _same_month_section(any_engine)
    # plans of an earlier month: a closed one is left out of this month's section, an
    # open one is still shown
    long_ago = dt.datetime(2024, 3, 5, tzinfo=dt.UTC)
    run_write(
        any_engine,
        lambda s: s.execute(
            update(SamplingPlan)
            .where(SamplingPlan.id.in_(ids[:2]))
            .values(created_at=long_ago, status=PlanStatus.closed)
        ),
    )
    run_write(
        any_engine,
        lambda s: s.execute(
            update(SamplingPlan).where(SamplingPlan.id == ids[1]).values(status=PlanStatus.open)
        ),
    )
    _same_month_section(any_engine)
    # a plan that does not exist: an error, in both paths
    missing = max(ids) + 1
    assert isinstance(estimates.estimates_of(any_engine, [missing])[missing], InputError)
    with pytest.raises(InputError, match="does not exist"):
        estimates.estimates(any_engine, missing)


def test_a_sample_larger_than_its_stratum_is_an_error_in_both_paths(any_engine: Engine) -> None:
    """Stored counts edited so a stratum's population is smaller than its audited sample:
    the plan has no estimates (the reason named), the other plans still do."""
    bulk_traces(any_engine, 50)
    ids = [
        write(
            any_engine,
            audit_plans.create_plan,
            REVIEWER,
            PlanSpec(name=f"p{i}", strata=("decision",), total=20, seed=i),
        )
        for i in range(2)
    ]
    for pid in ids:
        write(any_engine, audit_plans.draw_plan, REVIEWER, pid)
    _random_verdicts(any_engine, random.Random(5), ids)

    def shrink(s: object) -> None:
        plan = s.get(SamplingPlan, ids[0])  # type: ignore[attr-defined]
        population = dict(plan.population)
        population["strata"] = [{**c, "count": 0} for c in population["strata"]]
        plan.population = population

    run_write(any_engine, shrink)
    assert _compare_all(any_engine) == 1
    _same_month_section(any_engine)
    assert isinstance(estimates.estimates_of(any_engine, ids)[ids[0]], InputError)


def test_many_plans_take_the_same_statements(any_engine: Engine) -> None:
    """The statements behind the estimates of every plan do not grow with their number."""
    bulk_traces(any_engine, 100)
    ids = []
    for i in range(6):
        pid = write(
            any_engine,
            audit_plans.create_plan,
            REVIEWER,
            PlanSpec(name=f"p{i}", strata=("decision",), total=15, seed=i),
        )
        write(any_engine, audit_plans.draw_plan, REVIEWER, pid)
        ids.append(pid)
    _random_verdicts(any_engine, random.Random(9), ids)
    seen: list[str] = []

    def count(*args: object) -> None:
        seen.append(str(args[2]))

    event.listen(any_engine, "before_cursor_execute", count)
    try:
        estimates.estimates_of(any_engine, ids[:1])
        one = len(seen)
        seen.clear()
        estimates.estimates_of(any_engine, ids)
        assert len(seen) == one
    finally:
        event.remove(any_engine, "before_cursor_execute", count)


def test_estimate_from_counts_equals_weighted_estimate() -> None:
    rng = random.Random(4)
    for _ in range(300):
        rows = []
        for h in range(rng.randint(0, 6)):
            big_n = rng.choice([0, 1, 2, 5, 40, 1000])
            n = rng.randint(0, big_n)
            rows.append((f"s{h}", big_n, n, rng.randint(0, n)))
        conf = rng.choice([0.8, 0.9, 0.95, 0.99])
        frame = pd.DataFrame(rows, columns=["stratum", "population", "sample", "successes"])
        assert estimate_from_counts(rows, conf) == weighted_estimate(frame, conf)
    bad = [
        [("a", 10, 11, 0)],
        [("a", 10, 5, 6)],
        [("a", 10, 2, 1), ("a", 5, 1, 0)],
        [("a", -1, 0, 0), ("b", 3, 1, 0)],
    ]
    for rows in bad:
        frame = pd.DataFrame(rows, columns=["stratum", "population", "sample", "successes"])
        with pytest.raises(InputError) as want:
            weighted_estimate(frame)
        with pytest.raises(InputError) as got:
            estimate_from_counts(rows)
        assert str(got.value) == str(want.value)
    with pytest.raises(InputError):
        estimate_from_counts([("a", 10, 5, 1)], confidence=1.5)
