"""What the month's record gathers (signals, alerts, audit estimates, validation, charts), frozen
into the record when the review closes, and the report exported as HTML or Markdown."""

from __future__ import annotations

import base64
import datetime as dt
import html
import io
import json
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import altair as alt
import pandas as pd
from sqlalchemy import Engine, select

from review.charts.charts import risk_coverage_chart
from review.core.errors import InputError
from review.core.escape import markdown_cell, markdown_text
from review.core.taxonomy import Taxonomy
from review.core.terms import PlanStatus, VersionStatus
from review.evaluation import evalruns
from review.monthly.records import SessionView, links_text, month_bounds
from review.policy import signoff
from review.thresholds import release, thresholds
from storage.db import read_session
from storage.models import ReviewSession, utcnow

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
    gate: list[release.GateRow] = []
    gate_run = None
    if runs:
        latest = runs[0]
        frame = evalruns.outputs_frame(engine, latest.id, tax)
        try:
            gate = release.release_gate(thresholds.in_force(engine).policy, frame, "test").rows
            gate_run = latest.name
        except InputError:
            gate = []
    changed = []
    for kind_name in ("no_answer_policy", "refusal_wording"):
        try:
            for v in signoff.versions(engine, kind_name):
                touched = [v.created_at.date(), *(sg.at.date() for sg in v.signatures)]
                if v.status == VersionStatus.pending or any(first <= d <= last for d in touched):
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
    cols = [markdown_cell(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += [
        "| " + " | ".join(markdown_cell(v) for v in row) + " |"
        for row in df.itertuples(index=False)
    ]
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
                        "links": links_text(f.links),
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
            release.gate_table(release.GateReport(ctx.gate)),
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
    the PNGs is most of the cost, paid only when the zip is downloaded. Every value from the
    data (names, titles, findings, summary, table cells) goes through the one Markdown
    escaper, so no name makes a link, an image or HTML in the file."""
    md = markdown_text
    closed = (
        f", closed by {md(view.closed_by or '')} on {view.closed_at:%Y-%m-%d}"
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
        lines += [f"## {md(title)}", "", _table_md(df)]
    images: dict[str, bytes] = {}
    for i, (title, chart) in enumerate(ctx.charts, 1):
        name = f"chart-{i}.png"
        if render_images:
            images[name] = _png(chart)
        # the one image of the report is the chart's own file, its title escaped as alt text
        lines += [f"## {md(title)}", "", f"![{md(title)}]({name})", ""]
    return "\n".join(lines), images


def findings_frame(view: SessionView) -> pd.DataFrame:
    """The findings as the review page lists them (with ids and authors, unlike the report)."""
    return pd.DataFrame(
        [
            {
                "id": f.id,
                "severity": f.severity,
                "finding": f.text,
                "links": links_text(f.links),
                "carried from": f.carried_from_id,
                "by": f.created_by,
            }
            for f in view.findings
        ],
        columns=["id", "severity", "finding", "links", "carried from", "by"],
    )


def validation_frame(view: SessionView) -> pd.DataFrame:
    """The stored validation result, one check per row, values as text."""
    return pd.DataFrame(
        [{"check": k, "value": str(v)} for k, v in (view.validation or {}).items()],
        columns=["check", "value"],
    )


def markdown_zip(view: SessionView, ctx: MonthContext) -> bytes:
    """The Markdown report with its PNG charts as one zip (rendered when downloaded)."""
    text, images = export_markdown(view, ctx)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"monthly-review-{view.month}.md", text)
        for name, data in images.items():
            z.writestr(name, data)
    return buf.getvalue()


def png_data_uri(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


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
                "action": a.action,
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
        if not (first <= plan.created_at.date() <= last) and plan.status == PlanStatus.closed:
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
