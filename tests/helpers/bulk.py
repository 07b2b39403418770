"""Many rows fast, for the tests that check a service at a size no statement may take as
parameters (PostgreSQL: 65,535 a statement): core ``INSERT`` with many rows per statement,
never the ORM one object at a time."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Engine, Table, insert, select

from storage.models import Case, CaseSlice

#: more than PostgreSQL's 65,535 parameters a statement
BIG = 70_000

_NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def add_rows(engine: Engine, table: Table, rows: Iterable[dict[str, Any]]) -> None:
    """``rows`` inserted into ``table``, 5,000 a statement (an executemany)."""
    batch: list[dict[str, Any]] = []
    with engine.begin() as c:
        for row in rows:
            batch.append(row)
            if len(batch) == 5_000:
                c.execute(insert(table), batch)
                batch = []
        if batch:
            c.execute(insert(table), batch)


def add_cases(
    engine: Engine,
    n: int,
    *,
    prefix: str = "K",
    status: str = "ready",
    split: str = "test",
    family_id: int | None = None,
    slices: Sequence[str] = (),
) -> list[int]:
    """``n`` cases keyed ``{prefix}000001`` on, with ``slices`` each; their ids in key order."""
    keys = [f"{prefix}{i:06d}" for i in range(1, n + 1)]
    add_rows(
        engine,
        Case.__table__,  # type: ignore[arg-type]
        (
            {
                "key": k,
                "question": f"question {k}",
                "identity_name": "i",
                "identity_scopes": [],
                "expected_decision": "abstain",
                "reason_codes": [],
                "category": "c",
                "split": split,
                "status": status,
                "family_id": family_id,
                "notes": "",
                "version": 1,
                "created_at": _NOW,
                "updated_at": _NOW,
            }
            for k in keys
        ),
    )
    with engine.connect() as c:
        found = dict(c.execute(select(Case.key, Case.id).where(Case.key.like(f"{prefix}%"))).all())
    ids = [found[k] for k in keys]
    if slices:
        add_rows(
            engine,
            CaseSlice.__table__,  # type: ignore[arg-type]
            ({"case_id": i, "slice": sl} for i in ids for sl in slices),
        )
    return ids
