"""Calibrating caveat_below: bands and the candidate table against counting by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from review.core.errors import InputError
from review.policy.policy import load_policy
from review.thresholds import caveat


def _frame(scores: list[float], ok: list[bool], split: str = "validation") -> pd.DataFrame:
    return pd.DataFrame(
        {
            "score": scores,  # vector: strict, higher is better, so confidence == raw
            "raw_score": scores,
            "acceptable": ok,
            "split": [split] * len(scores),
        }
    )


def test_bands_count_what_each_threshold_does() -> None:
    policy = load_policy()  # vector: refuse_below 0.55, caveat_below 0.65 in force
    scores = [0.40, 0.50, 0.56, 0.60, 0.62, 0.66, 0.70, 0.80, 0.90, 0.95]
    ok = [False, False, False, True, False, True, True, True, False, True]
    c = caveat.calibrate_caveat(_frame(scores, ok), policy, "vector", 0.55, 0.68, "validation")
    b = c.bands.set_index("band")
    assert list(b["items"]) == [2, 4, 4]  # <0.55 | 0.55..0.68 | >=0.68
    assert b.loc["answered with caveat", "answered unacceptably"] == 2  # 0.56, 0.62
    assert b.loc["answered with caveat", "unacceptable rate"] == pytest.approx(0.5)
    assert b.loc["answered plainly", "unacceptable rate"] == pytest.approx(0.25)
    assert pd.isna(b.loc["refused", "unacceptable rate"])
    assert b["share"].sum() == pytest.approx(1.0)
    # against 0.65 in force: 0.66 gains the caveat, nothing loses it
    assert (c.gain_caveat, c.lose_caveat) == (1, 0)
    text = caveat.calibration_text(c)
    assert "4 answers carry the caveat" in text and "50.0% of 4" in text
    assert "1 answer gains" in text


def test_the_table_matches_counting_at_every_candidate() -> None:
    rng = np.random.default_rng(7)
    scores = list(np.round(rng.uniform(0.3, 1.0, 300), 3))
    ok = list(rng.random(300) < 0.8)
    frame = _frame(scores, ok)
    c = caveat.calibrate_caveat(frame, load_policy(), "vector", 0.55, 0.65, "validation")
    assert 0 < len(c.grid) <= caveat.GRID_POINTS + 1
    s, a = np.array(scores), np.array(ok)
    for row in c.grid.itertuples(index=False):
        t = row[0]
        answered = s >= 0.55
        band = answered & (s < t)
        assert row[1] == pytest.approx((answered & ~band).mean())
        assert row[2] == pytest.approx(band.mean())
        assert row[3] == pytest.approx((~answered).mean())
        assert row[4] == band.sum()
        if band.sum():
            assert row[5] == pytest.approx((band & ~a).sum() / band.sum())
        else:
            assert row[5] is None or np.isnan(row[5])
    assert (c.grid["caveat_below (raw)"] >= 0.55).all()
    snap = c.snapshot()
    assert snap["caveat_below"] == 0.65 and len(snap["table"]) == len(c.grid)


def test_a_caveat_on_the_worse_side_or_an_empty_split_is_refused() -> None:
    frame = _frame([0.6, 0.7], [True, True])
    with pytest.raises(InputError, match="worse side"):
        caveat.calibrate_caveat(frame, load_policy(), "vector", 0.6, 0.5, "validation")
    with pytest.raises(InputError, match="test split"):
        caveat.calibrate_caveat(frame, load_policy(), "vector", 0.55, 0.65, "test")
    empty_band = caveat.calibrate_caveat(frame, load_policy(), "vector", 0.55, 0.55, "validation")
    assert empty_band.bands.set_index("band").loc["answered with caveat", "items"] == 0
    assert "undefined (no item)" in caveat.calibration_text(empty_band)
