"""The OTLP/HTTP receiver's decoder (review/traces/live/otlp_in.py) on the bodies the real
OpenTelemetry SDK encoders produce, on hostile bodies, and under Hypothesis: no database and
no server here (tests/live/test_receiver.py runs the receiver with the real exporters)."""

from __future__ import annotations

import base64
import json
import string
import zlib
from typing import Any

import pytest
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.json.common._internal.trace_encoder import (
    encode_spans as encode_json,
)
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as encode_pb
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from review.traces.formats.otlp import iter_otlp_jsonl, otlp_attributes
from review.traces.live.otlp_in import (
    MAX_PROBLEMS_SHOWN,
    Decoded,
    PayloadError,
    decode_json,
    decode_protobuf,
)
from review.traces.live.receiver import TooLarge, gunzip_bounded
from review.traces.model import ParsedTrace, Rejected, Trace
from tests.helpers.ragspans import ExpectedTrace, make_rag_spans

NOW_NS = 1_764_800_000_000_000_000  # 2025-12-03


def lines_of(decoded: Decoded) -> list[str]:
    """The staged entries as OTLP/JSON lines, one request per span, as assembly reads them."""
    return [json.dumps({"resourceSpans": [s.entry]}) for s in decoded.spans]


def traces_of(decoded: Decoded) -> dict[str, Trace | Rejected]:
    out: dict[str, Trace | Rejected] = {}
    for item in iter_otlp_jsonl(lines_of(decoded), "staged", skip_bad=True):
        if isinstance(item, ParsedTrace):
            out[item.trace.trace_id] = item.trace
        else:
            out[item.reason] = item
    return out


def check_trace(t: Trace | Rejected, e: ExpectedTrace) -> None:
    assert isinstance(t, Trace), t
    assert t.trace_id == e.trace_id
    assert (t.query, t.rewritten_query, t.answer_text) == (e.query, e.rewritten_query, e.answer)
    assert (t.decision, t.reason_code, t.top_score) == (e.decision, e.reason_code, e.top_score)
    got = [(c.chunk_id, c.doc_id, c.doc_version, c.score, c.text) for c in t.chunks]
    assert got == [(c.chunk_id, c.doc_id, c.doc_version, c.score, c.text) for c in e.chunks]
    assert t.versions["model"] == e.model
    assert t.versions["prompt"] == e.prompt
    assert t.versions["index"] == e.index


# ---------------------------------------------------------------------------------------
# The SDK's own encoders


def test_the_sdk_protobuf_and_json_encodings_stage_the_same_spans_and_traces() -> None:
    spans, expected = make_rag_spans(6)
    pb = decode_protobuf(encode_pb(spans).SerializeToString())
    js = decode_json(encode_json(spans).to_json().encode())
    assert pb.rejected == js.rejected == 0 and not pb.message() and not js.message()
    assert len(pb.spans) == len(js.spans) == 18
    key = [(s.trace_id, s.span_id, s.parent_id, s.start) for s in pb.spans]
    assert key == [(s.trace_id, s.span_id, s.parent_id, s.start) for s in js.spans]
    for a, b in zip(pb.spans, js.spans, strict=True):
        sa, sb = a.entry["scopeSpans"][0]["spans"][0], b.entry["scopeSpans"][0]["spans"][0]
        assert otlp_attributes(sa["attributes"], "pb") == otlp_attributes(sb["attributes"], "js")
        assert len(a.entry["scopeSpans"]) == 1
        assert sa["traceId"] == a.trace_id and len(a.trace_id) == 32
    roots = [s for s in pb.spans if s.parent_id is None]
    assert len(roots) == 6
    for decoded in (pb, js):
        got = traces_of(decoded)
        assert sorted(got) == sorted(e.trace_id for e in expected)
        for e in expected:
            check_trace(got[e.trace_id], e)


def test_json_ids_in_hex_or_base64_stage_the_same_hex_ids() -> None:
    spans, _ = make_rag_spans(2)
    body = json.loads(encode_json(spans).to_json())

    def to_base64(value: str) -> str:
        return base64.b64encode(bytes.fromhex(value)).decode()

    for rs in body["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                for k in ("traceId", "spanId", "parentSpanId"):
                    if sp.get(k):
                        sp[k] = to_base64(sp[k])
    hexed = decode_json(encode_json(spans).to_json().encode())
    b64 = decode_json(json.dumps(body).encode())
    assert [(s.trace_id, s.span_id, s.parent_id) for s in b64.spans] == [
        (s.trace_id, s.span_id, s.parent_id) for s in hexed.spans
    ]
    assert [s.entry for s in b64.spans] == [s.entry for s in hexed.spans]
    # and the generic protobuf JSON form (base64 ids, enum names: json_format's) too
    generic = decode_json(json_format.MessageToJson(encode_pb(spans)).encode())
    assert _plain(generic) == _plain(hexed)


# ---------------------------------------------------------------------------------------
# Hostile bodies


def test_truncated_protobuf_is_refused_with_a_reason() -> None:
    spans, _ = make_rag_spans(2)
    body = encode_pb(spans).SerializeToString()
    for cut in (1, 2, 10, len(body) // 2, len(body) - 1):
        with pytest.raises(PayloadError, match="not a protobuf ExportTraceServiceRequest"):
            decode_protobuf(body[:cut])
    assert decode_protobuf(b"").spans == []  # an empty request is a valid one


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"resourceSpans": [', "not valid JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b"[]", "expected an ExportTraceServiceRequest object"),
        (b'{"resourceSpans": {}}', "resourceSpans: expected a list"),
        (b'{"resourceSpans": [3]}', "resourceSpans.0: expected an object"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": "x"}]}]}', "spans: expected a list"),
        (b'{"resourceSpans": [], "resourceSpans": []}', "appears twice"),
    ],
)
def test_malformed_json_is_refused_with_where_and_why(body: bytes, message: str) -> None:
    with pytest.raises(PayloadError, match=message):
        decode_json(body)


def _json_span(**kw: Any) -> dict[str, Any]:
    span: dict[str, Any] = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": "b7ad6b7169203331",
        "name": "root",
        "startTimeUnixNano": str(NOW_NS),
        "endTimeUnixNano": str(NOW_NS + 1000),
        "attributes": [{"key": "input.value", "value": {"stringValue": "q?"}}],
    }
    span.update(kw)
    return span


def _json_body(*spans: object) -> bytes:
    return json.dumps(
        {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": list(spans)}]}]}
    ).encode()


def test_spans_without_valid_ids_or_times_are_rejected_alone_with_reasons() -> None:
    good = _json_span()
    bad = [
        _json_span(spanId="01", traceId="0af7651916cd43dd8448eb211c80319c"),
        _json_span(traceId="00000000000000000000000000000000", spanId="53995c3f42cd8ad8"),
        _json_span(spanId="53995c3f42cd8ad9", startTimeUnixNano=None),
        _json_span(spanId="53995c3f42cd8ada", startTimeUnixNano="12"),  # 1970: refused
        _json_span(spanId="53995c3f42cd8adb", name="nul\u0000name"),
        "not a span",
    ]
    out = decode_json(_json_body(good, *bad))
    assert [s.span_id for s in out.spans] == ["b7ad6b7169203331"]
    assert out.rejected == len(bad)
    msg = out.message()
    assert msg.startswith(f"{len(bad)} spans rejected: ")
    assert "spans.1: field spanId: '01' decodes to 1 bytes; a span id has 8" in msg
    assert "all zeros" in msg and "startTimeUnixNano" in msg
    assert len(out.problems) == MAX_PROBLEMS_SHOWN and "and 1 more" in msg


def test_an_unknown_attribute_value_type_is_stored_and_its_trace_refused_at_import() -> None:
    # OTLP/JSON: a value type the format does not define
    js = decode_json(
        _json_body(
            _json_span(attributes=[{"key": "rag.top_score", "value": {"decimalValue": "0.8"}}])
        )
    )
    assert js.rejected == 0 and len(js.spans) == 1
    assert "stored whose trace the importer will refuse" in js.message()
    assert "unknown OTLP value type 'decimalValue'" in js.message()
    # protobuf: an AnyValue field number this version of OTLP does not have
    value = AnyValue.FromString(bytes([12 << 3 | 0, 7]))  # field 12, varint 7
    req = ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                scope_spans=[
                    ScopeSpans(
                        spans=[
                            Span(
                                trace_id=bytes.fromhex("5b8efff798038103d269b633813fc60c"),
                                span_id=bytes.fromhex("b7ad6b7169203331"),
                                start_time_unix_nano=NOW_NS,
                                attributes=[KeyValue(key="rag.top_score", value=value)],
                            )
                        ]
                    )
                ]
            )
        ]
    )
    pb = decode_protobuf(req.SerializeToString())
    assert pb.rejected == 0 and len(pb.spans) == 1
    assert "attribute 'rag.top_score' holds a value of unknown type (protobuf field 12)" in (
        pb.message()
    )
    for decoded in (js, pb):
        (item,) = traces_of(decoded).values()
        assert isinstance(item, Rejected)
        assert "unknown OTLP value type" in item.reason


def test_ten_thousand_spans_in_one_request_decode_in_both_encodings() -> None:
    spans, expected = make_rag_spans(3334)
    assert len(spans) == 10_002
    pb = decode_protobuf(encode_pb(spans).SerializeToString())
    js = decode_json(encode_json(spans).to_json().encode())
    assert len(pb.spans) == len(js.spans) == 10_002
    assert {s.trace_id for s in pb.spans} == {e.trace_id for e in expected}


def test_gzip_is_bounded_and_a_bomb_stops_at_the_bound() -> None:
    data = b"x" * 10_000
    assert gunzip_bounded(gzip_of(data), 10_000) == data
    assert gunzip_bounded(gzip_of(data) + gzip_of(b"yz"), 10_002) == data + b"yz"
    with pytest.raises(TooLarge, match="more than 9,999 bytes"):
        gunzip_bounded(gzip_of(data), 9_999)
    bomb = gzip_of(b"\0" * (64 * 1024 * 1024))  # 64 MiB of zeros in about 64 KB
    assert len(bomb) < 100_000
    with pytest.raises(TooLarge):
        gunzip_bounded(bomb, 1024 * 1024)
    with pytest.raises(PayloadError, match="truncated"):
        gunzip_bounded(gzip_of(data)[:-9], 20_000)
    with pytest.raises(PayloadError, match="cannot be decompressed"):
        gunzip_bounded(b"not gzip at all", 20_000)


def gzip_of(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


# ---------------------------------------------------------------------------------------
# Hypothesis: any body is either decoded or refused with PayloadError; a valid request decodes
# to the same spans whichever encoding (and id spelling) carries it

ids16 = st.binary(min_size=16, max_size=16).filter(any)
ids8 = st.binary(min_size=8, max_size=8).filter(any)
keys = st.text(string.ascii_letters + "._", min_size=1, max_size=12)
scalars = st.one_of(
    st.builds(
        lambda s: AnyValue(string_value=s), st.text(max_size=20).filter(lambda s: "\0" not in s)
    ),
    st.builds(lambda b: AnyValue(bool_value=b), st.booleans()),
    st.builds(lambda i: AnyValue(int_value=i), st.integers(-(2**63), 2**63 - 1)),
    st.builds(lambda d: AnyValue(double_value=d), st.floats(allow_nan=False, allow_infinity=False)),
)
values = st.recursive(
    scalars,
    lambda inner: st.builds(
        lambda xs: AnyValue(array_value=ArrayValue(values=xs)), st.lists(inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def requests(draw: st.DrawFn) -> ExportTraceServiceRequest:
    spans = []
    for _ in range(draw(st.integers(1, 6))):
        attrs = draw(st.dictionaries(keys, values, max_size=5))
        parent = draw(st.one_of(st.just(b""), ids8))
        spans.append(
            Span(
                trace_id=draw(ids16),
                span_id=draw(ids8),
                parent_span_id=parent,
                name=draw(st.text(max_size=10).filter(lambda s: "\0" not in s)),
                start_time_unix_nano=draw(st.integers(NOW_NS - 10**15, NOW_NS)),
                attributes=[KeyValue(key=k, value=v) for k, v in attrs.items()],
            )
        )
    return ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])]
    )


def _plain(d: Decoded) -> list[tuple[Any, ...]]:
    out = []
    for s in d.spans:
        span = s.entry["scopeSpans"][0]["spans"][0]
        attrs = otlp_attributes(span.get("attributes"), "x")
        out.append((s.trace_id, s.span_id, s.parent_id, s.start, attrs))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_any_valid_request_decodes_alike_in_protobuf_and_both_json_id_spellings(
    req: ExportTraceServiceRequest,
) -> None:
    pb = decode_protobuf(req.SerializeToString())
    generic = decode_json(json_format.MessageToJson(req).encode())  # base64 ids
    hexed = json_format.MessageToDict(req)
    for rs in hexed.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for sp in ss.get("spans", []):
                for k in ("traceId", "spanId", "parentSpanId"):
                    if sp.get(k):
                        sp[k] = base64.b64decode(sp[k]).hex()
    otlp_json = decode_json(json.dumps(hexed).encode())
    assert pb.rejected == generic.rejected == otlp_json.rejected == 0
    assert _plain(pb) == _plain(generic) == _plain(otlp_json)
    assert len(pb.spans) == len(req.resource_spans[0].scope_spans[0].spans)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_any_bytes_are_decoded_or_refused_as_a_payload_error(body: bytes) -> None:
    for decode in (decode_protobuf, decode_json):
        try:
            out = decode(body)
        except PayloadError as exc:
            assert str(exc)
        else:
            assert out.rejected >= 0


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["resource", "scopeSpans", "spans", "traceId", "x"]), json_values
    ),
    st.lists(st.dictionaries(st.sampled_from(list(_json_span())), json_values), max_size=3),
)
def test_any_json_shape_is_decoded_or_refused_never_crashes(
    resource: dict[str, Any], spans: list[dict[str, Any]]
) -> None:
    body = json.dumps(
        {
            "resourceSpans": [
                {**resource, "scopeSpans": [{"spans": [{**_json_span(), **s} for s in spans]}]}
            ]
        }
    ).encode()
    try:
        out = decode_json(body)
    except PayloadError as exc:
        assert str(exc)
    else:
        assert len(out.spans) + out.rejected == len(spans)
