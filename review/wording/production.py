"""The production check of what the assistant actually said.

The production check lints the final texts of imported traces that did not simply answer
(decision other than ``answer``, plus answers that carry a reason code other than
``false_premise``, which is how a caveat answer is logged) with the wording in force, the
titles of the corpus's restricted documents and every document id. The scan streams traces in
id order in batches, lints each distinct text once, and keeps only compact arrays of the
offending traces (id, time, restricted flag, rule bits) in a per-process cache. Later calls
scan only traces added since; a change in the count of candidates, or in how many of them are
restricted, or in the wording or corpus terms, starts a fresh scan. Traces whose text was
rewritten in place (not something the importers do) are not re-linted until then.
Restricted traces are listed only for users with clearance; for everyone else the titles and
ids of restricted documents are masked in the texts they may see."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from sqlalchemy import Engine, case, func, select
from sqlalchemy import text as sql_text

from review.core import clearance, readable
from review.core.errors import InputError, PermissionDenied
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy
from review.wording.findings import RULES, Finding, excerpt, rule_title
from review.wording.lint import lint
from review.wording.terms import all_restricted_titles, corpus_terms
from review.wording.versions import in_force
from storage.db import one_of, read_session
from storage.models import (
    EMPTY_REFUSALS_WHERE,
    REFUSAL_DECISIONS_WHERE,
    REFUSAL_TEXTS_WHERE,
    Trace,
    TracePopulationGroup,
)

__all__ = [
    "MESSAGE_KEY_OF_DECISION",
    "OffendingTrace",
    "ProductionPage",
    "ProductionSummary",
    "TraceFinding",
    "candidate_population",
    "candidates_condition",
    "clear_production_cache",
    "message_key_for",
    "production_counts",
    "production_findings",
    "trace_findings",
    "unchecked_count",
    "weekly_violations",
    "weekly_violations_or_unchecked",
]


# ---------------------------------------------------------------------------------------------
# Production check
# ---------------------------------------------------------------------------------------------

MESSAGE_KEY_OF_DECISION: Mapping[str, str | None] = {
    "clarify": "F1",
    "escalate": "E1",
    "answer": "C1",  # an answer that is linted is a caveat answer
    "abstain": None,
    "partial": None,
}


RULE_BITS: Mapping[str, int] = {rule: 1 << i for i, rule in enumerate(RULES)}


_BATCH = 5000


_MEMO_LIMIT = 50_000


def message_key_for(decision: str | None) -> str | None:
    """The message key whose key-only rules apply to a trace's final text."""
    return MESSAGE_KEY_OF_DECISION.get(decision or "")


def candidates_condition() -> Any:
    """Traces whose final text is a refusal, follow-up, escalation, partial or caveat.

    The same condition, with the same inline constants, defines the partial index
    ``ix_traces_refusal_texts`` (storage.models), so the database counts candidates from that
    small index instead of reading every trace; a bound parameter would hide it."""
    return sql_text(REFUSAL_TEXTS_WHERE)


@dataclass(frozen=True)
class _LintContext:
    titles: tuple[str, ...]
    contacts: tuple[str, ...]
    doc_ids: tuple[str, ...]
    restricted_doc_ids: tuple[str, ...]
    version: int | None
    company_names: tuple[str, ...] = ()

    def key(self) -> str:
        parts: list[object] = [self.titles, self.contacts, self.doc_ids, self.restricted_doc_ids]
        if self.company_names:
            parts.append(self.company_names)
        payload = json.dumps(parts, ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _lint_context(engine: Engine) -> _LintContext:
    current = in_force(engine)
    terms = corpus_terms(engine)
    return _LintContext(
        all_restricted_titles(current.wording, terms),
        tuple(current.wording.allowed_contacts),
        terms.doc_ids,
        terms.restricted_doc_ids,
        current.version.number if current.version is not None else None,
        tuple(current.wording.company_names),
    )


def _lint_trace(ctx: _LintContext, text: str, key: str | None) -> list[Finding]:
    return lint(
        text,
        key=key,
        restricted_titles=ctx.titles,
        allowed_contacts=ctx.contacts,
        doc_ids=ctx.doc_ids,
        company_names=ctx.company_names,
    )


@dataclass
class _Scan:
    upto: int = 0
    checked: int = 0
    checked_restricted: int = 0
    ids: npt.NDArray[np.int64] = field(default_factory=lambda: np.empty(0, np.int64))
    at: npt.NDArray[np.float64] = field(default_factory=lambda: np.empty(0, np.float64))
    restricted: npt.NDArray[np.bool_] = field(default_factory=lambda: np.empty(0, np.bool_))
    masks: npt.NDArray[np.int64] = field(default_factory=lambda: np.empty(0, np.int64))


_SCANS: dict[tuple[str, str], _Scan] = {}


_SCAN_LOCK = threading.Lock()


def clear_production_cache() -> None:
    """Forget every cached production scan (tests; after bulk edits of trace texts)."""
    with _SCAN_LOCK:
        _SCANS.clear()


def candidate_population(engine: Engine) -> tuple[int, int, int]:
    """(candidates, restricted candidates, highest candidate trace id), in one statement (one
    snapshot). The counts are the population groups' traces of a refusal decision
    (storage.population_groups, kept by triggers) less the refusals without a text
    (``ix_traces_empty_refusals``): a count of ``ix_traces_refusal_texts`` read every
    refusal's entry, 0.6-1.0 s at ten million traces."""
    groups = TracePopulationGroup
    in_groups = sql_text(REFUSAL_DECISIONS_WHERE)
    restricted_n = case((groups.restricted.is_(True), groups.n), else_=0)
    empty = sql_text(EMPTY_REFUSALS_WHERE)
    hidden = case((Trace.restricted.is_(True), 1), else_=0)

    def scalar(column: Any, *where: Any) -> Any:
        return select(func.coalesce(column, 0)).where(*where).scalar_subquery()

    with read_session(engine) as s:
        row = s.execute(
            select(
                scalar(func.sum(groups.n), in_groups) - scalar(func.count(Trace.id), empty),
                scalar(func.sum(restricted_n), in_groups) - scalar(func.sum(hidden), empty),
                scalar(func.max(Trace.id), candidates_condition()),
            )
        ).one()
    return int(row[0]), int(row[1]), int(row[2])


def _extend(engine: Engine, scan: _Scan, ctx: _LintContext, upto: int) -> None:
    """Lint candidates with scan.upto < id <= upto, in id order, batch by batch."""
    memo: dict[tuple[str, str | None], int] = {}
    last = scan.upto
    ids: list[int] = []
    ats: list[float] = []
    flags: list[bool] = []
    masks: list[int] = []
    while True:
        with read_session(engine) as s:
            rows = s.execute(
                select(Trace.id, Trace.at, Trace.decision, Trace.answer_text, Trace.restricted)
                .where(candidates_condition(), Trace.id > last, Trace.id <= upto)
                .order_by(Trace.id)
                .limit(_BATCH)
            ).all()
        if not rows:
            break
        for pk, at, decision, text, restricted in rows:
            key = message_key_for(decision)
            memo_key = (str(text), key)
            mask = memo.get(memo_key)
            if mask is None:
                mask = 0
                for f in _lint_trace(ctx, str(text), key):
                    mask |= RULE_BITS[f.rule]
                if len(memo) >= _MEMO_LIMIT:
                    memo.clear()
                memo[memo_key] = mask
            scan.checked += 1
            scan.checked_restricted += int(bool(restricted))
            if mask:
                ids.append(int(pk))
                ats.append(at.timestamp())
                flags.append(bool(restricted))
                masks.append(mask)
        last = int(rows[-1][0])
    scan.upto = max(scan.upto, upto)
    if ids:
        scan.ids = np.concatenate([scan.ids, np.asarray(ids, np.int64)])
        scan.at = np.concatenate([scan.at, np.asarray(ats, np.float64)])
        scan.restricted = np.concatenate([scan.restricted, np.asarray(flags, np.bool_)])
        scan.masks = np.concatenate([scan.masks, np.asarray(masks, np.int64)])


def _scan(engine: Engine) -> tuple[_Scan, _LintContext]:
    ctx = _lint_context(engine)
    cache_key = (engine.url.render_as_string(hide_password=False), ctx.key())
    with _SCAN_LOCK:
        count, restricted, max_id = candidate_population(engine)
        scan = _SCANS.get(cache_key)
        if scan is None or max_id < scan.upto:
            scan = _Scan()
        if max_id > scan.upto:
            _extend(engine, scan, ctx, max_id)
        if scan.checked != count or scan.checked_restricted != restricted:
            scan = _Scan()  # traces were deleted or re-flagged: start again
            _extend(engine, scan, ctx, max_id)
        stale = [k for k in _SCANS if k[0] == cache_key[0] and k != cache_key]
        for k in stale:
            del _SCANS[k]
        _SCANS[cache_key] = scan
        return scan, ctx


def unchecked_count(engine: Engine) -> int:
    """How many refusal texts the next production check still has to lint (0 when the cached
    scan is up to date). Cheap: one SQL aggregate, no lint. Pages use it to ask before a long
    first scan (about 5,000 distinct texts a second)."""
    ctx = _lint_context(engine)
    cache_key = (engine.url.render_as_string(hide_password=False), ctx.key())
    count, restricted, max_id = candidate_population(engine)
    with _SCAN_LOCK:
        scan = _SCANS.get(cache_key)
    if scan is None or max_id < scan.upto or count < scan.checked:
        return count
    if restricted != scan.checked_restricted and max_id == scan.upto:
        return count
    return count - scan.checked


@dataclass(frozen=True)
class ProductionSummary:
    checked: int  # refusal texts the actor may see that were linted
    offending: int  # of those, texts with at least one finding
    hidden_restricted: int  # offending restricted traces hidden from an actor without clearance
    per_rule: dict[str, int]  # offending traces per rule (a trace counts once per rule)
    wording_version: int | None  # the wording version whose contacts were used (None: shipped)


@dataclass(frozen=True)
class TraceFinding:
    rule: str
    start: int
    end: int
    excerpt: str
    explanation: str


@dataclass(frozen=True)
class OffendingTrace:
    id: int
    trace_id: str
    at: dt.datetime
    decision: str | None
    reason_code: str | None
    key: str | None
    restricted: bool
    text: str  # restricted titles and ids masked for actors without clearance
    findings: tuple[TraceFinding, ...]
    masked: bool

    @property
    def rules(self) -> list[str]:
        return list(dict.fromkeys(f.rule for f in self.findings))


@dataclass(frozen=True)
class ProductionPage:
    summary: ProductionSummary
    total: int  # offending traces matching the filter
    page: int
    page_size: int
    rows: list[OffendingTrace]

    def frame(self, tax: Taxonomy | None = None) -> pd.DataFrame:
        """The page of offending traces as read: the decision by its taxonomy label (with
        ``tax``), the rules by their titles."""
        return pd.DataFrame(
            [
                {
                    "trace": r.trace_id,
                    "time": r.at,
                    "decision": (
                        readable.term(tax, "decisions", r.decision)
                        if tax is not None and r.decision
                        else r.decision or ""
                    ),
                    "message key": r.key or "",
                    "restricted": r.restricted,
                    "rules": "; ".join(rule_title(rule) for rule in r.rules),
                    "first finding": r.findings[0].excerpt if r.findings else "",
                }
                for r in self.rows
            ],
            columns=[
                "trace",
                "time",
                "decision",
                "message key",
                "restricted",
                "rules",
                "first finding",
            ],
        )


def _visible(scan: _Scan, actor: Actor) -> npt.NDArray[np.bool_]:
    if clearance.cleared(actor):
        return np.ones(len(scan.ids), np.bool_)
    return ~scan.restricted


def _summary(scan: _Scan, ctx: _LintContext, actor: Actor) -> ProductionSummary:
    vis = _visible(scan, actor)
    masks = scan.masks[vis]
    per_rule = {rule: int(np.count_nonzero(masks & bit)) for rule, bit in RULE_BITS.items()}
    checked = scan.checked if clearance.cleared(actor) else scan.checked - scan.checked_restricted
    return ProductionSummary(
        checked,
        int(vis.sum()),
        0 if clearance.cleared(actor) else int(scan.restricted.sum()),
        per_rule,
        ctx.version,
    )


def production_counts(engine: Engine, actor: Actor) -> ProductionSummary:
    """How many refusal texts were checked and how many trip each rule (what the actor may
    see; restricted traces count only for users with clearance)."""
    scan, ctx = _scan(engine)
    return _summary(scan, ctx, actor)


def weekly_violations(
    engine: Engine, actor: Actor, start: dt.date, end: dt.date
) -> pd.DataFrame | None:
    """Refusal texts that break a wording rule, per week (Monday, UTC) from ``start`` up to
    ``end`` (exclusive), with a column per rule: from the production check's scan, and only
    when that scan is up to date (None otherwise: it is run from the Wording page, since a
    first scan of a large trace table takes a while). Restricted traces count only for users
    with clearance."""
    found = weekly_violations_or_unchecked(engine, actor, start, end)
    return None if isinstance(found, int) else found


def weekly_violations_or_unchecked(
    engine: Engine, actor: Actor, start: dt.date, end: dt.date
) -> pd.DataFrame | int:
    """:func:`weekly_violations`, or instead of None how many refusal texts the production
    check still has to lint (:func:`unchecked_count`, which is also how the scan is known to
    be out of date): a page that shows one or the other counts the refusals once (an
    aggregate over every refusal, 0.1 s at a million traces)."""
    todo = unchecked_count(engine)
    if todo > 0:
        return todo
    scan, _ctx = _scan(engine)
    vis = _visible(scan, actor)
    at = scan.at[vis]
    masks = scan.masks[vis]
    day = (at // 86_400).astype(np.int64)  # days since 1970-01-01, a Thursday
    monday = day - (day + 3) % 7
    lo = (dt.date(start.year, start.month, start.day) - dt.date(1970, 1, 1)).days
    hi = (dt.date(end.year, end.month, end.day) - dt.date(1970, 1, 1)).days
    keep = (monday >= lo) & (monday < hi)
    weeks = [start + dt.timedelta(weeks=i) for i in range(max(0, (hi - lo + 6) // 7))]
    frame = pd.DataFrame({"week": weeks})
    index = (monday[keep] - lo) // 7
    frame["offending"] = np.bincount(index, minlength=len(weeks))[: len(weeks)]
    for rule, bit in RULE_BITS.items():
        hits = index[(masks[keep] & bit) != 0]
        frame[rule] = np.bincount(hits, minlength=len(weeks))[: len(weeks)]
    return frame


def _sensitive_spans(ctx: _LintContext, text: str) -> list[tuple[int, int]]:
    """Spans naming a restricted document (title or id), found with the lint's own matching."""
    with_terms = lint(
        text,
        restricted_titles=ctx.titles,
        doc_ids=ctx.restricted_doc_ids,
        rules=["leaked_internal"],
    )
    plain = {(f.start, f.end) for f in lint(text, rules=["leaked_internal"])}
    spans = sorted((f.start, f.end) for f in with_terms if (f.start, f.end) not in plain)
    merged: list[tuple[int, int]] = []
    for s, e in spans:
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(e, merged[-1][1]))
        else:
            merged.append((s, e))
    return merged


def _mask(text: str, spans: Sequence[tuple[int, int]]) -> str:
    out, pos = [], 0
    for s, e in spans:
        out.append(text[pos:s])
        out.append(clearance.REDACTED)
        pos = e
    out.append(text[pos:])
    return "".join(out)


def _offending(ctx: _LintContext, actor: Actor, row: Any) -> OffendingTrace:
    text = str(row.answer_text)
    key = message_key_for(row.decision)
    found = _lint_trace(ctx, text, key)
    spans = [] if clearance.cleared(actor) else _sensitive_spans(ctx, text)
    findings = []
    for f in found:
        hidden = any(f.start < e and s < f.end for s, e in spans)
        findings.append(
            TraceFinding(
                f.rule,
                f.start,
                f.end,
                clearance.REDACTED if hidden else excerpt(text, f),
                "Names a restricted document (hidden: seeing which one needs clearance)."
                if hidden
                else f.explanation,
            )
        )
    return OffendingTrace(
        int(row.id),
        str(row.trace_id),
        row.at,
        row.decision,
        row.reason_code,
        key,
        bool(row.restricted),
        _mask(text, spans) if spans else text,
        tuple(findings),
        bool(spans),
    )


def production_findings(
    engine: Engine,
    actor: Actor,
    page: int = 1,
    page_size: int = 25,
    *,
    rule: str | None = None,
) -> ProductionPage:
    """Offending traces, newest first, one page at a time, with their findings.

    ``rule`` keeps traces that trip that rule. Restricted traces are listed only for users
    with clearance; for others, titles and ids of restricted documents are masked.
    """
    if rule is not None and rule not in RULE_BITS:
        raise InputError(f"unknown wording rule {rule!r} (known: {', '.join(RULES)})")
    if page < 1 or page_size < 1:
        raise InputError("page and page size start at 1")
    scan, ctx = _scan(engine)
    summary = _summary(scan, ctx, actor)
    keep = _visible(scan, actor)
    if rule is not None:
        keep &= (scan.masks & RULE_BITS[rule]) != 0
    ids, at = scan.ids[keep], scan.at[keep]
    order = np.lexsort((-ids, -at))  # newest first, then highest id
    chosen = [int(i) for i in ids[order][(page - 1) * page_size : page * page_size]]
    rows: list[OffendingTrace] = []
    if chosen:
        with read_session(engine) as s:
            stmt = select(Trace).where(one_of(s, Trace.id, chosen))
            if not clearance.cleared(actor):
                stmt = stmt.where(Trace.restricted.is_(False))
            by_id = {t.id: t for t in s.scalars(stmt)}
            for pk in chosen:
                t = by_id.get(pk)
                if t is not None:
                    rows.append(_offending(ctx, actor, t))
    return ProductionPage(summary, len(ids), page, page_size, rows)


def trace_findings(engine: Engine, actor: Actor, trace_pk: int) -> OffendingTrace:
    """One trace's final text linted with the wording in force (for the audit's
    wording-violation verdict). Restricted traces need clearance."""
    with read_session(engine) as s:
        t = s.get(Trace, trace_pk)
        if t is None:
            raise InputError(f"trace {trace_pk} does not exist")
        if t.restricted and not clearance.cleared(actor):
            raise PermissionDenied("this trace is restricted: viewing it needs clearance")
        return _offending(_lint_context(engine), actor, t)
