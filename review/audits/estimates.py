"""Estimates: each verdict's rate weighted back to the population.

**Estimates** weight each stratum by population / audited sample (``weighted_estimate``) and
show the raw sample rate with its Wilson interval beside it; slices that cut across strata use
the ratio estimator (``domain_estimate``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine, select

from review.audits.plans import _plan, _stored_allocation, _stored_counts
from review.audits.population import NONE
from review.audits.verdicts import _current_verdicts
from review.audits.vocabulary import HEADLINE, VERDICTS, outcome
from review.core.errors import InputError
from review.core.sampling import StratifiedEstimate, weighted_estimate, wilson_interval
from storage.db import read_session
from storage.models import AuditItem, Trace

__all__ = [
    "SLICE_DIMS",
    "DomainEstimate",
    "EstimateReport",
    "by_slice",
    "domain_estimate",
    "estimates",
    "item_outcomes",
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
        current = _current_verdicts(s, [r.item_id for r in rows])
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


@dataclass(frozen=True)
class EstimateReport:
    """Estimates for one batch: ``rates`` one row per verdict (headline first), ``strata`` one
    row per stratum; ``audited``/``sampled`` items; ``disagreements`` items whose reviewers
    disagree."""

    rates: pd.DataFrame
    strata: pd.DataFrame
    population: int
    sampled: int
    audited: int
    disagreements: int
    confidence: float
    #: strata with one audited trace (of more): their variance is bounded (0.25), not
    #: estimated, so the population intervals lean on a guess there
    single_item_strata: tuple[str, ...] = ()


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
    est = weighted_estimate(frame, confidence)
    return _estimate_row(verdict, est)


def _estimate_row(verdict: str, est: StratifiedEstimate) -> dict[str, Any]:
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


def estimates(engine: Engine, plan_id: int, confidence: float = 0.95) -> EstimateReport:
    """Population rates of every verdict (headline ones first), each weighted by stratum
    (population / audited sample) with an interval, beside the raw sample rate and its Wilson
    interval; and a per-stratum table with counts and weights."""
    with read_session(engine) as s:
        plan = _plan(s, plan_id)
        counts = _stored_counts(plan)
        allocation = _stored_allocation(plan)
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
    return EstimateReport(
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
        raise InputError(f"items: missing column(s) {', '.join(missing)}")
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
        population = {c.stratum: c.count for c in _stored_counts(_plan(s, plan_id))}
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
