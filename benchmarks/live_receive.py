"""Spans per second through the OTLP/HTTP receiver, beside the exporter's own send rate to a
null endpoint, measured in one run (issue 31).

    .venv/bin/python benchmarks/live_receive.py [--traces 3000] [--batch 512] [--url URL]

The real OpenTelemetry exporters (``opentelemetry-exporter-otlp-proto-http``, plain and gzip,
and ``opentelemetry-exporter-otlp-json-http``) send the same OpenInference RAG spans (3 per
trace), in batches of ``--batch`` (the SDK's BatchSpanProcessor default is 512), twice each:

* to a null endpoint: the same HTTP stack (uvicorn + starlette) that reads the body and answers
  an empty ExportTraceServiceResponse, so its rate is the exporter's and the HTTP's own;
* to the receiver (``review.traces.live.receiver``): decode, stage in one transaction per
  request (SQLite in a temporary directory, or ``--url``), answer.

Then one assembly pass imports every staged trace (``staging.assemble``), timed on its own.
Wall time and this process's CPU time (client and server threads together) are printed, with
the receiver's ratio to the null endpoint's wall time. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.json.http.trace_exporter import (
    OTLPSpanExporter as JsonExporter,
)
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: the helpers live in tests/

from review.core.identity import SYSTEM  # noqa: E402
from review.traces.live import sources, staging  # noqa: E402
from review.traces.live.receiver import Receiver, ReceiverConfig  # noqa: E402
from storage.db import make_engine, migrate  # noqa: E402
from tests.helpers.ragspans import make_rag_spans  # noqa: E402


class NullEndpoint(Receiver):
    """The receiver's HTTP server and threads around an app that drops every body."""

    def __init__(self, engine: Any) -> None:
        super().__init__(engine, SYSTEM, 0, ReceiverConfig(port=0, assemble_every=None))

        async def drop(request: Request) -> Response:
            await request.body()
            kind = request.headers.get("content-type", "")
            if kind.startswith("application/json"):
                return Response(b"{}", media_type="application/json")
            body = ExportTraceServiceResponse().SerializeToString()
            return Response(body, media_type="application/x-protobuf")

        self.app = Starlette(routes=[Route("/v1/traces", drop, methods=["POST"])])


EXPORTERS: dict[str, Callable[[str], SpanExporter]] = {
    "protobuf": lambda url: OTLPSpanExporter(endpoint=url, timeout=120),
    "protobuf+gzip": lambda url: OTLPSpanExporter(
        endpoint=url, timeout=120, compression=Compression.Gzip
    ),
    "json": lambda url: JsonExporter(endpoint=url, timeout=120),
}


def send(exporter: SpanExporter, spans: Sequence[ReadableSpan], batch: int) -> tuple[float, float]:
    """Wall and CPU seconds to export ``spans`` in batches (every batch must succeed)."""
    w0, c0 = time.perf_counter(), time.process_time()
    for i in range(0, len(spans), batch):
        if exporter.export(spans[i : i + batch]) != SpanExportResult.SUCCESS:
            raise SystemExit(f"an export to the endpoint failed at span {i}")
    return time.perf_counter() - w0, time.process_time() - c0


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--url", default=None, help="database URL (default: a temporary SQLite)")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        url = args.url or f"sqlite:///{Path(tmp) / 'receive.db'}"
        engine = make_engine(url)
        migrate(engine)
        null = NullEndpoint(engine)
        null_port = null.start()
        rows: list[tuple[str, int, float, float, float | None]] = []
        staged = 0
        src = sources.add_source(engine, SYSTEM, kind="otlp", name="benchmark")
        for n, (name, make) in enumerate(EXPORTERS.items()):
            spans, _ = make_rag_spans(args.traces, seed=n * args.traces)
            receiver = Receiver(engine, SYSTEM, src.id, ReceiverConfig(port=0, assemble_every=None))
            port = receiver.start()
            null_wall, null_cpu = send(
                make(f"http://127.0.0.1:{null_port}/v1/traces"), spans, args.batch
            )
            wall, cpu = send(make(f"http://127.0.0.1:{port}/v1/traces"), spans, args.batch)
            receiver.stop()
            staged += len(spans)
            rows.append(
                (f"{name}: exporter to a null endpoint", len(spans), null_wall, null_cpu, None)
            )
            rows.append(
                (f"{name}: exporter to the receiver", len(spans), wall, cpu, wall / null_wall)
            )
        null.stop()

        w0, c0 = time.perf_counter(), time.process_time()
        res = staging.assemble(engine, SYSTEM, src.id, grace_seconds=0, now=dt.datetime.now(dt.UTC))
        imported = res.imported
        rows.append(
            (
                f"assembly: {imported:,} traces imported",
                staged,
                time.perf_counter() - w0,
                time.process_time() - c0,
                None,
            )
        )
        engine.dispose()

    print(f"database: {'temporary SQLite' if args.url is None else args.url}")
    print(f"{args.traces:,} RAG traces per encoding (3 spans each), batches of {args.batch}\n")
    print(f"{'path':<46} {'spans':>7} {'wall s':>8} {'CPU s':>8} {'spans/s':>9} {'ratio':>6}")
    for label, n_spans, wall, cpu, ratio in rows:
        r = f"{ratio:6.2f}" if ratio is not None else ""
        print(f"{label:<46} {n_spans:>7,} {wall:8.2f} {cpu:8.2f} {n_spans / wall:9,.0f} {r:>6}")


if __name__ == "__main__":
    main()
