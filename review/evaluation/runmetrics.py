"""Decision metrics of an evaluation run, by group, with Wilson intervals; run comparison.

Input is the frame from :func:`review.evaluation.evalruns.outputs_frame` (one row per case and
repeat). Infrastructure failures (the pipeline raised, timed out, answered malformed or gave
an answer with no text) are counted apart and excluded from every rate.

Each figure is exactly the definition its name has (docs/metrics.md, with a worked example);
a broader variant has its own name. As k / n, with "gold" the agreed expected decision:

- abstention recall: gold ``abstain`` and output ``abstain`` / gold ``abstain``;
- non-answer recall (broader than abstention recall): gold a non-answer (abstain, clarify,
  escalate) and output any non-answer / gold a non-answer;
- false-refusal rate: gold ``answer`` and output anything but ``answer`` / gold
  ``answer``; a ``partial`` output is a refusal unless the policy allows partial answers;
- decision accuracy: output equal to gold / cases;
- unsupported-answer rate: cases that require abstention (gold anything but
  ``answer``: no-answer, partial, conflict, stale, unauthorized) given an answer beyond what
  the evidence holds (any answer where gold is a non-answer, a full ``answer`` where gold is
  ``partial``, or a refusal that still makes a substantive claim, found by the wording rule
  ``claim_after_refusal``) / cases that require abstention;
- supported-answer rate: gold ``answer`` cases (complete, allowed, current,
  consistent) given an acceptable answer (``answer_ok``) / gold ``answer`` cases;
- reason-code accuracy: non-answer outputs whose reason code is one of the gold
  reason codes / all non-answer outputs (a missing code is wrong);
- citation validity: answers citing at least one passage, every one in the context
  sent and among the case's supporting documents / all answers;
- wording-key match: outputs that gave the expected non-answer worded with the message the
  case expects (R1, R2, R3, F1, E1; an output that names no key counts as not matching) /
  outputs that gave the expected non-answer of a case that names its wording key;
- refusals citing a distractor (a refusal never cites a near-neighbour source as
  support): non-answer outputs citing a document the case marks as a distractor / all
  non-answer outputs (it should be 0);
- answers contradicting a required claim: answers stating a figure (days, hours, percent,
  an amount, ...) that no required claim of the case states, where a claim states another
  value with that unit; countdowns, elapsed times, ranges holding the claim's value and
  parts adding up to it are not contradictions (review.evaluation.claimcheck; a lower bound
  on contradictions, as only stated quantities are compared) / all answers. Such an answer
  is not acceptable (``answer_ok`` is false), so it also lowers the supported-answer rate
  and scores -1;
- CRAG score: mean of +1 (acceptable answer, ``answer_ok``), 0 (no answer), -1 (any other
  answer, and a refusal that makes a substantive claim).

A figure whose denominator is empty is undefined (NaN, shown as "undefined" with the reason),
never 0 or 1. :func:`state_recall` gives the recall of each exact decision state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from review.charts.runs import family_lines_chart
from review.charts.style import no_data_chart
from review.core.sampling import wilson_bounds

RATE_METRICS = (
    "abstention_recall",
    "non_answer_recall",
    "false_refusal_rate",
    "decision_accuracy",
    "unsupported_answer_rate",
    "supported_answer_rate",
    "reason_code_accuracy",
    "citation_validity",
    "wording_key_match",
    "refusals_citing_distractor",
    "answers_contradicting_claim",
)
LABELS = {
    "abstention_recall": "Abstention recall",
    "non_answer_recall": "Non-answer recall",
    "false_refusal_rate": "False-refusal rate",
    "decision_accuracy": "Decision accuracy",
    "unsupported_answer_rate": "Unsupported-answer rate",
    "supported_answer_rate": "Supported-answer rate",
    "reason_code_accuracy": "Reason-code accuracy",
    "citation_validity": "Citation validity",
    "wording_key_match": "Wording-key match",
    "refusals_citing_distractor": "Refusals citing a distractor",
    "answers_contradicting_claim": "Answers contradicting a required claim",
    "crag_score": "CRAG score",
}
#: What the denominator of each figure counts, and why it can be empty.
DENOMINATORS = {
    "abstention_recall": "cases expecting abstain",
    "non_answer_recall": "cases expecting a non-answer (abstain, clarify, escalate)",
    "false_refusal_rate": "cases expecting answer",
    "decision_accuracy": "cases",
    "unsupported_answer_rate": "cases requiring abstention (expecting anything but answer)",
    "supported_answer_rate": "cases expecting answer",
    "reason_code_accuracy": "non-answer outputs",
    "citation_validity": "answers",
    "wording_key_match": "expected non-answers of cases naming a wording key",
    "refusals_citing_distractor": "non-answer outputs",
    "answers_contradicting_claim": "answers",
    "crag_score": "cases",
}
HIGHER_IS_BETTER = {
    "abstention_recall": True,
    "non_answer_recall": True,
    "false_refusal_rate": False,
    "decision_accuracy": True,
    "unsupported_answer_rate": False,
    "supported_answer_rate": True,
    "reason_code_accuracy": True,
    "citation_validity": True,
    "wording_key_match": True,
    "refusals_citing_distractor": False,
    "answers_contradicting_claim": False,
    "crag_score": True,
}


def _column(df: pd.DataFrame, name: str, default: object) -> pd.Series:
    return df[name] if name in df else pd.Series(default, index=df.index)


def contributions(df: pd.DataFrame, *, partial_allowed: bool = False) -> pd.DataFrame:
    """Per-row numerator (k) and denominator (n) of every rate, plus the CRAG points.
    ``partial_allowed``: the policy allows partial answers (a ``partial`` output on a case
    expecting ``answer`` is then not a false refusal)."""
    ok = ~df["infra"].astype(bool)
    gold = df["gold"]
    decision = df["decision"].where(ok, None)
    answered = df["answered"].astype(bool) & ok
    non_answer = ok & decision.notna() & ~answered
    answer_ok = _column(df, "answer_ok", False).astype(bool) & answered
    gold_answer = ok & (gold == "answer")
    # ``answerable``: the expected decision answers (the taxonomy's ``answers: true``)
    expects_answer = df["answerable"].astype(bool)
    gold_non_answer = ok & gold.notna() & ~expects_answer
    needs_abstention = ok & gold.notna() & (gold != "answer")
    claimed = _column(df, "claim_after_refusal", False).astype(bool) & non_answer
    beyond = answered & (~expects_answer | ((gold == "partial") & (decision == "answer")))
    # a refusal that still makes a substantive claim is an unsupported answer
    beyond = beyond | claimed
    reason_ok = (
        np.array(
            [
                rc is not None and rc == rc and rc in (g or [])
                for rc, g in zip(
                    # object arrays: iterating an Arrow string column makes a scalar per value
                    df["reason_code"].to_numpy(dtype=object, na_value=None),
                    df["gold_reasons"].to_numpy(dtype=object),
                    strict=True,
                )
            ],
            dtype=bool,
        )
        if len(df)
        else np.zeros(0, dtype=bool)
    )
    not_refused = decision == "answer"
    if partial_allowed:
        not_refused = not_refused | (decision == "partial")
    # one frame from a dict of columns: a column set at a time costs ~4 ms each
    cols: dict[str, Any] = {}
    cols["abstention_recall_k"] = ok & (gold == "abstain") & (decision == "abstain")
    cols["abstention_recall_n"] = ok & (gold == "abstain")
    cols["non_answer_recall_k"] = gold_non_answer & non_answer
    cols["non_answer_recall_n"] = gold_non_answer
    cols["false_refusal_rate_k"] = gold_answer & ~not_refused
    cols["false_refusal_rate_n"] = gold_answer
    cols["decision_accuracy_k"] = ok & (decision == gold)
    cols["decision_accuracy_n"] = ok
    cols["unsupported_answer_rate_k"] = needs_abstention & beyond
    cols["unsupported_answer_rate_n"] = needs_abstention
    cols["supported_answer_rate_k"] = gold_answer & answer_ok
    cols["supported_answer_rate_n"] = gold_answer
    cols["reason_code_accuracy_k"] = non_answer & reason_ok
    cols["reason_code_accuracy_n"] = non_answer
    cols["citation_validity_k"] = answered & _column(df, "citations_support", False).astype(bool)
    cols["citation_validity_n"] = answered
    expected_key = _column(df, "expected_message", None)
    used_key = _column(df, "message_key", None)
    worded = non_answer & (decision == gold) & expected_key.notna()
    cols["wording_key_match_k"] = worded & (used_key == expected_key)
    cols["wording_key_match_n"] = worded
    cols["refusals_citing_distractor_k"] = non_answer & _column(
        df, "refusal_cites_distractor", False
    ).astype(bool)
    cols["refusals_citing_distractor_n"] = non_answer
    cols["answers_contradicting_claim_k"] = answered & _column(
        df, "contradicts_claim", False
    ).astype(bool)
    cols["answers_contradicting_claim_n"] = answered
    cols["crag"] = np.where(answered, np.where(answer_ok, 1.0, -1.0), np.where(claimed, -1.0, 0.0))
    cols["crag_n"] = ok
    return pd.DataFrame(cols, index=df.index)


def state_recall(df: pd.DataFrame, decisions: list[str]) -> pd.DataFrame:
    """Per expected decision state: the cases expecting it that got exactly it (k of n, with
    a Wilson interval; an empty state is undefined). Infrastructure failures excluded."""
    ok = df[~df["infra"].astype(bool)] if len(df) else df
    rows = []
    for state in decisions:
        mine = ok[ok["gold"] == state] if len(ok) else ok
        n = len(mine)
        k = int((mine["decision"] == state).sum()) if n else 0
        lo, hi = wilson_bounds(k, n)
        rows.append(
            {
                "expected": state,
                "recall": k / n if n else float("nan"),
                "k": k,
                "n": n,
                "low": float(lo),
                "high": float(hi),
                "note": "" if n else f"undefined: no case expects {state}",
            }
        )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Metric:
    name: str
    value: float
    k: int
    n: int
    lo: float
    hi: float


def summarize(df: pd.DataFrame, *, partial_allowed: bool = False) -> dict[str, Metric]:
    """Every metric over the whole frame."""
    c = contributions(df, partial_allowed=partial_allowed)
    out: dict[str, Metric] = {}
    for m in RATE_METRICS:
        k = int(c[f"{m}_k"].sum())
        n = int(c[f"{m}_n"].sum())
        lo, hi = wilson_bounds(k, n)
        out[m] = Metric(m, k / n if n else float("nan"), k, n, float(lo), float(hi))
    n = int(c["crag_n"].sum())
    out["crag_score"] = Metric(
        "crag_score",
        float(c.loc[c["crag_n"], "crag"].mean()) if n else float("nan"),
        int(c["crag"].sum()),
        n,
        float("nan"),
        float("nan"),
    )
    return out


def summary_table(df: pd.DataFrame, *, partial_allowed: bool = False) -> pd.DataFrame:
    """One row per figure: value, k, n, interval, what n counts, and why it is undefined when
    n is 0."""
    rows = []
    for m in summarize(df, partial_allowed=partial_allowed).values():
        rows.append(
            {
                "metric": LABELS[m.name],
                "value": m.value,
                "k": m.k,
                "n": m.n,
                "low": m.lo,
                "high": m.hi,
                "over": DENOMINATORS[m.name],
                "note": "" if m.n else f"undefined: no {DENOMINATORS[m.name]}",
            }
        )
    return pd.DataFrame(rows)


def by_group(df: pd.DataFrame, column: str, *, partial_allowed: bool = False) -> pd.DataFrame:
    """Metrics per value of ``column`` (split, category, evidence_state, or slices: a case
    with several slices counts in each). Vectorised group sums."""
    if df.empty:
        return pd.DataFrame()
    frame = df
    if column == "slices":
        frame = df.explode("slices").dropna(subset=["slices"])
        if frame.empty:
            return pd.DataFrame()
    c = contributions(frame, partial_allowed=partial_allowed)
    c["group"] = frame[column].fillna("—").to_numpy()
    sums = c.groupby("group").sum(numeric_only=True)
    rows = []
    for group, r in sums.iterrows():
        row: dict[str, object] = {column: group, "cases": int(r["crag_n"])}
        for m in RATE_METRICS:
            k, n = int(r[f"{m}_k"]), int(r[f"{m}_n"])
            row[LABELS[m]] = k / n if n else float("nan")
            row[f"{m} n"] = n
        row[LABELS["crag_score"]] = r["crag"] / r["crag_n"] if r["crag_n"] else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)


def confusion(df: pd.DataFrame, decisions: list[str]) -> pd.DataFrame:
    """Counts of (gold, observed) decisions; infrastructure failures as their own column."""
    observed = df["decision"].where(~df["infra"].astype(bool), "infrastructure failure")
    table = pd.crosstab(df["gold"], observed)
    cols = [d for d in decisions if d in table.columns] + [
        c for c in table.columns if c not in decisions
    ]
    rows = [d for d in decisions if d in table.index]
    return table.reindex(index=rows, columns=cols, fill_value=0)


# ---------------------------------------------------------------------------------------
# Comparing two runs


def _per_case(df: pd.DataFrame, partial_allowed: bool = False) -> pd.DataFrame:
    c = contributions(df, partial_allowed=partial_allowed)
    c["key"] = df["key"].to_numpy()
    return c.groupby("key").sum(numeric_only=True)


def paired_bootstrap(
    a: pd.DataFrame,
    b: pd.DataFrame,
    *,
    resamples: int = 1000,
    seed: int = 7,
    partial_allowed: bool = False,
) -> pd.DataFrame:
    """Metric deltas (B - A) over the cases both runs scored, with 95% paired bootstrap
    intervals: cases are resampled with replacement and both runs are scored on the same
    resample. Repeats of a case stay together."""
    pa, pb = _per_case(a, partial_allowed), _per_case(b, partial_allowed)
    keys = pa.index.intersection(pb.index)
    pa, pb = pa.loc[keys], pb.loc[keys]
    n = len(keys)
    rng = np.random.default_rng(seed)
    rows = []
    names = [*RATE_METRICS, "crag_score"]
    if n == 0:
        return pd.DataFrame(columns=["metric", "A", "B", "delta", "low", "high", "cases"])
    # resample counts in chunks to bound memory: (chunk x n) integer weights
    deltas = {m: [] for m in names}  # type: dict[str, list[np.ndarray]]
    chunk = max(1, min(resamples, 2_000_000 // max(n, 1)))
    done = 0
    while done < resamples:
        size = min(chunk, resamples - done)
        idx = rng.integers(0, n, size=(size, n))
        w = np.zeros((size, n))
        np.add.at(w, (np.repeat(np.arange(size), n), idx.ravel()), 1.0)
        for m in names:
            kcol, ncol = (f"{m}_k", f"{m}_n") if m != "crag_score" else ("crag", "crag_n")
            ka, na = w @ pa[kcol].to_numpy(float), w @ pa[ncol].to_numpy(float)
            kb, nb = w @ pb[kcol].to_numpy(float), w @ pb[ncol].to_numpy(float)
            with np.errstate(divide="ignore", invalid="ignore"):
                deltas[m].append(kb / nb - ka / na)
        done += size
    for m in names:
        kcol, ncol = (f"{m}_k", f"{m}_n") if m != "crag_score" else ("crag", "crag_n")
        va = pa[kcol].sum() / pa[ncol].sum() if pa[ncol].sum() else float("nan")
        vb = pb[kcol].sum() / pb[ncol].sum() if pb[ncol].sum() else float("nan")
        d = np.concatenate(deltas[m])
        d = d[np.isfinite(d)]
        lo, hi = np.percentile(d, [2.5, 97.5]) if d.size else (float("nan"), float("nan"))
        rows.append(
            {
                "metric": LABELS[m],
                "A": va,
                "B": vb,
                "delta": vb - va,
                "low": float(lo),
                "high": float(hi),
                "cases": n,
                "better": "higher" if HIGHER_IS_BETTER[m] else "lower",
            }
        )
    return pd.DataFrame(rows)


def decision_flips(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Cases whose (first-repeat) decision differs between run A and run B."""
    fa = a[a["repeat"] == a["repeat"].min()].set_index("key")
    fb = b[b["repeat"] == b["repeat"].min()].set_index("key")
    keys = fa.index.intersection(fb.index)
    da = fa.loc[keys, "decision"].where(~fa.loc[keys, "infra"], "infrastructure failure")
    db = fb.loc[keys, "decision"].where(~fb.loc[keys, "infra"], "infrastructure failure")
    changed = da != db
    out = pd.DataFrame(
        {
            "case": keys[changed],
            "gold": fa.loc[keys[changed], "gold"].to_numpy(),
            "A": da[changed].to_numpy(),
            "B": db[changed].to_numpy(),
        }
    )
    if out.empty:
        return out.assign(effect=pd.Series(dtype=str))
    out["effect"] = np.where(
        out["B"] == out["gold"], "fixed", np.where(out["A"] == out["gold"], "broken", "changed")
    )
    return out


# ---------------------------------------------------------------------------------------
# Metamorphic checks: over counterfactual families, and on perturbed re-runs

METAMORPHIC = {
    "removed": ("Decisive evidence removed -> abstain or clarify", {"abstain", "clarify"}),
    "present": ("Authoritative passage present -> supported answer", {"answer"}),
    "forbidden": (
        "Answer hidden by permissions -> no answer, restricted text absent",
        {"abstain", "escalate", "clarify"},
    ),
    "partial": ("Partial support -> not a plain answer", {"abstain", "clarify", "partial"}),
    "conflicted": ("Superseded or conflicting version -> current rules hold", set()),
}
PERTURBATION_CHECKS = {
    "reorder": "Irrelevant documents reordered -> same decision",
    "distractor": "High-overlap distractor added -> no new unsupported claim",
}
CHECK_COLUMNS = [
    "check",
    "kind",
    "cases",
    "runs",
    "passed",
    "pass_rate",
    "varying",
    "decision_variance",
    "infrastructure failures",
]


def _flag(df: pd.DataFrame, column: str) -> pd.Series:
    """A boolean column, False where the frame does not have it."""
    if column in df.columns:
        return df[column].fillna(False).astype(bool)
    return pd.Series(False, index=df.index)


def family_outcomes(df: pd.DataFrame) -> pd.DataFrame:
    """The outputs on family variants with ``passed`` and ``why`` (infrastructure failures
    left out). Rules per evidence state:

    - present: answers, and every citation was visible to the identity (a supported answer);
    - removed: abstains or asks to clarify;
    - forbidden: does not answer, cites no forbidden document and repeats none of its text;
    - partial: abstains, asks, or gives a labelled partial answer;
    - conflicted: the gold decision (the controlling source's rule), citing no superseded
      version.
    """
    fam = df[df["evidence_state"].notna() & ~df["infra"].astype(bool)]
    leaked = _flag(fam, "leaked")
    stale = _flag(fam, "cites_superseded")
    valid = (
        fam["citations_valid"].astype(bool)
        if "citations_valid" in fam.columns
        else pd.Series(True, index=fam.index)
    )
    passed, why = [], []
    for i, (state, decision, gold) in enumerate(
        zip(fam["evidence_state"], fam["decision"], fam["gold"], strict=True)
    ):
        allowed = METAMORPHIC.get(state, ("", set()))[1]
        problems = []
        if state == "conflicted":
            if decision != gold:
                problems.append(f"decided {decision}, the controlling source says {gold}")
            if stale.iloc[i]:
                problems.append("cites a superseded version")
        elif decision not in allowed:
            problems.append(f"decided {decision}")
        if state == "forbidden" and leaked.iloc[i]:
            problems.append("restricted text or a forbidden document in the answer")
        if state == "present" and not valid.iloc[i]:
            problems.append("cites a document the identity cannot see")
        passed.append(not problems)
        why.append("; ".join(problems))
    return fam.assign(passed=passed, why=why)


def _norm(text: str) -> str:
    return " ".join(str(text).replace("*", " ").replace("`", " ").split()).casefold()


def _repeats_added_text(text: str, body: str) -> bool:
    """Whether an answer repeats a line of the added distractor (headings aside), or is
    itself a piece of one (20 characters or more)."""
    said = _norm(text)
    if not said:
        return False
    for line in str(body).splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        part = _norm(line)
        if part in said or (len(said) >= 20 and said in part):
            return True
    return False


def judge_perturbed(pf: pd.DataFrame) -> pd.DataFrame:
    """Perturbed answers (from :func:`review.evaluation.evalruns.perturbed_frame`) with
    ``passed`` and ``why``; pairs where either answer is an infrastructure failure get
    ``passed`` NaN.

    - reorder: the decision equals the one on the original order (same case and repeat);
    - distractor: no new unsupported claim, i.e. it fails when it answers citing the added
      document, repeating its text, or where the original input got no answer (the
      distractor holds no answer, so an answer it brings is unsupported).
    """
    if pf.empty:
        return pf.assign(passed=pd.Series(dtype=object), why=pd.Series(dtype=str))
    passed: list[object] = []
    why: list[str] = []
    for r in pf.itertuples(index=False):
        if bool(r.infra) or bool(r.base_infra):
            passed.append(float("nan"))
            why.append("infrastructure failure")
            continue
        problem = ""
        if r.kind == "reorder":
            if r.decision != r.base_decision:
                problem = f"decision changed: {r.base_decision} -> {r.decision}"
        elif r.kind == "distractor" and bool(r.answered):
            detail = r.perturbation if isinstance(r.perturbation, dict) else {}
            added = str(detail.get("added", ""))
            cited = list(r.cited_doc_ids or [])
            if added and (added in cited or added.split("@")[0] in cited):
                problem = "answers citing the distractor"
            elif _repeats_added_text(r.text or "", str(detail.get("body", ""))):
                problem = "answers with the distractor's text"
            elif not bool(r.base_answered):
                problem = f"answers where the original input got {r.base_decision}"
        passed.append(not problem)
        why.append(problem)
    return pf.assign(passed=passed, why=why)


def _mean_variance(g: pd.DataFrame) -> float:
    """The mean over cases (``key``) of 1 - the share of the case's most frequent decision
    over its repeats (0 when every repeat agrees; a case without a decision is left out),
    for all cases at once (a Python call per case took 0.14 s for 200 cases)."""
    sizes = g.groupby(["key", "decision"]).size()  # (decisions that are missing: not counted)
    if sizes.empty:
        return float("nan")
    per_case = sizes.groupby(level=0)
    return float((1 - per_case.max() / per_case.sum()).mean())


def _check_row(check: str, kind: str, g: pd.DataFrame, infra: int) -> dict[str, object]:
    by_case = g.groupby("key")["decision"]
    return {
        "check": check,
        "kind": kind,
        "cases": g["key"].nunique(),
        "runs": len(g),
        "passed": int(g["passed"].astype(bool).sum()),
        "pass_rate": float(g["passed"].astype(bool).mean()) if len(g) else float("nan"),
        "varying": int(by_case.nunique().gt(1).sum()),
        "decision_variance": _mean_variance(g) if len(g) else float("nan"),
        "infrastructure failures": infra,
    }


def metamorphic_checks(df: pd.DataFrame, perturbed: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per check: pass rate over every case and repeat (never the best run), how
    many cases changed decision between repeats (``varying``) and the mean decision variance
    (1 - share of a case's most frequent decision over its repeats). Family checks read the
    outputs on family variants; perturbation checks the perturbed re-runs, where the
    decision compared across repeats is the perturbed one. Infrastructure failures are
    counted apart and left out of the rates."""
    rows = []
    fam_all = df[df["evidence_state"].notna()] if "evidence_state" in df.columns else df[:0]
    fam = family_outcomes(df) if not fam_all.empty else fam_all
    states = list(fam_all["evidence_state"].unique()) if not fam_all.empty else []
    ranked = sorted(
        states, key=lambda st: (list(METAMORPHIC).index(st) if st in METAMORPHIC else 99, str(st))
    )
    for state in ranked:
        g = fam[fam["evidence_state"] == state]
        infra = int(fam_all.loc[fam_all["evidence_state"] == state, "infra"].astype(bool).sum())
        label = METAMORPHIC.get(str(state), (str(state), set()))[0]
        rows.append(_check_row(label, "family variant", g, infra))
    if perturbed is not None and not perturbed.empty:
        judged = perturbed if "passed" in perturbed.columns else judge_perturbed(perturbed)
        for kind, label in PERTURBATION_CHECKS.items():
            g = judged[judged["kind"] == kind]
            if g.empty:
                continue
            ok = g[g["passed"].notna()]
            rows.append(_check_row(label, "perturbation", ok, len(g) - len(ok)))
    return pd.DataFrame(rows, columns=CHECK_COLUMNS)


# ---------------------------------------------------------------------------------------
# Drift: the same question families across runs, oldest first

DRIFT_METRICS = {
    "decision_accuracy": "Decision accuracy",
    "abstention_recall": "Abstention recall",
    "flips": "Flips vs previous run",
}
DRIFT_COLUMNS = [
    "order",
    "run",
    "created_at",
    "family",
    "cases",
    "decision_accuracy",
    "accuracy_n",
    "abstention_recall",
    "recall_n",
    "flips",
    "compared",
]


def family_drift(hist: pd.DataFrame) -> pd.DataFrame:
    """Per run (oldest first: created_at, then id) and question family, from
    :func:`review.evaluation.evalruns.family_history`:

    - decision accuracy: outputs whose decision equals the gold one / outputs (every repeat;
      infrastructure failures left out);
    - abstention recall: outputs on unanswerable cases that did not answer / such outputs;
    - flips: cases whose first-repeat decision differs from the previous run's (an
      infrastructure failure counts as a decision of its own), of ``compared`` cases that
      both runs scored; NaN for the first run.
    """
    if hist.empty:
        return pd.DataFrame(columns=DRIFT_COLUMNS)
    h = hist.copy()
    runs = (
        h[["run_id", "run", "created_at"]]
        .drop_duplicates("run_id")
        .sort_values(["created_at", "run_id"], kind="stable")
        .reset_index(drop=True)
    )
    order = {rid: i for i, rid in enumerate(runs["run_id"])}
    ok = ~h["infra"].astype(bool)
    unanswerable = ok & ~h["answerable"].astype(bool)
    h["acc_k"] = ok & (h["decision"] == h["gold"])
    h["acc_n"] = ok
    h["rec_k"] = unanswerable & ~h["answered"].astype(bool)
    h["rec_n"] = unanswerable
    sums = (
        h.groupby(["run_id", "family"])
        .agg(
            cases=("key", "nunique"),
            acc_k=("acc_k", "sum"),
            acc_n=("acc_n", "sum"),
            rec_k=("rec_k", "sum"),
            rec_n=("rec_n", "sum"),
        )
        .reset_index()
    )
    first = h[h["repeat"] == h.groupby(["run_id", "key"])["repeat"].transform("min")]
    first = first.assign(
        seen=first["decision"].where(~first["infra"].astype(bool), "infrastructure failure")
    )[["run_id", "family", "key", "seen"]]
    flips: dict[tuple[int, str], tuple[int | None, int]] = {}
    for i in range(1, len(runs)):
        now = first[first["run_id"] == runs["run_id"].iloc[i]]
        before = first[first["run_id"] == runs["run_id"].iloc[i - 1]]
        pair = now.merge(before[["key", "seen"]], on="key", suffixes=("", "_before"))
        for fam, g in pair.groupby("family"):
            changed: int | None = int((g["seen"] != g["seen_before"]).sum())
            flips[(int(runs["run_id"].iloc[i]), str(fam))] = (changed, len(g))
    out = []
    names = dict(zip(runs["run_id"], runs["run"], strict=True))
    stamps = dict(zip(runs["run_id"], runs["created_at"], strict=True))
    for r in sums.itertuples(index=False):
        rid, fam = int(r.run_id), str(r.family)
        flipped, compared = flips.get((rid, fam), (None, 0))
        out.append(
            {
                "order": order[rid] + 1,
                "run": names[rid],
                "created_at": stamps[rid],
                "family": fam,
                "cases": int(r.cases),
                "decision_accuracy": r.acc_k / r.acc_n if r.acc_n else float("nan"),
                "accuracy_n": int(r.acc_n),
                "abstention_recall": r.rec_k / r.rec_n if r.rec_n else float("nan"),
                "recall_n": int(r.rec_n),
                "flips": float("nan") if flipped is None else float(flipped),
                "compared": compared,
            }
        )
    frame = pd.DataFrame(out, columns=DRIFT_COLUMNS)
    return frame.sort_values(["order", "family"], kind="stable").reset_index(drop=True)


#: How many question families the drift chart draws as their own line; the rest are one
#: "other families" line (115 lines in one chart read as none).
DRIFT_TOP = 8
_DRIFT_WEIGHTS = {"decision_accuracy": "accuracy_n", "abstention_recall": "recall_n"}


#: Tableau 10 without its grey, which marks the combined "other families" line.
def drift_lines(drift: pd.DataFrame, metric: str, top: int = DRIFT_TOP) -> pd.DataFrame:
    """The lines of the drift chart: the ``top`` families whose ``metric`` moves most across
    runs (largest range; ties by name) each as itself, the others combined into one line
    "other N families" (a rate weighted by its denominator; flips summed). Columns order,
    run, family, the metric, cases."""
    weight = _DRIFT_WEIGHTS.get(metric)
    cols = ["order", "run", "family", metric, "cases", *([weight] if weight else [])]
    data = drift[cols].dropna(subset=[metric])
    families = data["family"].unique()
    if len(families) <= top:
        return data[["order", "run", "family", metric, "cases"]]
    spread = data.groupby("family")[metric].agg(lambda v: float(v.max() - v.min()))
    ranked = sorted(spread.items(), key=lambda kv: (-kv[1], str(kv[0])))
    keep = {f for f, _ in ranked[:top]}
    rest = data[~data["family"].isin(keep)]
    if weight:
        rest = rest.assign(_k=rest[metric] * rest[weight])
        grouped = rest.groupby(["order", "run"], as_index=False).agg(
            _k=("_k", "sum"), _n=(weight, "sum"), cases=("cases", "sum")
        )
        grouped[metric] = grouped["_k"] / grouped["_n"].where(grouped["_n"] > 0)
    else:
        grouped = rest.groupby(["order", "run"], as_index=False).agg(
            **{metric: (metric, "sum"), "cases": ("cases", "sum")}
        )
    grouped["family"] = f"other {len(families) - top} families (combined)"
    lines = pd.concat(
        [data[data["family"].isin(keep)], grouped[["order", "run", "family", metric, "cases"]]],
        ignore_index=True,
    )
    return lines[["order", "run", "family", metric, "cases"]].dropna(subset=[metric])


def drift_chart(drift: pd.DataFrame, metric: str, top: int = DRIFT_TOP) -> alt.LayerChart:
    """One line per question family across runs (oldest first) for ``metric`` (a key of
    :data:`DRIFT_METRICS`): the ``top`` families that move most, the rest as one line (see
    :func:`drift_lines`); rates on a % axis; with no defined value the chart says why."""
    title = DRIFT_METRICS[metric]
    runs = drift.sort_values("order").drop_duplicates("run")["run"].tolist()
    data = drift_lines(drift, metric, top) if not drift.empty else drift
    if data.empty:
        reason = f"No question family has a defined {title.lower()} in these runs."
        return alt.LayerChart(layer=[no_data_chart(reason)])
    return family_lines_chart(data, metric, title=title, runs=runs, rate=metric != "flips", top=top)


def drift_table(drift: pd.DataFrame, metric: str) -> pd.DataFrame:
    """One row per question family, one column per run (oldest first) holding ``metric``."""
    order = drift.sort_values("order").drop_duplicates("run")["run"].tolist()
    return drift.pivot(index="family", columns="run", values=metric)[order].reset_index()
