"""Decision metrics of an evaluation run, by group, with Wilson intervals; run comparison.

Input is the frame from :func:`review.evalruns.outputs_frame` (one row per case and repeat).
Infrastructure failures are counted apart and excluded from every rate.

Definitions (k / n):

- abstention recall: unanswerable cases (gold decision does not answer) that were not
  answered / unanswerable cases;
- false-refusal rate: answerable cases not answered / answerable cases;
- decision accuracy: decision equal to the gold decision / cases;
- unsupported-answer rate: answered cases where answering was not acceptable / cases
  (the same denominator as the threshold sweep, so the release gate and this page agree);
- reason-code accuracy: refusals of unanswerable cases whose reason code is one of the gold
  reason codes / such refusals that carry a reason code;
- citation validity: answers whose every cited id was visible to the case's identity /
  answers with at least one citation;
- CRAG score: mean of +1 (acceptable answer), 0 (no answer), -1 (unacceptable answer).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from review.selective import wilson_interval

RATE_METRICS = (
    "abstention_recall",
    "false_refusal_rate",
    "decision_accuracy",
    "unsupported_answer_rate",
    "reason_code_accuracy",
    "citation_validity",
)
LABELS = {
    "abstention_recall": "Abstention recall",
    "false_refusal_rate": "False-refusal rate",
    "decision_accuracy": "Decision accuracy",
    "unsupported_answer_rate": "Unsupported-answer rate",
    "reason_code_accuracy": "Reason-code accuracy",
    "citation_validity": "Citation validity",
    "crag_score": "CRAG score",
}
HIGHER_IS_BETTER = {
    "abstention_recall": True,
    "false_refusal_rate": False,
    "decision_accuracy": True,
    "unsupported_answer_rate": False,
    "reason_code_accuracy": True,
    "citation_validity": True,
    "crag_score": True,
}


def contributions(df: pd.DataFrame) -> pd.DataFrame:
    """Per-row numerator (k) and denominator (n) of every rate, plus the CRAG points."""
    ok = ~df["infra"].astype(bool)
    answerable = df["answerable"].astype(bool) & ok
    unanswerable = ~df["answerable"].astype(bool) & ok
    answered = df["answered"].astype(bool) & ok
    acceptable = df["acceptable"].astype(bool)
    refused = ok & ~answered
    has_reason = df["reason_code"].notna()
    reason_ok = (
        np.array(
            [rc in (g or []) for rc, g in zip(df["reason_code"], df["gold_reasons"], strict=True)],
            dtype=bool,
        )
        if len(df)
        else np.zeros(0, dtype=bool)
    )
    cited = (
        np.array([len(c or []) > 0 for c in df["cited_doc_ids"]], dtype=bool)
        if len(df)
        else np.zeros(0, dtype=bool)
    )
    out = pd.DataFrame(index=df.index)
    out["abstention_recall_k"] = unanswerable & refused
    out["abstention_recall_n"] = unanswerable
    out["false_refusal_rate_k"] = answerable & refused
    out["false_refusal_rate_n"] = answerable
    out["decision_accuracy_k"] = ok & (df["decision"] == df["gold"])
    out["decision_accuracy_n"] = ok
    out["unsupported_answer_rate_k"] = answered & ~acceptable
    out["unsupported_answer_rate_n"] = ok
    out["reason_code_accuracy_k"] = unanswerable & refused & has_reason & reason_ok
    out["reason_code_accuracy_n"] = unanswerable & refused & has_reason
    out["citation_validity_k"] = answered & cited & df["citations_valid"].astype(bool)
    out["citation_validity_n"] = answered & cited
    out["crag"] = np.where(answered, np.where(acceptable, 1.0, -1.0), 0.0)
    out["crag_n"] = ok
    return out


@dataclass(frozen=True)
class Metric:
    name: str
    value: float
    k: int
    n: int
    lo: float
    hi: float


def summarize(df: pd.DataFrame) -> dict[str, Metric]:
    """Every metric over the whole frame."""
    c = contributions(df)
    out: dict[str, Metric] = {}
    for m in RATE_METRICS:
        k = int(c[f"{m}_k"].sum())
        n = int(c[f"{m}_n"].sum())
        lo, hi = wilson_interval(k, n)
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


def summary_table(df: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for m in summarize(df).values():
        rows.append(
            {
                "metric": LABELS[m.name],
                "value": m.value,
                "k": m.k,
                "n": m.n,
                "low": m.lo,
                "high": m.hi,
            }
        )
    return pd.DataFrame(rows)


def by_group(df: pd.DataFrame, column: str) -> pd.DataFrame:
    """Metrics per value of ``column`` (split, category, evidence_state, or slices: a case
    with several slices counts in each). Vectorised group sums."""
    if df.empty:
        return pd.DataFrame()
    frame = df
    if column == "slices":
        frame = df.explode("slices").dropna(subset=["slices"])
        if frame.empty:
            return pd.DataFrame()
    c = contributions(frame)
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


def _per_case(df: pd.DataFrame) -> pd.DataFrame:
    c = contributions(df)
    c["key"] = df["key"].to_numpy()
    return c.groupby("key").sum(numeric_only=True)


def paired_bootstrap(
    a: pd.DataFrame, b: pd.DataFrame, *, resamples: int = 1000, seed: int = 7
) -> pd.DataFrame:
    """Metric deltas (B - A) over the cases both runs scored, with 95% paired bootstrap
    intervals: cases are resampled with replacement and both runs are scored on the same
    resample. Repeats of a case stay together."""
    pa, pb = _per_case(a), _per_case(b)
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
# Metamorphic checks over counterfactual families

METAMORPHIC = {
    "removed": ("Decisive evidence removed -> abstain or clarify", {"abstain", "clarify"}),
    "present": ("Authoritative passage present -> answer", {"answer"}),
    "forbidden": ("Answer hidden by permissions -> no answer", {"abstain", "escalate", "clarify"}),
    "partial": ("Partial support -> not a plain answer", {"abstain", "clarify", "partial"}),
    "conflicted": ("Superseded or conflicting version -> current rules hold", set()),
}


def metamorphic_checks(df: pd.DataFrame) -> pd.DataFrame:
    """For every family variant: pass rate over repeats (never the best run) and how often
    the decision varied across repeats. Conflicted variants pass when the decision equals
    the gold decision (the controlling source's rule)."""
    fam = df[df["evidence_state"].notna() & ~df["infra"].astype(bool)]
    if fam.empty:
        return pd.DataFrame(columns=["check", "variants", "runs", "pass_rate", "varying"])
    ok = []
    for state, decision, gold in zip(
        fam["evidence_state"], fam["decision"], fam["gold"], strict=True
    ):
        allowed = METAMORPHIC.get(state, ("", set()))[1]
        ok.append(decision == gold if state == "conflicted" else decision in allowed)
    fam = fam.assign(passed=ok)
    rows = []
    for state, g in fam.groupby("evidence_state"):
        varying = g.groupby("key")["decision"].nunique().gt(1).sum()
        rows.append(
            {
                "check": METAMORPHIC.get(str(state), (str(state), set()))[0],
                "variants": g["key"].nunique(),
                "runs": len(g),
                "pass_rate": float(g["passed"].mean()),
                "varying": int(varying),
            }
        )
    return pd.DataFrame(rows)
