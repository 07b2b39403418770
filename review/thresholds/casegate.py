"""What the evidence gate decides on a case (docs/evidence-gate.md), with the policy in force.

A case says which documents a question meets and what role each plays; it does not say how
strongly a retriever or judge scores each passage. So the gate's input is built from the case
as a *starting point* a reviewer completes: one passage per case document (its id
``DOC@VERSION``, its title as the source, its body as the text when the viewer may read it),
``supports`` every required claim for a decisive document and the first one for a partial
one, ``allowed`` from the document's visibility to the case's identity, ``effective_date``
from the corpus, ``superseded`` for a superseded role or a version no longer current,
``category`` from the document's authority (which the policy's freshness rules may name as a
``source_category``), and ``support_score`` left empty: the reviewer fills it in, and until
then the gate fails closed on it (signal_missing), as it would in production. Each required
claim starts with the ``kind`` the case gives it (``historical``, ``current_price``: the kind
of fact it states), so that the policy's freshness rule for that kind applies; the reviewer may
change it here. Without one the source's rule or the global ``max_age_days`` does. The state
comes from the same
:func:`review.policy.evidence.decide_evidence` that ``workbench decide`` runs.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Engine

from review.cases import cases
from review.core import clearance
from review.core.errors import InputError
from review.core.identity import Actor
from review.corpus import corpus
from review.policy.evidence import EvidenceInput, EvidenceState, decide_evidence, parse_input
from review.policy.policy import NoAnswerPolicy

__all__ = [
    "CLAIM_COLUMNS",
    "PASSAGE_COLUMNS",
    "case_input",
    "claim_kinds",
    "claim_rows",
    "decide_case",
    "freshness_rows",
    "freshness_summary",
    "input_from_rows",
    "parse_pairs",
    "passage_rows",
    "state_rows",
]

PASSAGE_COLUMNS = [
    "id",
    "source",
    "supports",
    "support_score",
    "allowed",
    "effective_date",
    "superseded",
    "category",
]
CLAIM_COLUMNS = ["id", "text", "kind"]


def claim_id(i: int) -> str:
    return f"c{i + 1}"


def case_input(
    engine: Engine, actor: Actor, key: str, as_of: dt.date | None = None
) -> EvidenceInput:
    """The evidence gate's input for case ``key``, built as the module says."""
    view = cases.get_case(engine, key=key.strip())
    if view is None:
        raise InputError(f"no case with key {key.strip()!r}")
    kinds = [*view.claim_kinds, *[None] * len(view.required_claims)]
    claims = [
        {
            "id": claim_id(i),
            "text": clearance.shown(actor, t, view.text_restricted),
            "kind": kinds[i],
        }
        for i, t in enumerate(view.required_claims)
    ]
    passages = []
    for d in view.documents:
        readable = clearance.may_see_document(actor, d.access_scope)
        supports = (
            [c["id"] for c in claims]
            if d.role == "decisive"
            else ([claims[0]["id"]] if d.role == "partial" and claims else [])
        )
        passages.append(
            {
                "id": d.ref,
                "source": clearance.title(actor, d.title, d.access_scope),
                "text": corpus.get_document(engine, actor, d.document_id).body
                if readable
                else clearance.REDACTED,
                "supports": supports,
                "support_score": None,
                "allowed": d.visibility == "visible",
                "effective_date": d.effective_date,
                "superseded": d.role == "superseded" or not d.is_current,
                "category": d.authority or None,
            }
        )
    return parse_input(
        {
            "id": view.key,
            "question": clearance.shown(actor, view.question, view.text_restricted),
            "required_claims": claims,
            "passages": passages,
            "contradictions": [],
            "as_of": as_of,
        },
        f"case {view.key}",
    )


def passage_rows(inp: EvidenceInput) -> list[dict[str, Any]]:
    """The passages as the rows of an editable table (supports as comma-separated ids)."""
    return [
        {
            "id": p.id,
            "source": p.source,
            "supports": ", ".join(p.supports),
            "support_score": p.support_score,
            "allowed": p.allowed,
            "effective_date": p.effective_date,
            "superseded": p.superseded,
            "category": p.category,
        }
        for p in inp.passages
    ]


def claim_rows(inp: EvidenceInput) -> list[dict[str, Any]]:
    """The required claims as the rows of a table whose ``kind`` the reviewer may set."""
    return [{"id": c.id, "text": c.text, "kind": c.kind} for c in inp.required_claims]


def _cell(value: Any) -> Any:
    """An edited cell: NaN/NaT/"" (an emptied cell) is None (not given)."""
    if value is None or value == "":
        return None
    try:
        if value != value:  # NaN, NaT
            return None
    except (TypeError, ValueError):
        return value
    if isinstance(value, dt.datetime):
        return value.date()
    if hasattr(value, "to_pydatetime"):
        return value.to_pydatetime().date()
    return value


def input_from_rows(
    inp: EvidenceInput,
    rows: Sequence[Mapping[str, Any]],
    contradictions: Sequence[Sequence[str]] = (),
    as_of: dt.date | None = None,
    claims: Sequence[Mapping[str, Any]] = (),
) -> EvidenceInput:
    """``inp`` with its passages' gate fields taken from edited rows (matched by id; the
    text stays the stored one) and its claims' kinds from edited ``claims`` rows, validated as
    strictly as a line of ``workbench decide``."""
    by_id = {str(r.get("id")): r for r in rows}
    kinds = {str(r.get("id")): r.get("kind") for r in claims}
    passages = []
    for p in inp.passages:
        r = by_id.get(p.id, {})
        raw = _cell(r.get("supports"))
        supports = [s.strip() for s in str(raw or "").split(",") if s.strip()]
        passages.append(
            {
                "id": p.id,
                "source": p.source,
                "text": p.text,
                "supports": supports,
                "support_score": _cell(r.get("support_score")),
                "allowed": _cell(r.get("allowed")),
                "effective_date": _cell(r.get("effective_date")),
                "superseded": _cell(r.get("superseded")),
                "category": _text_cell(r.get("category")) if "category" in r else p.category,
            }
        )
    data = inp.model_dump()
    required = [
        {**c.model_dump(), "kind": _text_cell(kinds[c.id]) if c.id in kinds else c.kind}
        for c in inp.required_claims
    ]
    data.update(
        required_claims=required,
        passages=passages,
        contradictions=[list(pair) for pair in contradictions],
        as_of=as_of,
    )
    return parse_input(data, f"case {inp.id}")


def _text_cell(value: Any) -> Any:
    """An edited text cell: blank (or emptied) is None; other text is trimmed."""
    value = _cell(value)
    if isinstance(value, str):
        return value.strip() or None
    return value


def parse_pairs(text: str) -> list[list[str]]:
    """Contradictions typed as ``A | B`` pairs separated by ``;`` or new lines; InputError
    names a part that is not a pair."""
    pairs: list[list[str]] = []
    for part in text.replace("\n", ";").split(";"):
        if not part.strip():
            continue
        ids = [x.strip() for x in part.split("|")]
        if len(ids) != 2 or not all(ids):
            raise InputError(f"contradiction {part.strip()!r}: write two passage ids as A | B")
        pairs.append(ids)
    return pairs


def state_rows(state: EvidenceState) -> list[dict[str, str]]:
    """Each predicate of the evidence gate and how it came out, in the gate's order."""
    return [{"predicate": k, "result": v} for k, v in state.predicates.items()]


def claim_kinds(policy: NoAnswerPolicy, inp: EvidenceInput | None = None) -> list[str]:
    """The claim kinds the policy's freshness rules name, and those ``inp``'s claims have
    (from the case), in name order: what a reviewer may give a claim (a kind no rule names
    matches none)."""
    gate = policy.evidence_gate
    rules = gate.freshness if gate is not None else []
    named = {r.claim_kind for r in rules if r.claim_kind is not None}
    given = {c.kind for c in inp.required_claims if c.kind} if inp is not None else set()
    return sorted(named | given)


def freshness_summary(policy: NoAnswerPolicy) -> str:
    """The policy's age limits in one line: each rule, most specific first, then the global
    one."""
    gate = policy.evidence_gate
    if gate is None:
        return "The policy in force has no evidence gate."
    ordered = sorted(gate.freshness, key=lambda r: -r.specificity)
    parts = [
        f"{r.describe()}: "
        + ("no age limit" if r.max_age_days is None else f"{r.max_age_days} days")
        for r in ordered
    ]
    glob = "no age limit" if gate.max_age_days is None else f"{gate.max_age_days} days"
    parts.append(f"otherwise (global max_age_days): {glob}")
    return f"Age limits of policy version {policy.version}: " + "; ".join(parts) + "."


def freshness_rows(inp: EvidenceInput, state: EvidenceState) -> list[dict[str, str]]:
    """For each claim the freshness predicate failed on: its kind, and why its passages are
    not current, naming the freshness rule that applied to each (from the gate's state)."""
    kinds = {c.id: c.kind for c in inp.required_claims}
    return [
        {"claim": c, "kind": kinds.get(c) or "(none)", "why not current": why}
        for c, why in state.stale_evidence.items()
    ]


def decide_case(inp: EvidenceInput, policy: NoAnswerPolicy) -> EvidenceState:
    """The evidence gate's state for the (completed) input, with ``policy``'s section."""
    return decide_evidence(inp, policy)
