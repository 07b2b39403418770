"""What the Traces page runs for a text search, timed on a large database (issue 34).

    .venv/bin/python benchmarks/text_search.py --url URL [--runs 5] [--save FILE] [--check FILE]
                                               [--only NAMES] [--case NAME=TEXT ...]

For each kind of search (a frequent word, a word in about 1% of the traces, a word in no
trace, a phrase of two words, a two-letter string in few traces, a one-letter string, a
two-letter string in none, an exact trace id), for a user with clearance and one without:
the first page of the list, newest first (``list_traces``), and the count the page shows
(``browse.count_from_listing`` of that page, else ``browse.count_for_page``, when they
exist; else the exact ``browse.count_traces``),
each the median wall time of ``--runs`` runs (app and database: on PostgreSQL the
server's time is in the wall time, not in this process's CPU), and on a PostgreSQL server
on this machine the median CPU time of its processes during the list and the count (the
database's CPU, read from /proc). ``--case NAME=TEXT`` adds a search (a rare word of your
data, say). A reference measured in the same run (a fixed pure-Python loop) is printed
beside them: compare runs by the ratio.

``--save FILE`` writes every first page (trace ids in order) and count; ``--check FILE``
compares this run's first pages with a saved run (they must be the same traces in the same
order) and its counts (an exact count must equal the saved one; a bounded count must be
below it).

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from benchmarks import proccpu
from review.admin import users
from review.traces import browse
from storage.db import make_engine
from storage.models import Trace

REVIEWER = "ravi.menon@brightwave.example"  # as benchmarks/scale.py


def reference() -> float:
    """A fixed amount of pure-Python work (about 0.05 s on a quiet core)."""
    t0 = time.perf_counter()
    total = 0
    for i in range(1_000_000):
        total += i % 7
    return time.perf_counter() - t0


class DatabaseCpu:
    """The CPU seconds of a PostgreSQL server on this machine: its postmaster and the backends
    doing the queries (benchmarks.proccpu). None for SQLite (the SQL runs in this process) or
    a server elsewhere."""

    def __init__(self, engine: Any) -> None:
        self.tree = proccpu.TreeCpu(proccpu.postmaster_of(engine))

    def read(self) -> float | None:
        return self.tree.read()


def timed(
    fn: Callable[[], Any], runs: int, db: DatabaseCpu | None = None
) -> tuple[float, float | None, Any]:
    """The median wall seconds of ``runs`` calls, the median database CPU seconds (None: not
    measured) and the last result."""
    walls: list[float] = []
    cpus: list[float] = []
    out: Any = None
    for _ in range(runs):
        before = db.read() if db else None
        t0 = time.perf_counter()
        out = fn()
        walls.append(time.perf_counter() - t0)
        after = db.read() if db else None
        if before is not None and after is not None:
            cpus.append(after - before)
    return statistics.median(walls), (statistics.median(cpus) if cpus else None), out


def count_for_page(engine: Any, actor: Any, f: browse.TraceFilter, listed: int) -> tuple[int, bool]:
    """The page's count: (n, more), more meaning "more than n"; from the first page's
    ``listed`` rows when that page is the last one, as the page does."""
    bounded = getattr(browse, "count_for_page", None)
    if bounded is None:
        return browse.count_traces(engine, actor, f), False
    c = browse.count_from_listing(1, 25, listed) or bounded(engine, actor, f)
    return c.n, c.more


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--save", type=Path)
    ap.add_argument("--check", type=Path)
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument(
        "--case",
        action="append",
        default=[],
        metavar="NAME=TEXT",
        help="another search to time (e.g. rare=ombudsman); may be repeated",
    )
    args = ap.parse_args()
    engine = make_engine(args.url)
    row = users.get_by_email(engine, REVIEWER)
    assert row is not None, REVIEWER
    cleared = replace(users.to_actor(row), clearance=True)
    uncleared = replace(cleared, clearance=False)
    with engine.connect() as c:
        n = int(c.execute(select(func.count()).select_from(Trace)).scalar_one())
        middle = c.execute(select(Trace.trace_id).order_by(Trace.id).offset(n // 2).limit(1))
        trace_id = middle.scalar_one()
    cases = {
        "frequent": "refund",
        "one_percent": "penalty",
        "no_match": "zq-no-such-words",
        "phrase": "legal hold",
        "short_few": "EU",
        "one_letter": "x",
        "short_none": "qz",
        "trace_id": trace_id,
    }
    for extra in args.case:
        name, sep, text = extra.partition("=")
        if not sep or not name or not text:
            raise SystemExit(f"--case takes NAME=TEXT, not {extra!r}")
        cases[name] = text
    if args.only:
        cases = {k: v for k, v in cases.items() if k in args.only.split(",")}
    ref = statistics.median(reference() for _ in range(5))
    db = DatabaseCpu(engine)
    print(f"{engine.dialect.name}: {n:,} traces; reference {ref:.3f}s")
    saved = json.loads(args.check.read_text()) if args.check else {}
    record: dict[str, Any] = {}
    for who, actor in (("cleared", cleared), ("uncleared", uncleared)):
        for name, text in cases.items():
            f = browse.TraceFilter(text=text)
            list_s, list_db, rows = timed(
                partial(browse.list_traces, engine, actor, f, page=1, sort="newest"),
                args.runs,
                db,
            )
            count_s, count_db, (total, more) = timed(
                partial(count_for_page, engine, actor, f, len(rows)), args.runs, db
            )
            ids = [r.trace_id for r in rows]
            key = f"{who}.{name}"
            record[key] = {"ids": ids, "count": total, "more": more}
            shown = f"more than {total:,}" if more else f"{total:,}"
            note = ""
            if key in saved:
                was = saved[key]
                same = ids == was["ids"]
                fits = total < was["count"] if more else total == was["count"] and not was["more"]
                note = "  same first page" if same else "  FIRST PAGE DIFFERS"
                note += "" if fits or was["more"] else "  COUNT DIFFERS"
            dbs = (
                f"  database CPU {list_db + count_db:6.3f}s"
                if list_db is not None and count_db is not None
                else ""
            )
            record[key] |= {"list_s": list_s, "count_s": count_s}
            record[key] |= {"list_db_cpu_s": list_db, "count_db_cpu_s": count_db}
            print(
                f"  {who:9} {name:12} count {count_s:6.3f}s ({count_s / ref:5.1f} ref)"
                f"  list {list_s:6.3f}s ({list_s / ref:5.1f} ref)"
                f"  total {count_s + list_s:6.3f}s{dbs}  {shown} matches{note}",
                flush=True,
            )
    if args.save:
        args.save.write_text(json.dumps(record, indent=1))
    engine.dispose()


if __name__ == "__main__":
    main()
