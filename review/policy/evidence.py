"""The evidence gate (docs/evidence-gate.md): may an answer leave the system?

Six predicates over the evidence for one question, each evaluated on its own and never blended
into one number:

- **answer-bearing evidence**: at least one passage supports a required claim;
- **claim coverage**: the share of required claims some passage supports reaches the policy's
  ``required_coverage`` (1.0: every required part of the question);
- **support strength**: every covered claim has a passage whose ``support_score`` reaches
  ``min_support``;
- **source policy**: every covered claim has a supporting passage the user and task may use
  (``allowed``);
- **freshness**: every covered claim has a current supporting passage: not superseded (when
  the policy counts superseded versions as stale), in force on ``as_of`` and no older than the
  age limit that applies to it: the most specific of the policy's ``freshness`` rules for the
  claim's ``kind`` and the passage's ``category``, else ``max_age_days`` (see
  :mod:`review.policy.freshness`; a claim without a kind falls back to the source's rule or
  the global limit). ``stale_evidence`` says, per claim, why the passages the user may see
  are not current, naming the rule that applied;
- **agreement**: no more than ``max_contradictions`` unresolved contradictions. Every listed
  pair with an answer-bearing side counts, whether the other side supports a claim or only
  refutes one, and whether or not the user may read it: a source hidden from the asker that
  contradicts the answer still blocks it. The one precedence rule the gate knows is
  supersession: when the policy counts superseded versions as stale, a pair with a superseded
  side is settled (the side still in force controls). A pair where neither side is
  answer-bearing does not concern the question; a pair listed twice counts once.

An answer is authorised only when every predicate holds *and* every covered claim has one
passage that is at once allowed, current and strong enough (two half-good passages do not make
a good one): a claim whose usable passages run out at one of those filters adds that filter's
reason code. The state lists every failed predicate's reason code (taxonomy codes
``no_answer_bearing_evidence``, ``required_claim_not_covered``, ``support_below_threshold``,
``source_not_allowed``, ``evidence_stale``, ``conflicting_evidence``) in that order.

Fail closed: a signal the gate needs and did not get (no required claims; a supporting
passage's ``support_score`` missing, NaN, infinite or outside 0..1; its ``allowed``,
``superseded`` or ``effective_date`` missing, the date when the age limit that applies to it
has a maximum or ``as_of`` is given; ``as_of`` missing when such a limit needs it; under
a policy that counts superseded versions as stale, ``superseded`` missing on any passage of a
pair with an answer-bearing side, since without it the gate cannot tell whether supersession
settles the pair) makes the state the non-answer the policy names (``on_missing_signal``:
abstain or escalate) with reason code ``signal_missing`` and the fields named in
``missing_signals``. A passage that only refutes needs no ``allowed``: it blocks whether or not
the user may read it, and one whose access was not logged is never named (see below). A
malformed input (wrong types, unknown fields or ids) is not a state at all: :func:`parse_input`
refuses it naming the field.

Restricted content: no field of a state carries the id, source or text of a passage the user
may not see (``allowed`` false, or not logged: unknown access is treated as no access). Such a
passage is never listed as support; a next step about a conflict names only the passages the
user may see and never says that another source exists (a refusal must not reveal that a
restricted document exists); and a generator's draft that
names or quotes such a passage (a string that no passage the user may see also holds) is not
released: the state abstains with ``source_not_allowed``. Field paths in ``missing_signals``
locate a passage by its position only.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from review.core.errors import InputError
from review.core.records import JsonProblem, json_lines, parse_json, validate_record
from review.policy.policy import SIGNAL_MISSING, EvidenceGatePolicy, NoAnswerPolicy

__all__ = [
    "PREDICATES",
    "REASON_OF_PREDICATE",
    "EvidenceInput",
    "EvidenceState",
    "decide_evidence",
    "gate_policy",
    "parse_input",
    "read_inputs",
]

#: The predicates, in the order they are evaluated and their codes are listed.
PREDICATES: Final = (
    "answer_bearing_evidence",
    "claim_coverage",
    "support_strength",
    "source_policy",
    "freshness",
    "agreement",
)
REASON_OF_PREDICATE: Final[dict[str, str]] = {
    "answer_bearing_evidence": "no_answer_bearing_evidence",
    "claim_coverage": "required_claim_not_covered",
    "support_strength": "support_below_threshold",
    "source_policy": "source_not_allowed",
    "freshness": "evidence_stale",
    "agreement": "conflicting_evidence",
}
#: What to do next, per reason; the first reason of a state (in this order) sets next_step.
NEXT_STEP: Final[dict[str, str]] = {
    SIGNAL_MISSING: "Do not answer: the gate lacked {missing}. Fix the pipeline so it logs "
    "them, then ask again.",
    "source_not_allowed": "Tell the user the allowed sources do not answer this, without "
    "naming or quoting the restricted source; route them to someone with access.",
    "conflicting_evidence": "Show the conflicting sources ({conflicts}) and ask the source "
    "owner which one controls, or apply a documented precedence rule.",
    "evidence_stale": "Ask for a current source: no current passage supports {claims}.",
    "no_answer_bearing_evidence": "Say the allowed sources do not contain this, and suggest "
    "widening retrieval or asking the source owner.",
    "required_claim_not_covered": "Say which part is supported and which is missing "
    "({missing_claims}); do not let the partial result trigger an action.",
    "support_below_threshold": "Say the evidence is too weak to answer; check retrieval or "
    "the verifier for {claims}.",
}
#: The conflict step when a side of a conflict may not be shown to the user: the sources the
#: user may see are named, the others never named, counted, quoted or said to exist (a refusal
#: must not reveal that a restricted document exists).
CONFLICT_PARTLY_HIDDEN: Final = (
    "Do not answer: the sources do not agree on this. Show the user only the sources they may "
    "see ({conflicts}) and say the allowed sources do not settle it, without saying that any "
    "other source exists; ask the source owner which one controls, or apply a documented "
    "precedence rule."
)
CONFLICT_HIDDEN: Final = (
    "Do not answer: the sources do not agree on this. Say the allowed sources do not settle "
    "it, without naming, quoting or counting any source the user may not see; ask the source "
    "owner which one controls, or apply a documented precedence rule."
)
#: The step when every predicate held but the generator's draft names or quotes a source the
#: user may not see.
DRAFT_NAMES_HIDDEN: Final = (
    "Do not send the draft answer: it names or quotes a source the user may not see. Answer "
    "again from the supporting passages ({supporting}) only."
)

MAX_CLAIMS: Final = 200
MAX_PASSAGES: Final = 2_000
MAX_TEXT: Final = 100_000
MAX_ID: Final = 200
MAX_LINE_BYTES: Final = 10 * 1024 * 1024

Id = Annotated[str, Field(min_length=1, max_length=MAX_ID)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Claim(_Strict):
    id: Id
    text: str = Field(default="", max_length=MAX_TEXT)
    #: what kind of fact the claim is (``historical``, ``current_price``): picks the policy's
    #: freshness rule; None: the source's rule or the global max_age_days applies
    kind: str | None = Field(default=None, min_length=1, max_length=MAX_ID)


def _date(value: Any) -> Any:
    if value is None or isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            raise ValueError(f"write the date as YYYY-MM-DD (got {value[:40]!r})") from None
    raise ValueError("write the date as YYYY-MM-DD text")


class PassageIn(_Strict):
    """One retrieved passage; ``support_score`` etc. may be null (not logged)."""

    id: Id
    source: str = Field(default="", max_length=MAX_ID * 5)
    text: str = Field(default="", max_length=MAX_TEXT)
    supports: list[Id] = Field(default_factory=list, max_length=MAX_CLAIMS)
    support_score: float | None = Field(default=None, allow_inf_nan=True)
    allowed: bool | None = None
    effective_date: dt.date | None = Field(default=None, strict=False)
    superseded: bool | None = None
    #: the source's category (for a case's documents, the authority): picks the policy's
    #: freshness rule for the source; None: the claim's rule or the global max_age_days
    category: str | None = Field(default=None, min_length=1, max_length=MAX_ID)

    _read_date = field_validator("effective_date", mode="before")(_date)

    @field_validator("support_score", mode="before")
    @classmethod
    def _number(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("expected a number from 0 to 1, or null")
        if isinstance(value, int):
            return float(value)
        return value


class EvidenceInput(_Strict):
    """One line of ``workbench decide``."""

    id: Id
    question: str = Field(min_length=1, max_length=MAX_TEXT)
    required_claims: list[Claim] = Field(max_length=MAX_CLAIMS)
    passages: list[PassageIn] = Field(max_length=MAX_PASSAGES)
    contradictions: list[list[Id]] = Field(default_factory=list, max_length=MAX_PASSAGES)
    as_of: dt.date | None = Field(default=None, strict=False)
    answer: str | None = Field(default=None, max_length=MAX_TEXT)  # the generator's draft

    _read_date = field_validator("as_of", mode="before")(_date)


@dataclass(frozen=True)
class EvidenceState:
    """The gate's output, plus which rule decided and how each predicate came out."""

    id: str
    status: Literal["answer", "abstain", "escalate"]
    answer: str
    supporting_passage_ids: list[str]
    missing_claims: list[str]
    reason_codes: list[str]
    next_step: str
    rule: str  # "all_predicates_hold", a predicate's name, or "signal_missing"
    predicates: dict[str, str] = field(default_factory=dict)  # name -> pass, fail, not_evaluated
    missing_signals: list[str] = field(default_factory=list)
    #: claim id -> why no passage the user may use is current for it, naming the freshness
    #: rule that applied (only for the claims the freshness predicate failed on)
    stale_evidence: dict[str, str] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status,
            "answer": self.answer,
            "supporting_passage_ids": self.supporting_passage_ids,
            "missing_claims": self.missing_claims,
            "reason_codes": self.reason_codes,
            "next_step": self.next_step,
            "rule": self.rule,
            "predicates": self.predicates,
            "missing_signals": self.missing_signals,
            "stale_evidence": self.stale_evidence,
        }


# Reading input ------------------------------------------------------------------------------


def _structure_problems(inp: EvidenceInput) -> list[str]:
    """Ids that repeat or point nowhere (a malformed input, not a missing signal)."""
    problems: list[str] = []
    claims = [c.id for c in inp.required_claims]
    for i, cid in enumerate(claims):
        if claims.index(cid) != i:
            problems.append(f"required_claims.{i}.id: {cid!r} is listed twice")
    passage_ids = [p.id for p in inp.passages]
    for i, pid in enumerate(passage_ids):
        if passage_ids.index(pid) != i:
            problems.append(f"passages.{i}.id: {pid!r} is listed twice")
    known_claims = set(claims)
    for i, p in enumerate(inp.passages):
        for j, cid in enumerate(p.supports):
            if cid not in known_claims:
                problems.append(
                    f"passages.{i}.supports.{j}: {cid!r} is not one of the required_claims"
                )
    known = set(passage_ids)
    for i, pair in enumerate(inp.contradictions):
        if len(pair) != 2:
            problems.append(f"contradictions.{i}: expected a pair of passage ids")
            continue
        for j, pid in enumerate(pair):
            if pid not in known:
                problems.append(f"contradictions.{i}.{j}: {pid!r} is not one of the passages")
        if pair[0] == pair[1]:
            problems.append(f"contradictions.{i}: a passage cannot contradict itself")
    return problems


def parse_input(data: Any, where: str = "input") -> EvidenceInput:
    """A decoded JSON value as gate input; InputError ``where: field F: ...`` naming the first
    wrong field."""
    inp = validate_record(EvidenceInput, data, where)
    problems = _structure_problems(inp)
    if problems:
        fld, _, msg = problems[0].partition(": ")
        raise InputError(f"{where}: field {fld}: {msg}")
    return inp


def read_inputs(lines: Iterable[str], source: str) -> Iterable[tuple[int, EvidenceInput]]:
    """(line number, input) for each non-blank line; InputError ``source: line N: field F:``
    for the first malformed line (nothing after it is read)."""
    for n, line, text in json_lines(lines):
        where = f"{source}: line {n}"
        if len(line) > MAX_LINE_BYTES:
            raise InputError(f"{where}: longer than {MAX_LINE_BYTES // (1024 * 1024)} MB")
        try:
            data = parse_json(text)
        except JsonProblem as exc:
            raise exc.where(where) from None
        yield n, parse_input(data, where)


# Deciding -----------------------------------------------------------------------------------


def gate_policy(policy: NoAnswerPolicy) -> EvidenceGatePolicy:
    """The policy's ``evidence_gate`` section; InputError when the policy has none (the gate's
    thresholds come from the signed policy, never from code)."""
    if policy.evidence_gate is None:
        raise InputError(
            f"no-answer policy version {policy.version} has no evidence_gate section: the "
            "evidence gate's thresholds (min_support, required_coverage, max_age_days, "
            "superseded, max_contradictions, on_missing_signal) must be set in the policy"
        )
    return policy.evidence_gate


def _score_problem(score: float | None) -> str | None:
    if score is None:
        return "not logged"
    if math.isnan(score):
        return "NaN"
    if math.isinf(score):
        return "infinite"
    if not 0.0 <= score <= 1.0:
        return f"{score:g} is outside 0..1"
    return None


def _missing_signals(inp: EvidenceInput, g: EvidenceGatePolicy) -> dict[str, str]:
    """Every signal the gate needs and lacks, by field path."""
    found: dict[str, str] = {}
    if not inp.required_claims:
        found["required_claims"] = "empty: the question's required claims were not defined"
    kinds = {c.id: c.kind for c in inp.required_claims}
    for i, p in enumerate(inp.passages):
        supported = [c for c in p.supports if c in kinds]
        if not supported:
            continue  # a passage that supports nothing required is not evidence
        limits = [g.limit_for(kinds[c], p.category) for c in supported]
        dated = any(limit.max_age_days is not None for limit in limits)
        problem = _score_problem(p.support_score)
        if problem:
            found[f"passages.{i}.support_score"] = problem
        if p.allowed is None:
            found[f"passages.{i}.allowed"] = "not logged"
        if p.superseded is None and g.superseded == "stale":
            found[f"passages.{i}.superseded"] = "not logged"
        if p.effective_date is None and (dated or inp.as_of is not None):
            found[f"passages.{i}.effective_date"] = "not logged"
        if inp.as_of is None and dated:
            rule = next(x.rule for x in limits if x.max_age_days is not None)
            found["as_of"] = (
                f"not logged (the age limit ({rule}) needs the date the question is about)"
            )
    if g.superseded == "stale":
        # Whether supersession settles a contradiction depends on both sides' flag, so a
        # passage that only refutes a supporting one must log it too.
        index = {p.id: i for i, p in enumerate(inp.passages)}
        bearing = _bearing_ids(inp)
        for pair in inp.contradictions:
            if not bearing.intersection(pair):
                continue
            for pid in pair:
                i = index[pid]
                key = f"passages.{i}.superseded"
                if inp.passages[i].superseded is None and key not in found:
                    found[key] = "not logged (it is part of a contradiction with evidence)"
    return found


def _bearing_ids(inp: EvidenceInput) -> set[str]:
    """Ids of the passages that support a required claim."""
    claims = {c.id for c in inp.required_claims}
    return {p.id for p in inp.passages if claims.intersection(p.supports)}


def _unresolved(inp: EvidenceInput, g: EvidenceGatePolicy) -> list[tuple[str, str]]:
    """The listed contradictions the agreement predicate counts, each once, in input order:
    those with an answer-bearing side that supersession does not settle (see the module)."""
    bearing = _bearing_ids(inp)
    by_id = {p.id: p for p in inp.passages}
    seen: set[frozenset[str]] = set()
    out: list[tuple[str, str]] = []
    for a, b in (tuple(pair) for pair in inp.contradictions):
        key = frozenset((a, b))
        if key in seen or not bearing.intersection(key):
            continue
        seen.add(key)
        if g.superseded == "stale" and (by_id[a].superseded or by_id[b].superseded):
            continue  # the side still in force controls
        out.append((a, b))
    return out


def _conflict_step(conflicts: list[tuple[str, str]], by_id: dict[str, PassageIn]) -> str:
    """The next step for unresolved conflicts, naming only passages the user may see."""
    shown: list[str] = []
    hidden = False
    for pair in conflicts:
        visible = [pid for pid in pair if by_id[pid].allowed is True]
        hidden = hidden or len(visible) < len(pair)
        if visible:
            text = "/".join(visible)
            if text not in shown:
                shown.append(text)
    if not hidden:
        return NEXT_STEP["conflicting_evidence"].format(conflicts=", ".join(shown))
    if not shown:
        return CONFLICT_HIDDEN
    return CONFLICT_PARTLY_HIDDEN.format(conflicts=", ".join(shown))


def _plain(text: str) -> str:
    return " ".join(text.split()).casefold()


def _names_hidden(draft: str, inp: EvidenceInput) -> bool:
    """Whether ``draft`` names (as a whole token) or quotes a passage the user may not see,
    by id, source or text; a string that a passage the user may see also holds is no secret."""
    said = _plain(draft)
    if not said:
        return False
    visible = [p for p in inp.passages if p.allowed is True]
    known = "\n".join(_plain(x) for p in visible for x in (p.id, p.source, p.text))
    for p in inp.passages:
        if p.allowed is True:
            continue
        text = _plain(p.text)
        if text and text in said and text not in known:
            return True
        for name in (p.id, p.source):
            token = _plain(name)
            if not token or token in known:
                continue
            if re.search(rf"(?<!\w){re.escape(token)}(?!\w)", said):
                return True
    return False


def _why_stale(p: PassageIn, claim: Claim, inp: EvidenceInput, g: EvidenceGatePolicy) -> str:
    """Why ``p`` is not current evidence for ``claim`` ("": it is current)."""
    if p.superseded and g.superseded == "stale":
        return "superseded (rule: superseded: stale)"
    if inp.as_of is not None and p.effective_date is not None:
        if p.effective_date > inp.as_of:
            return f"not yet in force on {inp.as_of.isoformat()}"
        limit = g.limit_for(claim.kind, p.category)
        return limit.why_stale((inp.as_of - p.effective_date).days) or ""
    return ""


def _stale_text(
    claim: Claim, passages: list[PassageIn], inp: EvidenceInput, g: EvidenceGatePolicy
) -> str:
    """Why none of ``passages`` (a claim's supporters) is current for ``claim``, per passage
    the user may see; "" when the user may see none of them (saying why a passage they may
    not see is stale would say that it exists; the claim fails the source policy anyway)."""
    visible = [p for p in passages if p.allowed is True]
    return "; ".join(f"{p.id} is {_why_stale(p, claim, inp, g)}" for p in visible)


def _extractive_answer(chosen: list[PassageIn]) -> str:
    return " ".join(f"{p.text.strip()} [{p.id}]" for p in chosen if p.text.strip())


def decide_evidence(inp: EvidenceInput, policy: NoAnswerPolicy) -> EvidenceState:
    """The evidence gate's state for one input (see the module)."""
    g = gate_policy(policy)
    known = {p.id for p in inp.passages}
    for i, pair in enumerate(inp.contradictions):
        if len(pair) != 2 or not known.issuperset(pair):
            raise InputError(f"{inp.id}: field contradictions.{i}: not a pair of passage ids")
    missing = _missing_signals(inp, g)
    claim_ids = [c.id for c in inp.required_claims]
    if missing:
        fields = list(missing)
        return EvidenceState(
            id=inp.id,
            status=g.on_missing_signal,
            answer="",
            supporting_passage_ids=[],
            missing_claims=claim_ids,
            reason_codes=[SIGNAL_MISSING],
            next_step=NEXT_STEP[SIGNAL_MISSING].format(missing=", ".join(fields)),
            rule=SIGNAL_MISSING,
            predicates={p: "not_evaluated" for p in PREDICATES},
            missing_signals=[f"{k}: {v}" for k, v in missing.items()],
        )

    wanted = set(claim_ids)
    bearing = [p for p in inp.passages if wanted.intersection(p.supports)]
    supporters = {c: [p for p in bearing if c in p.supports] for c in claim_ids}
    covered = [c for c in claim_ids if supporters[c]]
    uncovered = [c for c in claim_ids if not supporters[c]]

    def strong(p: PassageIn) -> bool:
        assert p.support_score is not None
        return p.support_score >= g.min_support

    claim_of = {c.id: c for c in inp.required_claims}

    def current(p: PassageIn, c: str) -> bool:
        return not _why_stale(p, claim_of[c], inp, g)

    weak = [c for c in covered if not any(strong(p) for p in supporters[c])]
    barred = [c for c in covered if not any(p.allowed for p in supporters[c])]
    stale = [c for c in covered if not any(current(p, c) for p in supporters[c])]
    stale_evidence = {c: _stale_text(claim_of[c], supporters[c], inp, g) for c in stale}
    conflicts = _unresolved(inp, g)
    failed = {
        "answer_bearing_evidence": not bearing,
        "claim_coverage": len(covered) / len(claim_ids) < g.required_coverage,
        "support_strength": not covered or bool(weak),
        "source_policy": bool(barred),
        "freshness": bool(stale),
        "agreement": len(conflicts) > g.max_contradictions,
    }
    # One passage per claim must pass every filter at once; where the usable passages of a
    # claim run out, that filter's reason is added even when each predicate held on its own.
    chosen: dict[str, PassageIn] = {}
    for c in covered:
        usable = [p for p in supporters[c] if p.allowed]
        if not usable:
            continue
        fresh = [p for p in usable if current(p, c)]
        if not fresh:
            failed["freshness"] = True
            stale_evidence.setdefault(c, _stale_text(claim_of[c], usable, inp, g))
            continue
        good = [p for p in fresh if strong(p)]
        if not good:
            failed["support_strength"] = True
            continue
        chosen[c] = max(good, key=lambda p: (p.support_score or 0.0, p.id))
    reasons = [REASON_OF_PREDICATE[p] for p in PREDICATES if failed[p]]
    supporting = sorted({p.id for p in chosen.values()}, key=[p.id for p in inp.passages].index)
    predicates = {p: "fail" if failed[p] else "pass" for p in PREDICATES}
    if not reasons and inp.answer is not None and _names_hidden(inp.answer, inp):
        predicates["source_policy"] = "fail"
        return EvidenceState(
            id=inp.id,
            status="abstain",
            answer="",
            supporting_passage_ids=supporting,
            missing_claims=[c for c in claim_ids if c not in chosen],
            reason_codes=[REASON_OF_PREDICATE["source_policy"]],
            next_step=DRAFT_NAMES_HIDDEN.format(supporting=", ".join(supporting)),
            rule="source_policy",
            predicates=predicates,
        )
    if not reasons:
        ordered = [p for p in inp.passages if p.id in set(supporting)]
        return EvidenceState(
            id=inp.id,
            status="answer",
            answer=inp.answer if inp.answer is not None else _extractive_answer(ordered),
            supporting_passage_ids=supporting,
            missing_claims=uncovered,
            reason_codes=[],
            next_step="Answer from the supporting passages and cite their ids.",
            rule="all_predicates_hold",
            predicates=predicates,
        )
    stale_evidence = {c: stale_evidence[c] for c in claim_ids if stale_evidence.get(c)}
    first = next(r for r in NEXT_STEP if r in reasons)
    unsupported = [c for c in claim_ids if c not in chosen]
    if first == "conflicting_evidence":
        step = _conflict_step(conflicts, {p.id: p for p in inp.passages})
    else:
        step = NEXT_STEP[first].format(
            claims=", ".join(stale or weak or unsupported),
            missing_claims=", ".join(uncovered),
        )
        if first == "evidence_stale" and stale_evidence:
            step += "".join(f" For {c}: {why}." for c, why in stale_evidence.items())
    return EvidenceState(
        id=inp.id,
        status="abstain",
        answer="",
        supporting_passage_ids=supporting,
        missing_claims=unsupported,
        reason_codes=reasons,
        next_step=step,
        rule=next(p for p in PREDICATES if failed[p]),
        predicates=predicates,
        stale_evidence=stale_evidence,
    )
