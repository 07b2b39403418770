"""Estimates: each verdict's rate weighted back to the population.

**Estimates** weight each stratum by population / audited sample (``weighted_estimate``) and
show the raw sample rate with its Wilson interval beside it; slices that cut across strata use
the ratio estimator (``domain_estimate``). A plan's estimates are made from its tally (audited
items per stratum and verdict, ``tallies``), gathered for many plans in the same few
statements, so a page showing every open plan costs the same whatever their number.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine, func, select

from review.audits.plans import plan_row, stored_allocation, stored_counts
from review.audits.population import NONE
from review.audits.verdicts import current_verdicts
from review.audits.vocabulary import HEADLINE, VERDICTS, outcome
from review.core import readable
from review.core.errors import InputError
from review.core.sampling import StratifiedEstimate, estimate_from_counts, wilson_interval
from storage.db import one_of, read_session
from storage.models import AuditItem, AuditVerdict, SamplingPlan, Trace

__all__ = [
    "RATE_COLUMNS",
    "SLICE_DIMS",
    "STRATA_COLUMNS",
    "DomainEstimate",
    "EstimateReport",
    "PlanTally",
    "by_slice",
    "domain_estimate",
    "estimate_row",
    "estimates",
    "estimates_of",
    "item_outcomes",
    "report_of",
    "tallies",
]


# --- estimates ------------------------------------------------------------------------------

SLICE_DIMS = (
    "decision",
    "reason_code",
    "feedback",
    "customer_tier",
    "language",
    "document_type",
    "policy_version",
    "model_version",
)


def item_outcomes(engine: Engine, plan_id: int) -> pd.DataFrame:
    """One row per sampled item: stratum, the item's verdict (majority of its reviewers; None
    until audited), how many reviewers and whether they disagree, and the trace fields used
    for slices. The sample is bounded by the plan's total, so this frame stays small."""
    with read_session(engine) as s:
        rows = s.execute(
            select(
                AuditItem.id.label("item_id"),
                AuditItem.stratum,
                AuditItem.position,
                Trace.trace_id,
                *[getattr(Trace, d) for d in SLICE_DIMS],
            )
            .join(Trace, Trace.id == AuditItem.trace_pk)
            .where(AuditItem.plan_id == plan_id)
            .order_by(AuditItem.position)
        ).all()
        current = current_verdicts(s, [r.item_id for r in rows])
    records = []
    for r in rows:
        vs = [v.verdict for v in current.get(r.item_id, [])]
        rec = r._asdict()
        rec.update(
            outcome=outcome(vs),
            reviewers=len(vs),
            disagree=len(set(vs)) > 1,
        )
        records.append(rec)
    cols = [
        "item_id",
        "stratum",
        "position",
        "trace_id",
        *SLICE_DIMS,
        "outcome",
        "reviewers",
        "disagree",
    ]
    return pd.DataFrame(records, columns=cols)


RATE_COLUMNS = [
    "verdict",
    "label",
    "count",
    "audited",
    "sample_rate",
    "sample_lo",
    "sample_hi",
    "population_rate",
    "population_lo",
    "population_hi",
    "estimated_traces",
    "unsampled_share",
]


STRATA_COLUMNS = ["stratum", "population", "planned", "audited", "weight", *VERDICTS]


@dataclass(frozen=True)
class EstimateReport:
    """Estimates for one batch: ``rate_rows`` one per verdict (headline first, keys
    ``RATE_COLUMNS``), ``strata_rows`` one per stratum (keys ``STRATA_COLUMNS``), and the
    same as data frames (``rates``, ``strata``, built when first read); ``audited``/
    ``sampled`` items; ``disagreements`` items whose reviewers disagree."""

    rate_rows: tuple[dict[str, Any], ...]
    strata_rows: tuple[dict[str, Any], ...]
    population: int
    sampled: int
    audited: int
    disagreements: int
    confidence: float
    #: strata with one audited trace (of more): their variance is bounded (0.25), not
    #: estimated, so the population intervals lean on a guess there
    single_item_strata: tuple[str, ...] = ()

    @cached_property
    def rates(self) -> pd.DataFrame:
        return pd.DataFrame(list(self.rate_rows), columns=RATE_COLUMNS)

    @cached_property
    def strata(self) -> pd.DataFrame:
        return pd.DataFrame(list(self.strata_rows), columns=STRATA_COLUMNS)


def estimate_row(verdict: str, est: StratifiedEstimate) -> dict[str, Any]:
    return {
        "verdict": verdict,
        "label": VERDICTS.get(verdict, verdict),
        "count": est.raw.successes,
        "audited": est.raw.n,
        "sample_rate": est.raw.rate,
        "sample_lo": est.raw.lo,
        "sample_hi": est.raw.hi,
        "population_rate": est.estimate,
        "population_lo": est.lo,
        "population_hi": est.hi,
        "estimated_traces": (
            None if est.estimate is None else round(est.estimate * est.population, 1)
        ),
        "unsampled_share": est.unsampled_share,
    }


@dataclass(frozen=True)
class PlanTally:
    """What a plan's estimates are made of: its stored population and allocation, how many
    items were drawn, and per stratum how many audited items have each verdict (the
    majority of their reviewers' current verdicts, as ``item_outcomes`` gives)."""

    population: dict[str, int]
    allocation: dict[str, int]
    sampled: int
    #: stratum -> verdict -> audited items with that verdict (strata as the items name them)
    verdicts: dict[str, dict[str, int]]
    disagreements: int

    @property
    def audited(self) -> int:
        return sum(sum(by.values()) for by in self.verdicts.values())


def tallies(engine: Engine, plan_ids: Sequence[int]) -> dict[int, PlanTally]:
    """The tallies of several plans in three statements, whatever their number: the plans,
    the items drawn per plan, and the current verdicts of every item of those plans (one
    per item and reviewer, the newest). Plans that do not exist are left out."""
    ids = sorted(set(plan_ids))
    if not ids:
        return {}
    with read_session(engine) as s:
        stored = {
            p.id: p for p in s.scalars(select(SamplingPlan).where(one_of(s, SamplingPlan.id, ids)))
        }
        drawn: dict[int, int] = dict(
            s.execute(
                select(AuditItem.plan_id, func.count())
                .where(one_of(s, AuditItem.plan_id, ids))
                .group_by(AuditItem.plan_id)
            ).all()
        )
        current = (
            select(func.max(AuditVerdict.id))
            .join(AuditItem, AuditItem.id == AuditVerdict.item_id)
            .where(one_of(s, AuditItem.plan_id, ids))
            .group_by(AuditVerdict.item_id, AuditVerdict.reviewer)
        )
        rows = s.execute(
            select(AuditItem.plan_id, AuditItem.stratum, AuditVerdict.item_id, AuditVerdict.verdict)
            .join(AuditItem, AuditItem.id == AuditVerdict.item_id)
            .where(AuditVerdict.id.in_(current))
            .order_by(AuditVerdict.id)
        ).all()
        per_item: dict[int, tuple[int, str, list[str]]] = {}
        for plan_id, stratum, item_id, verdict in rows:
            per_item.setdefault(item_id, (plan_id, stratum, []))[2].append(verdict)
        out: dict[int, PlanTally] = {}
        for plan_id, plan in stored.items():
            out[plan_id] = PlanTally(
                {c.stratum: c.count for c in stored_counts(plan)},
                stored_allocation(plan),
                int(drawn.get(plan_id, 0)),
                {},
                0,
            )
    disagreements: dict[int, int] = {}
    for plan_id, stratum, vs in per_item.values():
        decided = outcome(vs)  # never None: every item here has at least one verdict
        if decided is None:
            continue
        by = out[plan_id].verdicts.setdefault(stratum, {})
        by[decided] = by.get(decided, 0) + 1
        if len(set(vs)) > 1:
            disagreements[plan_id] = disagreements.get(plan_id, 0) + 1
    return {pid: replace(t, disagreements=disagreements.get(pid, 0)) for pid, t in out.items()}


def report_of(tally: PlanTally, confidence: float = 0.95) -> EstimateReport:
    """A plan's estimates from its tally: population rates of every verdict (headline ones
    first), each weighted by stratum (population / audited sample) with an interval, beside
    the raw sample rate and its Wilson interval; and a per-stratum table with counts and
    weights. Raises ``InputError`` when the counts cannot be estimated (a sample larger
    than its stratum's population, a confidence out of range)."""
    order = [*HEADLINE, *[v for v in VERDICTS if v not in HEADLINE]]
    audited_in = {name: sum(tally.verdicts.get(name, {}).values()) for name in tally.population}
    rate_rows = tuple(
        estimate_row(
            v,
            estimate_from_counts(
                [
                    (name, size, audited_in[name], tally.verdicts.get(name, {}).get(v, 0))
                    for name, size in tally.population.items()
                ],
                confidence,
            ),
        )
        for v in order
    )
    strata_rows = []
    for name, size in tally.population.items():
        n_h = audited_in[name]
        row: dict[str, Any] = {
            "stratum": name,
            "population": size,
            "planned": tally.allocation.get(name, 0),
            "audited": n_h,
            "weight": size / n_h if n_h else None,
        }
        for v in VERDICTS:
            row[v] = tally.verdicts.get(name, {}).get(v, 0)
        strata_rows.append(row)
    return EstimateReport(
        rate_rows,
        tuple(strata_rows),
        sum(tally.population.values()),
        tally.sampled,
        tally.audited,
        tally.disagreements,
        confidence,
        tuple(
            str(r["stratum"]) for r in strata_rows if r["audited"] == 1 and int(r["population"]) > 1
        ),
    )


def estimates(engine: Engine, plan_id: int, confidence: float = 0.95) -> EstimateReport:
    """A plan's estimates (``report_of`` its tally)."""
    tally = tallies(engine, [plan_id]).get(plan_id)
    if tally is None:
        raise InputError(f"sampling plan {plan_id} does not exist")
    return report_of(tally, confidence)


def estimates_of(
    engine: Engine, plan_ids: Sequence[int], confidence: float = 0.95
) -> dict[int, EstimateReport | InputError]:
    """The estimates of several plans from one set of statements (``tallies``), whatever
    their number: each plan's report, or the ``InputError`` that says why it has none
    (a plan that does not exist, counts that cannot be estimated)."""
    found = tallies(engine, plan_ids)
    out: dict[int, EstimateReport | InputError] = {}
    for pid in plan_ids:
        tally = found.get(pid)
        if tally is None:
            out[pid] = InputError(f"sampling plan {pid} does not exist")
            continue
        try:
            out[pid] = report_of(tally, confidence)
        except InputError as exc:
            out[pid] = exc
    return out


@dataclass(frozen=True)
class DomainEstimate:
    """A rate within a slice (a domain that cuts across strata), by the ratio estimator."""

    estimate: float | None
    lo: float | None
    hi: float | None
    std_error: float | None
    estimated_size: float
    sample: int
    successes: int
    raw_rate: float | None
    raw_lo: float | None
    raw_hi: float | None
    single_item_strata: tuple[str, ...] = ()


def domain_estimate(
    items: pd.DataFrame, population: Mapping[str, int], confidence: float = 0.95
) -> DomainEstimate:
    """Estimate a rate within a domain from a stratified sample.

    ``items``: one row per audited item with columns ``stratum``, ``in_domain`` (bool) and
    ``success`` (bool, only read where ``in_domain``); ``population``: N_h per stratum.
    With w_h = N_h / n_h, x = in_domain and y = in_domain and success:
    R = sum w_h * sum_h y / sum w_h * sum_h x, and (linearised)
    Var(R) = sum_h N_h^2 (1 - n_h/N_h) v_h / n_h / X^2 with v_h the sample variance (divisor
    n_h - 1, Cochran, as in ``weighted_estimate``) of e = y - R x in stratum h and X the
    estimated domain size; a stratum with one audited item gets the bound 0.25 and is listed
    in ``single_item_strata``. The interval is a Wilson interval on the effective sample size
    (honest at 0 and n). When the domain is the whole population this equals
    ``weighted_estimate``.
    """
    from statistics import NormalDist

    from review.core.sampling import ONE_ITEM_VARIANCE, effective_interval

    if not 0 < confidence < 1:
        raise InputError(f"confidence must be between 0 and 1, got {confidence!r}")
    missing = [c for c in ("stratum", "in_domain", "success") if c not in items.columns]
    if missing:
        raise InputError(
            f"items: missing {readable.plural(len(missing), 'column')} {', '.join(missing)}"
        )
    unknown = sorted(set(items["stratum"]) - set(population))
    if unknown:
        raise InputError(f"items: stratum {unknown[0]!r} is not in the population")
    x = items["in_domain"].astype(bool).to_numpy()
    y = x & items["success"].astype(bool).to_numpy()
    strata = items["stratum"].to_numpy()
    n_dom, k_dom = int(x.sum()), int(y.sum())
    wil = wilson_interval(k_dom, n_dom, confidence)
    raw = k_dom / n_dom if n_dom else None
    big_x = big_y = 0.0
    groups: list[tuple[float, float, np.ndarray[Any, Any], np.ndarray[Any, Any]]] = []
    for name in dict.fromkeys(strata):
        mask = strata == name
        n_h = int(mask.sum())
        N_h = float(population[name])
        if n_h > N_h:
            raise InputError(f"stratum {name!r}: {n_h} items sampled from a population of {N_h:g}")
        w = N_h / n_h
        big_x += w * float(x[mask].sum())
        big_y += w * float(y[mask].sum())
        groups.append((N_h, float(n_h), x[mask].astype(float), y[mask].astype(float)))
    if big_x == 0:
        return DomainEstimate(None, None, None, None, 0.0, n_dom, k_dom, raw, None, None)
    ratio = big_y / big_x
    variance = 0.0
    single: list[str] = []
    census = True
    for name, (pop_h, size_h, xh, yh) in zip(dict.fromkeys(strata), groups, strict=True):
        e = yh - ratio * xh
        fpc = 1 - size_h / pop_h
        census = census and fpc == 0
        if size_h > 1:
            v = float(np.var(e, ddof=1))
        else:
            v = ONE_ITEM_VARIANCE
            if fpc > 0:
                single.append(str(name))
        variance += pop_h**2 * fpc * v / size_h
    se = math.sqrt(max(variance, 0.0)) / big_x
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    if census:
        lo, hi = ratio, ratio
    else:
        lo, hi = effective_interval(ratio, se**2, n_dom, z)
    return DomainEstimate(
        ratio,
        lo,
        hi,
        se,
        big_x,
        n_dom,
        k_dom,
        raw,
        wil[0] if wil else None,
        wil[1] if wil else None,
        tuple(single),
    )


def by_slice(
    engine: Engine, plan_id: int, dimension: str, verdict: str, confidence: float = 0.95
) -> pd.DataFrame:
    """The rate of ``verdict`` within each value of a trace field (a slice that may cut across
    the strata), weighted back to the population, beside the raw rate; with counts."""
    if dimension not in SLICE_DIMS:
        raise InputError(f"slice by one of: {', '.join(SLICE_DIMS)}")
    if verdict not in VERDICTS:
        raise InputError(f"verdict {verdict!r} is not one of: {', '.join(VERDICTS)}")
    with read_session(engine) as s:
        population = {c.stratum: c.count for c in stored_counts(plan_row(s, plan_id))}
    outcomes = item_outcomes(engine, plan_id)
    audited = outcomes[outcomes["outcome"].notna()].copy()
    cols = [
        "slice",
        "audited",
        "count",
        "sample_rate",
        "sample_lo",
        "sample_hi",
        "population_rate",
        "population_lo",
        "population_hi",
        "estimated_traces_in_slice",
    ]
    if audited.empty:
        return pd.DataFrame(columns=cols)
    values = audited[dimension].fillna(NONE).astype(str)
    audited["success"] = audited["outcome"] == verdict
    out = []
    for value in sorted(values.unique()):
        audited["in_domain"] = values == value
        est = domain_estimate(audited, population, confidence)
        out.append(
            {
                "slice": value,
                "audited": est.sample,
                "count": est.successes,
                "sample_rate": est.raw_rate,
                "sample_lo": est.raw_lo,
                "sample_hi": est.raw_hi,
                "population_rate": est.estimate,
                "population_lo": est.lo,
                "population_hi": est.hi,
                "estimated_traces_in_slice": round(est.estimated_size, 1),
            }
        )
    return pd.DataFrame(out, columns=cols)
