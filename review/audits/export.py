"""Export of an audit batch as JSON lines or CSV, restricted text masked without clearance."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import IO, Any

from sqlalchemy import Engine, select

from review.audits.plans import plan_row, stored_allocation, stored_counts
from review.audits.verdicts import VerdictView, current_verdicts
from review.audits.vocabulary import outcome
from review.core import clearance, csvsafe
from review.core.identity import Actor
from review.core.terms import ClaimVerdict
from storage.db import read_session
from storage.models import AuditItem, SamplingPlan, Trace

__all__ = ["export_csv", "export_jsonl"]


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
        "population": {c.stratum: c.count for c in stored_counts(plan)},
        "allocation": stored_allocation(plan),
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
            current = current_verdicts(s, [r.id for r in rows])
        if not rows:
            return
        for r in rows:
            hide = not clearance.may_see(actor, bool(r.restricted))
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
                "query": clearance.REDACTED if hide else r.query,
                "answer_text": clearance.REDACTED if hide else r.answer_text,
                "hidden": hide,
            }
            yield data, current.get(r.id, [])
        last = rows[-1].position


def _verdict_record(v: VerdictView, hide: bool) -> dict[str, Any]:
    return {
        "reviewer": v.reviewer,
        "verdict": v.verdict,
        "stages": list(v.stages),
        "notes": clearance.REDACTED if hide and v.notes else v.notes,
        "claims": [{**c, "text": clearance.REDACTED} if hide else dict(c) for c in v.claims],
        "promoted_case_id": v.promoted_case_id,
        "created_at": v.created_at.isoformat(),
    }


def export_jsonl(engine: Engine, actor: Actor, plan_id: int, out: IO[str]) -> int:
    """Write the batch as JSON Lines: the plan first, then one line per sampled trace with its
    current verdicts. Text of restricted traces only for users with clearance. Returns the
    number of items written."""
    with read_session(engine) as s:
        head = _plan_record(plan_row(s, plan_id))
    out.write(json.dumps(head, ensure_ascii=False, sort_keys=True) + "\n")
    n = 0
    for data, verdicts in _export_rows(engine, actor, plan_id):
        hide = bool(data.pop("hidden"))
        data["record"] = "item"
        data["plan"] = head["name"]
        data["outcome"] = outcome([v.verdict for v in verdicts])
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
        plan = plan_row(s, plan_id)
        head = _plan_record(plan)
    # queries, answers and notes are untrusted: a cell such as =HYPERLINK(...) is neutralised
    writer = csvsafe.DictWriter(out, fieldnames=CSV_COLUMNS)
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
                    claims_supported=sum(
                        c.get("verdict") == ClaimVerdict.supported for c in v.claims
                    ),
                    claims_total=len(v.claims),
                    promoted_case_id=v.promoted_case_id or "",
                    verdict_at=v.created_at.isoformat(),
                )
            writer.writerow(row)
            n += 1
    return n
