"""What a monthly review session holds (findings, actions, the month), as the service and the
report both read it."""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any

from review.core.errors import InputError
from review.core.terms import SessionStatus

MONTH_RE = re.compile(r"^\d{4}-(0[1-9]|1[0-2])$")


SEVERITIES = ("low", "medium", "high", "critical")


LINK_KINDS = ("trace", "case", "policy_version", "run")


def month_bounds(month: str) -> tuple[dt.date, dt.date]:
    if not MONTH_RE.match(month):
        raise InputError(f"month must look like 2025-07, got {month!r}")
    y, m = int(month[:4]), int(month[5:])
    return dt.date(y, m, 1), dt.date(y, m, calendar.monthrange(y, m)[1])


def next_month(month: str) -> str:
    _, last = month_bounds(month)
    n = last + dt.timedelta(days=1)
    return f"{n.year:04d}-{n.month:02d}"


@dataclass(frozen=True)
class Finding:
    id: int
    text: str
    severity: str
    links: tuple[dict[str, str], ...]
    carried_from_id: int | None
    created_by: str
    created_at: dt.datetime


@dataclass(frozen=True)
class Action:
    id: int
    text: str
    owner_role: str
    due_date: dt.date | None
    status: str


@dataclass(frozen=True)
class SessionView:
    id: int
    month: str
    status: str
    attendees: tuple[str, ...]
    validation: dict[str, Any] | None
    summary: str
    version: int
    created_by: str
    updated_by: str | None
    closed_at: dt.datetime | None
    closed_by: str | None
    findings: tuple[Finding, ...] = field(default=())
    actions: tuple[Action, ...] = field(default=())

    @property
    def closed(self) -> bool:
        return self.status == SessionStatus.closed


def parse_links(text: str) -> list[dict[str, str]]:
    """Links of a finding typed one per line as ``kind:reference`` (blank lines skipped; the
    kinds are checked when the finding is saved)."""
    out: list[dict[str, str]] = []
    for line in text.splitlines():
        if line.strip():
            kind, _, ref = line.partition(":")
            out.append({"kind": kind.strip(), "ref": ref.strip()})
    return out


def links_text(links: tuple[dict[str, str], ...]) -> str:
    return ", ".join(f"{x['kind']}:{x['ref']}" for x in links)
