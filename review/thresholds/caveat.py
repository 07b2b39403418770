"""Calibrating ``caveat_below`` beside ``refuse_below``.

Between the two thresholds the assistant answers with the caveat (C1); above ``caveat_below``
it answers plainly. Calibration shows, on the tuning outcomes, what share of items falls in
each band and how often the answers in each band were unacceptable, so the caveat lands where
the risk is, and a table of candidate ``caveat_below`` values against the plain-answer, caveat
and refusal rates (a table of threshold against answer rate and refusal rate),
which is stored with the proposal's snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from review.core import readable
from review.core.errors import InputError
from review.policy.policy import NoAnswerPolicy
from review.thresholds.thresholds import confidence_of

BANDS = ("refused", "answered with caveat", "answered plainly")
#: Candidate caveat thresholds shown in the calibration table (at most).
GRID_POINTS = 25


@dataclass(frozen=True)
class CaveatCalibration:
    mode: str
    split: str
    refuse_below: float | None
    caveat_below: float | None
    #: one row per band: band, items, share, answered unacceptably, unacceptable rate (None:
    #: no item in the band, so undefined)
    bands: pd.DataFrame
    #: caveat_below (raw), plain answer rate, caveat rate, refusal rate, unacceptable rate in
    #: the caveat band (None when the band is empty), items in the caveat band
    grid: pd.DataFrame
    #: answers that gain (or lose) the caveat against the caveat_below in force
    gain_caveat: int
    lose_caveat: int

    def snapshot(self) -> dict[str, Any]:
        """What the signer saw, stored with the proposal."""
        return {
            "mode": self.mode,
            "split": self.split,
            "refuse_below": self.refuse_below,
            "caveat_below": self.caveat_below,
            "bands": _records(self.bands),
            "table": _records(self.grid),
            "gain_caveat": self.gain_caveat,
            "lose_caveat": self.lose_caveat,
        }


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [
        {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in r.items()}
        for r in frame.to_dict(orient="records")
    ]


def _rate(num: int, den: int) -> float | None:
    return num / den if den else None


def calibrate_caveat(
    frame: pd.DataFrame,
    policy: NoAnswerPolicy,
    mode: str,
    refuse_raw: float | None,
    caveat_raw: float | None,
    split: str,
) -> CaveatCalibration:
    """Bands and the candidate table on ``split`` of the outcomes (``score`` as a confidence,
    ``raw_score``, ``acceptable``). ``caveat_below`` must not lie on the worse side of
    ``refuse_below`` (the caveat comes after the refusal)."""
    part = frame[frame["split"] == split] if split != "all" else frame
    if part.empty:
        raise InputError(f"no scored outcomes on the {split} split")
    t_refuse = confidence_of(policy, mode, refuse_raw)
    t_caveat = confidence_of(policy, mode, caveat_raw)
    if caveat_raw is not None and t_caveat < t_refuse:
        raise InputError(
            f"Caveat below {caveat_raw:g} lies on the worse side of Refuse below "
            f"{refuse_raw:g}: answers between them would be refused, never caveated"
        )
    score = part["score"].to_numpy(dtype=float)
    bad = ~part["acceptable"].to_numpy(dtype=bool)
    n = len(part)
    refused = score < t_refuse
    caveat = ~refused & (score < t_caveat)
    plain = ~refused & ~caveat
    rows = []
    for name, mask in zip(BANDS, (refused, caveat, plain), strict=True):
        items = int(mask.sum())
        wrong = int((mask & bad).sum()) if name != "refused" else 0
        rows.append(
            {
                "band": name,
                "items": items,
                "share": items / n,
                "answered unacceptably": wrong if name != "refused" else None,
                "unacceptable rate": _rate(wrong, items) if name != "refused" else None,
            }
        )
    current = policy.thresholds_for(mode).caveat_below
    t_current = confidence_of(policy, mode, current)
    answered = ~refused
    had = answered & (score < t_current)
    return CaveatCalibration(
        mode,
        split,
        refuse_raw,
        caveat_raw,
        pd.DataFrame(rows),
        _grid(part, policy, mode, refuse_raw, t_refuse),
        gain_caveat=int((caveat & ~had).sum()),
        lose_caveat=int((had & ~caveat).sum()),
    )


def _grid(
    part: pd.DataFrame,
    policy: NoAnswerPolicy,
    mode: str,
    refuse_raw: float | None,
    t_refuse: float,
) -> pd.DataFrame:
    """Candidate caveat thresholds from refuse_below to the best observed score."""
    raw = part["raw_score"].to_numpy(dtype=float)
    score = part["score"].to_numpy(dtype=float)
    bad = ~part["acceptable"].to_numpy(dtype=bool)
    answered = score >= t_refuse
    n = len(part)
    values = np.unique(raw[answered])
    if refuse_raw is not None:
        values = np.unique(np.append(values, refuse_raw))
    if len(values) > GRID_POINTS:
        values = np.unique(np.quantile(values, np.linspace(0, 1, GRID_POINTS)))
    rows = []
    for v in values:
        t = confidence_of(policy, mode, float(v))
        if t < t_refuse:
            continue
        cav = answered & (score < t)
        k = int(cav.sum())
        rows.append(
            {
                "caveat_below (raw)": float(v),
                "plain answer rate": int((answered & ~cav).sum()) / n,
                "caveat rate": k / n,
                "refusal rate": int((~answered).sum()) / n,
                "items in caveat band": k,
                "unacceptable rate in caveat band": _rate(int((cav & bad).sum()), k),
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "caveat_below (raw)",
            "plain answer rate",
            "caveat rate",
            "refusal rate",
            "items in caveat band",
            "unacceptable rate in caveat band",
        ],
    )


def calibration_text(c: CaveatCalibration) -> str:
    """One sentence: what the proposed caveat threshold does against the one in force."""
    b = {r["band"]: r for r in c.bands.to_dict(orient="records")}
    cav, plain = b["answered with caveat"], b["answered plainly"]

    def rate(r: dict[str, Any]) -> str:
        v = r["unacceptable rate"]
        return "undefined (no item)" if pd.isna(v) else f"{v:.1%} of {r['items']:,}"

    return (
        f"On {c.split}: {readable.count(cav['items'], 'answer')} "
        f"{readable.plural(cav['items'], 'carries', 'carry')} the caveat and {plain['items']:,} "
        f"{readable.plural(plain['items'], 'is', 'are')} "
        f"plain; unacceptable in the caveat band {rate(cav)}, among plain answers "
        f"{rate(plain)}. Against the Caveat below in force, "
        f"{readable.count(c.gain_caveat, 'answer')} "
        f"{readable.plural(c.gain_caveat, 'gains', 'gain')} "
        f"the caveat and {c.lose_caveat:,} lose it."
    )
