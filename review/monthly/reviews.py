"""The monthly review: one record of the month's signals, audit, findings and decisions.

A review session is opened for a month (``YYYY-MM``); it gathers the monitoring alerts of
that month, the audit batches, the release-gate status of the latest evaluation run, pending
and signed policy and wording changes; people record attendees, findings (with severity and
links to traces, cases or policy versions) and actions (owner role, due date); a validation
check is stored with it; closing makes it read-only. A finding can be carried into the next
month. The report exports as self-contained HTML and as Markdown with PNG charts.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from review.core.errors import InputError, PermissionDenied, StaleWriteError
from review.core.identity import Actor, Role
from review.core.taxonomy import Taxonomy, load_taxonomy
from review.core.terms import SessionStatus
from review.monthly.records import (
    LINK_KINDS,
    SEVERITIES,
    Action,
    Finding,
    SessionView,
    month_bounds,
    next_month,
)
from review.monthly.report import freeze_context, live_context
from review.policy import signoff
from storage import changes
from storage.db import read_session, run_write
from storage.models import ReviewAction, ReviewFinding, ReviewSession, User, utcnow

REVIEW_ROLES = (Role.reviewer, Role.product_owner, Role.compliance, Role.admin)


def _require_reviewer(actor: Actor) -> None:
    if not any(r in actor.roles for r in REVIEW_ROLES):
        raise PermissionDenied(
            "monthly reviews are recorded by reviewers, product owners, compliance or admins"
        )


def _view(s: Session, row: ReviewSession) -> SessionView:
    findings = tuple(
        Finding(
            f.id, f.text, f.severity, tuple(f.links), f.carried_from_id, f.created_by, f.created_at
        )
        for f in s.scalars(
            select(ReviewFinding)
            .where(ReviewFinding.session_id == row.id)
            .order_by(ReviewFinding.id)
        )
    )
    actions = tuple(
        Action(a.id, a.text, a.owner_role, a.due_date, a.status)
        for a in s.scalars(
            select(ReviewAction).where(ReviewAction.session_id == row.id).order_by(ReviewAction.id)
        )
    )
    return SessionView(
        row.id,
        row.month,
        row.status,
        tuple(row.attendees),
        row.validation,
        row.summary,
        row.version,
        row.created_by,
        row.updated_by,
        row.closed_at,
        row.closed_by,
        findings,
        actions,
    )


def list_sessions(engine: Engine) -> list[SessionView]:
    with read_session(engine) as s:
        return [
            _view(s, r)
            for r in s.scalars(select(ReviewSession).order_by(ReviewSession.month.desc()))
        ]


def get_session(engine: Engine, month: str) -> SessionView | None:
    with read_session(engine) as s:
        row = s.scalar(select(ReviewSession).where(ReviewSession.month == month))
        return _view(s, row) if row else None


def open_session(engine: Engine, actor: Actor, month: str) -> SessionView:
    _require_reviewer(actor)
    month_bounds(month)
    return run_write(engine, lambda s: _view(s, _insert_session(s, actor, month)))


def _insert_session(s: Session, actor: Actor, month: str) -> ReviewSession:
    if s.scalar(select(ReviewSession.id).where(ReviewSession.month == month)):
        raise InputError(f"the review for {month} already exists")
    row = ReviewSession(
        month=month,
        status=SessionStatus.open,
        attendees=[actor.email],
        created_by=actor.email,
        updated_by=actor.email,
    )
    s.add(row)
    s.flush()
    changes.record(s, actor.email, "create", "review_session", month, None, changes.snapshot(row))
    return row


def open_month(engine: Engine, actor: Actor, month: str) -> tuple[SessionView, bool]:
    """The review of ``month``: the existing one (nothing is written), else a new one is
    opened. Returns it and whether it was created now."""
    _require_reviewer(actor)
    month_bounds(month)
    existing = get_session(engine, month)
    if existing is not None:
        return existing, False
    try:
        return open_session(engine, actor, month), True
    except InputError:  # opened by someone else a moment ago
        again = get_session(engine, month)
        if again is None:
            raise
        return again, False


def _open_row(s: Session, session_id: int) -> ReviewSession:
    row = s.get(ReviewSession, session_id, with_for_update=True)
    if row is None:
        raise InputError(f"review {session_id} does not exist")
    if row.status == SessionStatus.closed:
        raise InputError(
            f"the review for {row.month} is closed and read-only "
            f"(closed by {row.closed_by} at {row.closed_at:%Y-%m-%d %H:%M})"
        )
    return row


def update_session(
    engine: Engine,
    actor: Actor,
    session_id: int,
    expected_version: int,
    *,
    attendees: Sequence[str],
    summary: str,
) -> SessionView:
    """Attendees and summary, version-checked (a stale edit is refused naming who saved)."""
    _require_reviewer(actor)

    def work(s: Session) -> SessionView:
        _open_row(s, session_id)
        known = set(s.scalars(select(User.email)))
        unknown = [a for a in attendees if a not in known]
        if unknown:
            raise InputError(f"attendee {unknown[0]!r} is not a user of the workbench")
        row = changes.versioned_update(
            s,
            ReviewSession,
            session_id,
            expected_version,
            {"attendees": sorted(set(attendees)), "summary": summary.strip()},
            actor.email,
            "review_session",
        )
        return _view(s, row)

    return run_write(engine, work)


def add_finding(
    engine: Engine,
    actor: Actor,
    session_id: int,
    text: str,
    severity: str,
    links: Sequence[dict[str, str]] = (),
    carried_from_id: int | None = None,
) -> int:
    _require_reviewer(actor)
    _check_finding(text, severity, links)
    return run_write(
        engine,
        lambda s: _insert_finding(
            s, actor, _open_row(s, session_id), text, severity, links, carried_from_id
        ),
    )


def _check_finding(text: str, severity: str, links: Sequence[dict[str, str]]) -> None:
    if not text.strip():
        raise InputError("a finding needs text")
    if severity not in SEVERITIES:
        raise InputError(f"severity must be one of {', '.join(SEVERITIES)}")
    for link in links:
        if link.get("kind") not in LINK_KINDS or not str(link.get("ref", "")).strip():
            raise InputError(f"a link needs a kind ({', '.join(LINK_KINDS)}) and a reference")


def _insert_finding(
    s: Session,
    actor: Actor,
    row: ReviewSession,
    text: str,
    severity: str,
    links: Sequence[dict[str, str]],
    carried_from_id: int | None,
) -> int:
    f = ReviewFinding(
        session_id=row.id,
        text=text.strip(),
        severity=severity,
        links=[dict(x) for x in links],
        carried_from_id=carried_from_id,
        created_by=actor.email,
    )
    s.add(f)
    s.flush()
    changes.record(s, actor.email, "create", "review_finding", f.id, None, changes.snapshot(f))
    return f.id


def add_action(
    engine: Engine,
    actor: Actor,
    session_id: int,
    text: str,
    owner_role: str,
    due_date: dt.date | None,
) -> int:
    _require_reviewer(actor)
    if not text.strip():
        raise InputError("an action needs text")
    try:
        Role(owner_role)
    except ValueError:
        raise InputError(f"owner role must be one of {', '.join(r.value for r in Role)}") from None

    def work(s: Session) -> int:
        row = _open_row(s, session_id)
        a = ReviewAction(
            session_id=row.id,
            text=text.strip(),
            owner_role=owner_role,
            due_date=due_date,
            status=SessionStatus.open,
            created_by=actor.email,
        )
        s.add(a)
        s.flush()
        changes.record(s, actor.email, "create", "review_action", a.id, None, changes.snapshot(a))
        return a.id

    return run_write(engine, work)


def carry_finding(engine: Engine, actor: Actor, finding_id: int) -> int:
    """Copy a finding into the next month's review (opened if needed), linked to the original:
    one transaction, so a refused copy leaves no review opened for it."""
    _require_reviewer(actor)

    def work(s: Session) -> int:
        f = s.get(ReviewFinding, finding_id)
        if f is None:
            raise InputError(f"finding {finding_id} does not exist")
        month = s.get(ReviewSession, f.session_id).month  # type: ignore[union-attr]
        target = next_month(month)
        nxt = s.scalar(
            select(ReviewSession).where(ReviewSession.month == target).with_for_update()
        ) or _insert_session(s, actor, target)
        if nxt.status == SessionStatus.closed:
            raise InputError(f"the review for {target} is already closed")
        return _insert_finding(
            s, actor, nxt, f.text, f.severity, list(f.links), carried_from_id=finding_id
        )

    return run_write(engine, work)


def store_validation(engine: Engine, actor: Actor, session_id: int, result: dict[str, Any]) -> None:
    _require_reviewer(actor)

    def work(s: Session) -> None:
        row = _open_row(s, session_id)
        before = row.validation
        row.validation = signoff.json_safe(result)
        row.version += 1
        row.updated_at = utcnow()
        row.updated_by = actor.email
        changes.record(
            s,
            actor.email,
            "validate",
            "review_session",
            row.month,
            {"validation": before},
            {"validation": row.validation},
        )

    run_write(engine, work)


def close_session(
    engine: Engine,
    actor: Actor,
    session_id: int,
    expected_version: int,
    tax: Taxonomy | None = None,
) -> None:
    """Close the review: from now on it is read-only, and the month's tables and charts are
    kept as they are now (a later run, audit batch, policy change or purge does not change
    the record). Audited."""
    _require_reviewer(actor)
    with read_session(engine) as rs:
        month = rs.scalar(select(ReviewSession.month).where(ReviewSession.id == session_id))
    if month is None:
        raise InputError(f"review {session_id} does not exist")
    record = freeze_context(live_context(engine, tax or load_taxonomy(), month))

    def work(s: Session) -> None:
        row = _open_row(s, session_id)
        if row.version != expected_version:
            raise StaleWriteError(
                f"the review for {row.month} was changed by {row.updated_by} since you opened "
                "it; reload before closing"
            )
        if row.validation is None:
            raise InputError("run and store the validation check before closing the review")
        row.status = SessionStatus.closed
        row.closed_at = utcnow()
        row.closed_by = actor.email
        row.record = record
        row.version += 1
        row.updated_at = row.closed_at
        row.updated_by = actor.email
        changes.record(
            s,
            actor.email,
            "close",
            "review_session",
            row.month,
            {"status": SessionStatus.open},
            {"status": SessionStatus.closed},
        )

    run_write(engine, work)
