"""Train / validation / test assignment, stratified by expected decision and slice.

The assignment is reproducible from its seed (recorded), never moves a case whose split a
threshold sign-off relied on (split lock), and by default keeps every case where it is and
only places cases that need a split, so adding cases never moves one between train and test.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from review.core.errors import InputError
from review.core.identity import Actor, Permission, require
from review.core.sampling import assign_splits
from review.core.terms import CaseStatus
from storage import changes
from storage.db import plain_rows, read_session, run_write
from storage.models import Case, CaseSlice, Setting, SplitLock, utcnow
from storage.settings import put_setting

SETTINGS_KEY = "splits"
DEFAULT_FRACTIONS = {"train": 0.4, "validation": 0.3, "test": 0.3}


@dataclass(frozen=True)
class SplitPlan:
    seed: int
    fractions: dict[str, float]
    keep_existing: bool
    cases: pd.DataFrame  # case_id, key, stratum, current, proposed, locked
    moves: pd.DataFrame  # the rows whose split changes
    counts: pd.DataFrame  # stratum x split counts after the change


def _frame(engine: Engine) -> pd.DataFrame:
    with read_session(engine) as s:
        rows = s.execute(
            select(Case.id, Case.key, Case.expected_decision, Case.split)
            .where(Case.status == CaseStatus.ready)
            .order_by(Case.id)
        ).all()
        first_slice: dict[int, str] = {}
        for cid, sl in s.execute(
            select(CaseSlice.case_id, CaseSlice.slice).order_by(CaseSlice.case_id, CaseSlice.slice)
        ):
            first_slice.setdefault(cid, sl)
        locked = set(s.scalars(select(SplitLock.case_id)))
    df = pd.DataFrame(
        [r._asdict() for r in rows], columns=["id", "key", "expected_decision", "split"]
    )
    df["slice"] = [first_slice.get(i, "none") for i in df["id"]]
    df["locked"] = df["id"].isin(locked)
    return df


def plan(
    engine: Engine,
    seed: int,
    fractions: dict[str, float] | None = None,
    keep_existing: bool = True,
) -> SplitPlan:
    """What an assignment would do, without writing anything."""
    fr = dict(fractions or DEFAULT_FRACTIONS)
    df = _frame(engine)
    if df.empty:
        raise InputError("there are no ready cases to assign")
    existing = df["split"].where(df["locked"] | keep_existing, None)
    proposed = assign_splits(
        df, fr, seed, item="id", strata=("expected_decision", "slice"), existing=existing
    )
    out = pd.DataFrame(
        {
            "case_id": df["id"],
            "key": df["key"],
            "stratum": df["expected_decision"] + " / " + df["slice"],
            "current": df["split"],
            "proposed": proposed.to_numpy(),
            "locked": df["locked"],
        }
    )
    moves = out[out["current"] != out["proposed"]]
    counts = pd.crosstab(out["stratum"], out["proposed"])
    return SplitPlan(seed, fr, keep_existing, out, moves, counts)


def apply(
    engine: Engine,
    actor: Actor,
    seed: int,
    fractions: dict[str, float] | None = None,
    keep_existing: bool = True,
) -> int:
    """Write an assignment (locked cases never move); record the seed; return cases moved."""
    require(actor, Permission.edit_cases)
    p = plan(engine, seed, fractions, keep_existing)
    if p.moves["locked"].any():  # defensive: the plan keeps locked cases in place
        raise InputError("a locked case would move; nothing was written")
    moves = p.moves[["case_id", "key", "current", "proposed"]].to_dict(orient="records")

    def work(s: Session) -> int:
        locked_now = set(s.scalars(select(SplitLock.case_id)))
        now = utcnow()
        moved: list[dict[str, Any]] = []
        for m in moves:
            if m["case_id"] in locked_now:
                raise InputError(
                    f"the split of {m['key']} was frozen by a sign-off meanwhile; nothing was "
                    "written"
                )
            row = s.get(Case, int(m["case_id"]), with_for_update=True)
            if row is None or row.split != m["current"]:
                raise InputError(f"{m['key']} changed meanwhile; plan again")
            row.split = str(m["proposed"])
            row.version += 1
            row.updated_at = now
            row.updated_by = actor.email
            moved.append(m)
        value = {
            "seed": seed,
            "fractions": p.fractions,
            "keep_existing": keep_existing,
            "at": now.isoformat(),
            "by": actor.email,
            "moved": len(moved),
        }
        put_setting(s, SETTINGS_KEY, value, actor.email)
        changes.record(
            s,
            actor.email,
            "assign_splits",
            "case",
            "*",
            None,
            {**value, "moves": [{k: str(v) for k, v in m.items()} for m in moved]},
        )
        return len(moved)

    return run_write(engine, work)


def last_assignment(engine: Engine) -> dict[str, Any] | None:
    with read_session(engine) as s:
        row = s.get(Setting, SETTINGS_KEY)
        return dict(row.value) if row else None


def scope_pairs(engine: Engine, split: str = "test") -> pd.DataFrame:
    """The ready cases of ``split`` ("all": every split) a release run must answer, in long
    form, for the release gate at any size: ``key`` and ``slice``, a row per case and slice,
    and one with slice None for a case in no slice (in no order). One read of plain rows: the
    gate of a split of 380,000 cases took 2 s through lists of slices per case."""
    scope = [Case.status == CaseStatus.ready]
    if split != "all":
        scope.append(Case.split == split)
    with read_session(engine) as s:
        rows = plain_rows(
            s,
            select(Case.key, CaseSlice.slice)
            .outerjoin(CaseSlice, CaseSlice.case_id == Case.id)
            .where(*scope),
        )
    return pd.DataFrame(rows, columns=["key", "slice"], dtype=object)


def cases_in_scope(engine: Engine, split: str = "test") -> pd.DataFrame:
    """The ready cases of ``split`` ("all": every split) a release run must answer: ``key``
    and ``slices`` (a sorted list of slice keys), ordered by key (code-point order): the list
    form of :func:`scope_pairs`, from the same read."""
    pairs = scope_pairs(engine, split)
    slices = pairs.groupby("key", sort=True)["slice"].agg(
        lambda names: sorted(str(n) for n in names if n is not None)
    )
    return pd.DataFrame(
        {"key": list(slices.index), "slices": list(slices)}, columns=["key", "slices"]
    )
