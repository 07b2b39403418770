"""Agreement between annotators: Cohen's kappa, Krippendorff's alpha, raw agreement.

Input is a long table of labels, one row per (item, annotator): the item labelled, who
labelled it, and the value given. Values are nominal (a decision such as ``"abstain"``) or
booleans (a reason code present or absent). A missing value (None/NaN) means "not labelled"
and is ignored. Each (item, annotator) may appear once: pass the *current* label of each
annotator (labels are append-only history; the caller picks the latest row).

Definitions used throughout:

* a unit (item) is *pairable* when it carries at least two labels;
* **raw agreement** is, per pairable item, the share of annotator pairs that gave the same
  value, averaged over items (for two annotators: the share of shared items they agree on);
* **Cohen's kappa** (two annotators) is ``(p_o - p_e) / (1 - p_e)`` over the items both
  labelled, with ``p_e`` from each annotator's own marginals; it is ``None`` when ``p_e`` is 1
  (both used one and the same value throughout), where any number would be made up;
* **Krippendorff's alpha (nominal)** is ``1 - D_o / D_e`` from the coincidence matrix of all
  pairable items, so it works for any number of annotators and missing labels; it is ``None``
  when there is no variation at all (every pairable label is the same value) or nothing is
  pairable.

Everything is computed with one factorisation and counting (``np.bincount``), no loop over
rows; the per-pair table uses one self-join on the item. ``agreement_report_sql`` computes the
Agreement page's report from SQL aggregates instead, without reading every label.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from sqlalchemy import (
    BigInteger,
    Engine,
    Text,
    and_,
    case,
    cast,
    distinct,
    func,
    literal,
    null,
    select,
    union_all,
)
from sqlalchemy.orm import aliased

from review.core.errors import InputError
from review.labels.labeling import current_label_filter
from storage.db import read_session
from storage.models import Case, CaseSlice, Label

__all__ = [
    "TABLE_COLUMNS",
    "AgreementReport",
    "agreement_report",
    "agreement_report_sql",
    "agreement_table",
    "cohen_kappa",
    "confusion_pairs",
    "disagreements",
    "krippendorff_alpha_nominal",
    "raw_agreement",
    "reason_code_presence",
    "reason_code_tables",
]

IntArray = npt.NDArray[np.int64]

TABLE_COLUMNS = [
    "field",
    "scope",
    "annotator_a",
    "annotator_b",
    "n_items",
    "n_annotators",
    "raw_agreement",
    "cohen_kappa",
    "krippendorff_alpha",
    "note",
]


# --- preparing the long table ----------------------------------------------------------------


def _factorize(values: pd.Series) -> tuple[IntArray, list[Any]]:
    """Integer codes and the sorted unique values (insertion order if they cannot be sorted)."""
    try:
        codes, uniques = pd.factorize(values, sort=True)
    except TypeError:
        codes, uniques = pd.factorize(values, sort=False)
    return np.asarray(codes, dtype=np.int64), list(uniques)


@dataclass(frozen=True)
class _Coded:
    item: IntArray  # item code per label
    annotator: IntArray  # annotator code per label
    value: IntArray  # value code per label
    items: list[Any]
    annotators: list[Any]
    values: list[Any]


def _prepare(
    df: pd.DataFrame,
    item: str,
    annotator: str,
    value: str,
    what: str = "labels",
) -> _Coded:
    if not isinstance(df, pd.DataFrame):
        raise InputError(f"{what}: expected a table (DataFrame), got {type(df).__name__}")
    missing = [c for c in (item, annotator, value) if c not in df.columns]
    if missing:
        raise InputError(
            f"{what}: missing column(s) {', '.join(map(repr, missing))}; "
            f"expected {item!r}, {annotator!r} and {value!r}"
        )
    if df[item].isna().any():
        raise InputError(f"{what}: column {item!r} has empty item ids")
    if df[annotator].isna().any():
        raise InputError(f"{what}: column {annotator!r} has empty annotator ids")
    rows = df.loc[df[value].notna(), [item, annotator, value]]
    item_codes, items = _factorize(rows[item])
    ann_codes, annotators = _factorize(rows[annotator])
    val_codes, values = _factorize(rows[value])
    key = item_codes * max(len(annotators), 1) + ann_codes
    ordered = np.sort(key)
    if len(ordered) > 1 and bool((ordered[1:] == ordered[:-1]).any()):
        dup = rows.duplicated(subset=[item, annotator], keep=False)
        first = rows.loc[dup, [item, annotator]].drop_duplicates().head(3)
        pairs = "; ".join(f"item {i!r} by {a!r}" for i, a in first.itertuples(index=False))
        raise InputError(
            f"{what}: {int(dup.sum())} rows give a second label for the same item and "
            f"annotator ({pairs}); pass only each annotator's current label"
        )
    return _Coded(item_codes, ann_codes, val_codes, items, annotators, values)


@dataclass(frozen=True)
class _UnitStats:
    m: IntArray  # labels per item
    same_pairs: IntArray  # unordered pairs of equal labels per item
    value_counts_pairable: IntArray  # n_c over pairable items


def _unit_stats(c: _Coded) -> _UnitStats:
    n_items, n_values = len(c.items), max(len(c.values), 1)
    m = np.bincount(c.item, minlength=n_items)
    cell, counts = np.unique(c.item * n_values + c.value, return_counts=True)
    same = np.bincount(cell // n_values, weights=counts * (counts - 1) // 2, minlength=n_items)
    pairable_label = m[c.item] >= 2
    n_c = np.bincount(c.value[pairable_label], minlength=n_values)
    return _UnitStats(m.astype(np.int64), same.astype(np.int64), n_c.astype(np.int64))


def _alpha(stats: _UnitStats) -> float | None:
    pairable = stats.m >= 2
    n = int(stats.value_counts_pairable.sum())
    if n == 0:
        return None
    # observed coincidences on the diagonal: sum over items of n_uc(n_uc - 1) / (m_u - 1)
    agree = float(np.sum(2 * stats.same_pairs[pairable] / (stats.m[pairable] - 1)))
    expected_denominator = n * n - int(np.sum(stats.value_counts_pairable**2))
    if expected_denominator == 0:
        return None
    return 1.0 - (n - 1) * (n - agree) / expected_denominator


def _raw(stats: _UnitStats) -> float | None:
    pairable = stats.m >= 2
    if not pairable.any():
        return None
    m = stats.m[pairable]
    return float(np.mean(stats.same_pairs[pairable] / (m * (m - 1) // 2)))


# --- public functions --------------------------------------------------------------------------


def cohen_kappa(a: Iterable[Any], b: Iterable[Any]) -> float | None:
    """Cohen's kappa of two aligned label sequences (positions where either is missing are
    skipped). ``None`` when undefined: no shared labels, or expected agreement is 1."""
    sa, sb = pd.Series(list(a), dtype=object), pd.Series(list(b), dtype=object)
    if len(sa) != len(sb):
        raise InputError(
            f"cohen_kappa: the two label lists have different lengths ({len(sa)} and {len(sb)})"
        )
    keep = (sa.notna() & sb.notna()).to_numpy()
    sa, sb = sa[keep], sb[keep]
    n = len(sa)
    if n == 0:
        return None
    codes, uniques = _factorize(pd.concat([sa, sb], ignore_index=True))
    k = len(uniques)
    ca, cb = codes[:n], codes[n:]
    agree = int(np.count_nonzero(ca == cb))
    chance = int(np.dot(np.bincount(ca, minlength=k), np.bincount(cb, minlength=k)))
    denominator = n * n - chance
    if denominator == 0:
        return None
    return (n * agree - chance) / denominator


def krippendorff_alpha_nominal(
    df: pd.DataFrame, *, item: str = "item", annotator: str = "annotator", value: str = "value"
) -> float | None:
    """Krippendorff's alpha for nominal values over any number of annotators, with missing
    labels allowed (items with fewer than two labels are not pairable and are left out).
    ``None`` when nothing is pairable or every pairable label has the same value."""
    return _alpha(_unit_stats(_prepare(df, item, annotator, value)))


def raw_agreement(
    df: pd.DataFrame, *, item: str = "item", annotator: str = "annotator", value: str = "value"
) -> float | None:
    """Share of agreeing annotator pairs per pairable item, averaged over items (``None``
    when no item has two labels)."""
    return _raw(_unit_stats(_prepare(df, item, annotator, value)))


def _pair_frame(c: _Coded) -> pd.DataFrame:
    """One row per (item, annotator a, annotator b) with a < b, and the two value codes.

    A self-join without pandas' merge: with the labels sorted by item, the labels d places
    apart on the same item are the pairs at distance d; d runs up to the largest item."""
    order = np.argsort(c.item, kind="stable")
    u, a, v = c.item[order], c.annotator[order], c.value[order]
    firsts: list[IntArray] = []
    seconds: list[IntArray] = []
    d = 1
    while d < len(u):
        at = np.flatnonzero(u[d:] == u[:-d])
        if not len(at):  # no item has more than d labels
            break
        firsts.append(at)
        seconds.append(at + d)
        d += 1
    x = np.concatenate(firsts) if firsts else np.empty(0, np.int64)
    y = np.concatenate(seconds) if seconds else np.empty(0, np.int64)
    swap = a[x] > a[y]
    x, y = np.where(swap, y, x), np.where(swap, x, y)
    return pd.DataFrame({"u": u[x], "a_a": a[x], "v_a": v[x], "a_b": a[y], "v_b": v[y]})


def _pairwise(c: _Coded) -> pd.DataFrame:
    """Per annotator pair: shared items, raw agreement, kappa and why kappa may be undefined."""
    pairs = _pair_frame(c)
    k = max(len(c.values), 1)
    if pairs.empty:
        return pd.DataFrame(columns=["a", "b", "n", "raw", "kappa", "note"])
    key = pairs["a_a"].to_numpy(np.int64) * len(c.annotators) + pairs["a_b"].to_numpy(np.int64)
    pair_keys, pair_idx = np.unique(key, return_inverse=True)
    n_pairs = len(pair_keys)
    va, vb = pairs["v_a"].to_numpy(np.int64), pairs["v_b"].to_numpy(np.int64)
    n = np.bincount(pair_idx, minlength=n_pairs)
    agree = np.bincount(pair_idx, weights=(va == vb), minlength=n_pairs).astype(np.int64)
    rows = np.bincount(pair_idx * k + va, minlength=n_pairs * k).reshape(n_pairs, k)
    cols = np.bincount(pair_idx * k + vb, minlength=n_pairs * k).reshape(n_pairs, k)
    chance = np.sum(rows * cols, axis=1)
    denominator = n * n - chance
    defined = denominator != 0
    kappa = np.full(n_pairs, np.nan)
    kappa[defined] = (n * agree - chance)[defined] / denominator[defined]
    note = np.full(n_pairs, "", dtype=object)
    for i in np.flatnonzero(~defined):  # only the pairs where kappa is undefined
        only = c.values[int(np.argmax(rows[i]))]
        note[i] = f"kappa undefined: both gave only {only!r} (no variation)"
    return pd.DataFrame(
        {
            "a": pair_keys // len(c.annotators),
            "b": pair_keys % len(c.annotators),
            "n": n,
            "raw": agree / n,
            "kappa": kappa,
            "note": note,
        }
    )


def agreement_table(
    df: pd.DataFrame,
    field_name: str,
    *,
    item: str = "item",
    annotator: str = "annotator",
    value: str = "value",
) -> pd.DataFrame:
    """Agreement on one labelled field, ready to show.

    One ``scope == "pair"`` row per pair of annotators that share at least one item (n_items,
    raw agreement, Cohen's kappa), then one ``scope == "all"`` row with Krippendorff's alpha,
    raw agreement over all pairable items, the number of pairable items and of annotators.
    Undefined statistics are NaN with the reason in ``note``. Columns: ``TABLE_COLUMNS``.
    """
    c = _prepare(df, item, annotator, value)
    stats = _unit_stats(c)
    pw = _pairwise(c)
    alpha, raw = _alpha(stats), _raw(stats)
    n_pairable = int(np.count_nonzero(stats.m >= 2))
    if n_pairable == 0:
        note = "no item has labels from two annotators yet"
    elif alpha is None:
        only = c.values[int(np.argmax(stats.value_counts_pairable))]
        note = f"alpha undefined: every label is {only!r} (no variation)"
    else:
        note = ""
    return _assemble(
        field_name,
        {
            "annotator_a": [c.annotators[int(i)] for i in pw["a"]],
            "annotator_b": [c.annotators[int(i)] for i in pw["b"]],
            "n_items": pw["n"].astype(np.int64),
            "raw_agreement": pw["raw"].astype(float),
            "cohen_kappa": pw["kappa"].astype(float),
            "note": pw["note"].astype(object),
        },
        {
            "n_items": n_pairable,
            "n_annotators": len(c.annotators),
            "raw_agreement": np.nan if raw is None else raw,
            "krippendorff_alpha": np.nan if alpha is None else alpha,
            "note": note,
        },
    )


def _assemble(field_name: str, pairs: dict[str, Any], overall: dict[str, Any]) -> pd.DataFrame:
    """The ``agreement_table`` frame: the pair rows (columns given in ``pairs``), then the
    one overall row (values in ``overall``), with the table's types."""
    pair_rows = pd.DataFrame(
        {
            "field": field_name,
            "scope": "pair",
            "n_annotators": 2,
            "krippendorff_alpha": np.nan,
            **pairs,
        },
        columns=TABLE_COLUMNS,
    )
    whole = pd.DataFrame(
        [
            {
                "field": field_name,
                "scope": "all",
                "annotator_a": None,
                "annotator_b": None,
                "cohen_kappa": np.nan,
                **overall,
            }
        ],
        columns=TABLE_COLUMNS,
    )
    frames = [f for f in (pair_rows, whole) if not f.empty]
    out = pd.concat(frames, ignore_index=True)
    return out.astype(
        {
            "n_items": np.int64,
            "n_annotators": np.int64,
            "raw_agreement": float,
            "cohen_kappa": float,
            "krippendorff_alpha": float,
        }
    )


def _presence(
    df_reasons: pd.DataFrame,
    labeled: pd.DataFrame | None = None,
    codes: Sequence[str] | None = None,
    *,
    item: str = "item",
    annotator: str = "annotator",
    reason_code: str = "reason_code",
) -> tuple[pd.DataFrame, list[Any], npt.NDArray[np.bool_]]:
    """The submitted (item, annotator) pairs, the codes, and a pairs x codes presence
    matrix; arguments and checks as in ``reason_code_presence``."""
    for name, frame, cols in (
        ("reason codes", df_reasons, (item, annotator, reason_code)),
        ("labelled items", labeled, (item, annotator)),
    ):
        if frame is None:
            continue
        if not isinstance(frame, pd.DataFrame):
            raise InputError(f"{name}: expected a table (DataFrame), got {type(frame).__name__}")
        missing = [col for col in cols if col not in frame.columns]
        if missing:
            raise InputError(f"{name}: missing column(s) {', '.join(map(repr, missing))}")
    given = df_reasons[[item, annotator]]
    pairs_src = given if labeled is None else labeled[[item, annotator]]
    pairs = pairs_src.drop_duplicates().reset_index(drop=True)
    present_rows = df_reasons.loc[df_reasons[reason_code].notna(), [item, annotator, reason_code]]
    used = list(dict.fromkeys(present_rows[reason_code].tolist()))
    if codes is None:
        code_list = sorted(used, key=str)
    else:
        code_list = list(dict.fromkeys(codes))
        unknown = [u for u in used if u not in set(code_list)]
        if unknown:
            raise InputError(
                "reason codes: not in the list of reason codes: "
                + ", ".join(repr(u) for u in sorted(unknown, key=str))
            )
    located = present_rows.merge(pairs.reset_index(names="_pair"), on=[item, annotator], how="left")
    if located["_pair"].isna().any():
        stray = located.loc[located["_pair"].isna(), [item, annotator]].head(3)
        where = "; ".join(f"item {i!r} by {a!r}" for i, a in stray.itertuples(index=False))
        raise InputError(f"reason codes: given for labels that were not submitted ({where})")
    code_index = {code: i for i, code in enumerate(code_list)}
    matrix = np.zeros((len(pairs), len(code_list)), dtype=bool)
    if len(located):
        rows = located["_pair"].to_numpy(np.int64)
        cols = located[reason_code].map(code_index).to_numpy(np.int64)
        matrix[rows, cols] = True
    return pairs, code_list, matrix


def reason_code_presence(
    df_reasons: pd.DataFrame,
    labeled: pd.DataFrame | None = None,
    codes: Sequence[str] | None = None,
    *,
    item: str = "item",
    annotator: str = "annotator",
    reason_code: str = "reason_code",
) -> pd.DataFrame:
    """Turn reason-code labels into present/absent per (code, item, annotator).

    ``df_reasons`` has one row per code an annotator gave an item; a row whose code is empty
    (None) records that the annotator labelled the item with no code at all. ``labeled``
    (columns item, annotator), when given, is the full list of submitted labels, so a label
    with no reason-code row still counts as "absent" for every code. ``codes`` is the list to
    report (for instance the taxonomy's reason codes, so unused codes still appear); a code
    outside it is refused. Returns columns ``code, item, annotator, value`` (bool).
    """
    pairs, code_list, matrix = _presence(
        df_reasons, labeled, codes, item=item, annotator=annotator, reason_code=reason_code
    )
    n_pairs, n_codes = matrix.shape
    return pd.DataFrame(
        {
            "code": np.repeat(np.array(code_list, dtype=object), n_pairs),
            item: np.tile(pairs[item].to_numpy(), n_codes),
            annotator: np.tile(pairs[annotator].to_numpy(), n_codes),
            "value": matrix.T.reshape(-1),
        }
    )


def reason_code_tables(
    df_reasons: pd.DataFrame,
    labeled: pd.DataFrame | None = None,
    codes: Sequence[str] | None = None,
    *,
    item: str = "item",
    annotator: str = "annotator",
    reason_code: str = "reason_code",
) -> pd.DataFrame:
    """``agreement_table`` for every reason code treated as present/absent, stacked; the
    ``field`` column holds the code. Arguments as in ``reason_code_presence``."""
    pairs, code_list, matrix = _presence(
        df_reasons, labeled, codes, item=item, annotator=annotator, reason_code=reason_code
    )
    frames = [
        agreement_table(
            pd.DataFrame({item: pairs[item], annotator: pairs[annotator], "value": matrix[:, j]}),
            str(code),
            item=item,
            annotator=annotator,
            value="value",
        )
        for j, code in enumerate(code_list)
    ]
    if not frames:
        return pd.DataFrame(columns=TABLE_COLUMNS)
    return pd.concat(frames, ignore_index=True)


def confusion_pairs(
    df: pd.DataFrame,
    categories: Sequence[Hashable] | None = None,
    *,
    mirror: bool = False,
    item: str = "item",
    annotator: str = "annotator",
    value: str = "value",
) -> pd.DataFrame:
    """How often two annotators on the same item gave each pair of values (for a heatmap).

    Every unordered pair of annotators on an item counts once, under ``(value_a, value_b)``
    with ``value_a`` not after ``value_b`` in category order, so ``pairs`` sums to the number
    of annotator pairs. ``mirror=True`` also lists each disagreement the other way round (a
    symmetric grid; then only cells with ``value_a <= value_b`` add up to the pair count).
    With ``categories`` (e.g. the taxonomy's decisions) every cell is listed, zeros included,
    in that order, and a value outside the list is refused. Columns: value_a, value_b, pairs.
    """
    c = _prepare(df, item, annotator, value)
    if categories is None:
        cats: list[Any] = list(c.values)
        remap = np.arange(len(cats), dtype=np.int64)
    else:
        cats = list(dict.fromkeys(categories))
        position = {v: i for i, v in enumerate(cats)}
        unknown = [v for v in c.values if v not in position]
        if unknown:
            raise InputError(
                f"labels: value(s) {', '.join(map(repr, unknown))} are not among the "
                f"categories {', '.join(map(repr, cats))}"
            )
        remap = np.array([position[v] for v in c.values], dtype=np.int64)
    k = len(cats)
    if k == 0:
        return pd.DataFrame({"value_a": [], "value_b": [], "pairs": np.array([], np.int64)})
    # per-item value counts, then M = U^T U without a dense item x value matrix
    cell, counts = np.unique(c.item * k + remap[c.value], return_counts=True)
    cells = pd.DataFrame({"u": cell // k, "v": cell % k, "n": counts})
    joined = cells.merge(cells, on="u", suffixes=("_a", "_b"))
    joined = joined.loc[joined["v_a"] <= joined["v_b"]]
    same = (joined["v_a"] == joined["v_b"]).to_numpy()
    na, nb = joined["n_a"].to_numpy(np.int64), joined["n_b"].to_numpy(np.int64)
    weight = np.where(same, na * (na - 1) // 2, na * nb)
    grid = np.zeros((k, k), dtype=np.int64)
    np.add.at(grid, (joined["v_a"].to_numpy(np.int64), joined["v_b"].to_numpy(np.int64)), weight)
    if mirror:
        grid = grid + np.triu(grid, 1).T
    ia = np.repeat(np.arange(k), k)
    ib = np.tile(np.arange(k), k)
    # without categories: only the cells that occur; with them: the full (half) grid
    keep = grid[ia, ib] > 0 if categories is None else (ia <= ib) | mirror
    ia, ib = ia[keep], ib[keep]
    return pd.DataFrame(
        {
            "value_a": [cats[i] for i in ia],
            "value_b": [cats[i] for i in ib],
            "pairs": grid[ia, ib],
        }
    )


def disagreements(
    df: pd.DataFrame, *, item: str = "item", annotator: str = "annotator", value: str = "value"
) -> list[Any]:
    """Items whose (non-missing) labels are not all the same, in item order: the
    adjudication queue."""
    c = _prepare(df, item, annotator, value)
    if not c.items:
        return []
    n_items = len(c.items)
    lo = np.full(n_items, np.iinfo(np.int64).max)
    hi = np.full(n_items, -1)
    np.minimum.at(lo, c.item, c.value)
    np.maximum.at(hi, c.item, c.value)
    return [c.items[int(i)] for i in np.flatnonzero((hi >= 0) & (lo != hi))]


# --- the Agreement page's tables ---------------------------------------------------------------


@dataclass(frozen=True)
class AgreementReport:
    """Everything the Agreement page shows for one slice/category filter."""

    cases: int
    annotators: int
    labels: int
    decision: pd.DataFrame  # agreement_table of the expected decision
    decision_pairs: pd.DataFrame  # confusion_pairs (mirrored)
    reasons: pd.DataFrame  # reason_code_tables
    groups: pd.DataFrame  # one row per slice or category: items, annotators, raw, alpha, note


def _filtered(labels: pd.DataFrame, slice_: str, category: str) -> pd.DataFrame:
    if slice_:
        labels = labels[[slice_ in s for s in labels["slices"]]]
    if category:
        labels = labels[labels["case_category"] == category]
    return labels


def agreement_report(
    labels: pd.DataFrame,
    decisions: Sequence[str],
    reason_codes: Sequence[str],
    *,
    slice_: str = "",
    category: str = "",
    group_by: str = "slice",
) -> AgreementReport | None:
    """The page's statistics over current labels (``review.labels.labeling.labels_frame``), within
    a slice and/or category; None when no label is left."""
    labels = _filtered(labels, slice_, category)
    if labels.empty:
        return None
    dec = agreement_table(labels, "decision", item="case_id", value="decision")
    pairs = confusion_pairs(labels, list(decisions), mirror=True, item="case_id", value="decision")
    exploded = labels.explode("reason_codes").rename(columns={"reason_codes": "reason_code"})
    exploded["reason_code"] = exploded["reason_code"].astype(object)
    rc = reason_code_tables(exploded, codes=list(reason_codes), item="case_id")
    if group_by == "category":
        grouped = labels.groupby("case_category", observed=True)
    else:
        grouped = labels.explode("slices").dropna(subset=["slices"]).groupby("slices")
    rows = []
    for name, g in grouped:
        t = agreement_table(g, "decision", item="case_id", value="decision")
        allrow = t[t["scope"] == "all"]
        if allrow.empty:
            continue
        r = allrow.iloc[0]
        rows.append(
            {
                "group": name,
                "items": r["n_items"],
                "annotators": r["n_annotators"],
                "raw agreement": r["raw_agreement"],
                "alpha": r["krippendorff_alpha"],
                "note": r["note"],
            }
        )
    groups = pd.DataFrame(
        rows, columns=["group", "items", "annotators", "raw agreement", "alpha", "note"]
    )
    return AgreementReport(
        cases=int(labels["case_id"].nunique()),
        annotators=int(labels["annotator"].nunique()),
        labels=len(labels),
        decision=dec,
        decision_pairs=pairs,
        reasons=rc,
        groups=groups,
    )


# --- the same report from SQL aggregates -------------------------------------------------------
#
# ``agreement_report`` needs every current label in memory. ``agreement_report_sql`` gets the
# same numbers from the database in two aggregate statements (and a few small look-ups) whose
# results have a handful of rows however many labels there are:
#
# * the overall rows need, per field, how many items carry m labels, the pairs of equal labels
#   on them, and how often each value occurs on pairable items. Per case (GROUP BY case) the
#   label count and the count of each decision and each reason code, then per m the sums of
#   those counts and of their squares (equal pairs on an item: sum of c(c-1)/2 over values);
#   the same per (group, m) for the slice or category table, in the same statement;
# * the pair rows need, per annotator pair, the confusion counts over the items both
#   labelled: one self-join of the current labels on the case, grouped by the two annotators
#   and the two decisions, with each reason code's "both have it", "a has it" and "b has it"
#   counts summed alongside (packed several codes to an integer);
# * the decision heatmap is the pair counts summed over the annotator pairs.
#
# A reason code is present when the label's JSON list holds the code's JSON string (codes are
# identifiers, stored by json.dumps). Codes outside the list are looked for in the distinct
# code lists and refused as ``agreement_report`` refuses them. Sums over items are exact
# integers; the statistics are then computed as ``agreement_table`` computes them, so they
# agree with it to the last bit or two (the reference adds floats item by item).

_GROUP_COLUMNS = ["group", "items", "annotators", "raw agreement", "alpha", "note"]


@dataclass
class _Overall:
    """One field's totals for its ``scope == "all"`` row."""

    items: dict[int, int]  # label count m -> items with m labels
    same: dict[int, int]  # m -> pairs of equal labels summed over those items
    counts: dict[Any, int]  # value -> labels with that value on pairable items (sorted values)
    annotators: int


@dataclass
class _PairCounts:
    """Confusion counts of one annotator pair over the items both labelled."""

    n: int = 0
    agree: int = 0
    rows: dict[Any, int] = field(default_factory=dict)  # annotator a's values
    cols: dict[Any, int] = field(default_factory=dict)  # annotator b's values


def _argmax(counts: dict[Any, int]) -> Any:
    """The value with the largest count, the first in value order on a tie (as np.argmax)."""
    best, most = None, -1
    for value, n in counts.items():
        if n > most:
            best, most = value, n
    return best


def _overall_values(o: _Overall) -> tuple[int, float | None, float | None, str]:
    """Pairable items, raw agreement, alpha and note, as ``_unit_stats``/``_alpha``/``_raw``
    and ``agreement_table`` give them (sums over items done exactly, then rounded)."""
    pairable = {m: k for m, k in o.items.items() if m >= 2 and k}
    n_pairable = sum(pairable.values())
    if n_pairable == 0:
        return 0, None, None, "no item has labels from two annotators yet"
    raw_sum = sum(
        (Fraction(o.same.get(m, 0), m * (m - 1) // 2) for m in pairable), start=Fraction(0)
    )
    raw = float(raw_sum / n_pairable)
    n = sum(o.counts.values())
    agree = float(sum((Fraction(2 * o.same.get(m, 0), m - 1) for m in pairable), Fraction(0)))
    expected_denominator = n * n - sum(c * c for c in o.counts.values())
    alpha = None
    if n and expected_denominator:
        alpha = 1.0 - (n - 1) * (n - agree) / expected_denominator
    note = ""
    if alpha is None:
        note = f"alpha undefined: every label is {_argmax(o.counts)!r} (no variation)"
    return n_pairable, raw, alpha, note


def _table_frame(
    field_name: str, pairs: dict[tuple[str, str], _PairCounts], overall: _Overall
) -> pd.DataFrame:
    """The frame ``agreement_table`` returns, from the counts (pairs in annotator order)."""
    keys = sorted(pairs)
    ns, raws, kappas, notes = [], [], [], []
    for key in keys:
        p = pairs[key]
        chance = sum(p.rows.get(v, 0) * p.cols.get(v, 0) for v in p.rows)
        denominator = p.n * p.n - chance
        ns.append(p.n)
        raws.append(p.agree / p.n)
        if denominator:
            kappas.append((p.n * p.agree - chance) / denominator)
            notes.append("")
        else:
            kappas.append(np.nan)
            only = _argmax(p.rows)
            notes.append(f"kappa undefined: both gave only {only!r} (no variation)")
    n_pairable, raw, alpha, note = _overall_values(overall)
    return _assemble(
        field_name,
        {
            "annotator_a": [a for a, _ in keys],
            "annotator_b": [b for _, b in keys],
            "n_items": np.array(ns, dtype=np.int64),
            "raw_agreement": np.array(raws, dtype=float),
            "cohen_kappa": np.array(kappas, dtype=float),
            "note": pd.Series(notes, dtype=object),
        },
        {
            "n_items": n_pairable,
            "n_annotators": overall.annotators,
            "raw_agreement": np.nan if raw is None else raw,
            "krippendorff_alpha": np.nan if alpha is None else alpha,
            "note": note,
        },
    )


def _one(condition: Any) -> Any:
    """SQL: 1 where ``condition`` holds, else 0 (to count with SUM)."""
    return case((condition, 1), else_=0)


def _holds(dialect: str, text: Any, needle: str) -> Any:
    """SQL: ``text`` contains ``needle`` (case-sensitive on both databases)."""
    if dialect == "sqlite":
        return func.instr(text, needle) > 0
    if dialect == "postgresql":
        return func.strpos(text, needle) > 0
    return text.contains(needle, autoescape=True)


def _in_scope(stmt: Any, slice_: str, category: str) -> Any:
    """Restrict a statement over ``labels`` to the cases of a slice and/or category."""
    if slice_:
        sl = aliased(CaseSlice)
        stmt = stmt.where(Label.case_id.in_(select(sl.case_id).where(sl.slice == slice_)))
    if category:
        cs = aliased(Case)
        stmt = stmt.where(Label.case_id.in_(select(cs.id).where(cs.category == category)))
    return stmt


def _position(dialect: str, column: Any, ordered: Sequence[str]) -> Any:
    """SQL: the index of ``column``'s value in ``ordered`` (sorted in Python's order; the value
    must be one of them), by bisection: a CASE tree of depth log2(len). Strings compare by
    code point in Python; SQLite's default collation and PostgreSQL's "C" do the same."""
    if not ordered:
        return literal(0)
    compared = column.collate("C") if dialect == "postgresql" else column

    def node(lo: int, hi: int) -> Any:
        if hi - lo == 1:
            return literal(lo)
        mid = (lo + hi) // 2
        return case((compared < ordered[mid], node(lo, mid)), else_=node(mid, hi))

    return node(0, len(ordered))


@dataclass(frozen=True)
class _Packing:
    """Several 0/1 flags summed in one integer: flag j of a chunk adds ``2**(width*j)``, so
    each sum holds every flag's count in its own ``width`` bits (counts stay below
    ``2**width``: width fits the number of items). Fewer aggregates over the self-join, and
    ``a & b`` of two packed labels is "both have the flag", flag by flag."""

    width: int
    chunks: list[list[int]]  # flag indexes packed together

    @staticmethod
    def for_counts(n_flags: int, most: int) -> _Packing:
        width = max(1, most.bit_length())
        per = max(1, 62 // width)  # stays below 2**62: no overflow in SQLite's SUM
        return _Packing(
            width, [list(range(i, min(i + per, n_flags))) for i in range(0, n_flags, per)]
        )

    def columns(self, flags: Sequence[Any]) -> list[Any]:
        return [
            sum(
                (
                    case((flags[j], literal(1 << (self.width * t), BigInteger)), else_=0)
                    for t, j in enumerate(chunk)
                ),
                start=literal(0, BigInteger),
            )
            for chunk in self.chunks
        ]

    def unpack(self, totals: Sequence[Any]) -> list[int]:
        """Per flag, its count from the chunks' sums."""
        out: list[int] = []
        mask = (1 << self.width) - 1
        for chunk, total in zip(self.chunks, totals, strict=True):
            value = int(total or 0)
            out.extend((value >> (self.width * t)) & mask for t in range(len(chunk)))
        return out


def _decision_overall(
    rows: Sequence[Any], cats: list[str], values: list[str], annotators: int
) -> _Overall:
    """Decision totals from rows ``(m, items, sum of each decision's count per item, sum of
    the squares of those counts, ...)``, one row per label count m."""
    items: dict[int, int] = {}
    same: dict[int, int] = {}
    counts = dict.fromkeys(values, 0)
    for r in rows:
        m, k = int(r[0]), int(r[1])
        items[m] = k
        same[m] = (int(r[2 + len(cats)] or 0) - m * k) // 2
        if m >= 2:
            for j, d in enumerate(cats):
                counts[d] += int(r[2 + j] or 0)
    return _Overall(items, same, counts, annotators)


def _unknown_codes(conn: Any, rc: Any, codes: list[str], slice_: str, category: str) -> list[str]:
    """Reason codes outside ``codes`` in current labels (sorted), read from the distinct
    code lists (a few dozen texts, not a row per label)."""
    known = set(codes)

    def odd(texts: Iterable[str | None]) -> dict[str, set[str]]:
        found = {}
        for text in texts:
            extra = {str(x) for x in (json.loads(text) if text else [])} - known
            if extra:
                found[str(text)] = extra
        return found

    # every label first (cheap, no "current" test); only suspects are checked again
    suspects = odd(conn.scalars(_in_scope(select(rc).distinct(), slice_, category)))
    if not suspects:
        return []
    current = odd(
        conn.scalars(
            _in_scope(select(rc).distinct(), slice_, category).where(
                current_label_filter(), rc.in_(sorted(suspects))
            )
        )
    )
    return sorted(set().union(*current.values()), key=str) if current else []


def agreement_report_sql(
    engine: Engine,
    decisions: Sequence[str],
    reason_codes: Sequence[str],
    *,
    slice_: str = "",
    category: str = "",
    group_by: str = "slice",
) -> AgreementReport | None:
    """``agreement_report`` over the current labels in the database, from SQL aggregates only
    (no query returns a row per label): the same tables, values, row order and notes; None
    when no label is left. Decisions or reason codes outside the lists are refused with the
    same error. Two aggregate statements over the labels and a few small look-ups, in one
    read transaction (one snapshot)."""
    cats = list(dict.fromkeys(decisions))
    codes = list(dict.fromkeys(reason_codes))
    n_cats, n_codes = len(cats), len(codes)
    dialect = engine.dialect.name
    rc = cast(Label.reason_codes, Text)  # NULL: no code (instr and strpos give NULL)
    present = [_holds(dialect, rc, json.dumps(code)) for code in codes]
    if group_by == "category":
        key: Any = Case.category
        group_join: Any = (Case, Case.id)
    else:
        key = CaseSlice.slice
        group_join = (CaseSlice, CaseSlice.case_id)

    with read_session(engine) as s:
        # one snapshot for every statement (SQLite's read transaction already is one)
        options = {"isolation_level": "REPEATABLE READ"} if dialect == "postgresql" else {}
        conn = s.connection(execution_options=options)

        # 1. per case: label count m and the count of each decision and reason code; then
        #    summed per m, overall and per group (slice or category)
        item = _in_scope(
            select(
                Label.case_id.label("case_id"),
                func.count().label("m"),
                *[func.sum(_one(Label.decision == d)).label(f"d{j}") for j, d in enumerate(cats)],
                *[func.sum(_one(p)).label(f"p{k}") for k, p in enumerate(present)],
            )
            .where(current_label_filter())
            .group_by(Label.case_id),
            slice_,
            category,
        ).cte("item")
        c = item.c
        decision_sums = [
            *[func.sum(c[f"d{j}"]) for j in range(n_cats)],
            func.sum(sum((c[f"d{j}"] * c[f"d{j}"] for j in range(n_cats)), literal(0))),
        ]
        overall_part = select(
            literal(0).label("part"),
            null().label("g"),
            c.m,
            func.count(),
            *decision_sums,
            *[func.sum(c[f"p{k}"]) for k in range(n_codes)],
            *[func.sum(c[f"p{k}"] * c[f"p{k}"]) for k in range(n_codes)],
        ).group_by(c.m)
        table, on = group_join
        group_part = (
            select(
                literal(1),
                key,
                c.m,
                func.count(),
                *decision_sums,
                *[null() for _ in range(2 * n_codes)],
            )
            .select_from(item.join(table, on == c.case_id))
            .group_by(key, c.m)
        )
        unit_rows = conn.execute(union_all(overall_part, group_part)).all()
        units = [r[2:] for r in unit_rows if int(r[0]) == 0]
        n_cases = sum(int(r[1]) for r in units)
        n_labels = sum(int(r[0]) * int(r[1]) for r in units)
        if n_labels == 0:
            return None
        if sum(int(r[2 + j] or 0) for r in units for j in range(n_cats)) != n_labels:
            used = conn.scalars(
                _in_scope(select(Label.decision).distinct(), slice_, category).where(
                    current_label_filter(), Label.decision.not_in(cats)
                )
            )
            raise InputError(
                f"labels: value(s) {', '.join(map(repr, sorted(str(d) for d in used)))} are "
                f"not among the categories {', '.join(map(repr, cats))}"
            )
        unknown = _unknown_codes(conn, rc, codes, slice_, category)
        if unknown:
            raise InputError(
                "reason codes: not in the list of reason codes: "
                + ", ".join(repr(u) for u in unknown)
            )

        # 2. annotator pairs on the same case (self-join): per pair of annotators and pair
        #    of decisions, the number of cases and each reason code's both/a/b counts
        #    (packed). Annotators and decisions enter as their positions in Python's order:
        #    small sort keys, and "a < b" as agreement_table orders them.
        annotators = sorted(str(x) for x in conn.scalars(select(Label.annotator).distinct()))
        decision_order = sorted(cats)
        packing = _Packing.for_counts(n_codes, n_cases)
        cur = _in_scope(
            select(
                Label.case_id.label("case_id"),
                _position(dialect, Label.annotator, annotators).label("who"),
                _position(dialect, Label.decision, decision_order).label("value"),
                *[col.label(f"k{i}") for i, col in enumerate(packing.columns(present))],
            ).where(current_label_filter()),
            slice_,
            category,
        ).cte("cur")
        a, b = cur.alias("a"), cur.alias("b")
        n_chunks = len(packing.chunks)
        pair_rows = conn.execute(
            select(
                a.c.who,
                b.c.who,
                a.c.value,
                b.c.value,
                func.count(),
                *[func.sum(a.c[f"k{i}"].bitwise_and(b.c[f"k{i}"])) for i in range(n_chunks)],
                *[func.sum(a.c[f"k{i}"]) for i in range(n_chunks)],
                *[func.sum(b.c[f"k{i}"]) for i in range(n_chunks)],
            )
            .select_from(a.join(b, and_(a.c.case_id == b.c.case_id, a.c.who < b.c.who)))
            .group_by(a.c.who, b.c.who, a.c.value, b.c.value)
        ).all()

        # 3. annotators, overall and per group: every (case, annotator) with a label has
        #    exactly one current label, so these counts need no "current" test
        n_annotators = int(
            conn.scalar(_in_scope(select(func.count(distinct(Label.annotator))), slice_, category))
            or 0
        )
        group_annotators = {
            str(name): int(n)
            for name, n in conn.execute(
                _in_scope(
                    select(key, func.count(distinct(Label.annotator)))
                    .select_from(Label)
                    .join(table, on == Label.case_id)
                    .group_by(key),
                    slice_,
                    category,
                )
            ).all()
        }

    values = sorted(cats)  # value order (only a tie, which the notes never meet, uses it)
    dec_pairs: dict[tuple[str, str], _PairCounts] = {}
    code_pairs: list[dict[tuple[str, str], _PairCounts]] = [{} for _ in codes]
    position = {d: i for i, d in enumerate(cats)}
    grid = np.zeros((n_cats, n_cats), dtype=np.int64)
    for r in pair_rows:
        ann_a, ann_b = annotators[int(r[0])], annotators[int(r[1])]
        val_a, val_b = decision_order[int(r[2])], decision_order[int(r[3])]
        n = int(r[4])
        both = packing.unpack(r[5 : 5 + n_chunks])
        in_a = packing.unpack(r[5 + n_chunks : 5 + 2 * n_chunks])
        in_b = packing.unpack(r[5 + 2 * n_chunks :])
        p = dec_pairs.setdefault((ann_a, ann_b), _PairCounts())
        p.n += n
        p.agree += n if val_a == val_b else 0
        p.rows[val_a] = p.rows.get(val_a, 0) + n
        p.cols[val_b] = p.cols.get(val_b, 0) + n
        i, j = sorted((position[val_a], position[val_b]))
        grid[i, j] += n
        for k in range(n_codes):
            q = code_pairs[k].setdefault((ann_a, ann_b), _PairCounts())
            q.n += n
            q.agree += both[k] + (n - in_a[k] - in_b[k] + both[k])
            q.rows[False] = q.rows.get(False, 0) + n - in_a[k]
            q.rows[True] = q.rows.get(True, 0) + in_a[k]
            q.cols[False] = q.cols.get(False, 0) + n - in_b[k]
            q.cols[True] = q.cols.get(True, 0) + in_b[k]
    for pair_counts in (dec_pairs, *code_pairs):
        for p in pair_counts.values():
            p.rows = {v: p.rows[v] for v in sorted(p.rows)}  # value order, for _argmax
    decision = _table_frame(
        "decision", dec_pairs, _decision_overall(units, cats, values, n_annotators)
    )

    if n_cats == 0:
        decision_pairs = pd.DataFrame(
            {"value_a": [], "value_b": [], "pairs": np.array([], np.int64)}
        )
    else:  # confusion_pairs(..., mirror=True): the full grid in category order
        grid = grid + np.triu(grid, 1).T
        ia = np.repeat(np.arange(n_cats), n_cats)
        ib = np.tile(np.arange(n_cats), n_cats)
        decision_pairs = pd.DataFrame(
            {
                "value_a": [cats[i] for i in ia],
                "value_b": [cats[i] for i in ib],
                "pairs": grid[ia, ib],
            }
        )

    reason_frames = []
    first = 2 + n_cats + 1  # the reason codes' sums follow the decisions' in each row
    for k, code in enumerate(codes):
        items: dict[int, int] = {}
        same: dict[int, int] = {}
        counts = {False: 0, True: 0}
        for u in units:
            m, n_items = int(u[0]), int(u[1])
            got = int(u[first + k] or 0)  # labels with the code
            squares = int(u[first + n_codes + k] or 0)  # sum over cases of (count with it)^2
            items[m] = n_items
            # pairs that agree: both with the code, or both without it
            same[m] = squares - m * got + n_items * m * (m - 1) // 2
            if m >= 2:
                counts[True] += got
                counts[False] += m * n_items - got
        overall = _Overall(items, same, counts, n_annotators)
        reason_frames.append(_table_frame(str(code), code_pairs[k], overall))
    reasons = (
        pd.concat(reason_frames, ignore_index=True)
        if reason_frames
        else pd.DataFrame(columns=TABLE_COLUMNS)
    )

    by_group: dict[str, list[Any]] = {}
    for r in unit_rows:
        if int(r[0]) == 1:
            by_group.setdefault(str(r[1]), []).append(r[2:])
    rows = []
    for name in sorted(by_group):
        o = _decision_overall(by_group[name], cats, values, group_annotators[name])
        n_pairable, raw, alpha, note = _overall_values(o)
        rows.append(
            {
                "group": name,
                "items": n_pairable,
                "annotators": o.annotators,
                "raw agreement": np.nan if raw is None else raw,
                "alpha": np.nan if alpha is None else alpha,
                "note": note,
            }
        )
    return AgreementReport(
        cases=n_cases,
        annotators=n_annotators,
        labels=n_labels,
        decision=decision,
        decision_pairs=decision_pairs,
        reasons=reasons,
        groups=pd.DataFrame(rows, columns=_GROUP_COLUMNS),
    )
