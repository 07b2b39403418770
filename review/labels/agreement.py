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
  pairable;
* **Fleiss' kappa** across everyone, as review.labels.fleiss defines it (Fleiss 1971, and
  Gwet's generalisation when items carry different numbers of labels): :func:`fleiss_sums`
  makes its per-label-count sums from a label table.

Everything is computed with one factorisation and counting (``np.bincount``), no loop over
rows; the per-pair table uses one self-join on the item. ``agreement_report_sql`` computes the
Agreement page's report from SQL aggregates instead, without reading every label.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from review.core import readable
from review.core.errors import InputError
from review.labels.fleiss import FleissSums, fleiss_from_sums, fleiss_table

__all__ = [
    "GROUP_COLUMNS",
    "TABLE_COLUMNS",
    "AgreementReport",
    "Scope",
    "agreement_report",
    "agreement_table",
    "assemble_table",
    "cohen_kappa",
    "cohen_kappa_counts",
    "confusion_pairs",
    "disagreements",
    "fleiss_sums",
    "joined_note",
    "krippendorff_alpha_nominal",
    "raw_agreement",
    "reason_code_fleiss",
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
            f"{what}: missing {readable.plural(len(missing), 'column')} "
            f"{', '.join(map(repr, missing))}; "
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


def cohen_kappa_counts(confusion: Mapping[tuple[Any, Any], int]) -> float | None:
    """Cohen's kappa from a confusion table ``(value of a, value of b) -> items``, as
    :func:`cohen_kappa` gives it over the items those counts stand for (exact integer sums);
    ``None`` when undefined (no item, or expected agreement 1)."""
    n = sum(confusion.values())
    if n == 0:
        return None
    agree = sum(k for (x, y), k in confusion.items() if x == y)
    rows: dict[Any, int] = {}
    cols: dict[Any, int] = {}
    for (x, y), k in confusion.items():
        rows[x] = rows.get(x, 0) + k
        cols[y] = cols.get(y, 0) + k
    chance = sum(k * cols.get(x, 0) for x, k in rows.items())
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


def _fleiss_sums(c: _Coded) -> list[FleissSums]:
    n_items, k = len(c.items), max(len(c.values), 1)
    m = np.bincount(c.item, minlength=n_items)
    cell, counts = np.unique(c.item * k + c.value, return_counts=True)
    cell_value, cell_m = cell % k, m[cell // k]
    out: list[FleissSums] = []
    for mm in np.unique(m[m > 0]):
        here = cell_m == mm
        labels = np.bincount(cell_value[here], weights=counts[here], minlength=k)
        out.append(
            (
                int(mm),
                int(np.count_nonzero(m == mm)),
                {c.values[j]: int(labels[j]) for j in np.flatnonzero(labels)},
                int(np.sum(counts[here].astype(np.int64) ** 2)),
            )
        )
    return out


def fleiss_sums(
    df: pd.DataFrame, *, item: str = "item", annotator: str = "annotator", value: str = "value"
) -> list[FleissSums]:
    """The per-label-count sums (:data:`FleissSums`) of a long label table, in m order."""
    return _fleiss_sums(_prepare(df, item, annotator, value))


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
    return assemble_table(
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


def assemble_table(field_name: str, pairs: dict[str, Any], overall: dict[str, Any]) -> pd.DataFrame:
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
            raise InputError(
                f"{name}: missing {readable.plural(len(missing), 'column')} "
                f"{', '.join(map(repr, missing))}"
            )
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
                f"labels: {readable.plural(len(unknown), 'value')} {', '.join(map(repr, unknown))} "
                f"{readable.plural(len(unknown), 'is', 'are')} not among the "
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
    """Everything the Agreement page shows for one :class:`Scope` (but the per-annotator
    figures: review.labels.annotator_figures)."""

    cases: int
    annotators: int
    labels: int
    decision: pd.DataFrame  # agreement_table of the expected decision
    decision_pairs: pd.DataFrame  # confusion_pairs (mirrored)
    reasons: pd.DataFrame  # reason_code_tables
    groups: pd.DataFrame  # per slice or category: items, annotators, raw, alpha, kappa, note
    fleiss: pd.DataFrame  # fleiss_table of the decision, then of each reason code


#: The per-group table's columns.
GROUP_COLUMNS = ["group", "items", "annotators", "raw agreement", "alpha", "fleiss kappa", "note"]


def joined_note(*notes: str) -> str:
    """The notes of one row's figures, each once, in order."""
    return "; ".join(dict.fromkeys(n for n in notes if n))


def reason_code_fleiss(
    df_reasons: pd.DataFrame,
    labeled: pd.DataFrame | None = None,
    codes: Sequence[str] | None = None,
    *,
    item: str = "item",
    annotator: str = "annotator",
    reason_code: str = "reason_code",
) -> pd.DataFrame:
    """``fleiss_table`` for every reason code treated as present/absent, stacked (arguments
    as in ``reason_code_presence``)."""
    pairs, code_list, matrix = _presence(
        df_reasons, labeled, codes, item=item, annotator=annotator, reason_code=reason_code
    )
    frames = [
        fleiss_table(
            str(code),
            fleiss_sums(
                pd.DataFrame({item: pairs[item], annotator: pairs[annotator], "v": matrix[:, j]}),
                item=item,
                annotator=annotator,
                value="v",
            ),
        )
        for j, code in enumerate(code_list)
    ]
    return pd.concat(frames, ignore_index=True) if frames else fleiss_table("", []).iloc[:0]


@dataclass(frozen=True)
class Scope:
    """Which current labels the Agreement page's figures are over: those on the cases of a
    slice, a category and/or a case family (its key), and those made in one place (``source``:
    "workbench" or a labeling tool) and/or brought by one import (``import_id``,
    ``label_imports.id``); an empty value (or None) does not filter. The label filters apply
    to the current labels: a label replaced since does not count, whatever its source."""

    slice_: str = ""
    category: str = ""
    family: str = ""
    source: str = ""
    import_id: int | None = None

    def __bool__(self) -> bool:
        return any((self.slice_, self.category, self.family, self.source)) or (
            self.import_id is not None
        )


def _filtered(labels: pd.DataFrame, scope: Scope) -> pd.DataFrame:
    if scope.slice_:
        labels = labels[[scope.slice_ in s for s in labels["slices"]]]
    if scope.category:
        labels = labels[labels["case_category"] == scope.category]
    if scope.family:
        labels = labels[labels["family"] == scope.family]
    if scope.source:
        labels = labels[labels["source"] == scope.source]
    if scope.import_id is not None:
        labels = labels[labels["import_id"] == scope.import_id]
    return labels


def agreement_report(
    labels: pd.DataFrame,
    decisions: Sequence[str],
    reason_codes: Sequence[str],
    *,
    slice_: str = "",
    category: str = "",
    family: str = "",
    source: str = "",
    import_id: int | None = None,
    group_by: str = "slice",
) -> AgreementReport | None:
    """The page's statistics over current labels (``review.labels.labeling.labels_frame``), within
    a slice, category, family, source and/or import (:class:`Scope`); None when no label is
    left."""
    labels = _filtered(labels, Scope(slice_, category, family, source, import_id))
    if labels.empty:
        return None
    dec = agreement_table(labels, "decision", item="case_id", value="decision")
    pairs = confusion_pairs(labels, list(decisions), mirror=True, item="case_id", value="decision")
    exploded = labels.explode("reason_codes").rename(columns={"reason_codes": "reason_code"})
    exploded["reason_code"] = exploded["reason_code"].astype(object)
    rc = reason_code_tables(exploded, codes=list(reason_codes), item="case_id")
    fleiss = pd.concat(
        [
            fleiss_table("decision", fleiss_sums(labels, item="case_id", value="decision")),
            reason_code_fleiss(exploded, codes=list(reason_codes), item="case_id"),
        ],
        ignore_index=True,
    )
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
        fl = fleiss_from_sums(fleiss_sums(g, item="case_id", value="decision"))
        rows.append(
            {
                "group": name,
                "items": r["n_items"],
                "annotators": r["n_annotators"],
                "raw agreement": r["raw_agreement"],
                "alpha": r["krippendorff_alpha"],
                "fleiss kappa": np.nan if fl.kappa is None else fl.kappa,
                "note": joined_note(str(r["note"]), fl.note),
            }
        )
    groups = pd.DataFrame(rows, columns=GROUP_COLUMNS)
    return AgreementReport(
        cases=int(labels["case_id"].nunique()),
        annotators=int(labels["annotator"].nunique()),
        labels=len(labels),
        decision=dec,
        decision_pairs=pairs,
        reasons=rc,
        groups=groups,
        fleiss=fleiss,
    )
