"""Audit population counts from the population groups against the count of every trace.

On a database built by ``benchmarks/scale.py --keep`` (a SQLite file, or the PostgreSQL
cluster it keeps in ``WORKDIR/pg``: start it again with ``pg_ctl -D WORKDIR/pg start`` if it
is stopped), times as a median of ``--runs`` runs, each way, wall and CPU:

- ``count_population`` (the Audits page's preview) by decision, by decision x customer tier,
  by decision over a window of whole days, over a window that starts and ends mid-day
  (``popcount.stratum_terms`` with times), and with restricted traces left out;
- ``create_plan`` of a plan that counts its population (restricted traces left out, so no
  earlier plan's counts are reused), then deleted again (the database is left as found);
- the traces stamp (``review.traces.stamp.traces_stamp``) a plan stores and every check reads;

"groups" is this commit's code; "traces" is the count of every trace (the code before it:
the groups bypassed, ``count(*)`` for the stamp). CPU is this process's (``process_time``)
and, on PostgreSQL with ``--pg-data``, the server's (its processes' user + system time,
read from /proc), which is where the counting happens. Figures are printed, never asserted.

    PYTHONPATH=. .venv/bin/python benchmarks/population_counts.py --url URL [--pg-data DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sqlalchemy import Engine, delete, func, select  # noqa: E402

from benchmarks import proccpu  # noqa: E402
from storage.db import make_engine, read_session, run_write  # noqa: E402
from storage.models import SamplingPlan, Trace  # noqa: E402

REVIEWER = "ravi.menon@brightwave.example"  # as benchmarks/scale.py


def _server_cpu(pg_data: Path | None) -> float:
    """User + system seconds of the PostgreSQL server's processes (the postmaster's reaped
    children included); 0 without ``--pg-data``."""
    if pg_data is None:
        return 0.0
    return proccpu.TreeCpu(proccpu.postmaster_pid(pg_data), reaped=True).read() or 0.0


def _time(fn: Callable[[], Any], runs: int, pg_data: Path | None) -> tuple[float, float, float]:
    """Median wall, process CPU and server CPU of ``runs`` calls (after one warm-up call)."""
    fn()
    walls, cpus, servers = [], [], []
    for _ in range(runs):
        s0, w0, c0 = _server_cpu(pg_data), time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
        servers.append(_server_cpu(pg_data) - s0)
    return statistics.median(walls), statistics.median(cpus), statistics.median(servers)


@contextmanager
def _traces_only() -> Iterator[None]:
    """The code before the groups: every population counted from the traces, the stamp by
    ``count(*)``."""
    from review.audits import popcount
    from storage import population_groups

    real_terms, real_counter = popcount.stratum_terms, population_groups.COUNTER
    popcount.stratum_terms = lambda *a, **k: None
    population_groups.COUNTER = "no such counter"  # type: ignore[misc]
    try:
        yield
    finally:
        popcount.stratum_terms = real_terms
        population_groups.COUNTER = real_counter  # type: ignore[misc]


def _cases(engine: Engine) -> list[tuple[str, Callable[[], Any]]]:
    from review.admin import users
    from review.audits import plans, popcount
    from review.audits.population import PopulationFilter
    from review.traces.stamp import traces_stamp

    with read_session(engine) as s:
        lo, hi = s.execute(select(func.min(Trace.at), func.max(Trace.at))).one()
    mid = lo + (hi - lo) / 2
    window = PopulationFilter(date_from=mid.date() - dt.timedelta(days=7), date_to=mid.date())
    start = dt.datetime(mid.year, mid.month, mid.day, 9, 30) - dt.timedelta(days=7)
    end = start + dt.timedelta(days=7, hours=5)
    every = PopulationFilter()
    open_ = PopulationFilter(include_restricted=False)
    row = users.get_by_email(engine, REVIEWER)
    assert row is not None
    actor = users.to_actor(row)

    def mid_day() -> Any:
        with read_session(engine) as s:
            if popcount.stratum_terms(s, every, ("decision",), start, end) is None:
                plans.count_strata(s, every, ("decision",), 2, Trace.at >= start, Trace.at < end)

    def create() -> None:
        name = f"population_counts {time.time_ns()}"
        spec = plans.PlanSpec(name=name, filter=open_, strata=("decision",), total=400, seed=7)
        pid = run_write(engine, partial(plans.create_plan, actor=actor, spec=spec))

        def drop(s: Any) -> None:
            s.execute(delete(SamplingPlan).where(SamplingPlan.id == pid))

        run_write(engine, drop)

    def stamp() -> Any:
        with read_session(engine) as s:
            return traces_stamp(s)

    return [
        (
            "count_population, strata = decision",
            partial(plans.count_population, engine, every, ("decision",)),
        ),
        (
            "count_population, strata = decision x attr.customer_tier",
            partial(plans.count_population, engine, every, ("decision", "attr.customer_tier")),
        ),
        (
            "count_population, 8 whole days, by decision",
            partial(plans.count_population, engine, window, ("decision",)),
        ),
        ("population of 7 days 5 h from 09:30, by decision", mid_day),
        (
            "count_population, restricted left out, by decision",
            partial(plans.count_population, engine, open_, ("decision",)),
        ),
        ("create_plan (counts, restricted left out)", create),
        ("traces stamp", stamp),
    ]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--pg-data", type=Path, default=None, help="the cluster's data folder")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    engine = make_engine(args.url)
    with read_session(engine) as s:
        n = int(s.scalar(select(func.count()).select_from(Trace)) or 0)
    print(f"{engine.dialect.name}, {n:,} traces, median of {args.runs} runs")
    print(
        "| step | traces: wall s | CPU s | server CPU s | groups: wall s | CPU s "
        "| server CPU s | wall ratio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, fn in _cases(engine):
        with _traces_only():
            before = _time(fn, args.runs, args.pg_data)
        after = _time(fn, args.runs, args.pg_data)
        ratio = before[0] / after[0] if after[0] else float("inf")
        print(
            f"| {name} | {before[0]:.3f} | {before[1]:.3f} | {before[2]:.2f} | {after[0]:.3f} "
            f"| {after[1]:.3f} | {after[2]:.2f} | {ratio:.0f}x |"
        )


if __name__ == "__main__":
    main()
