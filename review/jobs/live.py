"""Syncing a Phoenix project and pushing verdicts back to Phoenix, as jobs: each waits on a
remote server (a sync reads every new span, a push writes an annotation per verdict), so a
worker runs it and the page that started it shows its progress on every server.

Both are safe to run again: a sync resumes where the last stored page left it and a span read
twice is staged once; a push sends only what Phoenix has not acknowledged (digest per
annotation).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from review.audits import pushback
from review.core import readable
from review.core.errors import InputError
from review.core.identity import Permission
from review.jobs.context import JobContext
from review.jobs.kinds import Kind, expect, register, stored_count, stored_text
from review.traces.live import display, phoenix

__all__ = ["PHOENIX_PUSH", "PHOENIX_SYNC"]


def _int(params: dict[str, Any], name: str) -> int:
    value = params.get(name)
    if type(value) is not int or value < 1:
        raise InputError(f"the job's {name} must be a positive whole number")
    return value


def _sync(ctx: JobContext) -> dict[str, Any]:
    expect(ctx.params, {"source_id": (int,), "max_pages": (int, type(None))})
    source_id = _int(ctx.params, "source_id")
    max_pages = ctx.params.get("max_pages")
    if max_pages is not None:
        max_pages = _int(ctx.params, "max_pages")
    ctx.progress(0, max_pages, "reading Phoenix")

    def after_page(r: phoenix.SyncReport) -> None:
        ctx.progress(r.pages, max_pages, f"{r.spans_read:,} spans read in {r.pages:,} pages")

    report = phoenix.sync_phoenix(
        ctx.engine, ctx.actor, source_id, max_pages=max_pages, after_page=after_page
    )
    text, kind = display.synced_text(report, max_pages or display.SYNC_NOW_PAGES)
    return {
        "summary": text,
        "kind": kind,
        "spans_read": report.spans_read,
        "imported": report.imported,
        "error": report.error,
    }


def _push(ctx: JobContext) -> dict[str, Any]:
    expect(ctx.params, {"plan_id": (int,)})
    plan_id = _int(ctx.params, "plan_id")
    ctx.progress(0, None, "sending to Phoenix")
    report = pushback.push_to_phoenix(ctx.engine, ctx.actor, plan_id=plan_id)
    clean = report.ok and not report.not_pushable and not report.problems
    return {
        "summary": report.summary(),
        "kind": "success" if clean else "warning",
        "pushed": report.pushed,
        "failed": report.failed,
    }


def _sync_summary(result: Mapping[str, Any]) -> str:
    """The sync's own words (what the Live sources tab says after "Sync now"), else its
    counts."""
    said = stored_text(result)
    if said is not None:
        return said
    read, imported = stored_count(result, "spans_read"), stored_count(result, "imported")
    if read is None or imported is None:
        return ""
    error = stored_text(result, "error")
    return f"Read {readable.count(read, 'span')}; {readable.count(imported, 'trace')} imported." + (
        f" The sync stopped: {error[:500]}" if error else ""
    )


def _push_summary(result: Mapping[str, Any]) -> str:
    """The push report's own words (what ``workbench push`` prints), else its counts."""
    said = stored_text(result)
    if said is not None:
        return said
    pushed, failed = stored_count(result, "pushed"), stored_count(result, "failed")
    if pushed is None or failed is None:
        return ""
    return f"{readable.count(pushed, 'annotation')} sent to Phoenix, {failed:,} failed."


PHOENIX_SYNC = register(
    Kind("phoenix_sync", "Phoenix sync", Permission.manage_sources, _sync, _sync_summary)
)
PHOENIX_PUSH = register(
    Kind(
        "phoenix_push",
        "Verdicts sent to Phoenix",
        Permission.import_traces,
        _push,
        _push_summary,
    )
)
