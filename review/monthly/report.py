"""What the month's record gathers (signals, alerts, audit estimates, validation, charts), frozen
into the record when the review closes, and the report exported as HTML or Markdown."""

# Long module: the page's tables, the frozen record and both exports are made from one
# MonthContext by the same formatting, so what is exported is what the page showed.

from __future__ import annotations

import datetime as dt
import html
import io
import json
import re
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import altair as alt
import pandas as pd
from sqlalchemy import Engine, func, select

from review.admin import users
from review.cases import splits
from review.charts.charts import risk_coverage_chart
from review.core import readable
from review.core.errors import InputError
from review.core.escape import markdown_cell, markdown_text
from review.core.sampling import wilson_bounds
from review.core.taxonomy import Taxonomy, policies_dir
from review.core.terms import PlanStatus, VersionStatus
from review.evaluation import evalruns
from review.monthly import validation
from review.monthly.records import SessionView, links_text, month_bounds
from review.policy import inforce, signoff
from review.policy.policy import default_policy_path
from review.thresholds import release, thresholds
from storage.db import read_session
from storage.models import (
    AuditItem,
    AuditVerdict,
    EvalRun,
    PolicyVersion,
    ReviewSession,
    SamplingPlan,
    Setting,
    SignOff,
    utcnow,
)

# ---------------------------------------------------------------------------------------
# What the month's record gathers


@dataclass(frozen=True)
class MonthContext:
    month: str
    gate: list[release.GateRow]
    gate_run: str | None
    policy_changes: list[signoff.VersionView]
    extra_sections: list[tuple[str, pd.DataFrame]]
    charts: list[tuple[str, alt.TopLevelMixin]]
    #: a closed review's month as it was when closed: its tables (gate, extra sections,
    #: policy changes, in report order) replace the live ones; None for a live context
    frozen_tables: list[tuple[str, pd.DataFrame]] | None = None
    frozen_at: str | None = None
    #: people's names by e-mail (lower case): the report names people, never their addresses
    names: dict[str, str] = field(default_factory=dict)
    #: the taxonomy the month's keys read with (slices, decisions); None: keys humanised
    tax: Taxonomy | None = None
    #: the gated run's outputs have scores, so the Thresholds page also shows its targets,
    #: on decisions re-made from them (:func:`gate_basis` names it)
    gate_rescored: bool = False
    #: pending versions that can no longer be approved: version id -> the number of the
    #: version approved since (their status reads "stale", not "pending")
    stale: dict[int, int] = field(default_factory=dict)


ContextHook = Callable[
    [Engine, Taxonomy, str, dt.date, dt.date],
    tuple[list[tuple[str, pd.DataFrame]], list[tuple[str, alt.TopLevelMixin]]],
]


CONTEXT_HOOKS: list[ContextHook] = []


def month_context(
    engine: Engine,
    tax: Taxonomy,
    month: str,
    live: Callable[[str], MonthContext] | None = None,
) -> MonthContext:
    """What the review of ``month`` shows: for a closed review the record frozen when it
    was closed; otherwise gathered now (the newest run created by the month's end, the
    policy and wording changes of the month and those pending, the hooks' sections), by
    ``live`` when given (a cached :func:`live_context`)."""
    with read_session(engine) as s:
        record = s.scalar(select(ReviewSession.record).where(ReviewSession.month == month))
    if record:
        return replace(thaw_context(month, record), names=users.display_names(engine), tax=tax)
    return live(month) if live is not None else live_context(engine, tax, month)


def live_stamp(engine: Engine, month: str) -> tuple[Any, ...]:
    """A cache key for :func:`live_context` of ``month`` (cheap: index ends and counts): it
    moves with whatever the context reads. The traces (imports and purges: the monitoring
    rollup moves with them), the runs and the outputs, cases, slices, documents, labels and
    adjudications the newest run of the month reads (``evalruns.outputs_stamp``: a case edit
    or a move to another split bumps its version), policy and wording versions and their
    sign-offs (append-only), sampling plans and their statuses, audit items and verdicts
    (append-only), the settings, the policy files the context falls back on and the hooks
    gathering it. Not the review sessions (opening a month leaves the others' contexts
    cached), nor people's names: they are read afresh (``with_names``)."""
    from review.traces import browse

    _, last = month_bounds(month)
    end = dt.datetime.combine(last + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC)

    def count_max(model: Any) -> tuple[Any, Any]:
        return (
            select(func.count(model.id)).scalar_subquery(),
            select(func.coalesce(func.max(model.id), 0)).scalar_subquery(),
        )

    with read_session(engine) as s:
        row = s.execute(
            select(
                *count_max(EvalRun),
                *count_max(PolicyVersion),
                *count_max(SignOff),
                *count_max(SamplingPlan),
                *count_max(AuditItem),
                *count_max(AuditVerdict),
                select(func.count(Setting.key)).scalar_subquery(),
                select(func.max(Setting.updated_at)).scalar_subquery(),
                select(func.sum(Setting.version)).scalar_subquery(),
            )
        ).one()
        statuses = sorted(
            s.execute(select(SamplingPlan.status, func.count()).group_by(SamplingPlan.status))
        )
        latest = s.scalar(
            select(EvalRun.id)
            .where(EvalRun.created_at < end)
            .order_by(EvalRun.id.desc())  # as live_context picks it from list_runs
            .limit(1)
        )
    files = [default_policy_path(), policies_dir() / "monitoring.yaml"]
    return (
        month,
        tuple(row),
        tuple(tuple(r) for r in statuses),
        browse.data_stamp(engine),
        evalruns.outputs_stamp(engine, latest) if latest is not None else None,
        tuple((f.stat().st_mtime_ns, f.stat().st_size) if f.exists() else None for f in files),
        tuple(f"{h.__module__}.{h.__qualname__}" for h in CONTEXT_HOOKS),
    )


def with_names(engine: Engine, ctx: MonthContext) -> MonthContext:
    """``ctx`` with people's names as they are now."""
    return replace(ctx, names=users.display_names(engine))


@dataclass(frozen=True)
class GatePart:
    """What a month's context shows of its newest run: the release gate on the test split
    and the risk-coverage chart of the policy in force (no gate: ``gate_run`` is None)."""

    gate: list[release.GateRow]
    gate_run: str | None
    charts: list[tuple[str, alt.TopLevelMixin]]
    #: the run's outputs have scores the policy re-decides (the Thresholds page's figures)
    rescored: bool = False


def live_outputs_stamp(live: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """The ``evalruns.outputs_stamp`` of the month's newest run held in a
    :func:`live_stamp` (None: the month has no run)."""
    found: tuple[Any, ...] | None = live[4]
    return found


def gate_stamp(
    engine: Engine, run: evalruns.RunRow, outputs: tuple[Any, ...] | None = None
) -> tuple[Any, ...]:
    """A cache key for :func:`gate_part` of ``run``: its outputs and the cases, slices and
    labels they are read with (``evalruns.outputs_stamp``; ``outputs``: that stamp read in
    the same script run, e.g. by :func:`live_stamp`, used when it is ``run``'s, since it
    costs 0.5 s at 500,000 cases), the policy versions and sign-offs (append-only) and the
    shipped policy file the policy in force comes from."""
    with read_session(engine) as s:
        row = s.execute(
            select(
                select(func.count(PolicyVersion.id)).scalar_subquery(),
                select(func.max(PolicyVersion.id)).scalar_subquery(),
                select(func.count(SignOff.id)).scalar_subquery(),
                select(func.max(SignOff.id)).scalar_subquery(),
            )
        ).one()
    path = default_policy_path()
    shipped = (path.stat().st_mtime_ns, path.stat().st_size) if path.exists() else None
    mine = outputs if outputs is not None and outputs[0] == run.id else None
    stamp = mine if mine is not None else evalruns.outputs_stamp(engine, run.id)
    return (run.id, run.name, stamp, tuple(row), shipped)


def gate_part(engine: Engine, tax: Taxonomy, run: evalruns.RunRow) -> GatePart:
    """The release gate and the risk-coverage chart of ``run`` (the same for every month
    whose newest run it is)."""
    gate: list[release.GateRow] = []
    gate_run = None
    # read once: the gate and the risk-coverage chart below use the same outputs and policy
    frame = evalruns.outputs_frame(engine, run.id, tax)
    pif: inforce.PolicyInForce | None = None
    try:
        pif = inforce.in_force(engine)
        in_scope = splits.scope_pairs(engine, "test")
        gate = release.release_gate(pif.policy, frame, "test", in_scope=in_scope).rows
        gate_run = run.name
    except InputError:
        gate = []
    charts_: list[tuple[str, alt.TopLevelMixin]] = []
    rescored = False
    if gate_run and pif is not None:
        try:
            outcomes = thresholds.outcomes_of(frame, pif.policy)
            rescored = not outcomes.empty
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
    return GatePart(gate, gate_run, charts_, rescored)


def live_context(
    engine: Engine,
    tax: Taxonomy,
    month: str,
    gate_of: Callable[[evalruns.RunRow], GatePart] | None = None,
) -> MonthContext:
    """The month's context gathered from the data as it is now (the newest run's part by
    ``gate_of`` when given: a cached :func:`gate_part`)."""
    first, last = month_bounds(month)
    end = dt.datetime.combine(last + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC)
    runs = [r for r in evalruns.list_runs(engine) if r.created_at < end]
    part = GatePart([], None, [])
    if runs:
        part = gate_of(runs[0]) if gate_of is not None else gate_part(engine, tax, runs[0])
    changed = []
    stale: dict[int, int] = {}
    for kind_name in ("no_answer_policy", "refusal_wording"):
        try:
            current = signoff.current_approved(engine, kind_name)
            for v in signoff.versions(engine, kind_name):
                touched = [v.created_at.date(), *(sg.at.date() for sg in v.signatures)]
                if v.status == VersionStatus.pending or any(first <= d <= last for d in touched):
                    changed.append(v)
                if current is not None and signoff.stale_parent(engine, v) is not None:
                    stale[v.id] = current.number
        except InputError:
            continue
    sections: list[tuple[str, pd.DataFrame]] = []
    charts_: list[tuple[str, alt.TopLevelMixin]] = list(part.charts)
    for hook in CONTEXT_HOOKS:
        s_, c_ = hook(engine, tax, month, first, last)
        sections.extend(s_)
        charts_.extend(c_)
    return MonthContext(
        month,
        list(part.gate),
        part.gate_run,
        changed,
        sections,
        charts_,
        names=users.display_names(engine),
        tax=tax,
        gate_rescored=part.rescored,
        stale=stale,
    )


# ---------------------------------------------------------------------------------------
# How the report's values read: like the pages (review.core.readable), never raw floats,
# keys or addresses

_RULE = re.compile(r"^\s*([A-Za-z_]+)\s*(>=|<=|==)\s*([-+0-9.eE]+)\s*$")
_OPS = {">=": "≥", "<=": "≤", "==": "="}
KIND_LABELS = {"no_answer_policy": "No-answer policy", "refusal_wording": "Refusal wording"}


def _scope(scope: str, tax: Taxonomy | None) -> str:
    if scope.startswith("slice:"):
        key = scope.removeprefix("slice:")
        return "Slice: " + (readable.term(tax, "slices", key) if tax else readable.humanize(key))
    return readable.humanize(scope)


def gate_frame(rows: list[release.GateRow], tax: Taxonomy | None) -> pd.DataFrame:
    """The release gate as people read it: each row's target and value as percentages (the
    value with its 95% Wilson interval and the count behind it), pass or fail, and why."""
    out = []
    for r in rows:
        m = _RULE.match(r.rule)
        target = f"{_OPS[m.group(2)]} {readable.percent(float(m.group(3)))}" if m else r.rule
        undefined = readable.is_missing(r.value) or r.n <= 0
        if undefined:
            value = "undefined"
        else:
            lo, hi = wilson_bounds(r.k, r.n)
            interval = readable.percent_interval(r.value, float(lo), float(hi))
            value = f"{interval}, {r.k:,} of {r.n:,}"
        if r.passed:
            why = ""
        elif undefined:
            why = r.why
        else:
            why = f"{readable.percent(r.value)} is not {target}"
        out.append(
            {
                "check": r.row,
                "source": r.source,
                "scope": _scope(r.scope, tax),
                "target": target,
                "value (95% interval)": value,
                "result": "pass" if r.passed else "fail",
                "why": why,
            }
        )
    columns = ["check", "source", "scope", "target", "value (95% interval)", "result", "why"]
    return pd.DataFrame(out, columns=columns)


def changes_frame(
    changes: list[signoff.VersionView],
    names: dict[str, str],
    stale: Mapping[int, int] | None = None,
) -> pd.DataFrame:
    """Policy and wording versions of the month: the sign-off version number (the one in
    force, pending or approved) labelled as such, so it is not read as the ``version:`` field
    inside the policy file. A pending version in ``stale`` (id -> the version approved since)
    reads as stale: it can only be rejected."""
    stale = stale or {}

    def status(v: signoff.VersionView) -> str:
        if v.id in stale:
            return f"Stale: superseded by version {stale[v.id]}"
        return readable.humanize(str(v.status))

    def who(email: str | None) -> str:
        return readable.person(email, names)

    return pd.DataFrame(
        [
            {
                "kind": KIND_LABELS.get(str(v.kind), readable.humanize(str(v.kind))),
                "version": readable.version_label(v.number, v.file_version),
                "status": status(v),
                "author": who(v.author),
                "rationale": v.rationale,
                "signatures": "; ".join(
                    f"{readable.humanize(str(s.role))} {s.meaning} by {who(s.signer)}"
                    for s in v.signatures
                ),
            }
            for v in changes
        ],
        columns=["kind", "version", "status", "author", "rationale", "signatures"],
    )


#: How a pass or a fail cell reads on the page (the colours of readable.badge and of the
#: exported report).
RESULT_STYLES = {"pass": "color: #1a7f37", "fail": "color: #c62828; font-weight: bold"}


def result_style(value: object) -> str:
    """The CSS of a table cell that holds "pass" or "fail" (empty for anything else)."""
    return RESULT_STYLES.get(str(value), "")


def _cell(value: Any) -> Any:
    """A cell of a table as people read it: numbers through readable.number (at most three
    decimals), nothing as a dash, never "nan"; text as it is."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or readable.UNDEFINED
    if isinstance(value, (dt.date, pd.Timestamp)):
        return readable.when(value, with_time=False)
    return readable.number(value)


def readable_cells(df: pd.DataFrame) -> pd.DataFrame:
    """Every cell of ``df`` as text people read (a closed review's record, frozen before
    the report read this way, reads the same as a live one)."""
    return df.astype(object).map(_cell) if not df.empty else df


# ---------------------------------------------------------------------------------------
# Report export


#: The width a chart is drawn at in the exported report (the page's column is ~1,100 px).
EXPORT_WIDTH = 760


def for_export(chart: alt.TopLevelMixin) -> alt.TopLevelMixin:
    """A chart as the exported report draws it: a single or layered chart at the report's
    width (a chart on a page stretches to its column; in a file it would shrink to Vega's
    default), and text large enough to read in print, legends never cut."""
    sized = chart
    if isinstance(chart, alt.Chart | alt.LayerChart):
        sized = chart.properties(width=EXPORT_WIDTH)
    configured: alt.TopLevelMixin = (
        sized.configure_axis(labelFontSize=12, titleFontSize=13, labelLimit=300, titlePadding=10)
        .configure_legend(labelFontSize=12, titleFontSize=12, labelLimit=0)
        .configure_title(fontSize=15, anchor="start", offset=10)
        .configure_header(labelFontSize=12, titleFontSize=13)
    )
    return configured


#: SVGs of the charts drawn for an export, by the chart's exported spec (a chart is drawn
#: by vl-convert in 0.2-0.4 s: the same report exported again draws none twice); bounded
SVG_MEMO: dict[str, str] = {}
SVG_MEMO_SIZE = 16


def _svg(chart: alt.TopLevelMixin) -> str:
    sized = for_export(chart)
    spec = json.dumps(sized.to_dict(validate=False), sort_keys=True, default=str)
    svg = SVG_MEMO.get(spec)
    if svg is None:
        buf = io.StringIO()
        sized.save(buf, format="svg")
        svg = str(buf.getvalue())
        while len(SVG_MEMO) >= SVG_MEMO_SIZE:
            SVG_MEMO.pop(next(iter(SVG_MEMO)), None)
        SVG_MEMO[spec] = svg
    return svg


def _png(chart: alt.TopLevelMixin) -> bytes:
    buf = io.BytesIO()
    for_export(chart).save(buf, format="png", scale_factor=1.5)
    return buf.getvalue()


def _table_html(df: pd.DataFrame) -> str:
    text = str(df.to_html(index=False, escape=True, border=0, na_rep="—"))
    # pass and fail read in colour, like the pages' badges
    return text.replace("<td>fail</td>", "<td class='fail'>fail</td>").replace(
        "<td>pass</td>", "<td class='pass'>pass</td>"
    )


def _table_md(df: pd.DataFrame) -> str:
    if df.empty:
        return "_(none)_\n"
    cols = [markdown_cell(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += [
        "| " + " | ".join(markdown_cell(v) for v in row) + " |"
        for row in df.itertuples(index=False)
    ]
    return "\n".join(lines) + "\n"


def report_sections(view: SessionView, ctx: MonthContext) -> list[tuple[str, pd.DataFrame]]:
    """The report's tables, in order; the HTML and the Markdown export render the same."""
    names = ctx.names
    return [
        (
            "Attendees",
            pd.DataFrame({"attendee": [readable.person(a, names) for a in view.attendees]}),
        ),
        *context_tables(ctx),
        ("Validation check", validation_frame(view, names)),
        (
            "Findings",
            pd.DataFrame(
                [
                    {
                        "severity": readable.humanize(f.severity),
                        "finding": f.text,
                        "links": links_text(f.links),
                        "carried from": _carried(f.carried_from_id),
                    }
                    for f in view.findings
                ]
            ),
        ),
        ("Actions", actions_frame(view)),
    ]


def actions_frame(view: SessionView) -> pd.DataFrame:
    """The review's actions as the report and the page show them."""
    return pd.DataFrame(
        [
            {
                "action": a.text,
                "owner role": readable.humanize(a.owner_role),
                "due": readable.when(a.due_date, with_time=False),
                "status": readable.humanize(a.status),
            }
            for a in view.actions
        ]
    )


def _carried(finding_id: int | None) -> str:
    return "" if readable.is_missing(finding_id) else f"finding {int(finding_id)}"  # type: ignore[arg-type]


def context_tables(ctx: MonthContext) -> list[tuple[str, pd.DataFrame]]:
    """The month's tables: release gate, the hooks' sections, policy and wording changes."""
    if ctx.frozen_tables is not None:
        return [(t, readable_cells(df)) for t, df in ctx.frozen_tables]
    return [
        (
            "Release gate of the latest run"
            + (f" ({ctx.gate_run}, test split)" if ctx.gate_run else ""),
            gate_frame(ctx.gate, ctx.tax),
        ),
        *((t, readable_cells(df)) for t, df in ctx.extra_sections),
        ("Policy and wording changes", changes_frame(ctx.policy_changes, ctx.names, ctx.stale)),
    ]


def gate_basis(ctx: MonthContext) -> str:
    """The sentence beside the release gate: which decisions it is on (the ones the pipeline
    logged) and, when the run's outputs have scores, that the Thresholds page shows the same
    run's targets on decisions re-made from them; empty without a gate."""
    if not ctx.gate_run:
        return ""
    out = (
        f"Release gate on the decisions the pipeline logged ({ctx.gate_run}, test split): each "
        "output's own decision, as production would have shown it."
    )
    if ctx.gate_rescored:
        out += (
            " The Thresholds page shows this run's targets on decisions re-made from its scores "
            "at the thresholds in force or proposed; the two differ where a logged decision "
            "does not follow its score."
        )
    return out


def empty_note(ctx: MonthContext, title: str) -> str:
    """Why a section of the month's review has no rows, in words (never "(none)"): the
    release gate is on the newest run created by the month's end, so a run stored later
    (a month reviewed after the fact) does not count for it."""
    if title.startswith("Release gate"):
        return (
            f"No evaluation run was stored by the end of {ctx.month}: the release gate is on "
            "the newest run created by then. A run stored later counts for a later month's "
            "review."
        )
    if title == "Policy and wording changes":
        return (
            f"No threshold or wording version was proposed or signed in {ctx.month}, and none "
            "waits for sign-off."
        )
    return f"Nothing for {ctx.month}."


def _table_json(df: pd.DataFrame) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(df.to_json(orient="split", date_format="iso", index=False))
    return {"columns": data.get("columns", []), "data": data.get("data", [])}


def freeze_context(ctx: MonthContext) -> dict[str, Any]:
    """A closed review's record: the month's tables and charts as JSON (charts as their
    Vega-Lite specs with the data inline), so the review reads the same for good."""
    return {
        "frozen_at": utcnow().isoformat(),
        "gate_run": ctx.gate_run,
        "gate_rescored": ctx.gate_rescored,
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
        gate_rescored=bool(record.get("gate_rescored")),
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
        ".fail{color:#a00;font-weight:bold}.pass{color:#060}</style></head><body>",
        f"<h1>Monthly review {html.escape(view.month)}</h1>",
        f"<p>Status: {html.escape(view.status)}"
        + (
            f", closed by {html.escape(readable.person(view.closed_by, ctx.names))}"
            f" on {view.closed_at:%Y-%m-%d}"
            if view.closed_at
            else ""
        )
        + "</p>",
        f"<h2>Summary</h2><p>{html.escape(view.summary) or '—'}</p>",
    ]
    for title, df in report_sections(view, ctx):
        parts.append(f"<h2>{html.escape(title)}</h2>")
        if title.startswith("Release gate") and gate_basis(ctx):
            parts.append(f"<p>{html.escape(gate_basis(ctx))}</p>")
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
    the PNGs is most of the cost, paid only when the zip is downloaded. Every value from the
    data (names, titles, findings, summary, table cells) goes through the one Markdown
    escaper, so no name makes a link, an image or HTML in the file."""
    md = markdown_text
    closed = (
        f", closed by {md(readable.person(view.closed_by, ctx.names))} on {view.closed_at:%Y-%m-%d}"
        if view.closed_at
        else ""
    )
    lines = [
        f"# Monthly review {md(view.month)}",
        "",
        f"Status: {md(view.status)}{closed}",
        "",
        "## Summary",
        "",
        # each line of the summary its own paragraph line, every character shown as typed
        "  \n".join(md(line) for line in view.summary.splitlines()) if view.summary else "—",
        "",
    ]
    for title, df in report_sections(view, ctx):
        lines += [f"## {md(title)}", ""]
        if title.startswith("Release gate") and gate_basis(ctx):
            lines += [md(gate_basis(ctx)), ""]
        lines += [_table_md(df)]
    images: dict[str, bytes] = {}
    for i, (title, chart) in enumerate(ctx.charts, 1):
        name = f"chart-{i}.png"
        if render_images:
            images[name] = _png(chart)
        # the one image of the report is the chart's own file, its title escaped as alt text
        lines += [f"## {md(title)}", "", f"![{md(title)}]({name})", ""]
    return "\n".join(lines), images


def findings_frame(view: SessionView, names: dict[str, str] | None = None) -> pd.DataFrame:
    """The findings as the review page lists them (with ids and authors, unlike the report)."""
    return pd.DataFrame(
        [
            {
                "id": f.id,
                "severity": readable.humanize(f.severity),
                "finding": f.text,
                "links": links_text(f.links),
                "carried from": _carried(f.carried_from_id),
                "by": readable.person(f.created_by, names or {}),
            }
            for f in view.findings
        ],
        columns=["id", "severity", "finding", "links", "carried from", "by"],
    )


def validation_frame(view: SessionView, names: dict[str, str] | None = None) -> pd.DataFrame:
    """The stored validation result, one check per row, as people read it (rates as
    percentages with their counts, people as names)."""
    return validation.validation_rows(view.validation or {}, names or {})


def markdown_zip(view: SessionView, ctx: MonthContext) -> bytes:
    """The Markdown report with its PNG charts as one zip (rendered when downloaded)."""
    text, images = export_markdown(view, ctx)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"monthly-review-{view.month}.md", text)
        for name, data in images.items():
            z.writestr(name, data)
    return buf.getvalue()


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
                "week of": readable.when(a.week, with_time=False),
                "rule": readable.humanize(a.rule),
                "severity": readable.humanize(a.severity),
                "value": (
                    readable.percent(a.value)
                    if a.signal.endswith("_rate")
                    else readable.number(a.value)
                ),
                "message": a.message,
                "action": a.action,
            }
            for a in alerts
        ],
        columns=["week of", "rule", "severity", "value", "message", "action"],
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


def audit_hook(
    engine: Engine, tax: Taxonomy, month: str, first: dt.date, last: dt.date
) -> tuple[list[tuple[str, pd.DataFrame]], list[tuple[str, alt.TopLevelMixin]]]:
    from review.audits import display, estimates, plans

    rows = []
    shown = [
        p
        for p in plans.list_plans(engine)
        if first <= p.created_at.date() <= last or p.status != PlanStatus.closed
    ]
    # every plan's estimates from the same few statements, however many plans are open
    found = estimates.estimates_of(engine, [p.id for p in shown])
    for plan in shown:
        est = found[plan.id]
        if isinstance(est, InputError):
            continue
        for rate in est.rate_rows[:4]:
            rows.append(
                {
                    "batch": plan.name,
                    "status": readable.humanize(str(plan.status)),
                    "batch audited": f"{est.audited:,} of {est.sampled:,}",
                    **display.rate_cells(rate),
                }
            )
    return [("Audit batches and weighted estimates", pd.DataFrame(rows))], []


CONTEXT_HOOKS.extend([_monitoring_hook, audit_hook])
