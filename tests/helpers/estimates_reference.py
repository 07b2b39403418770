"""The reference for a plan's estimates: the per-plan computation as it was before plans'
tallies were gathered together (``review.audits.estimates.tallies``): every item's outcome
from ``item_outcomes``, then for each verdict a data frame of per-stratum counts given to
``weighted_estimate``. The tests compare the fast path with it, value for value."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlalchemy import Engine

from review.audits import display, plans
from review.audits.estimates import (
    RATE_COLUMNS,
    EstimateReport,
    estimate_row,
    item_outcomes,
)
from review.audits.plans import plan_row, stored_allocation, stored_counts
from review.audits.vocabulary import HEADLINE, VERDICTS
from review.core import readable
from review.core.errors import InputError
from review.core.sampling import weighted_estimate
from review.core.terms import PlanStatus
from storage.db import read_session


@dataclass(frozen=True)
class ReferenceReport:
    """``EstimateReport`` as it was: its rates and strata built as data frames at once."""

    rates: pd.DataFrame
    strata: pd.DataFrame
    population: int
    sampled: int
    audited: int
    disagreements: int
    confidence: float
    single_item_strata: tuple[str, ...] = ()


def _rate_row(
    verdict: str, population: Mapping[str, int], outcomes: pd.DataFrame, confidence: float
) -> dict[str, Any]:
    audited = outcomes[outcomes["outcome"].notna()]
    frame = pd.DataFrame(
        [
            {
                "stratum": name,
                "population": size,
                "sample": int((audited["stratum"] == name).sum()),
                "successes": int(
                    ((audited["stratum"] == name) & (audited["outcome"] == verdict)).sum()
                ),
            }
            for name, size in population.items()
        ],
        columns=["stratum", "population", "sample", "successes"],
    )
    return estimate_row(verdict, weighted_estimate(frame, confidence))


def reference_estimates(engine: Engine, plan_id: int, confidence: float = 0.95) -> ReferenceReport:
    with read_session(engine) as s:
        plan = plan_row(s, plan_id)
        counts = stored_counts(plan)
        allocation = stored_allocation(plan)
    population = {c.stratum: c.count for c in counts}
    outcomes = item_outcomes(engine, plan_id)
    order = [*HEADLINE, *[v for v in VERDICTS if v not in HEADLINE]]
    rates = pd.DataFrame(
        [_rate_row(v, population, outcomes, confidence) for v in order], columns=RATE_COLUMNS
    )
    audited = outcomes[outcomes["outcome"].notna()]
    strata_rows = []
    for name, size in population.items():
        in_h = audited[audited["stratum"] == name]
        n_h = len(in_h)
        row: dict[str, Any] = {
            "stratum": name,
            "population": size,
            "planned": allocation.get(name, 0),
            "audited": n_h,
            "weight": size / n_h if n_h else None,
        }
        for v in VERDICTS:
            row[v] = int((in_h["outcome"] == v).sum())
        strata_rows.append(row)
    strata = pd.DataFrame(
        strata_rows, columns=["stratum", "population", "planned", "audited", "weight", *VERDICTS]
    )
    return ReferenceReport(
        rates,
        strata,
        sum(population.values()),
        len(outcomes),
        len(audited),
        int(outcomes["disagree"].sum()) if len(outcomes) else 0,
        confidence,
        tuple(
            str(r["stratum"]) for r in strata_rows if r["audited"] == 1 and int(r["population"]) > 1
        ),
    )


def same_report(fast: EstimateReport, ref: ReferenceReport) -> None:
    """Assert two reports are equal: every number, every type of column, every flag."""
    pd.testing.assert_frame_equal(fast.rates, ref.rates, check_exact=True)
    pd.testing.assert_frame_equal(fast.strata, ref.strata, check_exact=True)
    assert (
        fast.population,
        fast.sampled,
        fast.audited,
        fast.disagreements,
        fast.confidence,
        fast.single_item_strata,
    ) == (
        ref.population,
        ref.sampled,
        ref.audited,
        ref.disagreements,
        ref.confidence,
        ref.single_item_strata,
    )


def reference_audit_section(engine: Engine, first: dt.date, last: dt.date) -> pd.DataFrame:
    """The Monthly review's "Audit batches and weighted estimates" table as it was built:
    each shown plan's estimates computed on their own, read through ``rates_table``."""
    rows = []
    for plan in plans.list_plans(engine):
        if not (first <= plan.created_at.date() <= last) and plan.status == PlanStatus.closed:
            continue
        try:
            est = reference_estimates(engine, plan.id)
        except InputError:
            continue
        for r in display.rates_table(est.rates.head(4)).to_dict(orient="records"):
            rows.append(
                {
                    "batch": plan.name,
                    "status": readable.humanize(str(plan.status)),
                    "batch audited": f"{est.audited:,} of {est.sampled:,}",
                    **r,
                }
            )
    return pd.DataFrame(rows)
