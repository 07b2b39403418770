"""Three rebuilds an admin starts after a restore, an upgrade or a bulk load, as jobs: every
trace's restricted flag from the rule and the corpus as they are now
(:func:`review.traces.restricted.recompute_all`, ``workbench recompute-restricted``), the
daily monitoring rollup from the traces (:func:`review.traces.rollup.rebuild`,
``workbench rebuild-rollup``), and the Agreement page's stored figures from the labels and
the cases (:func:`review.labels.agreement_rollup.rebuild_everything`,
``workbench labels rebuild-agreement``). On ten million traces each takes minutes, so they run
in a worker, with their progress on every server, and can be cancelled: the flags keep what
the batches done so far wrote (each batch is its own transaction and the rule is the same, so
running it again completes it), the rollups keep their old rows (one transaction each).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from review.core import readable
from review.core.identity import Permission
from review.jobs.context import JobContext
from review.jobs.kinds import Kind, expect, register, stored_count, stored_text
from review.labels import agreement_rollup
from review.traces import browse, restricted, rollup

__all__ = ["AGREEMENT_REBUILD", "RESTRICTED_REBUILD", "ROLLUP_REBUILD"]


def _restricted(ctx: JobContext) -> dict[str, Any]:
    expect(ctx.params, {})
    total = browse.total_traces(ctx.engine)
    ctx.progress(0, total, "checking every trace's restricted flag")

    def tick(n: int) -> None:
        ctx.progress(n, max(total, n), f"{n:,} of {max(total, n):,} traces checked")

    flips = restricted.recompute_all(ctx.engine, progress=tick)
    return {
        "checked": flips.checked,
        "restricted": flips.restricted,
        "opened": flips.opened,
        "summary": (
            f"{flips.checked:,} traces checked: {flips.restricted:,} became restricted, "
            f"{flips.opened:,} became open."
        ),
    }


def _rollup(ctx: JobContext) -> dict[str, Any]:
    expect(ctx.params, {})
    total = browse.total_traces(ctx.engine)
    ctx.progress(0, total, "reading the traces")

    def tick(n: int) -> None:
        ctx.progress(n, max(total, n), f"{n:,} of {max(total, n):,} traces read")

    n = rollup.rebuild(ctx.engine, progress=tick)
    return {"traces": n, "summary": f"The monitoring rollup was rebuilt from {n:,} traces."}


def _agreement(ctx: JobContext) -> dict[str, Any]:
    expect(ctx.params, {})
    ctx.progress(0, 1, "counting every current label")
    n = agreement_rollup.rebuild_everything(ctx.engine)
    ctx.progress(1, 1, f"{n:,} labels counted")
    return {"labels": n, "summary": f"The agreement figures were rebuilt from {n:,} labels."}


def _agreement_summary(result: Mapping[str, Any]) -> str:
    n = stored_count(result, "labels")
    if n is None:
        return stored_text(result) or ""
    return f"The agreement figures were rebuilt from {readable.count(n, 'label')}."


def _restricted_summary(result: Mapping[str, Any]) -> str:
    checked, became, opened = (stored_count(result, k) for k in ("checked", "restricted", "opened"))
    if checked is None or became is None or opened is None:
        return stored_text(result) or ""
    return (
        f"{readable.count(checked, 'trace')} checked: {became:,} became restricted, "
        f"{opened:,} became open."
    )


def _rollup_summary(result: Mapping[str, Any]) -> str:
    n = stored_count(result, "traces")
    if n is None:
        return stored_text(result) or ""
    return f"The monitoring rollup was rebuilt from {readable.count(n, 'trace')}."


RESTRICTED_REBUILD = register(
    Kind(
        "restricted_rebuild",
        "Rebuild of the restricted flags",
        Permission.restrict_traces,
        _restricted,
        _restricted_summary,
    )
)
ROLLUP_REBUILD = register(
    Kind(
        "rollup_rebuild",
        "Rebuild of the monitoring rollup",
        Permission.manage_sources,
        _rollup,
        _rollup_summary,
    )
)
AGREEMENT_REBUILD = register(
    Kind(
        "agreement_rebuild",
        "Rebuild of the agreement figures",
        Permission.manage_users,
        _agreement,
        _agreement_summary,
    )
)
