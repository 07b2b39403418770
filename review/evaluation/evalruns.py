"""Evaluation runs: a pipeline's outputs on the labeled cases, imported or executed here.

Run outputs JSONL (one object per line)::

    {"case": "CASE-001", "decision": "answer", "score": 0.71, "text": "...",
     "cited_ids": ["POL-REFUND-MONTHLY@2"], "repeat": 0, "reason_code": null,
     "message_key": null, "ranking_mode": "vector", "versions": {"model": "m-2025-06"},
     "error": null}

``message_key`` (optional) is the refusal-wording key the text used (R1, R2, R3, C1, F1, E1);
runs compare it with the wording key each no-answer case expects.

``signals`` (optional) are the gate's inputs the pipeline decided on: ``{"ranking_mode",
"hits_after_filter", "top_score", "answerable", "ambiguous", "ungrounded", "topics",
"not_produced"}``, each optional. A dry run of a policy re-decides each output from them; an
output without them cannot be re-decided and counts as a failure there.

``error`` (optional) marks an infrastructure failure (the pipeline raised, timed out or
answered malformed); such rows are counted apart and never as answers.

A pipeline executed here also answers perturbed copies of every case's input, for the
metamorphic checks that need a re-run (see :func:`perturbations`): the visible documents that
are not decisive reordered, and a high-overlap distractor with no answer added. Each perturbed
answer is stored linked to the output of the same case and repeat.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from review.builder.family_checks import repeats_fragment, restricted_fragments
from review.cases.agreed import agreed_subquery as gold_subquery
from review.core import readable
from review.core.errors import InputError
from review.core.identity import Actor, Permission, require
from review.core.records import json_lines, read_record
from review.core.taxonomy import MessageKey, Taxonomy
from review.evaluation.claimcheck import contradicts
from review.policy.policy import OPTIONAL_SIGNALS
from review.wording.lint import lint
from storage import changes
from storage.db import one_of, read_session, run_write
from storage.models import (
    Adjudication,
    Case,
    CaseClaim,
    CaseDocument,
    CaseFamily,
    CaseSlice,
    Document,
    EvalOutput,
    EvalPerturbedOutput,
    EvalRun,
    Label,
)


class SignalsIn(BaseModel):
    """The gate's inputs for one output, as the pipeline logged them (each optional: None is a
    signal not logged). ``not_produced`` lists the optional signals the pipeline declares it
    does not produce (answerable, ambiguous, ungrounded): a re-decision skips their checks, as
    the policy's ``missing_signal.not_produced`` does. NaN and infinite scores are refused."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    ranking_mode: str | None = Field(default=None, max_length=40)
    hits_after_filter: int | None = Field(default=None, ge=0, le=2**31 - 1)
    top_score: float | None = Field(default=None, allow_inf_nan=False)
    answerable: bool | None = None
    ambiguous: bool | None = None
    ungrounded: bool | None = None
    topics: list[str] | None = Field(default=None, max_length=100)
    not_produced: list[str] = Field(default_factory=list, max_length=len(OPTIONAL_SIGNALS))

    @field_validator("not_produced")
    @classmethod
    def _declared(cls, v: list[str]) -> list[str]:
        unknown = sorted(set(v) - set(OPTIONAL_SIGNALS))
        if unknown:
            raise ValueError(
                f"{', '.join(unknown)}: only {', '.join(OPTIONAL_SIGNALS)} may be declared"
            )
        return v

    def stored(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class OutputIn(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    case: str = Field(min_length=1)
    decision: str | None = None
    score: float | None = None
    text: str = ""
    cited_ids: list[str] = Field(default_factory=list)
    repeat: int = Field(default=0, ge=0, le=2**31 - 1)  # what the database's integer holds
    reason_code: str | None = None
    #: the wording key (R1, R2, R3, C1, F1, E1, ...) the text used; None: not said
    message_key: MessageKey | None = None
    ranking_mode: str | None = None
    versions: dict[str, str] = Field(default_factory=dict)
    error: str | None = None
    #: the gate's inputs the pipeline decided on (None: not logged)
    signals: SignalsIn | None = None

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
    for n, _raw, text in json_lines(lines):
        item = read_record(text, OutputIn, f"{source}: line {n}")
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
class PerturbedIn:
    """A pipeline's answer to a perturbed input, for case ``case`` and repeat ``repeat``."""

    case: str
    repeat: int
    kind: str
    perturbation: dict[str, Any]
    output: OutputIn


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
    perturbed: Sequence[PerturbedIn] = (),
    created_at: dt.datetime | None = None,
) -> int:
    """Store a run and its outputs in one transaction; an unknown case or a duplicate
    (case, repeat) is refused with its line and nothing is written.

    ``perturbed`` answers (from :func:`execute`) are stored linked to the output of the same
    case and repeat. ``created_at`` dates a run made earlier (the demo's history)."""
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
        ids = dict(s.execute(select(Case.key, Case.id).where(one_of(s, Case.key, keys))).all())
        run = EvalRun(
            name=name,
            system_version=system_version.strip() or "unspecified",
            source=run_source,
            config=dict(config or {}),
            notes=notes,
            created_by=actor.email,
        )
        if created_at is not None:
            run.created_at = created_at
        s.add(run)
        s.flush()
        seen: dict[tuple[str, int], EvalOutput] = {}
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
            row = EvalOutput(
                run_id=run.id,
                case_id=ids[it.case],
                repeat=it.repeat,
                decision=None if it.error else it.decision,
                reason_code=it.reason_code,
                message_key=None if it.error else it.message_key,
                score=it.score,
                ranking_mode=it.ranking_mode,
                text=it.text,
                cited_doc_ids=list(it.cited_ids),
                infra_error=it.error,
                versions=dict(it.versions),
                signals=None if it.signals is None else it.signals.stored(),
            )
            seen[(it.case, it.repeat)] = row
            rows.append(row)
        s.add_all(rows)
        if perturbed:
            s.flush()
            extra = []
            for p in perturbed:
                base = seen.get((p.case, p.repeat))
                if base is None:
                    raise InputError(
                        f"a perturbed output names case {p.case} repeat {p.repeat}, "
                        "which has no output in the run"
                    )
                o = p.output
                extra.append(
                    EvalPerturbedOutput(
                        output_id=base.id,
                        kind=p.kind,
                        perturbation=dict(p.perturbation),
                        decision=None if o.error else o.decision,
                        reason_code=o.reason_code,
                        score=o.score,
                        text=o.text,
                        cited_doc_ids=list(o.cited_ids),
                        infra_error=o.error,
                    )
                )
            s.add_all(extra)
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
                "perturbed_outputs": len(perturbed),
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


def runs_frame(runs: list[RunRow], names: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The list of runs as the Runs page shows it: when as a date and time, who by name
    (when ``names`` is given; an import by a script keeps its tag)."""
    return pd.DataFrame(
        [
            {
                "run": r.name,
                "system version": r.system_version,
                "source": r.source,
                "outputs": r.outputs,
                "cases": r.cases,
                "infrastructure failures": r.infra_failures,
                "created": readable.when(r.created_at),
                "by": r.created_by
                if names is None or "@" not in r.created_by
                else readable.person(r.created_by, names),
            }
            for r in runs
        ]
    )


#: Columns of the case and its agreed label, read beside every output.
def _case_columns(gold: Any) -> tuple[Any, ...]:
    return (
        Case.key,
        Case.split,
        Case.category,
        Case.family_id,
        CaseFamily.key.label("family"),
        Case.evidence_state,
        Case.language,
        func.coalesce(gold.c.gold_decision, Case.expected_decision).label("gold"),
        Case.reason_codes.label("case_reasons"),
        Case.expected_decision,
        Case.expected_message,
        gold.c.gold_reasons,
    )


FRAME_COLUMNS = [
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
    "answer_ok",
    "slices",
    "citations_valid",
    "citations_support",
    "repeat",
    "family",
    "evidence_state",
    "language",
    "leaked",
    "cites_superseded",
    "expected_message",
    "message_key",
    "signals",
    "claim_after_refusal",
    "refusal_cites_distractor",
    "contradicts_claim",
    "retrieval_depth",
    "freshness",
]


def score_outputs(
    engine: Engine, items: Sequence[tuple[int, OutputIn]], source: str, tax: Taxonomy
) -> pd.DataFrame:
    """Outputs read from a file, joined to their cases and gold labels without storing them
    (for the CI release gate). Same columns as :func:`outputs_frame`."""
    gold = gold_subquery()
    keys = sorted({it.case for _, it in items})
    with read_session(engine) as s:
        cases = {
            r.key: r
            for r in s.execute(
                select(Case.id.label("case_id"), *_case_columns(gold))
                .outerjoin(CaseFamily, CaseFamily.id == Case.family_id)
                .outerjoin(gold, gold.c.case_id == Case.id)
                .where(one_of(s, Case.key, keys))
            )
        }
        rows = []
        for line, it in items:
            case = cases.get(it.case)
            if case is None:
                raise InputError(
                    f"{source}: line {line}: field case: {it.case!r} is not a case in the workbench"
                )
            rows.append(
                {
                    **case._asdict(),
                    "repeat": it.repeat,
                    "decision": None if it.error else it.decision,
                    "reason_code": it.reason_code,
                    "message_key": None if it.error else it.message_key,
                    "score": it.score,
                    "ranking_mode": it.ranking_mode,
                    "cited_doc_ids": list(it.cited_ids),
                    "infra_error": it.error,
                    "text": it.text,
                    "signals": None if it.signals is None else it.signals.stored(),
                }
            )
        return _frame(s, rows, tax)


def outputs_stamp(engine: Engine, run_id: int) -> tuple[Any, ...]:
    """A cache key for :func:`outputs_frame` of ``run_id``: it changes whenever what the frame
    reads changes. Outputs, labels, adjudications, document versions and families are only
    ever added or deleted (count and newest id move); a case edit bumps its version and
    replaces its documents and slices (the sum of versions and the newest id move). Only the
    run's cases are aggregated (the frame reads nothing of the others; a deleted case takes
    its outputs): counting every case and label took 0.47 s at 500,000 cases."""
    of_run = EvalOutput.run_id == run_id
    mine = select(EvalOutput.case_id).where(of_run)

    def count_max(model: Any, *where: Any) -> list[Any]:
        # count(*): SQLite counts rows unread only so (count(id) walked 200k labels, 40 ms)
        return [
            select(func.count()).select_from(model).where(*where),
            select(func.coalesce(func.max(model.id), 0)).where(*where),
        ]

    parts = [
        *count_max(EvalOutput, of_run),
        *count_max(Case, Case.id.in_(mine)),
        select(func.coalesce(func.sum(Case.version), 0)).where(Case.id.in_(mine)),
        *count_max(CaseDocument, CaseDocument.case_id.in_(mine)),
        select(func.count()).select_from(CaseSlice).where(CaseSlice.case_id.in_(mine)),
        *count_max(Document),
        *count_max(CaseFamily),
        *count_max(Label, Label.case_id.in_(mine)),
        *count_max(Adjudication, Adjudication.case_id.in_(mine)),
    ]
    with read_session(engine) as s:
        row = s.execute(select(*(p.scalar_subquery() for p in parts))).one()
    return (run_id, *(int(v or 0) for v in row))


def outputs_frame(engine: Engine, run_id: int, tax: Taxonomy) -> pd.DataFrame:
    """One row per output joined to its case and gold label (adjudication, else the case's
    expected decision), with ``answerable`` (gold decision answers) and ``answered``.

    ``family`` is the case's question family; ``leaked`` marks an output that cites a
    document forbidden to the case's identity or repeats restricted text from one;
    ``cites_superseded`` one that cites a document the case marks as superseded;
    ``citations_support`` an output citing at least one document, every one of them visible to
    the case (in the context sent) and one of its supporting (decisive or partial) documents;
    ``answer_ok`` an answer that is acceptable (CRAG +1): the case calls for this
    answer (a full answer on a partial case is not), it has text, and it cites one of the
    case's decisive documents when the case names any. An answer with no text is an
    infrastructure failure (``infra``); ``contradicts_claim`` marks an answer that states a
    figure a required claim contradicts (review.evaluation.claimcheck), which is not
    acceptable."""
    gold = gold_subquery()
    with read_session(engine) as s:
        rows = s.execute(
            select(
                EvalOutput.case_id,
                *_case_columns(gold),
                EvalOutput.repeat,
                EvalOutput.decision,
                EvalOutput.reason_code,
                EvalOutput.message_key,
                EvalOutput.score,
                EvalOutput.ranking_mode,
                EvalOutput.cited_doc_ids,
                EvalOutput.infra_error,
                EvalOutput.text,
                EvalOutput.signals,
            )
            .join(Case, Case.id == EvalOutput.case_id)
            .outerjoin(CaseFamily, CaseFamily.id == Case.family_id)
            .outerjoin(gold, gold.c.case_id == Case.id)
            .where(EvalOutput.run_id == run_id)
            .order_by(EvalOutput.case_id, EvalOutput.repeat)
        ).all()
        return _frame(s, [r._asdict() for r in rows], tax)


def _depth_bucket(n: int) -> str:
    return (
        "0 documents"
        if n == 0
        else "1 document"
        if n == 1
        else f"{min(n, 4)}{'+' if n >= 4 else ''} documents"
    )


def _freshness_bucket(today: dt.date, dates: list[dt.date] | None) -> str:
    """How old the newest decisive document is: within 90 days, within a year, older; or no
    dated decisive document."""
    if not dates:
        return "no dated decisive document"
    age = (today - max(dates)).days
    if age <= 90:
        return "decisive document under 90 days old"
    if age <= 365:
        return "decisive document 90 days to 1 year old"
    return "decisive document over 1 year old"


def _frame(s: Session, rows: list[dict[str, Any]], tax: Taxonomy) -> pd.DataFrame:
    """The scored frame of ``rows`` (one dict per output with the case columns): the columns
    described in :func:`outputs_frame`."""
    ids = sorted({r["case_id"] for r in rows})
    slices: dict[int, list[str]] = {}
    for cid, sl in s.execute(
        select(CaseSlice.case_id, CaseSlice.slice).where(one_of(s, CaseSlice.case_id, ids))
    ):
        slices.setdefault(cid, []).append(sl)
    visible: dict[int, set[str]] = {}
    forbidden: dict[int, set[str]] = {}
    superseded: dict[int, set[str]] = {}
    supporting: dict[int, set[str]] = {}
    decisive: dict[int, set[str]] = {}
    distractors: dict[int, set[str]] = {}
    depth: dict[int, int] = {}
    decisive_dates: dict[int, list[dt.date]] = {}
    by_role = {"distractor": distractors, "decisive": decisive}
    for cid, key, ver, vis, role, effective in s.execute(
        select(
            CaseDocument.case_id,
            Document.doc_key,
            Document.version,
            CaseDocument.visibility,
            CaseDocument.role,
            Document.effective_date,
        )
        .join(Document, Document.id == CaseDocument.document_id)
        .where(one_of(s, CaseDocument.case_id, ids))
    ):
        refs = {f"{key}@{ver}", key}
        if vis == "visible":
            depth[cid] = depth.get(cid, 0) + 1
            if role in by_role:
                by_role[role].setdefault(cid, set()).update(refs)
            if role == "decisive" and effective is not None:
                decisive_dates.setdefault(cid, []).append(effective)
            visible.setdefault(cid, set()).update(refs)
            if role == "superseded":
                superseded.setdefault(cid, set()).add(f"{key}@{ver}")
            if role in ("decisive", "partial"):
                supporting.setdefault(cid, set()).update(refs)
        else:
            forbidden.setdefault(cid, set()).update(refs)
    # bodies only for the cases that hide a document (to look for restricted text)
    bodies: dict[int, tuple[list[str], list[str]]] = {}
    for cid, vis, body in s.execute(
        select(CaseDocument.case_id, CaseDocument.visibility, Document.body)
        .join(Document, Document.id == CaseDocument.document_id)
        .where(one_of(s, CaseDocument.case_id, sorted(forbidden)))
    ):
        shown, hidden = bodies.setdefault(cid, ([], []))
        (shown if vis == "visible" else hidden).append(body)
    answering = tax.answering_decisions()
    df = pd.DataFrame(rows)
    if df.empty:
        return pd.DataFrame(columns=FRAME_COLUMNS)
    # the case's wording key applies while the gold decision is the one the case expects
    df["expected_message"] = df["expected_message"].where(
        df["gold"] == df["expected_decision"], None
    )
    df["gold_reasons"] = [
        g if isinstance(g, list) else c
        for g, c in zip(df["gold_reasons"], df["case_reasons"], strict=True)
    ]
    df["slices"] = [tuple(sorted(slices.get(c, []))) for c in df["case_id"]]
    df["cited_doc_ids"] = [list(c or []) for c in df["cited_doc_ids"]]
    # an answer with no text is an infrastructure failure, never an answer
    empty_answer = df["decision"].isin(answering) & (
        df["text"].fillna("").astype(str).str.strip() == ""
    )
    df["infra"] = df["infra_error"].notna() | empty_answer
    df["answerable"] = df["gold"].isin(answering)
    df["answered"] = df["decision"].isin(answering) & ~df["infra"]
    # Whether answering the case is acceptable at all (a gold answer exists): the threshold
    # sweeps rank on this. What a given answer says is judged by answer_ok below.
    df["acceptable"] = df["answerable"]
    df["citations_valid"] = [
        all(c in visible.get(cid, set()) for c in cited)
        for cid, cited in zip(df["case_id"], df["cited_doc_ids"], strict=True)
    ]
    df["citations_support"] = [
        bool(cited)
        and all(c in visible.get(cid, set()) and c in supporting.get(cid, set()) for c in cited)
        for cid, cited in zip(df["case_id"], df["cited_doc_ids"], strict=True)
    ]
    fits = (df["decision"] == df["gold"]) | (
        (df["decision"] == "partial") & (df["gold"] == "answer")
    )
    cites_decisive = [
        cid not in decisive or any(c in decisive[cid] for c in cited)
        for cid, cited in zip(df["case_id"], df["cited_doc_ids"], strict=True)
    ]
    # an answer stating a figure a required claim contradicts (the annual policy's "30 days"
    # where the claim says "14 days") is not acceptable, whatever it cites
    claims: dict[int, list[str]] = {}
    for cid, text in s.execute(
        select(CaseClaim.case_id, CaseClaim.text)
        .where(one_of(s, CaseClaim.case_id, ids))
        .order_by(CaseClaim.case_id, CaseClaim.position)
    ):
        claims.setdefault(cid, []).append(text)
    df["contradicts_claim"] = [
        bool(a) and contradicts(str(t or ""), claims.get(cid, []))
        for a, cid, t in zip(df["answered"], df["case_id"], df["text"], strict=True)
    ]
    df["answer_ok"] = (
        df["answered"]
        & df["answerable"]
        & fits
        & np.array(cites_decisive, dtype=bool)
        & ~df["contradicts_claim"].astype(bool)
    )
    # a refusal that still makes a substantive claim ("I cannot confirm this, but
    # ... 60 days") is an unsupported answer: the wording rule that finds them decides
    refused = df["decision"].notna() & ~df["decision"].isin(answering) & ~df["infra"]
    df["claim_after_refusal"] = [
        bool(r) and bool(lint(str(t or ""), rules=["claim_after_refusal"]))
        for r, t in zip(refused, df["text"], strict=True)
    ]

    # a refusal never cites a near-neighbour source (a distractor) as support
    df["refusal_cites_distractor"] = [
        bool(r) and any(c in distractors.get(cid, set()) for c in cited)
        for r, cid, cited in zip(refused, df["case_id"], df["cited_doc_ids"], strict=True)
    ]
    # retrieval depth: the documents the case's identity sees; freshness: the age of its
    # newest decisive document on the day the frame is read
    df["retrieval_depth"] = [_depth_bucket(depth.get(cid, 0)) for cid in df["case_id"]]
    today = dt.date.today()
    df["freshness"] = [_freshness_bucket(today, decisive_dates.get(cid)) for cid in df["case_id"]]
    # the slice by language: the question's language as the case states it
    df["language"] = df["language"].where(df["language"].notna(), "language not stated")

    def leaked(cid: int, cited: list[str] | None, text: str | None) -> bool:
        if cid not in forbidden:
            return False
        if any(c in forbidden[cid] for c in cited or []):
            return True
        shown, hidden = bodies.get(cid, ([], []))
        if cid not in fragments:  # each case's passages are cut into fragments once
            fragments[cid] = restricted_fragments(hidden)
        return repeats_fragment(text or "", fragments[cid], shown)

    fragments: dict[int, tuple[str, ...]] = {}

    df["leaked"] = [
        leaked(cid, cited, text)
        for cid, cited, text in zip(df["case_id"], df["cited_doc_ids"], df["text"], strict=True)
    ]
    df["cites_superseded"] = [
        any(c in superseded.get(cid, set()) for c in (cited or []))
        for cid, cited in zip(df["case_id"], df["cited_doc_ids"], strict=True)
    ]
    return df


PERTURBED_COLUMNS = [
    "case_id",
    "key",
    "family",
    "evidence_state",
    "gold",
    "repeat",
    "kind",
    "base_decision",
    "base_infra",
    "base_answered",
    "base_cited",
    "decision",
    "infra",
    "infra_error",
    "answered",
    "reason_code",
    "score",
    "cited_doc_ids",
    "text",
    "perturbation",
]


def perturbed_frame(engine: Engine, run_id: int, tax: Taxonomy) -> pd.DataFrame:
    """One row per perturbed answer of the run, beside the output it is compared with (same
    case and repeat): ``base_*`` columns are that output's, the rest the perturbed answer's."""
    gold = gold_subquery()
    with read_session(engine) as s:
        rows = s.execute(
            select(
                Case.id.label("case_id"),
                Case.key,
                CaseFamily.key.label("family"),
                Case.evidence_state,
                func.coalesce(gold.c.gold_decision, Case.expected_decision).label("gold"),
                EvalOutput.repeat,
                EvalPerturbedOutput.kind,
                EvalOutput.decision.label("base_decision"),
                EvalOutput.infra_error.label("base_error"),
                EvalOutput.cited_doc_ids.label("base_cited"),
                EvalPerturbedOutput.decision,
                EvalPerturbedOutput.infra_error,
                EvalPerturbedOutput.reason_code,
                EvalPerturbedOutput.score,
                EvalPerturbedOutput.cited_doc_ids,
                EvalPerturbedOutput.text,
                EvalPerturbedOutput.perturbation,
            )
            .join(EvalOutput, EvalOutput.id == EvalPerturbedOutput.output_id)
            .join(Case, Case.id == EvalOutput.case_id)
            .outerjoin(CaseFamily, CaseFamily.id == Case.family_id)
            .outerjoin(gold, gold.c.case_id == Case.id)
            .where(EvalOutput.run_id == run_id)
            .order_by(EvalOutput.case_id, EvalOutput.repeat, EvalPerturbedOutput.kind)
        ).all()
    if not rows:
        return pd.DataFrame(columns=PERTURBED_COLUMNS)
    answering = tax.answering_decisions()
    df = pd.DataFrame([r._asdict() for r in rows])
    df["base_infra"] = df.pop("base_error").notna()
    df["infra"] = df["infra_error"].notna()
    df["base_answered"] = df["base_decision"].isin(answering) & ~df["base_infra"]
    df["answered"] = df["decision"].isin(answering) & ~df["infra"]
    return df[PERTURBED_COLUMNS]


def family_history(
    engine: Engine, tax: Taxonomy, run_ids: Sequence[int] | None = None
) -> pd.DataFrame:
    """Every output on a case of a question family, over all runs (or ``run_ids``), in the
    runs' chronological order: the input of :func:`review.evaluation.runmetrics.family_drift`."""
    gold = gold_subquery()
    q = (
        select(
            EvalRun.id.label("run_id"),
            EvalRun.name.label("run"),
            EvalRun.created_at,
            CaseFamily.key.label("family"),
            Case.key,
            EvalOutput.repeat,
            func.coalesce(gold.c.gold_decision, Case.expected_decision).label("gold"),
            EvalOutput.decision,
            EvalOutput.infra_error,
        )
        .join(EvalRun, EvalRun.id == EvalOutput.run_id)
        .join(Case, Case.id == EvalOutput.case_id)
        .join(CaseFamily, CaseFamily.id == Case.family_id)
        .outerjoin(gold, gold.c.case_id == Case.id)
        .order_by(EvalRun.created_at, EvalRun.id, Case.key, EvalOutput.repeat)
    )
    with read_session(engine) as s:
        if run_ids is not None:
            q = q.where(one_of(s, EvalRun.id, run_ids))
        rows = s.execute(q).all()
    cols = ["run_id", "run", "created_at", "family", "key", "repeat", "gold", "decision"]
    if not rows:
        return pd.DataFrame(columns=[*cols, "infra", "answerable", "answered"])
    answering = tax.answering_decisions()
    df = pd.DataFrame([r._asdict() for r in rows])
    df["infra"] = df.pop("infra_error").notna()
    df["answerable"] = df["gold"].isin(answering)
    df["answered"] = df["decision"].isin(answering) & ~df["infra"]
    return df
