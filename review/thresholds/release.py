"""The release gate (CLI ``workbench gate``, the monthly review; docs/release-gate.md): every
row of both sides of the boundary and of the release table, overall and on every high-harm
slice (the slices the policy gates), each with the count behind it.

Rows and their bounds (each row's ``source`` is one of :data:`SOURCES`):

- both sides of the boundary: answer coverage on cases expecting ``answer``
  (``targets.min_answer_rate_answerable``), false-refusal rate (``max_false_refusal_rate``),
  abstention recall (``min_abstention_recall``), unsupported-answer rate over the cases that
  require abstention (``max_unsupported_answer_rate``);
- the release table: supported-answer rate, reason-code accuracy over all non-answers,
  citation validity over all answers (``release.*``), and drift against a baseline run when
  one is given (``release.max_boundary_drift``: neither the false-refusal nor the
  unsupported-answer rate may move by more);
- the policy's own slice gates, per slice;
- when the run logs the gate's signals: the decisions reproduce under the gated policy (the
  same gate code, :mod:`review.thresholds.redecide`), which alone says which signals may be
  missing;
- every case in scope has an output (given the cases in scope, as ``workbench gate`` does):
  an infrastructure failure is an output, counted on both sides; a case with none fails the
  row, overall and on each gated slice it belongs to;
- every non-answer carries a reason code: the count of those without one, failing above 0,
  whatever reason-code accuracy says.

Figures are those of :mod:`review.evaluation.runmetrics` (docs/metrics.md), except that
an infrastructure failure counts here as a wrong decision on both sides (a build that cannot
answer fails the gate; it never passes as a refusal). A row whose denominator is empty fails
with the reason (a gated slice with no cases fails), never "n/a". On a slice, a row of the
boundary or the release table that the policy does not gate there is checked with the
overall bound when the slice has cases it applies to, and listed as not measured (with the
reason) otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from review.core import readable
from review.core.errors import InputError
from review.core.frames import isin_text
from review.core.sampling import wilson_bounds
from review.evaluation import runmetrics
from review.policy.policy import TARGET_METRICS, NoAnswerPolicy
from review.thresholds import redecide

TOLERANCE = 1e-9

#: where a row's rule comes from: the "source" column of the gate's table, each explained in
#: docs/release-gate.md
SOURCES: dict[str, str] = {
    "boundary": "both sides of the boundary: the no-answer policy's targets",
    "release": "the release table: the policy's release bounds",
    "slice gate": "a high-harm slice's own bound in the policy",
    "policy": "a bound the policy sets on the selective analysis",
    "complete": "nothing missing: an output for every case, a reason for every refusal",
    "one gate": "the logged decisions reproduce under the gated policy",
}


@dataclass(frozen=True)
class GateRow:
    row: str  # what is checked, in words
    source: str  # a key of SOURCES
    scope: str  # "overall" or "slice:<key>"
    rule: str  # e.g. "abstention_recall >= 0.9"
    value: float  # NaN: undefined (the row fails, ``why`` says why)
    k: int
    n: int
    passed: bool
    why: str = ""  # why it failed ("3 of 4 below the bound", "undefined: no cases ...")

    @property
    def counts(self) -> str:
        return f"{self.k} of {self.n}"


@dataclass(frozen=True)
class GateReport:
    rows: list[GateRow]
    #: rows of the notes not measured, and why (a slice without cases of the kind, no baseline)
    not_measured: list[str] = field(default_factory=list)
    cases: int = 0
    split: str = "test"

    @property
    def passed(self) -> bool:
        return bool(self.rows) and all(r.passed for r in self.rows)

    @property
    def failed(self) -> list[GateRow]:
        return [r for r in self.rows if not r.passed]


#: metric -> (the row in words, its source)
_ROWS: dict[str, tuple[str, str]] = {
    "answer_rate_answerable": ("Answer coverage on answerable cases", "boundary"),
    "false_refusal_rate": ("False-refusal rate", "boundary"),
    "abstention_recall": ("Abstention recall", "boundary"),
    "unsupported_answer_rate": ("Unsupported-answer rate", "boundary"),
    "supported_answer_rate": ("Supported-answer rate", "release"),
    "reason_code_accuracy": ("Reason-code accuracy", "release"),
    "citation_validity": ("Citation validity", "release"),
    "coverage": ("Coverage", "policy"),
    "selective_risk": ("Selective risk", "policy"),
}
_DENOMINATOR = {
    **runmetrics.DENOMINATORS,
    "answer_rate_answerable": runmetrics.DENOMINATORS["false_refusal_rate"],
    "coverage": "cases",
    "selective_risk": "answers",
}
#: metric -> "min" / "max" for the rows of the notes
_KIND = {
    "answer_rate_answerable": "min",
    "false_refusal_rate": "max",
    "abstention_recall": "min",
    "unsupported_answer_rate": "max",
    "supported_answer_rate": "min",
    "reason_code_accuracy": "min",
    "citation_validity": "min",
}


def _failures_count(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with infrastructure failures kept as outputs that made no decision: wrong
    on either side (not an answer, not an abstention, no reason code)."""
    infra = frame["infra"].astype(bool)
    return frame.assign(
        infra=False,
        decision=frame["decision"].where(~infra, None),
        answered=frame["answered"].astype(bool) & ~infra,
        answer_ok=frame["answer_ok"].astype(bool) & ~infra,
    )


def gate_counts(frame: pd.DataFrame, partial_allowed: bool) -> dict[str, tuple[int, int]]:
    """(k, n) of every metric a gate row or a slice gate may name, on ``frame`` (infra
    failures already folded in by the caller)."""
    c = runmetrics.contributions(frame, partial_allowed=partial_allowed)
    out = {
        m: (int(c[f"{m}_k"].sum()), int(c[f"{m}_n"].sum()))
        for m in (
            "false_refusal_rate",
            "abstention_recall",
            "unsupported_answer_rate",
            "supported_answer_rate",
            "reason_code_accuracy",
            "citation_validity",
        )
    }
    fr_k, fr_n = out["false_refusal_rate"]
    out["answer_rate_answerable"] = (fr_n - fr_k, fr_n)
    answered = frame["answered"].astype(bool)
    out["coverage"] = (int(answered.sum()), len(frame))
    out["selective_risk"] = (
        int((answered & ~frame["answer_ok"].astype(bool)).sum()),
        int(answered.sum()),
    )
    return out


def _row(
    metric: str, kind: str, bound: float, scope: str, source: str, kn: tuple[int, int]
) -> GateRow:
    k, n = kn
    words = _ROWS[metric][0]
    rule = f"{metric} {'>=' if kind == 'min' else '<='} {bound:g}"
    if n == 0:
        where = "" if scope == "overall" else f" in {scope.removeprefix('slice:')}"
        return GateRow(
            words,
            source,
            scope,
            rule,
            math.nan,
            0,
            0,
            False,
            f"undefined: no {_DENOMINATOR[metric]}{where}",
        )
    value = k / n
    ok = value >= bound - TOLERANCE if kind == "min" else value <= bound + TOLERANCE
    lo, hi = wilson_bounds(k, n)
    why = "" if ok else f"{value:.3f} ({k} of {n}; 95% {lo:.2f}-{hi:.2f}) is not {rule}"
    return GateRow(words, source, scope, rule, value, k, n, ok, why)


def _bounds(policy: NoAnswerPolicy) -> dict[str, float]:
    t, r = policy.targets, policy.release
    return {
        "answer_rate_answerable": t.min_answer_rate_answerable,
        "false_refusal_rate": t.max_false_refusal_rate,
        "abstention_recall": t.min_abstention_recall,
        "unsupported_answer_rate": t.max_unsupported_answer_rate,
        "supported_answer_rate": r.min_supported_answer_rate,
        "reason_code_accuracy": r.min_reason_code_accuracy,
        "citation_validity": r.min_citation_validity,
    }


def _drift(
    policy: NoAnswerPolicy, part: pd.DataFrame, baseline: pd.DataFrame, partial: bool
) -> GateRow:
    """The release table's drift row: on the cases both runs answered, neither boundary
    (false-refusal and unsupported-answer rate) moves by more than the policy allows."""
    shared = sorted(set(part["key"]) & set(baseline["key"]))
    bound = policy.release.max_boundary_drift
    rule = f"boundary_drift <= {bound:g}"

    def row(value: float, k: int, n: int, passed: bool, why: str) -> GateRow:
        return GateRow(
            "Drift against the baseline run", "release", "overall", rule, value, k, n, passed, why
        )

    if not shared:
        return row(
            math.nan, 0, 0, False, "undefined: the baseline run has none of this run's cases"
        )
    a = gate_counts(baseline[isin_text(baseline["key"], shared)], partial)
    b = gate_counts(part[isin_text(part["key"], shared)], partial)
    moves = []
    for m in ("false_refusal_rate", "unsupported_answer_rate"):
        (ka, na), (kb, nb) = a[m], b[m]
        if na and nb:
            moves.append((abs(kb / nb - ka / na), m))
    if not moves:
        return row(
            math.nan, 0, len(shared), False, "undefined: neither boundary has cases in both runs"
        )
    move, metric = max(moves)
    first = part.sort_values("repeat").drop_duplicates("key").set_index("key")["decision"]
    base = baseline.sort_values("repeat").drop_duplicates("key").set_index("key")["decision"]
    flipped = int(
        (first.reindex(shared).astype(object) != base.reindex(shared).astype(object)).sum()
    )
    ok = move <= bound + TOLERANCE
    why = (
        ""
        if ok
        else f"{metric} moved by {move:.3f} ({readable.count(flipped, 'decision')} changed)"
    )
    return row(move, flipped, len(shared), ok, why)


def _shown(keys: list[str], at_most: int = 5) -> str:
    more = f" and {len(keys) - at_most} more" if len(keys) > at_most else ""
    return ", ".join(keys[:at_most]) + more


def _outputs_row(scope: str, n: int, missing: list[str]) -> GateRow:
    """Every case in scope has an output: ``n`` cases, ``missing`` the keys with none."""
    k = n - len(missing)
    why = f"no output for {len(missing)} cases ({_shown(missing)})" if missing else ""
    return GateRow(
        "Every case in scope has an output",
        "complete",
        scope,
        "cases without output == 0",
        k / n if n else math.nan,
        k,
        n,
        not missing,
        why,
    )


def _reasons_row(scored: pd.DataFrame) -> GateRow:
    """Every non-answer carries a reason code (a refusal without one cannot be audited): the
    count without one, which must be 0."""
    ok = ~scored["infra"].astype(bool)
    non_answer = ok & scored["decision"].notna() & ~scored["answered"].astype(bool)
    reason = scored["reason_code"].astype(object)
    blank = [r is None or r != r or not str(r).strip() for r in reason]
    without = non_answer & pd.Series(blank, index=scored.index, dtype=bool)
    n, m = int(non_answer.sum()), int(without.sum())
    keys = sorted(set(scored.loc[without, "key"].astype(str)))
    return GateRow(
        "Every non-answer has a reason code",
        "complete",
        "overall",
        "non-answers without a reason code == 0",
        float(m),
        m,
        n,
        m == 0,
        f"{m} of {n} non-answers have no reason code ({_shown(keys)})" if m else "",
    )


def release_gate(
    policy: NoAnswerPolicy,
    frame: pd.DataFrame,
    split: str = "test",
    *,
    baseline: pd.DataFrame | None = None,
    in_scope: pd.DataFrame | None = None,
) -> GateReport:
    """Every row (see the module docstring) on a run's outputs (``frame`` as from
    :func:`review.evaluation.evalruns.outputs_frame` or ``score_outputs``). ``in_scope``
    (the cases the run must answer: ``key`` and ``slice`` as from
    :func:`review.cases.splits.scope_pairs`, or ``key`` and ``slices`` as from
    :func:`review.cases.splits.cases_in_scope`) adds the row that fails on every case without
    an output."""
    part = frame if split == "all" else frame[frame["split"] == split]
    if part.empty:
        raise InputError(f"the run has no outputs on the {split} split")
    partial = policy.allows_partial_answers
    scored = _failures_count(part)
    bounds = _bounds(policy)
    rows: list[GateRow] = []
    not_measured: list[str] = []
    missing_in: dict[str, list[str]] = {}
    expected_in: dict[str, int] = {}
    if in_scope is not None:
        rows.append(
            _scope_coverage(in_scope, part["key"].astype(str).unique(), missing_in, expected_in)
        )
    else:
        not_measured.append("Every case in scope has an output: the cases in scope were not given")
    rows.append(_reasons_row(scored))
    overall = gate_counts(scored, partial)
    for metric, bound in bounds.items():
        rows.append(
            _row(metric, _KIND[metric], bound, "overall", _ROWS[metric][1], overall[metric])
        )
    if baseline is not None:
        base = baseline if split == "all" else baseline[baseline["split"] == split]
        rows.append(_drift(policy, part, _failures_count(base), partial))
    else:
        not_measured.append(
            "Drift (release table): no baseline run given (workbench gate --baseline FILE)"
        )
    exploded = scored.assign(slice=[list(s) for s in scored["slices"]]).explode("slice")
    for key, gates in policy.targets.slice_gates.items():
        absent = sorted(missing_in.get(key, []))
        if absent:
            rows.append(_outputs_row(f"slice:{key}", expected_in[key], absent))
        mine = exploded[exploded["slice"] == key]
        if mine.empty:
            rows += _empty_slice_rows(key, gates, absent, split)
            continue
        slice_rows, slice_unmeasured = _slice_rows(key, gates, gate_counts(mine, partial), bounds)
        rows += slice_rows
        not_measured += slice_unmeasured
    reproduced = redecide.reproduction_row(policy, part)
    if reproduced is None:
        not_measured.append("Decisions reproduce under this policy: the run logs no gate signals")
    else:
        k, n, why = reproduced
        rows.append(
            GateRow(
                "Decisions reproduce under this policy",
                "one gate",
                "overall",
                "reproduced == outputs",
                k / n if n else math.nan,
                k,
                n,
                n > 0 and k == n,
                why,
            )
        )
    return GateReport(rows, not_measured, int(part["key"].nunique()), split)


def gate_table(report: GateReport) -> pd.DataFrame:
    """The report as a table: row, source, scope, rule, value (or "undefined"), k of n,
    result, why."""
    return pd.DataFrame(
        [
            {
                "row": r.row,
                "source": r.source,
                "scope": r.scope,
                "rule": r.rule,
                "value": "undefined" if r.value != r.value else f"{r.value:.3f}",
                "k of n": r.counts,
                "result": "PASS" if r.passed else "FAIL",
                "why": r.why,
            }
            for r in report.rows
        ],
        columns=["row", "source", "scope", "rule", "value", "k of n", "result", "why"],
    )


def _scope_pairs(in_scope: pd.DataFrame) -> pd.DataFrame:
    """``in_scope`` in long form (``key``, ``slice``: review.cases.splits.scope_pairs), from
    the list form (``key``, ``slices``) of ``cases_in_scope`` when given that."""
    if "slice" in in_scope.columns:
        return in_scope[["key", "slice"]]
    long = in_scope[["key", "slices"]].assign(
        slices=[list(s) if s is not None and len(s) else [None] for s in in_scope["slices"]]
    )
    return long.explode("slices").rename(columns={"slices": "slice"})


def _texts(column: pd.Series) -> Any:
    """``column`` as an object array of str: as it is when it already holds only str (the
    scope's keys and slices do; converting them to pandas' text type and back cost 0.05 s at
    177,000 rows), else each value made a str."""
    raw = column.to_numpy(dtype=object)
    if pd.api.types.infer_dtype(raw, skipna=False) == "string":
        return raw
    return column.astype(str).to_numpy(dtype=object)


def _scope_coverage(
    in_scope: pd.DataFrame,
    answered_keys: Any,
    missing_in: dict[str, list[str]],
    expected_in: dict[str, int],
) -> GateRow:
    """The row that fails on every case in scope without an output; notes, per slice, how
    many cases are expected (``expected_in``) and the keys without an output, sorted
    (``missing_in``). Vectorised: a split of 380,000 cases counted row by row took 0.9 s."""
    pairs = _scope_pairs(in_scope)
    # every key and slice as a small integer (its position among the distinct ones)
    key_of, keys = pd.factorize(_texts(pairs["key"]))
    ok = isin_text(keys, answered_keys)
    missing_keys = sorted(keys[~ok].tolist())  # (str already)
    sliced = pairs["slice"].notna().to_numpy()
    if sliced.any():
        slice_of, names = pd.factorize(_texts(pairs["slice"][sliced]))
        # the distinct (slice, key) pairs, as one integer each
        both = np.unique(slice_of.astype(np.int64) * len(keys) + key_of[sliced])
        in_slice, key = np.divmod(both, len(keys))
        for i, n in enumerate(np.bincount(in_slice, minlength=len(names))):
            expected_in[str(names[i])] = int(n)
        gone = ~ok[key]
        for i in np.unique(in_slice[gone]):
            missing_in[str(names[i])] = sorted(keys[key[gone & (in_slice == i)]].tolist())
    return _outputs_row("overall", len(keys), missing_keys)


def _empty_slice_rows(
    key: str, gates: Mapping[str, float], absent: list[str], split: str
) -> list[GateRow]:
    """A slice gate on a slice without outputs fails, saying why."""
    empty_why = (
        f"no output for the {len(absent)} {split} cases in slice {key} ({_shown(absent)})"
        if absent
        else f"no {split} cases in slice {key}"
    )
    rows = []
    for name, bound in gates.items():
        metric, kind = TARGET_METRICS[name]
        rows.append(
            GateRow(
                _ROWS[metric][0],
                "slice gate",
                f"slice:{key}",
                f"{metric} {'>=' if kind == 'min' else '<='} {bound:g}",
                math.nan,
                0,
                0,
                False,
                empty_why,
            )
        )
    return rows


def _slice_rows(
    key: str,
    gates: Mapping[str, float],
    counts: Mapping[str, tuple[int, int]],
    bounds: Mapping[str, float],
) -> tuple[list[GateRow], list[str]]:
    """A slice's rows: its own gates, then the overall bounds it does not gate itself (those
    with nothing to count there are listed as not measured)."""
    scope = f"slice:{key}"
    rows: list[GateRow] = []
    not_measured: list[str] = []
    gated = set()
    for name, bound in gates.items():
        metric, kind = TARGET_METRICS[name]
        gated.add(metric)
        rows.append(_row(metric, kind, bound, scope, "slice gate", counts[metric]))
    for metric, bound in bounds.items():
        if metric in gated:
            continue
        if counts[metric][1] == 0:
            not_measured.append(
                f"{_ROWS[metric][0]} ({_ROWS[metric][1]}) in slice {key}: "
                f"no {_DENOMINATOR[metric]} there"
            )
            continue
        rows.append(_row(metric, _KIND[metric], bound, scope, _ROWS[metric][1], counts[metric]))
    return rows, not_measured
