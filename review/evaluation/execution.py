"""Executing a pipeline here: every ready case (only the documents visible to its identity)
answered in a worker thread with a timeout, a call that raises, times out or answers
malformed recorded as an infrastructure failure, never as an answer.

Each repeat also answers perturbed copies of the case's input, for the metamorphic checks
that need a re-run (see :func:`perturbations`): the visible documents that are not decisive
reordered, and a high-overlap distractor with no answer added. Each perturbed answer is
stored linked to the output of the same case and repeat."""

from __future__ import annotations

import concurrent.futures as cf
import datetime as dt
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from sqlalchemy import ColumnElement, Engine, func, or_, select
from sqlalchemy.orm import Session

from review.cases import choices
from review.core.errors import InputError
from review.core.identity import Actor, Permission, require
from review.core.taxonomy import MESSAGE_KEY_PATTERN, Taxonomy
from review.core.terms import CaseStatus
from review.evaluation.evalruns import OutputIn, PerturbedIn, SignalsIn, import_run
from storage.db import one_of, read_session
from storage.models import (
    AuditLog,
    Case,
    CaseClaim,
    CaseDocument,
    CaseFamily,
    CaseSlice,
    Document,
)

_MESSAGE_KEY = re.compile(MESSAGE_KEY_PATTERN)

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

    @classmethod
    def of(cls, d: Document) -> PipelineDocument:
        """What a pipeline gets of a stored document version."""
        return cls(
            d.doc_key,
            d.version,
            d.title,
            d.body,
            d.effective_date,
            d.authority,
            d.jurisdiction,
            d.access_scope,
        )


@dataclass(frozen=True)
class PipelineInput:
    case_key: str
    question: str
    documents: tuple[PipelineDocument, ...]
    identity: dict[str, Any]
    forbidden: tuple[PipelineDocument, ...] = field(default=())
    # the case's role of each visible document (decisive, distractor, context, ...), in order
    roles: tuple[str, ...] = field(default=())


Pipeline = Callable[[str, Sequence[PipelineDocument], dict[str, Any]], Mapping[str, Any]]


@dataclass(frozen=True)
class CaseSubset:
    """The cases a run is made on (each field None: no restriction): a question family, a
    slice, a split, a category, an import batch, the cases that use a document (any version:
    a targeted regression after that document changed), a question language,
    the cases whose question or a required claim mentions a text (an entity or product name
    that changed: a targeted regression), or named case keys. All given ones apply."""

    family: str | None = None
    slice: str | None = None
    split: str | None = None
    category: str | None = None
    import_batch: str | None = None
    document: str | None = None
    language: str | None = None
    mentions: str | None = None
    keys: tuple[str, ...] | None = None

    def describe(self) -> dict[str, Any]:
        """What the run's configuration records (only the restrictions)."""
        out: dict[str, Any] = {}
        for name in (
            "family", "slice", "split", "category", "import_batch", "document", "language",
            "mentions",
        ):  # fmt: skip
            value = getattr(self, name)
            if value:
                out[name] = value
        if self.keys:
            out["keys"] = list(self.keys)
        return out

    def where(self, s: Session) -> list[ColumnElement[bool]]:
        """The conditions on ``Case`` (for a statement run in ``s``)."""
        conds: list[ColumnElement[bool]] = []
        if self.family:
            conds.append(
                Case.family_id.in_(select(CaseFamily.id).where(CaseFamily.key == self.family))
            )
        if self.slice:
            conds.append(
                Case.id.in_(select(CaseSlice.case_id).where(CaseSlice.slice == self.slice))
            )
        if self.split:
            conds.append(Case.split == self.split)
        if self.category:
            conds.append(Case.category == self.category)
        if self.import_batch:
            conds.append(Case.import_batch == self.import_batch)
        if self.document:
            conds.append(
                Case.id.in_(
                    select(CaseDocument.case_id)
                    .join(Document, Document.id == CaseDocument.document_id)
                    .where(Document.doc_key == self.document)
                )
            )
        if self.language:
            conds.append(Case.language == self.language)
        if self.mentions and self.mentions.strip():
            needle = self.mentions.strip().lower()
            conds.append(
                or_(
                    func.lower(Case.question).contains(needle, autoescape=True),
                    Case.id.in_(
                        select(CaseClaim.case_id).where(
                            func.lower(CaseClaim.text).contains(needle, autoescape=True)
                        )
                    ),
                )
            )
        if self.keys:
            conds.append(one_of(s, Case.key, self.keys))
        return conds


def subset_choices(engine: Engine, status: str = CaseStatus.ready) -> dict[str, list[str]]:
    """The values each subset field takes among the cases of ``status`` (for pickers; the
    families: the first :data:`review.cases.choices.PICKER_LIMIT` + 1)."""
    with read_session(engine) as s:
        return {
            "family": choices.family_keys(s, status, choices.PICKER_LIMIT),
            "slice": choices.slice_names(s, status),
            "split": choices.case_values(s, Case.split, status),
            "category": choices.case_values(s, Case.category, status),
            "import_batch": choices.case_values(s, Case.import_batch, status),
            "language": choices.case_values(s, Case.language, status),
            "document": choices.document_keys(s, status),
        }


def choices_stamp(engine: Engine) -> tuple[int, int, int]:
    """A cache key of :func:`subset_choices` (index look-ups): the cases (rows, newest id) and
    the newest audit-log row, which every edit of a case, its family, slices, documents or
    status through the services adds."""
    with read_session(engine) as s:
        n, top, logged = s.execute(
            select(
                select(func.count()).select_from(Case).scalar_subquery(),
                select(func.coalesce(func.max(Case.id), 0)).scalar_subquery(),
                select(func.coalesce(func.max(AuditLog.id), 0)).scalar_subquery(),
            )
        ).one()
    return int(n), int(top), int(logged)


def subset_size(engine: Engine, subset: CaseSubset, status: str = CaseStatus.ready) -> int:
    """How many cases of ``status`` the subset holds."""
    with read_session(engine) as s:
        return int(
            s.scalar(
                select(func.count())
                .select_from(Case)
                .where(Case.status == status, *subset.where(s))
            )
            or 0
        )


def pipeline_inputs(
    engine: Engine, status: str = CaseStatus.ready, subset: CaseSubset | None = None
) -> Iterator[PipelineInput]:
    """The cases (of ``subset``, else all) as a pipeline sees them: only the documents visible
    to the identity (the forbidden ones ride along separately so a deliberately broken pipeline
    can misuse them)."""
    last = 0
    subset = subset or CaseSubset()
    while True:
        with read_session(engine) as s:
            conds = subset.where(s)
            batch = s.execute(
                select(Case.id, Case.key, Case.question, Case.identity_name, Case.identity_scopes)
                .where(Case.status == status, Case.id > last, *conds)
                .order_by(Case.id)
                .limit(200)
            ).all()
            if not batch:
                return
            ids = [b.id for b in batch]
            docs: dict[int, list[tuple[str, str, PipelineDocument]]] = {}
            for cid, vis, role, d in s.execute(
                select(CaseDocument.case_id, CaseDocument.visibility, CaseDocument.role, Document)
                .join(Document, Document.id == CaseDocument.document_id)
                .where(CaseDocument.case_id.in_(ids))
                .order_by(CaseDocument.case_id, CaseDocument.position)
            ):
                docs.setdefault(cid, []).append(
                    (
                        vis,
                        role,
                        PipelineDocument.of(d),
                    )
                )
        for b in batch:
            mine = docs.get(b.id, [])
            yield PipelineInput(
                b.key,
                b.question,
                tuple(d for v, _r, d in mine if v == "visible"),
                {"name": b.identity_name, "scopes": list(b.identity_scopes)},
                tuple(d for v, _r, d in mine if v != "visible"),
                tuple(r for v, r, _d in mine if v == "visible"),
            )
        last = batch[-1].id


# ---------------------------------------------------------------------------------------
# Metamorphic perturbations: the same case, re-run on a changed input

PERTURBATION_KINDS = ("reorder", "distractor")


@dataclass(frozen=True)
class Perturbation:
    """A perturbed copy of a case's visible documents and what was changed (JSON-able)."""

    kind: str
    documents: tuple[PipelineDocument, ...]
    detail: dict[str, Any]


def doc_ref(d: PipelineDocument) -> str:
    return f"{d.doc_id}@{d.version}"


def reorder_irrelevant(inp: PipelineInput) -> Perturbation | None:
    """The visible documents that are not decisive, in reverse order and moved ahead of the
    decisive ones (or after them, when that alone changes nothing). None when no order of
    the irrelevant documents differs from the original (one document, or only decisive)."""
    docs = inp.documents
    roles = inp.roles if len(inp.roles) == len(docs) else ("",) * len(docs)
    decisive = tuple(d for d, r in zip(docs, roles, strict=True) if r == "decisive")
    others = tuple(d for d, r in zip(docs, roles, strict=True) if r != "decisive")
    was = [doc_ref(d) for d in docs]
    for order in (others[::-1] + decisive, decisive + others[::-1]):
        if [doc_ref(d) for d in order] != was:
            return Perturbation(
                "reorder",
                order,
                {"order": [doc_ref(d) for d in order], "was": was},
            )
    return None


def distractor_document(
    question: str, source: PipelineDocument | None, taken: Iterable[str] = ()
) -> PipelineDocument:
    """A document with high lexical overlap with the question and no answer, built only from
    the source document's title and the question (every sentence of the source is dropped):
    it repeats every query word and states nothing. Deterministic."""
    q = " ".join(question.split())
    if not q.endswith("?"):
        q = q.rstrip(".!") + "?"
    base = source.doc_id if source is not None else "CASE"
    used = set(taken)
    doc_id = f"{base}-OPEN-QUESTIONS"
    n = 2
    while doc_id in used:
        doc_id = f"{base}-OPEN-QUESTIONS-{n}"
        n += 1
    title = f"{source.title}: open questions" if source is not None else "Open questions"
    body = f"# {title}\n\nA reader asked: {q}\n\nNothing further is recorded here yet.\n"
    return PipelineDocument(
        doc_id,
        1,
        title,
        body,
        source.effective_date if source is not None else None,
        source.authority if source is not None else "note",
        source.jurisdiction if source is not None else "global",
        source.access_scope if source is not None else "public",
    )


def add_distractor(inp: PipelineInput) -> Perturbation:
    """The case's visible documents with a high-overlap distractor first. Its title comes
    from the first visible decisive document (else the first visible one)."""
    docs = inp.documents
    roles = inp.roles if len(inp.roles) == len(docs) else ("",) * len(docs)
    decisive = [d for d, r in zip(docs, roles, strict=True) if r == "decisive"]
    source = decisive[0] if decisive else (docs[0] if docs else None)
    added = distractor_document(inp.question, source, (d.doc_id for d in docs))
    return Perturbation(
        "distractor",
        (added, *docs),
        {
            "added": doc_ref(added),
            "source": doc_ref(source) if source is not None else None,
            "title": added.title,
            "body": added.body,
        },
    )


def perturbations(inp: PipelineInput) -> list[Perturbation]:
    """Every perturbation that applies to the case (the reorder needs two documents)."""
    out = [reorder_irrelevant(inp), add_distractor(inp)]
    return [p for p in out if p is not None]


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
    if tax.decisions[decision].answers and not text.strip():
        return f"malformed response: decision {decision} with no text"
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
    key = resp.get("message_key")
    if key is not None and (not isinstance(key, str) or not _MESSAGE_KEY.match(key)):
        return f"malformed response: message_key {key!r} is not a wording key"
    try:
        value = None if score is None else float(score)
    except OverflowError:
        return "malformed response: score is too large to be a number"
    raw_signals = resp.get("signals")
    signals: SignalsIn | None = None
    if raw_signals is not None:
        if not isinstance(raw_signals, Mapping):
            return "malformed response: signals must be a mapping or null"
        try:
            signals = SignalsIn.model_validate(dict(raw_signals))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            return f"malformed response: signals.{where}: {first['msg']}"
    return OutputIn(
        case="-",
        decision=str(decision),
        score=value,
        text=text,
        cited_ids=list(cites),
        reason_code=reason,
        message_key=key,
        ranking_mode=mode,
        signals=signals,
    )


class _Caller:
    """Calls the pipeline in a worker thread with a timeout; a call that raises, times out or
    answers malformed comes back as the problem's text."""

    def __init__(self, pipeline: Pipeline, tax: Taxonomy, timeout_s: float) -> None:
        self.pipeline = pipeline
        self.tax = tax
        self.timeout_s = timeout_s
        self.pool = cf.ThreadPoolExecutor(max_workers=1)

    def __call__(
        self, question: str, documents: Sequence[PipelineDocument], identity: dict[str, Any]
    ) -> OutputIn | str:
        fut = self.pool.submit(self.pipeline, question, documents, identity)
        try:
            resp = fut.result(timeout=self.timeout_s)
        except cf.TimeoutError:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = cf.ThreadPoolExecutor(max_workers=1)
            return f"timed out after {self.timeout_s:g}s"
        except Exception as exc:  # the pipeline's own failure, recorded per case
            return f"raised {type(exc).__name__}: {exc}"
        return check_response(resp, self.tax)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


def _output(got: OutputIn | str, case: str, repeat: int, system_version: str) -> OutputIn:
    if isinstance(got, str):
        return OutputIn(case=case, repeat=repeat, error=got)
    return got.model_copy(
        update={"case": case, "repeat": repeat, "versions": {"pipeline": system_version}}
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
    perturb: bool = True,
    created_at: dt.datetime | None = None,
    subset: CaseSubset | None = None,
) -> int:
    """Run ``pipeline`` on every ready case (of ``subset``, else all) ``repeats`` times and
    store the run; the run's configuration records the subset. An empty subset is refused.

    A call that raises, exceeds ``timeout_s`` or returns a malformed response is stored as an
    infrastructure failure for that case and repeat, never as an answer. With ``perturb``
    (the default) every repeat also answers each of the case's :func:`perturbations`.
    """
    require(actor, Permission.run_evaluations)
    if repeats < 1:
        raise InputError("repeats must be at least 1")
    subset = subset or CaseSubset()
    if subset.describe() and subset_size(engine, subset) == 0:
        raise InputError(f"no ready case matches {subset.describe()}: nothing was run")
    items: list[tuple[int, OutputIn]] = []
    perturbed: list[PerturbedIn] = []
    call = _Caller(pipeline, tax, timeout_s)
    n = 0
    try:
        for inp in pipeline_inputs(engine, subset=subset):
            changed = perturbations(inp) if perturb else []
            for rep in range(repeats):
                n += 1
                got = call(inp.question, inp.documents, inp.identity)
                items.append((n, _output(got, inp.case_key, rep, system_version)))
                for p in changed:
                    pg = call(inp.question, p.documents, inp.identity)
                    perturbed.append(
                        PerturbedIn(
                            inp.case_key,
                            rep,
                            p.kind,
                            p.detail,
                            _output(pg, inp.case_key, rep, system_version),
                        )
                    )
                if progress:
                    progress(n)
    finally:
        call.close()
    cfg = dict(config or {})
    cfg.setdefault("repeats", repeats)
    if subset.describe():
        cfg["subset"] = subset.describe()
    cfg.setdefault("perturbations", list(PERTURBATION_KINDS) if perturb else [])
    return import_run(
        engine,
        actor,
        name,
        system_version,
        items,
        "pipeline",
        run_source="pipeline",
        config=cfg,
        perturbed=perturbed,
        created_at=created_at,
    )
