"""Sync-from-Phoenix benchmark (printed, never asserted):

    .venv/bin/python benchmarks/live_sync.py [--traces 2000] [--page-size 1000] [--url URL]
        [--phoenix-url URL --project NAME]

Starts a real Phoenix (``.phoenix-venv``, SQLite in a temp dir) unless ``--phoenix-url`` names
a running one holding ``--project``, sends ``--traces`` OpenInference RAG traces (3 spans each)
with the OpenTelemetry SDK's OTLP/HTTP exporter (batched), waits until Phoenix stored them,
then in one run measures:

* ``phoenix_read``: Phoenix's own read rate, plain paging of the same spans
  (``GET /v1/projects/{p}/spans?sort=id&order=asc``, JSON parsed, nothing else), before the
  syncs and again after them (the first read finds Phoenix's caches cold; the ratio below is
  against the faster of the two);
* ``sync``: ``workbench`` sync of the same spans into an empty workbench database (mapping,
  staging, assembling and importing every trace);
* ``resync``: the same sync again (every span read within the overlap window, all duplicates);
* ``file_import``: the importer's own rate on the same spans, written as an OTLP/JSON file
  (one line per trace, mapped from Phoenix's pages beforehand, not timed) and imported with
  ``workbench import-traces``'s code into another empty database: the issue asks for a sync
  at the importer's rate or better;
* ``file_export``: writing that file (Phoenix's pages read and mapped, what a user exporting
  the spans by hand does before the import): the sync replaces export and import together.

For each: wall seconds, this process's CPU seconds, Phoenix's CPU seconds (when this script
started it), spans per second; then the sync's rate as a share of the plain read's.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import proccpu  # noqa: E402
from review.core.identity import SYSTEM  # noqa: E402
from review.traces import importer  # noqa: E402
from review.traces.live import sources  # noqa: E402
from review.traces.live.phoenix import PhoenixClient, otlp_span, sync_phoenix  # noqa: E402
from storage.db import make_engine, migrate  # noqa: E402
from tests.live.phoenix_server import (  # noqa: E402
    SPANS_PER_TRACE,
    rag_traces,
    send_rag_traces,
    start_phoenix,
    wait_for_spans,
)


@dataclass
class Figure:
    name: str
    spans: int
    wall: float
    cpu: float
    phoenix_cpu: float | None

    @property
    def rate(self) -> float:
        return self.spans / self.wall if self.wall > 0 else float("nan")

    def line(self) -> str:
        px = "" if self.phoenix_cpu is None else f", Phoenix CPU {self.phoenix_cpu:7.2f} s"
        return (
            f"{self.name:<13} {self.spans:>8,} spans  wall {self.wall:7.2f} s  "
            f"CPU {self.cpu:7.2f} s{px}  {self.rate:>9,.0f} spans/s"
        )


def _proc_cpu(pid: int | None) -> float | None:
    """CPU seconds (user + system) of process ``pid`` so far; None if unknown."""
    return None if pid is None else proccpu.cpu_seconds(pid)


def measure(name: str, pid: int | None, work: Callable[[], int]) -> Figure:
    p0, c0, w0 = _proc_cpu(pid), time.process_time(), time.perf_counter()
    spans = work()
    w1, c1, p1 = time.perf_counter(), time.process_time(), _proc_cpu(pid)
    pcpu = None if p0 is None or p1 is None else p1 - p0
    return Figure(name, spans, w1 - w0, c1 - c0, pcpu)


def plain_read(base_url: str, project: str, page_size: int) -> int:
    n, cursor = 0, None
    while True:
        url = f"{base_url}/v1/projects/{project}/spans?sort=id&order=asc&limit={page_size}"
        if cursor:
            url += f"&cursor={cursor}"
        with urllib.request.urlopen(url, timeout=120) as r:
            body = json.loads(r.read())
        n += len(body["data"])
        cursor = body.get("next_cursor")
        if not cursor:
            return n


def otlp_file(base_url: str, project: str, page_size: int, path: Path) -> int:
    """Write the project's spans as an OTLP/JSON file, one export line per trace (what a file
    import of the same traces reads); returns the number of spans."""
    by_trace: dict[str, list[dict[str, object]]] = {}
    client = PhoenixClient(base_url, timeout=120, deadline=600)
    cursor: str | None = None
    n = 0
    while True:
        page = client.spans_page(project, cursor, page_size)
        for raw in page.spans:
            st = otlp_span(raw).staged
            by_trace.setdefault(st.trace_id, []).append(st.entry)
            n += 1
        cursor = page.next_cursor
        if not cursor:
            break
    with path.open("w", encoding="utf-8") as fh:
        for entries in by_trace.values():
            fh.write(json.dumps({"resourceSpans": entries}) + "\n")
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--traces", type=int, default=2000)
    ap.add_argument("--page-size", type=int, default=1000)
    ap.add_argument("--url", default=None, help="workbench database (default: temp SQLite)")
    ap.add_argument("--phoenix-url", default=None)
    ap.add_argument("--project", default="bench")
    a = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="wb-live-sync-"))
    server = None
    pid: int | None = None
    if a.phoenix_url:
        base = a.phoenix_url.rstrip("/")
    else:
        t0 = time.perf_counter()
        server = start_phoenix(tmp / "phoenix")
        base, pid = server.base_url, server.proc.pid
        print(f"Phoenix started in {time.perf_counter() - t0:.1f} s at {base}")
    try:
        spans: int = a.traces * SPANS_PER_TRACE
        if not a.phoenix_url:
            sent = rag_traces(a.traces, seed=11)

            def send() -> int:
                send_rag_traces(base + "/v1/traces", sent, project=a.project, batch=True)
                wait_for_spans(base, a.project, spans, timeout=1800)
                return spans

            print(measure("export+store", pid, send).line())
        cold = measure("phoenix_read", pid, lambda: plain_read(base, a.project, a.page_size))
        print(cold.line(), "(first read)")

        url = a.url or f"sqlite:///{tmp / 'wb.db'}"
        engine = make_engine(url)
        migrate(engine)
        sid = sources.add_source(
            engine,
            SYSTEM,
            kind="phoenix",
            name="bench",
            url=base,
            project=a.project,
            grace_seconds=0,
        ).id
        client = PhoenixClient(base, timeout=120, deadline=600)

        def sync() -> int:
            # one Phoenix on SQLite commits in id order: no overlap window needed
            r = sync_phoenix(
                engine,
                SYSTEM,
                sid,
                client=client,
                page_size=a.page_size,
                grace_seconds=0,
                overlap_seconds=0,
            )
            if r.error:
                raise SystemExit(f"sync failed: {r.error}")
            print(f"  ({r.added:,} spans added, {r.imported:,} traces imported)")
            return r.spans_read

        first = measure("sync", pid, sync)
        print(first.line())
        again = measure("resync", pid, sync)
        print(again.line())
        warm = measure("phoenix_read", pid, lambda: plain_read(base, a.project, a.page_size))
        print(warm.line(), "(again)")
        read = warm if warm.rate > cold.rate else cold  # the ratio is against the faster read
        print(
            f"sync rate / Phoenix read rate: {first.rate / read.rate:.2f} "
            f"(resync: {again.rate / read.rate:.2f}); "
            f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
        )
        # the importer's rate on the same spans: the file is written first (timed on its
        # own: reading Phoenix's pages and mapping them, what a user exporting to a file does
        # before an import) and imported into another empty database
        path = tmp / "same-spans.otlp.jsonl"
        exported = measure(
            "file_export", pid, lambda: otlp_file(base, a.project, a.page_size, path)
        )
        print(exported.line())
        in_file = exported.spans
        other = make_engine(f"sqlite:///{tmp / 'wb-file.db'}")
        migrate(other)

        def file_import() -> int:
            rep = importer.import_file(other, SYSTEM, path, "otlp")
            print(f"  ({rep.added:,} traces imported from the file)")
            return in_file

        imported = measure("file_import", None, file_import)
        print(imported.line())
        cpu_share = (first.cpu / first.spans) / (imported.cpu / imported.spans)
        by_hand = first.spans / (exported.wall + imported.wall)
        print(
            f"sync rate / file import rate: {first.rate / imported.rate:.2f} (the sync's CPU "
            f"per span: {cpu_share:.2f} x the import's); sync rate / export-then-import rate: "
            f"{first.rate / by_hand:.2f}"
        )
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
