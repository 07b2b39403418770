"""LLM-judge labels of a run, and how far the judge agrees with the experts.

Judge labels JSONL (one object per line, for outputs of one run)::

    {"case": "CASE-001", "repeat": 0, "judge": "gpt-4.1-judge@3", "decision": "answer",
     "reason_codes": [], "output_acceptable": true}

``decision`` and ``reason_codes`` are what the judge says the case called for; and
``output_acceptable`` whether the run's output was acceptable. Each is optional; a line must
name a case and repeat the run has an output for. An import lands whole or is refused with the
line and field, and writes nothing; a judge's label of an output it already labeled is refused.

Agreement per field, judge against the experts' agreed label (latest adjudication, else
unanimous annotators, else the author's expected decision): the decision; the primary reason
code (the first) on cases whose agreed label is a non-answer; whether the output was
acceptable (the experts' side: the output's decision equals the agreed decision, an answer is
an acceptable one as the Runs page counts it (``answer_ok``: cites a decisive document,
contradicts no required claim), and a refusal makes no substantive claim). Each row
shows the items compared, the raw agreement, Cohen's kappa and Krippendorff's alpha (nominal),
"undefined" with the reason when a statistic cannot be computed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from review.core import readable
from review.core.errors import InputError
from review.core.identity import Actor, Permission, require
from review.core.records import json_lines, read_record
from review.core.taxonomy import Taxonomy
from review.evaluation import evalruns
from review.labels.agreement import cohen_kappa, krippendorff_alpha_nominal
from storage import changes
from storage.db import read_session, run_write
from storage.models import Case, EvalOutput, EvalRun, JudgeLabel

__all__ = [
    "FIELDS",
    "JudgeIn",
    "agreement",
    "display_table",
    "import_judge_labels",
    "iter_judge_labels",
    "judges",
]

#: The compared fields, in words.
FIELDS = {
    "decision": "decision the case called for",
    "primary_reason": "primary reason code (cases whose agreed label is a non-answer)",
    "output_acceptable": "whether the output was acceptable",
}


class JudgeIn(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    case: str = Field(min_length=1, max_length=120)
    repeat: int = Field(default=0, ge=0, le=2**31 - 1)
    judge: str = Field(min_length=1, max_length=200)
    decision: str | None = Field(default=None, max_length=40)
    reason_codes: list[str] = Field(default_factory=list, max_length=20)
    output_acceptable: bool | None = None


def iter_judge_labels(
    lines: Iterable[str], source: str, tax: Taxonomy
) -> Iterator[tuple[int, JudgeIn]]:
    """Parse judge labels, refusing an unknown decision or reason code with its line."""
    for n, _raw, text in json_lines(lines):
        item = read_record(text, JudgeIn, f"{source}: line {n}")
        if item.decision is not None and item.decision not in tax.decisions:
            raise InputError(
                f"{source}: line {n}: field decision: {item.decision!r} is not one of: "
                f"{', '.join(tax.decisions)}"
            )
        for code in item.reason_codes:
            if code not in tax.reason_codes:
                raise InputError(
                    f"{source}: line {n}: field reason_codes: {code!r} is not a reason code "
                    "of the taxonomy"
                )
        if item.decision is None and not item.reason_codes and item.output_acceptable is None:
            raise InputError(
                f"{source}: line {n}: give at least one of decision, reason_codes, "
                "output_acceptable"
            )
        yield n, item


def import_judge_labels(
    engine: Engine, actor: Actor, run_id: int, items: Sequence[tuple[int, JudgeIn]], source: str
) -> int:
    """Store a judge's labels of a run's outputs in one transaction (all or nothing)."""
    require(actor, Permission.run_evaluations)
    if not items:
        raise InputError(f"{source}: no judge labels in the file")

    def work(s: Session) -> int:
        if s.get(EvalRun, run_id) is None:
            raise InputError(f"run {run_id} does not exist")
        outputs = {
            (key, rep): cid
            for key, rep, cid in s.execute(
                select(Case.key, EvalOutput.repeat, EvalOutput.case_id)
                .join(Case, Case.id == EvalOutput.case_id)
                .where(EvalOutput.run_id == run_id)
            )
        }
        stored = {
            (cid, rep, judge)
            for cid, rep, judge in s.execute(
                select(JudgeLabel.case_id, JudgeLabel.repeat, JudgeLabel.judge).where(
                    JudgeLabel.run_id == run_id
                )
            )
        }
        seen: set[tuple[int, int, str]] = set()
        rows = []
        for line, it in items:
            cid = outputs.get((it.case, it.repeat))
            if cid is None:
                raise InputError(
                    f"{source}: line {line}: field case: the run has no output for case "
                    f"{it.case!r} repeat {it.repeat}"
                )
            key = (cid, it.repeat, it.judge)
            if key in stored or key in seen:
                raise InputError(
                    f"{source}: line {line}: judge {it.judge!r} already labeled case "
                    f"{it.case} repeat {it.repeat} of this run"
                )
            seen.add(key)
            rows.append(
                JudgeLabel(
                    run_id=run_id,
                    case_id=cid,
                    repeat=it.repeat,
                    judge=it.judge,
                    decision=it.decision,
                    reason_codes=list(it.reason_codes),
                    output_acceptable=it.output_acceptable,
                    created_by=actor.email,
                )
            )
        s.add_all(rows)
        changes.record(
            s,
            actor.email,
            "create",
            "judge_labels",
            run_id,
            None,
            {"labels": len(rows), "judges": sorted({r.judge for r in rows}), "source": source},
        )
        return len(rows)

    return run_write(engine, work)


def judges(engine: Engine, run_id: int) -> list[str]:
    with read_session(engine) as s:
        return list(
            s.scalars(
                select(JudgeLabel.judge)
                .where(JudgeLabel.run_id == run_id)
                .distinct()
                .order_by(JudgeLabel.judge)
            )
        )


AGREEMENT_COLUMNS = ["judge", "field", "items", "agree", "raw", "kappa", "alpha", "note"]


def display_table(table: pd.DataFrame) -> pd.DataFrame:
    """The agreement table for reading (review.core.readable): raw agreement as a
    percentage, kappa and alpha with at most three decimals, "undefined" where a statistic
    cannot be computed (the note says why)."""
    out = table.copy()
    out["raw"] = [readable.percent(v, missing="undefined") for v in out["raw"]]
    for column in ("kappa", "alpha"):
        out[column] = [readable.number(v, 3, missing="undefined") for v in out[column]]
    return out


def _row(judge: str, field: str, pairs: list[tuple[Any, Any]]) -> dict[str, Any]:
    n = len(pairs)
    if n == 0:
        return {
            "judge": judge,
            "field": FIELDS[field],
            "items": 0,
            "agree": 0,
            "raw": None,
            "kappa": None,
            "alpha": None,
            "note": "undefined: no item has both a judge and an expert label",
        }
    agree = sum(a == b for a, b in pairs)
    kappa = cohen_kappa([a for a, _ in pairs], [b for _, b in pairs])
    long = pd.DataFrame(
        [{"item": i, "annotator": "judge", "value": a} for i, (a, _) in enumerate(pairs)]
        + [{"item": i, "annotator": "experts", "value": b} for i, (_, b) in enumerate(pairs)]
    )
    alpha = krippendorff_alpha_nominal(long)
    note = ""
    if kappa is None or alpha is None:
        note = "kappa and alpha undefined: every label has the same value (no variation)"
    return {
        "judge": judge,
        "field": FIELDS[field],
        "items": n,
        "agree": agree,
        "raw": agree / n,
        "kappa": kappa,
        "alpha": alpha,
        "note": note,
    }


def agreement(
    engine: Engine, run_id: int, tax: Taxonomy, frame: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Per judge and field: judge against the experts (see the module docstring). ``frame``
    is the run's :func:`review.evaluation.evalruns.outputs_frame` when the caller has it
    (read here otherwise, and only when the run has judge labels)."""
    with read_session(engine) as s:
        labels = s.execute(
            select(
                JudgeLabel.judge,
                JudgeLabel.case_id,
                JudgeLabel.repeat,
                JudgeLabel.decision,
                JudgeLabel.reason_codes,
                JudgeLabel.output_acceptable,
            ).where(JudgeLabel.run_id == run_id)
        ).all()
    if not labels:
        return pd.DataFrame(columns=AGREEMENT_COLUMNS)
    if frame is None:
        frame = evalruns.outputs_frame(engine, run_id, tax)
    if frame.empty:
        return pd.DataFrame(columns=AGREEMENT_COLUMNS)
    experts = {
        (int(r.case_id), int(r.repeat)): r
        for r in frame[
            [
                "case_id",
                "repeat",
                "gold",
                "gold_reasons",
                "decision",
                "infra",
                "answered",
                "answer_ok",
                "claim_after_refusal",
            ]
        ].itertuples(index=False)
    }
    answering = tax.answering_decisions()
    rows: list[dict[str, Any]] = []
    for judge in sorted({lab.judge for lab in labels}):
        mine = [lab for lab in labels if lab.judge == judge]
        pairs: dict[str, list[tuple[Any, Any]]] = {f: [] for f in FIELDS}
        for lab in mine:
            e = experts.get((int(lab.case_id), int(lab.repeat)))
            if e is None:
                continue
            if lab.decision is not None:
                pairs["decision"].append((lab.decision, e.gold))
            gold_reasons = list(e.gold_reasons or [])
            if lab.reason_codes and e.gold not in answering and gold_reasons:
                pairs["primary_reason"].append((lab.reason_codes[0], gold_reasons[0]))
            if lab.output_acceptable is not None and not e.infra:
                acceptable = (
                    e.decision == e.gold
                    and (not e.answered or bool(e.answer_ok))
                    and not e.claim_after_refusal
                )
                pairs["output_acceptable"].append((bool(lab.output_acceptable), acceptable))
        rows.extend(_row(judge, field, pairs[field]) for field in FIELDS)
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)
