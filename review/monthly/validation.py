"""The validation check of a monthly review: a dry run of the policy. A person other than the
author of the policy version being validated applies it to chosen cases: each case is
re-decided from the gate signals its output logged, with that version (the gate code of
:mod:`review.thresholds.redecide`), and checked against the policy's dry-run rules (answerable
cases answered, unanswerable cases given their expected behaviour, refusals with a reason and
approved wording) and targets. Infrastructure failures and outputs that logged no signals
count as failures, never as answers or as refusals."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlalchemy import Engine

from review.admin import users
from review.core import readable
from review.core.errors import InputError, PermissionDenied
from review.core.frames import isin_text
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy
from review.evaluation import evalruns
from review.policy import inforce, signoff
from review.policy.policy import SIGNAL_MISSING, NoAnswerPolicy, parse_policy, signal_label
from review.thresholds import redecide
from storage.models import utcnow

# ---------------------------------------------------------------------------------------
# Validation check (the policy's dry-run rules)

#: The result's counts as people read them, in the order shown (key -> words).
_COUNTS: dict[str, str] = {
    "cases": "cases checked",
    "without_decision": "outputs without a decision",
    "refusals": "refusals",
    "refusals_without_reason": "refusals without a reason code",
    "refusals_reworded": "refusals reworded by the re-decision",
    "refusals_off_wording": "refusals not in the approved wording",
    "infrastructure_failures": "infrastructure failures",
    "not_redecidable": "outputs that could not be re-decided",
}


_Row = tuple[str, str]  # (check, value)


def validation_rows(result: dict[str, Any], names: dict[str, str]) -> pd.DataFrame:
    """A stored validation result as people read it, one check per row (check, value):
    rates as percentages with the counts behind them and their targets, people as names,
    the time as a date, pass or fail in words; never a raw float or "nan"."""
    if not result:
        return pd.DataFrame(columns=["check", "value"])
    rows = [*_outcome_rows(result), *_calibration_rows(result), *_record_rows(result, names)]
    return pd.DataFrame(rows, columns=["check", "value"])


def _rate_row(result: dict[str, Any], label: str, k: str, n: str, target: str) -> list[_Row]:
    if n not in result:
        return []
    text = readable.count_rate(int(result.get(k) or 0), int(result[n] or 0))
    goal = result.get(target)
    if goal is not None and not readable.is_missing(goal):
        text += f", target ≥ {readable.percent(float(goal))}"
    return [(label, text)]


def _outcome_rows(result: dict[str, Any]) -> list[_Row]:
    """What the run did: refusals for a missing signal, the rates, the counts, the cases that
    failed."""
    rows: list[_Row] = []
    if result.get("lacking_text"):
        rows.append(("refused for a missing signal", str(result["lacking_text"])))
    rows += _rate_row(
        result, "answerable cases answered", "answered", "answerable", "answer_rate_target"
    )
    rows += _rate_row(
        result,
        "unanswerable cases given their expected behaviour",
        "expected_behaviour",
        "unanswerable",
        "behaviour_target",
    )
    for key, words in _COUNTS.items():
        if key in result:
            rows.append((words, readable.number(result[key])))
    if result.get("failed_cases"):
        rows.append(("failed cases", ", ".join(str(k) for k in result["failed_cases"])))
    if result.get("off_wording_cases"):
        rows.append(("cases off the wording", ", ".join(map(str, result["off_wording_cases"]))))
    return rows


def _calibration_rows(result: dict[str, Any]) -> list[_Row]:
    if "calibration_run" not in result:
        return []
    answered = readable.number(result.get("calibration_answered"))
    behaved = readable.number(result.get("calibration_expected_behaviour"))
    tolerance = readable.number(result.get("count_tolerance"))
    return [
        (
            "calibration run",
            f"{result['calibration_run']}: {answered} answered, {behaved} given their "
            f"expected behaviour (tolerance ±{tolerance} case)",
        ),
        ("within tolerance", readable.number(bool(result.get("within_tolerance")))),
    ]


def _record_rows(result: dict[str, Any], names: dict[str, str]) -> list[_Row]:
    """What was checked, by whom and when, and the verdict."""
    rows: list[_Row] = []
    if "run" in result:
        rows.append(("run", f"{result['run']}, {result.get('split', '')} split"))
    if "policy_status" in result:
        label = readable.version_label(
            result.get("policy_version"), result.get("policy_file_version")
        )
        rows.append(("policy checked", f"{label} ({result['policy_status']})"))
    if result.get("policy_author"):
        rows.append(("policy author", readable.person(result["policy_author"], names)))
    if result.get("ran_by"):
        rows.append(("ran by", readable.person(result["ran_by"], names)))
    if result.get("at"):
        rows.append(("ran at", readable.when(result["at"])))
    if result.get("policy_sha256"):
        rows.append(("policy sha256", str(result["policy_sha256"])[:12]))
    if "passed" in result:
        rows.append(("result", "pass" if result["passed"] else "fail"))
    return rows


#: Outputs listed by name with the signals they lacked (the count covers them all).
LACKING_LISTED = 50


def lacking_outputs(policy: NoAnswerPolicy, again: pd.DataFrame) -> dict[str, Any]:
    """Which signals each output of a dry run lacked (``again`` as :func:`redecided` gives
    it): the outputs that logged no signals, or that the gate refused because a signal it
    needed was missing, NaN, infinite, out of range or not true/false, each with every such
    signal and what was wrong ("top_score NaN; answerable not logged"), the first
    :data:`LACKING_LISTED` by case key; how many outputs in all; and how many outputs lacked
    each signal (an output lacking two counts under both). Infrastructure failures are
    counted apart."""
    rows: list[dict[str, str]] = []
    by_signal: dict[str, int] = {}
    infra = again["infra"].astype(bool).to_numpy()
    can = again["redecidable"].astype(bool).to_numpy()
    rules = again["rule"].astype(object).to_numpy()
    for i, (key, logged) in enumerate(zip(again["key"], again["signals"], strict=True)):
        if infra[i]:
            continue
        if not can[i]:
            problems = [(redecide.NO_SIGNALS, "")]
            text = "logged no signals"
        elif rules[i] == SIGNAL_MISSING and isinstance(logged, dict):
            problems = redecide.lacked(policy, logged)
            text = redecide.lacked_text(problems)
        else:
            continue
        for name, _ in problems:
            by_signal[name] = by_signal.get(name, 0) + 1
        rows.append({"case": str(key), "lacked": text})
    rows.sort(key=lambda r: r["case"])
    return {
        "lacking_outputs": rows[:LACKING_LISTED],
        "lacking_outputs_total": len(rows),
        "lacking_by_signal": by_signal,
    }


def lacking_frame(result: dict[str, Any]) -> pd.DataFrame:
    """The outputs a stored dry run listed with the signals each lacked (case, lacked)."""
    return pd.DataFrame(result.get("lacking_outputs") or [], columns=["case", "lacked"])


def lacking_listed_caption(result: dict[str, Any]) -> str:
    """The heading of :func:`lacking_frame`: how many are listed of how many."""
    shown = len(result.get("lacking_outputs") or [])
    total = int(result.get("lacking_outputs_total") or shown)
    if total > shown:
        return f"The signals each output lacked: the first {shown:,} of {total:,} outputs, by case"
    return f"The signals each output lacked ({readable.count(total, 'output')})"


def _by_signal_text(by_signal: dict[str, int]) -> str:
    """ "answerable flag 93, top score 40, logged no signals 2" (largest first; the stored
    counts keep the signals' keys, for programs)."""
    parts = []
    for name, n in sorted(by_signal.items(), key=lambda kv: (-kv[1], kv[0])):
        what = "logged no signals" if name == redecide.NO_SIGNALS else signal_label(name)
        parts.append(f"{what} {n:,}")
    return ", ".join(parts)


def lacking_banner(result: dict[str, Any]) -> str:
    """What a stored dry run refused for want of a signal, for the top of the page: how many
    outputs lacked which signal, and what the run itself declared (information only); empty
    when nothing was refused that way."""
    text = str(result.get("lacking_text") or "")
    if not text:
        return ""
    out = f"Refused for a missing signal: {text}"
    by_signal = result.get("lacking_by_signal") or {}
    if by_signal:
        out += (
            " (each output counted once, under the first signal the gate needed). Counting "
            f"every signal an output lacked: {_by_signal_text(by_signal)}; each output is "
            "listed below with what it lacked."
        )
    else:
        out += "."
    declared = result.get("declared_not_produced") or {}
    if declared:
        named = ", ".join(
            f"the {signal_label(k)} ({readable.count(int(v), 'output')})"
            for k, v in sorted(declared.items())
        )
        out += (
            f" The run declared it does not produce {named}; only the policy's "
            "missing_signal.not_produced decides which signals may be missing."
        )
    return out


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
    """On the chosen cases of a run (``frame`` from evalruns.outputs_frame, one repeat, with
    ``decision`` and ``reason_code`` as the policy being validated decided them; a
    ``redecidable`` column, when present, marks the rows it could decide):

    - share of answerable cases answered (answer, with or without caveat) vs the target;
    - share of unanswerable cases given their expected behaviour (observed == gold) vs the
      abstention-recall target;
    - every output carries a decision, and every non-answer a reason code;
    - every refusal text matches an approved wording message (placeholders filled in); a
      refusal the re-decision changed is worded from the approved message its rule names.

    An infrastructure failure, or an output that could not be re-decided, is in the
    denominators and counts as neither answered nor behaved: a failure.
    """
    infra = frame["infra"].astype(bool)
    undecidable = (
        ~frame["redecidable"].astype(bool) & ~infra
        if "redecidable" in frame
        else pd.Series(False, index=frame.index)
    )
    failed = infra | undecidable
    ok = frame[~failed]
    answerable_all = frame["answerable"].astype(bool)
    answerable = ok[ok["answerable"].astype(bool)]
    unanswerable = ok[~ok["answerable"].astype(bool)]
    n_answerable = int(answerable_all.sum())
    n_unanswerable = int((~answerable_all).sum())
    answered = int(answerable["decision"].isin(answering).sum())
    behaved = int((unanswerable["decision"] == unanswerable["gold"]).sum())
    no_decision = int(ok["decision"].isna().sum())
    refusals = ok[~ok["decision"].isin(answering) & ok["decision"].notna()]
    no_reason = int(refusals["reason_code"].isna().sum())
    patterns = approved_refusal_patterns(refusal_templates)
    logged = refusals["logged_decision"] if "logged_decision" in refusals else refusals["decision"]
    kept = refusals[logged == refusals["decision"]]
    off_wording = [
        str(k)
        for k, t in zip(kept["key"], kept["text"], strict=True)
        if not any(p.match(str(t or "")) for p in patterns)
    ]
    ans_rate = answered / n_answerable if n_answerable else float("nan")
    beh_rate = behaved / n_unanswerable if n_unanswerable else float("nan")
    result = {
        "answerable": n_answerable,
        "answered": answered,
        "answer_rate": ans_rate,
        "answer_rate_target": targets.get("min_answer_rate_answerable"),
        "unanswerable": n_unanswerable,
        "expected_behaviour": behaved,
        "behaviour_rate": beh_rate,
        "behaviour_target": targets.get("min_abstention_recall"),
        "without_decision": no_decision,
        "refusals": len(refusals),
        "refusals_without_reason": no_reason,
        "refusals_reworded": len(refusals) - len(kept),
        "refusals_off_wording": len(off_wording),
        "off_wording_cases": off_wording[:50],
        "infrastructure_failures": int(infra.sum()),
        "not_redecidable": int(undecidable.sum()),
        "failed_cases": sorted(str(k) for k in frame.loc[failed, "key"])[:50],
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
        frame = frame[isin_text(frame["key"], wanted)]
    elif split != "all":
        frame = frame[frame["split"] == split]
    return frame[frame["repeat"] == frame["repeat"].min()] if not frame.empty else frame


@dataclass(frozen=True)
class Validated:
    """The policy version a dry run applies: its number (None: the shipped file, nothing
    approved yet), author (None for the shipped file) and sha256."""

    policy: NoAnswerPolicy
    number: int | None
    author: str | None
    sha256: str | None
    status: str


def policy_under_validation(engine: Engine, number: int | None = None) -> Validated:
    """Version ``number`` of the no-answer policy (pending or approved); None: the policy in
    force."""
    if number is None:
        pif = inforce.in_force(engine)
        v = pif.version
        if v is None:
            return Validated(pif.policy, None, None, None, "shipped file")
        return Validated(pif.policy, v.number, v.author, v.sha256, "in force")
    found = next((v for v in signoff.versions(engine, inforce.KIND) if v.number == number), None)
    if found is None:
        raise InputError(f"version {number} is not a version of the no-answer policy")
    policy = parse_policy(found.yaml_text, f"version {number}")
    return Validated(policy, found.number, found.author, found.sha256, str(found.status))


def validation_choices(engine: Engine) -> list[tuple[int | None, str]]:
    """The versions a dry run may apply: the policy in force first, then every pending
    proposal, each with a label naming its author."""
    pif = inforce.in_force(engine)
    names = users.display_names(engine)

    def label(v: signoff.VersionView) -> str:
        by = readable.person(v.author, names)
        return f"{readable.version_label(v.number, v.file_version)}, by {by}"

    first = (
        (None, f"the policy in force ({label(pif.version)})")
        if pif.version is not None
        else (None, "the policy in force (the shipped file)")
    )
    out: list[tuple[int | None, str]] = [first]
    for v in signoff.versions(engine, inforce.KIND):
        if str(v.status) == "pending":
            out.append((v.number, f"proposal: {label(v)}"))
    return out


def redecided(policy: NoAnswerPolicy, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with ``decision`` and ``reason_code`` as ``policy`` decides them from each
    output's logged signals (the logged ones kept in ``logged_decision``), and
    ``redecidable``, ``rule`` and ``missing_signal`` (the first signal the policy needed and
    the output did not log). Only the policy says which signals may be missing."""
    again = redecide.redecide(policy, frame)
    can = again["redecidable"].astype(bool)
    out = frame.assign(
        logged_decision=frame["decision"],
        redecidable=can.to_numpy(),
        decision=again["decision"].where(can, None).to_numpy(),
        reason_code=again["reason_code"].where(can, None).to_numpy(),
        rule=again["rule"].where(can, None).to_numpy(),
        missing_signal=again["missing_signal"].where(can, None).to_numpy(),
    )
    return out


def run_validation(
    engine: Engine,
    actor: Actor,
    tax: Taxonomy,
    run_id: int,
    split: str,
    refusal_templates: Sequence[str],
    *,
    policy_version: int | None = None,
    case_keys: Sequence[str] | None = None,
    calibration_run_id: int | None = None,
    tolerance: int = 1,
) -> dict[str, Any]:
    """The dry run of policy version ``policy_version`` (None: the policy in force)
    on the chosen cases (``case_keys``; else a split of the run): each case re-decided with
    that version from its logged signals, then the checks of ``validation_check``; with
    ``calibration_run_id`` (the author's calibration run), whether each count (answerable
    answered, unanswerable given their expected behaviour) is within ``tolerance`` case(s) of
    that run's on the same cases, re-decided the same way.

    The dry run is done by someone other than the author: ``actor`` may not be
    the author of the version it validates (PermissionDenied). The result records who ran it,
    on which version and when."""
    target = policy_under_validation(engine, policy_version)
    if target.author is not None and target.author.lower() == actor.email.lower():
        raise PermissionDenied(
            f"{actor.email} wrote version {target.number} of the policy; a dry run "
            "is made by someone other than the author"
        )
    frame = _validation_frame(engine, tax, run_id, split, case_keys)
    if frame.empty:
        raise InputError(f"the run has no outputs on the {split} split")
    policy = target.policy
    targets = {
        "min_answer_rate_answerable": policy.targets.min_answer_rate_answerable,
        "min_abstention_recall": policy.targets.min_abstention_recall,
    }
    answering = tax.answering_decisions()
    again = redecided(policy, frame)
    result = validation_check(again, targets, refusal_templates, answering)
    result.update(lacking_outputs(policy, again))
    runs = {r.id: r for r in evalruns.list_runs(engine)}
    gaps = redecide.lacking(frame, again)
    declared = redecide.declared_not_produced(frame)
    result.update(
        {
            "lacking": gaps,
            "lacking_text": redecide.lacking_sentence(gaps),
            "declared_not_produced": declared,
            "run": runs[run_id].name,
            "split": "chosen cases" if case_keys else split,
            "cases": len(frame),
            "at": utcnow().isoformat(),
            "ran_by": actor.email,
            "policy_version": target.number,
            "policy_file_version": policy.version,
            "policy_status": target.status,
            "policy_author": target.author,
            "policy_sha256": target.sha256,
        }
    )
    if calibration_run_id is not None:
        if calibration_run_id not in runs:
            raise InputError(f"run {calibration_run_id} does not exist")
        keys = list(frame["key"])
        base = redecided(policy, _validation_frame(engine, tax, calibration_run_id, "all", keys))
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
