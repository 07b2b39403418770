"""Restricted traces, as people see and steer them.

The rule and the stored flag ``traces.restricted`` live in
:mod:`review.corpus.restricted_traces` (below this area, so that every corpus write keeps the
flags of the traces quoting a document in step, in its own transaction); this module re-exports
what the importer needs and adds the services: why a trace is restricted
(:func:`restriction`), an admin's mark (:func:`mark_trace`: marked restricted by hand, or
the unknown-document reason cleared), the unknown-documents setting
(:func:`set_unknown_documents`), and rebuilding every flag (:func:`recompute_all`, the
``workbench recompute-restricted`` command)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from review.core import clearance
from review.core.errors import InputError, PermissionDenied
from review.core.identity import Actor, Permission, require
from review.corpus.restricted_traces import (
    MARK_CLEARED,
    MARK_RESTRICTED,
    MARKS,
    UNKNOWN_KEY,
    CorpusFacts,
    Flips,
    Reason,
    TraceFacts,
    flags_of,
    is_restricted,
    new_trace_facts,
    reasons,
    reasons_of,
    recompute,
    recompute_range,
    recompute_unknown,
    trace_reasons,
    unknown_documents_restricted,
)
from review.corpus.restricted_traces import lock as lock_flags
from review.traces.browse import require_view
from storage import changes
from storage.db import read_session, run_write
from storage.models import AuditLog, Setting
from storage.models import Trace as TraceRow
from storage.settings import put_setting

__all__ = [
    "MARKS",
    "MARK_CLEARED",
    "MARK_RESTRICTED",
    "CorpusFacts",
    "Flips",
    "Reason",
    "Restriction",
    "TraceFacts",
    "UnknownSetting",
    "flags_of",
    "get_unknown_setting",
    "is_restricted",
    "lock_flags",
    "mark_trace",
    "new_trace_facts",
    "reasons",
    "reasons_of",
    "recompute_all",
    "restriction",
    "set_unknown_documents",
]

MAX_NOTE = 500

RECOMPUTE_BATCH = 2000


def _need_clearance(actor: Actor, what: str) -> None:
    require(actor, Permission.restrict_traces)
    if not clearance.cleared(actor):
        raise PermissionDenied(
            f"{what} needs clearance: the trace's restricted content is shown only to users "
            "with clearance"
        )


# ---------------------------------------------------------------------------------------
# Why a trace is restricted


@dataclass(frozen=True)
class Restriction:
    """A trace's restricted status as its page shows it."""

    pk: int
    restricted: bool  # the stored flag every listing filters on
    reasons: tuple[str, ...]  # why, by the rule and the corpus as they are now
    mark: str | None
    marked_by: str | None
    marked_at: dt.datetime | None
    note: str | None
    #: chunks of documents the corpus has never seen (or of none), whatever the setting
    unknown: tuple[str, ...]

    def summary(self) -> str:
        if not self.reasons:
            return "Open: no reason makes this trace restricted."
        return "Restricted because: " + "; ".join(self.reasons) + "."

    def mark_text(self) -> str:
        if self.mark is None:
            return ""
        what = {
            MARK_RESTRICTED: "Marked restricted",
            MARK_CLEARED: "Unknown documents cleared",
        }[self.mark]
        when = f" at {self.marked_at:%Y-%m-%d %H:%M} UTC" if self.marked_at else ""
        note = f": {self.note}" if self.note else ""
        return f"{what} by {self.marked_by or 'an administrator'}{when}{note}"


def _last_mark(s: Session, pk: int) -> tuple[str | None, dt.datetime | None, str | None]:
    row = s.scalar(
        select(AuditLog)
        .where(AuditLog.entity == "trace", AuditLog.entity_id == str(pk))
        .order_by(AuditLog.id.desc())
        .limit(1)
    )
    if row is None:
        return None, None, None
    note = (row.after or {}).get("note")
    return row.actor, row.at, None if note is None else str(note)


def restriction(engine: Engine, actor: Actor, pk: int) -> Restriction | None:
    """Why trace ``pk`` is restricted (None: no such trace). A restricted trace's reasons name
    restricted documents: for a user without clearance that is PermissionDenied."""
    require_view(actor)
    with read_session(engine) as s:
        row = s.get(TraceRow, pk)
        if row is None:
            return None
        found = trace_reasons(s, pk) or ()
        if (row.restricted or found) and not clearance.cleared(actor):
            raise PermissionDenied(
                f"Trace {pk} is restricted: it is shown only to users with clearance."
            )
        unknown = _unknown(s, pk)
        by, at, note = _last_mark(s, pk) if row.restricted_mark else (None, None, None)
        texts = [r.text() for r in found]
        if row.restricted_mark == MARK_RESTRICTED and by:
            texts = [f"marked restricted by {by}" if r.kind == "mark" else r.text() for r in found]
        return Restriction(
            pk, bool(row.restricted), tuple(texts), row.restricted_mark, by, at, note, unknown
        )


def _unknown(s: Session, pk: int) -> tuple[str, ...]:
    """The unknown-document reasons of trace ``pk`` with the setting on and no mark."""
    got = trace_reasons(s, pk, unmarked=True, unknown_on=True) or ()
    return tuple(r.text() for r in got if r.kind == "unknown")


# ---------------------------------------------------------------------------------------
# An admin's mark


def mark_trace(engine: Engine, actor: Actor, pk: int, mark: str | None, note: str) -> Flips:
    """Set a person's mark on trace ``pk``: ``"restricted"`` (restricted whatever the rule
    says), ``"cleared"`` (lifts the unknown-document reason only) or None (remove the mark).
    Needs the admin role and clearance, and a note saying why; audited; the flag is
    recomputed in the same transaction."""
    _need_clearance(actor, "Marking a trace restricted or clearing it")
    if mark is not None and mark not in MARKS:
        raise InputError(f"unknown mark {mark!r}: one of {', '.join(MARKS)}, or none")
    note = note.strip()
    if not note:
        raise InputError("say why (the note is kept in the audit log)")
    if len(note) > MAX_NOTE:
        raise InputError(f"the note is longer than {MAX_NOTE} characters")

    def work(s: Session) -> Flips:
        lock_flags(s, exclusive=True)
        row = s.get(TraceRow, pk, with_for_update=True)
        if row is None:
            raise InputError(f"trace {pk} does not exist (it may have been purged)")
        if row.restricted_mark == mark:
            raise InputError(f"trace {pk} already has this mark; nothing was changed")
        if mark == MARK_CLEARED and not _unknown(s, pk):
            raise InputError(
                f"trace {pk} cites no document the corpus is missing: there is nothing to clear"
            )
        before = {"restricted_mark": row.restricted_mark, "restricted": bool(row.restricted)}
        row.restricted_mark = mark
        s.flush()
        flips = recompute(s, [pk])
        s.refresh(row)
        after = {"restricted_mark": mark, "restricted": bool(row.restricted), "note": note}
        changes.record(s, actor.email, "mark", "trace", pk, before, after)
        return flips

    return run_write(engine, work)


# ---------------------------------------------------------------------------------------
# The unknown-documents setting


@dataclass(frozen=True)
class UnknownSetting:
    on: bool
    version: int  # 0 when never set (then on)
    updated_by: str | None
    updated_at: dt.datetime | None


def get_unknown_setting(engine: Engine) -> UnknownSetting:
    with read_session(engine) as s:
        row = s.get(Setting, UNKNOWN_KEY)
        on = unknown_documents_restricted(s)
        if row is None:
            return UnknownSetting(on, 0, None, None)
        return UnknownSetting(on, row.version, row.updated_by, row.updated_at)


def set_unknown_documents(
    engine: Engine, actor: Actor, on: bool, expected_version: int
) -> tuple[UnknownSetting, Flips]:
    """Whether a chunk of a document the corpus has never seen makes a trace restricted.
    Admins with clearance; version-checked, audited; the traces it affects are recomputed in
    the same transaction (a scan of the chunks: a rare event)."""
    _need_clearance(actor, "Changing whether unknown documents make a trace restricted")

    def work(s: Session) -> tuple[UnknownSetting, Flips]:
        lock_flags(s, exclusive=True)
        value = {"on": bool(on)}
        row, before = put_setting(
            s,
            UNKNOWN_KEY,
            value,
            actor.email,
            expected_version=expected_version,
            what="the unknown-documents setting",
        )
        flips = recompute_unknown(s)
        after = {**value, "traces_restricted": flips.restricted, "traces_opened": flips.opened}
        changes.record(s, actor.email, "update", "setting", UNKNOWN_KEY, before, after)
        return UnknownSetting(bool(on), row.version, actor.email, row.updated_at), flips

    return run_write(engine, work)


# ---------------------------------------------------------------------------------------
# Rebuilding every flag


def recompute_all(
    engine: Engine,
    batch_size: int = RECOMPUTE_BATCH,
    progress: Callable[[int], None] | None = None,
) -> Flips:
    """Recompute every trace's flag with the rule and the corpus as they are now, in batches
    of ``batch_size`` traces, each its own transaction (``workbench recompute-restricted``).
    ``progress`` gets the number of traces checked so far."""
    if not 1 <= batch_size <= 10_000:
        raise InputError("batch_size must be between 1 and 10,000 traces")
    total = Flips()
    after = 0
    while True:

        def work(s: Session, start: int = after) -> tuple[int | None, Flips]:
            return recompute_range(s, start, batch_size)

        last, flips = run_write(engine, work)
        if last is None:
            return total
        total.add(flips)
        after = last
        if progress is not None:
            progress(total.checked)
