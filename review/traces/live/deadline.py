"""A whole HTTP request's time limit, for the clients that talk to a trace store (the Phoenix
sync's reads, the verdict push's writes).

A socket timeout bounds each read only: an answer trickling in a byte at a time never ends, and
``read(n)`` waits for all n bytes. :class:`Deadline` shuts the connection's socket down once
its seconds have passed since the request started, so the request fails there; :func:`opener`
builds the urllib opener whose connections it watches (without proxies for a loopback address,
so a proxy set in the environment cannot stand between the workbench and a local Phoenix).
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import socket
import threading
import urllib.parse
import urllib.request

__all__ = ["Deadline", "is_loopback", "opener"]


class Deadline:
    """A whole request's time limit: a socket timeout bounds each read only, so an answer
    trickling in a byte at a time would never end; when ``seconds`` have passed since the
    request started, the connection's socket is shut down and the request fails."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def watch(self, sock: socket.socket | None) -> None:
        if sock is None:
            return
        with self._lock:
            self._socks.append(sock)
            if self.expired:
                _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._socks:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class _DeadlineHTTP(urllib.request.HTTPHandler):
    def __init__(self, clock: Deadline) -> None:
        super().__init__()
        self.clock = clock

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        clock = self.clock

        class Connection(http.client.HTTPConnection):
            def connect(self) -> None:
                super().connect()
                clock.watch(self.sock)

        return self.do_open(Connection, req)


class _DeadlineHTTPS(urllib.request.HTTPSHandler):
    def __init__(self, clock: Deadline) -> None:
        super().__init__()
        self.clock = clock

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        clock = self.clock

        class Connection(http.client.HTTPSConnection):
            def connect(self) -> None:
                super().connect()
                clock.watch(self.sock)

        return self.do_open(Connection, req, context=self._context)  # type: ignore[attr-defined]


def is_loopback(url: str) -> bool:
    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def opener(clock: Deadline, url: str) -> urllib.request.OpenerDirector:
    """An opener whose connections ``clock`` shuts down at its deadline (no proxy for a
    loopback ``url``)."""
    handlers: list[urllib.request.BaseHandler] = [
        _DeadlineHTTP(clock),
        _DeadlineHTTPS(clock),
        *([urllib.request.ProxyHandler({})] if is_loopback(url) else []),
    ]
    return urllib.request.build_opener(*handlers)
