"""Many rows fast, for the tests that check a service at a size no statement may take as
parameters (PostgreSQL: 65,535 a statement): core ``INSERT`` with many rows per statement,
never the ORM one object at a time."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import JSON, Engine, Integer, String, Table, cast, func, insert, literal, select

from storage.db import make_engine, migrate
from storage.models import Base, Case, CaseSlice, Document, UTCDateTime

#: more than PostgreSQL's 65,535 parameters a statement
BIG = 70_000

_NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def migrated(url: str) -> Engine:
    """An engine on ``url`` with the schema at the newest revision."""
    engine = make_engine(url)
    migrate(engine)
    return engine


def table(model: type[Base]) -> Table:
    tbl = model.__table__
    assert isinstance(tbl, Table)
    return tbl


def add_rows(engine: Engine, into: Table | type[Base], rows: Iterable[dict[str, Any]]) -> None:
    """``rows`` inserted into a table (or a model's), 5,000 a statement (an executemany)."""
    tbl = into if isinstance(into, Table) else table(into)
    batch: list[dict[str, Any]] = []
    with engine.begin() as c:
        for row in rows:
            batch.append(row)
            if len(batch) == 5_000:
                c.execute(insert(tbl), batch)
                batch = []
        if batch:
            c.execute(insert(tbl), batch)


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
    """``n`` cases keyed ``{prefix}000001`` on, with ``slices`` each; their ids in key order.
    Written by one ``INSERT ... SELECT`` over a counting CTE (both engines), not n rows sent."""
    g = select(literal(1).label("n")).cte("g", recursive=True)
    g = g.union_all(select(g.c.n + 1).where(g.c.n < n))
    key = literal(prefix) + func.substr(cast(1_000_000 + g.c.n, String), 2)
    values = {
        "key": key,
        "question": literal("question ") + key,
        "identity_name": literal("i"),
        "identity_scopes": literal([], JSON),
        "expected_decision": literal("abstain"),
        "reason_codes": literal([], JSON),
        "category": literal("c"),
        "split": literal(split),
        "status": literal(status),
        "family_id": literal(family_id, Integer),
        "notes": literal(""),
        "version": literal(1),
        "created_at": literal(_NOW, UTCDateTime),
        "updated_at": literal(_NOW, UTCDateTime),
    }
    mine = Case.key.like(f"{prefix}%")
    with engine.begin() as c:
        c.execute(insert(Case).from_select(list(values), select(*values.values())))
        for sl in slices:
            c.execute(
                insert(CaseSlice).from_select(
                    ["case_id", "slice"], select(Case.id, literal(sl)).where(mine)
                )
            )
        return list(c.scalars(select(Case.id).where(mine).order_by(Case.key)))


def add_document(
    engine: Engine, key: str, body: str = "A body.", *, access_scope: str = "public"
) -> int:
    """Version 1 of a document ``key``; its id."""
    with engine.begin() as c:
        return int(
            c.execute(
                insert(Document)
                .values(
                    doc_key=key,
                    version=1,
                    title=f"title {key}",
                    body=body,
                    authority="policy",
                    owner="o",
                    access_scope=access_scope,
                    jurisdiction="global",
                    is_current=True,
                    sha256="0" * 64,
                    created_at=_NOW,
                )
                .returning(Document.id)
            ).scalar_one()
        )
