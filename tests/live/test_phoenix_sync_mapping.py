"""Phoenix span JSON -> staged OTLP spans, the REST client's bounds, and the resume overlap.

The recorded pages under ``data/`` are real responses of Phoenix 20.26.1's
``GET /v1/projects/{project}/spans`` for ``rag_traces(3, seed=7)`` sent with the OpenTelemetry
SDK (``tests/live/phoenix_server.py``), 5 spans a page.
"""

from __future__ import annotations

import contextlib
import http.server
import io
import json
import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from review.traces.formats.otlp import iter_otlp_jsonl
from review.traces.live.phoenix import (
    MAX_CHECKPOINTS,
    PageWalk,
    PhoenixClient,
    PhoenixError,
    ResponseTooLarge,
    ResumeState,
    loads_bounded,
    otlp_attributes,
    otlp_span,
    parse_spans_page,
    phoenix_rowid,
)
from review.traces.model import ParsedTrace
from tests.live.phoenix_server import rag_traces

DATA = Path(__file__).parent / "data"


def recorded_spans() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n in (1, 2):
        page = parse_spans_page(json.loads((DATA / f"phoenix_spans_page{n}.json").read_bytes()))
        out.extend(page.spans)
    return out


def as_traces(spans: list[dict[str, Any]]) -> list[Any]:
    entries = [otlp_span(s).staged.entry for s in spans]
    line = json.dumps({"resourceSpans": entries})
    items = list(iter_otlp_jsonl(io.StringIO(line + "\n"), "phoenix"))
    assert all(isinstance(i, ParsedTrace) for i in items), items
    return [i.trace for i in items if isinstance(i, ParsedTrace)]


def test_recorded_phoenix_pages_map_to_the_traces_that_were_sent() -> None:
    sent = rag_traces(3, seed=7)
    got = sorted(as_traces(recorded_spans()), key=lambda t: t.query)
    assert len(got) == 3
    for want, t in zip(sent, got, strict=True):
        assert t.query == want.query
        assert t.rewritten_query == want.rewritten_query
        assert [(c.chunk_id, c.doc_id, c.doc_version, c.score, c.text) for c in t.chunks] == [
            (c.chunk_id, c.doc_id, c.doc_version, c.score, c.text) for c in want.chunks
        ]
        assert [c.rank for c in t.chunks] == list(range(1, len(want.chunks) + 1))
        assert (t.decision, t.reason_code, t.answer_text) == (
            want.decision,
            want.reason_code,
            want.answer,
        )
        assert t.topics == want.topics
        assert t.versions == {"model": want.model, "prompt": want.prompt, "index": want.index}


def test_a_span_keeps_its_ids_times_kind_and_phoenix_position() -> None:
    raw = recorded_spans()[0]
    m = otlp_span(raw)
    assert m.rowid == phoenix_rowid(raw["id"]) and m.cursor == raw["id"]
    assert m.staged.trace_id == raw["context"]["trace_id"]
    assert m.staged.span_id == raw["context"]["span_id"]
    assert m.staged.parent_id == raw["parent_id"]
    assert m.staged.start.isoformat() == raw["start_time"]
    (body,) = m.staged.entry["scopeSpans"][0]["spans"]
    attrs = {a["key"]: a["value"] for a in body["attributes"]}
    assert attrs["openinference.span.kind"] == {"stringValue": raw["span_kind"]}
    meta = attrs["retrieval.documents.0.document.metadata"]["stringValue"]
    assert json.loads(meta) == {"doc_id": "POL-0-0", "doc_version": 1}


def test_nested_attribute_objects_flatten_back_to_dotted_keys() -> None:
    nested = {
        "retrieval": {
            "documents": [
                {"document": {"id": "c1", "score": 0.5, "metadata": {"doc_id": "D", "v": [1, 2]}}},
                {"document": {"id": "c2", "content": "text"}},
            ]
        },
        "rag": {"decision": "answer", "topics": ["a", "b"], "answerable": True},
        "llm": {"prompt_template": {"variables": {"q": "x", "items": [{"k": 1}, {"k": 2}]}}},
        "metadata": {"topics": ["refunds"]},
        "input": {"value": "q?"},
        "absent": None,
    }
    got = {a["key"]: a["value"] for a in otlp_attributes(nested, "RETRIEVER")}
    assert got == {
        "retrieval.documents.0.document.id": {"stringValue": "c1"},
        "retrieval.documents.0.document.score": {"doubleValue": 0.5},
        "retrieval.documents.0.document.metadata": {
            "stringValue": json.dumps({"doc_id": "D", "v": [1, 2]})
        },
        "retrieval.documents.1.document.id": {"stringValue": "c2"},
        "retrieval.documents.1.document.content": {"stringValue": "text"},
        "rag.decision": {"stringValue": "answer"},
        "rag.topics": {"arrayValue": {"values": [{"stringValue": "a"}, {"stringValue": "b"}]}},
        "rag.answerable": {"boolValue": True},
        "llm.prompt_template.variables": {
            "stringValue": json.dumps({"q": "x", "items": [{"k": 1}, {"k": 2}]})
        },
        "metadata": {"stringValue": json.dumps({"topics": ["refunds"]})},
        "input.value": {"stringValue": "q?"},
        "openinference.span.kind": {"stringValue": "RETRIEVER"},
    }


def test_dotted_and_nested_forms_give_the_same_attributes() -> None:
    dotted = {
        "retrieval.documents.0.document.id": "c1",
        "retrieval.documents.0.document.metadata.doc_id": "D",
        "retrieval.documents.0.document.metadata.doc_version": 3,
    }
    nested = {
        "retrieval": {
            "documents": [{"document": {"id": "c1", "metadata": {"doc_id": "D", "doc_version": 3}}}]
        }
    }
    assert otlp_attributes(dotted, None) == otlp_attributes(nested, None)


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        ({"a": [[1, 2]]}, "attribute a: item 0 is an array"),
        ({"a": [1, None]}, "attribute a: item 1 is null"),
        ({"a": [{"x": 1}, 2]}, "attribute a: an array mixing objects and values"),
        ({"a": 2**70}, "attribute a: integer out of the 64-bit range"),
        ({"metadata": "{}", "metadata.x": 1}, "given both as a value and as an object"),
        ({"a.b": 1, "a": {"b": 2}}, "attribute a.b: given twice"),
        ("not an object", "attributes: expected an object, got str"),
        ([1, 2], "attributes: expected an object, got an array"),
    ],
)
def test_attributes_otlp_has_no_place_for_are_refused_by_name(
    attributes: Any, message: str
) -> None:
    with pytest.raises(PhoenixError, match=message.replace("(", r"\(").replace(")", r"\)")):
        otlp_attributes(attributes, None)


@pytest.mark.parametrize("length", [119, 120, 121, 999])
def test_an_error_quotes_at_most_120_characters_of_a_key_and_escapes_control_characters(
    length: int,
) -> None:
    key = ("\x1b[31m" + "k" * length)[:length]
    with pytest.raises(PhoenixError) as err:
        otlp_attributes({key: 2**70}, None)
    said = str(err.value)
    assert "\x1b" not in said and "\\x1b" in said  # the escape character shown, not sent
    assert len(said) < 120 + 100
    assert ("more characters" in said) is (length > 120)


def test_deeply_nested_attributes_are_refused_not_recursed_forever() -> None:
    deep: dict[str, Any] = {"leaf": 1}
    for _ in range(5000):
        deep = {"k": deep}
    with pytest.raises(PhoenixError, match="nested more than"):
        otlp_attributes(deep, None)


def _span(**over: Any) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads(json.dumps(recorded_spans()[0]))
    for k, v in over.items():
        if k in ("trace_id", "span_id"):
            raw["context"][k] = v
        else:
            raw[k] = v
    return raw


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"id": "not base64!"}, "not a Phoenix span id"),
        ({"id": "VHJhY2U6MQ=="}, "not a Phoenix span id"),  # Trace:1
        ({"id": 7}, "expected Phoenix's span id"),
        ({"trace_id": "abc"}, "trace_id: expected 32 hex digits"),
        ({"trace_id": "0" * 32}, "all zeros"),
        ({"span_id": "zz" * 8}, "span_id: expected 16 hex digits"),
        ({"parent_id": "123"}, "parent_id: expected 16 hex digits"),
        ({"start_time": "yesterday"}, "is not an ISO 8601 time"),
        ({"start_time": None}, "start_time: expected an ISO 8601 time"),
        ({"context": None}, "field context: expected an object"),
    ],
)
def test_malformed_spans_are_refused_with_what_and_where(
    over: dict[str, Any], message: str
) -> None:
    with pytest.raises(PhoenixError, match=message):
        otlp_span(_span(**over))


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"attributes": {"x": [[1]]}}, "attribute x: item 0 is an array"),
        ({"events": "boom"}, "events: expected a list"),
    ],
)
def test_a_span_whose_ids_read_but_not_its_content_is_staged_refused_naming_it(
    over: dict[str, Any], message: str
) -> None:
    """A span Phoenix serves with an attribute OTLP has no place for does not stall the
    source: it is staged as refused (its trace is refused with the reason), and the sync goes
    on past it."""
    raw = _span(**over)
    mapped = otlp_span(raw)
    assert mapped.staged.refused is not None
    assert message in mapped.staged.refused
    assert f"span {raw['context']['span_id']} (trace " in mapped.staged.refused
    assert mapped.staged.span_id == raw["context"]["span_id"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"data": [', "malformed JSON"),
        (b'{"data": [], "next_cursor": NaN}', "malformed JSON"),
        (b"\xff\xfe", "malformed JSON"),
        (b"[" * 200_000 + b"]" * 200_000, "malformed JSON"),
    ],
)
def test_malformed_json_is_refused(body: bytes, message: str) -> None:
    with pytest.raises(PhoenixError, match=message):
        loads_bounded(body, "page")


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "expected a JSON object, got list"),
        ({"data": {}}, "field data: expected a list of spans"),
        ({"data": [], "next_cursor": 5}, "field next_cursor: expected text or null"),
    ],
)
def test_pages_shaped_otherwise_are_refused(doc: Any, message: str) -> None:
    with pytest.raises(PhoenixError, match=message):
        parse_spans_page(doc)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(json_values, json_values)
def test_any_json_span_maps_or_is_refused_with_a_phoenix_error(attrs: Any, noise: Any) -> None:
    raw = _span(attributes=attrs, events=noise if isinstance(noise, list) else [])
    try:
        m = otlp_span(raw)
    except PhoenixError:
        return
    json.dumps(m.staged.entry, allow_nan=False)  # the entry is plain, finite JSON


scalar = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.lists(st.text(max_size=5), max_size=3),
)
plain_key = st.from_regex(r"[a-z_]{1,6}(\.[a-z_]{1,6}){0,3}", fullmatch=True).filter(
    lambda k: not k.startswith("metadata") and "parameters" not in k and "variables" not in k
)


def _decode(v: dict[str, Any]) -> Any:
    (kind, x), *_ = v.items()
    if kind == "intValue":
        return int(x)
    if kind == "arrayValue":
        return [_decode(i) for i in x["values"]]
    return x


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(plain_key, scalar, max_size=6))
def test_flat_attributes_round_trip_with_their_types(attrs: dict[str, Any]) -> None:
    # keys where one is a prefix of another would be an object and a value at once in Phoenix
    keys = sorted(attrs)
    if any(b.startswith(a + ".") for a in keys for b in keys):
        return
    got = {a["key"]: _decode(a["value"]) for a in otlp_attributes(attrs, None)}
    assert got == attrs
    for a in otlp_attributes(attrs, None):
        want = attrs[a["key"]]
        if isinstance(want, bool):
            assert "boolValue" in a["value"]
        elif isinstance(want, int):
            assert "intValue" in a["value"]


# ---------------------------------------------------------------------------------------
# the client's bounds, against a real HTTP server on a loopback port


@contextlib.contextmanager
def http_server(handler: Callable[[http.server.BaseHTTPRequestHandler], None]) -> Iterator[str]:
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            handler(self)

        def log_message(self, *args: Any) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def _send(h: http.server.BaseHTTPRequestHandler, status: int, body: bytes) -> None:
    h.send_response(status)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


def test_a_response_over_the_size_limit_is_refused() -> None:
    body = json.dumps({"data": [recorded_spans()[0]] * 50, "next_cursor": None}).encode()
    with http_server(lambda h: _send(h, 200, body)) as url:
        assert len(PhoenixClient(url).spans_page("p", None, 10).spans) == 50
        with pytest.raises(ResponseTooLarge) as got:
            PhoenixClient(url, max_bytes=10_000).spans_page("p", None, 10)
        assert str(got.value) == (
            f"Phoenix at {url}: a response larger than 10,000 bytes was refused"
        )


def test_malformed_json_over_http_is_refused() -> None:
    with (
        http_server(lambda h: _send(h, 200, b'{"data": [1,')) as url,
        pytest.raises(PhoenixError, match=f"Phoenix at {url}/v1/projects/p/spans: malformed"),
    ):
        PhoenixClient(url).spans_page("p", None, 10)


def test_a_slow_phoenix_times_out_with_a_clear_error() -> None:
    release = threading.Event()

    def slow(h: http.server.BaseHTTPRequestHandler) -> None:
        release.wait(30)

    with http_server(slow) as url:
        try:
            with pytest.raises(PhoenixError, match="did not answer within 1 s"):
                PhoenixClient(url, timeout=1).spans_page("p", None, 10)
        finally:
            release.set()


def test_a_phoenix_that_drips_its_answer_hits_the_deadline() -> None:
    def drip(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", "7000000")
        h.end_headers()
        with contextlib.suppress(OSError):
            for _ in range(100):
                h.wfile.write(b" " * 70_000)
                h.wfile.flush()
                time.sleep(0.2)

    with (
        http_server(drip) as url,
        pytest.raises(PhoenixError, match=r"^Phoenix at \S+ did not finish answering within 0 s$"),
    ):
        PhoenixClient(url, timeout=5, deadline=0.5, max_bytes=10**9).spans_page("p", None, 1)


def test_a_phoenix_that_drips_a_byte_at_a_time_hits_the_deadline_inside_one_read() -> None:
    """Each byte comes within the socket timeout, and one read of 64 KiB waits for all of
    them: only a deadline that shuts the socket ends the request (it used to be checked
    between reads, so this held a sync for as long as the server liked)."""
    stop = threading.Event()

    def drip(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", "1000000")
        h.end_headers()
        with contextlib.suppress(OSError):
            while not stop.is_set():
                h.wfile.write(b" ")
                h.wfile.flush()
                time.sleep(0.2)

    try:  # without the deadline this waits for 1,000,000 bytes (55 hours): pytest-timeout
        with (
            http_server(drip) as url,
            pytest.raises(PhoenixError, match=r"did not finish answering within 2 s$"),
        ):
            PhoenixClient(url, timeout=5, deadline=2, max_bytes=10**9).spans_page("p", None, 1)
    finally:
        stop.set()


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (401, "refused the request \\(HTTP 401\\): check the API key"),
        (404, "not found \\(HTTP 404; is the project name right\\?\\)"),
        (500, "answered HTTP 500: boom"),
    ],
)
def test_http_errors_say_what_to_check(status: int, message: str) -> None:
    with (
        http_server(lambda h: _send(h, status, b"boom")) as url,
        pytest.raises(PhoenixError, match=message),
    ):
        PhoenixClient(url).spans_page("p", None, 10)


def test_the_api_key_is_sent_as_a_bearer_token() -> None:
    seen: list[str | None] = []

    def record(h: http.server.BaseHTTPRequestHandler) -> None:
        seen.append(h.headers.get("Authorization"))
        _send(h, 200, b'{"data": [], "next_cursor": null}')

    with http_server(record) as url:
        PhoenixClient(url, api_key="s3cret").spans_page("a project/x", "abc", 10)
    assert seen == ["Bearer s3cret"]
    assert "s3cret" not in repr(PhoenixClient(url, api_key="s3cret"))


def test_a_phoenix_that_is_down_is_said_to_be_unreachable() -> None:
    with http_server(lambda h: None) as url:
        pass  # closed: nothing listens there now
    with pytest.raises(PhoenixError, match=f"Phoenix at {url} is not reachable"):
        PhoenixClient(url, timeout=5).spans_page("p", None, 10)


def test_a_phoenix_that_goes_away_under_a_request_is_said_to_be_unreachable() -> None:
    """Stopped while a request is open, Phoenix closes or resets the connection instead of
    refusing it; that too is "not reachable", whatever the timing of the stop (a sync test
    stopping a real Phoenix mid-sync saw either, and once failed on the reset)."""

    def hang_up(h: http.server.BaseHTTPRequestHandler) -> None:
        h.close_connection = True  # no answer at all: the connection just closes

    with http_server(hang_up) as url, pytest.raises(PhoenixError) as err:
        PhoenixClient(url, timeout=5).spans_page("p", None, 10)
    assert str(err.value).startswith(f"Phoenix at {url} is not reachable: "), str(err.value)


# ---------------------------------------------------------------------------------------
# the resume overlap, against a simulated Phoenix database with out-of-order commits


class Store:
    """Spans ``1..n`` take their ids in increasing time order and commit up to ``latency``
    later (two writers' batches interleave); a page read at time ``t`` shows the committed
    ids at or above the cursor, ``limit`` of them, and the next one's id as next cursor (as
    Phoenix's ``sort=id&order=asc``)."""

    def __init__(self, rnd: random.Random, n: int, latency: float) -> None:
        t = 0.0
        self.commit: dict[int, float] = {}
        for i in range(1, n + 1):
            t += rnd.expovariate(2.0)
            self.commit[i] = t + rnd.uniform(0, latency)
        self.end = max(self.commit.values())

    def page(self, cursor: str | None, limit: int, at: float) -> tuple[list[int], str | None]:
        low = int(cursor) if cursor else 0
        ids = sorted(i for i, c in self.commit.items() if c <= at and i >= low)[: limit + 1]
        if len(ids) > limit:
            return ids[:limit], str(ids[limit])
        return ids, None


def simulate(seed: int, window: float, latency: float, n: int = 120) -> set[int]:
    """Syncs at random times (some stopped after a few pages) while spans commit, then one
    after everything committed; returns the ids read."""
    rnd = random.Random(seed)
    store = Store(rnd, n, latency)
    state = ResumeState()
    seen: set[int] = set()
    now = 0.0
    while True:
        now += rnd.uniform(0.1, 15)
        final = now > store.end
        walk = PageWalk(ResumeState.from_json(state.to_json()), now, window)
        stop_after = None if final or rnd.random() < 0.6 else rnd.randint(1, 3)
        pages = 0
        while True:
            now += rnd.uniform(0.01, 1.0)  # each page takes a while
            ids, nxt = store.page(walk.cursor, 7, now)
            seen.update(ids)
            walk.page_read([(i, str(i)) for i in ids], nxt, now + rnd.uniform(0, 0.5))
            state = walk.state
            pages += 1
            if nxt is None or (stop_after is not None and pages >= stop_after):
                break
        if final:
            return seen


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32), st.floats(0, 20))
def test_no_span_committed_within_the_window_is_ever_missed(seed: int, latency: float) -> None:
    assert simulate(seed, window=20.0, latency=latency) == set(range(1, 121))


def test_a_plain_id_cursor_loses_late_commits_that_the_overlap_keeps() -> None:
    # the control: without the window the same schedules lose spans (the 1,852 of
    # 2,400), so the test above would see a broken overlap
    lost = [s for s in range(40) if simulate(s, window=0.0, latency=20.0) != set(range(1, 121))]
    assert len(lost) > 10
    assert all(simulate(s, window=20.0, latency=20.0) == set(range(1, 121)) for s in lost)


def test_the_resume_point_waits_one_window_then_moves() -> None:
    walk = PageWalk(ResumeState(), 100.0, 60.0)
    walk.page_read([(1, "c1"), (2, "c2")], None, 101.0)
    assert walk.state.cursor is None  # nothing is a window old yet
    walk = PageWalk(walk.state, 150.0, 60.0)
    walk.page_read([(1, "c1"), (2, "c2"), (3, "c3")], None, 151.0)
    assert walk.state.cursor is None  # 101 + 60 > 150
    walk = PageWalk(walk.state, 170.0, 60.0)
    assert walk.cursor is None
    walk.page_read([(1, "c1"), (2, "c2"), (3, "c3")], None, 171.0)
    assert (walk.state.rowid, walk.state.cursor) == (2, "c2")  # seen by 101, read past at 170
    assert [c.rowid for c in walk.state.checkpoints] == [3]


def test_an_interrupted_sync_moves_the_resume_point_only_as_far_as_it_read() -> None:
    state = ResumeState().seen(50, "c50", 1.0)
    walk = PageWalk(state, 1000.0, 60.0)
    walk.page_read([(i, f"c{i}") for i in range(1, 11)], "c11", 1001.0)  # then stopped
    assert walk.state.rowid is None  # checkpoint 50 is old, but it read only through 10


def test_checkpoints_stay_bounded_and_thinning_only_lowers_the_resume_point() -> None:
    state = ResumeState()
    for i in range(1, 5000):
        state = state.seen(i, f"c{i}", float(i))
    assert len(state.checkpoints) <= MAX_CHECKPOINTS
    moved = state.advance(10_000.0, 2**63, 100.0)
    assert moved.rowid is not None and moved.rowid <= 4999


def test_a_stored_resume_state_round_trips_and_a_damaged_one_is_refused() -> None:
    state = ResumeState(7, "c7", ResumeState().seen(9, "c9", 12.5).checkpoints)
    assert ResumeState.from_json(json.loads(json.dumps(state.to_json()))) == state
    with pytest.raises(Exception, match="stored sync position is unreadable"):
        ResumeState.from_json({"version": 1, "resume_rowid": 3, "resume_cursor": None})
    with pytest.raises(Exception, match="stored sync position is unreadable"):
        ResumeState.from_json({"version": 99})
