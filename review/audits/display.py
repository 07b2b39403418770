"""How the Audit page shows a batch: the tables (plans, the sample, a trace's signals and chunks,
verdicts, estimates and slices) as data frames, the one-line summaries and the rules for rates
and intervals. Plain data in, plain data out: the page only lays them out."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol

import pandas as pd

from review.audits import population
from review.audits.claims import CitationReport
from review.audits.items import ChunkView, ItemView
from review.audits.plans import PlanView, StratumCount
from review.audits.population import PopulationFilter
from review.audits.queue import ItemRow
from review.audits.verdicts import VerdictView
from review.audits.vocabulary import HEADLINE, VERDICTS
from review.core import clearance, readable
from review.core.terms import ClaimVerdict, PlanStatus
from review.traces.model import feedback_label

__all__ = [
    "batch_label",
    "chunk_label",
    "chunks_frame",
    "claims_summary",
    "counts_caption",
    "counts_frame",
    "dimension_label",
    "export_stem",
    "findings_frame",
    "headline_intervals",
    "history_frame",
    "item_caption",
    "items_frame",
    "pct",
    "pct_range",
    "plan_summary",
    "plans_frame",
    "population_note",
    "rate_cells",
    "rates_table",
    "readable_strata",
    "reproducibility",
    "signals_frame",
    "slice_table",
    "stratum_label",
    "unsampled_share",
    "value_label",
    "verdicts_frame",
]


# --- rates ----------------------------------------------------------------------------------


def pct(v: Any) -> str:
    """A rate as a percentage (review.core.readable); a dash when there is none."""
    return readable.percent(v)


def pct_range(rate: Any, lo: Any, hi: Any) -> str:
    """A rate with its interval: "14% (3–51%)" (review.core.readable)."""
    return readable.percent_interval(rate, lo, hi)


# --- plans ----------------------------------------------------------------------------------


def batch_label(plan: PlanView) -> str:
    """How a batch reads in the batch picker."""
    return f"{plan.name} · {plan.status} · {plan.complete}/{plan.items} audited"


def plans_frame(plans: Sequence[PlanView], names: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One row per plan: its state, sizes and how it samples; its strata by their
    dimensions' names, who created it by name (``names``: e-mail -> name), never an
    e-mail or a key."""
    return pd.DataFrame(
        [
            {
                "plan": p.name,
                "status": p.status,
                "population": p.population_total,
                "sample": sum(p.allocation.values()),
                "audited": p.complete,
                "verdicts": p.verdicts,
                "strata": ", ".join(dimension_label(d) for d in p.spec.strata) or "none",
                "allocation": p.spec.allocation,
                "seed": p.spec.seed,
                "population filter": p.spec.filter.describe(),
                "created by": readable.person(p.created_by, names or {}),
                "created": readable.when(p.created_at),
            }
            for p in plans
        ]
    )


def plan_summary(plan: PlanView) -> str:
    """One line under a plan's name: how it samples and when its population was counted."""
    return (
        f"{plan.status} · {plan.spec.allocation} allocation of {plan.spec.total} · seed "
        f"{plan.spec.seed} · {readable.count(plan.spec.overlap, 'reviewer')} per trace · "
        f"{'blind' if plan.spec.blind else 'open'} review · population counted "
        f"{plan.counted_at[:16].replace('T', ' ')} UTC · fingerprint {plan.fingerprint[:17]}…"
    )


def population_note(status: str) -> str:
    """What a change of the population means for a plan in ``status`` (after the message)."""
    if status == PlanStatus.planned:
        return " Recount before drawing."
    return " The sample and its weights keep the counts of the draw."


def reproducibility(same: bool | None) -> tuple[str, str]:
    """The outcome of drawing a plan again: ("success" | "warning" | "error", message)."""
    if same is True:
        return "success", "Drawing this plan again gives exactly the stored sample."
    if same is None:
        return "warning", "The population changed, so a new draw would differ."
    return "error", "A new draw differs from the stored sample."


def counts_frame(
    counts: Sequence[StratumCount], dims: Sequence[str] = (), tax: _Terms | None = None
) -> pd.DataFrame:
    """The population per stratum, as counted for the form's preview (strata in words)."""
    return pd.DataFrame(
        [{"stratum": stratum_label(c.stratum, dims, tax), "traces": c.count} for c in counts],
        columns=["stratum", "traces"],
    )


def counts_caption(counts: Sequence[StratumCount], flt: PopulationFilter) -> str:
    """The preview's summary: traces, strata and the filter."""
    return f"{sum(c.count for c in counts)} traces in {len(counts)} strata ({flt.describe()})"


class _Terms(Protocol):
    def label(self, section: str, key: str | None, missing: str = ...) -> str: ...


#: Stratum dimensions whose values are keys of a taxonomy section.
_DIMENSION_SECTIONS: Final = {"decision": "decisions", "reason_code": "reason_codes"}


def dimension_label(dim: str) -> str:
    """A stratum dimension as people read it ("User feedback"; ``attr.region`` -> "Region")."""
    if dim in population.DIMENSIONS:
        return population.DIMENSIONS[dim]
    return readable.humanize(dim.removeprefix("attr."))


def value_label(dim: str, value: object, tax: _Terms | None = None) -> str:
    """One value of a stratum dimension as people read it: a decision or reason code by its
    taxonomy label, feedback in the reviewer's words, a missing value as "no user feedback"
    (never "(none)"), a key humanised."""
    if readable.is_missing(value) or value in ("", population.NONE):
        return f"no {dimension_label(dim).lower()}"
    text = str(value)
    section = _DIMENSION_SECTIONS.get(dim)
    if section is not None and tax is not None:
        return readable.term(tax, section, text)
    if dim == "feedback":
        return feedback_label(text)
    return readable.humanize(text) if "_" in text and text.islower() else text


def stratum_label(stratum: object, dims: Sequence[str] = (), tax: _Terms | None = None) -> object:
    """A stratum as people read it: each part of its name (one value per dimension of the
    plan, joined by " · ") named by its dimension and in words ("Decision: Abstain · User
    feedback: positive", "no user feedback"), the one stratum of a plan without strata as
    "every trace"; never a stored key or "(none)"."""
    if not isinstance(stratum, str):
        return stratum
    if not dims:
        if stratum == population.ALL:
            return "every trace"
        return population.SEP.join(
            value_label("", part, tax) if part != population.NONE else "not logged"
            for part in stratum.split(population.SEP)
        )
    parts = stratum.split(population.SEP)
    if len(parts) != len(dims):  # a name this plan did not make: its words as they are
        return population.SEP.join(value_label("", p, tax) for p in parts)
    return population.SEP.join(_part(dim, part, tax) for dim, part in zip(dims, parts, strict=True))


def _part(dim: str, value: str, tax: _Terms | None) -> str:
    words = value_label(dim, value, tax)
    return words if value in ("", population.NONE) else f"{dimension_label(dim)}: {words}"


def readable_strata(
    frame: pd.DataFrame, dims: Sequence[str] = (), tax: _Terms | None = None
) -> pd.DataFrame:
    """A table with a ``stratum`` or ``feedback`` column, those cells in words (the strata
    named by the plan's dimensions ``dims``)."""
    out = frame.copy()
    if "stratum" in out.columns:
        out["stratum"] = out["stratum"].map(lambda v: stratum_label(v, dims, tax))
    if "feedback" in out.columns:
        out["feedback"] = out["feedback"].map(lambda v: value_label("feedback", v, tax))
    return out


def items_frame(
    rows: Sequence[ItemRow],
    link: Callable[[int], str],
    dims: Sequence[str] = (),
    tax: _Terms | None = None,
    names: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """The sample in queue order; ``link`` gives the address that opens an item. Strata,
    decisions and feedback in words, the reviewer holding an item by name."""
    return pd.DataFrame(
        [
            {
                "#": r.position,
                "trace": r.trace_id,
                "stratum": stratum_label(r.stratum, dims, tax),
                "decision": value_label("decision", r.decision, tax) if r.decision else "",
                "feedback": feedback_label(r.feedback),
                "restricted": r.restricted,
                "verdicts": r.reviewers,
                "verdict": VERDICTS.get(r.outcome or "", ""),
                "held by": readable.person(r.reserved_by, names or {}, missing=""),
                "open": link(r.id),
            }
            for r in rows
        ]
    )


def export_stem(name: str) -> str:
    """The file name stem of a plan's export: letters and digits kept, the rest dashes."""
    return "".join(ch if ch.isalnum() else "-" for ch in name).strip("-").lower()


# --- one item -------------------------------------------------------------------------------


def item_caption(view: ItemView, plan_items: int | None, tax: _Terms | None = None) -> str:
    """The line under a trace's heading: where it sits in the batch and what happened, the
    stratum, decision, reason code and feedback in words (by their labels with ``tax``)."""
    decision = value_label("decision", view.decision, tax) if view.decision else "—"
    reason = f" ({value_label('reason_code', view.reason_code, tax)})" if view.reason_code else ""
    return (
        f"item {view.position} of {plan_items if plan_items is not None else '?'} · stratum "
        f"{stratum_label(view.stratum, (), tax)} · {view.at:%Y-%m-%d %H:%M} UTC · decision "
        f"{decision}{reason} · feedback {feedback_label(view.feedback) or '—'}"
        f"{' · RESTRICTED' if view.restricted else ''}"
    )


def signals_frame(view: ItemView) -> pd.DataFrame:
    """The trace's retrieval signals and versions, one per row."""
    signals = {
        "ranking mode": view.ranking_mode,
        "hits after filter": view.hits_after_filter,
        "top score": view.top_score,
        "answerable": view.answerable,
        "ambiguous": view.ambiguous,
        "ungrounded": view.ungrounded,
        **{f"version: {k}": v for k, v in view.versions.items()},
    }
    return pd.DataFrame(
        [{"signal": k, "value": "—" if v is None else str(v)} for k, v in signals.items()]
    )


def chunk_label(chunk: ChunkView | None, chunk_id: str = "", words: int = 8) -> str:
    """A chunk as a reviewer picks it: rank, document and its first words, and whether it
    reached the model ("#2 · REFUND-POLICY@3 · Refunds are issued within 14 days…"). An id
    that is not among the trace's chunks reads as such."""
    if chunk is None:
        return f"{chunk_id} · not among the retrieved chunks"
    rank = f"#{chunk.rank:d}" if chunk.rank is not None else "#?"
    doc = f"{chunk.doc_id}@{chunk.doc_version}" if chunk.doc_id else chunk.chunk_id
    if chunk.hidden:
        start = clearance.REDACTED
    else:
        cut = chunk.text.split()
        start = " ".join(cut[:words]) + ("…" if len(cut) > words else "")
    where = " · not in the context" if chunk.filtered else ""
    return f"{rank} · {doc} · {start}{where}"


def chunks_frame(chunks: Sequence[ChunkView]) -> pd.DataFrame:
    """The retrieved chunks in rank order and whether each reached the model."""
    return pd.DataFrame(
        [
            {
                "rank": c.rank,
                "chunk": c.chunk_id,
                "document": f"{c.doc_id}@{c.doc_version}" if c.doc_id else "",
                "score": c.score,
                "in context": not c.filtered,
                "text": c.text,
            }
            for c in chunks
        ]
    )


class Finding(Protocol):
    """A wording rule a text breaks (what the wording check reports)."""

    @property
    def rule(self) -> str: ...
    @property
    def excerpt(self) -> str: ...
    @property
    def explanation(self) -> str: ...


def findings_frame(
    findings: Sequence[Finding], titles: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """The wording rules a refusal breaks (each by its title in ``titles``, rule id ->
    title, else humanised: never the id), with the words that break them."""
    names = dict(titles or {})
    return pd.DataFrame(
        [
            {
                "rule": names.get(f.rule) or readable.humanize(f.rule),
                "excerpt": f.excerpt,
                "why": f.explanation,
            }
            for f in findings
        ]
    )


def claims_summary(report: CitationReport) -> str:
    """The claim review in one line: the answer's result, its citations, claims supported."""
    answer = {True: "passes", False: "fails", None: "not decided yet"}[report.answer_passes]
    valid = {True: "yes", False: "no", None: "not yet"}[report.citations_valid]
    return (
        f"Answer {answer} · citations valid: {valid} · "
        f"{report.counts.get('supported', 0)} of {report.counts.get('claims', 0)} "
        "claims supported"
    )


def verdicts_frame(verdicts: Sequence[VerdictView]) -> pd.DataFrame:
    """The current verdicts on a trace, one per reviewer."""
    return pd.DataFrame(
        [
            {
                "reviewer": o.reviewer,
                "verdict": VERDICTS[o.verdict],
                "stages": ", ".join(o.stages),
                "notes": o.notes,
                "claims supported": sum(
                    c.get("verdict") == ClaimVerdict.supported for c in o.claims
                ),
                "claims": len(o.claims),
                "when": o.created_at,
            }
            for o in verdicts
        ]
    )


def history_frame(history: Sequence[VerdictView], reviewer: str) -> pd.DataFrame:
    """``reviewer``'s verdicts on a trace, each with the one it replaced."""
    return pd.DataFrame(
        [
            {
                "verdict": VERDICTS[h.verdict],
                "stages": ", ".join(h.stages),
                "when": h.created_at,
                "replaces": h.replaces_id,
            }
            for h in history
            if h.reviewer == reviewer
        ]
    )


# --- estimates ------------------------------------------------------------------------------


def unsampled_share(rates: pd.DataFrame) -> float | None:
    """The share of the population in strata with no audited trace; None when there is none."""
    if (rates["unsampled_share"] > 0).any():
        return float(rates["unsampled_share"].iloc[0])
    return None


def single_item_warning(
    strata: tuple[str, ...], dims: Sequence[str] = (), tax: _Terms | None = None
) -> str:
    """What a stratum with one audited trace means for the population intervals."""
    names = ", ".join(str(stratum_label(s, dims, tax)) for s in strata[:5])
    names += f" and {len(strata) - 5} more" if len(strata) > 5 else ""
    return (
        f"{readable.count(len(strata), 'stratum', 'strata')} with one audited trace ({names}): one "
        "trace cannot "
        "estimate its stratum's variance, so the largest possible one is used there. "
        "Audit at least two traces per stratum for intervals that rest on data."
    )


RATE_TABLE_COLUMNS = [
    "verdict",
    "count",
    "audited",
    "sample rate (95 % Wilson)",
    "population rate, weighted (95 %)",
    "≈ traces",
]


def rate_cells(rate: Mapping[str, Any]) -> dict[str, Any]:
    """One rate of ``estimates.estimates`` (one of its ``rate_rows``) as read: percentages
    with their 95 % intervals, the same cells as that rate's row of ``rates_table`` (for a
    table of a few rates of many plans, without a data frame per plan)."""
    return dict(
        zip(
            RATE_TABLE_COLUMNS,
            (
                rate["label"],
                rate["count"],
                rate["audited"],
                pct_range(rate["sample_rate"], rate["sample_lo"], rate["sample_hi"]),
                pct_range(rate["population_rate"], rate["population_lo"], rate["population_hi"]),
                readable.number(rate["estimated_traces"], decimals=0),
            ),
            strict=True,
        )
    )


def rates_table(rates: pd.DataFrame) -> pd.DataFrame:
    """The rates of ``estimates.estimates`` as read: percentages with their 95 % intervals."""
    return pd.DataFrame(
        {
            "verdict": rates["label"],
            "count": rates["count"],
            "audited": rates["audited"],
            "sample rate (95 % Wilson)": [
                pct_range(r, lo, hi)
                for r, lo, hi in zip(
                    rates["sample_rate"], rates["sample_lo"], rates["sample_hi"], strict=True
                )
            ],
            "population rate, weighted (95 %)": [
                pct_range(r, lo, hi)
                for r, lo, hi in zip(
                    rates["population_rate"],
                    rates["population_lo"],
                    rates["population_hi"],
                    strict=True,
                )
            ],
            "≈ traces": [readable.number(v, decimals=0) for v in rates["estimated_traces"]],
        }
    )


def headline_intervals(rates: pd.DataFrame) -> pd.DataFrame:
    """The headline verdicts' rates with their intervals, long: one row per verdict and kind
    (population weighted, sample raw), columns verdict, kind, rate, lo, hi (for a chart)."""
    head = rates[rates["verdict"].isin(HEADLINE)]
    return pd.concat(
        [
            pd.DataFrame(
                {
                    "verdict": head["label"],
                    "kind": "population (weighted)",
                    "rate": head["population_rate"],
                    "lo": head["population_lo"],
                    "hi": head["population_hi"],
                }
            ),
            pd.DataFrame(
                {
                    "verdict": head["label"],
                    "kind": "sample (raw)",
                    "rate": head["sample_rate"],
                    "lo": head["sample_lo"],
                    "hi": head["sample_hi"],
                }
            ),
        ]
    )


def slice_table(by_slice: pd.DataFrame, dim: str = "", tax: _Terms | None = None) -> pd.DataFrame:
    """The rates of ``estimates.by_slice`` as read: percentages with their intervals, each
    slice (a value of the field ``dim``) in words."""
    sl = by_slice.copy()
    if "slice" in sl.columns:
        sl["slice"] = [value_label(dim, v, tax) for v in sl["slice"]]
    sl["sample rate (95 %)"] = [
        pct_range(r, a, b)
        for r, a, b in zip(
            sl.pop("sample_rate"), sl.pop("sample_lo"), sl.pop("sample_hi"), strict=True
        )
    ]
    sl["population rate, weighted (95 %)"] = [
        pct_range(r, a, b)
        for r, a, b in zip(
            sl.pop("population_rate"),
            sl.pop("population_lo"),
            sl.pop("population_hi"),
            strict=True,
        )
    ]
    if "estimated_traces_in_slice" in sl:
        sl["estimated_traces_in_slice"] = [
            readable.number(v, decimals=0) for v in sl["estimated_traces_in_slice"]
        ]
    return sl.rename(columns={"estimated_traces_in_slice": "≈ traces in slice"})
