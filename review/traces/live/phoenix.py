# Long module: the resume proof in the docstring speaks of the page walk, the checkpoints and
# the sync's assembly cutoff together, and the span mapping is what the page walk stages; one
# file keeps the argument next to the code it is about.
"""Sync from a running Arize Phoenix: its REST API's spans, staged and assembled into traces.

:func:`sync_phoenix` reads a project's spans page by page
(``GET /v1/projects/{project}/spans?sort=id&order=asc&limit=...&cursor=...``, an inclusive
cursor), turns each span into a :class:`~review.traces.live.staging.StagedSpan` (one OTLP/JSON
``resourceSpans`` entry, so the OTLP file importer's mapping applies unchanged), stages every
page durably, stores where the next sync resumes on the source, and assembles the traces that
are complete.

Phoenix's span JSON is not OTLP: its ``attributes`` are one object with dotted keys (or nested
objects), the span kind is a field of its own, and the attributes OpenInference defines as JSON
text (``document.metadata``, ``metadata``, ``llm.prompt_template.variables``,
``tool.parameters``) come back parsed and flattened (``retrieval.documents.0.document.metadata
.doc_id``). :func:`otlp_span` folds them back: every nested object is flattened to dotted keys,
the JSON-text attributes become JSON text again, ``span_kind`` becomes
``openinference.span.kind``, and every value becomes a typed OTLP ``AnyValue``.

Resuming: the overlap
---------------------
Phoenix numbers spans as it stores them (the row id, the cursor of ``sort=id``), but two
Phoenix servers on one PostgreSQL commit their batches out of id order: a batch that took id 100
can become visible after one that took 105 was read. A sync that resumed after 105 would never
see 100 (the issue measured 1,852 of 2,400 spans seen). So a sync does not resume after the
highest id it read. It keeps *checkpoints* ``(id M, time e)``: by time ``e`` (our clock) it had
read a span with id ``M``. The resume point moves up to a checkpoint's ``M`` only once a sync
that **started at least the overlap window W after e** has read, from a resume point at or
below, contiguously past ``M``. Everything above the resume point is read again at every sync
(staging drops the duplicates by trace and span id).

Why no span is lost (assumptions: ids are taken in increasing order over time, as a
PostgreSQL sequence or SQLite's rowid does; a span's transaction commits within W of taking its
id; a page read sees what committed before it started): take a span ``x`` never read, and the
first sync ``S`` that resumes above ``x``. Its resume point is some checkpoint's ``M > x`` that
an earlier sync ``P`` moved to: ``P`` started at ``s >= e + W`` and read from a resume point
``<= x`` (``S`` is the first above ``x``) past ``M``, so it read the page holding ``x``'s place
after ``s``. ``x`` took its id before ``M`` did, and ``M`` had its id by ``e`` (it was read
then), so ``x`` committed before ``e + W <= s``: ``P``'s page showed it. A contradiction: every
span that commits within W of taking its id is read. A sync interrupted part-way (Phoenix
down, an exception) moves the resume point only as far as it read contiguously, and the pages
it staged stay staged. Dropping a checkpoint only keeps the resume point lower (more is read
again, nothing lost), which is how their number stays bounded.

Whole traces, too: with a window, a trace is assembled at the end of a sync only when its
newest span was received at least ``max(grace, W)`` before that sync *started*. A span of it
committed late behind the cursor took its id before a span already read, so it committed
within ``W`` after that span was read, before the sync started: the sync read it (the argument
above) and staged it before assembling. (A span that ends after its root is the grace period's
business, as for every source.) Without this wait, a root read in one page could be imported
while a child that took a lower id commits a moment later, behind the cursor (the two-servers
test saw exactly that). The price of a window is a trace imported ``W`` after its last span,
and the spans of the last ``W`` read again at every sync.

The window is :data:`DEFAULT_OVERLAP_SECONDS` (``--overlap``). One Phoenix on SQLite commits in
id order, and ``--overlap 0`` is safe there.

Bounds: every request has a timeout (connect and each read) and an overall deadline, a response
larger than :data:`MAX_RESPONSE_BYTES` is refused (the sync asks again for half as many spans,
down to one: a single span over the limit is an error), and so is JSON that is malformed, nested too
deep or shaped otherwise than Phoenix's. A span whose place is known (its ids and start time
read) but whose content cannot be mapped (an attribute type OTLP has no place for, malformed
events) is staged as refused: its trace is refused with that reason once complete, and the sync
goes on past it (one odd span must not stall the source). A span whose ids or time cannot be
read stops the sync before its page with an error naming it: nothing of that page is staged,
the resume point stays, and the next sync tries again.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import http.client
import json
import math
import queue
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from review.core.errors import InputError, WorkbenchError
from review.core.identity import Actor, Permission, require
from review.core.records import describe, quoted
from review.traces.live import sources
from review.traces.live.deadline import Deadline, opener
from review.traces.live.staging import StagedSpan, assemble, stage

__all__ = [
    "DEFAULT_OVERLAP_SECONDS",
    "DEFAULT_PAGE_SIZE",
    "MAX_RESPONSE_BYTES",
    "Checkpoint",
    "PageWalk",
    "PhoenixClient",
    "PhoenixError",
    "ResponseTooLarge",
    "ResumeState",
    "SpanPage",
    "SyncReport",
    "otlp_span",
    "parse_spans_page",
    "staged_span",
    "sync_phoenix",
]

#: the overlap window W (seconds): a span committed within W of taking its id is never missed
DEFAULT_OVERLAP_SECONDS = 120.0
MAX_OVERLAP_SECONDS = 3600.0
#: spans per page (Phoenix allows 1 to 1000; reading 100,000 spans in pages of 1000 took 41 s
#: where pages of 500 took 56 s)
DEFAULT_PAGE_SIZE = 1000
#: the largest response body read (bytes)
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
#: seconds to connect and for each read, and for a whole response
DEFAULT_TIMEOUT = 30.0
DEFAULT_DEADLINE = 120.0
#: checkpoints kept on the source (older ones are thinned: only more is read again)
MAX_CHECKPOINTS = 256
#: attributes OpenInference defines as JSON text; Phoenix parses them and returns the object
JSON_TEXT_ATTRIBUTES = (
    "document.metadata",
    "llm.prompt_template.variables",
    "tool.parameters",
)
_JSON_TEXT_EXACT = ("metadata",)
_MAX_DEPTH = 64
_MAX_KEY = 1000
_HEX = re.compile(r"[0-9a-fA-F]+")
_STATE_VERSION = 1


class PhoenixError(InputError):
    """Phoenix could not be read or answered something the sync cannot use; nothing of the
    page concerned was staged."""


class ResponseTooLarge(PhoenixError):
    """A response over the size limit (the sync asks again for fewer spans)."""


# ---------------------------------------------------------------------------------------
# the REST client


@dataclass(frozen=True, slots=True)
class SpanPage:
    spans: list[Any]
    next_cursor: str | None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def loads_bounded(body: bytes, what: str) -> Any:
    """Parse JSON from Phoenix, refusing NaN/Infinity and nesting deeper than Python's
    recursion allows with a :class:`PhoenixError` that says ``what`` was malformed."""
    try:
        return json.loads(body, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise PhoenixError(f"{what}: malformed JSON ({str(exc)[:200]})") from exc


def parse_spans_page(doc: Any, what: str = "Phoenix's spans page") -> SpanPage:
    """A ``{"data": [span...], "next_cursor": str|null}`` body, checked for shape."""
    if not isinstance(doc, dict):
        raise PhoenixError(f"{what}: expected a JSON object, got {type(doc).__name__}")
    data = doc.get("data")
    if not isinstance(data, list):
        raise PhoenixError(f"{what}: field data: expected a list of spans")
    nxt = doc.get("next_cursor")
    if nxt is not None and not (isinstance(nxt, str) and 0 < len(nxt) <= 500):
        raise PhoenixError(f"{what}: field next_cursor: expected text or null")
    return SpanPage(data, nxt or None)


@dataclass(frozen=True, slots=True)
class PhoenixClient:
    """Phoenix's REST API at ``base_url`` (``http(s)://host:port``, no trailing slash),
    bounded: ``timeout`` to connect and per read, ``deadline`` per response, at most
    ``max_bytes`` per response."""

    base_url: str
    api_key: str | None = field(default=None, repr=False)
    timeout: float = DEFAULT_TIMEOUT
    deadline: float = DEFAULT_DEADLINE
    max_bytes: int = MAX_RESPONSE_BYTES

    def _read(self, url: str) -> bytes:
        headers = {"Accept": "application/json", "User-Agent": "abstention-workbench"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(url, headers=headers, method="GET")
        clock = Deadline(self.deadline)
        late = f"Phoenix at {self.base_url} did not finish answering within {self.deadline:.0f} s"
        try:
            # the deadline shuts the socket down when it passes: a read of an answer trickling
            # in a byte at a time (each byte within the socket timeout) ends there too
            with clock, opener(clock, url).open(req, timeout=self.timeout) as resp:
                parts: list[bytes] = []
                size = 0
                while True:
                    chunk = resp.read(1 << 16)
                    if not chunk:
                        break
                    size += len(chunk)
                    if size > self.max_bytes:
                        raise ResponseTooLarge(
                            f"Phoenix at {self.base_url}: a response larger than "
                            f"{self.max_bytes:,} bytes was refused"
                        )
                    parts.append(chunk)
            if clock.expired:  # cut off at the deadline: what was read is not the whole answer
                raise PhoenixError(late)
            return b"".join(parts)
        except PhoenixError:
            raise
        except urllib.error.HTTPError as exc:
            raise PhoenixError(self._http_error(exc)) from exc
        except TimeoutError as exc:
            if clock.expired:
                raise PhoenixError(late) from exc
            raise PhoenixError(
                f"Phoenix at {self.base_url} did not answer within {self.timeout:.0f} s"
            ) from exc
        except urllib.error.URLError as exc:
            if clock.expired:
                raise PhoenixError(late) from exc
            if isinstance(exc.reason, TimeoutError):
                raise PhoenixError(
                    f"Phoenix at {self.base_url} did not answer within {self.timeout:.0f} s"
                ) from exc
            raise PhoenixError(
                f"Phoenix at {self.base_url} is not reachable: {exc.reason}"
            ) from exc
        except (OSError, ValueError, http.client.HTTPException) as exc:
            if clock.expired:
                raise PhoenixError(late) from exc
            # a connection reset or closed under a request (Phoenix stopped mid-sync) is the
            # same as a refused one, whichever the timing of the stop made it
            said = " is not reachable:" if isinstance(exc, ConnectionError) else ":"
            raise PhoenixError(f"Phoenix at {self.base_url}{said} {exc}") from exc

    def _http_error(self, exc: urllib.error.HTTPError) -> str:
        try:
            detail = exc.read(2000).decode("utf-8", "replace").strip()
        except OSError:
            detail = ""
        where = f"Phoenix at {self.base_url}"
        if exc.code in (401, 403):
            return f"{where} refused the request (HTTP {exc.code}): check the API key's secret"
        if exc.code == 404:
            return f"{where}: not found (HTTP 404; is the project name right?) {detail[:200]}"
        return f"{where} answered HTTP {exc.code}: {detail[:300]}"

    def get_json(self, path: str, params: Mapping[str, str | int] | None = None) -> Any:
        url = self.base_url + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        return loads_bounded(self._read(url), f"Phoenix at {self.base_url}{path}")

    def spans_page(self, project: str, cursor: str | None, limit: int) -> SpanPage:
        params: dict[str, str | int] = {"sort": "id", "order": "asc", "limit": limit}
        if cursor:
            params["cursor"] = cursor
        path = f"/v1/projects/{urllib.parse.quote(project, safe='')}/spans"
        return parse_spans_page(self.get_json(path, params))


# ---------------------------------------------------------------------------------------
# Phoenix span JSON -> one OTLP/JSON resourceSpans entry


def _any_value(v: Any, key: str) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        if not -(2**63) <= v < 2**63:
            raise PhoenixError(f"attribute {_shown_key(key)}: integer out of the 64-bit range")
        return {"intValue": str(v)}
    if isinstance(v, float):
        if not math.isfinite(v):
            raise PhoenixError(f"attribute {_shown_key(key)}: not a finite number")
        return {"doubleValue": v}
    if isinstance(v, str):
        return {"stringValue": v}
    if isinstance(v, list):
        values = []
        for i, x in enumerate(v):
            if isinstance(x, list | dict) or x is None:
                raise PhoenixError(
                    f"attribute {_shown_key(key)}: item {i} is {_type_name(x)}; an OTLP array "
                    "holds only text, numbers and booleans"
                )
            values.append(_any_value(x, f"{key}.{i}"))
        return {"arrayValue": {"values": values}}
    raise PhoenixError(f"attribute {_shown_key(key)}: unknown attribute type {_type_name(v)}")


#: the most of an attribute key an error quotes (keys may be up to _MAX_KEY long)
_KEY_SHOWN = 120


def _shown_key(key: str) -> str:
    """An attribute key as an error quotes it: control characters escaped, at most
    :data:`_KEY_SHOWN` characters with how many more were left out (the error lands on the
    source and its spans, and a key is the span's text, not the workbench's)."""
    text = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in key[: _KEY_SHOWN + 1])
    if len(key) > _KEY_SHOWN:
        return f"{text[:_KEY_SHOWN]}… ({len(key) - _KEY_SHOWN:,} more characters)"
    return text


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, list):
        return "an array"
    return type(v).__name__


def _flatten(obj: Mapping[str, Any], prefix: str, depth: int) -> Iterator[tuple[str, Any]]:
    """Dotted keys of a nested attribute object; arrays of objects get numeric segments (as
    OpenInference numbers ``retrieval.documents.N``), arrays of scalars stay arrays."""
    if depth > _MAX_DEPTH:
        raise PhoenixError(f"attribute {_shown_key(prefix)}: nested more than {_MAX_DEPTH} deep")
    for k, v in obj.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if len(key) > _MAX_KEY:
            raise PhoenixError(f"attribute {_shown_key(key)}: key longer than {_MAX_KEY}")
        if isinstance(v, dict):
            yield from _flatten(v, key, depth + 1)
        elif isinstance(v, list) and any(isinstance(x, dict) for x in v):
            if not all(isinstance(x, dict) for x in v):
                raise PhoenixError(
                    f"attribute {_shown_key(key)}: an array mixing objects and values"
                )
            for i, x in enumerate(v):
                yield from _flatten(x, f"{key}.{i}", depth + 1)
        else:
            yield key, v


def _json_text_root(key: str) -> str | None:
    """The JSON-text attribute ``key`` lies under (``a.document.metadata`` for
    ``a.document.metadata.doc_id``), or None."""
    for root in _JSON_TEXT_EXACT:
        if key.startswith(root + "."):
            return root
    for suffix in JSON_TEXT_ATTRIBUTES:
        at = key.find(suffix + ".")
        while at >= 0:
            if at == 0 or key[at - 1] == ".":
                return key[: at + len(suffix)]
            at = key.find(suffix + ".", at + 1)
    return None


def _nest(pairs: list[tuple[str, Any]]) -> Any:
    """Rebuild the object a JSON-text attribute held from its flattened sub-keys (a level whose
    keys are exactly 0..n-1 becomes an array again)."""
    tree: dict[str, Any] = {}
    for path, v in pairs:
        node = tree
        *parents, last = path.split(".")
        for p in parents:
            nxt = node.get(p)
            if not isinstance(nxt, dict):
                nxt = {}
                node[p] = nxt
            node = nxt
        node[last] = v
    return _arrays(tree)


def _arrays(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    fixed = {k: _arrays(v) for k, v in node.items()}
    if (
        fixed
        and all(k.isdigit() for k in fixed)
        and sorted(map(int, fixed)) == list(range(len(fixed)))
    ):
        return [fixed[str(i)] for i in range(len(fixed))]
    return fixed


def otlp_attributes(attributes: Any, span_kind: Any) -> list[dict[str, Any]]:
    """Phoenix's ``attributes`` (and ``span_kind``) as an OTLP/JSON attribute list."""
    if attributes is None:
        attributes = {}
    if not isinstance(attributes, dict):
        raise PhoenixError(f"attributes: expected an object, got {_type_name(attributes)}")
    flat: dict[str, Any] = {}
    folded: dict[str, list[tuple[str, Any]]] = {}
    for key, v in _flatten(attributes, "", 0):
        root = _json_text_root(key)
        if root is not None:
            folded.setdefault(root, []).append((key[len(root) + 1 :], v))
        elif key in flat:
            raise PhoenixError(f"attribute {_shown_key(key)}: given twice (dotted and nested)")
        elif v is not None:  # OTLP has no null attribute: an absent one
            flat[key] = v
    for root, pairs in folded.items():
        if root in flat:
            raise PhoenixError(
                f"attribute {_shown_key(root)}: given both as a value and as an object"
            )
        flat[root] = json.dumps(_nest(pairs), ensure_ascii=False, allow_nan=False)
    if span_kind is not None and "openinference.span.kind" not in flat:
        if not isinstance(span_kind, str) or len(span_kind) > 100:
            raise PhoenixError("span_kind: expected text")
        flat["openinference.span.kind"] = span_kind
    return [{"key": k, "value": _any_value(v, k)} for k, v in flat.items()]


def _hex_id(v: Any, length: int, what: str) -> str:
    if not (isinstance(v, str) and len(v) == length and _HEX.fullmatch(v)):
        raise PhoenixError(f"{what}: expected {length} hex digits, got {describe(v)}")
    if set(v) == {"0"}:
        raise PhoenixError(f"{what}: all zeros is not a valid id")
    return v.lower()


def _time(v: Any, what: str) -> dt.datetime:
    if not isinstance(v, str) or len(v) > 64:
        raise PhoenixError(f"{what}: expected an ISO 8601 time")
    try:
        t = dt.datetime.fromisoformat(v)
    except ValueError as exc:
        raise PhoenixError(f"{what}: {quoted(v)} is not an ISO 8601 time") from exc
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return t.astimezone(dt.UTC)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _unix_nano(t: dt.datetime) -> str:
    d = t - _EPOCH
    return str((d.days * 86_400 + d.seconds) * 10**9 + d.microseconds * 1000)


_STATUS = {"OK": 1, "ERROR": 2, "UNSET": 0}


def _events(events: Any, what: str) -> list[dict[str, Any]]:
    if events is None:
        return []
    if not isinstance(events, list):
        raise PhoenixError(f"{what} events: expected a list")
    out = []
    for i, ev in enumerate(events):
        if not isinstance(ev, dict):
            raise PhoenixError(f"{what} event {i}: expected an object")
        item: dict[str, Any] = {"name": str(ev.get("name") or "")[:1000]}
        if ev.get("timestamp") is not None:
            item["timeUnixNano"] = _unix_nano(_time(ev["timestamp"], f"{what} event {i}"))
        item["attributes"] = otlp_attributes(ev.get("attributes"), None)
        out.append(item)
    return out


@dataclass(frozen=True, slots=True)
class MappedSpan:
    """A Phoenix span as staged, with Phoenix's own id for it (its row id and cursor)."""

    staged: StagedSpan
    rowid: int
    cursor: str


def phoenix_rowid(global_id: Any) -> int:
    """The row id in Phoenix's span id (a Relay global id, base64 of ``Span:<n>``)."""
    if not isinstance(global_id, str) or not 0 < len(global_id) <= 200:
        raise PhoenixError(f"span id: expected Phoenix's span id, got {describe(global_id)}")
    try:
        text = base64.b64decode(global_id, validate=True).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise PhoenixError(f"span id {quoted(global_id)}: not a Phoenix span id") from exc
    kind, _, n = text.partition(":")
    if kind != "Span" or not n.isdigit() or len(n) > 19:
        raise PhoenixError(f"span id {quoted(global_id)}: not a Phoenix span id ({quoted(text)})")
    return int(n)


def otlp_span(obj: Any) -> MappedSpan:
    """One span of Phoenix's ``GET /v1/projects/{p}/spans`` as a staged OTLP/JSON entry."""
    if not isinstance(obj, dict):
        raise PhoenixError(f"span: expected an object, got {_type_name(obj)}")
    rowid = phoenix_rowid(obj.get("id"))
    ctx = obj.get("context")
    if not isinstance(ctx, dict):
        raise PhoenixError(f"span {obj.get('id')}: field context: expected an object")
    trace_id = _hex_id(ctx.get("trace_id"), 32, f"span {obj['id']} trace_id")
    span_id = _hex_id(ctx.get("span_id"), 16, f"span {obj['id']} span_id")
    what = f"span {span_id} (trace {trace_id})"
    # a root's parent_id is null; a span without the field is not one Phoenix sent whole
    # (read as a root it would let its trace be imported before its real root arrived)
    if "parent_id" not in obj:
        raise PhoenixError(f"{what} parent_id: missing (null for a root span)")
    parent = obj["parent_id"]
    parent_id = None if parent is None else _hex_id(parent, 16, f"{what} parent_id")
    start = _time(obj.get("start_time"), f"{what} start_time")
    end = _time(obj.get("end_time"), f"{what} end_time")  # Phoenix stores ended spans only
    try:
        if not isinstance(obj.get("attributes"), dict):
            # missing, not an empty object: the span's content (its retrieved documents, its
            # answer) would be lost without a word
            raise PhoenixError(
                f"attributes: expected an object, got {_type_name(obj.get('attributes'))}"
            )
        attrs = otlp_attributes(obj["attributes"], obj.get("span_kind"))
        events = _events(obj.get("events"), what)
    except PhoenixError as exc:
        # its place is known (ids, time): staged as refused, so its trace is refused with
        # this reason and the sync goes on past it instead of stalling the source
        refused = StagedSpan(trace_id, span_id, parent_id, start, {}, refused=f"{what}: {exc}")
        return MappedSpan(refused, rowid, str(obj["id"]))
    name = obj.get("name")
    body: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": name[:1000] if isinstance(name, str) else "",
        "kind": "SPAN_KIND_INTERNAL",
        "startTimeUnixNano": _unix_nano(start),
        "endTimeUnixNano": _unix_nano(end),
        "attributes": attrs,
    }
    if parent_id is not None:
        body["parentSpanId"] = parent_id
    if events:
        body["events"] = events
    code = obj.get("status_code")
    if isinstance(code, str) and code in _STATUS:
        status: dict[str, Any] = {"code": _STATUS[code]}
        msg = obj.get("status_message")
        if isinstance(msg, str) and msg:
            status["message"] = msg[:2000]
        body["status"] = status
    entry = {
        "resource": {"attributes": []},
        "scopeSpans": [{"scope": {"name": "phoenix"}, "spans": [body]}],
    }
    return MappedSpan(StagedSpan(trace_id, span_id, parent_id, start, entry), rowid, str(obj["id"]))


def staged_span(obj: Any) -> StagedSpan:
    return otlp_span(obj).staged


# ---------------------------------------------------------------------------------------
# where a sync resumes


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """By time ``seen_at`` (seconds since the epoch, our clock) a span with row id ``rowid``
    (Phoenix cursor ``cursor``) had been read."""

    rowid: int
    cursor: str
    seen_at: float


@dataclass(frozen=True, slots=True)
class ResumeState:
    """Where the next sync starts reading (``cursor``, inclusive; None: from the first span)
    and the checkpoints not yet old enough to move it. Stored in the source's ``state``."""

    rowid: int | None = None
    cursor: str | None = None
    checkpoints: tuple[Checkpoint, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "version": _STATE_VERSION,
            "resume_rowid": self.rowid,
            "resume_cursor": self.cursor,
            "checkpoints": [[c.rowid, c.cursor, c.seen_at] for c in self.checkpoints],
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any] | None) -> ResumeState:
        if not doc:
            return cls()
        try:
            if doc.get("version") != _STATE_VERSION:
                raise ValueError(f"version {doc.get('version')!r}")
            rowid, cursor = doc.get("resume_rowid"), doc.get("resume_cursor")
            if (rowid is None) != (cursor is None):
                raise ValueError("resume row id and cursor")
            cps = tuple(
                Checkpoint(int(r), str(c), float(t)) for r, c, t in doc.get("checkpoints", [])
            )
            return cls(None if rowid is None else int(rowid), cursor, cps)
        except (TypeError, ValueError) as exc:
            raise InputError(
                f"the source's stored sync position is unreadable ({exc}); remove the source "
                "and add it again to read the project from its start"
            ) from exc

    def seen(self, rowid: int, cursor: str, at: float) -> ResumeState:
        """Record that ``rowid`` had been read by ``at``."""
        last = self.checkpoints[-1] if self.checkpoints else None
        if last is not None and rowid <= last.rowid:
            return self
        cps = (*self.checkpoints, Checkpoint(rowid, cursor, at))
        if len(cps) > MAX_CHECKPOINTS:
            # keep the newest half, and every other one of the older half: a dropped
            # checkpoint can only keep the resume point lower
            half = len(cps) // 2
            cps = (*cps[:half:2], *cps[half:])
        return ResumeState(self.rowid, self.cursor, cps)

    def advance(self, started_at: float, read_through: int | None, window: float) -> ResumeState:
        """After a sync that started at ``started_at`` from this state's resume point and
        read contiguously through row id ``read_through``: move the resume point to the
        highest checkpoint recorded at least ``window`` before the start that it read past."""
        if read_through is None:
            return self
        best: Checkpoint | None = None
        for c in self.checkpoints:
            if c.seen_at + window <= started_at and c.rowid <= read_through:
                best = c
        if best is None or (self.rowid is not None and best.rowid <= self.rowid):
            return self
        rest = tuple(c for c in self.checkpoints if c.rowid > best.rowid)
        return ResumeState(best.rowid, best.cursor, rest)


# ---------------------------------------------------------------------------------------
# the sync


class PageWalk:
    """One sync's walk through the pages, from the stored resume point: what to ask for next,
    and the resume state after each page (the part of the sync the proof above is about; the
    tests drive it against a simulated store with late commits)."""

    def __init__(self, state: ResumeState, started_at: float, window: float) -> None:
        self.state = state
        self.started_at = started_at
        self.window = window
        self.cursor = state.cursor
        self.read_through: int | None = None

    def page_read(
        self, rows: list[tuple[int, str]], next_cursor: str | None, seen_at: float
    ) -> bool:
        """Record a page (its spans' row ids and cursors, in order; read by ``seen_at``);
        return whether there is a next page (``self.cursor`` then asks for it)."""
        if rows:
            top = max(rows)
            self.state = self.state.seen(top[0], top[1], seen_at)
            self.read_through = max(self.read_through or 0, top[0])
        if next_cursor is None:
            self.read_through = 2**63  # read to the end
        self.state = self.state.advance(self.started_at, self.read_through, self.window)
        self.cursor = next_cursor
        return next_cursor is not None


@dataclass(slots=True)
class SyncReport:
    source_id: int
    pages: int = 0
    spans_read: int = 0
    added: int = 0
    duplicates: int = 0
    late: int = 0
    imported: int = 0
    skipped: int = 0
    rejected: int = 0
    waiting_spans: int = 0
    error: str | None = None
    reasons: dict[str, str] = field(default_factory=dict)


def sync_phoenix(
    engine: Engine,
    actor: Actor,
    source_id: int,
    *,
    client: PhoenixClient | None = None,
    page_size: int = DEFAULT_PAGE_SIZE,
    overlap_seconds: float = DEFAULT_OVERLAP_SECONDS,
    grace_seconds: float | None = None,
    max_pages: int | None = None,
    after_page: Callable[[SyncReport], None] | None = None,
    clock: Callable[[], float] = time.time,
) -> SyncReport:
    """Read the source's Phoenix project from where the last sync resumes to its end, stage
    every page, store the new resume point, and assemble what is complete.

    A Phoenix error (down, slow, malformed, a span that cannot be mapped) is recorded on the
    source and returned in the report's ``error`` after what was read before it is stored
    and assembled; any other exception propagates after the same. ``client`` defaults to one
    for the source's URL with its secret (:func:`sources.secret_value`). ``max_pages`` stops
    early (the next sync goes on). ``after_page`` is called after each stored page."""
    require(actor, Permission.import_traces)  # before anything is staged
    src = sources.get_source(engine, source_id)
    if src.kind != "phoenix":
        raise InputError(f"source {src.name!r} is a {src.kind} source, not phoenix")
    if src.status != "active":
        raise InputError(f"source {src.name!r} is paused; resume it to sync")
    if not 1 <= page_size <= 1000:
        raise InputError("page size: 1 to 1000 spans (Phoenix's limit)")
    if not (math.isfinite(overlap_seconds) and 0 <= overlap_seconds <= MAX_OVERLAP_SECONDS):
        raise InputError(f"overlap: 0 to {MAX_OVERLAP_SECONDS:.0f} seconds")
    if client is None:
        client = PhoenixClient(src.url, sources.secret_value(src.secret_name))
    walk = PageWalk(ResumeState.from_json(src.state.get("phoenix")), clock(), overlap_seconds)
    report = SyncReport(source_id)
    grace = src.grace_seconds if grace_seconds is None else grace_seconds

    def cutoff(at: float) -> float:
        """The newest receive time a trace may have to be imported at ``at`` (module docs:
        with a window, also the window before the sync started)."""
        if overlap_seconds > 0:
            return min(at - grace, walk.started_at - overlap_seconds)
        return at - grace

    pages = _Prefetch(client, src.project, walk.cursor, page_size, max_pages, clock)
    try:
        for page, seen_at in pages:
            mapped = [otlp_span(s) for s in page.spans]
            res = stage(engine, source_id, [m.staged for m in mapped])
            report.pages += 1
            report.spans_read += len(mapped)
            report.added += res.added
            report.duplicates += res.duplicates
            report.late += res.late
            more = walk.page_read([(m.rowid, m.cursor) for m in mapped], page.next_cursor, seen_at)
            # the pages staged so far are durable: store the checkpoints and the resume
            # point they allow, so an interrupted sync keeps its progress
            _store(engine, source_id, src.state, walk.state, None)
            if after_page is not None:
                after_page(report)
            if not more:
                break
    except WorkbenchError as exc:  # Phoenix down, slow, malformed; a span staging refused
        report.error = str(exc)
    finally:
        pages.close()
        _store(engine, source_id, src.state, walk.state, report.error)
        # assembled once every page is staged, not page by page: while a project is read
        # from its start, a trace's spans can lie any number of pages apart (Phoenix numbers
        # them as its exporters' batches arrive), and only the end of the read shows them all
        at = clock()
        done = assemble(
            engine,
            actor,
            source_id,
            grace_seconds=at - cutoff(at),
            now=dt.datetime.fromtimestamp(at, dt.UTC),
        )
        report.imported = done.imported
        report.skipped = done.skipped
        report.rejected = done.rejected
        report.waiting_spans = done.waiting_spans
        report.reasons = dict(done.reasons)
    return report


class _Prefetch:
    """The pages of one sync, each fetched while the one before it is staged: a thread asks
    Phoenix for the next page as soon as it has the cursor, holding at most one page ahead
    (memory stays bounded by two pages). Iterating yields ``(page, read_at)``; an error of
    the fetch is raised where that page would have come."""

    def __init__(
        self,
        client: PhoenixClient,
        project: str,
        cursor: str | None,
        limit: int,
        max_pages: int | None,
        clock: Callable[[], float],
    ) -> None:
        self._q: queue.Queue[tuple[SpanPage, float] | BaseException | None] = queue.Queue(1)
        self._stop = threading.Event()
        self._args = (client, project, cursor, limit, max_pages, clock)
        self._thread = threading.Thread(target=self._run, name="phoenix-prefetch", daemon=True)
        self._thread.start()

    def _put(self, item: tuple[SpanPage, float] | BaseException | None) -> bool:
        while not self._stop.is_set():
            try:
                self._q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        client, project, cursor, limit, max_pages, clock = self._args
        n = 0
        try:
            while max_pages is None or n < max_pages:
                page = _page(client, project, cursor, limit)
                n += 1
                if not self._put((page, clock())) or page.next_cursor is None:
                    break
                cursor = page.next_cursor
        except BaseException as exc:  # handed to the consumer, raised there
            self._put(exc)
            return
        self._put(None)

    def __iter__(self) -> Iterator[tuple[SpanPage, float]]:
        while True:
            item = self._q.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def close(self) -> None:
        """Stop fetching: a page in flight is dropped when it arrives (the thread ends then,
        within the client's deadline; it holds nothing the sync needs)."""
        self._stop.set()
        self._thread.join(timeout=1.0)


def _page(client: PhoenixClient, project: str, cursor: str | None, limit: int) -> SpanPage:
    """A page of at most ``limit`` spans: fewer when Phoenix's answer is over the size limit
    (large spans), down to one."""
    while True:
        try:
            return client.spans_page(project, cursor, limit)
        except ResponseTooLarge:
            if limit == 1:
                raise
            limit //= 2


def _store(
    engine: Engine,
    source_id: int,
    old: Mapping[str, Any],
    state: ResumeState,
    error: str | None,
) -> None:
    doc = {**old, "phoenix": state.to_json()}
    sources.record_sync(engine, source_id, cursor=state.cursor, state=doc)
    if error is not None:
        sources.record_error(engine, source_id, error)
