"""Demo audit batches over the demo traces: one month audited in full (one false refusal
promoted to a draft case, then closed) and one follow-up batch about a third judged."""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from sqlalchemy import Engine, func, select

from review.audits.estimates import item_outcomes
from review.audits.items import ItemView, check_claims, get_item, propose_claims
from review.audits.plans import PlanSpec, close_plan, create_plan, draw_plan
from review.audits.population import PopulationFilter
from review.audits.promote import promote_to_case
from review.audits.queue import next_item
from review.audits.verdicts import VerdictIn, submit_verdict
from review.core.errors import InputError
from review.core.identity import SYSTEM, Role
from review.core.taxonomy import Taxonomy
from review.core.terms import ClaimVerdict
from storage.db import read_session, run_write
from storage.models import SamplingPlan, Trace

T = TypeVar("T")

__all__ = ["build_demo_audits"]


# --- demo data ------------------------------------------------------------------------------

DEMO_REVIEWER = "ravi.menon@brightwave.example"


DEMO_COMPLETE = "Monthly review: "  # + the month, e.g. "Monthly review: June 2025"


DEMO_OPEN = "Feedback follow-up: every month"


_FIGURE = re.compile(r"\d+(?:[.,]\d+)?")


def _write(engine: Engine, service: Callable[..., T], *args: Any) -> T:
    """``service(s, *args)`` in a write transaction of its own (the demo builder is its own
    entry point)."""
    return run_write(engine, lambda s: service(s, *args))


def _figures_not_sent(view: ItemView) -> set[str]:
    """Figures the answer states that no passage sent to the assistant contains: what a
    reviewer checking the answer against its context finds first."""
    sent = set(view.context_ids)
    context = " ".join(c.text for c in view.chunks if c.chunk_id in sent)
    return set(_FIGURE.findall(view.answer_text)) - set(_FIGURE.findall(context))


def _demo_verdict(view: ItemView) -> VerdictIn:
    """A plausible verdict for a demo trace, read off its signals and feedback."""
    answered = view.decision in ("answer", "partial")
    filtered = any(c.filtered for c in view.chunks)
    if answered:
        claims = propose_claims(view.answer_text, view.citations)
        context = set(view.context_ids)
        wrong = (
            view.feedback in ("answer_wrong", "negative")
            or bool(view.ungrounded)
            or bool(_figures_not_sent(view))
        )
        if not claims:
            return VerdictIn(
                "unsupported_answer" if wrong else "supported_answer",
                ("generator_ignored_signal",) if wrong else (),
                "No checkable claim in the answer." if not wrong else "",
            )
        drafts = []
        for i, c in enumerate(claims):
            valid = bool(c.cited) and all(x in context for x in c.cited)
            ok = valid and not (wrong and i == len(claims) - 1)
            drafts.append(
                replace(c, verdict=ClaimVerdict.supported if ok else ClaimVerdict.unsupported)
            )
        report = check_claims(drafts, context)
        if report.answer_passes:
            return VerdictIn("supported_answer", (), "", tuple(drafts))
        n_ok = sum(d.verdict == ClaimVerdict.supported for d in drafts)
        verdict = "partially_supported" if n_ok else "unsupported_answer"
        stage = (
            "citation_partial" if any(not d.cited for d in drafts) else "generator_ignored_signal"
        )
        return VerdictIn(verdict, (stage,), "", tuple(drafts))
    if view.feedback in ("expected_answer", "negative"):
        if filtered:
            stage = "filter_removed"
        elif not view.hits_after_filter:
            stage = "retrieval_missed"
        else:
            stage = "policy_too_strict"
        return VerdictIn(
            "false_refusal", (stage,), "The user's feedback and the evidence both say yes."
        )
    return VerdictIn("correct_refusal")


def build_demo_audits(engine: Engine, tax: Taxonomy) -> int:
    """Two demo audit batches over the demo traces: one complete (every sampled trace judged
    by the demo reviewer, one false refusal promoted to a draft case, then closed) and one in
    progress (about a third judged). Returns the number of verdicts written; 0 when there
    are no traces or the plans already exist."""
    with read_session(engine) as s:
        n_traces = int(s.scalar(select(func.count(Trace.id))) or 0)
        if n_traces == 0 or s.scalar(select(func.count(SamplingPlan.id))):
            return 0
        # the month of the median trace: the busiest stretch of the demo, a full month's work
        middle = s.scalar(select(Trace.at).order_by(Trace.at).offset(n_traces // 2).limit(1))
        assert middle is not None
    ravi = replace(
        SYSTEM,
        email=DEMO_REVIEWER,
        name="Ravi Menon",
        roles=frozenset({Role.reviewer, Role.annotator}),
        clearance=True,
    )
    month_start = middle.date().replace(day=1)
    next_month = (month_start + dt.timedelta(days=32)).replace(day=1)
    complete_id = _write(
        engine,
        create_plan,
        ravi,
        PlanSpec(
            name=f"{DEMO_COMPLETE}{month_start:%B %Y}",
            filter=PopulationFilter(
                date_from=month_start, date_to=next_month - dt.timedelta(days=1)
            ),
            strata=("decision",),
            allocation="proportional",
            total=24,
            seed=20250601,
        ),
    )
    open_id = _write(
        engine,
        create_plan,
        ravi,
        PlanSpec(
            name=DEMO_OPEN,
            strata=("feedback",),
            allocation="equal",
            total=18,
            seed=7,
        ),
    )
    n = 0
    for plan_id, share in ((complete_id, 1.0), (open_id, 0.34)):
        drawn = _write(engine, draw_plan, ravi, plan_id).items
        todo = math.ceil(drawn * share)
        for _ in range(todo):
            item_id = _write(engine, next_item, ravi, plan_id)
            if item_id is None:
                break
            view = get_item(engine, ravi, item_id)
            assert view is not None
            _write(engine, submit_verdict, ravi, item_id, _demo_verdict(view), None)
            n += 1
    outcomes = item_outcomes(engine, complete_id)
    for wanted in ("false_refusal", "unsupported_answer", "partially_supported"):
        rows = outcomes[outcomes["outcome"] == wanted]
        if len(rows):
            try:  # the feedback loop: one audited failure becomes a draft case
                item = int(rows["item_id"].iloc[0])
                _write(engine, promote_to_case, ravi, item, tax)
                break
            except InputError:
                continue
    _write(engine, close_plan, ravi, complete_id)
    return n
