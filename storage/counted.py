"""Rows of counts kept in step by adding deltas (the Agreement page's stored figures,
review.labels.agreement_rollup and review.cases.agreement_groups): one place for the upsert
that adds a change to each key's counts and the delete of the rows it brought to 0 (no row
stands for all counts 0)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import bindparam, delete
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

__all__ = ["move_counts"]

Key = tuple[Any, ...]


def move_counts(
    s: Session,
    model: Any,
    keys: Sequence[str],
    counts: Sequence[str],
    before: Mapping[Key, tuple[int, ...]],
    after: Mapping[Key, tuple[int, ...]],
) -> None:
    """Add ``after - before`` to the stored rows of ``model`` (key columns ``keys``, count
    columns ``counts``): one upsert executed for every changed key, in key order (two writers
    lock shared rows in the same order), then the touched rows that fell to 0 deleted."""
    zero = (0,) * len(counts)
    rows = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key, zero), after.get(key, zero)
        if old != new:
            rows.append((key, tuple(n - o for n, o in zip(new, old, strict=True))))
    if not rows:
        return
    dialect = s.get_bind().dialect.name
    maker: Any = postgresql.insert if dialect == "postgresql" else sqlite.insert
    stmt = maker(model)
    stmt = stmt.on_conflict_do_update(
        index_elements=list(keys),
        set_={c: getattr(model, c) + stmt.excluded[c] for c in counts},
    )
    s.execute(
        stmt,
        [
            {**dict(zip(keys, key, strict=True)), **dict(zip(counts, deltas, strict=True))}
            for key, deltas in rows
        ],
    )
    gone = delete(model).where(
        *[getattr(model, c) == bindparam(f"key_{c}") for c in keys],
        *[getattr(model, c) == 0 for c in counts],
    )
    params = [{f"key_{c}": x for c, x in zip(keys, key, strict=True)} for key, _ in rows]
    s.connection().execute(gone, params)  # executemany (the ORM has no bulk DELETE)
