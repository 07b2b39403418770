"""Membership tests on columns of text that stay fast at any size.

pandas 3 stores text columns as Arrow strings, and their ``isin`` makes a pyarrow scalar of
each value looked for, in Python: 1.3 s for 140,000 case keys. Compared as Python objects the
same test is one hash lookup per row (30 ms)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

__all__ = ["isin_text"]


def isin_text(column: Any, values: Iterable[Any]) -> npt.NDArray[np.bool_]:
    """Whether each value of ``column`` (a Series, Index or array) is among ``values``, as
    ``Series.isin`` answers it (a missing value, None or NaN, is among them when they hold
    any missing value)."""
    items = list(values)
    missing_wanted = any(pd.isna(v) for v in items)
    wanted = np.asarray([v for v in items if not pd.isna(v)], dtype=object)
    cells = np.asarray(column, dtype=object)
    found = np.asarray(pd.Index(cells, dtype=object).isin(wanted), dtype=bool)
    found[np.asarray(pd.isna(cells), dtype=bool)] = missing_wanted
    return found
