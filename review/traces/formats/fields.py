"""Field coercion shared by every trace format: each helper takes a value and the field's
name and refuses what the canonical model cannot hold (with the field named), chunks
included."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sized
from typing import Any

from review.core.records import JsonProblem, describe, parse_json, quoted
from review.core.textcheck import NUL_PROBLEM, nul_field
from review.traces.model import MAX_TEXT, AttrValue, Chunk, Citation, TraceVocabulary

# ---------------------------------------------------------------------------------------
# Field coercion: each helper takes a value and the field's name, and raises BadField


#: Size limits of one trace, each refused with the field: a trace is one request, and real
#: ones hold tens of chunks and a handful of versions and attributes.
MAX_CHUNKS = 1000
MAX_CITATIONS = 500
MAX_ITEMS = 200  # identity scopes, topics' lists, one citation's chunk ids
MAX_FACTS = 200  # names under versions, names under attributes
MAX_NAME = 200  # characters of a version or attribute name
MAX_FACT_TEXT = 10_000  # characters of a version or attribute value

_MAX_FIELD_SHOWN = 120  # characters of a field path in a message
_MAX_REASON_SHOWN = 1000  # characters of a reason (they quote values from the file)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class BadField(Exception):
    """A field that cannot be read; the field path and the reason are clipped, so a hostile
    key or value of a megabyte is not copied into messages and rejects files."""

    def __init__(self, fld: str | None, reason: str) -> None:
        reason = _clip(reason, _MAX_REASON_SHOWN)
        super().__init__(reason)
        self.fld = fld
        self.reason = reason

    def text(self) -> str:
        if not self.fld:
            return self.reason
        return f"field {_clip(self.fld, _MAX_FIELD_SHOWN)}: {self.reason}"


def at_most(items: Sized, limit: int, f: str, what: str) -> None:
    if len(items) > limit:
        raise BadField(f, f"more than {limit:,} {what} ({len(items):,})")


def is_absent(v: object) -> bool:
    return v is None or (isinstance(v, str) and (not v or v.isspace()))


def opt_text(v: object, f: str) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str):
        raise BadField(f, f"expected text, got {describe(v)}")
    if len(v) > MAX_TEXT:
        raise BadField(f, f"longer than {MAX_TEXT:,} characters")
    if "\x00" in v:
        raise BadField(f, NUL_PROBLEM)
    return None if not v or v.isspace() else v


def text_or_empty(v: object, f: str) -> str:
    return opt_text(v, f) or ""


def req_text(v: object, f: str, max_len: int = MAX_TEXT) -> str:
    if v is None:
        raise BadField(f, "required field is missing")
    out = opt_text(v, f)
    if out is None:
        raise BadField(f, "must not be empty")
    if len(out) > max_len:
        raise BadField(f, f"longer than {max_len} characters")
    return out


def read_ident(v: object, f: str) -> str:
    """An identifier: text (or an integer, written as text), stripped, at most 200 chars."""
    if type(v) is str and 0 < len(v) <= 200 and "\x00" not in v and not v.isspace():
        return v.strip()  # the common case, as req_text would take it
    if isinstance(v, int) and not isinstance(v, bool):
        v = str(v)
    return req_text(v, f, 200).strip()


INT_MAX = 2**31 - 1  # the largest whole number the database's integer columns hold


_INT_RE = re.compile(r"^\s*[+-]?\d+\s*$")


_FLOAT_RE = re.compile(r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$")


def opt_int(
    v: object, f: str, minimum: int | None = None, maximum: int | None = None
) -> int | None:
    if type(v) is int and (minimum is None or v >= minimum) and (maximum is None or v <= maximum):
        return v  # the common case
    if is_absent(v):
        return None
    out: int
    if isinstance(v, bool):
        raise BadField(f, f"expected a whole number, got {describe(v)}")
    if isinstance(v, int):
        out = v
    elif (isinstance(v, float) and v.is_integer()) or (isinstance(v, str) and _INT_RE.match(v)):
        try:
            out = int(v)
        except ValueError:  # more digits than Python converts
            raise BadField(f, "expected a whole number, got a number too long to read") from None
    else:
        raise BadField(f, f"expected a whole number, got {describe(v)}")
    if minimum is not None and out < minimum:
        raise BadField(f, f"must be at least {minimum}, got {out}")
    if maximum is not None and out > maximum:
        raise BadField(f, f"must be at most {maximum}, got a larger number")
    return out


def opt_float(v: object, f: str) -> float | None:
    if type(v) is float and math.isfinite(v):
        return v  # the common case
    if is_absent(v):
        return None
    out: float
    if isinstance(v, bool):
        raise BadField(f, f"expected a number, got {describe(v)}")
    if isinstance(v, int | float) or (isinstance(v, str) and _FLOAT_RE.match(v)):
        try:
            out = float(v)
        except OverflowError:
            raise BadField(f, "expected a finite number, got a number too large") from None
    else:
        raise BadField(f, f"expected a number, got {describe(v)}")
    if not math.isfinite(out):
        raise BadField(f, f"expected a finite number, got {out}")
    return out


_TRUE = {"true", "yes", "1"}


_FALSE = {"false", "no", "0"}


def opt_bool(v: object, f: str) -> bool | None:
    if v is True or v is False or v is None:
        return v  # the common case
    if is_absent(v):
        return None
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    if isinstance(v, str):
        low = v.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
    raise BadField(f, f"expected true or false, got {describe(v)}")


#: Dates a chunk's document may carry (effective dates): a year-1 or year-9999 date is a
#: broken export, and date arithmetic on it (a week later, a year earlier) would fail.
EARLIEST_DATE = dt.date(1900, 1, 1)
LATEST_DATE = dt.date(2199, 12, 31)

#: The earliest trace time accepted: the assistant's exports start long after it; an earlier
#: time is a broken clock or a hostile file.
EARLIEST_TRACE_TIME = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)

#: How far past the importing machine's clock a trace time may lie (clock skew between the
#: hosts that write traces and the one that imports them). A trace time later than that is
#: refused: it would otherwise become the "latest week" every weekly view is anchored on.
MAX_FUTURE = dt.timedelta(days=1)

#: The largest UTC offset in use (UTC+14:00; the most negative is UTC-12:00).
MAX_UTC_OFFSET = dt.timedelta(hours=14)


def _opt_date(v: object, f: str) -> dt.date | None:
    if is_absent(v):
        return None
    if not isinstance(v, str):
        raise BadField(f, f"expected a date (YYYY-MM-DD), got {describe(v)}")
    day = _good_dates.get(v)
    if day is not None:
        return day
    day = _read_date(v, f)
    if len(_good_dates) < 4096:  # chunks of one document repeat its date
        _good_dates[v] = day
    return day


_good_dates: dict[str, dt.date] = {}


def _read_date(v: str, f: str) -> dt.date:
    text = v.strip()
    try:
        if len(text) == 10:
            day = dt.date.fromisoformat(text)
        else:
            day = dt.datetime.fromisoformat(text).date()  # a full timestamp: keep its date
    except ValueError:
        raise BadField(f, f"not a valid date (YYYY-MM-DD): {quoted(v)}") from None
    if not EARLIEST_DATE <= day <= LATEST_DATE:
        raise BadField(f, f"{day.isoformat()} is outside {EARLIEST_DATE} to {LATEST_DATE}")
    return day


def _offset(hours: dt.timedelta) -> str:
    sign = "-" if hours < dt.timedelta(0) else "+"
    minutes = abs(int(hours.total_seconds())) // 60
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def checked_time(t: dt.datetime, f: str, given: object) -> dt.datetime:
    """``t`` (aware, UTC) if within EARLIEST_TRACE_TIME and the import's clock + MAX_FUTURE."""
    if t < EARLIEST_TRACE_TIME:
        raise BadField(f, f"{given!r} is before {EARLIEST_TRACE_TIME:%Y-%m-%d}")
    if t > dt.datetime.now(dt.UTC) + MAX_FUTURE:
        raise BadField(
            f, f"{given!r} is in the future (more than {MAX_FUTURE.days} day after this import)"
        )
    return t


def read_time(v: object, f: str) -> dt.datetime:
    if v is None:
        raise BadField(f, "required field is missing")
    if not isinstance(v, str) or not v.strip():
        raise BadField(f, f"expected an ISO 8601 time, got {describe(v)}")
    try:
        t = dt.datetime.fromisoformat(v.strip())
    except ValueError as exc:
        if "offset" in str(exc):  # +24:00 and beyond: Python refuses them itself
            raise BadField(
                f, f"the UTC offset of {v!r} is out of range (at most +-14:00)"
            ) from None
        raise BadField(f, f"not a valid ISO 8601 time: {v!r}") from None
    off = t.utcoffset()
    if off is not None and abs(off) > MAX_UTC_OFFSET:
        raise BadField(
            f, f"the UTC offset {_offset(off)} of {v!r} is out of range (at most +-14:00)"
        )
    try:
        utc = t.replace(tzinfo=dt.UTC) if t.tzinfo is None else t.astimezone(dt.UTC)
    except OverflowError:  # year 1 or 9999 shifted past the ends of the calendar
        utc = (dt.datetime.min if t.year < 2000 else dt.datetime.max).replace(tzinfo=dt.UTC)
    return checked_time(utc, f, v)


def json_text(v: object, f: str) -> Any:
    """Values that exporters write as JSON text (arrays, objects) are decoded here."""
    if isinstance(v, str) and v.lstrip()[:1] in ("[", "{"):
        try:
            return parse_json(v)
        except JsonProblem as exc:
            raise BadField(f if exc.field is None else f"{f}.{exc.field}", exc.reason) from None
    return v


def str_list(v: object, f: str) -> tuple[str, ...]:
    if is_absent(v):
        return ()
    v = json_text(v, f)
    if not isinstance(v, list):
        raise BadField(f, f"expected a list of text, got {describe(v)}")
    at_most(v, MAX_ITEMS, f, "items")
    out: list[str] = []
    for i, item in enumerate(v):
        out.append(read_ident(item, f"{f}.{i}"))
    return tuple(out)


MAX_TOPICS = 50


def opt_topics(v: object, f: str) -> tuple[str, ...] | None:
    """The question's topic keys from the topic classifier: a list of keys (``[]``: classified,
    no topic), or text with keys separated by commas; absent or null: not classified."""
    if is_absent(v):
        return None
    v = json_text(v, f)
    if isinstance(v, str):
        v = [part for part in re.split(r"[,;]", v) if part.strip()]
    if not isinstance(v, list):
        raise BadField(f, f"expected a list of topic keys, got {describe(v)}")
    if len(v) > MAX_TOPICS:
        raise BadField(f, f"more than {MAX_TOPICS} topics")
    return tuple(read_ident(item, f"{f}.{i}") for i, item in enumerate(v))


def read_decision(vocab: TraceVocabulary) -> Callable[[object, str], str | None]:
    def conv(v: object, f: str) -> str | None:
        text = opt_text(v, f)
        if text is None:
            return None
        key = text.strip().lower()
        if key not in vocab.decisions:
            allowed = ", ".join(sorted(vocab.decisions))
            raise BadField(f, f"unknown decision {text!r} (allowed: {allowed})")
        return key

    return conv


def read_reason(vocab: TraceVocabulary) -> Callable[[object, str], str | None]:
    def conv(v: object, f: str) -> str | None:
        text = opt_text(v, f)
        if text is None:
            return None
        key = text.strip()
        if key not in vocab.reason_codes:
            raise BadField(f, f"unknown reason code {text!r} (see the taxonomy's reason_codes)")
        return key

    return conv


def read_citations(v: object, f: str) -> tuple[Citation, ...]:
    if is_absent(v):
        return ()
    v = json_text(v, f)
    if not isinstance(v, list):
        raise BadField(f, f"expected a list of {{claim, chunk_ids}} objects, got {describe(v)}")
    at_most(v, MAX_CITATIONS, f, "citations")
    out: list[Citation] = []
    for i, item in enumerate(v):
        at = f"{f}.{i}"
        if not isinstance(item, dict):
            raise BadField(at, f"expected an object with claim and chunk_ids, got {describe(item)}")
        extra = sorted(set(item) - {"claim", "chunk_ids"})
        if extra:
            raise BadField(f"{at}.{extra[0]}", "unknown field (a citation has claim and chunk_ids)")
        claim = req_text(item.get("claim"), f"{at}.claim")
        out.append(Citation(claim, str_list(item.get("chunk_ids"), f"{at}.chunk_ids")))
    return tuple(out)


def read_versions(v: object, f: str) -> dict[str, str]:
    if is_absent(v):
        return {}
    if not isinstance(v, dict):
        raise BadField(f, f"expected an object of name: version, got {describe(v)}")
    at_most(v, MAX_FACTS, f, "versions")
    out: dict[str, str] = {}
    for key, val in v.items():
        if len(str(key)) > MAX_NAME:
            raise BadField(f, f"a version name is longer than {MAX_NAME} characters")
        if val is None:
            continue
        if isinstance(val, bool) or not isinstance(val, str | int | float):
            at = f if key == "v" else f"{f}.{key}"
            raise BadField(at, f"expected a version as text, got {describe(val)}")
        if nul_field(val) is not None or "\x00" in str(key):
            raise BadField(f"{f}.{key}", NUL_PROBLEM)
        if len(str(val)) > MAX_FACT_TEXT:
            raise BadField(f"{f}.{key}", f"longer than {MAX_FACT_TEXT:,} characters")
        out[str(key)] = str(val)
    return out


def attr_value(val: object, f: str) -> AttrValue:
    if isinstance(val, str) and "\x00" in val:
        raise BadField(f, NUL_PROBLEM)
    if isinstance(val, str) and len(val) > MAX_FACT_TEXT:
        raise BadField(f, f"longer than {MAX_FACT_TEXT:,} characters")
    if isinstance(val, str | bool | int):
        return val
    if isinstance(val, float):
        if not math.isfinite(val):
            raise BadField(f, f"expected a finite number, got {val}")
        return val
    raise BadField(f, f"expected text, a number or a boolean, got {describe(val)}")


def read_attributes(v: object, f: str) -> dict[str, AttrValue]:
    if is_absent(v):
        return {}
    if not isinstance(v, dict):
        raise BadField(f, f"expected an object of flat facts, got {describe(v)}")
    if any("\x00" in str(k) for k in v):
        raise BadField(f, NUL_PROBLEM)
    at_most(v, MAX_FACTS, f, "attributes")
    if any(len(str(k)) > MAX_NAME for k in v):
        raise BadField(f, f"an attribute name is longer than {MAX_NAME} characters")
    return {str(k): attr_value(val, f"{f}.{k}") for k, val in v.items() if val is not None}


# Chunks ---------------------------------------------------------------------------------

#: a chunk's fields in the canonical format (and the order of its stored columns)
CHUNK_KEYS = (
    "chunk_id",
    "doc_id",
    "doc_version",
    "rank",
    "score",
    "text",
    "filtered",
    "effective_date",
)


# accepted spellings of chunk fields in third-party documents (first found wins)
CHUNK_ALIASES: dict[str, tuple[str, ...]] = {
    "chunk_id": ("chunk_id", "id"),
    "doc_id": ("doc_id", "document_id"),
    "doc_version": ("doc_version", "version"),
    "rank": ("rank",),
    "score": ("score",),
    "text": ("text", "content", "page_content"),
    "filtered": ("filtered",),
    "effective_date": ("effective_date",),
}


_CHUNK_KEYSET = frozenset(CHUNK_KEYS)


def read_chunk(
    values: Mapping[str, Any], where: str, labels: Mapping[str, str] | None = None
) -> Chunk:
    """A chunk from canonical keys; a bad field is named ``labels[key]`` or ``where.key``.

    Labels are only built when something is wrong: this runs once per chunk of every trace.
    """
    get = values.get
    try:
        doc = get("doc_id")
        return Chunk(
            chunk_id=read_ident(get("chunk_id"), "chunk_id"),
            doc_id=None if is_absent(doc) else read_ident(doc, "doc_id"),
            doc_version=opt_int(get("doc_version"), "doc_version", minimum=1, maximum=INT_MAX),
            rank=opt_int(get("rank"), "rank", minimum=1, maximum=INT_MAX),
            score=opt_float(get("score"), "score"),
            text=text_or_empty(get("text"), "text"),
            filtered=bool(opt_bool(get("filtered"), "filtered")),
            effective_date=_opt_date(get("effective_date"), "effective_date"),
        )
    except BadField as exc:
        key = exc.fld or ""
        exc.fld = (labels or {}).get(key) or f"{where}.{key}"
        raise


def _plain_name(v: object) -> str | None:
    """``v`` as :func:`read_ident` reads it when it is plain text it takes as it is, else None."""
    if type(v) is str and 0 < len(v) <= 200 and "\x00" not in v and not v.isspace():
        return v.strip()
    return None


def plain_chunk(item: Mapping[str, Any]) -> Chunk | None:
    """The chunk :func:`read_chunk` would make of ``item`` when every value is of the plain kind
    exporters write (text, whole numbers in range, finite numbers, booleans, nulls, a date
    already read); None otherwise, and :func:`read_chunk` reads it (and names any problem)."""
    get = item.get
    cid = _plain_name(get("chunk_id"))
    if cid is None:
        return None
    doc = get("doc_id")
    if doc is not None:
        doc = _plain_name(doc)
        if doc is None:
            return None
    version = get("doc_version")
    if version is not None and not (type(version) is int and 1 <= version <= INT_MAX):
        return None
    rank = get("rank")
    if rank is not None and not (type(rank) is int and 1 <= rank <= INT_MAX):
        return None
    score = get("score")
    if score is not None and not (type(score) is float and math.isfinite(score)):
        return None
    text = get("text")
    if text is None:
        text = ""
    elif type(text) is str and len(text) <= MAX_TEXT and "\x00" not in text:
        if text.isspace():
            text = ""
    else:
        return None
    filtered = get("filtered")
    if filtered is not None and filtered is not True and filtered is not False:
        return None
    day = get("effective_date")
    if day is not None:
        day = _good_dates.get(day) if type(day) is str else None
        if day is None:
            return None
    return Chunk(cid, doc, version, rank, score, text, bool(filtered), day)


def aliased(doc: Mapping[str, Any], where: str) -> tuple[dict[str, Any], dict[str, str]]:
    """Chunk fields of a third-party document (on it, else in its metadata), with labels."""
    meta_raw = doc.get("metadata")
    meta = json_text(meta_raw, f"{where}.metadata") if meta_raw is not None else {}
    if not isinstance(meta, dict):
        raise BadField(f"{where}.metadata", f"expected an object, got {describe(meta)}")
    values: dict[str, Any] = {}
    labels: dict[str, str] = {"chunk_id": f"{where}.id"}
    for key, names in CHUNK_ALIASES.items():
        for src, label in ((doc, where), (meta, f"{where}.metadata")):
            hit = next((n for n in names if src.get(n) is not None), None)
            if hit is not None:
                values[key] = src[hit]
                labels[key] = f"{label}.{hit}"
                break
    return values, labels


def read_chunks(v: object, f: str) -> tuple[Chunk, ...]:
    """Canonical chunks (strict keys); rank defaults to the position in the list."""
    if is_absent(v):
        return ()
    v = json_text(v, f)
    if not isinstance(v, list):
        raise BadField(f, f"expected a list of chunk objects, got {describe(v)}")
    at_most(v, MAX_CHUNKS, f, "chunks")
    out: list[Chunk] = []
    for i, item in enumerate(v):
        at = f"{f}.{i}"
        if not isinstance(item, dict):
            raise BadField(at, f"expected a chunk object, got {describe(item)}")
        extra = item.keys() - _CHUNK_KEYSET
        if extra:
            raise BadField(
                f"{at}.{sorted(extra)[0]}",
                f"unknown field (chunk fields: {', '.join(CHUNK_KEYS)})",
            )
        c = plain_chunk(item) or read_chunk(item, at)
        out.append(c if c.rank is not None else dataclasses.replace(c, rank=i + 1))
    unique_chunks(out, f)
    return tuple(out)


def unique_chunks(chunks: Iterable[Chunk], f: str) -> None:
    seen: dict[str, int] = {}
    for i, c in enumerate(chunks):
        if c.chunk_id in seen:
            raise BadField(
                f"{f}.{i}.chunk_id",
                f"chunk id {c.chunk_id!r} appears twice (also item {seen[c.chunk_id]})",
            )
        seen[c.chunk_id] = i
