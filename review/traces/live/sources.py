"""Live trace sources: a Phoenix project the workbench syncs from, or the OTLP/HTTP receiver.

A source row holds where its next sync resumes (``cursor`` and ``state``), what it has read and
added, and its last error. The secret a source needs (Phoenix's API key, the receiver's bearer
token) is never stored: the row names it (``secret_name``), and :func:`secret_value` reads it
from the environment or from Streamlit's ``.streamlit/secrets.toml``.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import Engine, delete, func, select, update
from sqlalchemy.orm import Session

from review.core.errors import InputError
from review.core.identity import Actor, Permission, require
from review.traces.live.tally import RequestCounts, source_counts
from storage import changes
from storage.db import read_session, run_write
from storage.models import SourceSpan, TraceSource, utcnow

__all__ = [
    "KINDS",
    "SourceView",
    "add_source",
    "ensure_source",
    "get_source",
    "list_sources",
    "record_error",
    "record_sync",
    "remove_source",
    "secret_value",
    "set_status",
]

#: phoenix: the workbench pulls spans from a Phoenix project; otlp: spans are pushed to the
#: workbench's OTLP/HTTP receiver
KINDS = ("phoenix", "otlp")
STATUSES = ("active", "paused")
MAX_GRACE_SECONDS = 3600.0
DEFAULT_GRACE_SECONDS = 30.0
_SECRET_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,199}")
ENTITY = "trace_source"


@dataclass(frozen=True, slots=True)
class SourceView:
    id: int
    kind: str
    name: str
    url: str
    project: str
    secret_name: str | None
    status: str
    grace_seconds: float
    cursor: str | None
    state: dict[str, Any]
    last_sync_at: dt.datetime | None
    last_success_at: dt.datetime | None
    newest_span_at: dt.datetime | None
    last_error: str | None
    last_error_at: dt.datetime | None
    spans_read: int
    traces_added: int
    traces_rejected: int
    late_spans: int
    spans_waiting: int
    created_by: str
    created_at: dt.datetime
    #: a receiver's request counts (None for a Phoenix source)
    requests: RequestCounts | None = None


def _view(row: TraceSource, waiting: int, requests: RequestCounts | None = None) -> SourceView:
    return SourceView(
        id=row.id,
        kind=row.kind,
        name=row.name,
        url=row.url,
        project=row.project,
        secret_name=row.secret_name,
        status=row.status,
        grace_seconds=row.grace_seconds,
        cursor=row.cursor,
        state=dict(row.state or {}),
        last_sync_at=row.last_sync_at,
        last_success_at=row.last_success_at,
        newest_span_at=row.newest_span_at,
        last_error=row.last_error,
        last_error_at=row.last_error_at,
        spans_read=row.spans_read,
        traces_added=row.traces_added,
        traces_rejected=row.traces_rejected,
        late_spans=row.late_spans,
        spans_waiting=waiting,
        created_by=row.created_by,
        created_at=row.created_at,
        requests=(requests or RequestCounts()) if row.kind == "otlp" else None,
    )


def _waiting(s: Session, source_ids: list[int]) -> dict[int, int]:
    if not source_ids:
        return {}
    rows = s.execute(
        select(SourceSpan.source_id, func.count())
        .where(SourceSpan.source_id.in_(source_ids), SourceSpan.state == "waiting")
        .group_by(SourceSpan.source_id)
    ).all()
    return {int(sid): int(n) for sid, n in rows}


def list_sources(engine: Engine) -> list[SourceView]:
    """Every source, oldest first, with the number of spans waiting for their trace."""
    with read_session(engine) as s:
        rows = list(s.scalars(select(TraceSource).order_by(TraceSource.id)))
        waiting = _waiting(s, [r.id for r in rows])
        counted = source_counts(s, [r.id for r in rows if r.kind == "otlp"])
    return [_view(r, waiting.get(r.id, 0), counted.get(r.id)) for r in rows]


def get_source(engine: Engine, source_id: int) -> SourceView:
    with read_session(engine) as s:
        row = s.get(TraceSource, source_id)
        if row is None:
            raise InputError(f"trace source {source_id} does not exist")
        return _view(row, _waiting(s, [row.id]).get(row.id, 0))


def _checked_url(kind: str, url: str) -> str:
    url = url.strip()
    if kind == "otlp" and not url:
        return ""
    if len(url) > 500:
        raise InputError("source URL: at most 500 characters")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"source URL: {url!r} is not an http or https URL with a host")
    if parts.username or parts.password:
        raise InputError(
            "source URL: put no user name or password in the URL; name the secret instead "
            "(it is read from the environment or .streamlit/secrets.toml)"
        )
    return url.rstrip("/")


def _checked(
    kind: str, name: str, url: str, project: str, secret_name: str | None, grace: float
) -> tuple[str, str, str, str | None, float]:
    if kind not in KINDS:
        raise InputError(f"source kind: {kind!r} is not one of {', '.join(KINDS)}")
    name = " ".join(name.split())
    if not name or len(name) > 200:
        raise InputError("source name: 1 to 200 characters")
    url = _checked_url(kind, url)
    project = project.strip()
    if kind == "phoenix" and not project:
        raise InputError("source project: a Phoenix source needs its project's name")
    if len(project) > 200:
        raise InputError("source project: at most 200 characters")
    if secret_name is not None:
        secret_name = secret_name.strip() or None
    if secret_name is not None and not _SECRET_NAME.fullmatch(secret_name):
        raise InputError(
            "secret name: the name of an environment variable or secrets.toml key (letters, "
            "digits, '_', '.', '-'), not the secret itself"
        )
    if not (isinstance(grace, int | float) and 0 <= grace <= MAX_GRACE_SECONDS):
        raise InputError(f"grace period: between 0 and {MAX_GRACE_SECONDS:.0f} seconds")
    return kind, name, url, secret_name, float(grace)


def add_source(
    engine: Engine,
    actor: Actor,
    *,
    kind: str,
    name: str,
    url: str = "",
    project: str = "",
    secret_name: str | None = None,
    grace_seconds: float = DEFAULT_GRACE_SECONDS,
) -> SourceView:
    """Add a source (audited). Names are unique, and so is a kind's URL and project."""
    require(actor, Permission.manage_sources)
    kind, name, url, secret_name, grace = _checked(
        kind, name, url, project, secret_name, grace_seconds
    )
    project = project.strip()

    def work(s: Session) -> int:
        if s.scalar(select(TraceSource.id).where(TraceSource.name == name)) is not None:
            raise InputError(f"source name: a source named {name!r} exists already")
        same = s.scalar(
            select(TraceSource.name).where(
                TraceSource.kind == kind, TraceSource.url == url, TraceSource.project == project
            )
        )
        if same is not None:
            raise InputError(f"source {same!r} reads this {kind} URL and project already")
        row = TraceSource(
            kind=kind,
            name=name,
            url=url,
            project=project,
            secret_name=secret_name,
            status="active",
            grace_seconds=grace,
            state={},
            spans_read=0,
            traces_added=0,
            traces_rejected=0,
            late_spans=0,
            created_by=actor.email,
        )
        s.add(row)
        s.flush()
        changes.record(s, actor.email, "create", ENTITY, row.id, None, changes.snapshot(row))
        return row.id

    return get_source(engine, run_write(engine, work))


def ensure_source(
    engine: Engine,
    actor: Actor,
    *,
    kind: str,
    url: str = "",
    project: str = "",
    name: str | None = None,
    secret_name: str | None = None,
    grace_seconds: float | None = None,
) -> SourceView:
    """The source of this kind, URL and project (or name), added when there is none: what the
    command-line ``sync`` and ``receive`` use so that a re-run resumes. A ``secret_name`` that
    differs from the found source's is stored on it (audited), so that the page's "Sync now"
    and later runs use the key the last command named, not one it replaced."""
    require(actor, Permission.manage_sources)
    kind_, _, url_, secret_, _ = _checked(kind, name or "x", url, project, secret_name, 0)
    with read_session(engine) as s:
        q = select(TraceSource.id)
        if name:
            q = q.where(TraceSource.name == " ".join(name.split()))
        else:
            q = q.where(
                TraceSource.kind == kind_,
                TraceSource.url == url_,
                TraceSource.project == project.strip(),
            )
        found = s.scalar(q)
    if found is not None:
        src = get_source(engine, found)
        if src.kind != kind_:
            raise InputError(f"source {src.name!r} is a {src.kind} source, not {kind_}")
        if secret_ is not None and secret_ != src.secret_name:
            _rename_secret(engine, actor, found, secret_)
            src = get_source(engine, found)
        return src
    default_name = f"{project.strip()} at {url_}" if kind_ == "phoenix" else "OTLP receiver"
    return add_source(
        engine,
        actor,
        kind=kind_,
        name=name or default_name[:200],
        url=url_,
        project=project,
        secret_name=secret_name,
        grace_seconds=DEFAULT_GRACE_SECONDS if grace_seconds is None else grace_seconds,
    )


def _rename_secret(engine: Engine, actor: Actor, source_id: int, secret_name: str) -> None:
    def work(s: Session) -> None:
        row = s.get(TraceSource, source_id, with_for_update=True)
        if row is None:
            raise InputError(f"trace source {source_id} does not exist")
        before = {"secret_name": row.secret_name}
        row.secret_name = secret_name
        changes.record(
            s, actor.email, "update", ENTITY, row.id, before, {"secret_name": secret_name}
        )

    run_write(engine, work)


def set_status(engine: Engine, actor: Actor, source_id: int, status: str) -> SourceView:
    """Pause (``paused``: its syncs and receiver refuse to run) or resume (``active``)."""
    require(actor, Permission.manage_sources)
    if status not in STATUSES:
        raise InputError(f"source status: {status!r} is not one of {', '.join(STATUSES)}")

    def work(s: Session) -> None:
        row = s.get(TraceSource, source_id, with_for_update=True)
        if row is None:
            raise InputError(f"trace source {source_id} does not exist")
        before = {"status": row.status}
        row.status = status
        changes.record(s, actor.email, "update", ENTITY, row.id, before, {"status": status})

    run_write(engine, work)
    return get_source(engine, source_id)


def remove_source(engine: Engine, actor: Actor, source_id: int) -> int:
    """Remove a source and the spans it holds (waiting spans are lost; imported traces stay).
    Returns the number of waiting spans dropped."""
    require(actor, Permission.manage_sources)

    def work(s: Session) -> int:
        row = s.get(TraceSource, source_id, with_for_update=True)
        if row is None:
            raise InputError(f"trace source {source_id} does not exist")
        dropped = _waiting(s, [row.id]).get(row.id, 0)
        before = changes.snapshot(row)
        s.execute(delete(SourceSpan).where(SourceSpan.source_id == row.id))
        s.delete(row)
        changes.record(
            s, actor.email, "delete", ENTITY, source_id, before, {"waiting_spans_dropped": dropped}
        )
        return dropped

    return run_write(engine, work)


def record_sync(
    engine: Engine,
    source_id: int,
    *,
    cursor: str | None = None,
    state: Mapping[str, Any] | None = None,
    at: dt.datetime | None = None,
) -> None:
    """A sync (or receiver round) succeeded: store where the next one resumes and clear the
    error. Only the given fields change."""
    now = at or utcnow()
    values: dict[str, Any] = {
        "last_sync_at": now,
        "last_success_at": now,
        "last_error": None,
        "last_error_at": None,
    }
    if cursor is not None:
        values["cursor"] = cursor[:500]
    if state is not None:
        values["state"] = dict(state)

    def work(s: Session) -> None:
        s.execute(update(TraceSource).where(TraceSource.id == source_id).values(**values))

    run_write(engine, work)


def record_error(engine: Engine, source_id: int, error: str, at: dt.datetime | None = None) -> None:
    """A sync failed: keep its reason on the source (the cursor stays where it was)."""
    now = at or utcnow()

    def work(s: Session) -> None:
        s.execute(
            update(TraceSource)
            .where(TraceSource.id == source_id)
            .values(last_sync_at=now, last_error=error[:2000] or "failed", last_error_at=now)
        )

    run_write(engine, work)


#: where Streamlit looks for secrets, in its order (the project's file wins)
SECRETS_FILES = (Path(".streamlit") / "secrets.toml", Path.home() / ".streamlit" / "secrets.toml")
_MAX_SECRETS_BYTES = 1 << 20


def secret_value(name: str | None, files: tuple[Path, ...] = SECRETS_FILES) -> str | None:
    """The secret named ``name``: the environment variable, else the top-level key of the first
    ``secrets.toml`` that has it; None when ``name`` is None. A name given but found nowhere
    raises InputError (a sync must not run unauthenticated by mistake)."""
    if name is None:
        return None
    value = os.environ.get(name)
    if value:
        return value
    for path in files:
        try:
            if not path.is_file() or path.stat().st_size > _MAX_SECRETS_BYTES:
                continue
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue
        found = data.get(name)
        if isinstance(found, str) and found:
            return found
    raise InputError(
        f"secret {name!r}: set the environment variable {name} or the key {name} in "
        ".streamlit/secrets.toml"
    )
