"""CPU seconds of processes on this machine, read from /proc (Linux): the benchmarks' one
reader, for the app server, a PostgreSQL server and its backends, and chromium.

A process's CPU is its user + system time (``utime`` + ``stime`` of /proc/PID/stat, all its
threads). A tree's CPU is the sum over the root and the descendants alive at the reading;
with ``reaped`` the root's reaped children count too (``cutime`` + ``cstime``: a
postmaster's backends that ended between two readings keep their CPU in the figure).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = [
    "TreeCpu",
    "children",
    "cpu_seconds",
    "descendants",
    "postmaster_of",
    "postmaster_pid",
]

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (``state`` is [0], ``ppid`` [1],
    ``utime`` [11]); None when the process has gone. The name is in parentheses and may hold
    spaces and parentheses itself, so the fields start after the last ')'."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw.rsplit(")", 1)[-1].split()
    return fields if len(fields) > 14 else None


def cpu_seconds(pid: int, *, reaped: bool = False) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (with ``reaped``, plus those of
    its children it has waited for); None when it has gone."""
    f = _stat(pid)
    if f is None:
        return None
    ticks = int(f[11]) + int(f[12])
    if reaped:
        ticks += int(f[13]) + int(f[14])
    return ticks / _TICK


def _parents() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        f = _stat(int(entry.name))
        if f is not None:
            out.setdefault(int(f[1]), []).append(int(entry.name))
    return out


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` now."""
    return _parents().get(pid, [])


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` now: its children, theirs, and so on."""
    parents = _parents()
    out: list[int] = []
    todo = [pid]
    while todo:
        kids = parents.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


class TreeCpu:
    """CPU seconds of a process tree at each :meth:`read`: the root (its reaped children
    too with ``reaped``) and its descendants alive then. A descendant that ended between two
    readings takes its CPU with it unless the root reaped it and ``reaped`` is set; None
    without a root."""

    def __init__(self, root: int | None, *, reaped: bool = False) -> None:
        self.root = root
        self.reaped = reaped

    def read(self) -> float | None:
        if self.root is None:
            return None
        total = cpu_seconds(self.root, reaped=self.reaped) or 0.0
        return total + sum(cpu_seconds(p) or 0.0 for p in descendants(self.root))


def postmaster_pid(data_dir: Path) -> int | None:
    """The postmaster's pid of the PostgreSQL server of ``data_dir`` (postmaster.pid)."""
    try:
        return int((data_dir / "postmaster.pid").read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return None


def postmaster_of(engine: Any) -> int | None:
    """The postmaster's pid of the PostgreSQL server ``engine`` reaches, when it runs on this
    machine (the parent of a backend); None for SQLite or a server elsewhere."""
    if engine.dialect.name != "postgresql":
        return None
    with engine.connect() as c:
        backend = int(c.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())
    f = _stat(backend)
    return None if f is None else int(f[1])
