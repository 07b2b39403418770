"""The monthly review: one record of the month's signals, audit, findings and decisions.

A review session is opened for a month (``YYYY-MM``); it gathers the monitoring alerts of
that month, the audit batches, the release-gate status of the latest evaluation run, pending
and signed policy and wording changes; people record attendees, findings (with severity and
links to traces, cases or policy versions) and actions (owner role, due date); a validation
check is stored with it; closing makes it read-only. A finding can be carried into the next
month. The report exports as self-contained HTML and as Markdown with PNG charts.
"""

from __future__ import annotations

import base64
import calendar
import datetime as dt
import html
import io
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import altair as alt
import pandas as pd
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from review.charts.charts import risk_coverage_chart
from review.core.errors import InputError, PermissionDenied, StaleWriteError
from review.core.identity import Actor, Role
from review.core.taxonomy import Taxonomy, load_taxonomy
from review.evaluation import evalruns
from review.policy import signoff
from review.thresholds import thresholds
from storage import changes
from storage.db import read_session, run_write
from storage.models import ReviewAction, ReviewFinding, ReviewSession, User, utcnow

MONTH_RE = re.compile(r"^\d{4}-(0[1-9]|1[0-2])$")
SEVERITIES = ("low", "medium", "high", "critical")
LINK_KINDS = ("trace", "case", "policy_version", "run")
REVIEW_ROLES = (Role.reviewer, Role.product_owner, Role.compliance, Role.admin)


def _require_reviewer(actor: Actor) -> None:
    if not any(r in actor.roles for r in REVIEW_ROLES):
        raise PermissionDenied(
            "monthly reviews are recorded by reviewers, product owners, compliance or admins"
        )


def month_bounds(month: str) -> tuple[dt.date, dt.date]:
    if not MONTH_RE.match(month):
        raise InputError(f"month must look like 2025-07, got {month!r}")
    y, m = int(month[:4]), int(month[5:])
    return dt.date(y, m, 1), dt.date(y, m, calendar.monthrange(y, m)[1])


def next_month(month: str) -> str:
    _, last = month_bounds(month)
    n = last + dt.timedelta(days=1)
    return f"{n.year:04d}-{n.month:02d}"


@dataclass(frozen=True)
class Finding:
    id: int
    text: str
    severity: str
    links: tuple[dict[str, str], ...]
    carried_from_id: int | None
    created_by: str
    created_at: dt.datetime


@dataclass(frozen=True)
class Action:
    id: int
    text: str
    owner_role: str
    due_date: dt.date | None
    status: str


@dataclass(frozen=True)
class SessionView:
    id: int
    month: str
    status: str
    attendees: tuple[str, ...]
    validation: dict[str, Any] | None
    summary: str
    version: int
    created_by: str
    updated_by: str | None
    closed_at: dt.datetime | None
    closed_by: str | None
    findings: tuple[Finding, ...] = field(default=())
    actions: tuple[Action, ...] = field(default=())

    @property
    def closed(self) -> bool:
        return self.status == "closed"


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

    def work(s: Session) -> SessionView:
        if s.scalar(select(ReviewSession.id).where(ReviewSession.month == month)):
            raise InputError(f"the review for {month} already exists")
        row = ReviewSession(
            month=month,
            status="open",
            attendees=[actor.email],
            created_by=actor.email,
            updated_by=actor.email,
        )
        s.add(row)
        s.flush()
        changes.record(
            s, actor.email, "create", "review_session", month, None, changes.snapshot(row)
        )
        return _view(s, row)

    return run_write(engine, work)


def _open_row(s: Session, session_id: int) -> ReviewSession:
    row = s.get(ReviewSession, session_id, with_for_update=True)
    if row is None:
        raise InputError(f"review {session_id} does not exist")
    if row.status == "closed":
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
    if not text.strip():
        raise InputError("a finding needs text")
    if severity not in SEVERITIES:
        raise InputError(f"severity must be one of {', '.join(SEVERITIES)}")
    for link in links:
        if link.get("kind") not in LINK_KINDS or not str(link.get("ref", "")).strip():
            raise InputError(f"a link needs a kind ({', '.join(LINK_KINDS)}) and a reference")

    def work(s: Session) -> int:
        row = _open_row(s, session_id)
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

    return run_write(engine, work)


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
            status="open",
            created_by=actor.email,
        )
        s.add(a)
        s.flush()
        changes.record(s, actor.email, "create", "review_action", a.id, None, changes.snapshot(a))
        return a.id

    return run_write(engine, work)


def carry_finding(engine: Engine, actor: Actor, finding_id: int) -> int:
    """Copy a finding into the next month's review (opened if needed), linked to the original."""
    _require_reviewer(actor)
    with read_session(engine) as s:
        f = s.get(ReviewFinding, finding_id)
        if f is None:
            raise InputError(f"finding {finding_id} does not exist")
        month = s.get(ReviewSession, f.session_id).month  # type: ignore[union-attr]
        text, severity, links = f.text, f.severity, list(f.links)
    target = next_month(month)
    nxt = get_session(engine, target) or open_session(engine, actor, target)
    if nxt.closed:
        raise InputError(f"the review for {target} is already closed")
    return add_finding(engine, actor, nxt.id, text, severity, links, carried_from_id=finding_id)


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
        row.status = "closed"
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
            {"status": "open"},
            {"status": "closed"},
        )

    run_write(engine, work)


# ---------------------------------------------------------------------------------------
# Validation check (the policy's dry-run rules)


def _template_regex(text: str) -> re.Pattern[str]:
    parts = re.split(r"\{[A-Za-z_][A-Za-z0-9_]*\}", text)
    return re.compile(r"\s*" + r".+?".join(re.escape(p.strip()) for p in parts) + r"\s*\Z", re.S)


def approved_refusal_patterns(templates: Sequence[str]) -> list[re.Pattern[str]]:
    return [_template_regex(t) for t in templates]


def validation_check(
    frame: pd.DataFrame,
    targets: dict[str, float],
    refusal_templates: Sequence[str],
    answering: set[str],
) -> dict[str, Any]:
    """On the chosen cases of a run (``frame`` from evalruns.outputs_frame, one repeat):

    - share of answerable cases answered (answer, with or without caveat) vs the target;
    - share of unanswerable cases given their expected behaviour (observed == gold) vs the
      abstention-recall target;
    - every output carries a decision, and every non-answer a reason code;
    - every refusal text matches an approved wording message (placeholders filled in).
    """
    ok = frame[~frame["infra"].astype(bool)]
    answerable = ok[ok["answerable"].astype(bool)]
    unanswerable = ok[~ok["answerable"].astype(bool)]
    answered = int(answerable["decision"].isin(answering).sum())
    behaved = int((unanswerable["decision"] == unanswerable["gold"]).sum())
    no_decision = int(ok["decision"].isna().sum())
    refusals = ok[~ok["decision"].isin(answering) & ok["decision"].notna()]
    no_reason = int(refusals["reason_code"].isna().sum())
    patterns = approved_refusal_patterns(refusal_templates)
    off_wording = [
        str(k)
        for k, t in zip(refusals["key"], refusals["text"], strict=True)
        if not any(p.match(str(t or "")) for p in patterns)
    ]
    ans_rate = answered / len(answerable) if len(answerable) else float("nan")
    beh_rate = behaved / len(unanswerable) if len(unanswerable) else float("nan")
    result = {
        "answerable": len(answerable),
        "answered": answered,
        "answer_rate": ans_rate,
        "answer_rate_target": targets.get("min_answer_rate_answerable"),
        "unanswerable": len(unanswerable),
        "expected_behaviour": behaved,
        "behaviour_rate": beh_rate,
        "behaviour_target": targets.get("min_abstention_recall"),
        "without_decision": no_decision,
        "refusals": len(refusals),
        "refusals_without_reason": no_reason,
        "refusals_off_wording": len(off_wording),
        "off_wording_cases": off_wording[:50],
        "infrastructure_failures": int(frame["infra"].astype(bool).sum()),
    }
    ans_target = float(targets.get("min_answer_rate_answerable") or 0.0)
    beh_target = float(targets.get("min_abstention_recall") or 0.0)
    result["passed"] = bool(
        ans_rate == ans_rate
        and beh_rate == beh_rate
        and ans_rate >= ans_target
        and beh_rate >= beh_target
        and no_decision == 0
        and no_reason == 0
        and not off_wording
    )
    return result


def _validation_frame(
    engine: Engine, tax: Taxonomy, run_id: int, split: str, case_keys: Sequence[str] | None
) -> pd.DataFrame:
    frame = evalruns.outputs_frame(engine, run_id, tax)
    if case_keys:
        wanted = {k.strip() for k in case_keys if k.strip()}
        unknown = sorted(wanted - set(frame["key"]))
        if unknown:
            raise InputError(
                f"not in the run: {', '.join(unknown[:10])}"
                + (f" and {len(unknown) - 10} more" if len(unknown) > 10 else "")
            )
        frame = frame[frame["key"].isin(wanted)]
    elif split != "all":
        frame = frame[frame["split"] == split]
    return frame[frame["repeat"] == frame["repeat"].min()] if not frame.empty else frame


def run_validation(
    engine: Engine,
    tax: Taxonomy,
    run_id: int,
    split: str,
    refusal_templates: Sequence[str],
    *,
    case_keys: Sequence[str] | None = None,
    calibration_run_id: int | None = None,
    tolerance: int = 1,
) -> dict[str, Any]:
    """The dry run of the policy in force on the chosen cases (``case_keys``; else a split
    of the run): the checks of ``validation_check``, and, with ``calibration_run_id`` (the
    author's calibration run), whether each count (answerable answered, unanswerable given
    their expected behaviour) is within ``tolerance`` case(s) of that run's on the same cases."""
    frame = _validation_frame(engine, tax, run_id, split, case_keys)
    if frame.empty:
        raise InputError(f"the run has no outputs on the {split} split")
    policy = thresholds.in_force(engine).policy
    targets = {
        "min_answer_rate_answerable": policy.targets.min_answer_rate_answerable,
        "min_abstention_recall": policy.targets.min_abstention_recall,
    }
    answering = tax.answering_decisions()
    result = validation_check(frame, targets, refusal_templates, answering)
    runs = {r.id: r for r in evalruns.list_runs(engine)}
    result.update(
        {
            "run": runs[run_id].name,
            "split": "chosen cases" if case_keys else split,
            "cases": len(frame),
            "at": utcnow().isoformat(),
        }
    )
    if calibration_run_id is not None:
        if calibration_run_id not in runs:
            raise InputError(f"run {calibration_run_id} does not exist")
        keys = list(frame["key"])
        base = _validation_frame(engine, tax, calibration_run_id, "all", keys)
        ref = validation_check(base, targets, refusal_templates, answering)
        within = (
            abs(result["answered"] - ref["answered"]) <= tolerance
            and abs(result["expected_behaviour"] - ref["expected_behaviour"]) <= tolerance
            and result["answerable"] == ref["answerable"]
            and result["unanswerable"] == ref["unanswerable"]
        )
        result.update(
            {
                "calibration_run": runs[calibration_run_id].name,
                "calibration_answered": ref["answered"],
                "calibration_expected_behaviour": ref["expected_behaviour"],
                "count_tolerance": tolerance,
                "within_tolerance": bool(within),
            }
        )
        result["passed"] = bool(result["passed"] and within)
    return result


# ---------------------------------------------------------------------------------------
# What the month's record gathers


@dataclass(frozen=True)
class MonthContext:
    month: str
    gate: list[thresholds.GateRow]
    gate_run: str | None
    policy_changes: list[signoff.VersionView]
    extra_sections: list[tuple[str, pd.DataFrame]]
    charts: list[tuple[str, alt.TopLevelMixin]]
    #: a closed review's month as it was when closed: its tables (gate, extra sections,
    #: policy changes, in report order) replace the live ones; None for a live context
    frozen_tables: list[tuple[str, pd.DataFrame]] | None = None
    frozen_at: str | None = None


ContextHook = Callable[
    [Engine, Taxonomy, str, dt.date, dt.date],
    tuple[list[tuple[str, pd.DataFrame]], list[tuple[str, alt.TopLevelMixin]]],
]
CONTEXT_HOOKS: list[ContextHook] = []


def month_context(engine: Engine, tax: Taxonomy, month: str) -> MonthContext:
    """What the review of ``month`` shows: for a closed review the record frozen when it
    was closed; otherwise gathered now (the newest run created by the month's end, the
    policy and wording changes of the month and those pending, the hooks' sections)."""
    with read_session(engine) as s:
        record = s.scalar(select(ReviewSession.record).where(ReviewSession.month == month))
    if record:
        return thaw_context(month, record)
    return live_context(engine, tax, month)


def live_context(engine: Engine, tax: Taxonomy, month: str) -> MonthContext:
    """The month's context gathered from the data as it is now."""
    first, last = month_bounds(month)
    end = dt.datetime.combine(last + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC)
    runs = [r for r in evalruns.list_runs(engine) if r.created_at < end]
    gate: list[thresholds.GateRow] = []
    gate_run = None
    if runs:
        latest = runs[0]
        frame = evalruns.outputs_frame(engine, latest.id, tax)
        try:
            gate = thresholds.release_gate(thresholds.in_force(engine).policy, frame, "test")
            gate_run = latest.name
        except InputError:
            gate = []
    changed = []
    for kind_name in ("no_answer_policy", "refusal_wording"):
        try:
            for v in signoff.versions(engine, kind_name):
                touched = [v.created_at.date(), *(sg.at.date() for sg in v.signatures)]
                if v.status == "pending" or any(first <= d <= last for d in touched):
                    changed.append(v)
        except InputError:
            continue
    sections: list[tuple[str, pd.DataFrame]] = []
    charts_: list[tuple[str, alt.TopLevelMixin]] = []
    if runs and gate_run:
        try:
            pif = thresholds.in_force(engine)
            outcomes = thresholds.outcomes(engine, runs[0].id, tax, pif.policy)
            mode = str(outcomes["mode"].iloc[0]) if not outcomes.empty else "vector"
            th = pif.policy.thresholds_for(mode)
            a = thresholds.analyse(outcomes, pif.policy, mode, th.refuse_below, th.refuse_below)
            point = a.ops[(a.ops["policy"] == "current") & (a.ops["split"] == a.tuned_on)]
            pts = (
                {
                    "in force": (
                        float(point["coverage"].iloc[0]),
                        float(point["selective_risk"].iloc[0]),
                    )
                }
                if len(point)
                else {}
            )
            charts_.append(
                (
                    f"Risk vs coverage of the policy in force ({gate_run}, {a.tuned_on} split)",
                    risk_coverage_chart(a.curve, pts),
                )
            )
        except InputError:
            pass
    for hook in CONTEXT_HOOKS:
        s_, c_ = hook(engine, tax, month, first, last)
        sections.extend(s_)
        charts_.extend(c_)
    return MonthContext(month, gate, gate_run, changed, sections, charts_)


# ---------------------------------------------------------------------------------------
# Report export


def _svg(chart: alt.TopLevelMixin) -> str:
    buf = io.StringIO()
    chart.save(buf, format="svg")
    return str(buf.getvalue())


def _png(chart: alt.TopLevelMixin) -> bytes:
    buf = io.BytesIO()
    chart.save(buf, format="png", scale_factor=1.5)
    return buf.getvalue()


def _table_html(df: pd.DataFrame) -> str:
    return str(df.to_html(index=False, escape=True, border=0, na_rep="—"))


def _table_md(df: pd.DataFrame) -> str:
    if df.empty:
        return "_(none)_\n"
    cols = [str(c) for c in df.columns]

    def cell(v: Any) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def report_sections(view: SessionView, ctx: MonthContext) -> list[tuple[str, pd.DataFrame]]:
    """The report's tables, in order; the HTML and the Markdown export render the same."""
    val = view.validation or {}
    return [
        ("Attendees", pd.DataFrame({"attendee": list(view.attendees)})),
        *context_tables(ctx),
        (
            "Validation check",
            pd.DataFrame(
                [{"check": k, "value": v} for k, v in val.items() if k != "off_wording_cases"]
            ),
        ),
        (
            "Findings",
            pd.DataFrame(
                [
                    {
                        "severity": f.severity,
                        "finding": f.text,
                        "links": ", ".join(f"{x['kind']}:{x['ref']}" for x in f.links),
                        "carried from": f.carried_from_id,
                    }
                    for f in view.findings
                ]
            ),
        ),
        (
            "Actions",
            pd.DataFrame(
                [
                    {
                        "action": a.text,
                        "owner role": a.owner_role,
                        "due": a.due_date,
                        "status": a.status,
                    }
                    for a in view.actions
                ]
            ),
        ),
    ]


def context_tables(ctx: MonthContext) -> list[tuple[str, pd.DataFrame]]:
    """The month's tables: release gate, the hooks' sections, policy and wording changes."""
    if ctx.frozen_tables is not None:
        return list(ctx.frozen_tables)
    return [
        (
            "Release gate of the latest run"
            + (f" ({ctx.gate_run}, test split)" if ctx.gate_run else ""),
            pd.DataFrame(
                [
                    {
                        "target": g.target,
                        "scope": g.scope,
                        "rule": g.rule,
                        "value": None if g.value != g.value else round(g.value, 3),
                        "result": "pass" if g.passed else "FAIL",
                    }
                    for g in ctx.gate
                ]
            ),
        ),
        *ctx.extra_sections,
        (
            "Policy and wording changes",
            pd.DataFrame(
                [
                    {
                        "kind": v.kind,
                        "version": v.number,
                        "status": v.status,
                        "author": v.author,
                        "rationale": v.rationale,
                        "signatures": "; ".join(
                            f"{s.role} {s.meaning} by {s.signer}" for s in v.signatures
                        ),
                    }
                    for v in ctx.policy_changes
                ]
            ),
        ),
    ]


def _table_json(df: pd.DataFrame) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(df.to_json(orient="split", date_format="iso", index=False))
    return {"columns": data.get("columns", []), "data": data.get("data", [])}


def freeze_context(ctx: MonthContext) -> dict[str, Any]:
    """A closed review's record: the month's tables and charts as JSON (charts as their
    Vega-Lite specs with the data inline), so the review reads the same for good."""
    return {
        "frozen_at": utcnow().isoformat(),
        "gate_run": ctx.gate_run,
        "tables": [{"title": t, **_table_json(df)} for t, df in context_tables(ctx)],
        "extra_titles": [t for t, _ in ctx.extra_sections],
        "charts": [{"title": t, "spec": chart.to_dict()} for t, chart in ctx.charts],
    }


def _chart_from_spec(spec: dict[str, Any]) -> alt.TopLevelMixin:
    for key, cls in (
        ("layer", alt.LayerChart),
        ("hconcat", alt.HConcatChart),
        ("vconcat", alt.VConcatChart),
        ("concat", alt.ConcatChart),
    ):
        if key in spec:
            return cls.from_dict(spec, validate=False)
    return alt.Chart.from_dict(spec, validate=False)


def thaw_context(month: str, record: dict[str, Any]) -> MonthContext:
    """The MonthContext of a frozen record (see ``freeze_context``)."""
    tables = [
        (str(t["title"]), pd.DataFrame(t.get("data", []), columns=t.get("columns", [])))
        for t in record.get("tables", [])
    ]
    extra = set(record.get("extra_titles", []))
    return MonthContext(
        month=month,
        gate=[],
        gate_run=record.get("gate_run"),
        policy_changes=[],
        extra_sections=[(t, df) for t, df in tables if t in extra],
        charts=[(str(c["title"]), _chart_from_spec(c["spec"])) for c in record.get("charts", [])],
        frozen_tables=tables,
        frozen_at=record.get("frozen_at"),
    )


def export_html(view: SessionView, ctx: MonthContext) -> str:
    """One self-contained HTML file: styles inline, charts as inline SVG, no network."""
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
        "style-src 'unsafe-inline'; img-src data:\">",
        f"<title>Monthly review {html.escape(view.month)}</title>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
        "table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;"
        "padding:4px 8px;text-align:left;vertical-align:top}th{background:#f3f3f3}"
        ".fail{color:#a00}</style></head><body>",
        f"<h1>Monthly review {html.escape(view.month)}</h1>",
        f"<p>Status: {html.escape(view.status)}"
        + (
            f", closed by {html.escape(view.closed_by or '')} on {view.closed_at:%Y-%m-%d}"
            if view.closed_at
            else ""
        )
        + "</p>",
        f"<h2>Summary</h2><p>{html.escape(view.summary) or '—'}</p>",
    ]
    for title, df in report_sections(view, ctx):
        parts.append(f"<h2>{html.escape(title)}</h2>")
        parts.append(_table_html(df) if not df.empty else "<p>(none)</p>")
    for title, chart in ctx.charts:
        parts.append(f"<h2>{html.escape(title)}</h2>")
        svg = _svg(chart)
        svg = re.sub(r"<\?xml[^>]*>", "", svg)
        parts.append(f"<figure>{svg}</figure>")
    parts.append("</body></html>")
    return "\n".join(parts)


def export_markdown(
    view: SessionView, ctx: MonthContext, *, render_images: bool = True
) -> tuple[str, dict[str, bytes]]:
    """Markdown text and its PNG charts (file name -> bytes), from the same data. With
    ``render_images=False`` the text (which names the images) comes without them: rendering
    the PNGs is most of the cost, paid only when the zip is downloaded."""
    lines = [
        f"# Monthly review {view.month}",
        "",
        f"Status: {view.status}"
        + (f", closed by {view.closed_by} on {view.closed_at:%Y-%m-%d}" if view.closed_at else ""),
        "",
        "## Summary",
        "",
        view.summary or "—",
        "",
    ]
    for title, df in report_sections(view, ctx):
        lines += [f"## {title}", "", _table_md(df)]
    images: dict[str, bytes] = {}
    for i, (title, chart) in enumerate(ctx.charts, 1):
        name = f"chart-{i}.png"
        if render_images:
            images[name] = _png(chart)
        lines += [f"## {title}", "", f"![{title}]({name})", ""]
    return "\n".join(lines), images


def png_data_uri(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def refusal_templates(engine: Engine) -> list[str]:
    """The approved refusal messages (every non-answer key; C1 is a caveat, not a refusal)."""
    from review.wording import versions

    wif = versions.in_force(engine)
    return [m.text for k, m in wif.wording.messages.items() if k != "C1"]


def _monitoring_hook(
    engine: Engine, tax: Taxonomy, month: str, first: dt.date, last: dt.date
) -> tuple[list[tuple[str, pd.DataFrame]], list[tuple[str, alt.TopLevelMixin]]]:
    from review.traces import monitoring

    try:
        policy = monitoring.load_monitoring_policy()
        result = monitoring.monitor(
            engine, tax, policy, weeks=(last - first).days // 7 + 2, end=last
        )
    except InputError:
        return [], []
    alerts = [a for a in result.alerts if first - dt.timedelta(days=6) <= a.week <= last]
    table = pd.DataFrame(
        [
            {
                "week": a.week,
                "rule": a.rule,
                "severity": a.severity,
                "value": round(a.value, 3),
                "message": a.message,
            }
            for a in alerts
        ]
    )
    charts_: list[tuple[str, alt.TopLevelMixin]] = []
    if not result.weeks.empty:
        charts_.append(
            (
                f"Weekly signals up to {last:%Y-%m-%d}",
                monitoring.signals_chart(result.weeks, alerts),
            )
        )
    return [("Monitoring alerts of the month", table)], charts_


def _audit_hook(
    engine: Engine, tax: Taxonomy, month: str, first: dt.date, last: dt.date
) -> tuple[list[tuple[str, pd.DataFrame]], list[tuple[str, alt.TopLevelMixin]]]:
    from review.audits import estimates, plans

    rows = []
    for plan in plans.list_plans(engine):
        if not (first <= plan.created_at.date() <= last) and plan.status == "closed":
            continue
        try:
            est = estimates.estimates(engine, plan.id)
        except InputError:
            continue
        for r in est.rates.head(4).to_dict(orient="records"):
            rows.append(
                {
                    "batch": plan.name,
                    "status": plan.status,
                    "audited": f"{est.audited}/{est.sampled}",
                    **r,
                }
            )
    return [("Audit batches and weighted estimates", pd.DataFrame(rows))], []


CONTEXT_HOOKS.extend([_monitoring_hook, _audit_hook])
