"""Audits of production traces: reproducible stratified samples, a review queue, verdicts
checked claim by claim, estimates weighted back to the population, promotion to cases, export.

A **sampling plan** names a population (a filter over the traces), the strata (any mix of
decision, reason code, feedback, customer tier, language, versions or a trace attribute), an
allocation (proportional, equal or explicit sizes), a total and a seed. Creating the plan
counts the population per stratum in SQL and stores the counts with a fingerprint
(``review.core.sampling.population_fingerprint``). Drawing the sample ranks each stratum by the
seeded key of ``review.core.sampling.sample_rank_sql`` inside the database and keeps the first
``allocation[stratum]`` rows, so the same plan on the same data always draws the same traces,
no trace twice. ``check_population`` re-counts and says how the population changed.

The **queue** hands each reviewer the next item that still needs a verdict (``overlap``
verdicts per item, by different reviewers); an opened item is reserved for a while so two
reviewers do not work on the same slot. Restricted traces go only to reviewers with clearance.
With blind review a reviewer sees other verdicts on an item only after submitting their own.

**Verdicts** are append-only: an edit is a new row naming the one it replaces, and an edit
based on an older row is refused. A verdict separates the two failure sides (correct or false
refusal, supported or unsupported answer, partially supported, restricted content leaked,
wording violation), attributes a failure to a pipeline stage, and can carry a claim-level
review: the answer cut into claims (editable), each with the chunks it cites and a verdict;
the answer passes only if every claim is supported by a chunk that was in the context sent.

**Estimates** weight each stratum by population / audited sample (``weighted_estimate``) and
show the raw sample rate with its Wilson interval beside it; slices that cut across strata use
the ratio estimator (``domain_estimate``).
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import math
import re
from collections import Counter as Tally
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import IO, Any

import numpy as np
import pandas as pd
from sqlalchemy import (
    ColumnElement,
    Engine,
    String,
    case,
    exists,
    func,
    insert,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy.orm import Session

from review.audits.claims import CitationReport, citation_validity, split_claims
from review.cases import cases
from review.core.errors import InputError, PermissionDenied, StaleWriteError
from review.core.identity import Actor, Permission, require
from review.core.sampling import (
    FINGERPRINT_SEED,
    PRIME,
    StratifiedEstimate,
    allocate,
    population_fingerprint,
    sample_rank,
    sample_rank_sql,
    weighted_estimate,
    wilson_interval,
)
from review.core.taxonomy import Taxonomy
from review.traces import rollup
from storage import changes
from storage.db import read_session, run_write
from storage.models import (
    AuditItem,
    AuditVerdict,
    Case,
    Document,
    SamplingPlan,
    Trace,
    TraceChunk,
    TraceImport,
    TraceRollup,
    utcnow,
)

__all__ = [
    "ALLOCATIONS",
    "CLAIM_VERDICTS",
    "DIMENSIONS",
    "HEADLINE",
    "NONE",
    "SLICE_DIMS",
    "STAGES",
    "VERDICTS",
    "AuditProgress",
    "ChunkView",
    "ClaimDraft",
    "DomainEstimate",
    "EstimateReport",
    "ItemRow",
    "ItemView",
    "PlanSpec",
    "PlanView",
    "PopulationChanged",
    "PopulationCheck",
    "PopulationFilter",
    "StratumCount",
    "VerdictIn",
    "VerdictView",
    "by_slice",
    "check_claims",
    "check_population",
    "close_plan",
    "count_items",
    "count_population",
    "create_plan",
    "dimension_values",
    "domain_estimate",
    "draw_plan",
    "estimates",
    "export_csv",
    "export_jsonl",
    "get_item",
    "get_plan",
    "item_outcomes",
    "item_verdicts",
    "list_items",
    "list_plans",
    "my_verdict",
    "next_item",
    "parse_explicit_sizes",
    "preview_sample",
    "progress",
    "promote_to_case",
    "promoted_from",
    "propose_claims",
    "recount_plan",
    "release_item",
    "reserve_item",
    "submit_verdict",
    "verdict_history",
    "verify_sample",
]

# --- vocabulary -----------------------------------------------------------------------------

VERDICTS: dict[str, str] = {
    "correct_refusal": "Correct refusal",
    "false_refusal": "False refusal (I expected an answer)",
    "supported_answer": "Supported answer",
    "unsupported_answer": "Unsupported answer (this answer is wrong)",
    "partially_supported": "Partially supported",
    "restricted_leak": "Restricted content leaked",
    "wording_violation": "Wording violation",
}
STAGES: dict[str, str] = {
    "retrieval_missed": "Retrieval missed the evidence",
    "filter_removed": "Authorization filter removed it",
    "policy_too_strict": "Answer policy too strict",
    "generator_ignored_signal": "Generator ignored a low-evidence signal",
    "citation_partial": "Citation covers only part of the prose",
}
CLAIM_VERDICTS = ("supported", "unsupported", "contradicted")
#: The rates a monthly review reads first.
HEADLINE = ("unsupported_answer", "false_refusal", "correct_refusal", "restricted_leak")
#: Verdicts that name a failure and must say which stage caused it.
NEEDS_STAGE = frozenset({"false_refusal", "unsupported_answer", "partially_supported"})
#: Verdicts that say the system behaved well: no failing stage.
CORRECT = frozenset({"correct_refusal", "supported_answer"})
#: Verdicts whose notes are required (what leaked, which wording rule).
NEEDS_NOTE = frozenset({"restricted_leak", "wording_violation"})
#: Tie-break between reviewers who disagree: the more severe verdict wins.
SEVERITY = (
    "restricted_leak",
    "unsupported_answer",
    "partially_supported",
    "false_refusal",
    "wording_violation",
    "supported_answer",
    "correct_refusal",
)
ALLOCATIONS = ("proportional", "equal", "explicit")
NONE = "(none)"  # the stratum value (and filter value) of a missing field
SEP = " · "
ALL = "all"
MAX_TOTAL = 100_000
MAX_SEED = 2_147_483_647
MAX_STRATA_DIMS = 4
RESERVATION_MINUTES = 30
RESTRICTED_TEXT = "[restricted trace: shown only to users with clearance]"
HIDDEN_CHUNK = "[filtered by authorization: text shown only to users with clearance]"

DIMENSIONS: dict[str, str] = {
    "decision": "Decision",
    "reason_code": "Reason code",
    "feedback": "User feedback",
    "customer_tier": "Customer tier",
    "language": "Language",
    "document_type": "Document type",
    "policy_version": "Policy version",
    "model_version": "Model version",
    "ranking_mode": "Ranking mode",
    "user_role": "User role",
    # entries of the traces' ``versions`` JSON (the monitoring rollup keeps these segments)
    "version.index": "Index version",
    "version.prompt": "Prompt version",
    "version.embedding": "Embedding model",
    "version.reranker": "Reranker",
}
_VERSION_PREFIX = "version."
_ATTR_RE = re.compile(r"^attr\.([A-Za-z0-9_][A-Za-z0-9_.-]{0,59})$")


def _column(dim: str) -> ColumnElement[Any]:
    """The SQL expression of a stratum dimension (a trace column, ``version.<key>`` for an
    entry of the ``versions`` JSON, or ``attr.<key>``)."""
    if dim in DIMENSIONS:
        if dim.startswith(_VERSION_PREFIX):
            version: ColumnElement[Any] = Trace.versions[
                dim.removeprefix(_VERSION_PREFIX)
            ].as_string()
            return version
        col: ColumnElement[Any] = getattr(Trace, dim)
        return col
    m = _ATTR_RE.match(dim)
    if m:
        attr: ColumnElement[Any] = Trace.attributes[m.group(1)].as_string()
        return attr
    raise InputError(
        f"unknown stratum {dim!r}: use one of {', '.join(DIMENSIONS)} or attr.<attribute name>"
    )


def _sql_text(value: str) -> ColumnElement[str]:
    """A constant string rendered inline (so GROUP BY / PARTITION BY compare equal)."""
    return literal_column("'" + value.replace("'", "''") + "'", String)


def _stratum_expr(strata: Sequence[str]) -> ColumnElement[str]:
    if not strata:
        return _sql_text(ALL)
    expr: ColumnElement[str] = func.coalesce(_column(strata[0]), _sql_text(NONE))
    for dim in strata[1:]:
        expr = expr + _sql_text(SEP) + func.coalesce(_column(dim), _sql_text(NONE))
    return expr


# --- the population filter ------------------------------------------------------------------

#: PopulationFilter field -> the dimension (trace column or ``version.<key>``) it filters.
#: A field absent from a stored filter's JSON means "any" (filters stored before it existed).
_FILTER_COLUMNS: tuple[tuple[str, str], ...] = (
    ("decisions", "decision"),
    ("reason_codes", "reason_code"),
    ("feedback", "feedback"),
    ("languages", "language"),
    ("customer_tiers", "customer_tier"),
    ("document_types", "document_type"),
    ("policy_versions", "policy_version"),
    ("model_versions", "model_version"),
    ("index_versions", "version.index"),
    ("prompt_versions", "version.prompt"),
    ("embedding_versions", "version.embedding"),
    ("reranker_versions", "version.reranker"),
)


@dataclass(frozen=True)
class PopulationFilter:
    """Which traces form the population. Empty tuples mean "any"; ``NONE`` in a tuple matches
    traces where the field is missing. ``date_to`` is inclusive (the whole day, UTC)."""

    date_from: dt.date | None = None
    date_to: dt.date | None = None
    decisions: tuple[str, ...] = ()
    reason_codes: tuple[str, ...] = ()
    feedback: tuple[str, ...] = ()
    languages: tuple[str, ...] = ()
    customer_tiers: tuple[str, ...] = ()
    document_types: tuple[str, ...] = ()
    policy_versions: tuple[str, ...] = ()
    model_versions: tuple[str, ...] = ()
    index_versions: tuple[str, ...] = ()
    prompt_versions: tuple[str, ...] = ()
    embedding_versions: tuple[str, ...] = ()
    reranker_versions: tuple[str, ...] = ()
    attributes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    include_restricted: bool = True

    def check(self) -> None:
        if self.date_from and self.date_to and self.date_from > self.date_to:
            raise InputError(
                f"population filter: the date range ends ({self.date_to}) before it starts "
                f"({self.date_from})"
            )
        for key, _values in self.attributes:
            if not _ATTR_RE.match(f"attr.{key}"):
                raise InputError(f"population filter: attribute name {key!r} is not valid")

    def conditions(self) -> list[ColumnElement[bool]]:
        self.check()
        conds: list[ColumnElement[bool]] = []
        if self.date_from:
            conds.append(Trace.at >= _day_start(self.date_from))
        if self.date_to:
            conds.append(Trace.at < _day_start(self.date_to + dt.timedelta(days=1)))
        for attr, dim in _FILTER_COLUMNS:
            values: tuple[str, ...] = getattr(self, attr)
            if values:
                conds.append(_in_values(_column(dim), values))
        for key, values in self.attributes:
            if values:
                conds.append(_in_values(Trace.attributes[key].as_string(), values))
        if not self.include_restricted:
            conds.append(Trace.restricted.is_(False))
        return conds

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.date_from:
            out["date_from"] = self.date_from.isoformat()
        if self.date_to:
            out["date_to"] = self.date_to.isoformat()
        for attr, _col in _FILTER_COLUMNS:
            values = getattr(self, attr)
            if values:
                out[attr] = list(values)
        if self.attributes:
            out["attributes"] = {k: list(v) for k, v in self.attributes}
        if not self.include_restricted:
            out["include_restricted"] = False
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PopulationFilter:
        def day(key: str) -> dt.date | None:
            raw = data.get(key)
            return dt.date.fromisoformat(raw) if raw else None

        lists = {attr: tuple(data.get(attr) or ()) for attr, _col in _FILTER_COLUMNS}
        attrs = tuple((str(k), tuple(v)) for k, v in (data.get("attributes") or {}).items())
        return cls(
            date_from=day("date_from"),
            date_to=day("date_to"),
            attributes=attrs,
            include_restricted=bool(data.get("include_restricted", True)),
            **lists,
        )

    def describe(self) -> str:
        """The filter in one line, for plan lists and exports."""
        parts = []
        if self.date_from or self.date_to:
            parts.append(f"{self.date_from or '…'} to {self.date_to or '…'}")
        for attr, _col in _FILTER_COLUMNS:
            values = getattr(self, attr)
            if values:
                parts.append(f"{attr.replace('_', ' ')}: {', '.join(values)}")
        for key, values in self.attributes:
            parts.append(f"{key}: {', '.join(values)}")
        if not self.include_restricted:
            parts.append("restricted traces left out")
        return "; ".join(parts) or "every trace"


def _day_start(day: dt.date) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)


def _in_values(col: ColumnElement[Any], values: Sequence[str]) -> ColumnElement[bool]:
    real = [v for v in values if v != NONE]
    parts: list[ColumnElement[bool]] = []
    if real:
        parts.append(col.in_(real))
    if NONE in values:
        parts.append(col.is_(None))
    return or_(*parts)


# --- plans ----------------------------------------------------------------------------------


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
            _column(dim)
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
    stratum: str
    count: int
    min_id: int
    max_id: int
    id_sum: int
    rank_sum: int

    def summary_row(self) -> dict[str, Any]:
        return asdict(self)


def _population_query(flt: PopulationFilter, strata: Sequence[str]) -> Any:
    return (
        select(Trace.id.label("id"), _stratum_expr(strata).label("stratum"))
        .where(*flt.conditions())
        .subquery("pop")
    )


def _count(s: Session, flt: PopulationFilter, strata: Sequence[str]) -> list[StratumCount]:
    pop = _population_query(flt, strata)
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
    """The population per stratum (counted in SQL), to preview a plan before creating it."""
    for dim in strata:
        _column(dim)
    with read_session(engine) as s:
        return _count(s, flt, strata)


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


def _traces_stamp(s: Session) -> list[int]:
    """(rows, highest id, newest import) of the traces: cheap aggregates. Traces are never
    edited, and every import adds an import row (so a reused id still moves the stamp);
    while the stamp stays the same every population is the one counted before."""
    n, top = s.execute(select(func.count(), func.coalesce(func.max(Trace.id), 0))).one()
    newest_import = s.scalar(select(func.coalesce(func.max(TraceImport.id), 0)))
    return [int(n), int(top), int(newest_import or 0)]


def _population_record(
    counts: Sequence[StratumCount],
    allocation: Mapping[str, int],
    spec: PlanSpec,
    stamp: Sequence[int],
) -> dict[str, Any]:
    return {
        "traces_stamp": list(stamp),
        "strata": [c.summary_row() for c in counts],
        "allocation": dict(allocation),
        "counted_at": utcnow().isoformat(),
        "options": {"blind": spec.blind, "reservation_minutes": spec.reservation_minutes},
    }


def create_plan(engine: Engine, actor: Actor, spec: PlanSpec) -> int:
    """Store a plan with its population per stratum, allocation and fingerprint (not drawn
    yet: ``draw_plan`` draws it)."""
    require(actor, Permission.audit)
    spec = replace(spec, name=spec.name.strip())
    spec.check()

    def work(s: Session) -> int:
        if s.scalar(select(SamplingPlan.id).where(SamplingPlan.name == spec.name)) is not None:
            raise InputError(f"a plan named {spec.name!r} already exists; choose another name")
        counts = _count(s, spec.filter, spec.strata)
        allocation = _allocation(counts, spec)
        row = SamplingPlan(
            name=spec.name,
            population_filter=spec.filter.to_json(),
            strata=list(spec.strata),
            allocation=spec.allocation,
            explicit_sizes=dict(spec.explicit_sizes or {}),
            total=spec.total,
            seed=spec.seed,
            population=_population_record(counts, allocation, spec, _traces_stamp(s)),
            fingerprint=_fingerprint(counts),
            overlap=spec.overlap,
            status="planned",
            created_by=actor.email,
            created_at=utcnow(),
        )
        s.add(row)
        s.flush()
        changes.record(
            s, actor.email, "create", "sampling_plan", row.id, None, changes.snapshot(row)
        )
        return row.id

    return run_write(engine, work)


def _spec_of(plan: SamplingPlan) -> PlanSpec:
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


def _stored_counts(plan: SamplingPlan) -> list[StratumCount]:
    return [StratumCount(**r) for r in (plan.population or {}).get("strata", [])]


def _stored_allocation(plan: SamplingPlan) -> dict[str, int]:
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


def _compare(stored: Sequence[StratumCount], current: Sequence[StratumCount]) -> PopulationCheck:
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
    population is the counted one and the million-row count is skipped."""
    stored = _stored_counts(plan)
    if (plan.population or {}).get("traces_stamp") == _traces_stamp(s):
        return _compare(stored, stored)
    spec = _spec_of(plan)
    return _compare(stored, _count(s, spec.filter, spec.strata))


def check_population(engine: Engine, plan_id: int) -> PopulationCheck:
    """Count the plan's population again and compare it with the stored counts."""
    with read_session(engine) as s:
        return _recheck(s, _plan(s, plan_id))


class PopulationChanged(InputError):
    """The population is no longer the one the plan counted; nothing was drawn."""


def recount_plan(engine: Engine, actor: Actor, plan_id: int) -> PopulationCheck:
    """Count a plan that is not drawn yet again and store the new counts and allocation."""
    require(actor, Permission.audit)

    def work(s: Session) -> PopulationCheck:
        plan = _plan(s, plan_id, lock=True)
        if plan.status != "planned":
            raise InputError(
                f"plan {plan.name!r} is already drawn: its counts stay those of the draw"
            )
        spec = _spec_of(plan)
        counts = _count(s, spec.filter, spec.strata)
        check = _compare(_stored_counts(plan), counts)
        before = changes.snapshot(plan)
        plan.population = _population_record(
            counts, _allocation(counts, spec), spec, _traces_stamp(s)
        )
        plan.fingerprint = _fingerprint(counts)
        s.flush()
        changes.record(
            s, actor.email, "recount", "sampling_plan", plan.id, before, changes.snapshot(plan)
        )
        return check

    return run_write(engine, work)


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
    spec = _spec_of(plan)
    keyed = (
        select(
            Trace.id.label("id"),
            _stratum_expr(spec.strata).label("stratum"),
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
    allocation = _stored_allocation(plan)
    sizes = {c.stratum: c.count for c in _stored_counts(plan)}
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


def preview_sample(engine: Engine, plan_id: int) -> list[tuple[int, str]]:
    """(trace pk, stratum) the plan draws from the current data, in queue order (no write)."""
    with read_session(engine) as s:
        return _drawn(s, _plan(s, plan_id))


@dataclass(frozen=True)
class DrawResult:
    items: int
    by_stratum: dict[str, int]


def draw_plan(engine: Engine, actor: Actor, plan_id: int) -> DrawResult:
    """Draw the sample in SQL and open the plan for review. Refused, with how the population
    changed, when it is no longer the population the plan counted (recount first)."""
    require(actor, Permission.audit)

    def work(s: Session) -> DrawResult:
        plan = _plan(s, plan_id, lock=True)
        if plan.status != "planned":
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
        s.execute(
            insert(AuditItem),
            [
                {"plan_id": plan.id, "trace_pk": tid, "stratum": stratum, "position": i}
                for i, (tid, stratum) in enumerate(drawn, start=1)
            ],
        )
        before = changes.snapshot(plan)
        plan.status = "open"
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

    return run_write(engine, work)


def verify_sample(engine: Engine, plan_id: int) -> bool | None:
    """Whether drawing the plan again from today's data gives exactly the stored sample
    (None when the population changed, so a different draw is expected, or not drawn)."""
    with read_session(engine) as s:
        plan = _plan(s, plan_id)
        if plan.status == "planned":
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


def close_plan(engine: Engine, actor: Actor, plan_id: int) -> None:
    """Mark a plan's audit complete (every item has its verdicts); no verdicts after that."""
    require(actor, Permission.audit)

    def work(s: Session) -> None:
        plan = _plan(s, plan_id, lock=True)
        if plan.status != "open":
            raise InputError(f"plan {plan.name!r} is {plan.status}, not open for review")
        need = _items_needing_verdicts(s, plan)
        if need:
            raise InputError(
                f"{need} item(s) of {plan.name!r} still need verdicts; the batch can be "
                "closed when every sampled trace is audited"
            )
        before = changes.snapshot(plan)
        plan.status = "closed"
        s.flush()
        changes.record(
            s, actor.email, "close", "sampling_plan", plan.id, before, changes.snapshot(plan)
        )

    run_write(engine, work)


def _n_reviewers() -> Any:
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
                AuditItem.plan_id == plan.id, _n_reviewers() < plan.overlap
            )
        )
        or 0
    )


def _plan(s: Session, plan_id: int, lock: bool = False) -> SamplingPlan:
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


def _plan_stats(s: Session, plan_ids: Sequence[int]) -> dict[int, tuple[int, int, int]]:
    if not plan_ids:
        return {}
    per_item = (
        select(
            AuditItem.plan_id,
            AuditItem.id,
            func.count(func.distinct(AuditVerdict.reviewer)).label("n"),
        )
        .outerjoin(AuditVerdict, AuditVerdict.item_id == AuditItem.id)
        .where(AuditItem.plan_id.in_(plan_ids))
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
        _spec_of(plan),
        tuple(_stored_counts(plan)),
        _stored_allocation(plan),
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
        stats = _plan_stats(s, [p.id for p in plans])
        return [_plan_view(p, stats.get(p.id, (0, 0, 0))) for p in plans]


def get_plan(engine: Engine, plan_id: int) -> PlanView | None:
    with read_session(engine) as s:
        plan = s.get(SamplingPlan, plan_id)
        if plan is None:
            return None
        return _plan_view(plan, _plan_stats(s, [plan.id]).get(plan.id, (0, 0, 0)))


def dimension_values(engine: Engine, dim: str, limit: int = 100) -> list[str]:
    """Distinct values of a stratum dimension (``NONE`` for missing), for filter pickers.

    Segments the monitoring rollup keeps (and the decision) are read from it, not from a
    scan of every trace."""
    col = _column(dim)
    with read_session(engine) as s:
        if dim == "decision" or dim in rollup.DIMENSIONS:
            return _rollup_values(s, dim, limit)
        found = s.scalars(select(col).distinct().order_by(col).limit(limit + 1)).all()
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


# --- sample listing -------------------------------------------------------------------------


@dataclass(frozen=True)
class ItemRow:
    id: int
    position: int
    stratum: str
    trace_id: str
    at: dt.datetime
    decision: str | None
    feedback: str | None
    restricted: bool
    reviewers: int
    outcome: str | None
    reserved_by: str | None


def count_items(engine: Engine, plan_id: int) -> int:
    with read_session(engine) as s:
        return int(
            s.scalar(select(func.count(AuditItem.id)).where(AuditItem.plan_id == plan_id)) or 0
        )


def list_items(engine: Engine, plan_id: int, page: int = 1, page_size: int = 25) -> list[ItemRow]:
    """One page of a plan's sample in queue order (no trace text: safe for every role)."""
    page = max(page, 1)
    with read_session(engine) as s:
        rows = s.execute(
            select(
                AuditItem.id,
                AuditItem.position,
                AuditItem.stratum,
                Trace.trace_id,
                Trace.at,
                Trace.decision,
                Trace.feedback,
                Trace.restricted,
                AuditItem.reserved_by,
                AuditItem.reserved_until,
            )
            .join(Trace, Trace.id == AuditItem.trace_pk)
            .where(AuditItem.plan_id == plan_id)
            .order_by(AuditItem.position)
            .limit(page_size)
            .offset((page - 1) * page_size)
        ).all()
        current = _current_verdicts(s, [r.id for r in rows])
    now = utcnow()
    out = []
    for r in rows:
        verdicts = [v.verdict for v in current.get(r.id, [])]
        held = r.reserved_by if r.reserved_until and r.reserved_until > now else None
        out.append(
            ItemRow(
                r.id,
                r.position,
                r.stratum,
                r.trace_id,
                r.at,
                r.decision,
                r.feedback,
                bool(r.restricted),
                len(verdicts),
                _outcome(verdicts),
                held,
            )
        )
    return out


def _outcome(verdicts: Sequence[str]) -> str | None:
    """The item's verdict: the majority of its reviewers, ties going to the more severe."""
    if not verdicts:
        return None
    tally = Tally(verdicts)
    top = max(tally.values())
    tied = [v for v in tally if tally[v] == top]
    return min(tied, key=lambda v: SEVERITY.index(v) if v in SEVERITY else len(SEVERITY))


# --- the queue ------------------------------------------------------------------------------


def _can_see(actor: Actor, restricted: bool) -> bool:
    return actor.clearance or not restricted


def next_item(
    engine: Engine,
    actor: Actor,
    plan_id: int,
    *,
    exclude: Iterable[int] = (),
    now: dt.datetime | None = None,
) -> int | None:
    """Reserve and return my next item of the plan (None when nothing is left for me).

    An item I hold comes first; otherwise the first item in queue order that I have not
    judged, that nobody else holds, that has fewer than ``overlap`` verdicts, and whose trace
    I may see (restricted traces need clearance).
    """
    require(actor, Permission.audit)
    skip = sorted(set(exclude))

    def work(s: Session) -> int | None:
        t = now or utcnow()
        plan = _plan(s, plan_id)
        if plan.status != "open":
            return None
        spec = _spec_of(plan)
        mine = exists().where(
            AuditVerdict.item_id == AuditItem.id, AuditVerdict.reviewer == actor.email
        )
        visible = [] if actor.clearance else [Trace.restricted.is_(False)]
        held = s.scalar(
            select(AuditItem.id)
            .join(Trace, Trace.id == AuditItem.trace_pk)
            .where(
                AuditItem.plan_id == plan_id,
                AuditItem.reserved_by == actor.email,
                AuditItem.reserved_until > t,
                AuditItem.id.not_in(skip),
                ~mine,
                *visible,
            )
            .order_by(AuditItem.position)
            .limit(1)
        )
        if held is not None:
            _hold(s, int(held), actor, t, spec.reservation_minutes)
            return int(held)
        free = or_(
            AuditItem.reserved_by.is_(None),
            AuditItem.reserved_by == actor.email,
            AuditItem.reserved_until <= t,
        )
        item_id = s.scalar(
            select(AuditItem.id)
            .join(Trace, Trace.id == AuditItem.trace_pk)
            .where(
                AuditItem.plan_id == plan_id,
                AuditItem.id.not_in(skip),
                ~mine,
                free,
                _n_reviewers() < plan.overlap,
                *visible,
            )
            .order_by(AuditItem.position)
            .limit(1)
            .with_for_update(skip_locked=True, of=AuditItem)
        )
        if item_id is None:
            return None
        _hold(s, int(item_id), actor, t, spec.reservation_minutes)
        return int(item_id)

    return run_write(engine, work)


def _hold(s: Session, item_id: int, actor: Actor, t: dt.datetime, minutes: int) -> dt.datetime:
    until = t + dt.timedelta(minutes=minutes)
    s.execute(
        update(AuditItem)
        .where(AuditItem.id == item_id)
        .values(reserved_by=actor.email, reserved_until=until)
    )
    return until


def reserve_item(
    engine: Engine, actor: Actor, item_id: int, now: dt.datetime | None = None
) -> dt.datetime:
    """Hold a specific item (opened by a deep link); refused while someone else holds it."""
    require(actor, Permission.audit)

    def work(s: Session) -> dt.datetime:
        t = now or utcnow()
        item = s.get(AuditItem, item_id, with_for_update=True)
        if item is None:
            raise InputError(f"audit item {item_id} does not exist")
        trace = s.get(Trace, item.trace_pk)
        if trace is not None and not _can_see(actor, trace.restricted):
            raise PermissionDenied("this trace is restricted: only users with clearance audit it")
        if (
            item.reserved_by not in (None, actor.email)
            and item.reserved_until is not None
            and item.reserved_until > t
        ):
            raise InputError(
                f"item {item_id} is being reviewed by {item.reserved_by} until "
                f"{item.reserved_until:%H:%M UTC}; take the next item instead"
            )
        plan = _plan(s, item.plan_id)
        return _hold(s, item_id, actor, t, _spec_of(plan).reservation_minutes)

    return run_write(engine, work)


def release_item(engine: Engine, actor: Actor, item_id: int) -> None:
    """Give an item I hold back to the queue (skip)."""
    require(actor, Permission.audit)
    run_write(
        engine,
        lambda s: s.execute(
            update(AuditItem)
            .where(AuditItem.id == item_id, AuditItem.reserved_by == actor.email)
            .values(reserved_by=None, reserved_until=None)
        ),
    )


@dataclass(frozen=True)
class AuditProgress:
    items: int
    complete: int
    verdicts: int
    mine: int
    held_by_me: int
    overlap: int
    waiting_for_clearance: int  # restricted items I may not audit that still need verdicts


def progress(engine: Engine, actor: Actor, plan_id: int) -> AuditProgress:
    with read_session(engine) as s:
        plan = _plan(s, plan_id)
        items, complete, verdicts = _plan_stats(s, [plan_id]).get(plan_id, (0, 0, 0))
        mine = int(
            s.scalar(
                select(func.count(func.distinct(AuditVerdict.item_id)))
                .join(AuditItem, AuditItem.id == AuditVerdict.item_id)
                .where(AuditItem.plan_id == plan_id, AuditVerdict.reviewer == actor.email)
            )
            or 0
        )
        held = int(
            s.scalar(
                select(func.count(AuditItem.id)).where(
                    AuditItem.plan_id == plan_id,
                    AuditItem.reserved_by == actor.email,
                    AuditItem.reserved_until > utcnow(),
                )
            )
            or 0
        )
        waiting = 0
        if not actor.clearance:
            waiting = int(
                s.scalar(
                    select(func.count(AuditItem.id))
                    .join(Trace, Trace.id == AuditItem.trace_pk)
                    .where(
                        AuditItem.plan_id == plan_id,
                        Trace.restricted.is_(True),
                        _n_reviewers() < plan.overlap,
                    )
                )
                or 0
            )
    return AuditProgress(items, complete, verdicts, mine, held, plan.overlap, waiting)


# --- one item -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChunkView:
    chunk_id: str
    doc_id: str | None
    doc_version: int | None
    rank: int | None
    score: float | None
    text: str
    filtered: bool
    hidden: bool
    effective_date: dt.date | None


@dataclass(frozen=True)
class ItemView:
    id: int
    plan_id: int
    plan_name: str
    plan_status: str
    overlap: int
    blind: bool
    stratum: str
    position: int
    trace_pk: int
    trace_id: str
    at: dt.datetime
    query: str
    rewritten_query: str | None
    user_role: str | None
    identity_scopes: tuple[str, ...]
    decision: str | None
    reason_code: str | None
    answer_text: str
    citations: tuple[dict[str, Any], ...]
    feedback: str | None
    ranking_mode: str | None
    hits_after_filter: int | None
    top_score: float | None
    answerable: bool | None
    ambiguous: bool | None
    ungrounded: bool | None
    versions: dict[str, Any]
    attributes: dict[str, Any]
    restricted: bool
    chunks: tuple[ChunkView, ...]
    reserved_by: str | None
    reserved_until: dt.datetime | None

    @property
    def context_ids(self) -> tuple[str, ...]:
        """Ids of the chunks that reached the model (retrieved and not filtered out)."""
        return tuple(c.chunk_id for c in self.chunks if not c.filtered)


def get_item(engine: Engine, actor: Actor, item_id: int) -> ItemView | None:
    """An audit item with its trace. Restricted traces only for users with clearance; the text
    of chunks that authorization filtered out likewise."""
    with read_session(engine) as s:
        item = s.get(AuditItem, item_id)
        if item is None:
            return None
        trace = s.get(Trace, item.trace_pk)
        plan = s.get(SamplingPlan, item.plan_id)
        assert trace is not None and plan is not None
        if not _can_see(actor, trace.restricted):
            raise PermissionDenied(
                f"trace {trace.trace_id} is restricted: it is shown only to users with clearance"
            )
        chunks = s.scalars(
            select(TraceChunk)
            .where(TraceChunk.trace_pk == trace.id)
            .order_by(TraceChunk.rank.is_(None), TraceChunk.rank, TraceChunk.id)
        ).all()
        spec = _spec_of(plan)
        return ItemView(
            item.id,
            plan.id,
            plan.name,
            plan.status,
            plan.overlap,
            spec.blind,
            item.stratum,
            item.position,
            trace.id,
            trace.trace_id,
            trace.at,
            trace.query,
            trace.rewritten_query,
            trace.user_role,
            tuple(str(x) for x in trace.identity_scopes or ()),
            trace.decision,
            trace.reason_code,
            trace.answer_text,
            tuple(c for c in (trace.citations or ()) if isinstance(c, dict)),
            trace.feedback,
            trace.ranking_mode,
            trace.hits_after_filter,
            trace.top_score,
            trace.answerable,
            trace.ambiguous,
            trace.ungrounded,
            dict(trace.versions or {}),
            dict(trace.attributes or {}),
            trace.restricted,
            tuple(
                ChunkView(
                    c.chunk_id,
                    c.doc_id,
                    c.doc_version,
                    c.rank,
                    c.score,
                    HIDDEN_CHUNK if c.filtered and not actor.clearance else c.text,
                    c.filtered,
                    c.filtered and not actor.clearance,
                    c.effective_date,
                )
                for c in chunks
            ),
            item.reserved_by,
            item.reserved_until,
        )


# --- claims ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClaimDraft:
    """One claim of an answer under review: its text, the chunk ids it cites, a verdict."""

    text: str
    cited: tuple[str, ...] = ()
    verdict: str | None = None


_WORD = re.compile(r"[a-z0-9]+")
# inline citation markers: [id], [id1, id2]; ids may hold @ (chunk ids like DOC@2#2.1), which
# review.audits.claims.extract_citations does not accept; Markdown links [text](url) are not markers
_MARKER = re.compile(r"\[\s*\^?([A-Za-z0-9][^\[\]\s,;]*(?:\s*[,;]\s*\^?[^\[\]\s,;]+)*)\s*\](?!\()")


def _inline_citations(text: str) -> list[str]:
    found: dict[str, None] = {}
    for m in _MARKER.finditer(text):
        for part in re.split(r"\s*[,;]\s*", m.group(1)):
            found.setdefault(part.lstrip("^"), None)
    return list(found)


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2}


def propose_claims(
    answer_text: str, citations: Sequence[Mapping[str, Any]] = ()
) -> list[ClaimDraft]:
    """The starting point of a claim review: the answer cut into sentences, each with the ids
    it cites inline (``[id]``) plus the ids of the trace's citation mapping that belong to it
    (the mapped claim text contains the sentence or is contained in it, else the sentence
    sharing most words with it; with one sentence, everything maps to it)."""
    claims = split_claims(answer_text)
    cited: list[list[str]] = [_inline_citations(c.text) for c in claims]
    if not claims:
        return []
    for entry in citations:
        ids = [str(x) for x in (entry.get("chunk_ids") or ()) if str(x).strip()]
        if not ids:
            continue
        mapped = str(entry.get("claim") or "").strip()
        target: int | None = None
        if len(claims) == 1:
            target = 0
        elif mapped:
            low = mapped.lower()
            for i, c in enumerate(claims):
                if low in c.text.lower() or c.text.lower() in low:
                    target = i
                    break
            if target is None:
                words = _words(mapped)
                overlaps = [len(words & _words(c.text)) for c in claims]
                best = max(overlaps)
                if best > 0:
                    target = overlaps.index(best)
        if target is not None:
            for x in ids:
                if x not in cited[target]:
                    cited[target].append(x)
    return [ClaimDraft(c.text, tuple(ids)) for c, ids in zip(claims, cited, strict=True)]


def check_claims(claims: Sequence[ClaimDraft], context_ids: Iterable[str]) -> CitationReport:
    """Claim by claim: a claim passes when it is supported and every chunk it cites was in
    the context sent; the answer passes only when every claim passes."""
    return citation_validity(
        [(c.text, c.cited) for c in claims], list(context_ids), [c.verdict for c in claims]
    )


# --- verdicts -------------------------------------------------------------------------------


@dataclass(frozen=True)
class VerdictIn:
    verdict: str
    stages: tuple[str, ...] = ()
    notes: str = ""
    claims: tuple[ClaimDraft, ...] = ()

    def check(self, context_ids: Iterable[str]) -> CitationReport | None:
        if self.verdict not in VERDICTS:
            raise InputError(f"verdict {self.verdict!r} is not one of: {', '.join(VERDICTS)}")
        bad = [s for s in self.stages if s not in STAGES]
        if bad:
            raise InputError(f"stage {bad[0]!r} is not one of: {', '.join(STAGES)}")
        if len(set(self.stages)) != len(self.stages):
            raise InputError("a stage is listed twice")
        if self.verdict in NEEDS_STAGE and not self.stages:
            raise InputError(
                f"say where it failed: a {VERDICTS[self.verdict].lower()} needs at least one "
                "stage (retrieval, filter, policy, generator or citation)"
            )
        if self.verdict in CORRECT and self.stages:
            raise InputError(
                f"a {VERDICTS[self.verdict].lower()} has no failing stage; clear the stages "
                "or choose a failure verdict"
            )
        if self.verdict in NEEDS_NOTE and not self.notes.strip():
            raise InputError(
                f"say what happened: a {VERDICTS[self.verdict].lower()} needs a note "
                "(which content, which wording rule; do not paste restricted text)"
            )
        if len(self.notes) > 4000:
            raise InputError("the note is longer than 4000 characters")
        if not self.claims:
            return None
        for i, c in enumerate(self.claims, start=1):
            if not c.text.strip():
                raise InputError(f"claim {i} is empty: write it or remove it")
            if c.verdict is not None and c.verdict not in CLAIM_VERDICTS:
                raise InputError(
                    f"claim {i}: verdict {c.verdict!r} is not one of: {', '.join(CLAIM_VERDICTS)}"
                )
        report = check_claims(self.claims, context_ids)
        if self.verdict == "supported_answer" and report.answer_passes is not True:
            first = next(c for c in report.claims if c.status in ("fail", "unreviewed"))
            why = "; ".join(first.problems) or "not judged yet"
            raise InputError(
                f"the answer passes only if every claim is supported: claim {first.index + 1} "
                f"({why}). Judge every claim, or choose unsupported or partially supported."
            )
        if self.verdict in ("unsupported_answer", "partially_supported") and (
            report.answer_passes is True
        ):
            raise InputError(
                "every claim is supported by a chunk in the context, so the answer passes; "
                "choose supported answer, or mark the claim that is not supported"
            )
        return report


@dataclass(frozen=True)
class VerdictView:
    id: int
    item_id: int
    reviewer: str
    verdict: str
    stages: tuple[str, ...]
    notes: str
    claims: tuple[dict[str, Any], ...]
    replaces_id: int | None
    promoted_case_id: int | None
    created_at: dt.datetime

    @property
    def claim_drafts(self) -> list[ClaimDraft]:
        return [
            ClaimDraft(str(c.get("text", "")), tuple(c.get("cited") or ()), c.get("verdict"))
            for c in self.claims
        ]


def _vview(r: AuditVerdict) -> VerdictView:
    return VerdictView(
        r.id,
        r.item_id,
        r.reviewer,
        r.verdict,
        tuple(r.stages or ()),
        r.notes,
        tuple(r.claims or ()),
        r.replaces_id,
        r.promoted_case_id,
        r.created_at,
    )


def _current_ids() -> Any:
    return (
        select(func.max(AuditVerdict.id))
        .group_by(AuditVerdict.item_id, AuditVerdict.reviewer)
        .scalar_subquery()
    )


def _current_verdicts(s: Session, item_ids: Sequence[int]) -> dict[int, list[VerdictView]]:
    out: dict[int, list[VerdictView]] = {}
    for start in range(0, len(item_ids), 900):
        chunk = list(item_ids[start : start + 900])
        latest = (
            select(func.max(AuditVerdict.id))
            .where(AuditVerdict.item_id.in_(chunk))
            .group_by(AuditVerdict.item_id, AuditVerdict.reviewer)
        )
        for r in s.scalars(
            select(AuditVerdict).where(AuditVerdict.id.in_(latest)).order_by(AuditVerdict.id)
        ):
            out.setdefault(r.item_id, []).append(_vview(r))
    return out


def my_verdict(engine: Engine, actor: Actor, item_id: int) -> VerdictView | None:
    with read_session(engine) as s:
        row = s.scalar(
            select(AuditVerdict)
            .where(AuditVerdict.item_id == item_id, AuditVerdict.reviewer == actor.email)
            .order_by(AuditVerdict.id.desc())
            .limit(1)
        )
        return _vview(row) if row else None


def item_verdicts(engine: Engine, actor: Actor, item_id: int) -> list[VerdictView] | None:
    """Everyone's current verdict on an item, or None while review is blind and I have not
    submitted mine."""
    with read_session(engine) as s:
        item = s.get(AuditItem, item_id)
        if item is None:
            return None
        plan = _plan(s, item.plan_id)
        current = _current_verdicts(s, [item_id]).get(item_id, [])
    if _spec_of(plan).blind and not any(v.reviewer == actor.email for v in current):
        return None
    return sorted(current, key=lambda v: v.reviewer)


def verdict_history(engine: Engine, actor: Actor, item_id: int) -> list[VerdictView]:
    """Every verdict row of an item, oldest first (mine only while review is blind)."""
    visible = item_verdicts(engine, actor, item_id)
    with read_session(engine) as s:
        rows = [
            _vview(r)
            for r in s.scalars(
                select(AuditVerdict)
                .where(AuditVerdict.item_id == item_id)
                .order_by(AuditVerdict.id)
            )
        ]
    if visible is None:
        rows = [r for r in rows if r.reviewer == actor.email]
    return rows


def submit_verdict(
    engine: Engine,
    actor: Actor,
    item_id: int,
    verdict: VerdictIn,
    based_on: int | None,
) -> VerdictView:
    """Append my verdict on an item. ``based_on`` is the id of my verdict I started editing
    from (None for a first verdict); if mine changed since (another tab), nothing is saved."""
    require(actor, Permission.audit)

    def work(s: Session) -> VerdictView:
        item = s.get(AuditItem, item_id, with_for_update=True)
        if item is None:
            raise InputError(f"audit item {item_id} does not exist")
        plan = _plan(s, item.plan_id)
        if plan.status != "open":
            raise InputError(f"plan {plan.name!r} is {plan.status}: verdicts are not accepted")
        trace = s.get(Trace, item.trace_pk)
        assert trace is not None
        if not _can_see(actor, trace.restricted):
            raise PermissionDenied("this trace is restricted: only users with clearance audit it")
        context = s.scalars(
            select(TraceChunk.chunk_id).where(
                TraceChunk.trace_pk == trace.id, TraceChunk.filtered.is_(False)
            )
        ).all()
        report = verdict.check(context)
        latest = s.scalar(
            select(AuditVerdict)
            .where(AuditVerdict.item_id == item_id, AuditVerdict.reviewer == actor.email)
            .order_by(AuditVerdict.id.desc())
            .limit(1)
        )
        latest_id = latest.id if latest else None
        if latest_id != based_on:
            when = f" at {latest.created_at:%Y-%m-%d %H:%M UTC}" if latest else ""
            raise StaleWriteError(
                f"your verdict on trace {trace.trace_id} was changed{when} (in another tab or "
                "session) after you opened it; nothing was saved. Reload to see it, then edit."
            )
        if latest is None:
            others = int(
                s.scalar(
                    select(func.count(func.distinct(AuditVerdict.reviewer))).where(
                        AuditVerdict.item_id == item_id
                    )
                )
                or 0
            )
            if others >= plan.overlap:
                raise InputError(
                    f"trace {trace.trace_id} already has its {plan.overlap} verdict(s); "
                    "take the next item"
                )
        claims: list[dict[str, Any]] = []
        if report is not None:
            for c, chk in zip(verdict.claims, report.claims, strict=True):
                claims.append(
                    {
                        "text": c.text.strip(),
                        "cited": list(chk.cited_ids),
                        "verdict": c.verdict,
                        "status": chk.status,
                        "not_in_context": list(chk.invalid_ids),
                    }
                )
        row = AuditVerdict(
            item_id=item_id,
            reviewer=actor.email,
            verdict=verdict.verdict,
            stages=list(verdict.stages),
            notes=verdict.notes.strip(),
            claims=claims,
            replaces_id=latest_id,
            promoted_case_id=latest.promoted_case_id if latest else None,
            created_at=utcnow(),
        )
        s.add(row)
        if item.reserved_by == actor.email:
            item.reserved_by = None
            item.reserved_until = None
        s.flush()
        changes.record(
            s,
            actor.email,
            "verdict",
            "audit_item",
            item_id,
            changes.snapshot(latest) if latest else None,
            changes.snapshot(row),
        )
        return _vview(row)

    return run_write(engine, work)


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
            outcome=_outcome(vs),
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


def domain_estimate(
    items: pd.DataFrame, population: Mapping[str, int], confidence: float = 0.95
) -> DomainEstimate:
    """Estimate a rate within a domain from a stratified sample.

    ``items``: one row per audited item with columns ``stratum``, ``in_domain`` (bool) and
    ``success`` (bool, only read where ``in_domain``); ``population``: N_h per stratum.
    With w_h = N_h / n_h, x = in_domain and y = in_domain and success:
    R = sum w_h * sum_h y / sum w_h * sum_h x, and (linearised)
    Var(R) = sum_h N_h^2 (1 - n_h/N_h) v_h / n_h / X^2 with v_h the variance (divisor n_h, as
    in ``weighted_estimate``) of e = y - R x in stratum h and X the estimated domain size.
    When the domain is the whole population this equals ``weighted_estimate``.
    """
    from statistics import NormalDist

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
    for pop_h, size_h, xh, yh in groups:
        e = yh - ratio * xh
        v = float(np.mean(e**2) - np.mean(e) ** 2)
        variance += pop_h**2 * (1 - size_h / pop_h) * v / size_h
    se = math.sqrt(max(variance, 0.0)) / big_x
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    return DomainEstimate(
        ratio,
        max(0.0, ratio - z * se),
        min(1.0, ratio + z * se),
        se,
        big_x,
        n_dom,
        k_dom,
        raw,
        wil[0] if wil else None,
        wil[1] if wil else None,
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


# --- feedback loop: promote to a case -------------------------------------------------------

_SUGGESTED: dict[str, tuple[str | None, tuple[str, ...], str | None]] = {
    # verdict -> (expected decision or None = as observed, reason codes, category)
    "false_refusal": ("answer", (), "in_scope"),
    "supported_answer": ("answer", (), "in_scope"),
    "unsupported_answer": ("abstain", ("required_claim_not_covered",), "near_miss"),
    "partially_supported": ("partial", ("required_claim_not_covered",), "in_scope"),
    "restricted_leak": ("abstain", ("source_not_allowed",), "access_restricted"),
    "correct_refusal": (None, (), None),
    "wording_violation": (None, (), None),
}
_CATEGORY_OF = {
    "answer": "in_scope",
    "partial": "in_scope",
    "abstain": "near_miss",
    "clarify": "ambiguous",
    "escalate": "restricted_topic",
}
_DEFAULT_REASON = {
    "abstain": "no_answer_bearing_evidence",
    "clarify": "ambiguous_question",
    "escalate": "restricted_topic",
}


def suggested_decision(
    verdict: str, observed: str | None, observed_reason: str | None, tax: Taxonomy
) -> tuple[str, tuple[str, ...], str]:
    """The expected decision, reason codes and category a verdict suggests for a new case."""
    decision, reasons, category = _SUGGESTED.get(verdict, (None, (), None))
    if decision is None:
        decision = observed if observed in tax.decisions else "abstain"
        if not tax.decisions[decision].answers:
            code = observed_reason if observed_reason in tax.reason_codes else None
            reasons = (code or _DEFAULT_REASON.get(decision, "no_answer_bearing_evidence"),)
        elif decision == "answer" and observed_reason == "false_premise":
            reasons = ("false_premise",)
    if decision not in tax.decisions:
        decision = "abstain"
        reasons = reasons or ("no_answer_bearing_evidence",)
    reasons = tuple(r for r in reasons if r in tax.reason_codes)
    if not tax.decisions[decision].answers and not reasons:
        reasons = (next(iter(tax.reason_codes)),)
    category = category or _CATEGORY_OF.get(decision, "in_scope")
    if category not in tax.categories:
        category = next(iter(tax.categories))
    return decision, reasons, category


def promote_to_case(
    engine: Engine, actor: Actor, item_id: int, tax: Taxonomy, split: str = "validation"
) -> int:
    """Turn an audited trace into a draft case: the query as the question, the retrieved
    documents that exist in the corpus as evidence (forbidden where authorization filtered
    them), the verdict's suggested expected decision; claims the reviewer found supported
    become required claims. The case id is stored on my verdict and the case notes name the
    trace and the plan, so each side links to the other."""
    require(actor, Permission.audit)
    require(actor, Permission.edit_cases)
    if split not in tax.splits:
        raise InputError(f"split {split!r} is not one of: {', '.join(tax.splits)}")
    with read_session(engine) as s:
        item = s.get(AuditItem, item_id)
        if item is None:
            raise InputError(f"audit item {item_id} does not exist")
        plan = _plan(s, item.plan_id)
        trace = s.get(Trace, item.trace_pk)
        assert trace is not None
        if not _can_see(actor, trace.restricted):
            raise PermissionDenied(
                "this trace is restricted: only users with clearance may turn it into a case"
            )
        mine = s.scalar(
            select(AuditVerdict)
            .where(AuditVerdict.item_id == item_id, AuditVerdict.reviewer == actor.email)
            .order_by(AuditVerdict.id.desc())
            .limit(1)
        )
        if mine is None:
            raise InputError("record your verdict on this trace before promoting it to a case")
        already = s.scalar(
            select(AuditVerdict.promoted_case_id).where(
                AuditVerdict.item_id == item_id, AuditVerdict.promoted_case_id.is_not(None)
            )
        )
        if already is not None:
            key = s.scalar(select(Case.key).where(Case.id == already))
            raise InputError(f"this trace is already a case: {key or already}")
        chunks = s.scalars(
            select(TraceChunk)
            .where(TraceChunk.trace_pk == trace.id)
            .order_by(TraceChunk.rank.is_(None), TraceChunk.rank, TraceChunk.id)
        ).all()
        refs = list(
            dict.fromkeys((c.doc_id, c.doc_version) for c in chunks if c.doc_id and c.doc_version)
        )
        in_corpus = set()
        for doc_id, version in refs:
            if s.scalar(
                select(Document.id).where(Document.doc_key == doc_id, Document.version == version)
            ):
                in_corpus.add((doc_id, version))
        verdict_row = _vview(mine)
        trace_id, query, observed = trace.trace_id, trace.query, trace.decision
        observed_reason, user_role = trace.reason_code, trace.user_role
        trace_scopes = [str(x) for x in trace.identity_scopes or ()]
        attributes: dict[str, Any] = dict(trace.attributes or {})
        plan_name = plan.name
    decision, reasons, category = suggested_decision(
        verdict_row.verdict, observed, observed_reason, tax
    )
    supported_claims = [
        str(c["text"]) for c in verdict_row.claims if c.get("verdict") == "supported"
    ]
    cited_supported = {
        x for c in verdict_row.claims if c.get("verdict") == "supported" for x in c.get("cited", [])
    }
    documents = []
    for doc_id, version in refs:
        if (doc_id, version) not in in_corpus:
            continue
        its = [c for c in chunks if (c.doc_id, c.doc_version) == (doc_id, version)]
        filtered = all(c.filtered for c in its)
        decisive = any(c.chunk_id in cited_supported for c in its)
        documents.append(
            cases.CaseDocIn(
                doc_id=str(doc_id),
                version=int(version or 1),
                visibility="forbidden" if filtered else "visible",
                role="decisive" if decisive else "context",
            )
        )
    slices = []
    if any(c.filtered for c in chunks):
        slices.append("access_filtered_answer")
    if not any(not c.filtered for c in chunks):
        slices.append("empty_retrieval")
    raw_slices = attributes.get("slices") or attributes.get("slice")
    if isinstance(raw_slices, str):
        raw_slices = [raw_slices]
    for sl in raw_slices or ():
        if sl in tax.slices and sl not in slices:
            slices.append(str(sl))
    scopes = [x for x in trace_scopes if x in tax.access_scopes] or ["public"]
    question = str(query).strip()
    if len(question) < 3:
        raise InputError("the trace has no usable query to turn into a question")
    stages = ", ".join(verdict_row.stages) or "none"
    notes = (
        f"Promoted from the audit of production trace {trace_id} (plan "
        f"{plan_name!r}, audit item {item_id}). Verdict: {verdict_row.verdict} by "
        f"{verdict_row.reviewer}; stages: {stages}. Observed decision: "
        f"{observed or 'none'}. Suggested expected decision: {decision}; "
        "confirm it and the evidence before marking the case ready."
    )
    if verdict_row.notes:
        notes += f" Reviewer notes: {verdict_row.notes}"
    case_in = cases.CaseIn(
        question=question[:4000],
        required_claims=supported_claims if tax.decisions[decision].answers else [],
        identity=cases.IdentityIn(name=f"production:{user_role or 'user'}"[:200], scopes=scopes),
        documents=documents,
        expected_decision=decision,
        reason_codes=list(reasons),
        category=category,
        slices=slices,
        split=split,
        status="draft",
        notes=notes,
    )
    case_id = cases.create_case(engine, actor, case_in, tax)

    def link(s: Session) -> None:
        row = s.get(AuditVerdict, verdict_row.id, with_for_update=True)
        assert row is not None
        taken = s.scalar(
            select(AuditVerdict.promoted_case_id).where(
                AuditVerdict.item_id == item_id,
                AuditVerdict.promoted_case_id.is_not(None),
                AuditVerdict.id != row.id,
            )
        )
        if taken is not None:
            raise InputError(
                f"another reviewer promoted this trace at the same moment (case {taken}); "
                f"the draft case {case_id} just created is not linked to the audit"
            )
        before = changes.snapshot(row)
        row.promoted_case_id = case_id
        s.flush()
        changes.record(
            s, actor.email, "promote", "audit_verdict", row.id, before, changes.snapshot(row)
        )

    run_write(engine, link)
    return case_id


def promoted_from(engine: Engine, case_id: int) -> list[dict[str, Any]]:
    """The audits a case was promoted from (trace id, plan, item, verdict, reviewer)."""
    with read_session(engine) as s:
        rows = s.execute(
            select(
                Trace.trace_id,
                SamplingPlan.name,
                AuditItem.id,
                AuditVerdict.verdict,
                AuditVerdict.reviewer,
            )
            .join(AuditItem, AuditItem.id == AuditVerdict.item_id)
            .join(SamplingPlan, SamplingPlan.id == AuditItem.plan_id)
            .join(Trace, Trace.id == AuditItem.trace_pk)
            .where(AuditVerdict.promoted_case_id == case_id)
        ).all()
    return [
        {"trace_id": r[0], "plan": r[1], "item_id": r[2], "verdict": r[3], "reviewer": r[4]}
        for r in rows
    ]


# --- export ---------------------------------------------------------------------------------


def _plan_record(plan: SamplingPlan) -> dict[str, Any]:
    return {
        "record": "plan",
        "id": plan.id,
        "name": plan.name,
        "status": plan.status,
        "population_filter": plan.population_filter,
        "strata": list(plan.strata),
        "allocation_method": plan.allocation,
        "explicit_sizes": plan.explicit_sizes,
        "total": plan.total,
        "seed": plan.seed,
        "overlap": plan.overlap,
        "fingerprint": plan.fingerprint,
        "population": {c.stratum: c.count for c in _stored_counts(plan)},
        "allocation": _stored_allocation(plan),
        "counted_at": (plan.population or {}).get("counted_at"),
        "created_by": plan.created_by,
        "created_at": plan.created_at.isoformat(),
    }


def _export_rows(
    engine: Engine, actor: Actor, plan_id: int, batch: int = 500
) -> Iterable[tuple[dict[str, Any], list[VerdictView]]]:
    """Items in queue order with their trace fields and current verdicts, read in batches."""
    last = 0
    while True:
        with read_session(engine) as s:
            rows = s.execute(
                select(
                    AuditItem.id,
                    AuditItem.position,
                    AuditItem.stratum,
                    Trace.trace_id,
                    Trace.at,
                    Trace.decision,
                    Trace.reason_code,
                    Trace.feedback,
                    Trace.restricted,
                    Trace.query,
                    Trace.answer_text,
                )
                .join(Trace, Trace.id == AuditItem.trace_pk)
                .where(AuditItem.plan_id == plan_id, AuditItem.position > last)
                .order_by(AuditItem.position)
                .limit(batch)
            ).all()
            current = _current_verdicts(s, [r.id for r in rows])
        if not rows:
            return
        for r in rows:
            hide = not _can_see(actor, bool(r.restricted))
            data = {
                "item_id": r.id,
                "position": r.position,
                "stratum": r.stratum,
                "trace_id": r.trace_id,
                "at": r.at.isoformat(),
                "decision": r.decision,
                "reason_code": r.reason_code,
                "feedback": r.feedback,
                "restricted": bool(r.restricted),
                "query": RESTRICTED_TEXT if hide else r.query,
                "answer_text": RESTRICTED_TEXT if hide else r.answer_text,
                "hidden": hide,
            }
            yield data, current.get(r.id, [])
        last = rows[-1].position


def _verdict_record(v: VerdictView, hide: bool) -> dict[str, Any]:
    return {
        "reviewer": v.reviewer,
        "verdict": v.verdict,
        "stages": list(v.stages),
        "notes": RESTRICTED_TEXT if hide and v.notes else v.notes,
        "claims": [{**c, "text": RESTRICTED_TEXT} if hide else dict(c) for c in v.claims],
        "promoted_case_id": v.promoted_case_id,
        "created_at": v.created_at.isoformat(),
    }


def export_jsonl(engine: Engine, actor: Actor, plan_id: int, out: IO[str]) -> int:
    """Write the batch as JSON Lines: the plan first, then one line per sampled trace with its
    current verdicts. Text of restricted traces only for users with clearance. Returns the
    number of items written."""
    with read_session(engine) as s:
        head = _plan_record(_plan(s, plan_id))
    out.write(json.dumps(head, ensure_ascii=False, sort_keys=True) + "\n")
    n = 0
    for data, verdicts in _export_rows(engine, actor, plan_id):
        hide = bool(data.pop("hidden"))
        data["record"] = "item"
        data["plan"] = head["name"]
        data["outcome"] = _outcome([v.verdict for v in verdicts])
        data["verdicts"] = [_verdict_record(v, hide) for v in verdicts]
        out.write(json.dumps(data, ensure_ascii=False, sort_keys=True) + "\n")
        n += 1
    return n


CSV_COLUMNS = [
    "plan",
    "seed",
    "fingerprint",
    "position",
    "stratum",
    "stratum_population",
    "stratum_sample",
    "trace_id",
    "at",
    "decision",
    "reason_code",
    "feedback",
    "restricted",
    "query",
    "answer_text",
    "reviewer",
    "verdict",
    "stages",
    "notes",
    "claims_supported",
    "claims_total",
    "promoted_case_id",
    "verdict_at",
]


def export_csv(engine: Engine, actor: Actor, plan_id: int, out: IO[str]) -> int:
    """Write the batch as CSV: one row per current verdict (an unaudited trace gets one row
    with empty verdict columns); the plan's name, seed and fingerprint and each stratum's
    population and sample size on every row. Returns the number of rows."""
    with read_session(engine) as s:
        plan = _plan(s, plan_id)
        head = _plan_record(plan)
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    n = 0
    for data, verdicts in _export_rows(engine, actor, plan_id):
        hide = bool(data["hidden"])
        base = {
            "plan": head["name"],
            "seed": head["seed"],
            "fingerprint": head["fingerprint"],
            "stratum_population": head["population"].get(data["stratum"], ""),
            "stratum_sample": head["allocation"].get(data["stratum"], ""),
            **{k: data[k] for k in CSV_COLUMNS if k in data},
        }
        todo: list[VerdictView | None] = list(verdicts) or [None]
        for v in todo:
            row = dict(base)
            if v is not None:
                rec = _verdict_record(v, hide)
                row.update(
                    reviewer=v.reviewer,
                    verdict=v.verdict,
                    stages=";".join(v.stages),
                    notes=rec["notes"],
                    claims_supported=sum(c.get("verdict") == "supported" for c in v.claims),
                    claims_total=len(v.claims),
                    promoted_case_id=v.promoted_case_id or "",
                    verdict_at=v.created_at.isoformat(),
                )
            writer.writerow(row)
            n += 1
    return n
