"""Re-deciding run outputs from the gate signals they logged, with a given policy: the same
gate code (:func:`review.policy.gate.decide_frame`) that the bundled pipelines, replay and the
Thresholds page use. The release gate checks that a run's decisions reproduce under the policy
it gates; the dry-run validation decides each case with the policy being validated.

An output that logged no signals cannot be re-decided (``redecidable`` False): callers count
it as a failure, never as an answer. Which signals may be absent is the policy's word alone
(its ``missing_signal.not_produced``): a run that logged its own ``not_produced`` list does not
switch a check off, so an output without a signal the policy needs fails closed in the gate
(``signal_missing``). The run's list is kept as information only (:func:`lacking`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from review.policy.gate import RULE_MESSAGE_KEY, RULE_REASON_CODE, Signals, decide, decide_frame
from review.policy.policy import (
    SIGNAL_LABELS,
    SIGNAL_MISSING,
    SIGNALS,
    NoAnswerPolicy,
    problem_words,
    signal_label,
)

COLUMNS = ("decision", "rule", "reason_code", "message_key", "missing_signal", "redecidable")


def _signal_value(signals: dict[str, Any], name: str) -> Any:
    value = signals.get(name)
    if name == "topics":
        # a list of topic keys; anything else is a classification not logged
        return tuple(value) if isinstance(value, list | tuple) else None
    return value


def redecide(policy: NoAnswerPolicy, frame: pd.DataFrame) -> pd.DataFrame:
    """One row per row of ``frame`` (same index; its ``signals`` column holds each output's
    logged signals, None when not logged): the decision, rule, reason code and wording key
    the gate gives with ``policy``, the first missing signal of a ``signal_missing`` row, and
    whether the row could be re-decided at all."""
    out = pd.DataFrame(index=frame.index, columns=list(COLUMNS), dtype=object)
    out["redecidable"] = False
    if frame.empty or "signals" not in frame:
        return out
    logged = [s if isinstance(s, dict) else None for s in frame["signals"]]
    positions = [i for i, s in enumerate(logged) if s is not None]
    if positions:
        table = pd.DataFrame(
            {name: [_signal_value(logged[i] or {}, name) for i in positions] for name in SIGNALS}
        )
        for name in ("hits_after_filter", "top_score"):
            table[name] = pd.to_numeric(table[name], errors="coerce").astype(float)
        for name in ("answerable", "ambiguous", "ungrounded"):
            # anything but true/false is a flag not logged (the gate then fails closed)
            table[name] = pd.Series(
                [v if isinstance(v, bool) else None for v in table[name]], dtype=object
            )
        decided = decide_frame(policy, table)
        index = frame.index[positions]
        rules = decided["rule"].astype(str).to_numpy()
        decisions = decided["decision"].astype(str).to_numpy()
        out.loc[index, "decision"] = decisions
        out.loc[index, "rule"] = rules
        out.loc[index, "reason_code"] = [RULE_REASON_CODE.get(r) for r in rules]
        out.loc[index, "message_key"] = [
            ("E1" if d == "escalate" else "R1") if r == SIGNAL_MISSING else RULE_MESSAGE_KEY[r]
            for r, d in zip(rules, decisions, strict=True)
        ]
        out.loc[index, "missing_signal"] = decided["missing_signal"].astype(object).to_numpy()
        out.loc[index, "redecidable"] = True
    return out


def reproduction_row(policy: NoAnswerPolicy, frame: pd.DataFrame) -> tuple[int, int, str] | None:
    """(outputs whose logged decision the policy reproduces from their logged signals, outputs
    that made a decision, why not all) for the release gate; None when no output logged
    signals. Infrastructure failures made no decision and are left out; an output without
    signals in a run that logs them is not reproduced."""
    ok = frame[~frame["infra"].astype(bool)]
    if "signals" not in ok or not any(isinstance(s, dict) for s in ok["signals"]):
        return None
    again = redecide(policy, ok)
    same = again["redecidable"].astype(bool).to_numpy() & (
        again["decision"].astype(object).to_numpy() == ok["decision"].astype(object).to_numpy()
    )
    k, n = int(np.sum(same)), len(ok)
    if k == n:
        return k, n, ""
    gaps = lacking(ok, again)
    refused = again["rule"].astype(object).to_numpy() == SIGNAL_MISSING
    differ = ok.loc[~same & again["redecidable"].astype(bool).to_numpy() & ~refused, "key"]
    parts = []
    if gaps:
        parts.append(lacking_sentence(gaps))
    if len(differ):
        shown = ", ".join(sorted(set(differ.astype(str)))[:5])
        parts.append(f"{len(differ)} decided otherwise ({shown})")
    if len(parts) == 0:
        parts.append(f"{n - k} not reproduced")
    return k, n, "; ".join(parts)


#: What :func:`lacking` counts for an output that logged no signals at all.
NO_SIGNALS = "no signals"


def lacking_sentence(counts: dict[str, int], noun: str = "outputs") -> str:
    """ "93 outputs lacked the answerable flag; 4 lacked the top score" from signal -> count
    (largest first; signals in words, :data:`NO_SIGNALS` reads "logged no signals"); empty
    when nothing lacked."""
    parts: list[str] = []
    for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if n <= 0:
            continue
        what = "logged no signals" if name == NO_SIGNALS else f"lacked {_the(name)}"
        counted = noun.removesuffix("s") if n == 1 else noun  # "1 output", "3 outputs"
        parts.append(f"{n:,} {counted} {what}" if not parts else f"{n:,} {what}")
    return "; ".join(parts)


def lacking(frame: pd.DataFrame, again: pd.DataFrame) -> dict[str, int]:
    """Outputs the re-decision ``again`` (of ``frame``, as :func:`redecide` returns it)
    refused for want of an input, by the first signal the gate lacked under the policy, plus
    :data:`NO_SIGNALS` for outputs that logged none. Infrastructure failures are left out
    (they are counted apart)."""
    infra = (
        frame["infra"].astype(bool).to_numpy()
        if "infra" in frame
        else np.zeros(len(frame), dtype=bool)
    )
    can = again["redecidable"].astype(bool).to_numpy()
    counts: dict[str, int] = {}
    missing = again["missing_signal"].astype(object).to_numpy()
    rules = again["rule"].astype(object).to_numpy()
    for i in range(len(frame)):
        if infra[i]:
            continue
        if not can[i]:
            counts[NO_SIGNALS] = counts.get(NO_SIGNALS, 0) + 1
        elif rules[i] == SIGNAL_MISSING and isinstance(missing[i], str):
            counts[missing[i]] = counts.get(missing[i], 0) + 1
    return counts


def declared_not_produced(frame: pd.DataFrame) -> dict[str, int]:
    """Outputs whose run declared a signal not produced, by signal: shown for information
    only, since the policy alone decides which signals may be missing."""
    counts: dict[str, int] = {}
    if "signals" not in frame:
        return counts
    for s in frame["signals"]:
        if isinstance(s, dict):
            for name in s.get("not_produced") or ():
                counts[str(name)] = counts.get(str(name), 0) + 1
    return counts


def _number(value: Any, whole: bool) -> Any:
    """A logged number as the vectorised gate reads it (pd.to_numeric): a number stays, a
    numeric string becomes one, anything else is not logged (None)."""
    if isinstance(value, bool) or value is None:
        return None if value is None else value
    if isinstance(value, int | float):
        return value
    try:
        got = float(str(value))
    except ValueError:
        return None
    return int(got) if whole and got.is_integer() else got


def signals_of(logged: dict[str, Any]) -> Signals:
    """One output's logged signals as the gate's :class:`Signals`, read as :func:`redecide`
    reads them (so :func:`review.policy.gate.decide` on them decides the same)."""
    flags = {
        name: (v if isinstance(v := logged.get(name), bool) else None)
        for name in ("answerable", "ambiguous", "ungrounded")
    }
    mode = logged.get("ranking_mode")
    return Signals(
        ranking_mode=mode if isinstance(mode, str) else None,
        hits_after_filter=_number(logged.get("hits_after_filter"), whole=True),
        top_score=_number(logged.get("top_score"), whole=False),
        topics=_signal_value(logged, "topics"),
        **flags,
    )


def lacked(policy: NoAnswerPolicy, logged: dict[str, Any]) -> list[tuple[str, str]]:
    """Every signal the gate needed from one output's logged signals and could not use, with
    what was wrong ("NaN", "not logged", "not true or false ('yes')"), first first; empty when
    the gate decided without lacking any."""
    got = decide(policy, signals_of(logged))
    if got.rule != SIGNAL_MISSING:
        return []
    out: list[tuple[str, str]] = []
    for name, problem in got.problems:
        raw = logged.get(name)
        if problem == "not logged" and raw is not None:
            problem = f"not usable ({str(raw)[:40]!r})"
        out.append((name, problem))
    return out


def lacked_text(problems: list[tuple[str, str]]) -> str:
    """ "top score missing (NaN); answerable flag not logged" from :func:`lacked`: what a
    person reads (the keys stay in :func:`lacked`'s pairs, for programs)."""
    return "; ".join(f"{signal_label(name)} {problem_words(problem)}" for name, problem in problems)


def _the(name: str) -> str:
    """A gate signal in a sentence ("the top score"); other words as given."""
    return f"the {signal_label(name)}" if name in SIGNAL_LABELS else name
