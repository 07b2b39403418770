"""The validation check of a monthly review: the policy's dry-run rules on chosen cases
(answerable cases answered, unanswerable cases given their expected behaviour, refusals with a
reason and approved wording), against the policy's targets."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pandas as pd
from sqlalchemy import Engine

from review.core.errors import InputError
from review.core.taxonomy import Taxonomy
from review.evaluation import evalruns
from review.thresholds import thresholds
from storage.models import utcnow

# ---------------------------------------------------------------------------------------
# Validation check (the policy's dry-run rules)


def _template_regex(text: str) -> re.Pattern[str]:
    parts = re.split(r"\{[A-Za-z_][A-Za-z0-9_]*\}", text)
    return re.compile(r"\s*" + r".+?".join(re.escape(p.strip()) for p in parts) + r"\s*\Z", re.S)


def approved_refusal_patterns(templates: Sequence[str]) -> list[re.Pattern[str]]:
    return [_template_regex(t) for t in templates]


def validation_check(
    frame: pd.DataFrame,
    targets: dict[str, float],
    refusal_templates: Sequence[str],
    answering: set[str],
) -> dict[str, Any]:
    """On the chosen cases of a run (``frame`` from evalruns.outputs_frame, one repeat):

    - share of answerable cases answered (answer, with or without caveat) vs the target;
    - share of unanswerable cases given their expected behaviour (observed == gold) vs the
      abstention-recall target;
    - every output carries a decision, and every non-answer a reason code;
    - every refusal text matches an approved wording message (placeholders filled in).
    """
    ok = frame[~frame["infra"].astype(bool)]
    answerable = ok[ok["answerable"].astype(bool)]
    unanswerable = ok[~ok["answerable"].astype(bool)]
    answered = int(answerable["decision"].isin(answering).sum())
    behaved = int((unanswerable["decision"] == unanswerable["gold"]).sum())
    no_decision = int(ok["decision"].isna().sum())
    refusals = ok[~ok["decision"].isin(answering) & ok["decision"].notna()]
    no_reason = int(refusals["reason_code"].isna().sum())
    patterns = approved_refusal_patterns(refusal_templates)
    off_wording = [
        str(k)
        for k, t in zip(refusals["key"], refusals["text"], strict=True)
        if not any(p.match(str(t or "")) for p in patterns)
    ]
    ans_rate = answered / len(answerable) if len(answerable) else float("nan")
    beh_rate = behaved / len(unanswerable) if len(unanswerable) else float("nan")
    result = {
        "answerable": len(answerable),
        "answered": answered,
        "answer_rate": ans_rate,
        "answer_rate_target": targets.get("min_answer_rate_answerable"),
        "unanswerable": len(unanswerable),
        "expected_behaviour": behaved,
        "behaviour_rate": beh_rate,
        "behaviour_target": targets.get("min_abstention_recall"),
        "without_decision": no_decision,
        "refusals": len(refusals),
        "refusals_without_reason": no_reason,
        "refusals_off_wording": len(off_wording),
        "off_wording_cases": off_wording[:50],
        "infrastructure_failures": int(frame["infra"].astype(bool).sum()),
    }
    ans_target = float(targets.get("min_answer_rate_answerable") or 0.0)
    beh_target = float(targets.get("min_abstention_recall") or 0.0)
    result["passed"] = bool(
        ans_rate == ans_rate
        and beh_rate == beh_rate
        and ans_rate >= ans_target
        and beh_rate >= beh_target
        and no_decision == 0
        and no_reason == 0
        and not off_wording
    )
    return result


def _validation_frame(
    engine: Engine, tax: Taxonomy, run_id: int, split: str, case_keys: Sequence[str] | None
) -> pd.DataFrame:
    frame = evalruns.outputs_frame(engine, run_id, tax)
    if case_keys:
        wanted = {k.strip() for k in case_keys if k.strip()}
        unknown = sorted(wanted - set(frame["key"]))
        if unknown:
            raise InputError(
                f"not in the run: {', '.join(unknown[:10])}"
                + (f" and {len(unknown) - 10} more" if len(unknown) > 10 else "")
            )
        frame = frame[frame["key"].isin(wanted)]
    elif split != "all":
        frame = frame[frame["split"] == split]
    return frame[frame["repeat"] == frame["repeat"].min()] if not frame.empty else frame


def run_validation(
    engine: Engine,
    tax: Taxonomy,
    run_id: int,
    split: str,
    refusal_templates: Sequence[str],
    *,
    case_keys: Sequence[str] | None = None,
    calibration_run_id: int | None = None,
    tolerance: int = 1,
) -> dict[str, Any]:
    """The dry run of the policy in force on the chosen cases (``case_keys``; else a split
    of the run): the checks of ``validation_check``, and, with ``calibration_run_id`` (the
    author's calibration run), whether each count (answerable answered, unanswerable given
    their expected behaviour) is within ``tolerance`` case(s) of that run's on the same cases."""
    frame = _validation_frame(engine, tax, run_id, split, case_keys)
    if frame.empty:
        raise InputError(f"the run has no outputs on the {split} split")
    policy = thresholds.in_force(engine).policy
    targets = {
        "min_answer_rate_answerable": policy.targets.min_answer_rate_answerable,
        "min_abstention_recall": policy.targets.min_abstention_recall,
    }
    answering = tax.answering_decisions()
    result = validation_check(frame, targets, refusal_templates, answering)
    runs = {r.id: r for r in evalruns.list_runs(engine)}
    result.update(
        {
            "run": runs[run_id].name,
            "split": "chosen cases" if case_keys else split,
            "cases": len(frame),
            "at": utcnow().isoformat(),
        }
    )
    if calibration_run_id is not None:
        if calibration_run_id not in runs:
            raise InputError(f"run {calibration_run_id} does not exist")
        keys = list(frame["key"])
        base = _validation_frame(engine, tax, calibration_run_id, "all", keys)
        ref = validation_check(base, targets, refusal_templates, answering)
        within = (
            abs(result["answered"] - ref["answered"]) <= tolerance
            and abs(result["expected_behaviour"] - ref["expected_behaviour"]) <= tolerance
            and result["answerable"] == ref["answerable"]
            and result["unanswerable"] == ref["unanswerable"]
        )
        result.update(
            {
                "calibration_run": runs[calibration_run_id].name,
                "calibration_answered": ref["answered"],
                "calibration_expected_behaviour": ref["expected_behaviour"],
                "count_tolerance": tolerance,
                "within_tolerance": bool(within),
            }
        )
        result["passed"] = bool(result["passed"] and within)
    return result


def refusal_templates(engine: Engine) -> list[str]:
    """The approved refusal messages (every non-answer key; C1 is a caveat, not a refusal)."""
    from review.wording import versions

    wif = versions.in_force(engine)
    return [m.text for k, m in wif.wording.messages.items() if k != "C1"]


def parse_case_keys(text: str) -> list[str]:
    """Case keys typed separated by spaces, commas, semicolons or lines."""
    return [k for k in re.split(r"[\s,;]+", text) if k]
