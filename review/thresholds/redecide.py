"""Re-deciding run outputs from the gate signals they logged, with a given policy: the same
gate code (:func:`review.policy.gate.decide_frame`) that the bundled pipelines, replay and the
Thresholds page use. The release gate checks that a run's decisions reproduce under the policy
it gates; the dry-run validation decides each case with the policy being validated.

An output that logged no signals cannot be re-decided (``redecidable`` False): callers count
it as a failure, never as an answer. A signal the pipeline declared it does not produce
(``not_produced``: answerable, ambiguous, ungrounded) has its check skipped, as the policy's
``missing_signal.not_produced`` does; any other missing or malformed signal fails closed in
the gate (``signal_missing``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from review.policy.gate import RULE_MESSAGE_KEY, RULE_REASON_CODE, decide_frame
from review.policy.policy import SIGNAL_MISSING, SIGNALS, MissingSignalPolicy, NoAnswerPolicy

COLUMNS = ("decision", "rule", "reason_code", "message_key", "missing_signal", "redecidable")


def _declaring(policy: NoAnswerPolicy, not_produced: tuple[str, ...]) -> NoAnswerPolicy:
    """``policy`` with the pipeline's unproduced signals added to ``not_produced``."""
    if not not_produced:
        return policy
    ms = policy.missing_signal or MissingSignalPolicy(decision="abstain")
    declared = sorted({*ms.not_produced, *not_produced})
    return policy.model_copy(
        update={"missing_signal": ms.model_copy(update={"not_produced": declared})}
    )


def _signal_value(signals: dict[str, Any], name: str) -> Any:
    value = signals.get(name)
    if name == "topics":
        return None if value is None else tuple(value)
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
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, s in enumerate(logged):
        if s is not None:
            groups.setdefault(tuple(sorted(s.get("not_produced") or ())), []).append(i)
    for not_produced, positions in groups.items():
        table = pd.DataFrame(
            {name: [_signal_value(logged[i] or {}, name) for i in positions] for name in SIGNALS}
        )
        for name in ("hits_after_filter", "top_score"):
            table[name] = pd.to_numeric(table[name], errors="coerce").astype(float)
        for name in ("answerable", "ambiguous", "ungrounded"):
            table[name] = table[name].astype(object)
        decided = decide_frame(_declaring(policy, not_produced), table)
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
    missing = int((~again["redecidable"].astype(bool)).sum())
    differ = ok.loc[~same & again["redecidable"].astype(bool).to_numpy(), "key"].astype(str)
    parts = []
    if len(differ):
        shown = ", ".join(sorted(set(differ))[:5])
        parts.append(f"{len(differ)} decided otherwise ({shown})")
    if missing:
        parts.append(f"{missing} logged no signals")
    return k, n, "; ".join(parts)
