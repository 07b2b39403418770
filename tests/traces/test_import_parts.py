"""A large canonical file is checked in parts by several processes
(``review.traces.importparts``); the import is the one a single pass gives: the same report,
rejects file, stored traces in the file's order and first bad line, and nothing written when
it stops. The parts' byte ranges start at line starts and know their first line's number."""

from __future__ import annotations

import gc
import itertools
import json
import pickle
import types
import warnings
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from review.core.errors import InputError
from review.core.identity import SYSTEM
from review.traces import importparts
from review.traces.formats.canonical import trace_to_dict
from review.traces.importer import ImportReport, import_file
from review.traces.model import TraceVocabulary
from storage.db import make_engine, migrate, read_session
from storage.models import Trace, TraceChunk, TraceImport
from tests.helpers.traces import make_trace


def _line(trace_id: str, **kw: Any) -> str:
    return json.dumps(trace_to_dict(make_trace(trace_id, **kw)), ensure_ascii=False)


def _file(tmp_path: Path, bad: dict[int, bytes] | None = None, n: int = 90) -> Path:
    """``n`` canonical lines (a BOM first, blank lines, a repeated id across the file, a trace
    to redact), with the lines of ``bad`` (1-based position -> bytes) put in."""
    lines: list[bytes] = []
    for i in range(n):
        query = f"Mail me at person{i}@example.com about refunds?" if i % 17 == 0 else None
        kw = {"query": query} if query else {}
        lines.append(_line(f"p{i:03d}", **kw).encode())
        if i % 25 == 24:
            lines.append(b"")
    lines.append(_line("p005").encode())  # repeated: the first occurrence is stored
    for at, raw in sorted((bad or {}).items()):
        lines.insert(at - 1, raw)
    path = tmp_path / "traces.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b"\n".join(lines) + b"\n")
    return path


def _vocab() -> TraceVocabulary:
    return TraceVocabulary()


def _parts(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    monkeypatch.setattr(importparts, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(importparts, "available_cores", lambda: n)


def _stored(engine: Engine) -> list[tuple[str, str, int]]:
    with read_session(engine) as s:
        chunks = (
            select(func.count())
            .select_from(TraceChunk)
            .where(TraceChunk.trace_pk == Trace.id)
            .scalar_subquery()
        )
        rows = s.execute(select(Trace.trace_id, Trace.query, chunks).order_by(Trace.id)).all()
    return [(str(a), str(b), int(c)) for a, b, c in rows]


def _sequential(tmp_path: Path, path: Path, **kw: object) -> tuple[ImportReport, Engine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'one-pass.db'}")
    migrate(engine)
    return import_file(engine, SYSTEM, path, "canonical", **kw), engine  # type: ignore[arg-type]


def _same_report(a: ImportReport, b: ImportReport) -> None:
    keys = ("traces", "added", "skipped", "rejected", "restricted", "redactions", "problems")
    assert {k: getattr(a, k) for k in keys} == {k: getattr(b, k) for k in keys}


def test_parts_start_at_line_starts_and_know_their_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    contents = [
        b"",
        b"a",
        b"a\n",
        b"\n\n\n",
        b"one\ntwo\nthree",
        b"x" * 5000 + b"\n" + b"y\n" * 7 + b"z" * 3000,
        b"\n".join(b"line %d" % i for i in range(1000)) + b"\n",
    ]
    for data in contents:
        path.write_bytes(data)
        for n in (1, 2, 3, 4, 7):
            parts = importparts.split(path, n)
            assert parts[0].start == 0 and parts[-1].end == len(data)
            assert 1 <= len(parts) <= n
            for p, q in itertools.pairwise(parts):
                assert p.end == q.start and p.start < p.end
                assert data[q.start - 1 : q.start] == b"\n"  # a line start
            for p in parts:
                assert p.first_line == data[: p.start].count(b"\n") + 1


@pytest.mark.parametrize("n", [3])
def test_an_import_in_parts_is_the_import_in_one_pass(
    any_engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int
) -> None:
    bad = {
        3: b'{"trace_id": "bad-json"',
        40: _line("p999", decision="maybe").encode(),
        77: b'{"trace_id": "not-utf8 \xff"}',
    }
    path = _file(tmp_path, bad)
    one, one_engine = _sequential(tmp_path, path, skip_bad=True)
    one_rejects = Path(str(one.rejects_file)).read_text()
    _parts(monkeypatch, n)
    planned = importparts.plan_parts(path, "canonical", _vocab(), any_engine)
    assert planned is not None and len(planned.parts) == n
    got = import_file(any_engine, SYSTEM, path, "canonical", skip_bad=True)
    _same_report(got, one)
    assert got.rejected == 3 and got.skipped == 1 and got.redactions.get("email")
    assert Path(str(got.rejects_file)).read_text() == one_rejects
    assert [json.loads(x)["line"] for x in one_rejects.splitlines()] == [3, 40, 77]
    assert _stored(any_engine) == _stored(one_engine)
    again = import_file(any_engine, SYSTEM, path, "canonical", skip_bad=True)
    assert (again.added, again.skipped) == (0, got.traces)


@pytest.mark.parametrize("where", [2, 93])
def test_a_bad_line_in_any_part_stops_the_import_naming_it(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: int
) -> None:
    path = _file(tmp_path, {where: b'{"trace_id": "x", "decision": "perhaps"}', 96: b"[1]"})
    with pytest.raises(InputError) as one:
        _sequential(tmp_path, path)
    _parts(monkeypatch, 3)
    with pytest.raises(InputError) as got:
        import_file(engine, SYSTEM, path, "canonical")
    assert str(got.value) == str(one.value)
    assert f"line {where}:" in str(got.value)
    with read_session(engine) as s:
        assert s.scalar(select(func.count()).select_from(Trace)) == 0
        assert s.scalar(select(func.count()).select_from(TraceImport)) == 0


def test_a_part_whose_process_dies_fails_the_import_before_any_write(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _file(tmp_path)
    _parts(monkeypatch, 2)
    monkeypatch.setattr(importparts, "COMMAND", ("-c", "import sys; sys.exit(3)"))
    with pytest.raises(RuntimeError, match=r"part 2 of the file stopped without an answer"):
        import_file(engine, SYSTEM, path, "canonical")
    with read_session(engine) as s:
        assert s.scalar(select(func.count()).select_from(Trace)) == 0


def test_a_part_whose_process_dies_before_reading_its_task_leaves_no_pipe_open(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The task did not fit in the pipe and the process had already ended: sending it broke
    the pipe, which was then never closed (a ResourceWarning, so an error in the next test
    that collected it; this happened on a loaded CI machine)."""
    path = _file(tmp_path)
    _parts(monkeypatch, 2)
    monkeypatch.setattr(importparts, "COMMAND", ("-c", "import os; os.close(0)"))

    def too_big(obj: object, fh: Any, protocol: int | None = None) -> None:
        fh.write(b"x" * (4 << 20))  # the process ends without reading: the pipe breaks

    monkeypatch.setattr(
        importparts,
        "pickle",
        types.SimpleNamespace(dump=too_big, load=pickle.load, HIGHEST_PROTOCOL=5),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        with pytest.raises(RuntimeError, match=r"part 2 of the file stopped without an answer"):
            import_file(engine, SYSTEM, path, "canonical")
        gc.collect()
    with read_session(engine) as s:
        assert s.scalar(select(func.count()).select_from(Trace)) == 0


def test_small_files_other_formats_and_memory_databases_use_one_pass(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _file(tmp_path)
    monkeypatch.setattr(importparts, "available_cores", lambda: 4)
    assert importparts.plan_parts(path, "canonical", _vocab(), engine) is None  # small
    monkeypatch.setattr(importparts, "PARALLEL_MIN_BYTES", 0)
    assert importparts.plan_parts(path, "canonical", _vocab(), engine) is not None
    assert importparts.plan_parts(path, "otlp", _vocab(), engine) is None
    memory = make_engine("sqlite://")
    assert importparts.plan_parts(path, "canonical", _vocab(), memory) is None
    monkeypatch.setattr(importparts, "available_cores", lambda: 1)
    assert importparts.plan_parts(path, "canonical", _vocab(), engine) is None
