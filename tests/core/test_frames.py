"""isin_text answers as pandas' own isin does, on text columns with missing values, any
values looked for (none, repeated, missing, not text) and any length."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from review.core.frames import isin_text

texts = st.one_of(
    st.none(), st.sampled_from(["a", "b", "case-1", "", "Ä", "a "]), st.text(max_size=3)
)
wanted_st = st.lists(st.one_of(texts, st.integers(0, 3), st.just(float("nan"))), max_size=8)


@settings(max_examples=200, deadline=None)
@given(column=st.lists(texts, max_size=12), wanted=wanted_st)
def test_isin_text_equals_pandas_isin(column: list[Any], wanted: list[Any]) -> None:
    series = pd.Series(column, dtype="str")
    expected = series.isin(wanted).to_numpy(dtype=bool)
    assert isin_text(series, wanted).tolist() == expected.tolist()
    assert isin_text(series.to_numpy(), set(w for w in wanted if w == w)).tolist() == (
        series.isin([w for w in wanted if w == w]).to_numpy(dtype=bool).tolist()
    )


def test_isin_text_on_many_keys() -> None:
    keys = pd.Series([f"case-{i:06d}" for i in range(150_000)], dtype="str")
    wanted = [f"case-{i:06d}" for i in range(0, 300_000, 2)]
    got = isin_text(keys, wanted)
    assert got.dtype == np.bool_ and int(got.sum()) == 75_000
    assert got[:4].tolist() == [True, False, True, False]
