"""Evaluation runs: a pipeline's outputs on the labeled cases, imported or executed here.

Run outputs JSONL (one object per line)::

    {"case": "CASE-001", "decision": "answer", "score": 0.71, "text": "...",
     "cited_ids": ["POL-REFUND-MONTHLY@2"], "repeat": 0, "reason_code": null,
     "ranking_mode": "vector", "versions": {"model": "m-2025-06"}, "error": null}

``error`` (optional) marks an infrastructure failure (the pipeline raised, timed out or
answered malformed); such rows are counted apart and never as answers.
"""

from __future__ import annotations

import concurrent.futures as cf
import datetime as dt
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from review.errors import InputError
from review.identity import Actor, Permission, require
from review.taxonomy import Taxonomy
from review.textcheck import NUL_PROBLEM, nul_field
from storage import changes
from storage.db import read_session, run_write
from storage.models import (
    Adjudication,
    Case,
    CaseDocument,
    CaseSlice,
    Document,
    EvalOutput,
    EvalRun,
)


class OutputIn(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    case: str = Field(min_length=1)
    decision: str | None = None
    score: float | None = None
    text: str = ""
    cited_ids: list[str] = Field(default_factory=list)
    repeat: int = Field(default=0, ge=0, le=2**31 - 1)  # what the database's integer holds
    reason_code: str | None = None
    ranking_mode: str | None = None
    versions: dict[str, str] = Field(default_factory=dict)
    error: str | None = None

    @field_validator("score", mode="before")
    @classmethod
    def _score(cls, v: Any) -> Any:
        if isinstance(v, str):
            try:
                return float(v)
            except ValueError:
                raise ValueError("must be a number") from None
        if isinstance(v, bool):
            raise ValueError("must be a number")
        return v


def iter_outputs(
    lines: Iterable[str], source: str, tax: Taxonomy
) -> Iterator[tuple[int, OutputIn]]:
    for n, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{source}: line {n}: not valid JSON ({exc.msg})") from None
        except RecursionError:
            raise InputError(f"{source}: line {n}: not valid JSON (nested too deeply)") from None
        except ValueError:  # an integer of more digits than Python converts
            raise InputError(
                f"{source}: line {n}: not valid JSON (a number too long to read)"
            ) from None
        if not isinstance(data, dict):
            raise InputError(f"{source}: line {n}: expected a JSON object")
        nul = nul_field(data)
        if nul is not None:
            raise InputError(f"{source}: line {n}: field {nul}: {NUL_PROBLEM}")
        try:
            item = OutputIn.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"]) or "(record)"
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                msg = "unknown field"
            elif err["type"] == "missing":
                msg = "required field is missing"
            raise InputError(f"{source}: line {n}: field {loc}: {msg}") from None
        if item.error is None:
            if item.decision is None:
                raise InputError(
                    f"{source}: line {n}: field decision: required unless error is set"
                )
            if item.decision not in tax.decisions:
                raise InputError(
                    f"{source}: line {n}: field decision: {item.decision!r} is "
                    f"not one of: {', '.join(tax.decisions)}"
                )
        if item.reason_code is not None and item.reason_code not in tax.reason_codes:
            raise InputError(
                f"{source}: line {n}: field reason_code: {item.reason_code!r} is "
                "not a reason code of the taxonomy"
            )
        yield n, item


@dataclass(frozen=True)
class RunRow:
    id: int
    name: str
    system_version: str
    source: str
    created_at: dt.datetime
    created_by: str
    outputs: int
    cases: int
    infra_failures: int
    notes: str


def import_run(
    engine: Engine,
    actor: Actor,
    name: str,
    system_version: str,
    items: Sequence[tuple[int, OutputIn]],
    source: str,
    *,
    run_source: str = "import",
    config: Mapping[str, Any] | None = None,
    notes: str = "",
) -> int:
    """Store a run and its outputs in one transaction; an unknown case or a duplicate
    (case, repeat) is refused with its line and nothing is written."""
    require(actor, Permission.run_evaluations)
    name = name.strip()
    if not name:
        raise InputError("give the run a name")
    if not items:
        raise InputError(f"{source}: no outputs in the file")

    def work(s: Session) -> int:
        if s.scalar(select(EvalRun.id).where(EvalRun.name == name)) is not None:
            raise InputError(f"a run named {name!r} already exists; choose another name")
        keys = {it.case for _, it in items}
        ids = dict(s.execute(select(Case.key, Case.id).where(Case.key.in_(keys))).all())
        run = EvalRun(
            name=name,
            system_version=system_version.strip() or "unspecified",
            source=run_source,
            config=dict(config or {}),
            notes=notes,
            created_by=actor.email,
        )
        s.add(run)
        s.flush()
        seen: set[tuple[str, int]] = set()
        rows = []
        for line, it in items:
            if it.case not in ids:
                raise InputError(
                    f"{source}: line {line}: field case: {it.case!r} is not a case in the workbench"
                )
            if (it.case, it.repeat) in seen:
                raise InputError(
                    f"{source}: line {line}: case {it.case} repeat {it.repeat} appears twice"
                )
            seen.add((it.case, it.repeat))
            rows.append(
                EvalOutput(
                    run_id=run.id,
                    case_id=ids[it.case],
                    repeat=it.repeat,
                    decision=None if it.error else it.decision,
                    reason_code=it.reason_code,
                    score=it.score,
                    ranking_mode=it.ranking_mode,
                    text=it.text,
                    cited_doc_ids=list(it.cited_ids),
                    infra_error=it.error,
                    versions=dict(it.versions),
                )
            )
        s.add_all(rows)
        changes.record(
            s,
            actor.email,
            "create",
            "eval_run",
            run.id,
            None,
            {
                "name": name,
                "system_version": system_version,
                "outputs": len(rows),
                "source": source,
            },
        )
        return run.id

    return run_write(engine, work)


def list_runs(engine: Engine) -> list[RunRow]:
    with read_session(engine) as s:
        stats = (
            select(
                EvalOutput.run_id,
                func.count(EvalOutput.id).label("n"),
                func.count(func.distinct(EvalOutput.case_id)).label("cases"),
                func.count(EvalOutput.infra_error).label("infra"),
            )
            .group_by(EvalOutput.run_id)
            .subquery()
        )
        rows = s.execute(
            select(EvalRun, stats.c.n, stats.c.cases, stats.c.infra)
            .outerjoin(stats, stats.c.run_id == EvalRun.id)
            .order_by(EvalRun.id.desc())
        ).all()
        return [
            RunRow(
                r.id,
                r.name,
                r.system_version,
                r.source,
                r.created_at,
                r.created_by,
                int(n or 0),
                int(c or 0),
                int(i or 0),
                r.notes,
            )
            for r, n, c, i in rows
        ]


def gold_subquery() -> Any:
    """Latest adjudication per case (the gold label when one exists)."""
    latest = (
        select(Adjudication.case_id, func.max(Adjudication.id).label("adj_id"))
        .group_by(Adjudication.case_id)
        .subquery()
    )
    return (
        select(
            latest.c.case_id,
            Adjudication.decision.label("gold_decision"),
            Adjudication.reason_codes.label("gold_reasons"),
        )
        .join(Adjudication, Adjudication.id == latest.c.adj_id)
        .subquery()
    )


def score_outputs(
    engine: Engine, items: Sequence[tuple[int, OutputIn]], source: str, tax: Taxonomy
) -> pd.DataFrame:
    """Outputs read from a file, joined to their cases and gold labels without storing them
    (for the CI release gate). Same columns as :func:`outputs_frame`."""
    gold = gold_subquery()
    keys = sorted({it.case for _, it in items})
    with read_session(engine) as s:
        rows = {
            r.key: r
            for r in s.execute(
                select(
                    Case.id,
                    Case.key,
                    Case.split,
                    func.coalesce(gold.c.gold_decision, Case.expected_decision).label("gold"),
                )
                .outerjoin(gold, gold.c.case_id == Case.id)
                .where(Case.key.in_(keys))
            )
        }
        slices: dict[int, list[str]] = {}
        ids = [r.id for r in rows.values()]
        for cid, sl in s.execute(
            select(CaseSlice.case_id, CaseSlice.slice).where(CaseSlice.case_id.in_(ids))
        ):
            slices.setdefault(cid, []).append(sl)
    answering = tax.answering_decisions()
    out = []
    for line, it in items:
        case = rows.get(it.case)
        if case is None:
            raise InputError(
                f"{source}: line {line}: field case: {it.case!r} is not a case in the workbench"
            )
        out.append(
            {
                "case_id": case.id,
                "key": case.key,
                "split": case.split,
                "gold": case.gold,
                "decision": it.decision,
                "score": it.score,
                "infra": it.error is not None,
                "answerable": case.gold in answering,
                "answered": it.error is None and it.decision in answering,
                "slices": tuple(sorted(slices.get(case.id, []))),
                "repeat": it.repeat,
            }
        )
    df = pd.DataFrame(out)
    df["acceptable"] = df["answerable"]
    return df


def outputs_frame(engine: Engine, run_id: int, tax: Taxonomy) -> pd.DataFrame:
    """One row per output joined to its case and gold label (adjudication, else the case's
    expected decision), with ``answerable`` (gold decision answers) and ``answered``."""
    gold = gold_subquery()
    with read_session(engine) as s:
        rows = s.execute(
            select(
                EvalOutput.case_id,
                Case.key,
                Case.split,
                Case.category,
                Case.family_id,
                Case.evidence_state,
                func.coalesce(gold.c.gold_decision, Case.expected_decision).label("gold"),
                Case.reason_codes.label("case_reasons"),
                gold.c.gold_reasons,
                EvalOutput.repeat,
                EvalOutput.decision,
                EvalOutput.reason_code,
                EvalOutput.score,
                EvalOutput.ranking_mode,
                EvalOutput.cited_doc_ids,
                EvalOutput.infra_error,
                EvalOutput.text,
            )
            .join(Case, Case.id == EvalOutput.case_id)
            .outerjoin(gold, gold.c.case_id == Case.id)
            .where(EvalOutput.run_id == run_id)
            .order_by(EvalOutput.case_id, EvalOutput.repeat)
        ).all()
        ids = sorted({r.case_id for r in rows})
        slices: dict[int, list[str]] = {}
        for cid, sl in s.execute(
            select(CaseSlice.case_id, CaseSlice.slice).where(CaseSlice.case_id.in_(ids))
        ):
            slices.setdefault(cid, []).append(sl)
        visible: dict[int, set[str]] = {}
        for cid, key, ver in s.execute(
            select(CaseDocument.case_id, Document.doc_key, Document.version)
            .join(Document, Document.id == CaseDocument.document_id)
            .where(CaseDocument.case_id.in_(ids), CaseDocument.visibility == "visible")
        ):
            visible.setdefault(cid, set()).update({f"{key}@{ver}", key})
    answering = tax.answering_decisions()
    df = pd.DataFrame([r._asdict() for r in rows])
    if df.empty:
        return pd.DataFrame(
            columns=[
                "case_id",
                "key",
                "split",
                "category",
                "gold",
                "decision",
                "score",
                "answerable",
                "answered",
                "infra",
                "acceptable",
                "slices",
                "citations_valid",
                "repeat",
            ]
        )
    df["gold_reasons"] = [
        g if isinstance(g, list) else c
        for g, c in zip(df["gold_reasons"], df["case_reasons"], strict=True)
    ]
    df["slices"] = [tuple(sorted(slices.get(c, []))) for c in df["case_id"]]
    df["infra"] = df["infra_error"].notna()
    df["answerable"] = df["gold"].isin(answering)
    df["answered"] = df["decision"].isin(answering) & ~df["infra"]
    # Without claim-level verdicts, answering is acceptable exactly when a gold answer exists.
    df["acceptable"] = df["answerable"]
    df["citations_valid"] = [
        all(c in visible.get(cid, set()) for c in cited)
        for cid, cited in zip(df["case_id"], df["cited_doc_ids"], strict=True)
    ]
    return df


# ---------------------------------------------------------------------------------------
# Executing a pipeline


@dataclass(frozen=True)
class PipelineDocument:
    doc_id: str
    version: int
    title: str
    body: str
    effective_date: dt.date | None
    authority: str
    jurisdiction: str
    access_scope: str


@dataclass(frozen=True)
class PipelineInput:
    case_key: str
    question: str
    documents: tuple[PipelineDocument, ...]
    identity: dict[str, Any]
    forbidden: tuple[PipelineDocument, ...] = field(default=())


Pipeline = Callable[[str, Sequence[PipelineDocument], dict[str, Any]], Mapping[str, Any]]


def pipeline_inputs(engine: Engine, status: str = "ready") -> Iterator[PipelineInput]:
    """The cases as a pipeline sees them: only the documents visible to the identity (the
    forbidden ones ride along separately so a deliberately broken pipeline can misuse them)."""
    last = 0
    while True:
        with read_session(engine) as s:
            batch = s.execute(
                select(Case.id, Case.key, Case.question, Case.identity_name, Case.identity_scopes)
                .where(Case.status == status, Case.id > last)
                .order_by(Case.id)
                .limit(200)
            ).all()
            if not batch:
                return
            ids = [b.id for b in batch]
            docs: dict[int, list[tuple[str, PipelineDocument]]] = {}
            for cid, vis, d in s.execute(
                select(CaseDocument.case_id, CaseDocument.visibility, Document)
                .join(Document, Document.id == CaseDocument.document_id)
                .where(CaseDocument.case_id.in_(ids))
                .order_by(CaseDocument.case_id, CaseDocument.position)
            ):
                docs.setdefault(cid, []).append(
                    (
                        vis,
                        PipelineDocument(
                            d.doc_key,
                            d.version,
                            d.title,
                            d.body,
                            d.effective_date,
                            d.authority,
                            d.jurisdiction,
                            d.access_scope,
                        ),
                    )
                )
        for b in batch:
            mine = docs.get(b.id, [])
            yield PipelineInput(
                b.key,
                b.question,
                tuple(d for v, d in mine if v == "visible"),
                {"name": b.identity_name, "scopes": list(b.identity_scopes)},
                tuple(d for v, d in mine if v != "visible"),
            )
        last = batch[-1].id


def check_response(resp: Any, tax: Taxonomy) -> OutputIn | str:
    """Validate a pipeline's answer; return the problem as text when it is malformed."""
    if not isinstance(resp, Mapping):
        return f"malformed response: expected a mapping, got {type(resp).__name__}"
    decision = resp.get("decision")
    if not isinstance(decision, str) or decision not in tax.decisions:
        return f"malformed response: decision {decision!r} is not one of {', '.join(tax.decisions)}"
    text = resp.get("text", "")
    cites = resp.get("citations", [])
    score = resp.get("score")
    if not isinstance(text, str):
        return "malformed response: text must be a string"
    if not isinstance(cites, list | tuple) or not all(isinstance(c, str) for c in cites):
        return "malformed response: citations must be a list of document ids"
    if score is not None and (isinstance(score, bool) or not isinstance(score, int | float)):
        return "malformed response: score must be a number or null"
    reason = resp.get("reason_code")
    if reason is not None and (not isinstance(reason, str) or reason not in tax.reason_codes):
        return f"malformed response: reason_code {reason!r} is not in the taxonomy"
    mode = resp.get("ranking_mode")
    if mode is not None and not isinstance(mode, str):
        return "malformed response: ranking_mode must be text or null"
    try:
        value = None if score is None else float(score)
    except OverflowError:
        return "malformed response: score is too large to be a number"
    return OutputIn(
        case="-",
        decision=str(decision),
        score=value,
        text=text,
        cited_ids=list(cites),
        reason_code=reason,
        ranking_mode=mode,
    )


def execute(
    engine: Engine,
    actor: Actor,
    pipeline: Pipeline,
    tax: Taxonomy,
    *,
    name: str,
    system_version: str,
    repeats: int = 1,
    timeout_s: float = 30.0,
    config: Mapping[str, Any] | None = None,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Run ``pipeline`` on every ready case ``repeats`` times and store the run.

    A call that raises, exceeds ``timeout_s`` or returns a malformed response is stored as an
    infrastructure failure for that case and repeat, never as an answer.
    """
    require(actor, Permission.run_evaluations)
    if repeats < 1:
        raise InputError("repeats must be at least 1")
    items: list[tuple[int, OutputIn]] = []
    pool = cf.ThreadPoolExecutor(max_workers=1)
    n = 0
    try:
        for inp in pipeline_inputs(engine):
            for rep in range(repeats):
                n += 1
                fut = pool.submit(pipeline, inp.question, inp.documents, inp.identity)
                try:
                    resp = fut.result(timeout=timeout_s)
                except cf.TimeoutError:
                    pool.shutdown(wait=False, cancel_futures=True)
                    pool = cf.ThreadPoolExecutor(max_workers=1)
                    items.append(
                        (
                            n,
                            OutputIn(
                                case=inp.case_key,
                                repeat=rep,
                                error=f"timed out after {timeout_s:g}s",
                            ),
                        )
                    )
                    continue
                except Exception as exc:  # the pipeline's own failure, recorded per case
                    items.append(
                        (
                            n,
                            OutputIn(
                                case=inp.case_key,
                                repeat=rep,
                                error=f"raised {type(exc).__name__}: {exc}",
                            ),
                        )
                    )
                    continue
                checked = check_response(resp, tax)
                if isinstance(checked, str):
                    items.append((n, OutputIn(case=inp.case_key, repeat=rep, error=checked)))
                else:
                    items.append(
                        (
                            n,
                            checked.model_copy(
                                update={
                                    "case": inp.case_key,
                                    "repeat": rep,
                                    "versions": {"pipeline": system_version},
                                }
                            ),
                        )
                    )
                if progress:
                    progress(n)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return import_run(
        engine, actor, name, system_version, items, "pipeline", run_source="pipeline", config=config
    )
