"""Replay on production traces: apply the policy in force and a proposal to the logged
signals of every trace and count what the change flips, by slice, with audit verdicts."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from sqlalchemy import Engine

from review.core import clearance, readable
from review.core.errors import InputError
from review.core.identity import Actor
from review.policy.policy import SIGNAL_MISSING, SIGNALS, NoAnswerPolicy, signal_label


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


def lacking_banner(missing: dict[str, int]) -> str:
    """For the top of a replay's result: how many traces lacked which input, so the gate
    refused them ("93 traces lacked answerable; 4 lacked top_score"); empty when none did."""
    from review.thresholds.redecide import lacking_sentence

    words = {"decision": "a logged decision", "claim_coverage": "a logged claim coverage"}
    named = {words.get(k, k): v for k, v in missing.items()}
    text = lacking_sentence(named, "traces")
    return f"Not decided, an input was missing: {text}." if text else ""


def not_replayable_text(replay: Replay) -> str:
    """One sentence on the traces a replay could not decide, by the signal they lack."""
    if not replay.not_replayable:
        return "Every trace logged the signals the gate needs."
    parts = ", ".join(
        f"{signal_label(name)} {n:,}"
        for name, n in sorted(replay.missing_signals.items(), key=lambda x: -x[1])
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


def _signal_columns(extra: list[str]) -> list[Any]:
    from sqlalchemy import Text, cast

    from storage.models import Trace

    # topics as JSON text on both engines: PostgreSQL's driver would decode a million lists
    return [
        cast(Trace.topics, Text).label("topics") if name == "topics" else getattr(Trace, name)
        for name in (*_SIGNAL_COLUMNS, *extra)
    ]


def _signal_frame(rows: list[tuple[Any, ...]], cols: list[Any]) -> pd.DataFrame:
    """Driver rows of :func:`_signal_columns` as a frame ready for ``decide_frame``."""
    df = pd.DataFrame.from_records(rows, columns=[c.key for c in cols])
    df["restricted"] = df["restricted"].astype(bool)
    df["topics"] = _topic_lists(df["topics"])
    return df


def _signal_frames(
    engine: Engine, extra: list[str], batch: int, where: Any = None, *, first: int | None = None
) -> Iterator[pd.DataFrame]:
    """Every trace's logged gate signals (plus ``extra`` trace columns; only the traces
    ``where`` selects, when given), in batches of ``batch`` rows in id order, as DataFrames
    ready for :func:`review.policy.gate.decide_frame` (topics decoded, restricted as bool).
    ``first``: the first batch holds that many rows, each next one twice as many, up to
    ``batch`` (for a caller that may stop early)."""
    from sqlalchemy import select, true

    from storage.db import plain_rows, read_session
    from storage.models import Trace

    cols = _signal_columns(extra)
    last = 0
    size = batch if first is None else max(1, min(first, batch))
    while True:
        with read_session(engine) as s:  # driver rows: a million Row objects cost seconds
            rows = plain_rows(
                s,
                select(*cols)
                .where(Trace.id > last, true() if where is None else where)
                .order_by(Trace.id)
                .limit(size),
            )
        if not rows:
            return
        last = int(rows[-1][0])
        size = min(batch, size * 2)
        yield _signal_frame(rows, cols)


def _words(out: pd.DataFrame) -> pd.Series:
    return out["decision"].astype(str) + np.where(out["caveat"], " (caveat)", "")


@dataclass
class Tally:
    """What a replay counts, added up over frames of traces (or of groups of traces, each
    row weighing the traces it stands for)."""

    current: NoAnswerPolicy
    proposed: NoAnswerPolicy
    traces: int = 0
    not_replayable: int = 0
    missing_signals: dict[str, int] = field(default_factory=dict)
    counts: dict[tuple[str, str, str], int] = field(default_factory=dict)

    def add(self, df: pd.DataFrame, weight: npt.NDArray[np.int64] | None = None) -> pd.DataFrame:
        """Decide ``df`` under both policies and count it; returns its flipped rows with
        ``before``, ``after`` and ``rule`` (the proposal's), and ``weight``."""
        from review.policy.gate import decide_frame

        w = np.ones(len(df), dtype=np.int64) if weight is None else np.asarray(weight)
        self.traces += int(w.sum())
        before = decide_frame(self.current, df)
        after = decide_frame(self.proposed, df)
        lacking = ((before["rule"] == SIGNAL_MISSING) | (after["rule"] == SIGNAL_MISSING)).to_numpy(
            dtype=bool
        )
        if lacking.any():
            self.not_replayable += int(w[lacking].sum())
            first = (
                before["missing_signal"]
                .astype(object)
                .where(before["rule"] == SIGNAL_MISSING, after["missing_signal"].astype(object))
            )
            named = pd.Series(w[lacking], index=first[lacking].astype(str).to_numpy())
            for name, n in named.groupby(level=0).sum().items():
                self.missing_signals[str(name)] = self.missing_signals.get(str(name), 0) + int(n)
            keep = ~lacking
            df, before, after, w = df[keep], before[keep], after[keep], w[keep]
        # a flip is a changed decision or caveat; its words are made for flipped rows only
        changed = (
            (before["decision"].astype(object) != after["decision"].astype(object)).to_numpy(
                dtype=bool
            )
        ) | (before["caveat"].to_numpy(dtype=bool) != after["caveat"].to_numpy(dtype=bool))
        if not changed.any():
            return df.iloc[0:0].assign(before="", after="", rule="", weight=0)
        bc, ac = before[changed], after[changed]
        flipped = df[changed].assign(
            before=_words(bc), after=_words(ac), rule=ac["rule"].astype(str), weight=w[changed]
        )
        tier = flipped["customer_tier"].fillna("(none)")
        sums = flipped.groupby([flipped["before"], flipped["after"], tier])["weight"].sum()
        for (bb, aa, tt), n in sums.items():
            key = (str(bb), str(aa), str(tt))
            self.counts[key] = self.counts.get(key, 0) + int(n)
        return flipped

    def flips(self) -> pd.DataFrame:
        return pd.DataFrame(
            [
                {"before": k[0], "after": k[1], "slice": k[2], "traces": v}
                for k, v in sorted(self.counts.items())
            ],
            columns=["before", "after", "slice", "traces"],
        )


def _latest_verdicts(engine: Engine, ids: list[int] | None = None) -> dict[int, str]:
    """The latest audit verdict of each audited trace (of ``ids``, when given)."""
    from sqlalchemy import select

    from storage.db import read_session
    from storage.models import AuditItem, AuditVerdict

    out: dict[int, str] = {}
    with read_session(engine) as s:
        stmt = (
            select(AuditItem.trace_pk, AuditVerdict.verdict)
            .join(AuditVerdict, AuditVerdict.item_id == AuditItem.id)
            .order_by(AuditVerdict.id)
        )
        if ids is None:
            out.update((int(k), str(v)) for k, v in s.execute(stmt).all())
        else:
            for start in range(0, len(ids), 900):
                chunk = stmt.where(AuditItem.trace_pk.in_(ids[start : start + 900]))
                out.update((int(k), str(v)) for k, v in s.execute(chunk).all())
    return out


def _examples_frame(engine: Engine, sample: list[dict[str, Any]]) -> pd.DataFrame:
    """The flipped traces shown as examples, named and with their latest audit verdict."""
    from sqlalchemy import select

    from storage.db import read_session
    from storage.models import Trace

    ex = pd.DataFrame(sample)
    if ex.empty:
        return ex
    ids = [int(i) for i in ex["id"]]
    named: dict[int, tuple[Any, Any]] = {}
    with read_session(engine) as s:
        for start in range(0, len(ids), 900):
            found = s.execute(
                select(Trace.id, Trace.trace_id, Trace.at).where(
                    Trace.id.in_(ids[start : start + 900])
                )
            ).all()
            named.update({int(r[0]): (r[1], r[2]) for r in found})
    latest = _latest_verdicts(engine, ids)
    ex["trace_id"] = [named[i][0] for i in ids]
    ex["at"] = [named[i][1] for i in ids]
    ex["audit verdict"] = [latest.get(i, "") for i in ids]
    return ex[
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


def _audited_frame(audited_counts: dict[tuple[str, str, str], int]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"verdict": v, "before": b, "after": a, "effect": flip_effect(v, b, a), "traces": n}
            for (v, b, a), n in sorted(audited_counts.items())
        ],
        columns=["verdict", "before", "after", "effect", "traces"],
    )


def replay_traces(
    engine: Engine,
    actor: Actor,
    current: NoAnswerPolicy,
    proposed: NoAnswerPolicy,
    *,
    batch: int = 100_000,
    examples: int = 200,
) -> Replay:
    """Apply both policies to the logged signals of every trace and count the decisions that
    flip, by slice (customer tier), with the audit verdicts of flipped traces where they exist.
    Restricted traces are counted but only listed for users with clearance. A trace either
    policy cannot decide from its logged signals (the gate fails closed with signal_missing) is
    counted as not replayable, by the signal it lacks, and never as a flip.

    The traces are read as the groups of ``trace_signal_groups`` (migration 0022): each group
    is decided once, except the score bins that hold a threshold or a range bound of either
    policy and the scores that are not binned, whose traces are decided one by one. The
    examples are the first flipped traces in id order. When the groups do not add up to the
    stored traces (written past the triggers), every trace is read instead
    (:func:`replay_traces_scan`)."""
    from review.traces import browse

    browse.require_view(actor)
    read = _grouped_replay(engine, current, proposed, batch)
    if read is None:
        return replay_traces_scan(engine, actor, current, proposed, batch=batch, examples=examples)
    tally, flipped_where = read
    sample: list[dict[str, Any]] = []
    if flipped_where is not None and examples > 0:
        from storage.models import Trace

        where = flipped_where if clearance.cleared(actor) else flipped_where & ~Trace.restricted
        # the condition holds for few traces (the score bins between the two thresholds), so
        # SQLite walks the traces in id order to find them: small batches first, growing,
        # read about as many traces as the examples need (5,000 at once scanned half the
        # traces of a 1M database for 200 examples)
        for df in _signal_frames(engine, [], min(batch, 5_000), where, first=4 * examples):
            flipped = Tally(current, proposed).add(df)
            sample.extend(
                flipped.drop(columns="weight").head(examples - len(sample)).to_dict("records")
            )
            if len(sample) >= examples:
                break
    audited_counts: dict[tuple[str, str, str], int] = {}
    verdict_of = _latest_verdicts(engine)
    if verdict_of and tally.counts:
        from storage.models import Trace

        ids = sorted(verdict_of)
        for start in range(0, len(ids), 900):
            chunk = Trace.id.in_(ids[start : start + 900])
            for df in _signal_frames(engine, [], batch, chunk):
                flipped = Tally(current, proposed).add(df)
                for pk, bb, aa in zip(
                    flipped["id"], flipped["before"], flipped["after"], strict=True
                ):
                    key = (verdict_of[int(pk)], str(bb), str(aa))
                    audited_counts[key] = audited_counts.get(key, 0) + 1
    return Replay(
        tally.traces,
        tally.not_replayable,
        tally.flips(),
        _examples_frame(engine, sample),
        _audited_frame(audited_counts),
        tally.missing_signals,
    )


#: The columns of a signal group (storage.models.TraceSignalGroup) a replay reads.
GROUP_COLUMNS = (
    "ranking_mode",
    "hits_after_filter",
    "score_kind",
    "score_bin",
    "answerable",
    "ambiguous",
    "ungrounded",
    "topics",
    "customer_tier",
    "n",
)


def _cuts(*policies: NoAnswerPolicy) -> set[float]:
    """Every score a policy compares with: each mode's thresholds and score range bounds."""
    import math

    out: set[float] = set()
    for policy in policies:
        for mode in policy.ranking_modes:
            th = policy.thresholds_for(mode)
            for value in (th.refuse_below, th.caveat_below, th.score_min, th.score_max):
                if value is not None and math.isfinite(value):
                    out.add(float(value))
    return out


def _bin_range(b: int) -> tuple[float, float]:
    from storage.models import SCORE_BIN_SCALE

    return b / SCORE_BIN_SCALE, (b + 1) / SCORE_BIN_SCALE


def _grouped_replay(
    engine: Engine, current: NoAnswerPolicy, proposed: NoAnswerPolicy, batch: int
) -> tuple[Tally, Any] | None:
    """Count the replay from the signal groups and the traces of the bins that hold a
    threshold (one snapshot); with a condition on ``traces`` that holds for every flipped trace
    (None: nothing flips). None when the groups do not add up to the stored traces."""
    import math

    from sqlalchemy import and_, or_, select

    from storage import population_groups
    from storage.db import plain_rows, read_session
    from storage.models import (
        SCORE_BIN_LIMIT,
        SCORE_BIN_SCALE,
        SCORE_BINNED,
        SCORE_NONE,
        SCORE_OTHER,
        Trace,
        TraceSignalGroup,
    )

    g = TraceSignalGroup
    exact_bins = {
        math.floor(c * SCORE_BIN_SCALE)
        for c in _cuts(current, proposed)
        if abs(c) < SCORE_BIN_LIMIT
    }
    tally = Tally(current, proposed)
    with read_session(engine) as s:
        if engine.dialect.name == "postgresql":  # one snapshot for every statement
            s.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        rows = plain_rows(s, select(*(getattr(g, c) for c in GROUP_COLUMNS)).where(g.n > 0))
        # the number of traces from the counter the triggers keep in the same transactions
        # as the groups (storage.population_groups): a count(*) read 10M rows for 1-2 s
        stored = population_groups.trace_count(s)
        if sum(int(r[9]) for r in rows) != stored:
            return None
        groups = pd.DataFrame.from_records(rows, columns=list(GROUP_COLUMNS))
        kind = groups["score_kind"].to_numpy(dtype=np.int64) if len(groups) else np.zeros(0)
        bins = groups["score_bin"].astype("Int64")
        exact = (kind == SCORE_OTHER) | (
            (kind == SCORE_BINNED)
            & bins.isin(list(exact_bins)).to_numpy(dtype=bool, na_value=False)
        )
        # the traces of those groups, one by one (every bin is a half-open score range)
        held = set(bins[kind == SCORE_BINNED].dropna().astype(int)) & exact_bins
        ranges = [
            and_(
                Trace.top_score >= _bin_range(b)[0],
                Trace.top_score < _bin_range(b)[1],
                Trace.top_score > -SCORE_BIN_LIMIT,  # never a score that is not binned
                Trace.top_score < SCORE_BIN_LIMIT,
            )
            for b in sorted(held)
        ]
        if (kind == SCORE_OTHER).any():
            ranges.append(_unbinned(engine))
        one_by_one = pd.DataFrame()
        if ranges:
            cols = _signal_columns([])
            # a statement per range: on PostgreSQL each is an index-only scan of the score
            # index, which holds these columns (migration 0042); one statement of all the
            # ranges is a bitmap scan of the rows, 80,000 random pages a bin at 10M traces
            rows = [r for part in ranges for r in plain_rows(s, select(*cols).where(part))]
            one_by_one = _signal_frame(rows, cols)
    flipped_where: list[Any] = []
    if len(one_by_one):
        flipped = tally.add(one_by_one)
        if len(flipped):
            flipped_where.append(or_(*ranges))
    decided = groups[~exact]
    if len(decided):
        score = np.where(
            decided["score_kind"].to_numpy() == SCORE_NONE,
            np.nan,
            (decided["score_bin"].astype("float64").to_numpy() + 0.5) / SCORE_BIN_SCALE,
        )
        frame = decided.drop(columns=["score_kind", "score_bin", "n"]).assign(top_score=score)
        frame["topics"] = _topic_lists(frame["topics"])
        flipped = tally.add(frame, decided["n"].to_numpy(dtype=np.int64))
        if len(flipped):
            flipped_where.append(_flipped_groups(decided.loc[flipped.index]))
    if not tally.counts:
        return tally, None
    return tally, or_(*flipped_where)


def _unbinned(engine: Engine) -> Any:
    """The traces whose score is not binned (score kind 2)."""
    from sqlalchemy import func, or_

    from storage.models import SCORE_BIN_LIMIT, Trace

    big = or_(Trace.top_score >= SCORE_BIN_LIMIT, Trace.top_score <= -SCORE_BIN_LIMIT)
    if engine.dialect.name == "sqlite":  # text or a blob where a number belongs
        return or_(big, func.typeof(Trace.top_score).not_in(["integer", "real", "null"]))
    return big  # NaN is larger than every number in PostgreSQL


def _flipped_groups(groups: pd.DataFrame) -> Any:
    """A condition on ``traces`` that holds for every trace of ``groups`` (binned scores or
    none): their ranking modes and score bins, adjacent bins merged into one range."""
    from sqlalchemy import and_, or_

    from storage.models import SCORE_NONE, Trace

    modes = groups["ranking_mode"].astype(object)
    named = sorted({str(m) for m in modes if isinstance(m, str)})
    mode_ok = [Trace.ranking_mode.in_(named)] if named else []
    if modes.isna().any():
        mode_ok.append(Trace.ranking_mode.is_(None))
    score_ok: list[Any] = []
    if (groups["score_kind"] == SCORE_NONE).any():
        score_ok.append(Trace.top_score.is_(None))
    bins = sorted({int(b) for b in groups["score_bin"].dropna()})
    i = 0
    while i < len(bins):
        j = i
        while j + 1 < len(bins) and bins[j + 1] == bins[j] + 1:
            j += 1
        lo, hi = _bin_range(bins[i])[0], _bin_range(bins[j])[1]
        score_ok.append(and_(Trace.top_score >= lo, Trace.top_score < hi))
        i = j + 1
    return and_(or_(*mode_ok), or_(*score_ok))


def replay_traces_scan(
    engine: Engine,
    actor: Actor,
    current: NoAnswerPolicy,
    proposed: NoAnswerPolicy,
    *,
    batch: int = 100_000,
    examples: int = 200,
) -> Replay:
    """:func:`replay_traces` reading every trace one by one (in batches, vectorised): the
    reference the grouped replay is tested against, and its fallback."""
    from review.traces import browse

    browse.require_view(actor)
    verdict_of = _latest_verdicts(engine)
    audited_counts: dict[tuple[str, str, str], int] = {}
    tally = Tally(current, proposed)
    sample: list[dict[str, Any]] = []
    for df in _signal_frames(engine, [], batch):
        flipped = tally.add(df).drop(columns="weight")
        if flipped.empty:
            continue
        if verdict_of:
            hit = flipped[flipped["id"].isin(list(verdict_of))]
            for pk, bb, aa in zip(hit["id"], hit["before"], hit["after"], strict=True):
                key = (str(verdict_of[int(pk)]), str(bb), str(aa))
                audited_counts[key] = audited_counts.get(key, 0) + 1
        if len(sample) < examples:
            visible = flipped if clearance.cleared(actor) else flipped[~flipped["restricted"]]
            sample.extend(visible.head(examples - len(sample)).to_dict(orient="records"))
    return Replay(
        tally.traces,
        tally.not_replayable,
        tally.flips(),
        _examples_frame(engine, sample),
        _audited_frame(audited_counts),
        tally.missing_signals,
    )


# ---------------------------------------------------------------------------------------
# Does a policy reproduce what production logged?

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
            visible = d if clearance.cleared(actor) else d[~d["restricted"]]
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
        f"{policy_name} reproduces {r.reproduced:,} of the "
        f"{readable.count(replayable, 'logged decision')} "
        f"it can replay"
    )
    if r.differing_traces:
        head += f"; {r.differing_traces:,} differ (below)"
    else:
        head += "; none differs" if replayable else ""
    parts = ", ".join(
        f"{_LACK_WORDS.get(name) or signal_label(name)} {n:,}"
        for name, n in sorted(r.missing_signals.items(), key=lambda x: -x[1])
    )
    tail = (
        f" {r.not_replayable:,} of {readable.count(r.traces, 'trace')} "
        f"{readable.plural(r.not_replayable, 'is', 'are')} not replayable ({parts})."
        if r.not_replayable
        else f" Every one of the {readable.count(r.traces, 'trace')} is replayable."
    )
    return head + "." + tail


_LACK_WORDS = {
    NO_LOGGED_DECISION: "no logged decision",
    CLAIM_COVERAGE: "partial answers whose claim coverage is not logged",
}


def replay_stamp(engine: Engine) -> tuple[int, ...]:
    """What a replay reads, as a cache key (cheap look-ups at index ends): the traces (never
    edited: their number, highest id, newest import and purges; the signal groups follow
    them by trigger) and the audit verdicts (append-only: the newest id, and the audit items
    and verdicts counted). With the two policies' texts it says when a replay must be done
    again."""
    from sqlalchemy import func, select

    from review.traces.retention import RUN_ENTITY as PURGES
    from storage import population_groups
    from storage.db import read_session
    from storage.models import AuditItem, AuditVerdict, Counter, Trace, TraceImport

    def one(stmt: Any) -> Any:
        return stmt.scalar_subquery()

    with read_session(engine) as s:
        # the number of traces from the counter the triggers keep (storage.population_groups;
        # a count(*) read every trace, 1-2 s at ten million)
        n = population_groups.trace_count(s)
        # each a subquery of its own: SQLite reads one end of an index for a lone max()
        row = s.execute(
            select(
                one(select(func.coalesce(func.max(Trace.id), 0))),
                one(select(func.coalesce(func.max(TraceImport.id), 0))),
                one(
                    select(func.coalesce(func.max(Counter.value), 0)).where(Counter.name == PURGES)
                ),
                one(select(func.coalesce(func.max(AuditVerdict.id), 0))),
                one(select(func.count()).select_from(AuditVerdict)),
                one(select(func.count()).select_from(AuditItem)),
            )
        ).one()
    return (int(n), *(int(v or 0) for v in row))
