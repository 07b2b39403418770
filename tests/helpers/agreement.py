"""Comparing two agreement reports (the SQL one and the pandas reference), and the SQL
statements a report sends."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pandas as pd
from sqlalchemy import Engine, event

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


@contextmanager
def sent_statements(engine: Engine) -> Iterator[list[str]]:
    """Every SQL statement sent on ``engine`` while open, in order."""
    seen: list[str] = []

    def record(*args: Any) -> None:
        seen.append(args[2])

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)
