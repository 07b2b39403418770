"""Sampling plans: reproducible stratified samples of the production traces.

A **sampling plan** names a population (a filter over the traces), the strata (any mix of
decision, reason code, feedback, customer tier, language, versions or a trace attribute), an
allocation (proportional, equal or explicit sizes), a total and a seed. Creating the plan
counts the population per stratum in SQL (or takes the counts a plan of the same population
stored, brought up to the traces now) and stores the counts with a fingerprint
(``review.core.sampling.population_fingerprint``). Drawing the sample keeps, in each stratum,
the ``allocation[stratum]`` rows first in a seeded order, so the same plan on the same data
always draws the same traces, no trace twice. ``check_population`` re-counts and says how the
population changed.

The plan records its **sampling algorithm** (``population["algorithm"]``); a plan keeps the
algorithm it was created with, so a plan drawn by an older one still verifies:

* **1** (plans without the record, created before revision 0020): the seeded order is
  ``review.core.sampling.sample_rank_sql(seed, id)`` computed for every row in the database;
  the fingerprint's ``rank_sum`` is the sum of ``sample_rank(FINGERPRINT_SEED, id)``; strata
  over ``attr.<key>`` read the attributes JSON.
* **2** (every plan created since): the seeded order is the stored per-trace key
  ``traces.sample_key`` (``storage.models.trace_sample_key``, a uniform hash of the trace id)
  rotated by an offset derived from the seed, ``(sample_key - offset) mod 2**62``, ties by
  id (``review.core.sampling.draw_sample_by_key`` is the in-memory reference). Rows whose
  rotated key falls in a window just wide enough for each stratum are read by a range scan of
  the key's index (``ix_traces_sampling``) instead of ranking every row. ``rank_sum`` is the sum of
  ``sample_key mod 2**31``; strata over the promoted attributes (``attr.language``,
  ``attr.customer_tier``, ``attr.document_type``) read their indexed columns.
"""

# Long module: counting, drawing and verifying a plan share the stored population record and
# both sampling algorithms (a plan drawn by algorithm 1 keeps verifying with it).

from __future__ import annotations

import datetime as dt
import math
from collections import Counter as Tally
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import ColumnElement, Engine, case, func, insert, literal_column, or_, select
from sqlalchemy.orm import Session

from review.audits import popcount
from review.audits.population import NONE, PopulationFilter, stratum_column, stratum_expr
from review.core import readable
from review.core.errors import InputError
from review.core.identity import Actor, Permission, require
from review.core.sampling import (
    FINGERPRINT_SEED,
    KEY_SPACE,
    PRIME,
    allocate,
    key_offset,
    population_fingerprint,
    sample_rank,
    sample_rank_sql,
)
from review.core.terms import PlanStatus
from review.traces import rollup
from review.traces.stamp import added_since, traces_stamp
from storage import changes
from storage.db import leads_an_index, one_of, planner, read_session, seek_distinct
from storage.models import (
    AuditItem,
    AuditVerdict,
    SamplingPlan,
    Trace,
    TraceRollup,
    utcnow,
)

__all__ = [
    "ALLOCATIONS",
    "PlanSpec",
    "PlanView",
    "PopulationChanged",
    "PopulationCheck",
    "StratumCount",
    "check_population",
    "close_plan",
    "compare_counts",
    "count_population",
    "count_strata",
    "counted_before",
    "create_plan",
    "dimension_values",
    "draw_plan",
    "get_plan",
    "key_rows",
    "key_windows",
    "list_plans",
    "n_reviewers",
    "parse_explicit_sizes",
    "plan_row",
    "plan_stats",
    "preview_sample",
    "recount_plan",
    "sampling_algorithm",
    "spec_of",
    "stored_allocation",
    "stored_counts",
    "verify_sample",
]


ALLOCATIONS = ("proportional", "equal", "explicit")


MAX_TOTAL = 100_000


MAX_SEED = 2_147_483_647


MAX_STRATA_DIMS = 4


#: the sampling algorithm of new plans (see the module notes); plans without a record: 1
ALGORITHM = 2

#: algorithm 2's fingerprint sums ``sample_key mod 2**31`` (a billion rows stay in 64 bits)
_KEY_SUM_MOD = 2**31


# --- plans ----------------------------------------------------------------------------------

RESERVATION_MINUTES = 30


@dataclass(frozen=True)
class PlanSpec:
    """What a reviewer asks for when creating a plan."""

    name: str
    filter: PopulationFilter = field(default_factory=PopulationFilter)
    strata: tuple[str, ...] = ()
    allocation: str = "proportional"
    total: int = 100
    seed: int = 0
    explicit_sizes: Mapping[str, int] | None = None
    overlap: int = 1
    blind: bool = True
    reservation_minutes: int = RESERVATION_MINUTES

    def check(self) -> None:
        if not self.name.strip():
            raise InputError("name the plan (e.g. 'June 2025 monthly review')")
        if len(self.name.strip()) > 200:
            raise InputError("the plan name is longer than 200 characters")
        if len(set(self.strata)) != len(self.strata):
            raise InputError("strata: a dimension is listed twice")
        if len(self.strata) > MAX_STRATA_DIMS:
            raise InputError(f"strata: use at most {MAX_STRATA_DIMS} dimensions")
        for dim in self.strata:
            stratum_column(dim)
        if self.allocation not in ALLOCATIONS:
            raise InputError(
                f"allocation {self.allocation!r} is not one of: {', '.join(ALLOCATIONS)}"
            )
        if self.allocation == "explicit" and not self.explicit_sizes:
            raise InputError("explicit allocation: give the sample size of each stratum")
        if not isinstance(self.total, int) or not 1 <= self.total <= MAX_TOTAL:
            raise InputError(f"sample size must be a whole number from 1 to {MAX_TOTAL}")
        if not isinstance(self.seed, int) or not 0 <= self.seed <= MAX_SEED:
            raise InputError(f"seed must be a whole number from 0 to {MAX_SEED}")
        if not 1 <= self.overlap <= 5:
            raise InputError("overlap must be between 1 and 5 reviewers per trace")
        if not 1 <= self.reservation_minutes <= 24 * 60:
            raise InputError("a reservation lasts between 1 minute and 24 hours")
        self.filter.check()


def parse_explicit_sizes(text: str) -> dict[str, int]:
    """Read explicit stratum sizes written one per line as ``stratum: n``."""
    out: dict[str, int] = {}
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if ":" not in line:
            raise InputError(f"explicit sizes: line {n}: write 'stratum: size'")
        name, _, size = line.rpartition(":")
        name = name.strip()
        try:
            value = int(size.strip())
        except ValueError:
            raise InputError(
                f"explicit sizes: line {n}: {size.strip()!r} is not a whole number"
            ) from None
        if value < 0:
            raise InputError(f"explicit sizes: line {n}: the size must be >= 0")
        if name in out:
            raise InputError(f"explicit sizes: line {n}: stratum {name!r} is listed twice")
        out[name] = value
    return out


@dataclass(frozen=True)
class StratumCount:
    """A stratum's size and fingerprint terms: ``rank_sum`` is the sum of the rows'
    fingerprint ranks (algorithm 1: ``sample_rank(FINGERPRINT_SEED, id)``; algorithm 2: the
    stored sampling key modulo 2**31)."""

    stratum: str
    count: int
    min_id: int
    max_id: int
    id_sum: int
    rank_sum: int

    def summary_row(self) -> dict[str, Any]:
        return asdict(self)


def _population_query(
    flt: PopulationFilter, strata: Sequence[str], *extra: ColumnElement[bool]
) -> Any:
    return (
        select(Trace.id.label("id"), stratum_expr(strata).label("stratum"))
        .where(*flt.conditions(), *extra)
        .subquery("pop")
    )


def count_strata(
    s: Session,
    flt: PopulationFilter,
    strata: Sequence[str],
    algorithm: int = ALGORITHM,
    *extra: ColumnElement[bool],
) -> list[StratumCount]:
    """The population per stratum (``extra``: further conditions on the traces, such as
    only those added since a count)."""
    if algorithm == 1:
        return _count_v1(s, flt, strata, *extra)
    if algorithm != 2:
        raise InputError(f"sampling algorithm {algorithm!r} is unknown (known: 1 and 2)")
    if not extra:  # from the population groups when they hold the filter and strata
        terms = popcount.stratum_terms(s, flt, strata)
        if terms is not None:
            return [StratumCount(*t) for t in terms]
    pop = (
        select(
            Trace.id.label("id"),
            Trace.sample_key.label("key"),
            stratum_expr(strata, promoted=True).label("stratum"),
        )
        .where(*flt.conditions(), *extra)
        .subquery("pop")
    )
    rows = s.execute(
        select(
            pop.c.stratum,
            func.count(),
            func.min(pop.c.id),
            func.max(pop.c.id),
            func.sum(pop.c.id),
            func.sum(pop.c.key % _KEY_SUM_MOD),
            func.count(pop.c.key),
        )
        .group_by(pop.c.stratum)
        .order_by(pop.c.stratum)
    ).all()
    unkeyed = sum(int(r[1]) - int(r[6]) for r in rows)
    if unkeyed:
        raise InputError(
            f"{readable.count(unkeyed, 'trace')} of the population "
            f"{readable.plural(unkeyed, 'has', 'have')} no sampling key (traces.sample_key "
            "is empty): they were written by something that bypassed the trace writers; a "
            "draw would never pick them, so nothing is counted"
        )
    return [
        StratumCount(str(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5])) for r in rows
    ]


def _count_v1(
    s: Session, flt: PopulationFilter, strata: Sequence[str], *extra: ColumnElement[bool]
) -> list[StratumCount]:
    pop = _population_query(flt, strata, *extra)
    rank: ColumnElement[int] = literal_column(sample_rank_sql(FINGERPRINT_SEED, "pop.id"))
    rows = s.execute(
        select(
            pop.c.stratum,
            func.count(),
            func.min(pop.c.id),
            func.max(pop.c.id),
            func.sum(pop.c.id),
            func.sum(rank),
        )
        .group_by(pop.c.stratum)
        .order_by(pop.c.stratum)
    ).all()
    return [
        StratumCount(str(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5])) for r in rows
    ]


def count_population(
    engine: Engine, flt: PopulationFilter, strata: Sequence[str]
) -> list[StratumCount]:
    """The population per stratum (as a new plan counts it: from the population groups when
    they hold the filter and strata, else in SQL over the traces), to preview a plan before
    creating it."""
    for dim in strata:
        stratum_column(dim)
    with read_session(engine) as s:
        return count_strata(s, flt, strata)


def _fingerprint(counts: Sequence[StratumCount]) -> str:
    return population_fingerprint([c.summary_row() for c in counts])


def _allocation(counts: Sequence[StratumCount], spec: PlanSpec) -> dict[str, int]:
    sizes = {c.stratum: c.count for c in counts}
    if sum(sizes.values()) == 0:
        raise InputError("the population is empty: no trace matches the filter")
    if spec.allocation == "explicit":
        return allocate(sizes, spec.total, "explicit", dict(spec.explicit_sizes or {}))
    if spec.allocation == "equal":
        return allocate(sizes, spec.total, "equal")
    return allocate(sizes, spec.total, "proportional")


def _grown(
    stored: Sequence[StratumCount], added: Sequence[StratumCount]
) -> list[StratumCount] | None:
    """The stored counts with those of the traces added since (None when a stratum is new:
    its place in the order is the database's to say)."""
    extra = {c.stratum: c for c in added if c.count}
    if not set(extra) <= {c.stratum for c in stored}:
        return None
    out: list[StratumCount] = []
    for c in stored:
        a = extra.get(c.stratum)
        if a is None:
            out.append(c)
            continue
        out.append(
            StratumCount(
                c.stratum,
                c.count + a.count,
                min(c.min_id, a.min_id) if c.count else a.min_id,
                max(c.max_id, a.max_id) if c.count else a.max_id,
                c.id_sum + a.id_sum,
                c.rank_sum + a.rank_sum,
            )
        )
    return out


def _population_record(
    counts: Sequence[StratumCount],
    allocation: Mapping[str, int],
    spec: PlanSpec,
    stamp: Sequence[int],
    algorithm: int,
) -> dict[str, Any]:
    return {
        "traces_stamp": list(stamp),
        "strata": [c.summary_row() for c in counts],
        "allocation": dict(allocation),
        "counted_at": utcnow().isoformat(),
        "options": {"blind": spec.blind, "reservation_minutes": spec.reservation_minutes},
        "algorithm": algorithm,
    }


#: how many of the newest plans a new plan looks among for its population counted before
_COUNTED_LOOKBACK = 50


#: traces added since a count beyond which the population groups count the population
#: sooner than a read of the added traces does (a read of 50,000 rows takes about 0.1 s)
GROUPS_OVER_ADDED = 50_000


def _groups_count_sooner(
    spec: PlanSpec, algorithm: int, then: Sequence[int], now: Sequence[int]
) -> bool:
    """Whether to count the whole population from the population groups rather than the
    traces added since the stamp ``then`` (``_recheck``, ``counted_before``): when the groups
    hold the filter and strata and more than :data:`GROUPS_OVER_ADDED` traces were added (a
    plan counted before a bulk load would otherwise read every trace loaded since)."""
    return (
        algorithm == ALGORITHM
        and len(then) >= 1
        and len(now) >= 1
        and now[0] - then[0] > GROUPS_OVER_ADDED
        and popcount.groups_answer(spec.filter, spec.strata)
    )


def counted_before(s: Session, spec: PlanSpec, now: Sequence[int]) -> list[StratumCount] | None:
    """The counts of ``spec``'s population (the same filter and strata, algorithm 2) stored by
    the newest plan that counted it, brought up to the traces as they are now, as
    ``_recheck`` does: the stored counts while the traces stamp is unchanged (traces are never
    edited), the traces added since counted and added to them; None when no plan counted it,
    or the traces changed otherwise (then the population is counted in full). The same figures
    as a count of every trace, without reading a million rows for a plan like one created
    before (a recurring plan, another sample size or seed). A filter that leaves restricted
    traces out is always counted: a trace's restricted flag changes without the stamp."""
    if not spec.filter.include_restricted:
        return None
    want = spec.filter.to_json()
    rows = s.execute(
        select(SamplingPlan.population_filter, SamplingPlan.strata, SamplingPlan.population)
        .order_by(SamplingPlan.id.desc())
        .limit(_COUNTED_LOOKBACK)
    ).all()
    for flt, strata, record in rows:
        then = list((record or {}).get("traces_stamp") or [])
        if (
            flt != want
            or list(strata or []) != list(spec.strata)
            or (record or {}).get("algorithm") != ALGORITHM
            or len(then) != len(now)
        ):
            continue
        stored = [StratumCount(**r) for r in record.get("strata", [])]
        if then == list(now):
            return stored
        if _groups_count_sooner(spec, ALGORITHM, then, now):
            return None
        if added_since(s, then, now):
            added = count_strata(s, spec.filter, spec.strata, ALGORITHM, Trace.id > then[1])
            return _grown(stored, added)
        return None
    return None


def create_plan(s: Session, actor: Actor, spec: PlanSpec) -> int:
    """Store a plan with its population per stratum, allocation and fingerprint (not drawn
    yet: ``draw_plan`` draws it)."""
    require(actor, Permission.audit)
    spec = replace(spec, name=spec.name.strip())
    spec.check()

    if s.scalar(select(SamplingPlan.id).where(SamplingPlan.name == spec.name)) is not None:
        raise InputError(f"a plan named {spec.name!r} already exists; choose another name")
    stamp = traces_stamp(s)
    counts = counted_before(s, spec, stamp)
    if counts is None:
        counts = count_strata(s, spec.filter, spec.strata)
    allocation = _allocation(counts, spec)
    row = SamplingPlan(
        name=spec.name,
        population_filter=spec.filter.to_json(),
        strata=list(spec.strata),
        allocation=spec.allocation,
        explicit_sizes=dict(spec.explicit_sizes or {}),
        total=spec.total,
        seed=spec.seed,
        population=_population_record(counts, allocation, spec, stamp, ALGORITHM),
        fingerprint=_fingerprint(counts),
        overlap=spec.overlap,
        status=PlanStatus.planned,
        created_by=actor.email,
        created_at=utcnow(),
    )
    s.add(row)
    s.flush()
    changes.record(s, actor.email, "create", "sampling_plan", row.id, None, changes.snapshot(row))
    return row.id


def spec_of(plan: SamplingPlan) -> PlanSpec:
    options = (plan.population or {}).get("options", {})
    return PlanSpec(
        name=plan.name,
        filter=PopulationFilter.from_json(plan.population_filter or {}),
        strata=tuple(plan.strata),
        allocation=plan.allocation,
        total=plan.total,
        seed=plan.seed,
        explicit_sizes=dict(plan.explicit_sizes or {}) or None,
        overlap=plan.overlap,
        blind=bool(options.get("blind", True)),
        reservation_minutes=int(options.get("reservation_minutes", RESERVATION_MINUTES)),
    )


def sampling_algorithm(plan: SamplingPlan) -> int:
    """The sampling algorithm the plan was counted (and is drawn) with: 1 when not recorded
    (plans created before revision 0020)."""
    return int((plan.population or {}).get("algorithm", 1))


def stored_counts(plan: SamplingPlan) -> list[StratumCount]:
    return [StratumCount(**r) for r in (plan.population or {}).get("strata", [])]


def stored_allocation(plan: SamplingPlan) -> dict[str, int]:
    return {str(k): int(v) for k, v in (plan.population or {}).get("allocation", {}).items()}


@dataclass(frozen=True)
class StratumChange:
    stratum: str
    before: int
    after: int
    how: str


@dataclass(frozen=True)
class PopulationCheck:
    """A re-count of a plan's population against what was stored."""

    changed: bool
    stored_fingerprint: str
    current_fingerprint: str
    stored_total: int
    current_total: int
    strata: tuple[StratumChange, ...]

    def message(self) -> str:
        if not self.changed:
            return (
                f"The population is unchanged ({self.current_total} traces): the same plan "
                "draws the same sample."
            )
        parts = [f"{c.stratum}: {c.before} → {c.after} ({c.how})" for c in self.strata if c.how]
        return (
            f"The population changed since it was counted: {self.stored_total} → "
            f"{self.current_total} traces. " + "; ".join(parts) + "."
        )


def compare_counts(
    stored: Sequence[StratumCount], current: Sequence[StratumCount]
) -> PopulationCheck:
    before = {c.stratum: c for c in stored if c.count}
    after = {c.stratum: c for c in current if c.count}
    out: list[StratumChange] = []
    for name in sorted(set(before) | set(after)):
        b, a = before.get(name), after.get(name)
        nb, na = (b.count if b else 0), (a.count if a else 0)
        if b is None:
            how = f"new stratum, +{na}"
        elif a is None:
            how = "stratum gone"
        elif b == a:
            how = ""
        elif nb != na:
            how = f"{na - nb:+d} traces"
        else:
            how = "same count, different traces"
        out.append(StratumChange(name, nb, na, how))
    fp_b, fp_a = _fingerprint(stored), _fingerprint(current)
    return PopulationCheck(
        fp_b != fp_a,
        fp_b,
        fp_a,
        sum(c.count for c in stored),
        sum(c.count for c in current),
        tuple(out),
    )


def _recheck(s: Session, plan: SamplingPlan) -> PopulationCheck:
    """The plan's population now against the stored counts. When no trace was added or
    deleted since the count (the traces stamp is unchanged; traces are never edited) the
    population is the counted one and the million-row count is skipped. When traces were only
    added, only they are counted and added to the stored counts (the same figures as a count
    of every trace: counts, id sums and rank sums add up, smallest and largest ids compare)."""
    stored = stored_counts(plan)
    then = list((plan.population or {}).get("traces_stamp") or [])
    now = traces_stamp(s)
    if then and then == now[: len(then)] and len(then) >= 3:
        return compare_counts(stored, stored)
    spec = spec_of(plan)
    algorithm = sampling_algorithm(plan)
    if _groups_count_sooner(spec, algorithm, then, now):
        return compare_counts(stored, count_strata(s, spec.filter, spec.strata, algorithm))
    if added_since(s, then, now):
        added = count_strata(
            s, spec.filter, spec.strata, sampling_algorithm(plan), Trace.id > then[1]
        )
        grown = _grown(stored, added)
        if grown is not None:
            return compare_counts(stored, grown)
    return compare_counts(
        stored, count_strata(s, spec.filter, spec.strata, sampling_algorithm(plan))
    )


def check_population(engine: Engine, plan_id: int) -> PopulationCheck:
    """Count the plan's population again and compare it with the stored counts."""
    with read_session(engine) as s:
        return _recheck(s, plan_row(s, plan_id))


class PopulationChanged(InputError):
    """The population is no longer the one the plan counted; nothing was drawn."""


def recount_plan(s: Session, actor: Actor, plan_id: int) -> PopulationCheck:
    """Count a plan that is not drawn yet again and store the new counts and allocation."""
    require(actor, Permission.audit)

    plan = plan_row(s, plan_id, lock=True)
    if plan.status != PlanStatus.planned:
        raise InputError(f"plan {plan.name!r} is already drawn: its counts stay those of the draw")
    spec = spec_of(plan)
    algorithm = sampling_algorithm(plan)  # a plan keeps its algorithm
    counts = count_strata(s, spec.filter, spec.strata, algorithm)
    check = compare_counts(stored_counts(plan), counts)
    before = changes.snapshot(plan)
    plan.population = _population_record(
        counts, _allocation(counts, spec), spec, traces_stamp(s), algorithm
    )
    plan.fingerprint = _fingerprint(counts)
    s.flush()
    changes.record(
        s, actor.email, "recount", "sampling_plan", plan.id, before, changes.snapshot(plan)
    )
    return check


def _thresholds(allocation: Mapping[str, int], sizes: Mapping[str, int]) -> dict[str, int]:
    """Per stratum, a rank bound below which the stratum's first n_h ranks almost surely lie:
    ranks are spread evenly over [0, P), so about N_h * T / P rows fall below T; T is set for
    n_h + 5 sqrt(n_h) + 20 of them. The draw only sorts those rows (and falls back to a full
    sort in the unlikely case a stratum has fewer than n_h below its bound)."""
    out = {}
    for name, n in allocation.items():
        size = sizes.get(name, 0)
        if n <= 0:
            continue
        share = (n + 5 * math.sqrt(n) + 20) / size if size else 1.0
        out[name] = PRIME if share >= 1 else max(1, math.ceil(PRIME * share))
    return out


def _draw_query(
    plan: SamplingPlan, allocation: Mapping[str, int], bounds: Mapping[str, int] | None
) -> Any:
    """In each stratum, the ``allocation[stratum]`` rows with the smallest (rank, id); with
    ``bounds``, only rows whose rank is below their stratum's bound enter the sort."""
    wanted = {k: v for k, v in allocation.items() if v > 0}
    if not wanted:
        return None
    spec = spec_of(plan)
    keyed = (
        select(
            Trace.id.label("id"),
            stratum_expr(spec.strata).label("stratum"),
            literal_column(sample_rank_sql(plan.seed, "traces.id")).label("rk"),
        )
        .where(*spec.filter.conditions())
        .subquery("keyed")
    )
    pre = select(keyed.c.id, keyed.c.stratum, keyed.c.rk)
    if bounds is not None:
        bound = case(dict(bounds), value=keyed.c.stratum, else_=-1)
        pre = pre.where(keyed.c.rk < bound)
    else:
        pre = pre.where(keyed.c.stratum.in_(list(wanted)))
    cut = pre.subquery("cut")
    ranked = select(
        cut.c.id,
        cut.c.stratum,
        func.row_number()
        .over(partition_by=cut.c.stratum, order_by=(cut.c.rk, cut.c.id))
        .label("pos"),
    ).subquery("ranked")
    limit = case(wanted, value=ranked.c.stratum, else_=0)
    return select(ranked.c.id, ranked.c.stratum).where(ranked.c.pos <= limit)


def _drawn(s: Session, plan: SamplingPlan) -> list[tuple[int, str]]:
    """(trace pk, stratum) of the plan's sample in queue order, by the plan's algorithm."""
    algorithm = sampling_algorithm(plan)
    if algorithm == 2:
        return _drawn_by_key(s, plan)
    if algorithm != 1:
        raise InputError(f"plan {plan.name!r}: sampling algorithm {algorithm!r} is unknown")
    allocation = stored_allocation(plan)
    sizes = {c.stratum: c.count for c in stored_counts(plan)}
    query = _draw_query(plan, allocation, _thresholds(allocation, sizes))
    if query is None:
        return []
    rows = [(int(r[0]), str(r[1])) for r in s.execute(query)]
    got = Tally(st for _t, st in rows)
    if any(got.get(k, 0) < v for k, v in allocation.items()):
        rows = [(int(r[0]), str(r[1])) for r in s.execute(_draw_query(plan, allocation, None))]
    if not rows:
        return []
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    order = np.lexsort((ids, sample_rank(plan.seed, ids)))
    return [rows[int(i)] for i in order]  # one queue order mixing the strata: by rank, then id


def key_windows(allocation: Mapping[str, int], sizes: Mapping[str, int]) -> dict[str, int]:
    """Per stratum with a sample, a width W of rotated keys such that the stratum's first
    n_h rows almost surely have a rotated key below W: keys are uniform over [0, 2**62), so
    about N_h * W / 2**62 rows of the stratum fall below W; W is set for n_h + 5 sqrt(n_h) +
    20 of them (the whole key space when that is the stratum). The draw checks the count and
    falls back to the whole key space in the unlikely case it falls short."""
    out = {}
    for name, n in allocation.items():
        if n <= 0:
            continue
        size = sizes.get(name, 0)
        share = (n + 5 * math.sqrt(n) + 20) / size if size else 1.0
        out[name] = KEY_SPACE if share >= 1 else max(1, math.ceil(KEY_SPACE * share))
    return out


def _narrow(width: int) -> bool:
    """Whether a window of rotated keys is read through the key index: below a fifth of the
    key space (wider ones are read by a scan of the stratum)."""
    return width < KEY_SPACE // 5


def key_rows(
    s: Session, plan: SamplingPlan, offset: int, windows: Mapping[str, int]
) -> list[tuple[int, str, int]]:
    """(id, stratum, rotated key) of the first ``allocation[stratum]`` rows of each stratum
    of ``windows`` among those whose rotated key ``(sample_key - offset) mod 2**62`` is below
    the stratum's window, ranked in the database. Narrow windows are read as the key range
    [offset, offset + widest window) modulo 2**62 (two ranges when it wraps around) through
    the index ``ix_traces_sampling``, led by the key; wide ones by a scan of the strata."""
    spec = spec_of(plan)
    wanted = {k: v for k, v in stored_allocation(plan).items() if v > 0 and k in windows}
    key = Trace.sample_key
    stratum = stratum_expr(spec.strata, promoted=True)
    conds = [*spec.filter.conditions(), stratum.in_(list(windows))]
    if _narrow(max(windows.values())):
        end = offset + max(windows.values())
        if end <= KEY_SPACE:
            conds += [key >= offset, key < end]
        else:
            conds.append(or_(key >= offset, key < end - KEY_SPACE))
    rotated = case((key >= offset, key - offset), else_=key + (KEY_SPACE - offset))
    keyed = (
        select(
            Trace.id.label("id"),
            stratum.label("stratum"),
            rotated.label("rk"),
        )
        .where(*conds)
        .subquery("keyed")
    )
    cut = (
        select(keyed.c.id, keyed.c.stratum, keyed.c.rk)
        .where(keyed.c.rk < case(dict(windows), value=keyed.c.stratum, else_=-1))
        .subquery("cut")
    )
    ranked = select(
        cut.c.id,
        cut.c.stratum,
        cut.c.rk,
        func.row_number()
        .over(partition_by=cut.c.stratum, order_by=(cut.c.rk, cut.c.id))
        .label("pos"),
    ).subquery("ranked")
    limit = case(wanted, value=ranked.c.stratum, else_=0)
    query = select(ranked.c.id, ranked.c.stratum, ranked.c.rk).where(ranked.c.pos <= limit)
    return [(int(i), str(st), int(rk)) for i, st, rk in s.execute(query)]


def _drawn_by_key(s: Session, plan: SamplingPlan) -> list[tuple[int, str]]:
    """Algorithm 2: in each stratum the ``allocation[stratum]`` rows with the smallest
    (rotated key, id), in one queue order mixing the strata by (rotated key, id)."""
    allocation = {k: v for k, v in stored_allocation(plan).items() if v > 0}
    if not allocation:
        return []
    sizes = {c.stratum: c.count for c in stored_counts(plan)}
    offset = key_offset(plan.seed)
    windows = key_windows(allocation, sizes)
    # strata with a narrow window: one key range; the others: a scan of just those strata
    narrow = {st: w for st, w in windows.items() if _narrow(w)}
    wide = dict.fromkeys((st for st in windows if st not in narrow), KEY_SPACE)
    rows = [r for part in (narrow, wide) if part for r in key_rows(s, plan, offset, part)]
    got = Tally(st for _i, st, _rk in rows)
    short = {st for st, n in allocation.items() if got[st] < n}
    if short:  # a window held fewer rows than the stratum's sample: read every key
        rows = [r for r in rows if r[1] not in short]
        rows += key_rows(s, plan, offset, dict.fromkeys(short, KEY_SPACE))
    return [(tid, st) for tid, st, _rk in sorted(rows, key=lambda r: (r[2], r[0]))]


def preview_sample(engine: Engine, plan_id: int) -> list[tuple[int, str]]:
    """(trace pk, stratum) the plan draws from the current data, in queue order (no write)."""
    with read_session(engine) as s:
        return _drawn(s, plan_row(s, plan_id))


# pages the draw's lock of its traces asks the disk for at once (see _lock_drawn)
DRAW_PREFETCH = 64


@dataclass(frozen=True)
class DrawResult:
    items: int
    by_stratum: dict[str, int]


def _lock_drawn(s: Session, trace_pks: list[int]) -> None:
    """PostgreSQL: the drawn traces locked as the items' foreign key locks them (``FOR KEY
    SHARE``: a trace can still be updated, not deleted), in one statement whose bitmap scan
    reads their pages from disk side by side. Each item's key check would otherwise wait for
    its own page, one after the other: 400 random pages of a 15 GB table at ten million
    traces, 0.3-2.5 s when they are not in memory. The key checks then find the primary key's
    leaves and the rows in memory (they look a trace up by its primary key: see
    storage.partitions.COLUMN_OPTIONS). A server whose ``effective_io_concurrency`` is 0
    (turned off, or a platform without prefetching, which refuses any other value) keeps
    it."""
    if s.get_bind().dialect.name != "postgresql":
        return
    settings = {"enable_indexscan": "off", "enable_indexonlyscan": "off"}
    if s.execute(select(func.current_setting("effective_io_concurrency"))).scalar_one() != "0":
        settings["effective_io_concurrency"] = str(DRAW_PREFETCH)
    with planner(s, **settings):
        s.execute(
            select(Trace.id)
            .where(one_of(s, Trace.id, trace_pks))
            .with_for_update(read=True, key_share=True)
        ).all()


def draw_plan(s: Session, actor: Actor, plan_id: int) -> DrawResult:
    """Draw the sample in SQL and open the plan for review. Refused, with how the population
    changed, when it is no longer the population the plan counted (recount first)."""
    require(actor, Permission.audit)

    plan = plan_row(s, plan_id, lock=True)
    if plan.status != PlanStatus.planned:
        raise InputError(f"plan {plan.name!r} is already drawn")
    check = _recheck(s, plan)
    if check.changed:
        raise PopulationChanged(
            check.message() + " Nothing was drawn: recount the plan, look at the new "
            "allocation, then draw."
        )
    drawn = _drawn(s, plan)
    if not drawn:
        raise InputError("the allocation selects no trace; nothing was drawn")
    _lock_drawn(s, [tid for tid, _stratum in drawn])
    s.execute(
        insert(AuditItem),
        [
            {"plan_id": plan.id, "trace_pk": tid, "stratum": stratum, "position": i}
            for i, (tid, stratum) in enumerate(drawn, start=1)
        ],
    )
    before = changes.snapshot(plan)
    plan.status = PlanStatus.open
    s.flush()
    by_stratum = dict(Tally(st for _t, st in drawn))
    changes.record(
        s,
        actor.email,
        "draw",
        "sampling_plan",
        plan.id,
        before,
        {**changes.snapshot(plan), "drawn": len(drawn), "by_stratum": by_stratum},
    )
    return DrawResult(len(drawn), by_stratum)


def verify_sample(engine: Engine, plan_id: int) -> bool | None:
    """Whether drawing the plan again from today's data gives exactly the stored sample
    (None when the population changed, so a different draw is expected, or not drawn)."""
    with read_session(engine) as s:
        plan = plan_row(s, plan_id)
        if plan.status == PlanStatus.planned:
            return None
        if _recheck(s, plan).changed:
            return None
        stored = [
            (int(r[0]), str(r[1]))
            for r in s.execute(
                select(AuditItem.trace_pk, AuditItem.stratum)
                .where(AuditItem.plan_id == plan_id)
                .order_by(AuditItem.position)
            )
        ]
        return stored == _drawn(s, plan)


def close_plan(s: Session, actor: Actor, plan_id: int) -> None:
    """Mark a plan's audit complete (every item has its verdicts); no verdicts after that."""
    require(actor, Permission.audit)

    plan = plan_row(s, plan_id, lock=True)
    if plan.status != PlanStatus.open:
        raise InputError(f"plan {plan.name!r} is {plan.status}, not open for review")
    need = _items_needing_verdicts(s, plan)
    if need:
        raise InputError(
            f"{readable.count(need, 'item')} of {plan.name!r} still "
            f"{readable.plural(need, 'needs', 'need')} verdicts; the batch can be "
            "closed when every sampled trace is audited"
        )
    before = changes.snapshot(plan)
    plan.status = PlanStatus.closed
    s.flush()
    changes.record(
        s, actor.email, "close", "sampling_plan", plan.id, before, changes.snapshot(plan)
    )


def n_reviewers() -> Any:
    return (
        select(func.count(func.distinct(AuditVerdict.reviewer)))
        .where(AuditVerdict.item_id == AuditItem.id)
        .correlate(AuditItem)
        .scalar_subquery()
    )


def _items_needing_verdicts(s: Session, plan: SamplingPlan) -> int:
    return int(
        s.scalar(
            select(func.count(AuditItem.id)).where(
                AuditItem.plan_id == plan.id, n_reviewers() < plan.overlap
            )
        )
        or 0
    )


def plan_row(s: Session, plan_id: int, lock: bool = False) -> SamplingPlan:
    plan = s.get(SamplingPlan, plan_id, with_for_update=lock or None)
    if plan is None:
        raise InputError(f"sampling plan {plan_id} does not exist")
    return plan


@dataclass(frozen=True)
class PlanView:
    id: int
    name: str
    status: str
    spec: PlanSpec
    population: tuple[StratumCount, ...]
    allocation: dict[str, int]
    fingerprint: str
    counted_at: str
    created_by: str
    created_at: dt.datetime
    items: int
    complete: int
    verdicts: int

    @property
    def population_total(self) -> int:
        return sum(c.count for c in self.population)

    def strata_frame(self) -> pd.DataFrame:
        return pd.DataFrame(
            [
                {
                    "stratum": c.stratum,
                    "population": c.count,
                    "sample": self.allocation.get(c.stratum, 0),
                    "weight": (
                        c.count / self.allocation[c.stratum]
                        if self.allocation.get(c.stratum)
                        else None
                    ),
                }
                for c in self.population
            ],
            columns=["stratum", "population", "sample", "weight"],
        )


def plan_stats(s: Session, plan_ids: Sequence[int]) -> dict[int, tuple[int, int, int]]:
    if not plan_ids:
        return {}
    per_item = (
        select(
            AuditItem.plan_id,
            AuditItem.id,
            func.count(func.distinct(AuditVerdict.reviewer)).label("n"),
        )
        .outerjoin(AuditVerdict, AuditVerdict.item_id == AuditItem.id)
        .where(one_of(s, AuditItem.plan_id, plan_ids))
        .group_by(AuditItem.plan_id, AuditItem.id)
        .subquery()
    )
    overlap = (
        select(SamplingPlan.overlap)
        .where(SamplingPlan.id == per_item.c.plan_id)
        .correlate(per_item)
        .scalar_subquery()
    )
    rows = s.execute(
        select(
            per_item.c.plan_id,
            func.count(),
            func.sum(case((per_item.c.n >= overlap, 1), else_=0)),
            func.sum(per_item.c.n),
        ).group_by(per_item.c.plan_id)
    ).all()
    return {int(r[0]): (int(r[1]), int(r[2] or 0), int(r[3] or 0)) for r in rows}


def _plan_view(plan: SamplingPlan, stats: tuple[int, int, int]) -> PlanView:
    return PlanView(
        plan.id,
        plan.name,
        plan.status,
        spec_of(plan),
        tuple(stored_counts(plan)),
        stored_allocation(plan),
        plan.fingerprint,
        str((plan.population or {}).get("counted_at", "")),
        plan.created_by,
        plan.created_at,
        *stats,
    )


def list_plans(engine: Engine) -> list[PlanView]:
    """Every plan, newest first, with its progress (plans are few; items are counted in SQL)."""
    with read_session(engine) as s:
        plans = list(s.scalars(select(SamplingPlan).order_by(SamplingPlan.id.desc())))
        stats = plan_stats(s, [p.id for p in plans])
        return [_plan_view(p, stats.get(p.id, (0, 0, 0))) for p in plans]


def get_plan(engine: Engine, plan_id: int) -> PlanView | None:
    with read_session(engine) as s:
        plan = s.get(SamplingPlan, plan_id)
        if plan is None:
            return None
        return _plan_view(plan, plan_stats(s, [plan.id]).get(plan.id, (0, 0, 0)))


def dimension_values(engine: Engine, dim: str, limit: int = 100) -> list[str]:
    """Distinct values of a stratum dimension (``NONE`` for missing), for filter pickers.

    Segments the monitoring rollup keeps (and the decision) are read from it, not from a
    scan of every trace."""
    col = stratum_column(dim)
    with read_session(engine) as s:
        if dim == "decision" or dim in rollup.DIMENSIONS:
            return _rollup_values(s, dim, limit)
        if leads_an_index(col):  # one index seek per value, not a read of every trace
            seen, has_null = seek_distinct(s, col, limit)
            found: list[Any] = [None, *seen] if has_null else seen
        else:
            found = list(s.scalars(select(col).distinct().order_by(col).limit(limit + 1)).all())
    values = [str(v) for v in found if v is not None]
    if len(values) < len(found):  # missing values first, on every database
        values.insert(0, NONE)
    return values[:limit]


def _rollup_values(s: Session, dim: str, limit: int) -> list[str]:
    r = TraceRollup
    every = r.dim == rollup.ALL
    if dim == "decision":
        found = s.scalars(select(r.decision).where(every).distinct()).all()
        values = sorted(NONE if v == "" else v for v in found)
    else:
        values = sorted(s.scalars(select(r.value).where(r.dim == dim).distinct()).all())
        total = s.scalar(select(func.coalesce(func.sum(r.traces), 0)).where(every)) or 0
        covered = s.scalar(select(func.coalesce(func.sum(r.traces), 0)).where(r.dim == dim)) or 0
        if int(covered) < int(total):
            values = [NONE, *values]
    if NONE in values:  # missing values first, as the database sorts NULL first
        values = [NONE, *(v for v in values if v != NONE)]
    return values[:limit]
