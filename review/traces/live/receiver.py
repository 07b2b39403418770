"""The OTLP/HTTP trace receiver: ``POST /v1/traces`` from an OpenTelemetry SDK or collector.

An exporter points at ``http://127.0.0.1:4318/v1/traces`` (the default OTLP/HTTP port) and
sends ``ExportTraceServiceRequest`` bodies in protobuf (``application/x-protobuf``) or OTLP/JSON
(``application/json``), optionally gzip-compressed. Each request is handled so that what is
acknowledged is stored:

1. a bearer token, when one is configured, is checked first (401, constant-time comparison;
   the token is never logged or echoed);
2. a content type other than the two above, or a content encoding other than gzip, is 415;
3. more requests in flight than the receiver holds in memory is 429 with ``Retry-After``;
4. a body larger than ``max_body_bytes`` on the wire, or larger than ``max_decoded_bytes``
   once decompressed (a gzip bomb stops at the bound, never inflated whole), is 413, and one
   that takes longer than ``body_timeout_s`` to arrive is 408;
5. the body is decoded (:mod:`review.traces.live.otlp_in`): unreadable is 400 with the reason,
   spans that cannot be staged are rejected alone and reported in ``partial_success``;
6. the spans are staged in ONE transaction (:func:`review.traces.live.staging.stage`,
   de-duplicated by trace and span id, so an exporter's retry stores nothing twice), and only
   after it committed is the 200 with an ``ExportTraceServiceResponse`` sent, in the
   request's encoding; a busy or unreachable database is 503 with ``Retry-After`` (the
   exporter retries).

Errors carry a ``google.rpc.Status`` body in the request's encoding, as OTLP/HTTP asks. A
background thread assembles the staged spans into traces every few seconds
(:func:`review.traces.live.staging.assemble`), importing those whose grace period has passed.

Every request answered is counted per HTTP status (:mod:`review.traces.live.tally`: requests,
the accepted ones' spans, the last request's time) and the counts are added to the source's
rows every ``flush_every`` seconds by another background thread, and once more when the
receiver stops: the Traces page shows them.

Threads and memory are bounded: the HTTP server (uvicorn, one event loop) admits at most
``max_in_flight`` requests past the headers, each holding at most ``max_body_bytes`` +
``max_decoded_bytes``; decoding and storing run in a pool of ``workers`` threads.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import signal
import socket
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import uvicorn
from google.protobuf import json_format
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceResponse,
)
from sqlalchemy import Engine, event
from sqlalchemy.exc import DBAPIError, IntegrityError
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from review.core.errors import InputError
from review.core.identity import Actor
from review.traces.live import sources, staging, tally
from review.traces.live.otlp_in import Decoded, PayloadError, decode_json, decode_protobuf
from storage.db import make_engine

__all__ = ["Receiver", "ReceiverConfig", "gunzip_bounded"]

log = logging.getLogger(__name__)

PROTOBUF = "application/x-protobuf"
JSON = "application/json"

# google.rpc.Code values for the Status bodies
_CODES = {400: 3, 401: 16, 408: 4, 413: 8, 415: 3, 429: 8, 500: 13, 503: 14}


@dataclass(frozen=True, slots=True)
class ReceiverConfig:
    """How the receiver listens and what it holds; the defaults suit one team's exporters."""

    host: str = "127.0.0.1"
    port: int = 4318
    token: str | None = None
    max_body_bytes: int = 8 * 1024 * 1024
    max_decoded_bytes: int = 64 * 1024 * 1024
    max_in_flight: int = 4
    workers: int = 2
    retry_after_s: int = 2
    #: seconds a trace waits after its newest span before it is imported (None: staging's)
    grace_seconds: float | None = None
    #: seconds between two assembly passes (None: no background assembly)
    assemble_every: float | None = 5.0
    #: how long one write waits for a busy SQLite database before the request gets a 503
    busy_timeout_ms: int = 1000
    #: seconds a client may take to send a body (a trickling client holds a slot no longer)
    body_timeout_s: float = 60.0
    #: seconds between two writes of the request counts (None: only when the receiver stops)
    flush_every: float | None = 2.0


class TooLarge(ValueError):
    """A body over a size bound (HTTP 413)."""


def gunzip_bounded(data: bytes, limit: int) -> bytes:
    """``data`` gunzipped (several members allowed), refusing output beyond ``limit`` bytes
    without producing it (a gzip bomb costs at most ``limit`` bytes of memory)."""
    out: list[bytes] = []
    size = 0
    rest = data
    while True:
        d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            chunk = d.decompress(rest, limit - size + 1)
        except zlib.error as exc:
            raise PayloadError(f"the gzip body cannot be decompressed ({exc})") from None
        size += len(chunk)
        if size > limit or d.unconsumed_tail:
            raise TooLarge(f"the body decompresses to more than {limit:,} bytes")
        out.append(chunk)
        if not d.eof:
            raise PayloadError("the gzip body is truncated")
        rest = d.unused_data
        if not rest:
            return b"".join(out)


def _content_kind(header: str | None) -> str | None:
    """``protobuf``, ``json`` or None from a Content-Type header (parameters ignored)."""
    mime = (header or "").split(";", 1)[0].strip().lower()
    if mime == PROTOBUF:
        return "protobuf"
    if mime == JSON:
        return "json"
    return None


def _authorized(header: str | None, token: str) -> bool:
    scheme, _, given = (header or "").strip().partition(" ")
    if scheme.lower() != "bearer":
        # compare anyway, so a missing header takes as long as a wrong one
        hmac.compare_digest(b"", token.encode())
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


def _own_engine(engine: Engine, busy_timeout_ms: int) -> Engine:
    """An engine of the receiver's own on the same database, whose SQLite connections wait
    ``busy_timeout_ms`` for a lock (the receiver answers 503 and the exporter retries, rather
    than holding the request for the app's long busy timeout)."""
    engine = make_engine(engine.url.render_as_string(hide_password=False))
    if engine.dialect.name == "sqlite":

        @event.listens_for(engine, "connect")
        def _busy(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            cur.close()

    return engine


class Receiver:
    """One receiver for one ``otlp`` source: an ASGI app, its server, its assembly loop."""

    def __init__(
        self,
        engine: Engine,
        actor: Actor,
        source_id: int,
        config: ReceiverConfig | None = None,
    ) -> None:
        self.config = config or ReceiverConfig()
        self.engine = _own_engine(engine, self.config.busy_timeout_ms)
        self.actor = actor
        self.source_id = source_id
        self.in_flight = 0
        #: why spans cannot be stored now (a paused or removed source), else None
        self.unavailable: str | None = None
        self.stats = dict.fromkeys(
            ("requests", "spans", "added", "duplicates", "rejected", "unavailable"), 0
        )
        self._stats_lock = threading.Lock()
        #: requests answered per status, not yet added to the database
        self.tally = tally.Tally()
        self._limiter: anyio.CapacityLimiter | None = None
        self._stop = threading.Event()
        self._server: uvicorn.Server | None = None
        self._threads: list[threading.Thread] = []
        self.app = Starlette(routes=[Route("/v1/traces", self._traces, methods=["POST"])])

    # -- HTTP --------------------------------------------------------------------------

    def _refused(
        self, status: int, kind: str | None, message: str, retry: bool = False
    ) -> tuple[Response, int]:
        return self._reply(status, kind, message, retry), 0

    def _reply(self, status: int, kind: str | None, message: str, retry: bool = False) -> Response:
        headers = {"Retry-After": str(self.config.retry_after_s)} if retry else {}
        if status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="workbench"'
        st = status_pb2.Status(code=_CODES.get(status, 2), message=message)
        if kind == "protobuf":
            return Response(st.SerializeToString(), status, headers, media_type=PROTOBUF)
        if kind == "json":
            body = json_format.MessageToJson(st, indent=None)
            return Response(body, status, headers, media_type=JSON)
        return Response(message + "\n", status, headers, media_type="text/plain")

    def _success(self, kind: str, decoded: Decoded) -> Response:
        resp = ExportTraceServiceResponse()
        msg = decoded.message()
        if decoded.rejected or msg:
            resp.partial_success.CopyFrom(
                ExportTracePartialSuccess(rejected_spans=decoded.rejected, error_message=msg)
            )
        if kind == "protobuf":
            return Response(resp.SerializeToString(), 200, media_type=PROTOBUF)
        return Response(json_format.MessageToJson(resp, indent=None), 200, media_type=JSON)

    async def _read_body(self, request: Request) -> bytes:
        limit = self.config.max_body_bytes
        length = request.headers.get("content-length")
        if length is not None and (not length.strip().isdigit() or int(length) > limit):
            raise TooLarge(f"the body is larger than {limit:,} bytes")
        parts: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise TooLarge(f"the body is larger than {limit:,} bytes")
            parts.append(chunk)
        return b"".join(parts)

    async def _traces(self, request: Request) -> Response:
        try:
            response, spans = await self._answer(request)
        except Exception:
            self.tally.count(500)  # Starlette answers 500
            raise
        self.tally.count(response.status_code, spans)
        return response

    async def _answer(self, request: Request) -> tuple[Response, int]:
        """The response to one request and, when accepted, the number of its spans."""
        kind = _content_kind(request.headers.get("content-type"))
        token = self.config.token
        if token is not None and not _authorized(request.headers.get("authorization"), token):
            return self._refused(401, kind, "a valid bearer token is required")
        if kind is None:
            return self._refused(
                415, None, f"Content-Type must be {PROTOBUF} or {JSON} (OTLP/HTTP traces)"
            )
        encoding = request.headers.get("content-encoding", "").strip().lower()
        if encoding not in ("", "identity", "gzip"):
            return self._refused(415, kind, "Content-Encoding must be gzip or none")
        if self.in_flight >= self.config.max_in_flight:
            return self._refused(429, kind, "too many requests in flight; retry later", retry=True)
        self.in_flight += 1
        try:
            try:
                with anyio.fail_after(self.config.body_timeout_s):
                    body = await self._read_body(request)
            except TooLarge as exc:
                return self._refused(413, kind, str(exc))
            except TimeoutError:
                return self._refused(408, kind, "the body did not arrive in time")
            except ClientDisconnect:
                return Response(status_code=400), 0
            if self._limiter is None:
                self._limiter = anyio.CapacityLimiter(self.config.workers)
            return await anyio.to_thread.run_sync(
                self._handle, body, kind, encoding == "gzip", limiter=self._limiter
            )
        finally:
            self.in_flight -= 1

    def _handle(self, body: bytes, kind: str, gzipped: bool) -> tuple[Response, int]:
        """Decode and stage one request's body (in a worker thread); the response to send and
        the number of spans it accepted."""
        try:
            if gzipped:
                body = gunzip_bounded(body, self.config.max_decoded_bytes)
            elif len(body) > self.config.max_decoded_bytes:
                raise TooLarge(f"the body is larger than {self.config.max_decoded_bytes:,} bytes")
            decoded = decode_protobuf(body) if kind == "protobuf" else decode_json(body)
        except TooLarge as exc:
            return self._refused(413, kind, str(exc))
        except PayloadError as exc:
            return self._refused(400, kind, f"malformed OTLP trace export: {exc}")
        if len(decoded.spans) > staging.MAX_STAGE:
            return self._refused(413, kind, f"at most {staging.MAX_STAGE:,} spans in one request")
        if self.unavailable is not None:
            return self._refused(503, kind, self.unavailable, retry=True)
        if decoded.spans:
            log.info("staging %d spans (%s)", len(decoded.spans), kind)
            try:
                result = staging.stage(self.engine, self.source_id, decoded.spans)
            except DBAPIError as exc:
                log.warning("spans not stored, the database answered: %s", exc.orig or exc)
                with self._stats_lock:
                    self.stats["unavailable"] += 1
                return self._refused(
                    503, kind, "the database is busy or unavailable; nothing was stored", True
                )
            except InputError as exc:  # the source was removed meanwhile
                return self._refused(503, kind, f"nothing was stored: {exc}", retry=True)
        else:
            result = staging.StageResult(added=0, duplicates=0, late=0)
        with self._stats_lock:
            self.stats["requests"] += 1
            self.stats["spans"] += len(decoded.spans)
            self.stats["added"] += result.added
            self.stats["duplicates"] += result.duplicates
            self.stats["rejected"] += decoded.rejected
        return self._success(kind, decoded), len(decoded.spans)

    # -- assembly ----------------------------------------------------------------------

    def assemble_once(self) -> staging.AssembleResult | None:
        """One assembly pass, recorded on the source (its last sync, or the error, which the
        next pass retries); a paused or removed source stops the receiver storing spans."""
        try:
            src = sources.get_source(self.engine, self.source_id)
        except InputError as exc:
            self.unavailable = f"the trace source is gone ({exc})"
            return None
        except DBAPIError:
            return None  # busy: the next pass
        if src.status != "active":
            self.unavailable = f"the trace source {src.name!r} is {src.status}"
            return None
        self.unavailable = None
        try:
            result = staging.assemble(
                self.engine, self.actor, self.source_id, grace_seconds=self.config.grace_seconds
            )
        except Exception as exc:
            log.exception("assembling staged spans failed; the next pass retries")
            with contextlib.suppress(Exception):
                sources.record_error(self.engine, self.source_id, f"assembling failed: {exc}")
            return None
        with contextlib.suppress(DBAPIError):
            sources.record_sync(self.engine, self.source_id)
        return result

    def _assemble_loop(self, every: float) -> None:
        while not self._stop.wait(every):
            self.assemble_once()

    # -- request counts ----------------------------------------------------------------

    def flush_counts(self) -> bool:
        """Add the requests counted since the last flush to the source's figures; a database
        that refuses keeps them for the next flush. Whether anything was written."""
        try:
            return tally.flush(self.engine, self.source_id, self.tally)
        except IntegrityError:  # the source was removed: its counts go with it
            self.tally.take()
            return False
        except DBAPIError as exc:
            log.warning("request counts kept for the next flush: %s", exc.orig or exc)
            return False

    def _flush_loop(self, every: float) -> None:
        while not self._stop.wait(every):
            self.flush_counts()

    # -- running -----------------------------------------------------------------------

    def bind(self) -> socket.socket:
        """A listening socket on the configured host and port (port 0: a free one)."""
        family, kind, proto, _, addr = socket.getaddrinfo(
            self.config.host, self.config.port, type=socket.SOCK_STREAM
        )[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(128)
        return sock

    def _make_server(self) -> uvicorn.Server:
        cfg = uvicorn.Config(
            self.app,
            lifespan="off",
            access_log=False,
            log_level="warning",
            server_header=False,
            timeout_keep_alive=15,
            # a backstop past the receiver's own 429: uvicorn answers 503 beyond it
            limit_concurrency=self.config.max_in_flight * 4 + 16,
            backlog=128,
        )
        return uvicorn.Server(cfg)

    def _start_background(self) -> None:
        loops = (
            (self._assemble_loop, self.config.assemble_every, "otlp-assemble"),
            (self._flush_loop, self.config.flush_every, "otlp-counts"),
        )
        for target, every, name in loops:
            if every is not None:
                t = threading.Thread(target=target, args=(every,), name=name, daemon=True)
                t.start()
                self._threads.append(t)

    def serve(
        self, sock: socket.socket | None = None, ready: Callable[[int], None] | None = None
    ) -> None:
        """Serve until interrupted (SIGINT/SIGTERM in the main thread), assembling meanwhile.

        Either signal ends it cleanly: the request counts are flushed and it returns (uvicorn
        raises the signal again once it has shut down; the handlers here take it, where the
        default SIGTERM handler would end the process before the last flush)."""
        sock = sock or self.bind()
        if ready is not None:
            ready(sock.getsockname()[1])
        server = self._server = self._make_server()

        def stop(_signum: int, _frame: Any) -> None:
            server.should_exit = True

        previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        self._start_background()
        try:
            server.run(sockets=[sock])
        finally:
            self._stop.set()
            sock.close()
            self.flush_counts()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def start(self, timeout: float = 60.0) -> int:
        """Serve in a background thread (tests, benchmarks); the port it listens on."""
        sock = self.bind()
        port: int = sock.getsockname()[1]
        self._server = self._make_server()
        server = self._server
        t = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="otlp-receiver", daemon=True
        )
        t.start()
        self._threads.append(t)
        deadline = time.monotonic() + timeout
        while not server.started:
            if not t.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the OTLP receiver did not start")
            time.sleep(0.02)
        self._start_background()
        return port

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.should_exit = True
        for t in self._threads:
            t.join(timeout=30)
        self._threads.clear()
        self.flush_counts()
        self.engine.dispose()
