"""Closed audit batches and Phoenix sources for the push-back tests (issue 31 item 3).

``closed_batch`` samples every given trace into one plan, judges each item as the reviewers
would (through ``submit_verdict``) and closes the batch; ``phoenix_source`` and ``root_span``
write the rows the live core keeps for a source and a trace's root span.
``import_from_phoenix`` brings a Phoenix project's traces in with the workbench's Phoenix sync;
``phoenix_spans`` reads them through Phoenix's OTLP span search as the live core stages them,
and ``phoenix_annotations`` reads back what Phoenix holds on some spans."""

from __future__ import annotations

import datetime as dt
import json
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from review.audits import plans as audit_plans
from review.audits import verdicts
from review.audits.items import ClaimDraft
from review.audits.plans import PlanSpec
from review.audits.verdicts import VerdictIn
from review.core import database
from review.core.identity import Actor
from review.traces.live import phoenix, sources, staging
from storage.db import read_session
from storage.models import AuditItem, SourceSpan, Trace, TraceSource
from tests.helpers.actors import REVIEWER
from tests.helpers.audits import REFUND, add_trace
from tests.helpers.transact import write

#: A verdict for each kind of annotation: a note, two failing stages, judged claims.
UNSUPPORTED = VerdictIn(
    "unsupported_answer",
    stages=("retrieval_missed", "generator_ignored_signal"),
    notes="The 30-day window is for annual plans; <b>monthly</b> has 14 days.",
    claims=(
        ClaimDraft("Refunds are possible within 30 days.", ("c1",), "unsupported"),
        ClaimDraft("Contact support to start one.", ("c1",), "supported"),
    ),
)
CORRECT = VerdictIn("correct_refusal")


def closed_batch(
    engine: Engine,
    reviewers: Sequence[Actor],
    judged: Sequence[VerdictIn],
    name: str = "pushed batch",
) -> int:
    """Sample every trace in the database into plan ``name`` (each item judged by every
    reviewer), give the i-th item verdict ``judged[(i + r) % len(judged)]`` as the r-th
    reviewer, close the batch; its id."""
    with read_session(engine) as s:
        n = len(s.scalars(select(Trace.id)).all())
    spec = PlanSpec(name=name, total=n, overlap=len(reviewers))
    pid = write(engine, audit_plans.create_plan, reviewers[0], spec)
    write(engine, audit_plans.draw_plan, reviewers[0], pid)
    for i, item_id in enumerate(items(engine, pid)):
        for r, who in enumerate(reviewers):
            verdict = judged[(i + r) % len(judged)]
            write(engine, verdicts.submit_verdict, who, item_id, verdict, None)
    write(engine, audit_plans.close_plan, reviewers[0], pid)
    return pid


def items(engine: Engine, plan_id: int) -> list[int]:
    with read_session(engine) as s:
        return list(
            s.scalars(
                select(AuditItem.id)
                .where(AuditItem.plan_id == plan_id)
                .order_by(AuditItem.position)
            )
        )


def item_traces(engine: Engine, plan_id: int) -> dict[int, str]:
    """Item id -> trace id of a batch."""
    with read_session(engine) as s:
        return {
            int(i): str(t)
            for i, t in s.execute(
                select(AuditItem.id, Trace.trace_id)
                .join(Trace, Trace.id == AuditItem.trace_pk)
                .where(AuditItem.plan_id == plan_id)
            )
        }


def phoenix_source(
    engine: Engine, name: str, url: str, project: str = "default", kind: str = "phoenix"
) -> int:
    """A trace source row as the live core stores it; its id."""

    def work(s: Session) -> int:
        row = TraceSource(
            kind=kind,
            name=name,
            url=url,
            project=project,
            status="active",
            grace_seconds=30.0,
            state={},
            spans_read=0,
            traces_added=0,
            traces_rejected=0,
            late_spans=0,
            created_by="test",
        )
        s.add(row)
        s.flush()
        return row.id

    return database.write(engine, work)


def root_span(engine: Engine, source_id: int, trace_id: str, span_id: str) -> None:
    """The root span of ``trace_id`` as received from source ``source_id`` (imported)."""

    def work(s: Session) -> None:
        s.add(
            SourceSpan(
                source_id=source_id,
                trace_id=trace_id,
                span_id=span_id,
                parent_id=None,
                start_at=dt.datetime(2025, 6, 1, tzinfo=dt.UTC),
                state="imported",
            )
        )

    database.write(engine, work)


# --- reading Phoenix ------------------------------------------------------------------


def _get(url: str, token: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as r:
        return json.loads(r.read())


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(p.title() for p in rest)


def _otlp_json(value: Any) -> Any:
    """Phoenix's OTLP answer (snake_case keys) as OTLP/JSON (lowerCamelCase), Nones dropped."""
    if isinstance(value, dict):
        return {_camel(k): _otlp_json(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_otlp_json(v) for v in value]
    return value


def phoenix_spans(
    base_url: str, project: str, token: str | None = None
) -> list[staging.StagedSpan]:
    """Every span of ``project`` from Phoenix's OTLP span search, as the live core stages
    them (one OTLP/JSON resourceSpans entry per span)."""
    out: list[staging.StagedSpan] = []
    cursor: str | None = None
    while True:
        q = {"limit": "1000", **({"cursor": cursor} if cursor else {})}
        body = _get(
            f"{base_url}/v1/projects/{project}/spans/otlpv1?{urllib.parse.urlencode(q)}", token
        )
        for raw in body["data"]:
            span = _otlp_json(raw)
            out.append(
                staging.StagedSpan(
                    trace_id=span["traceId"],
                    span_id=span["spanId"],
                    parent_id=span.get("parentSpanId") or None,
                    start=dt.datetime.fromtimestamp(
                        int(span["startTimeUnixNano"]) / 1e9, tz=dt.UTC
                    ),
                    entry={
                        "resource": {"attributes": []},
                        "scopeSpans": [{"scope": {"name": "phoenix"}, "spans": [span]}],
                    },
                )
            )
        cursor = body.get("next_cursor")
        if not cursor:
            return out


def phoenix_annotations(
    base_url: str, project: str, span_ids: list[str], token: str | None = None
) -> list[dict[str, Any]]:
    """Every annotation Phoenix holds on these spans (all pages)."""
    out: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        q: list[tuple[str, str]] = [("span_ids", s) for s in span_ids] + [("limit", "1000")]
        if cursor:
            q.append(("cursor", cursor))
        body = _get(
            f"{base_url}/v1/projects/{project}/span_annotations?{urllib.parse.urlencode(q)}",
            token,
        )
        out += body["data"]
        cursor = body.get("next_cursor")
        if not cursor:
            return out


def import_from_phoenix(
    engine: Engine,
    admin: Actor,
    base_url: str,
    project: str,
    name: str,
    *,
    secret_name: str | None = None,
    token: str | None = None,
) -> int:
    """Add Phoenix source ``name`` and import every trace of ``project`` with the workbench's
    own sync (``review.traces.live.phoenix``; no grace period or overlap wait, so what Phoenix
    holds is imported now); the source's id. ``token`` is the secret the source names, as
    the test's environment holds it."""
    del token  # the sync reads the secret the source names
    src = sources.add_source(
        engine,
        admin,
        kind="phoenix",
        name=name,
        url=base_url,
        project=project,
        secret_name=secret_name,
    )
    done = phoenix.sync_phoenix(engine, admin, src.id, grace_seconds=0, overlap_seconds=0)
    assert done.error is None and not done.rejected, (done.error, done.reasons)
    assert done.imported > 0 and done.waiting_spans == 0, done
    return src.id


#: the traces of :func:`batch`
TRACES = [f"{i:032x}" for i in range(1, 5)]


def batch(engine: Engine, url: str) -> tuple[int, int]:
    """Four traces, three sent by a Phoenix source at ``url`` (one of them also by an OTLP
    receiver), one imported from a file; a closed batch judging them; (plan id, source id)."""
    for tid in TRACES:
        add_trace(engine, tid, chunks=[{**REFUND, "chunk_id": "c1"}])
    source = phoenix_source(engine, "phx", url, "rag")
    otlp = phoenix_source(engine, "receiver", "", "", kind="otlp")
    for i, tid in enumerate(TRACES[:3]):
        root_span(engine, source, tid, f"{i + 1:016x}")
    root_span(engine, otlp, TRACES[0], "00000000000000aa")
    pid = closed_batch(engine, [REVIEWER], [UNSUPPORTED, CORRECT])
    return pid, source


def expected_annotations(engine: Engine, pid: int) -> int:
    """Annotations the batch's traces from the Phoenix source carry: an unsupported verdict
    gives 1 + 2 stages + 2 claims, a correct refusal 1."""
    traces = item_traces(engine, pid)
    order = items(engine, pid)  # judged in queue order, alternately
    per = {item: (5 if i % 2 == 0 else 1) for i, item in enumerate(order)}
    return sum(n for item, n in per.items() if traces[item] in TRACES[:3])
