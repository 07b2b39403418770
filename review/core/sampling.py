"""Sampling maths for audits and dataset splits: allocation, reproducible draws, estimates.

* ``allocate`` splits a sample size across strata (proportional, equal, or explicit sizes),
  rounding by largest remainder and never asking a stratum for more rows than it holds.
* ``sample_rank`` gives every row id a pseudo-random key from a seed. The same key can be
  computed **inside the database** with ``sample_rank_sql`` (integer arithmetic that SQLite and
  PostgreSQL both evaluate identically), so a stratified sample is drawn in SQL with::

      SELECT id FROM (
          SELECT id, ROW_NUMBER() OVER (
              PARTITION BY stratum ORDER BY <sample_rank_sql(seed, "id")>, id
          ) AS pos, stratum
          FROM traces WHERE <population filter>
      ) AS ranked
      WHERE pos <= <allocation of that stratum>

  and ``draw_sample`` reproduces that draw in memory (the tests check they agree).
* ``population_summary``/``population_fingerprint`` record what the population was when the
  sample was drawn, so a later re-count shows whether it changed.
* ``weighted_estimate`` turns per-stratum audit results into a population rate with a
  finite-population-corrected interval, beside the unweighted Wilson rate.
* ``assign_splits`` assigns items to train/validation/test within each stratum.

The rank function: with P = 2147483579 (a prime with P mod 3 = 2, so cubing is a permutation
modulo P) and four constants a1, b1, a2, b2 in [1, P) derived from the seed by SHA-256::

    x0 = id mod P
    x1 = ((x0 * a1 + b1) mod P) ** 3 mod P
    x2 = ((x1 * a2 + b2) mod P) ** 3 mod P          <- the key

Every step is a bijection on [0, P), so ids below P never tie; every intermediate product is
below 2**62, so 64-bit integers never overflow. Ties (ids congruent modulo P) and equal keys
are broken by the id itself.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from statistics import NormalDist
from typing import Any, Final, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from review.core.errors import InputError

__all__ = [
    "DEFAULT_SPLITS",
    "ESTIMATE_COLUMNS",
    "KEY_SPACE",
    "PRIME",
    "SUMMARY_COLUMNS",
    "Rate",
    "StratifiedEstimate",
    "allocate",
    "assign_splits",
    "draw_sample",
    "draw_sample_by_key",
    "estimate_from_counts",
    "key_offset",
    "population_fingerprint",
    "population_summary",
    "population_summary_sql",
    "sample_rank",
    "sample_rank_sql",
    "weighted_estimate",
    "wilson_bounds",
    "wilson_interval",
]

IntArray = npt.NDArray[np.int64]
Method = Literal["proportional", "equal", "explicit"]

PRIME = 2_147_483_579
FINGERPRINT_SEED = 0  # the rank sum in a population summary always uses this seed
DEFAULT_SPLITS: dict[str, float] = {"train": 0.4, "validation": 0.3, "test": 0.3}
_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")


def _is_int(value: object) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


# --- allocation --------------------------------------------------------------------------------


def _largest_remainder(
    quotas: Sequence[Fraction], total: int, tie_order: Sequence[int] | None = None
) -> list[int]:
    """Round ``quotas`` (summing to ``total``) to integers with the same sum: everyone gets the
    floor, the seats left go to the largest fractional parts (ties: ``tie_order``, then
    position)."""
    floors = [math.floor(q) for q in quotas]
    left = total - sum(floors)
    order = sorted(
        range(len(quotas)),
        key=lambda i: (-(quotas[i] - floors[i]), tie_order[i] if tie_order else 0, i),
    )
    for i in order[:left]:
        floors[i] += 1
    return floors


def _check_sizes(strata_sizes: Mapping[str, int], what: str) -> None:
    for name, size in strata_sizes.items():
        if not _is_int(size) or size < 0:
            raise InputError(f"{what}: stratum {name!r}: size must be a whole number >= 0")


def allocate(
    strata_sizes: Mapping[str, int],
    total: int,
    method: Method = "proportional",
    explicit: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """How many rows to sample from each stratum.

    ``proportional``: in proportion to stratum size; ``equal``: the same from each stratum,
    small strata give all they hold and the leftover goes to the others; ``explicit``: the
    sizes in ``explicit`` (missing strata get 0), which must add up to ``total`` and fit their
    strata. Rounding is by largest remainder (ties go to the larger stratum, then by name).
    The result sums to ``min(total, population)`` and keeps the order of ``strata_sizes``.
    """
    _check_sizes(strata_sizes, "strata")
    if not _is_int(total) or total < 0:
        raise InputError(f"sample size must be a whole number >= 0, got {total!r}")
    names = list(strata_sizes)
    sizes = [int(strata_sizes[n]) for n in names]
    population = sum(sizes)
    target = min(int(total), population)
    # ties in rounding go to the larger stratum, then to the name that sorts first
    tie_order = sorted(range(len(names)), key=lambda i: (-sizes[i], str(names[i])))
    tie_rank = [0] * len(names)
    for r, i in enumerate(tie_order):
        tie_rank[i] = r

    if method == "explicit":
        return _explicit_allocation(strata_sizes, total, explicit)
    if explicit is not None:
        raise InputError(f"explicit sizes are only used with method 'explicit', not {method!r}")
    if method == "proportional":
        if population == 0:
            return dict.fromkeys(names, 0)
        quotas = [Fraction(target * s, population) for s in sizes]
        return dict(zip(names, _largest_remainder(quotas, target, tie_rank), strict=True))
    if method == "equal":
        return dict(zip(names, _equal_allocation(sizes, target, tie_rank), strict=True))
    raise InputError(f"unknown allocation method {method!r}: use proportional, equal or explicit")


def _explicit_allocation(
    strata_sizes: Mapping[str, int], total: int, explicit: Mapping[str, int] | None
) -> dict[str, int]:
    """The sizes asked for, when each fits its stratum and they add up to ``total``."""
    if explicit is None:
        raise InputError("explicit allocation: give the sample size of each stratum")
    unknown = [k for k in explicit if k not in strata_sizes]
    if unknown:
        raise InputError("explicit allocation: unknown strata " + ", ".join(map(repr, unknown)))
    names = list(strata_sizes)
    problems = []
    for name in names:
        want = explicit.get(name, 0)
        if not _is_int(want) or want < 0:
            problems.append(f"stratum {name!r}: size must be a whole number >= 0")
        elif want > strata_sizes[name]:
            problems.append(
                f"stratum {name!r}: asks for {want} but the population holds only "
                f"{strata_sizes[name]}"
            )
    if problems:
        raise InputError("explicit allocation: " + "; ".join(problems))
    asked = sum(int(explicit.get(n, 0)) for n in names)
    if asked != total:
        raise InputError(
            f"explicit allocation: the stratum sizes add up to {asked}, not to the "
            f"sample size {total}"
        )
    return {n: int(explicit.get(n, 0)) for n in names}


def _equal_allocation(sizes: Sequence[int], target: int, tie_rank: Sequence[int]) -> list[int]:
    """The same from each stratum; water-filling: strata smaller than the equal share give
    everything they hold, and the leftover is shared by the others."""
    result = [0] * len(sizes)
    open_ = [i for i in range(len(sizes)) if sizes[i] > 0]
    left = target
    while open_:
        share = Fraction(left, len(open_))
        small = [i for i in open_ if sizes[i] <= share]
        if not small:
            break
        for i in small:
            result[i] = sizes[i]
            left -= sizes[i]
        open_ = [i for i in open_ if i not in small]
    if open_:
        quotas = [Fraction(left, len(open_))] * len(open_)
        got = _largest_remainder(quotas, left, [tie_rank[i] for i in open_])
        for i, g in zip(open_, got, strict=True):
            result[i] = g
    return result


# --- reproducible ranks ------------------------------------------------------------------------


def _seed_constants(seed: int) -> tuple[int, int, int, int]:
    if not _is_int(seed):
        raise InputError(f"seed must be a whole number, got {seed!r}")
    digest = hashlib.sha256(f"abstention-workbench/sample/{int(seed)}".encode()).digest()
    a1, b1, a2, b2 = (
        1 + int.from_bytes(digest[i : i + 8], "big") % (PRIME - 1) for i in (0, 8, 16, 24)
    )
    return a1, b1, a2, b2


def _as_ids(ids: Iterable[int] | npt.ArrayLike, what: str = "ids") -> IntArray:
    arr = np.asarray(ids)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype.kind not in "iu":
        raise InputError(f"{what}: must be whole numbers, got values of type {arr.dtype}")
    if arr.dtype.kind == "u" and arr.max() > np.iinfo(np.int64).max:
        raise InputError(f"{what}: too large for 64-bit integers")
    arr = arr.astype(np.int64)
    if (arr < 0).any():
        raise InputError(f"{what}: must be >= 0 (negative ids rank differently in SQL)")
    return arr


def _cube_mod(x: IntArray) -> IntArray:
    return (x * x % PRIME) * x % PRIME


def sample_rank(seed: int, ids: npt.ArrayLike) -> IntArray:
    """The pseudo-random key of each id for ``seed`` (int64, in [0, P)). Sorting by (key, id)
    and taking the first n is a reproducible random sample; the SQL in ``sample_rank_sql``
    computes the same keys."""
    a1, b1, a2, b2 = _seed_constants(seed)
    x = _as_ids(ids) % PRIME
    x = _cube_mod((x * a1 + b1) % PRIME)
    return _cube_mod((x * a2 + b2) % PRIME)


def sample_rank_sql(seed: int, column: str = "id") -> str:
    """The SQL expression that computes ``sample_rank(seed, column)`` row by row, in integer
    arithmetic valid in SQLite and PostgreSQL (``column`` is cast to BIGINT). Use it in
    ``ORDER BY <expr>, id``; it contains only the column name and integer literals."""
    if not _IDENT_RE.match(column):
        raise InputError(f"column name {column!r} is not a plain SQL identifier")
    a1, b1, a2, b2 = _seed_constants(seed)

    def cube(x: str) -> str:
        return f"((({x} * {x}) % {PRIME}) * {x} % {PRIME})"

    x0 = f"(CAST({column} AS BIGINT) % {PRIME})"
    x1 = cube(f"(({x0} * {a1} + {b1}) % {PRIME})")
    return cube(f"(({x1} * {a2} + {b2}) % {PRIME})")


def draw_sample(
    seed: int,
    ids: npt.ArrayLike,
    strata: npt.ArrayLike,
    allocation: Mapping[Any, int],
) -> IntArray:
    """The ids a stratified sample selects: in each stratum, the ``allocation[stratum]`` ids
    with the smallest (rank, id). The same selection as the SQL draw in the module notes.
    Returned sorted by stratum order of ``allocation``, then by rank."""
    id_arr = _as_ids(ids)
    stratum_arr = np.asarray(strata, dtype=object)
    if len(stratum_arr) != len(id_arr):
        raise InputError(f"ids ({len(id_arr)}) and strata ({len(stratum_arr)}) differ in length")
    if len(np.unique(id_arr)) != len(id_arr):
        raise InputError("ids: each row id may appear only once")
    codes, uniques = pd.factorize(pd.Series(stratum_arr), use_na_sentinel=False)
    code_of = {v: i for i, v in enumerate(uniques)}
    order = np.lexsort((id_arr, sample_rank(seed, id_arr), codes))
    sorted_codes = codes[order]
    starts = np.searchsorted(sorted_codes, np.arange(len(uniques) + 1))
    chosen: list[IntArray] = []
    for name, n in allocation.items():
        if not _is_int(n) or n < 0:
            raise InputError(f"allocation: stratum {name!r}: size must be a whole number >= 0")
        code = code_of.get(name)
        available = 0 if code is None else int(starts[code + 1] - starts[code])
        if n > available:
            raise InputError(
                f"allocation: stratum {name!r} asks for {n} but holds only {available} rows"
            )
        if n:
            assert code is not None
            chosen.append(id_arr[order[starts[code] : starts[code] + n]])
    return np.concatenate(chosen) if chosen else np.zeros(0, dtype=np.int64)


# --- draws by a stored per-row key ------------------------------------------------------------

#: stored sampling keys lie in [0, KEY_SPACE) (storage.models.SAMPLE_KEY_BITS = 62)
KEY_SPACE: Final = 2**62


def key_offset(seed: int) -> int:
    """The point of the key circle where a seed's draw starts, in [0, KEY_SPACE): rows are
    ranked by their stored key rotated by it, ``(key - key_offset(seed)) mod KEY_SPACE``."""
    if not _is_int(seed):
        raise InputError(f"seed must be a whole number, got {seed!r}")
    digest = hashlib.sha256(f"abstention-workbench/sample-key/{int(seed)}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % KEY_SPACE


def draw_sample_by_key(
    seed: int,
    ids: npt.ArrayLike,
    keys: Sequence[int],
    strata: Sequence[Any],
    allocation: Mapping[Any, int],
) -> list[int]:
    """The in-memory reference of an audit draw by stored keys (sampling algorithm 2): in
    each stratum, the ``allocation[stratum]`` ids with the smallest (rotated key, id), where
    the rotated key is ``(key - key_offset(seed)) mod KEY_SPACE``; returned in one order
    mixing the strata by (rotated key, id). Plain Python, for tests to compare the SQL with."""
    id_list = [int(i) for i in _as_ids(ids)]
    if not (len(id_list) == len(keys) == len(strata)):
        raise InputError("ids, keys and strata differ in length")
    if len(set(id_list)) != len(id_list):
        raise InputError("ids: each row id may appear only once")
    offset = key_offset(seed)
    rows: dict[Any, list[tuple[int, int]]] = {}
    for i, k, st in zip(id_list, keys, strata, strict=True):
        if k is None or not 0 <= int(k) < KEY_SPACE:
            raise InputError(f"row {i}: key {k!r} is not in [0, 2**62)")
        rows.setdefault(st, []).append(((int(k) - offset) % KEY_SPACE, i))
    chosen: list[tuple[int, int]] = []
    for name, n in allocation.items():
        if not _is_int(n) or n < 0:
            raise InputError(f"allocation: stratum {name!r}: size must be a whole number >= 0")
        have = sorted(rows.get(name, []))
        if n > len(have):
            raise InputError(
                f"allocation: stratum {name!r} asks for {n} but holds only {len(have)} rows"
            )
        chosen += have[:n]
    return [i for _rk, i in sorted(chosen)]


# --- population fingerprint --------------------------------------------------------------------

SUMMARY_COLUMNS = ["stratum", "count", "min_id", "max_id", "id_sum", "rank_sum"]


def population_summary(ids: npt.ArrayLike, strata: npt.ArrayLike) -> pd.DataFrame:
    """Per stratum: row count, smallest and largest id, sum of ids and sum of the ids'
    ``sample_rank`` under a fixed seed. Columns ``SUMMARY_COLUMNS``; the same numbers as
    ``SELECT stratum, <population_summary_sql()> ... GROUP BY stratum``."""
    id_arr = _as_ids(ids)
    stratum_arr = np.asarray(strata, dtype=object)
    if len(stratum_arr) != len(id_arr):
        raise InputError(f"ids ({len(id_arr)}) and strata ({len(stratum_arr)}) differ in length")
    frame = pd.DataFrame(
        {"stratum": stratum_arr, "id": id_arr, "rank": sample_rank(FINGERPRINT_SEED, id_arr)}
    )
    grouped = frame.groupby("stratum", dropna=False, sort=True)
    out = grouped.agg(
        count=("id", "size"),
        min_id=("id", "min"),
        max_id=("id", "max"),
        id_sum=("id", "sum"),
        rank_sum=("rank", "sum"),
    ).reset_index()
    return out[SUMMARY_COLUMNS]


def population_summary_sql(column: str = "id") -> str:
    """The aggregate list for the SQL population summary, to use as
    ``SELECT stratum, <this> FROM ... WHERE <filter> GROUP BY stratum``."""
    rank = sample_rank_sql(FINGERPRINT_SEED, column)
    return (
        f"COUNT(*) AS count, MIN({column}) AS min_id, MAX({column}) AS max_id, "
        f"SUM({column}) AS id_sum, SUM({rank}) AS rank_sum"
    )


def _plain_int(value: Any, where: str) -> int:
    try:
        as_int = int(value)
    except (TypeError, ValueError):
        raise InputError(f"population summary: {where}: not a whole number: {value!r}") from None
    if as_int != value:
        raise InputError(f"population summary: {where}: not a whole number: {value!r}")
    return as_int


def _stratum_key(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value


def population_fingerprint(summary: pd.DataFrame | Iterable[Mapping[str, Any]]) -> str:
    """A SHA-256 (hex, prefixed ``pop1:``) of a population summary (``population_summary`` or
    the SQL variant; any row order, int-like numbers of any type).

    What it detects: a row added to or removed from the population, a row replaced by another
    id, a row that moved to another stratum (its stratum's count, id sum and rank sum change,
    and the rank sum makes swaps that keep the id sum, min and max visible too). What it does
    not detect: edits to a row's content that keep its id and stratum. Strata with no rows
    are ignored, so the same population gives the same fingerprint however it is grouped.
    """
    frame = pd.DataFrame(list(summary)) if not isinstance(summary, pd.DataFrame) else summary
    missing = [c for c in SUMMARY_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError("population summary: " + "; ".join(f"missing column {c}" for c in missing))
    rows = []
    for i, rec in enumerate(frame[SUMMARY_COLUMNS].itertuples(index=False)):
        stratum = _stratum_key(rec[0])
        numbers = [
            _plain_int(v, f"row {i + 1} ({c})")
            for c, v in zip(SUMMARY_COLUMNS[1:], rec[1:], strict=True)
        ]
        if numbers[0] < 0:
            raise InputError(f"population summary: row {i + 1}: count must be >= 0")
        if numbers[0] == 0:
            continue
        rows.append([stratum, *numbers])
    seen = [json.dumps(r[0]) for r in rows]
    if len(set(seen)) != len(seen):
        raise InputError("population summary: a stratum appears twice")
    rows.sort(key=lambda r: json.dumps(r[0], sort_keys=True))
    payload = json.dumps({"v": 1, "strata": rows}, separators=(",", ":"), default=str)
    return "pop1:" + hashlib.sha256(payload.encode("utf-8")).hexdigest()


# --- estimates ---------------------------------------------------------------------------------


def _z(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise InputError(f"confidence must be between 0 and 1, got {confidence!r}")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


#: The exact normal quantile of a two-sided 95% interval (1.959963984540054), used wherever
#: no other level is asked for; never the rounded 1.96.
Z95: Final = NormalDist().inv_cdf(0.975)
#: The largest variance a 0/1 variable can have: what a stratum with one audited item is
#: given, since one item cannot estimate its own variance (Cochran's s_h^2 needs n_h >= 2).
ONE_ITEM_VARIANCE: Final = 0.25


def effective_interval(
    estimate: float, variance: float, sample: int, z: float
) -> tuple[float, float]:
    """A Wilson interval for a design-based estimate on Kish's effective sample size
    n_eff = p (1 - p) / variance (the sample a simple random draw would need for the same
    precision; Korn & Graubard); at p = 0 or 1, where that ratio says nothing, the real
    sample. Its width matches the normal interval's near the centre and stays honest at 0
    and n: 0 of 44 gives [0, 0.080], never 0.0-0.0."""
    p = min(1.0, max(0.0, estimate))
    n_eff = p * (1 - p) / variance if variance > 0 and 0 < p < 1 else float(sample)
    lo, hi = wilson_bounds(min(p * n_eff, n_eff), n_eff, z)
    return float(lo), float(hi)


def wilson_bounds(
    k: npt.ArrayLike, n: npt.ArrayLike, z: float = Z95
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The Wilson score interval for k successes in n trials, element-wise (the one
    implementation of the formula); n = 0 gives NaN, k = 0 a lower bound of exactly 0 and
    k = n an upper bound of exactly 1."""
    if not (z > 0 and math.isfinite(z)):
        raise InputError(f"z must be a positive number, got {z!r}")
    k_arr = np.asarray(k, dtype=np.float64)
    n_arr = np.asarray(n, dtype=np.float64)
    k_arr, n_arr = np.broadcast_arrays(k_arr, n_arr)
    if np.isnan(k_arr).any() or np.isnan(n_arr).any():
        raise InputError("wilson interval: counts must not be missing")
    if (n_arr < 0).any() or (k_arr < 0).any() or (k_arr > n_arr).any():
        raise InputError("wilson interval: need 0 <= k <= n")
    z2 = z * z
    with np.errstate(divide="ignore", invalid="ignore"):
        p = k_arr / n_arr
        denom = 1.0 + z2 / n_arr
        centre = (p + z2 / (2.0 * n_arr)) / denom
        half = z * np.sqrt(p * (1.0 - p) / n_arr + z2 / (4.0 * n_arr * n_arr)) / denom
    empty = n_arr == 0
    lo = np.where(empty, np.nan, np.where(k_arr == 0, 0.0, np.clip(centre - half, 0.0, 1.0)))
    hi = np.where(empty, np.nan, np.where(k_arr == n_arr, 1.0, np.clip(centre + half, 0.0, 1.0)))
    return lo.astype(np.float64), hi.astype(np.float64)


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """Wilson score interval for ``successes`` out of ``n`` (``None`` when ``n`` is 0)."""
    if not (_is_int(successes) and _is_int(n)) or not 0 <= successes <= n:
        raise InputError(f"rate: need whole numbers with 0 <= successes <= n, got {successes}/{n}")
    if n == 0:
        return None
    lo, hi = wilson_bounds(successes, n, _z(confidence))
    return float(lo), float(hi)


@dataclass(frozen=True)
class Rate:
    """An unweighted rate with its Wilson interval (``None`` values when n is 0)."""

    successes: int
    n: int
    rate: float | None
    lo: float | None
    hi: float | None


@dataclass(frozen=True)
class StratifiedEstimate:
    """A population rate estimated from a stratified sample.

    ``estimate`` = sum of W_h p_h with W_h = N_h / N over the sampled strata (weights
    renormalised when some stratum has no sample; ``unsampled_share`` says how much of the
    population that leaves out); ``lo``/``hi`` a Wilson interval on the effective sample size
    (:func:`effective_interval`), a point only when every sampled stratum was audited in
    full; ``raw`` the plain pooled rate of the sample with its Wilson interval, for
    comparison; ``single_item_strata`` the strata with one audited item (their variance is
    bounded, not estimated: flag them).
    """

    estimate: float | None
    lo: float | None
    hi: float | None
    std_error: float | None
    population: int
    sample: int
    unsampled_share: float
    raw: Rate
    single_item_strata: tuple[str, ...] = ()

    def as_tuple(self) -> tuple[float | None, float | None, float | None]:
        return self.estimate, self.lo, self.hi


ESTIMATE_COLUMNS = ["stratum", "population", "sample", "successes"]


def weighted_estimate(strata: pd.DataFrame, confidence: float = 0.95) -> StratifiedEstimate:
    """Stratified estimate of a rate (e.g. the unsupported-answer rate) from per-stratum audit
    counts: columns ``stratum, population`` (N_h), ``sample`` (n_h), ``successes`` (k_h).

    Variance (Cochran): sum of W_h^2 (1 - n_h / N_h) s_h^2 / n_h with s_h^2 = n_h / (n_h - 1)
    p_h (1 - p_h), the sample variance of the 0/1 outcomes; the finite-population correction
    makes a fully audited stratum add no uncertainty. A stratum with one audited item (of
    more) cannot estimate s_h^2: it is given the largest a 0/1 variable has (0.25) and listed
    in ``single_item_strata``, never taken as zero. The interval is a Wilson interval on the
    effective sample size, so it keeps its width when every stratum's rate is 0 or 1.
    """
    missing = [c for c in ESTIMATE_COLUMNS if c not in strata.columns]
    if missing:
        raise InputError("strata: " + "; ".join(f"missing column {c}" for c in missing))
    problems: list[str] = []
    numbers: dict[str, IntArray] = {}
    for col in ESTIMATE_COLUMNS[1:]:
        values = pd.to_numeric(strata[col], errors="coerce")
        bad = values.isna() | (values < 0) | (values != np.floor(values))
        for name in strata.loc[bad.to_numpy(), "stratum"].head(3):
            problems.append(f"stratum {name!r}: {col} must be a whole number >= 0")
        numbers[col] = values.fillna(0).to_numpy(dtype=np.int64)
    return _stratified(
        strata["stratum"].to_numpy(),
        numbers["population"],
        numbers["sample"],
        numbers["successes"],
        confidence,
        problems,
        duplicated=bool(strata["stratum"].duplicated().any()),
    )


def estimate_from_counts(
    counts: Sequence[tuple[str, int, int, int]], confidence: float = 0.95
) -> StratifiedEstimate:
    """``weighted_estimate`` of plain per-stratum counts ``(stratum, population, sample,
    successes)``, without building a data frame: the same checks and the same arithmetic
    (both go through one implementation), for callers that estimate many rates at once."""
    problems: list[str] = []
    columns: list[IntArray] = []
    for i, col in enumerate(ESTIMATE_COLUMNS[1:], start=1):
        checked = [_count(c[i]) for c in counts]
        bad = [c[0] for c, (whole, _) in zip(counts, checked, strict=True) if not whole]
        problems += [f"stratum {name!r}: {col} must be a whole number >= 0" for name in bad[:3]]
        columns.append(np.array([v for _, v in checked], dtype=np.int64))
    names = np.array([c[0] for c in counts], dtype=object)
    big_n, small_n, k = columns
    return _stratified(
        names,
        big_n,
        small_n,
        k,
        confidence,
        problems,
        duplicated=len(set(names.tolist())) != len(names),
    )


def _count(value: object) -> tuple[bool, int]:
    """Whether ``value`` is a whole number >= 0, and the number used (0 when missing), as
    ``weighted_estimate`` reads a column."""
    try:
        f = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False, 0
    if not math.isfinite(f):
        return False, 0
    return f >= 0 and f == math.floor(f), int(f)


def _stratified(
    names: npt.NDArray[Any],
    big_n: IntArray,
    small_n: IntArray,
    k: IntArray,
    confidence: float,
    problems: list[str],
    *,
    duplicated: bool,
) -> StratifiedEstimate:
    """The one implementation of the stratified estimate (see ``weighted_estimate``)."""
    for name, nh, bign, kh in zip(names, small_n, big_n, k, strict=True):
        if nh > bign:
            problems.append(f"stratum {name!r}: sample {nh} is larger than its population {bign}")
        if kh > nh:
            problems.append(f"stratum {name!r}: successes {kh} exceed the sample {nh}")
    if duplicated:
        problems.append("a stratum appears twice")
    if problems:
        raise InputError("strata: " + "; ".join(problems))

    total_pop = int(big_n.sum())
    total_sample, total_k = int(small_n.sum()), int(k.sum())
    wilson = wilson_interval(total_k, total_sample, confidence)
    raw = Rate(
        total_k,
        total_sample,
        total_k / total_sample if total_sample else None,
        wilson[0] if wilson else None,
        wilson[1] if wilson else None,
    )
    sampled = small_n > 0
    covered = int(big_n[sampled].sum())
    unsampled = 1.0 - covered / total_pop if total_pop else 0.0
    if covered == 0:
        return StratifiedEstimate(None, None, None, None, total_pop, total_sample, unsampled, raw)
    w = big_n[sampled] / covered
    nh, bign = small_n[sampled].astype(float), big_n[sampled].astype(float)
    p = k[sampled] / nh
    estimate = float(np.sum(w * p))
    fpc = 1 - nh / bign
    with np.errstate(divide="ignore", invalid="ignore"):
        s2 = np.where(nh > 1, nh / (nh - 1) * p * (1 - p), ONE_ITEM_VARIANCE)
    variance = float(np.sum(w**2 * fpc * s2 / nh))
    single = tuple(
        str(name)
        for name, n_h, f in zip(names[sampled], nh, fpc, strict=True)
        if n_h == 1 and f > 0
    )
    se = math.sqrt(max(variance, 0.0))
    z = _z(confidence)
    if bool(np.all(fpc == 0)):  # a census of every sampled stratum: the rate is known
        lo = hi = estimate
    else:
        lo, hi = effective_interval(estimate, variance, total_sample, z)
    return StratifiedEstimate(
        estimate=estimate,
        lo=lo,
        hi=hi,
        std_error=se,
        population=total_pop,
        sample=total_sample,
        unsampled_share=unsampled,
        raw=raw,
        single_item_strata=single,
    )


# --- splits ------------------------------------------------------------------------------------


def _fractions(fractions: Mapping[str, float]) -> list[Fraction]:
    if not fractions:
        raise InputError("split fractions: give at least one split")
    values: list[Fraction] = []
    for name, f in fractions.items():
        if isinstance(f, bool) or not isinstance(f, int | float) or not math.isfinite(f) or f < 0:
            raise InputError(f"split fractions: {name!r}: must be a number >= 0, got {f!r}")
        values.append(Fraction(str(f)))
    total = sum(values, Fraction(0))
    if abs(total - 1) > Fraction(1, 10**6):
        raise InputError(f"split fractions: must add up to 1, they add up to {float(total):g}")
    return [v / total for v in values]


def _item_ranks(seed: int, items: pd.Series) -> IntArray:
    if items.dtype.kind in "iu":
        return sample_rank(seed, items.to_numpy())
    # text ids: a keyed hash per item (one pass in Python; case ids are not millions)
    _seed_constants(seed)
    prefix = f"abstention-workbench/split/{int(seed)}/".encode()
    return np.fromiter(
        (
            int.from_bytes(hashlib.blake2b(prefix + str(v).encode(), digest_size=7).digest())
            for v in items
        ),
        dtype=np.int64,
        count=len(items),
    )


def assign_splits(
    df: pd.DataFrame,
    fractions: Mapping[str, float] | None = None,
    seed: int = 0,
    *,
    item: str = "item",
    strata: Sequence[Hashable] = ("stratum",),
    existing: pd.Series | None = None,
) -> pd.Series:
    """Assign each item to a split (train/validation/test by default 40/30/30), stratified.

    Within each stratum (the combination of the ``strata`` columns; none = one stratum) the
    number of items in each split is the fractions times the stratum size, rounded by largest
    remainder (ties go to the split listed first); which items go where follows
    ``sample_rank(seed, item)``, so the same seed gives the same assignment. Items are ints
    (ranked as in SQL) or text.

    ``existing`` (aligned with ``df``; a split name or empty) keeps items that already have a
    split where they are, and sends the unassigned ones to the splits furthest below their
    target, so adding cases never moves an existing case between train and test.
    Returns a Series named ``split``, indexed like ``df``.
    """
    weights = _fractions(fractions if fractions is not None else DEFAULT_SPLITS)
    names = list(fractions if fractions is not None else DEFAULT_SPLITS)
    cols = [item, *strata]
    missing = [str(c) for c in cols if c not in df.columns]
    if missing:
        raise InputError("items: " + "; ".join(f"missing column {c}" for c in missing))
    if df[item].isna().any():
        raise InputError(f"items: column {item!r} has empty ids")
    dup = df[item].duplicated()
    if dup.any():
        raise InputError(
            f"items: {df.loc[dup, item].iloc[0]!r} appears more than once; an item has one split"
        )
    n = len(df)
    split_code = np.full(n, -1, dtype=np.int64)
    if existing is not None:
        if len(existing) != n or not existing.index.equals(df.index):
            raise InputError("existing splits must be aligned with the items (same index)")
        known = existing.notna().to_numpy()
        unknown = sorted({str(v) for v in existing[known]} - set(names))
        if unknown:
            raise InputError("existing splits: " + "; ".join(f"unknown split {u}" for u in unknown))
        position = {name: i for i, name in enumerate(names)}
        split_code[known] = existing[known].map(position).to_numpy(np.int64)
    if n == 0:
        return pd.Series([], index=df.index, dtype=object, name="split")

    if strata:
        group = df.groupby(list(strata), dropna=False, sort=False).ngroup().to_numpy(np.int64)
    else:  # no stratification: one group
        group = np.zeros(n, dtype=np.int64)
    n_groups, n_splits = int(group.max()) + 1, len(names)
    size = np.bincount(group, minlength=n_groups)
    have = np.zeros((n_groups, n_splits), dtype=np.int64)
    known = split_code >= 0
    np.add.at(have, (group[known], split_code[known]), 1)
    todo = size - have.sum(axis=1)
    new = np.zeros((n_groups, n_splits), dtype=np.int64)
    for g in np.flatnonzero(todo > 0):  # one small allocation per stratum, not per item
        target = _largest_remainder([w * int(size[g]) for w in weights], int(size[g]))
        deficit = [max(t - int(h), 0) for t, h in zip(target, have[g], strict=True)]
        short = sum(deficit)
        quotas = [Fraction(int(todo[g]) * d, short) for d in deficit]
        new[g] = _largest_remainder(quotas, int(todo[g]))

    free = np.flatnonzero(~known)
    rank = _item_ranks(seed, df[item].iloc[free].reset_index(drop=True))
    ordered = free[np.lexsort((np.arange(len(free)), rank, group[free]))]
    g_sorted = group[ordered]
    starts = np.searchsorted(g_sorted, np.arange(n_groups))
    pos = np.arange(len(ordered)) - starts[g_sorted]
    bounds = np.cumsum(new, axis=1)[g_sorted]
    split_code[ordered] = np.sum(pos[:, None] >= bounds, axis=1)
    return pd.Series(np.array(names, dtype=object)[split_code], index=df.index, name="split")
