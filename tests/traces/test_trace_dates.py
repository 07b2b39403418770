"""Dates and numbers in every trace format: a UTC offset no place uses, a time before
EARLIEST_TRACE_TIME or more than MAX_FUTURE after the import, and NaN or infinite scores are
refused with the line and the field, and set aside (each trace on its own) under skip-bad."""

from __future__ import annotations

import datetime as dt
import io
import re
from pathlib import Path

import pytest
from sqlalchemy import Engine

from review.core.errors import InputError
from review.core.identity import SYSTEM
from review.traces import importer
from review.traces.formats import iter_traces
from review.traces.formats.fields import EARLIEST_TRACE_TIME, MAX_FUTURE
from review.traces.model import ParsedTrace, Rejected
from tests.helpers.paths import TRACE_DATA as DATA

FILES = {
    "canonical": "canonical.jsonl",
    "csv": "flat.csv",
    "langfuse": "langfuse.jsonl",
    "otlp": "otlp_openinference.jsonl",
}
# each format's time field as the file writes it, and the field the error names
TIME_FIELD = {
    "canonical": (r'("time": ")[^"]+(")', "time"),
    "csv": (r"^(csv-\d+,)[^,]+(,)", "time"),
    "langfuse": (r'("startTime": ")[^"]+(")', "startTime"),
    "otlp": (r'("startTimeUnixNano": ")[^"]+(")', r"spans\.\d+\.startTimeUnixNano"),
}


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _iso(t: dt.datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def _ns(t: dt.datetime) -> str:
    return str(int(t.timestamp()) * 10**9)


def _with_time(fmt: str, value: str) -> str:
    pattern, _ = TIME_FIELD[fmt]
    text = (DATA / FILES[fmt]).read_text(encoding="utf-8")
    out, n = re.subn(pattern, lambda m: m.group(1) + value + m.group(2), text, flags=re.M)
    assert n >= 2
    return out


def _read(fmt: str, text: str, skip_bad: bool = False) -> list[object]:
    return list(iter_traces(io.StringIO(text), f"t.{fmt}", fmt, skip_bad))


FUTURE = _now() + MAX_FUTURE + dt.timedelta(hours=2)
PAST = EARLIEST_TRACE_TIME - dt.timedelta(days=1)
# ids are fixed words: the test runs in parallel workers (pytest-xdist), which must collect the
# same test names, and a name made of "now + 1 day" differs between them
TEXT_TIMES = [
    pytest.param("2025-06-06T08:00:00+25:00", "UTC offset of .* is out of range", id="offset+25"),
    pytest.param(
        "2025-06-06T08:00:00+14:30", r"UTC offset \+14:30 .* is out of range", id="offset+14:30"
    ),
    pytest.param(
        "2025-06-06T08:00:00-14:30", r"UTC offset -14:30 .* is out of range", id="offset-14:30"
    ),
    pytest.param(
        _iso(FUTURE), r"is in the future \(more than 1 day after this import\)", id="future"
    ),
    pytest.param("9999-12-31T23:59:59-01:00", "is in the future", id="year-9999"),
    pytest.param("0001-01-01T00:00:00+01:00", "is before 2000-01-01", id="year-1"),
    pytest.param(_iso(PAST), "is before 2000-01-01", id="before-2000"),
]


@pytest.mark.parametrize("fmt", ["canonical", "csv", "langfuse"])
@pytest.mark.parametrize(("value", "reason"), TEXT_TIMES)
def test_times_out_of_range_are_refused_with_line_and_field(
    fmt: str, value: str, reason: str
) -> None:
    text = _with_time(fmt, value)
    field = TIME_FIELD[fmt][1]
    with pytest.raises(InputError, match=rf"t\.{fmt}: line \d+: .*field {field}: .*{reason}"):
        _read(fmt, text)
    items = _read(fmt, text, skip_bad=True)
    assert items and all(isinstance(i, Rejected) for i in items)
    assert all(re.search(reason, i.reason) for i in items if isinstance(i, Rejected))


@pytest.mark.parametrize(
    ("when", "reason"), [(FUTURE, "is in the future"), (PAST, "is before 2000-01-01")]
)
def test_otlp_times_out_of_range_are_refused_with_line_and_field(
    when: dt.datetime, reason: str
) -> None:
    text = _with_time("otlp", _ns(when))
    with pytest.raises(InputError, match=rf"line \d+: .*startTimeUnixNano: .*{reason}"):
        _read("otlp", text)
    items = _read("otlp", text, skip_bad=True)
    assert items and all(isinstance(i, Rejected) for i in items)


def test_one_bad_time_sets_aside_only_its_trace_under_skip_bad() -> None:
    lines = (DATA / "canonical.jsonl").read_text(encoding="utf-8").splitlines()
    lines[1] = re.sub(r'"time": "[^"]+"', '"time": "9999-01-01T00:00:00Z"', lines[1])
    items = _read("canonical", "\n".join(lines), skip_bad=True)
    assert [type(i).__name__ for i in items] == ["ParsedTrace", "Rejected", *["ParsedTrace"] * 3]
    assert isinstance(items[1], Rejected) and items[1].line_no == 2


def test_a_time_just_inside_the_bounds_is_read() -> None:
    near = _now() + MAX_FUTURE - dt.timedelta(minutes=5)
    for fmt, value in (("canonical", _iso(near)), ("canonical", "2000-01-01T00:00:00Z")):
        items = _read(fmt, _with_time(fmt, value))
        assert all(isinstance(i, ParsedTrace) for i in items)
    items = _read("otlp", _with_time("otlp", _ns(near)))
    assert all(isinstance(i, ParsedTrace) for i in items)


@pytest.mark.parametrize(
    ("fmt", "old", "new", "field"),
    [
        ("canonical", '"top_score": 0.83', '"top_score": NaN', "top_score"),
        ("canonical", '"score": 0.83', '"score": Infinity', r"chunks\.0\.score"),
        ("csv", ",0.86,", ",nan,", "top_score"),
        ("csv", ",0.86,", ",inf,", "top_score"),
        ("langfuse", '"top_score": 0.84', '"top_score": NaN', r"rag\.top_score"),
        ("otlp", '{"doubleValue": 0.83}', '{"doubleValue": "NaN"}', r"document\.score"),
    ],
)
def test_scores_that_are_not_finite_numbers_are_refused(
    fmt: str, old: str, new: str, field: str
) -> None:
    files = {**FILES, "otlp": "otlp_openinference.jsonl"}
    text = (DATA / files[fmt]).read_text(encoding="utf-8")
    assert old in text
    bad = text.replace(old, new, 1)
    with pytest.raises(InputError, match=rf"line \d+: .*{field}.*"):
        _read(fmt, bad)
    items = _read(fmt, bad, skip_bad=True)
    assert sum(isinstance(i, Rejected) for i in items) == 1


def test_the_import_sets_out_of_range_traces_aside_under_skip_bad(
    engine: Engine, tmp_path: Path
) -> None:
    """The whole import (as `workbench import-traces --skip-bad` and the Traces page run it):
    the bad traces go to the rejects file with their line and reason, the rest are stored; without
    skip-bad nothing is stored."""
    lines = (DATA / "canonical.jsonl").read_text(encoding="utf-8").splitlines()
    lines[1] = re.sub(r'"time": "[^"]+"', f'"time": "{_iso(FUTURE)}"', lines[1])
    lines[3] = re.sub(r'"time": "[^"]+"', '"time": "2025-06-03T09:00:00+15:00"', lines[3])
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"line 2: field time: .* is in the future"):
        importer.import_file(engine, SYSTEM, path, "canonical")
    rejects = tmp_path / "rejects.jsonl"
    report = importer.import_file(
        engine, SYSTEM, path, "canonical", skip_bad=True, rejects_path=rejects
    )
    assert (report.added, report.rejected) == (len(lines) - 2, 2)
    assert any("line 2: field time" in p for p in report.problems)
    assert any("line 4: field time: the UTC offset +15:00" in p for p in report.problems)
    assert len(rejects.read_text(encoding="utf-8").splitlines()) == 2
