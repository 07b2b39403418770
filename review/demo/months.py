"""Demo monthly reviews: the two months before this one closed, this month's review open."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Engine

from review.core.taxonomy import Taxonomy
from review.demo.people import demo_actor
from review.evaluation import evalruns
from review.monthly.reviews import (
    add_action,
    add_finding,
    carry_finding,
    close_session,
    get_session,
    list_sessions,
    open_session,
    store_validation,
    update_session,
)
from review.monthly.validation import refusal_templates, run_validation


def build_demo_reviews(engine: Engine, tax: Taxonomy, today: dt.date | None = None) -> int:
    """Two closed reviews (the two months before this one) and this month's open review."""
    if list_sessions(engine):
        return 0
    ravi = demo_actor("ravi.menon@brightwave.example")
    chen = demo_actor("chen.li@brightwave.example")
    paula = demo_actor("paula.kim@brightwave.example")
    today = today or dt.date.today()
    first = today.replace(day=1)
    prev1 = first - dt.timedelta(days=1)
    prev2 = prev1.replace(day=1) - dt.timedelta(days=1)
    months = [f"{d.year:04d}-{d.month:02d}" for d in (prev2, prev1, today)]
    runs = evalruns.list_runs(engine)
    templates = refusal_templates(engine)
    findings = [
        (
            "Refusals of the reference pipeline do not use the approved wording (R1/R2); the "
            "product team to wire the message keys.",
            "high",
            [{"kind": "run", "ref": "reference"}],
        ),
        (
            "Temporal-mismatch cases answer from the superseded refund policy.",
            "critical",
            [{"kind": "case", "ref": "CASE-003"}],
        ),
        (
            "False refusals on SLA questions after the July threshold change.",
            "medium",
            [{"kind": "case", "ref": "CASE-005"}, {"kind": "policy_version", "ref": "2"}],
        ),
    ]
    carried = None
    for i, month in enumerate(months):
        s = open_session(engine, ravi, month)
        s = update_session(
            engine,
            ravi,
            s.id,
            s.version,
            attendees=[ravi.email, chen.email, paula.email],
            summary=(
                "Monthly review of production refusals and answers: alerts, "
                "the audit sample and the release gate."
            ),
        )
        if carried is not None:
            carry_finding(engine, ravi, carried)
        if i < 2:
            text, sev, links = findings[i]
            fid = add_finding(engine, ravi, s.id, text, sev, links)
            add_action(
                engine,
                ravi,
                s.id,
                "Re-run the validation check after the fix.",
                "reviewer",
                today + dt.timedelta(days=14 * (i + 1)),
            )
            carried = fid if i == 1 else None
            if runs:
                result = run_validation(engine, ravi, tax, runs[0].id, "validation", templates)
                store_validation(engine, ravi, s.id, result)
            view = get_session(engine, month)
            assert view is not None
            close_session(engine, ravi, s.id, view.version, tax)
        else:
            text, sev, links = findings[2]
            add_finding(engine, ravi, s.id, text, sev, links)
    return len(months)
