"""Outputs whose gate signals are broken, for the dry-run tests of the Monthly review."""

from __future__ import annotations

import math

from sqlalchemy import Engine, select

from review.core.taxonomy import Taxonomy
from review.evaluation import evalruns
from storage.db import write_session
from storage.models import EvalOutput


def break_validation_signals(engine: Engine, tax: Taxonomy) -> tuple[int, list[str]]:
    """The reference run with every validation output's signals broken: a NaN score, a flag
    and the score not logged, or no signals at all (with hits, so that no earlier check
    decides first). Returns the run and the keys of its outputs that are no infrastructure
    failure."""
    ref = next(r for r in evalruns.list_runs(engine) if r.name.startswith("reference"))
    frame = evalruns.outputs_frame(engine, ref.id, tax)
    ok = (frame["split"] == "validation") & ~frame["infra"].astype(bool)
    keys = sorted(set(frame.loc[ok, "key"]))
    base = {"hits_after_filter": 5, "topics": []}
    with write_session(engine) as s:
        outs = s.scalars(select(EvalOutput).where(EvalOutput.run_id == ref.id)).all()
        by_case = {int(cid): k for cid, k in zip(frame["case_id"], frame["key"], strict=True)}
        for out in outs:
            key = by_case.get(int(out.case_id))
            if key not in keys:
                continue
            i = keys.index(key)
            if i % 3 == 0:
                out.signals = (out.signals or {}) | base | {"top_score": math.nan}
            elif i % 3 == 1:
                out.signals = (out.signals or {}) | base | {"answerable": None, "top_score": None}
            else:
                out.signals = None
    return ref.id, keys
