"""Comparing two agreement reports (the SQL one and the pandas reference)."""

from __future__ import annotations

import pandas as pd

from review.labels.agreement import AgreementReport

FRAMES = ("decision", "decision_pairs", "reasons", "groups", "fleiss")


def assert_same(got: AgreementReport | None, ref: AgreementReport | None, what: str) -> None:
    if ref is None:
        assert got is None, what
        return
    assert got is not None, what
    assert (got.cases, got.annotators, got.labels) == (ref.cases, ref.annotators, ref.labels), what
    for name in FRAMES:
        # same columns, dtypes, row order and notes; the overall statistics are sums over
        # items that the two sides add in another order, so floats may differ in the last bit
        pd.testing.assert_frame_equal(
            getattr(got, name),
            getattr(ref, name),
            check_exact=False,
            rtol=1e-12,
            atol=1e-14,
            obj=f"{what}: {name}",
        )
