"""A real Arize Phoenix for the live-trace tests, and real OpenInference RAG traces sent to it.

Phoenix lives in its own virtual environment (``make phoenix-env`` creates ``.phoenix-venv/``
from ``tools/phoenix/requirements.txt``; ``WORKBENCH_PHOENIX`` names another ``phoenix``
executable). :func:`start_phoenix` runs ``phoenix serve`` on free loopback ports with a
temporary working directory (SQLite) or a given PostgreSQL database, and waits for ``/healthz``
with a generous timeout (Phoenix migrates its database first, and can take minutes to start on
a loaded 2-core machine). :func:`send_rag_traces` sends traces through the real OpenTelemetry
SDK with the OTLP/HTTP protobuf exporter to Phoenix's ``/v1/traces`` and flushes them.

Phoenix stores spans in a background batch after it answered the exporter:
:func:`wait_for_spans` polls the REST API until the project holds the expected count.

Two Phoenix servers on one PostgreSQL must be started one after the other: both migrating the
same database at once crashes Phoenix.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PHOENIX_VENV_BIN = ROOT / ".phoenix-venv" / "bin" / "phoenix"
# Generous: on a busy CI machine a first start migrates the database and builds its app.
START_SECONDS = float(os.environ.get("WORKBENCH_PHOENIX_START_SECONDS", "600"))


#: every module that starts a Phoenix runs on one test worker (``make test`` distributes with
#: ``--dist loadgroup``): a module-scoped server is then started once per module, not once per
#: worker that happens to take one of its tests (four on a 2-core machine, each a minute of CPU)
PHOENIX_GROUP = pytest.mark.xdist_group("phoenix")


def phoenix_executable() -> str | None:
    """The ``phoenix`` executable the tests use, or None when it is not installed."""
    named = os.environ.get("WORKBENCH_PHOENIX")
    if named:
        return named if Path(named).is_file() else None
    return str(PHOENIX_VENV_BIN) if PHOENIX_VENV_BIN.is_file() else None


def require_phoenix() -> str:
    """The executable, or a skip (a failure in CI, where `make test` installs it first)."""
    exe = phoenix_executable()
    if exe is None:
        msg = "Phoenix is not installed: run `make phoenix-env` (or set WORKBENCH_PHOENIX)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return exe


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def phoenix_database_url(sqlalchemy_url: str) -> str:
    """Phoenix's form of a PostgreSQL URL (it picks its own async driver):
    ``postgresql+psycopg://u@h:p/db`` -> ``postgresql://u@h:p/db``."""
    scheme, rest = sqlalchemy_url.split("://", 1)
    if not scheme.startswith("postgresql"):
        raise ValueError(f"not a PostgreSQL URL: {scheme}")
    return f"postgresql://{rest}"


@dataclass
class PhoenixServer:
    """A running ``phoenix serve``; :meth:`stop` ends it (SIGTERM, then SIGKILL)."""

    base_url: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    working_dir: Path
    database_url: str | None = None
    stopped: bool = field(default=False)

    @property
    def port(self) -> int:
        return int(self.base_url.rsplit(":", 1)[1])

    @property
    def traces_url(self) -> str:
        return self.base_url + "/v1/traces"

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-6000:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)

    def kill(self) -> None:
        """End it at once, as a crash would (no clean shutdown)."""
        if not self.stopped and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self.stopped = True


def _healthy(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(base_url + "/healthz", timeout=5) as r:
            return bool(r.status == 200)
    except (OSError, ValueError):
        return False


def start_phoenix(
    working_dir: Path,
    *,
    database_url: str | None = None,
    port: int | None = None,
    timeout: float = START_SECONDS,
) -> PhoenixServer:
    """Start ``phoenix serve`` on free loopback ports and wait until ``/healthz`` answers.

    ``database_url``: a PostgreSQL URL (SQLAlchemy or plain form) for Phoenix's database;
    without one Phoenix keeps a SQLite file in ``working_dir``. A server whose port was taken
    meanwhile by another test worker exits at once and is started again on other ports.
    ``port``: listen there (a restart at the same address), no retry elsewhere."""
    exe = require_phoenix()
    working_dir.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout
    for attempt in range(3):
        http_port = port if port is not None else _free_port()
        grpc_port = _free_port()
        env = dict(
            os.environ,
            PHOENIX_HOST="127.0.0.1",
            PHOENIX_PORT=str(http_port),
            PHOENIX_GRPC_PORT=str(grpc_port),
            PHOENIX_WORKING_DIR=str(working_dir),
            PHOENIX_TELEMETRY_ENABLED="false",
            PHOENIX_ENABLE_PROMETHEUS="false",
        )
        env.pop("PHOENIX_SQL_DATABASE_URL", None)
        if database_url is not None:
            env["PHOENIX_SQL_DATABASE_URL"] = phoenix_database_url(database_url)
        log_path = working_dir / f"phoenix-{http_port}-{attempt}.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [exe, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=working_dir
            )
        server = PhoenixServer(
            f"http://127.0.0.1:{http_port}", proc, log_path, working_dir, database_url
        )
        while proc.poll() is None and time.monotonic() < deadline:
            if _healthy(server.base_url):
                return server
            time.sleep(0.5)
        server.stop()
        if attempt == 2 or port is not None or time.monotonic() >= deadline:
            break
    raise RuntimeError(f"Phoenix did not start within {timeout:.0f} s:\n{server.log()}")


@contextlib.contextmanager
def phoenix_server(
    working_dir: Path, *, database_url: str | None = None
) -> Iterator[PhoenixServer]:
    server = start_phoenix(working_dir, database_url=database_url)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoenixServer]:
    """One Phoenix (SQLite) per test module; tests keep apart by project name."""
    with phoenix_server(tmp_path_factory.mktemp("phoenix")) as server:
        yield server


# ---------------------------------------------------------------------------------------
# RAG traces, as the README's OTLP example maps them


@dataclass(frozen=True)
class RagChunk:
    chunk_id: str
    doc_id: str
    doc_version: int
    score: float
    text: str


@dataclass(frozen=True)
class RagTrace:
    """What one request of the assistant logs; :func:`send_rag_traces` sends it as a root
    CHAIN span (question in, answer out, ``rag.*`` decision and signals), a RETRIEVER span
    (rewritten query, ``retrieval.documents.N.document.*``) and an LLM span (model, prompt)."""

    query: str
    rewritten_query: str
    chunks: tuple[RagChunk, ...]
    decision: str
    reason_code: str | None
    answer: str
    topics: tuple[str, ...]
    model: str
    prompt: str
    index: str
    top_score: float


def rag_traces(n: int, *, seed: int = 0, tag: str = "") -> list[RagTrace]:
    """``n`` varied traces, the same for the same seed (answers and abstentions)."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        k = rnd.randint(0, 3)
        chunks = tuple(
            RagChunk(
                chunk_id=f"POL-{i}-{j}@{j + 1}#{j}.1",
                doc_id=f"POL-{i}-{j}",
                doc_version=j + 1,
                score=round(0.9 - 0.1 * j - rnd.random() * 0.05, 4),
                text=f"{j}.1 Clause {j} of policy {i}{tag}: refunds within {14 + j} days.",
            )
            for j in range(k)
        )
        abstain = k == 0 or rnd.random() < 0.3
        out.append(
            RagTrace(
                query=f"Question {i}{tag}: can I get a refund after {i % 30} days?",
                rewritten_query=f"refund window {i}{tag}",
                chunks=chunks,
                decision="abstain" if abstain else "answer",
                reason_code="no_answer_bearing_evidence" if abstain else None,
                answer="I can't answer that from our documents."
                if abstain
                else f"Yes, within {14} days ({i}{tag}).",
                topics=("refunds",) if i % 2 else ("refunds", "billing"),
                model=f"gpt-test-{i % 3}",
                prompt=f"support-answer@{i % 4}",
                index=f"kb-2026-{(i % 12) + 1:02d}",
                top_score=chunks[0].score if chunks else 0.0,
            )
        )
    return out


def send_rag_traces(
    endpoint: str,
    traces: Sequence[RagTrace],
    *,
    project: str,
    headers: dict[str, str] | None = None,
    batch: bool = False,
) -> list[str]:
    """Send ``traces`` with the OpenTelemetry SDK (OTLP/HTTP protobuf exporter) to ``endpoint``
    (``.../v1/traces``) into Phoenix project ``project``; flush; return the hex trace ids in
    order. Raises when the exporter could not deliver everything. ``batch``: the SDK's
    BatchSpanProcessor (many spans per request, as production exporters run), else one request
    per span."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SimpleSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    exporter = OTLPSpanExporter(endpoint=endpoint, headers=headers, timeout=60)
    failures: list[str] = []

    class Counting(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            result = exporter.export(spans)
            if result is not SpanExportResult.SUCCESS:
                failures.append(str(result))
            return result

        def shutdown(self) -> None:
            exporter.shutdown()

    provider = TracerProvider(
        resource=Resource.create(
            {"service.name": "rag-assistant", "openinference.project.name": project}
        )
    )
    # by default one export request per span: simple and deterministic (what the tests check
    # is the sync, not the exporter's batching)
    processor = (
        BatchSpanProcessor(Counting(), max_queue_size=100_000, max_export_batch_size=512)
        if batch
        else SimpleSpanProcessor(Counting())
    )
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("workbench-live-tests")
    ids: list[str] = []
    try:
        for t in traces:
            ids.append(_send_one(tracer, t))
        provider.force_flush(timeout_millis=120_000)
    finally:
        provider.shutdown()
    if failures:
        raise RuntimeError(f"the exporter failed {len(failures)} export(s): {failures[:3]}")
    return ids


def _send_one(tracer: Any, t: RagTrace) -> str:
    with tracer.start_as_current_span("rag-request") as root:
        root.set_attribute("openinference.span.kind", "CHAIN")
        root.set_attribute("input.value", t.query)
        with tracer.start_as_current_span("retrieve") as r:
            r.set_attribute("openinference.span.kind", "RETRIEVER")
            r.set_attribute("input.value", t.rewritten_query)
            for n, c in enumerate(t.chunks):
                p = f"retrieval.documents.{n}.document"
                r.set_attribute(f"{p}.id", c.chunk_id)
                r.set_attribute(f"{p}.score", c.score)
                r.set_attribute(f"{p}.content", c.text)
                r.set_attribute(
                    f"{p}.metadata",
                    json.dumps({"doc_id": c.doc_id, "doc_version": c.doc_version}),
                )
        with tracer.start_as_current_span("generate") as g:
            g.set_attribute("openinference.span.kind", "LLM")
            g.set_attribute("llm.model_name", t.model)
            g.set_attribute("llm.prompt_template.version", t.prompt)
            g.set_attribute("output.value", t.answer)
        root.set_attribute("output.value", t.answer)
        root.set_attribute("rag.decision", t.decision)
        if t.reason_code:
            root.set_attribute("rag.reason_code", t.reason_code)
        root.set_attribute("rag.topics", list(t.topics))
        root.set_attribute("rag.top_score", t.top_score)
        root.set_attribute("rag.hits_after_filter", len(t.chunks))
        root.set_attribute("rag.answerable", t.decision == "answer")
        root.set_attribute("rag.version.index", t.index)
        return f"{root.get_span_context().trace_id:032x}"


SPANS_PER_TRACE = 3


def count_spans(base_url: str, project: str, *, page: int = 1000) -> int:
    """How many spans Phoenix holds in ``project`` (0 before the project exists)."""
    total, cursor = 0, None
    while True:
        url = f"{base_url}/v1/projects/{project}/spans?sort=id&order=asc&limit={page}"
        if cursor:
            url += f"&cursor={cursor}"
        try:
            with urllib.request.urlopen(url, timeout=60) as r:
                body = json.loads(r.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return 0
            raise
        total += len(body["data"])
        cursor = body.get("next_cursor")
        if not cursor:
            return total


def wait_for_spans(base_url: str, project: str, expected: int, *, timeout: float = 300) -> None:
    """Wait until Phoenix has stored ``expected`` spans in ``project`` (it inserts them in a
    background batch after answering the exporter)."""
    deadline = time.monotonic() + timeout
    got, pause = 0, 0.25
    while time.monotonic() < deadline:
        got = count_spans(base_url, project)
        if got >= expected:
            return
        # counting reads every span: back off, so the poll does not slow Phoenix's inserts
        time.sleep(pause)
        pause = min(pause * 1.5, 5.0)
    raise AssertionError(f"Phoenix holds {got} of {expected} spans in {project} after {timeout} s")
