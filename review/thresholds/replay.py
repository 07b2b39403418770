"""Replay on production traces: apply the policy in force and a proposal to the logged
signals of every trace and count what the change flips, by slice, with audit verdicts."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine

from review.core.errors import InputError
from review.core.identity import Actor
from review.policy.policy import SIGNAL_MISSING, SIGNALS, NoAnswerPolicy


@dataclass(frozen=True)
class Replay:
    traces: int
    #: traces a policy cannot decide from what they logged (the gate fails closed on them:
    #: signal_missing under the policy in force or the proposal); never counted as flips
    not_replayable: int
    flips: pd.DataFrame  # before, after, slice, traces
    examples: pd.DataFrame  # a sample of flipped traces with their audit verdicts
    #: every flipped trace that was audited, counted by its verdict and what the change does
    #: to it: verdict, before, after, effect ("fixes", "breaks" or "neutral"), traces
    audited: pd.DataFrame
    #: not-replayable traces by the first signal they lack (signal -> traces)
    missing_signals: dict[str, int] = field(default_factory=dict)


def _topic_lists(column: pd.Series) -> pd.Series:
    """Topics as read by the driver (JSON text; a list where a driver decodes JSON) as tuples
    of keys; None stays None (not classified). Each distinct value is decoded once: a replay
    reads a million traces with a few hundred distinct topic lists."""
    import json

    def decoded(value: object) -> tuple[str, ...] | None:
        if isinstance(value, str):
            value = json.loads(value)
        if value is None:
            return None
        if not isinstance(value, list):
            raise InputError(f"traces.topics: expected a list of topic keys, got {value!r}")
        return tuple(str(v) for v in value)

    raw = column.astype(object)
    try:
        codes, uniques = pd.factorize(raw, use_na_sentinel=True)
    except TypeError:  # lists decoded by the driver are not hashable: key them as JSON text
        raw = pd.Series([json.dumps(v) if isinstance(v, list) else v for v in raw], dtype=object)
        codes, uniques = pd.factorize(raw, use_na_sentinel=True)
    table = np.empty(len(uniques) + 1, dtype=object)  # the last slot serves code -1 (None)
    for i, value in enumerate(uniques):
        table[i] = decoded(value)
    table[-1] = None
    return pd.Series(table[codes], index=column.index, dtype=object)


def not_replayable_text(replay: Replay) -> str:
    """One sentence on the traces a replay could not decide, by the signal they lack."""
    if not replay.not_replayable:
        return "Every trace logged the signals the gate needs."
    parts = ", ".join(
        f"{name} {n:,}" for name, n in sorted(replay.missing_signals.items(), key=lambda x: -x[1])
    )
    return (
        f"{replay.not_replayable:,} not replayable: they did not log a signal the gate needs "
        f"(first missing: {parts}); the gate would not answer them, and they are not counted "
        "as flips."
    )


#: Audit verdicts that say answering was right, and those that say it was wrong.
_ANSWER_RIGHT = frozenset({"supported_answer", "false_refusal"})
_ANSWER_WRONG = frozenset(
    {"unsupported_answer", "partially_supported", "restricted_leak", "correct_refusal"}
)


def flip_effect(verdict: str, before: str, after: str) -> str:
    """What a flip does to an audited trace: "fixes" when it moves towards what the verdict
    says was right (answer or not), "breaks" when it moves away, else "neutral" (a wording
    verdict, or a flip that keeps answering or keeps refusing, such as a caveat added)."""
    answers_before = before.split(" (")[0] in {"answer", "partial"}
    answers_after = after.split(" (")[0] in {"answer", "partial"}
    if answers_before == answers_after:
        return "neutral"
    if verdict in _ANSWER_RIGHT:
        return "fixes" if answers_after else "breaks"
    if verdict in _ANSWER_WRONG:
        return "breaks" if answers_after else "fixes"
    return "neutral"


#: The trace columns a replay reads: the id, every gate signal, the slice and the flag that
#: decides who may see a flipped trace.
_SIGNAL_COLUMNS = ("id", *SIGNALS, "customer_tier", "restricted")


def _signal_frames(engine: Engine, extra: list[str], batch: int) -> Iterator[pd.DataFrame]:
    """Every trace's logged gate signals (plus ``extra`` trace columns), in batches of
    ``batch`` rows in id order, as DataFrames ready for :func:`review.policy.gate.decide_frame`
    (topics decoded, restricted as bool)."""
    from sqlalchemy import Text, cast, select

    from storage.db import plain_rows, read_session
    from storage.models import Trace

    # topics as JSON text on both engines: PostgreSQL's driver would decode a million lists
    cols = [
        cast(Trace.topics, Text).label("topics") if name == "topics" else getattr(Trace, name)
        for name in (*_SIGNAL_COLUMNS, *extra)
    ]
    last = 0
    while True:
        with read_session(engine) as s:  # driver rows: a million Row objects cost seconds
            rows = plain_rows(
                s, select(*cols).where(Trace.id > last).order_by(Trace.id).limit(batch)
            )
        if not rows:
            return
        last = int(rows[-1][0])
        df = pd.DataFrame.from_records(rows, columns=[c.key for c in cols])
        df["restricted"] = df["restricted"].astype(bool)
        df["topics"] = _topic_lists(df["topics"])
        yield df


def replay_traces(
    engine: Engine,
    actor: Actor,
    current: NoAnswerPolicy,
    proposed: NoAnswerPolicy,
    *,
    batch: int = 100_000,
    examples: int = 200,
) -> Replay:
    """Apply both policies to the logged signals of every trace (in batches, vectorised) and
    count the decisions that flip, by slice (customer tier), with the audit verdicts of
    flipped traces where they exist. Restricted traces are counted but only listed for users
    with clearance. A trace either policy cannot decide from its logged signals (the gate
    fails closed with signal_missing) is counted as not replayable, by the signal it lacks,
    and never as a flip."""
    from sqlalchemy import select

    from review.policy.gate import decide_frame
    from review.traces import browse
    from storage.db import read_session
    from storage.models import AuditItem, AuditVerdict, Trace

    browse.require_view(actor)
    with read_session(engine) as s:  # audited traces are few: their latest verdict each
        verdict_of = dict(
            s.execute(
                select(AuditItem.trace_pk, AuditVerdict.verdict)
                .join(AuditVerdict, AuditVerdict.item_id == AuditItem.id)
                .order_by(AuditVerdict.id)
            ).all()
        )
    audited_counts: dict[tuple[str, str, str], int] = {}
    counts: dict[tuple[str, str, str], int] = {}
    sample: list[dict[str, Any]] = []
    total = not_replayable = 0
    missing_signals: dict[str, int] = {}
    for df in _signal_frames(engine, [], batch):
        total += len(df)
        before = decide_frame(current, df)
        after = decide_frame(proposed, df)
        lacking = (before["rule"] == SIGNAL_MISSING) | (after["rule"] == SIGNAL_MISSING)
        if lacking.any():
            not_replayable += int(lacking.sum())
            first = (
                before["missing_signal"]
                .astype(object)
                .where(before["rule"] == SIGNAL_MISSING, after["missing_signal"].astype(object))
            )
            for name, n in first[lacking].value_counts().items():
                missing_signals[str(name)] = missing_signals.get(str(name), 0) + int(n)
            keep = ~lacking
            df, before, after = df[keep], before[keep], after[keep]
        # a flip is a changed decision or caveat; its words are made for flipped rows only
        changed = (before["decision"].astype(object) != after["decision"].astype(object)) | (
            before["caveat"].to_numpy(dtype=bool) != after["caveat"].to_numpy(dtype=bool)
        )
        if not changed.any():
            continue
        bc, ac = before[changed], after[changed]
        flipped = df[changed].assign(
            before=bc["decision"].astype(str) + np.where(bc["caveat"], " (caveat)", ""),
            after=ac["decision"].astype(str) + np.where(ac["caveat"], " (caveat)", ""),
            rule=ac["rule"].astype(str),
        )
        tier = flipped["customer_tier"].fillna("(none)")
        for (bb, aa, tt), n in (
            flipped.groupby([flipped["before"], flipped["after"], tier]).size().items()
        ):
            counts[(str(bb), str(aa), str(tt))] = counts.get((str(bb), str(aa), str(tt)), 0) + int(
                n
            )
        if verdict_of:
            hit = flipped[flipped["id"].isin(list(verdict_of))]
            for pk, bb, aa in zip(hit["id"], hit["before"], hit["after"], strict=True):
                key = (str(verdict_of[int(pk)]), str(bb), str(aa))
                audited_counts[key] = audited_counts.get(key, 0) + 1
        if len(sample) < examples:
            visible = flipped if actor.clearance else flipped[~flipped["restricted"]]
            sample.extend(visible.head(examples - len(sample)).to_dict(orient="records"))
    flips = pd.DataFrame(
        [
            {"before": k[0], "after": k[1], "slice": k[2], "traces": v}
            for k, v in sorted(counts.items())
        ],
        columns=["before", "after", "slice", "traces"],
    )
    ex = pd.DataFrame(sample)
    if not ex.empty:
        ids = [int(i) for i in ex["id"]]
        with read_session(engine) as s:
            found = s.execute(
                select(Trace.id, Trace.trace_id, Trace.at).where(Trace.id.in_(ids))
            ).all()
            named = {int(r[0]): (r[1], r[2]) for r in found}
            ex["trace_id"] = [named[i][0] for i in ids]
            ex["at"] = [named[i][1] for i in ids]
            latest = dict(
                s.execute(
                    select(AuditItem.trace_pk, AuditVerdict.verdict)
                    .join(AuditVerdict, AuditVerdict.item_id == AuditItem.id)
                    .where(AuditItem.trace_pk.in_(ids))
                    .order_by(AuditVerdict.id)
                ).all()
            )
        ex["audit verdict"] = [latest.get(int(i), "") for i in ex["id"]]
        ex = ex[
            [
                "trace_id",
                "at",
                "customer_tier",
                "ranking_mode",
                "top_score",
                "hits_after_filter",
                "before",
                "after",
                "rule",
                "audit verdict",
            ]
        ]
    audited = pd.DataFrame(
        [
            {
                "verdict": v,
                "before": b,
                "after": a,
                "effect": flip_effect(v, b, a),
                "traces": n,
            }
            for (v, b, a), n in sorted(audited_counts.items())
        ],
        columns=["verdict", "before", "after", "effect", "traces"],
    )
    return Replay(total, not_replayable, flips, ex, audited, missing_signals)


# ---------------------------------------------------------------------------------------
# Does a policy reproduce what production logged?

#: The decisions the threshold gate makes (a logged ``partial`` is an answer the claim check
#: cut down after generation: see :func:`reproduce_logged`).
_GATE_DECISIONS = frozenset({"answer", "abstain", "clarify", "escalate"})
#: A logged answer with this reason code was given with the caveat (as review.traces.rollup).
_CAVEAT_REASON = "support_below_threshold"
#: Pseudo-signals a logged decision may lack, beside the gate's own signals.
NO_LOGGED_DECISION = "decision"
CLAIM_COVERAGE = "claim_coverage"


@dataclass(frozen=True)
class Reproduction:
    """How far a policy, replayed on the logged signals, gives the decisions production
    logged. ``reproduced + len(differing rows) + not_replayable == traces``."""

    traces: int
    reproduced: int
    #: logged, replayed, policy (the version the trace logged), traces
    differing: pd.DataFrame
    not_replayable: int
    #: not-replayable traces by what they lack: a gate signal, ``decision`` (nothing logged)
    #: or ``claim_coverage`` (a logged partial the gate lets through: the claim check that
    #: cut it down after generation is not logged)
    missing_signals: dict[str, int] = field(default_factory=dict)
    examples: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def differing_traces(self) -> int:
        return int(self.differing["traces"].sum()) if not self.differing.empty else 0


def _logged_label(decision: pd.Series, reason: pd.Series) -> pd.Series:
    caveat = (decision == "answer") & (reason == _CAVEAT_REASON)
    return decision.astype(object).where(~caveat, "answer (caveat)")


def reproduce_logged(
    engine: Engine,
    actor: Actor,
    policy: NoAnswerPolicy,
    *,
    batch: int = 100_000,
    examples: int = 50,
) -> Reproduction:
    """Replay ``policy`` on every trace's logged signals and compare with the decision the
    trace logged (an answer logged with reason ``support_below_threshold`` is an answer with
    the caveat). A trace is *not replayable* when the gate fails closed on it (a signal was
    not logged), when it logged no decision, or when it logged ``partial`` and the gate lets
    it through to generation (the claim coverage that made it partial is not in the trace).
    Every other trace either reproduces its logged decision or is counted as differing, by
    logged decision, replayed decision and the policy version the trace names. Restricted
    traces are counted; only users with clearance see them among the examples."""
    from review.policy.gate import decide_frame
    from review.traces import browse

    browse.require_view(actor)
    total = reproduced = not_replayable = 0
    missing: dict[str, int] = {}
    counts: dict[tuple[str, str, str], int] = {}
    sample: list[dict[str, Any]] = []

    def lacking(name: str, n: int) -> None:
        missing[name] = missing.get(name, 0) + n

    for df in _signal_frames(
        engine, ["trace_id", "decision", "reason_code", "policy_version"], batch
    ):
        total += len(df)
        out = decide_frame(policy, df)
        replayed = out["decision"].astype(str) + np.where(out["caveat"], " (caveat)", "")
        logged = _logged_label(df["decision"], df["reason_code"])
        gate_missing = out["rule"] == SIGNAL_MISSING
        none_logged = df["decision"].isna() & ~gate_missing
        partial = (df["decision"] == "partial") & (out["decision"] == "answer") & ~gate_missing
        for name, n in (
            out.loc[gate_missing, "missing_signal"].astype(object).value_counts().items()
        ):
            lacking(str(name), int(n))
        if none_logged.any():
            lacking(NO_LOGGED_DECISION, int(none_logged.sum()))
        if partial.any():
            lacking(CLAIM_COVERAGE, int(partial.sum()))
        skip = gate_missing | none_logged | partial
        not_replayable += int(skip.sum())
        same = ~skip & (logged == replayed)
        reproduced += int(same.sum())
        diff = ~skip & ~same
        if not diff.any():
            continue
        d = df[diff].assign(logged=logged[diff], replayed=replayed[diff])
        version = d["policy_version"].fillna("(none)")
        for (lg, rp, pv), n in d.groupby([d["logged"], d["replayed"], version]).size().items():
            key = (str(lg), str(rp), str(pv))
            counts[key] = counts.get(key, 0) + int(n)
        if len(sample) < examples:
            visible = d if actor.clearance else d[~d["restricted"]]
            cols = [
                "trace_id",
                "policy_version",
                "logged",
                "replayed",
                "ranking_mode",
                "top_score",
                "hits_after_filter",
            ]
            sample.extend(visible[cols].head(examples - len(sample)).to_dict(orient="records"))
    differing = pd.DataFrame(
        [
            {"logged": k[0], "replayed": k[1], "policy": k[2], "traces": v}
            for k, v in sorted(counts.items(), key=lambda kv: -kv[1])
        ],
        columns=["logged", "replayed", "policy", "traces"],
    )
    return Reproduction(total, reproduced, differing, not_replayable, missing, pd.DataFrame(sample))


def reproduction_text(r: Reproduction, policy_name: str) -> str:
    """One paragraph: how many logged decisions ``policy_name`` reproduces, how many differ,
    and what the not-replayable traces lack."""
    if not r.traces:
        return "No traces are stored: there is nothing to replay."
    replayable = r.traces - r.not_replayable
    head = (
        f"{policy_name} reproduces {r.reproduced:,} of the {replayable:,} logged decision(s) "
        f"it can replay"
    )
    if r.differing_traces:
        head += f"; {r.differing_traces:,} differ (below)"
    else:
        head += "; none differs" if replayable else ""
    parts = ", ".join(
        f"{_LACK_WORDS.get(name, name)} {n:,}"
        for name, n in sorted(r.missing_signals.items(), key=lambda x: -x[1])
    )
    tail = (
        f" {r.not_replayable:,} of {r.traces:,} trace(s) are not replayable ({parts})."
        if r.not_replayable
        else f" Every one of the {r.traces:,} trace(s) is replayable."
    )
    return head + "." + tail


_LACK_WORDS = {
    NO_LOGGED_DECISION: "no logged decision",
    CLAIM_COVERAGE: "partial answers whose claim coverage is not logged",
}
