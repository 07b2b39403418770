"""Fleiss' kappa: agreement among many annotators on a nominal value.

Fleiss (1971, "Measuring nominal scale agreement among many raters") defines, over N items
that each carry the same number m of labels (n_ij: the labels of value j on item i),

* ``P_i = sum_j n_ij (n_ij - 1) / (m (m - 1))``: the share of agreeing label pairs on item i;
* ``P = mean_i P_i``; ``p_j`` the share of all labels with value j; ``P_e = sum_j p_j^2``;
* ``kappa = (P - P_e) / (1 - P_e)``.

Here it is computed over the items with two labels or more (an item with one label has no
pair; such items are *left out* and counted). When those items carry different numbers of
labels, the figure is the generalisation Gwet gives (Handbook of Inter-Rater Reliability,
4th ed., 2014; irrCAC's ``fleiss.kappa.raw``): ``P_i`` with each item's own m_i, and ``p_j``
the mean over the items of n_ij / m_i, except that the shares are averaged over the items with
two labels or more only (irrCAC also averages in the items with one label). With equal
counts the two are the same number. :func:`fleiss_table` names which one a figure is
(``method``) and adds the exact Fleiss figure of each label count m alone.

Undefined, ``None`` with the reason (never 0 or 1): no item with two labels; only one such
item; every label the same value (``P_e`` = 1, where any number would be made up).

Everything starts from per-label-count sums (:data:`FleissSums`): per m, the items, the labels
of each value, and the sum over items of the squared per-value counts. They are what the
stored rollup ``agreement_item_values`` holds per (m, value), so the Agreement page gets
Fleiss' kappa at any scale from a handful of rows (review.labels.agreement_sql); the pandas
reference (review.labels.agreement.fleiss_sums) makes the same sums from a label table.
Arithmetic is exact (integers and fractions, rounded once), so the same counts give the same
float whichever way they were added up."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from review.core.errors import InputError

__all__ = [
    "ALL_PAIRABLE",
    "FLEISS_COLUMNS",
    "FLEISS_EXACT",
    "FLEISS_GENERALISED",
    "Fleiss",
    "FleissSums",
    "fleiss_from_sums",
    "fleiss_kappa_counts",
    "fleiss_table",
]

#: The Fleiss table's columns: the field, which items (``labels_per_case``: "2 or more" for
#: every pairable item, else one label count m), the definition used, the items used and left
#: out, P, P_e, kappa, and why kappa is undefined.
FLEISS_COLUMNS = [
    "field",
    "labels_per_case",
    "method",
    "n_items",
    "n_left_out",
    "observed_agreement",
    "chance_agreement",
    "fleiss_kappa",
    "note",
]

#: The Fleiss figures' name when every item carries the same number of labels, and when not.
FLEISS_EXACT = "Fleiss (1971)"
FLEISS_GENERALISED = "Fleiss, unequal label counts (Gwet 2014)"
#: ``labels_per_case`` of the row over every pairable item
ALL_PAIRABLE = "2 or more"


#: One label count m: (m, items with m labels, labels per value on those items, sum over those
#: items of the squared count of each value on the item). What Fleiss' kappa needs, and what
#: the stored rollup ``agreement_item_values`` holds per (m, value).
FleissSums = tuple[int, int, Mapping[Any, int], int]


@dataclass(frozen=True)
class Fleiss:
    """Fleiss' kappa and what it is made of (``None`` where undefined, the reason in ``note``)."""

    kappa: float | None
    observed: float | None  # P: mean share of agreeing label pairs per item
    chance: float | None  # P_e: sum of the squared value shares
    items: int  # items used (two labels or more; of one count m when asked)
    left_out: int  # items with labels that were not used
    counts: tuple[int, ...]  # the label counts m of the items used
    note: str

    @property
    def method(self) -> str:
        """The definition the figure follows (see the module doc)."""
        return FLEISS_GENERALISED if len(self.counts) > 1 else FLEISS_EXACT


def fleiss_from_sums(sums: Iterable[FleissSums], *, only_m: int | None = None) -> Fleiss:
    """Fleiss' kappa from per-label-count sums (:data:`FleissSums`), over the items with two
    labels or more (``only_m``: only those with exactly that many). Exact integer and
    fraction arithmetic, rounded once at the end, so the same counts give the same float
    whichever way they were summed (pandas here, SQL in agreement_sql)."""
    used: list[FleissSums] = []
    left = 0
    for m, n, labels, squares in sums:
        if n <= 0:
            continue
        if m < 2 or (only_m is not None and m != only_m):
            left += n
            continue
        if sum(labels.values()) != m * n:
            raise InputError(
                f"Fleiss' kappa: items with {m} labels: the value counts add up to "
                f"{sum(labels.values())}, not {m * n}"
            )
        used.append((m, n, labels, squares))
    items = sum(n for _, n, _, _ in used)
    counts = tuple(sorted({m for m, _, _, _ in used}))
    if items == 0:
        return Fleiss(None, None, None, 0, left, (), "no item has labels from two annotators yet")
    # P: per item the agreeing ordered pairs sum_j n_ij (n_ij - 1) over m (m - 1)
    observed = sum(
        (Fraction(squares - m * n, m * (m - 1)) for m, n, _, squares in used), Fraction(0)
    ) / Fraction(items)
    shares: dict[Any, Fraction] = {}
    for m, _, labels, _ in used:
        for value, k in labels.items():
            if k:
                shares[value] = shares.get(value, Fraction(0)) + Fraction(k, m)
    chance = sum(((x / items) ** 2 for x in shares.values()), Fraction(0))
    if items < 2:
        note = "Fleiss' kappa undefined: only one item has labels from two annotators"
        return Fleiss(None, float(observed), float(chance), items, left, counts, note)
    if chance == 1:
        only = next(iter(shares))
        note = f"Fleiss' kappa undefined: every label is {only!r} (one value, chance agreement 1)"
        return Fleiss(None, float(observed), float(chance), items, left, counts, note)
    kappa = (observed - chance) / (1 - chance)
    return Fleiss(float(kappa), float(observed), float(chance), items, left, counts, "")


def fleiss_kappa_counts(table: Any) -> Fleiss:
    """Fleiss' kappa of an items x values table of counts (how many labels each item got of
    each value; statsmodels' ``fleiss_kappa`` takes the same table)."""
    counts = np.asarray(table, dtype=np.int64)
    if counts.ndim != 2 or bool((counts < 0).any()):
        raise InputError("Fleiss' kappa: expected a 2-d table of counts that are not negative")
    m = counts.sum(axis=1)
    out: list[FleissSums] = []
    for mm in np.unique(m[m > 0]):
        rows = counts[m == mm]
        col = rows.sum(axis=0)
        labels = {j: int(col[j]) for j in np.flatnonzero(col)}
        out.append((int(mm), len(rows), labels, int(np.sum(rows**2))))
    return fleiss_from_sums(out)


def fleiss_table(field_name: str, sums: Sequence[FleissSums]) -> pd.DataFrame:
    """Fleiss' kappa of one field, ready to show: one row over every pairable item, then,
    when the items carry different numbers of labels, one row per label count m with the
    exact Fleiss (1971) figure of those items alone. Columns: ``FLEISS_COLUMNS``."""
    rows: list[tuple[str, Fleiss]] = [(ALL_PAIRABLE, fleiss_from_sums(sums))]
    ms = sorted({m for m, n, _, _ in sums if m >= 2 and n > 0})
    if len(ms) > 1:
        rows += [(str(m), fleiss_from_sums(sums, only_m=m)) for m in ms]
    return pd.DataFrame(
        {
            "field": pd.Series([field_name] * len(rows), dtype=object),
            "labels_per_case": pd.Series([w for w, _ in rows], dtype=object),
            "method": pd.Series([f.method for _, f in rows], dtype=object),
            "n_items": np.array([f.items for _, f in rows], dtype=np.int64),
            "n_left_out": np.array([f.left_out for _, f in rows], dtype=np.int64),
            "observed_agreement": np.array(
                [np.nan if f.observed is None else f.observed for _, f in rows], dtype=float
            ),
            "chance_agreement": np.array(
                [np.nan if f.chance is None else f.chance for _, f in rows], dtype=float
            ),
            "fleiss_kappa": np.array(
                [np.nan if f.kappa is None else f.kappa for _, f in rows], dtype=float
            ),
            "note": pd.Series([f.note for _, f in rows], dtype=object),
        },
        columns=FLEISS_COLUMNS,
    )
