"""A run's outputs as a user sees them while some of their cases still wait for that user's
label (the blind rule of :mod:`review.cases.sight`): each such case's gold decision and
whether its answer was acceptable (which tells the gold) read as hidden. The metrics are
counted over every output before this, so the figures stay whole.

A column with a withheld cell becomes a column of text (true or false read "yes" or "no", a
missing value stays missing): a table's column holds one type, so Arrow, which carries every
table to the browser, serialises it, and the withheld cells read as hidden, not as a
value."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sqlalchemy import Engine

from review.cases.sight import HIDDEN, Sight
from review.core import readable
from review.core.frames import isin_text

__all__ = ["JUDGED_COLUMNS", "outputs_table"]

#: The columns of an outputs frame that tell a case's judgement
JUDGED_COLUMNS = (
    "gold",
    "expected_decision",
    "answer_ok",
    "category",
    "evidence_state",
    "answerable",
    "effect",  # a flip between two runs: fixed or broken against the gold
)


def outputs_table(engine: Engine, seen: Sight, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (one row per output or case, with ``case_id`` or the case key as ``key`` or
    ``case``) with the judgement of the cases blind to the user withheld, for showing."""
    if frame.empty:
        return frame
    if "case_id" in frame:
        blind_ids = seen.blind_ids(engine, frame["case_id"].unique().tolist())
        mask = frame["case_id"].isin(sorted(blind_ids))
    elif "key" in frame or "case" in frame:
        keys = frame["key" if "key" in frame else "case"].astype(str)
        blind_keys = seen.blind_keys(engine, keys.unique().tolist())
        mask = pd.Series(isin_text(keys, blind_keys), index=keys.index)
    else:
        return frame
    if not mask.any():
        return frame
    out = frame.copy()
    for col in JUDGED_COLUMNS:
        if col in out:
            out[col] = [
                HIDDEN if hide else _as_text(v)
                for v, hide in zip(out[col].tolist(), mask.tolist(), strict=True)
            ]
    return out


def _as_text(value: object) -> str | None:
    """A judged cell as text, beside the withheld ones in its column (None: missing)."""
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if readable.is_missing(value):
        return None
    return str(value)
