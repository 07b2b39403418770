"""An evaluation run as a job: a bundled pipeline answers every ready case (of a subset)
``repeats`` times and the run is stored (:func:`review.evaluation.execution.execute`). On
hundreds of thousands of cases that takes long, so a worker runs it while the Runs page shows
its progress on every server.

The run is stored in one transaction at its end and names its job in its configuration, so a
job taken over after its worker died, or a retry, finds a run its earlier attempt stored and
does not store a second one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import select

from review.core.errors import InputError
from review.core.identity import Permission
from review.core.taxonomy import load_taxonomy
from review.evaluation import execution, refpipeline
from review.jobs.context import JobContext
from review.jobs.kinds import Kind, expect, register, stored_count, stored_text
from review.thresholds.thresholds import configured_pipeline
from storage.db import read_session
from storage.models import EvalRun

__all__ = ["EVALUATION_RUN", "SUBSET_FIELDS", "params"]

#: the most repeats of a run (the Runs page offers 1 to 10)
MAX_REPEATS = 10

SUBSET_FIELDS = (
    "family", "slice", "split", "category", "import_batch", "document", "language", "mentions",
)  # fmt: skip


def params(
    pipeline: str,
    name: str,
    repeats: int,
    perturb: bool,
    subset: execution.CaseSubset,
) -> dict[str, Any]:
    """The job's parameters for a run of ``pipeline`` (a name of refpipeline.BUNDLED)."""
    if pipeline not in refpipeline.BUNDLED:
        raise InputError(f"unknown pipeline {pipeline!r}")
    out: dict[str, Any] = {
        "pipeline": pipeline,
        "name": name,
        "repeats": int(repeats),
        "perturb": bool(perturb),
        "subset": {f: getattr(subset, f) for f in SUBSET_FIELDS if getattr(subset, f)},
    }
    if subset.keys:
        out["subset"]["keys"] = list(subset.keys)
    return out


def _subset(raw: Any) -> execution.CaseSubset:
    if not isinstance(raw, dict) or set(raw) - {*SUBSET_FIELDS, "keys"}:
        raise InputError("the run's subset of cases is malformed")
    for f in SUBSET_FIELDS:
        if raw.get(f) is not None and not isinstance(raw[f], str):
            raise InputError(f"the run's subset: {f} must be a text")
    keys = raw.get("keys")
    if keys is not None and (
        not isinstance(keys, list) or not all(isinstance(k, str) for k in keys)
    ):
        raise InputError("the run's subset: keys must be a list of case keys")
    return execution.CaseSubset(
        **{f: raw.get(f) for f in SUBSET_FIELDS},
        keys=tuple(str(k) for k in keys) if keys else None,
    )


def _run(ctx: JobContext) -> dict[str, Any]:
    p = expect(
        ctx.params,
        {
            "pipeline": (str,),
            "name": (str,),
            "repeats": (int,),
            "perturb": (bool,),
            "subset": (dict,),
        },
    )
    name, which = p["name"], p["pipeline"]
    if which not in refpipeline.BUNDLED:
        raise InputError(f"unknown pipeline {which!r}")
    if not name.strip():
        raise InputError("the run needs a name")
    if not 1 <= p["repeats"] <= MAX_REPEATS:
        raise InputError(f"repeats must be 1 to {MAX_REPEATS}")
    with read_session(ctx.engine) as s:
        earlier = s.execute(select(EvalRun.id, EvalRun.config).where(EvalRun.name == name)).first()
    if earlier is not None and (earlier[1] or {}).get("job") == ctx.job_id:
        # an earlier attempt of this job stored it before its worker stopped
        return {"run_id": int(earlier[0]), "name": name, "summary": f"Run {name!r} stored."}
    repeats = p["repeats"]
    subset = _subset(p["subset"])
    total = execution.subset_size(ctx.engine, subset) * repeats
    ctx.progress(0, total, "answering the cases")
    pipeline, used = configured_pipeline(ctx.engine, refpipeline.BUNDLED[which]())
    run_id = execution.execute(
        ctx.engine,
        ctx.actor,
        pipeline,
        load_taxonomy(),
        name=name,
        system_version=which,
        repeats=repeats,
        config={"pipeline": which, **used, "job": ctx.job_id},
        perturb=p["perturb"],
        subset=subset,
        progress=lambda n: ctx.progress(n, max(total, n), f"{n:,} of {total:,} answers"),
    )
    return {"run_id": run_id, "name": name, "summary": f"Run {name!r} stored."}


def _summary(result: Mapping[str, Any]) -> str:
    name, run_id = stored_text(result, "name"), stored_count(result, "run_id")
    if name is None or run_id is None:
        return stored_text(result) or ""
    return f"Run {name} stored as run {run_id:d}: its figures are on the Runs page."


EVALUATION_RUN = register(
    Kind(
        "evaluation_run",
        "Evaluation run",
        Permission.run_evaluations,
        _run,
        _summary,
        max_attempts=2,
    )
)
