"""OTLP/HTTP trace export requests (protobuf or OTLP/JSON) read into staged spans.

Pure functions, no I/O: the receiver (:mod:`review.traces.live.receiver`) hands over a body it
has already bounded in size (and decompressed within a bound), and gets back one
:class:`~review.traces.live.staging.StagedSpan` per span. Each span's ``entry`` is one OTLP/JSON
``resourceSpans`` entry holding that span alone, with hex ids and OTLP/JSON ``AnyValue``
attributes, so that the span goes through the same mapping as the OTLP file importer
(:mod:`review.traces.formats.otlp`) when its trace is assembled.

What is refused, and how:

* a body that cannot be read as a whole (not protobuf, not JSON, not UTF-8, ``resourceSpans``
  not a list, a resource or scope that is not an object) raises :class:`PayloadError` with the
  reason and where (the receiver answers 400 and stores nothing);
* a span without a valid trace id, span id or start time, or holding a NUL character (which
  the database cannot store), is rejected alone: it is counted in ``rejected`` with its reason
  (the receiver answers with OTLP's ``partial_success``), and the other spans are kept;
* an attribute the mapping will not read (an ``AnyValue`` of a type OTLP does not define, in
  protobuf an unknown field, too many attributes) is kept as sent and named in ``warnings``:
  the importer then refuses the span's whole trace with that reason, as it does for a file,
  instead of importing a trace that silently lacks a field.

OTLP/JSON writes trace and span ids as hex (a generic protobuf JSON parser would read them as
base64 and get other bytes); both spellings are accepted here and told apart by length
(:func:`review.traces.formats.otlp.otlp_id`), so no ``json_format.Parse`` is used.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import unknown_fields
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from review.core import readable
from review.core.records import JsonProblem, describe, parse_json, quoted
from review.core.textcheck import nul_field
from review.traces.formats.fields import BadField
from review.traces.formats.otlp import otlp_attributes, otlp_id, unix_nano
from review.traces.live.staging import StagedSpan

__all__ = ["MAX_PROBLEMS_SHOWN", "Decoded", "PayloadError", "decode_json", "decode_protobuf"]

#: Reasons quoted in a response (the count says how many there were)
MAX_PROBLEMS_SHOWN = 5

#: Span fields kept from an OTLP/JSON span besides its ids (the rest, such as links and the
#: dropped-counts, the mapping never reads)
_KEPT = ("name", "kind", "startTimeUnixNano", "endTimeUnixNano", "attributes", "status", "events")


_SPAN_KINDS = {v.name: v.number for v in Span.SpanKind.DESCRIPTOR.values}
_STATUS_CODES = {v.name: v.number for v in Status.StatusCode.DESCRIPTOR.values}


class PayloadError(ValueError):
    """The request cannot be read as an OTLP trace export at all (HTTP 400)."""


@dataclass(slots=True)
class Decoded:
    """The spans of one request, the count of spans rejected, and why (first few)."""

    spans: list[StagedSpan] = field(default_factory=list)
    rejected: int = 0
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    warned: int = 0

    def reject(self, why: str) -> None:
        self.rejected += 1
        if len(self.problems) < MAX_PROBLEMS_SHOWN:
            self.problems.append(why)

    def warn(self, why: str) -> None:
        self.warned += 1
        if len(self.warnings) < MAX_PROBLEMS_SHOWN:
            self.warnings.append(why)

    def message(self) -> str:
        """The partial-success message: the rejected spans and the warnings, counted."""
        parts: list[str] = []
        if self.rejected:
            more = self.rejected - len(self.problems)
            parts.append(
                f"{readable.count(self.rejected, 'span')} rejected: "
                + "; ".join(self.problems)
                + (f"; and {more} more" if more > 0 else "")
            )
        if self.warned:
            more = self.warned - len(self.warnings)
            parts.append(
                f"{readable.count(self.warned, 'span')} stored whose trace the importer will "
                "refuse: " + "; ".join(self.warnings) + (f"; and {more} more" if more > 0 else "")
            )
        return ". ".join(parts)


def _entry(resource: dict[str, Any], scope: dict[str, Any], span: dict[str, Any]) -> dict[str, Any]:
    return {"resource": resource, "scopeSpans": [{"scope": scope, "spans": [span]}]}


# ---------------------------------------------------------------------------------------
# protobuf


def _pb_value(v: AnyValue, bad: list[str], nul: list[bool]) -> dict[str, Any]:
    """An AnyValue as OTLP/JSON; an unknown value type is kept under a name that the mapping
    refuses (``unknownField<N>``), and noted in ``bad``."""
    which = v.WhichOneof("value")
    if which == "string_value":
        if "\x00" in v.string_value:
            nul.append(True)
        return {"stringValue": v.string_value}
    if which == "bool_value":
        return {"boolValue": v.bool_value}
    if which == "int_value":
        return {"intValue": str(v.int_value)}
    if which == "double_value":
        d = v.double_value
        if math.isfinite(d):
            return {"doubleValue": d}
        return {"doubleValue": "NaN" if math.isnan(d) else ("Infinity" if d > 0 else "-Infinity")}
    if which == "array_value":
        return {"arrayValue": {"values": [_pb_value(x, bad, nul) for x in v.array_value.values]}}
    if which == "kvlist_value":
        return {"kvlistValue": {"values": _pb_attrs(v.kvlist_value.values, bad, nul)}}
    if which == "bytes_value":
        return {"bytesValue": base64.b64encode(v.bytes_value).decode("ascii")}
    numbers = sorted({f.field_number for f in unknown_fields.UnknownFieldSet(v)})
    if numbers:
        bad.append(f"a value of unknown type (protobuf field {numbers[0]})")
        return {f"unknownField{numbers[0]}": None}
    return {}  # an empty AnyValue: OTLP's "no value"


def _pb_attrs(kvs: Sequence[KeyValue], bad: list[str], nul: list[bool]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for kv in kvs:
        if "\x00" in kv.key:
            nul.append(True)
        before = len(bad)
        value = _pb_value(kv.value, bad, nul)
        if len(bad) > before:
            bad[before:] = [f"attribute {quoted(kv.key)} holds {bad[before]}"]
        out.append({"key": kv.key, "value": value})
    return out


def _pb_id(raw: bytes, nbytes: int, name: str) -> str:
    what = "trace id" if nbytes == 16 else "span id"
    if len(raw) != nbytes:
        raise BadField(name, f"{len(raw)} bytes; a {what} has {nbytes}")
    if not any(raw):
        raise BadField(name, f"the {what} is all zeros (invalid in OTLP)")
    return raw.hex()


def _pb_span(sp: Span, where: str, bad: list[str], nul: list[bool]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "traceId": _pb_id(sp.trace_id, 16, "traceId"),
        "spanId": _pb_id(sp.span_id, 8, "spanId"),
    }
    if sp.parent_span_id:
        out["parentSpanId"] = _pb_id(sp.parent_span_id, 8, "parentSpanId")
    if "\x00" in sp.name:
        nul.append(True)
    out["name"] = sp.name
    out["kind"] = int(sp.kind)
    out["startTimeUnixNano"] = str(sp.start_time_unix_nano)
    out["endTimeUnixNano"] = str(sp.end_time_unix_nano)
    out["attributes"] = _pb_attrs(sp.attributes, bad, nul)
    if sp.HasField("status"):
        status: dict[str, Any] = {"code": int(sp.status.code)}
        if sp.status.message:
            status["message"] = sp.status.message
            if "\x00" in sp.status.message:
                nul.append(True)
        out["status"] = status
    if sp.events:
        ignored: list[str] = []  # the mapping does not read events: their values cannot harm
        out["events"] = [
            {
                "timeUnixNano": str(ev.time_unix_nano),
                "name": ev.name,
                "attributes": _pb_attrs(ev.attributes, ignored, nul),
            }
            for ev in sp.events
        ]
    return out


def decode_protobuf(body: bytes) -> Decoded:
    """An ``ExportTraceServiceRequest`` in protobuf, or :class:`PayloadError`."""
    try:
        req = ExportTraceServiceRequest.FromString(body)
    except DecodeError as exc:
        raise PayloadError(
            f"not a protobuf ExportTraceServiceRequest ({exc or 'truncated or malformed'})"
        ) from None
    except RecursionError:
        raise PayloadError("not a protobuf ExportTraceServiceRequest (nested too deeply)") from None
    out = Decoded()
    for i, rs in enumerate(req.resource_spans):
        res_bad: list[str] = []
        res_nul: list[bool] = []
        resource = {"attributes": _pb_attrs(rs.resource.attributes, res_bad, res_nul)}
        for j, ss in enumerate(rs.scope_spans):
            scope: dict[str, Any] = {}
            if ss.scope.name:
                scope["name"] = ss.scope.name
            if ss.scope.version:
                scope["version"] = ss.scope.version
            if "\x00" in ss.scope.name or "\x00" in ss.scope.version:
                res_nul.append(True)
            for k, sp in enumerate(ss.spans):
                where = f"resourceSpans.{i}.scopeSpans.{j}.spans.{k}"
                bad: list[str] = []
                nul: list[bool] = list(res_nul)
                try:
                    span = _pb_span(sp, where, bad, nul)
                    start = unix_nano(sp.start_time_unix_nano, "startTimeUnixNano")
                except BadField as exc:
                    out.reject(f"{where}: {exc.text()}")
                    continue
                if nul:
                    out.reject(f"{where}: holds a NUL character, which cannot be stored")
                    continue
                if res_bad or bad:
                    out.warn(f"span {span['spanId']}: {(res_bad + bad)[0]}")
                out.spans.append(
                    StagedSpan(
                        trace_id=span["traceId"],
                        span_id=span["spanId"],
                        parent_id=span.get("parentSpanId"),
                        start=start,
                        entry=_entry(resource, scope, span),
                    )
                )
    return out


# ---------------------------------------------------------------------------------------
# OTLP/JSON


def _json_list(v: object, where: str) -> list[Any]:
    if v is None:
        return []
    if not isinstance(v, list):
        raise PayloadError(f"{where}: expected a list, got {describe(v)}")
    return v


def _json_object(v: object, where: str) -> Mapping[str, Any]:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise PayloadError(f"{where}: expected an object, got {describe(v)}")
    return v


def _json_span(sp: Mapping[str, Any], where: str) -> tuple[dict[str, Any], dt.datetime]:
    span: dict[str, Any] = {
        "traceId": otlp_id(sp.get("traceId"), "traceId", 16),
        "spanId": otlp_id(sp.get("spanId"), "spanId", 8),
    }
    parent = sp.get("parentSpanId")
    if not (parent is None or (isinstance(parent, str) and not parent.strip())):
        span["parentSpanId"] = otlp_id(parent, "parentSpanId", 8)
    start = unix_nano(sp.get("startTimeUnixNano"), "startTimeUnixNano")
    for key in _KEPT:
        if key in sp:
            span[key] = sp[key]
    # enums by number, as the protobuf decoder gives them: a span sent again in the other
    # spelling is the same span (staging compares what a span re-sent says)
    kind = span.get("kind")
    if isinstance(kind, str) and kind in _SPAN_KINDS:
        span["kind"] = _SPAN_KINDS[kind]
    status = span.get("status")
    if isinstance(status, dict) and isinstance(status.get("code"), str):
        code = _STATUS_CODES.get(status["code"])
        if code is not None:
            span["status"] = {**status, "code": code}
    return span, start


def decode_json(body: bytes) -> Decoded:
    """An ``ExportTraceServiceRequest`` in OTLP/JSON (hex or base64 ids), or
    :class:`PayloadError`."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PayloadError(f"not UTF-8 text (byte {exc.start})") from None
    try:
        data = parse_json(text.removeprefix("\ufeff"))
    except JsonProblem as exc:
        at = f"field {exc.field}: " if exc.field else ""
        raise PayloadError(f"{at}{exc.reason}") from None
    if not isinstance(data, dict):
        raise PayloadError(f"expected an ExportTraceServiceRequest object, got {describe(data)}")
    may_hold_nul = "\\u0000" in text
    out = Decoded()
    for i, r in enumerate(_json_list(data.get("resourceSpans"), "resourceSpans")):
        rwhere = f"resourceSpans.{i}"
        r = _json_object(r, rwhere)
        res = _json_object(r.get("resource"), f"{rwhere}.resource")
        resource = {
            "attributes": _json_list(res.get("attributes"), f"{rwhere}.resource.attributes")
        }
        try:
            otlp_attributes(resource["attributes"], f"{rwhere}.resource")
            res_bad = None
        except BadField as exc:
            res_bad = exc.text()
        for j, ss in enumerate(_json_list(r.get("scopeSpans"), f"{rwhere}.scopeSpans")):
            swhere = f"{rwhere}.scopeSpans.{j}"
            ss = _json_object(ss, swhere)
            sc = _json_object(ss.get("scope"), f"{swhere}.scope")
            scope = {k: sc[k] for k in ("name", "version") if isinstance(sc.get(k), str)}
            for k, sp in enumerate(_json_list(ss.get("spans"), f"{swhere}.spans")):
                where = f"{swhere}.spans.{k}"
                if not isinstance(sp, dict):
                    out.reject(f"{where}: expected a span object, got {describe(sp)}")
                    continue
                try:
                    span, start = _json_span(sp, where)
                except BadField as exc:
                    out.reject(f"{where}: {exc.text()}")
                    continue
                entry = _entry(resource, scope, span)
                if may_hold_nul and nul_field(entry) is not None:
                    out.reject(f"{where}: holds a NUL character, which cannot be stored")
                    continue
                try:
                    otlp_attributes(span.get("attributes"), where)
                    bad = res_bad
                except BadField as exc:
                    bad = exc.text()
                if bad is not None:
                    out.warn(f"span {span['spanId']}: {bad}")
                out.spans.append(
                    StagedSpan(
                        trace_id=span["traceId"],
                        span_id=span["spanId"],
                        parent_id=span.get("parentSpanId"),
                        start=start,
                        entry=entry,
                    )
                )
    return out
