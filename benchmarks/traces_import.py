"""Trace import benchmark on its own database (printed, never asserted):

    .venv/bin/python benchmarks/traces_import.py [--traces 100000] [--chunks 5] [--url URL]

Imports synthetic traces from a canonical JSONL file, then the same file again (every trace
already stored), beside the raw-insert floor of the same engine (plain sqlite3 executemany, or
psycopg COPY on PostgreSQL; ``import_vs_floor`` is the import's speed as a share of the floor's),
then times the first and last traces page, the facets and the monitoring queries."""

from __future__ import annotations

import argparse
import dataclasses
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from review.core.identity import SYSTEM  # noqa: E402
from review.core.taxonomy import load_taxonomy  # noqa: E402
from review.traces import monitoring  # noqa: E402
from review.traces.browse import TraceFilter, count_traces, list_traces  # noqa: E402
from review.traces.facets import facet_values  # noqa: E402
from review.traces.importer import BATCH_SIZE, import_file  # noqa: E402
from review.traces.monitoring import MonitoringPolicy  # noqa: E402
from storage.db import make_engine, migrate  # noqa: E402

__all__ = ["run_benchmark"]


def _peak_rss_mib() -> float:
    # ru_maxrss is KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_benchmark(
    url: str | None = None,
    n: int = 100_000,
    chunks: int = 5,
    batch_size: int = BATCH_SIZE,
    monitoring_policy: MonitoringPolicy | None = None,
) -> dict[str, float]:
    """Import ``n`` synthetic traces (``chunks`` chunks each) from a canonical JSONL file and
    time it, and a re-import of it, beside a floor (the same rows inserted in one transaction
    with plain sqlite3 executemany, or psycopg COPY on PostgreSQL); then time the first traces
    page and the monitoring queries. Prints and returns the figures; never asserts on them.
    ``url`` defaults to a temp SQLite file."""
    from benchmarks import synthetic

    tax = load_taxonomy()
    out: dict[str, float] = {"traces": float(n), "chunks_per_trace": float(chunks)}
    with tempfile.TemporaryDirectory(prefix="wb-bench-") as tmp:
        folder = Path(tmp)
        db_url = url or f"sqlite:///{folder / 'bench.db'}"
        engine = make_engine(db_url)
        migrate(engine)
        data = folder / "traces.jsonl"
        t0 = time.perf_counter()
        with data.open("w", encoding="utf-8") as fh:
            synthetic.write_synthetic(fh, n, chunks)
        out["generate_s"] = time.perf_counter() - t0
        rss0 = _peak_rss_mib()
        t0, c0 = time.perf_counter(), time.process_time()
        report = import_file(engine, SYSTEM, data, "canonical", tax=tax, batch_size=batch_size)
        secs = time.perf_counter() - t0
        out["import_s"] = secs
        out["import_cpu_s"] = time.process_time() - c0
        out["import_traces_per_s"] = report.added / secs if secs else 0.0
        out["peak_rss_mib"] = _peak_rss_mib()
        out["peak_rss_growth_mib"] = out["peak_rss_mib"] - rss0
        # the same file again: every trace is already stored (found while checking)
        t0, c0 = time.perf_counter(), time.process_time()
        again = import_file(engine, SYSTEM, data, "canonical", tax=tax, batch_size=batch_size)
        out["reimport_s"] = time.perf_counter() - t0
        out["reimport_cpu_s"] = time.process_time() - c0
        out["reimport_skipped"] = float(again.skipped)

        # the floor: the same rows without checks, into an empty database of the same engine
        # (its schema is made before the clock starts: the floor is the writing of the rows)
        if db_url.startswith("postgresql"):
            with synthetic.postgres_floor_database(db_url) as floor_url:
                t0, c0 = time.perf_counter(), time.process_time()
                rows = synthetic.postgres_floor(floor_url, data)
                floor_s, floor_cpu = time.perf_counter() - t0, time.process_time() - c0
        else:
            floor_db = folder / "floor.db"
            floor_engine = make_engine(f"sqlite:///{floor_db}")
            migrate(floor_engine)
            floor_engine.dispose()
            t0, c0 = time.perf_counter(), time.process_time()
            rows = synthetic.sqlite_floor(floor_db, data, schema_ready=True)
            floor_s, floor_cpu = time.perf_counter() - t0, time.process_time() - c0
        out["floor_rows"] = float(rows)
        out["floor_s"] = floor_s
        out["floor_cpu_s"] = floor_cpu
        out["floor_traces_per_s"] = n / floor_s if floor_s else 0.0
        out["import_vs_floor"] = floor_s / secs if secs else 0.0

        viewer = dataclasses.replace(SYSTEM, clearance=False)
        t0 = time.perf_counter()
        total = count_traces(engine, viewer, TraceFilter())
        list_traces(engine, viewer, TraceFilter(), page=1)
        out["first_page_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        list_traces(engine, viewer, TraceFilter(), page=max(1, total // 25))
        out["last_page_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        facet_values(engine)
        out["facets_s"] = time.perf_counter() - t0
        pol = monitoring_policy or monitoring.load_monitoring_policy()
        t0 = time.perf_counter()
        monitoring.monitor(engine, tax, pol, weeks=12)
        out["monitoring_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        monitoring.weekly_by_segment(engine, tax, "ranking_mode", weeks=12)
        out["monitoring_segment_s"] = time.perf_counter() - t0
        engine.dispose()
    width = max(len(k) for k in out)
    for k, v in out.items():
        print(f"{k.ljust(width)}  {v:,.3f}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--traces", type=int, default=100_000)
    ap.add_argument("--chunks", type=int, default=5)
    ap.add_argument("--url", default=None, help="database URL (default: a temporary SQLite file)")
    args = ap.parse_args()
    run_benchmark(args.url, args.traces, args.chunks)


if __name__ == "__main__":
    main()
