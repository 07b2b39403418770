"""A large canonical JSONL file checked in parts at once (phase 1 of an import, on every core).

Checking a file (:mod:`review.traces.importcheck`: parse, validate, look up, redact, spool) is
Python work on one core, and it must end before the first write, so that a bad line leaves
the database untouched. A canonical JSONL file of :data:`PARALLEL_MIN_BYTES` or more is cut
into byte ranges that start at line starts (:func:`split`); this process checks the first
part while a spawned process checks each other part into its own spool and rejects file.
Every part knows the number of its first line, so messages and rejects name the file's lines.
The result is the one a single pass gives:

- the traces are spooled, and written, in the file's order (the parts' spools one after the
  other), so the first occurrence of a repeated trace id still wins;
- a bad line stops the import with the first bad line of the file (the parts are taken in
  order, and a part stops at its first bad line); nothing is written;
- with ``skip_bad`` the rejects file lists every rejected line in order, and the report's
  counts and first problems are those of a single pass.

A part whose process ends without an answer (killed, out of memory) fails the import before
anything is written."""

from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, BinaryIO, cast

from sqlalchemy import Engine

from review.traces.importcheck import (
    MAX_PROBLEMS,
    ImportReport,
    ProgressFn,
    Redactor,
    TraceCheck,
    parse_binary,
)
from review.traces.model import TraceItem, TraceVocabulary
from review.traces.redaction import RedactionPolicy
from storage.db import make_engine

__all__ = [
    "COMMAND",
    "PARALLEL_MIN_BYTES",
    "Part",
    "PartWorkers",
    "Parts",
    "available_cores",
    "checked_parts",
    "plan_parts",
    "split",
]

#: Files smaller than this are checked in one pass (starting a process costs about a second).
PARALLEL_MIN_BYTES = 32 * 2**20

#: At most this many parts, however many cores there are.
MAX_PARTS = 4

#: Bytes read at a time while looking for a line's end or counting lines.
_READ = 2**20


@dataclass(frozen=True)
class Part:
    """Bytes ``start`` (a line start) up to ``end`` of a file; ``first_line``: the number of
    the line at ``start``."""

    start: int
    end: int
    first_line: int


def _line_start_after(fh: BinaryIO, pos: int) -> int:
    """The first line start at or after ``pos``: ``pos`` itself when a newline ends the byte
    before it, otherwise the byte after the next newline (or the end of the file)."""
    if pos == 0:
        return 0
    fh.seek(pos - 1)
    while True:
        block = fh.read(_READ)
        if not block:
            return fh.tell()
        at = block.find(b"\n")
        if at >= 0:
            return fh.tell() - len(block) + at + 1


def split(path: Path, parts: int) -> list[Part]:
    """``path`` cut into at most ``parts`` parts of about equal size, each starting at a line
    start (fewer when lines are long; one when the file is empty)."""
    size = path.stat().st_size
    starts = [0]
    with path.open("rb") as fh:
        for k in range(1, max(1, parts)):
            at = _line_start_after(fh, size * k // parts)
            if starts[-1] < at < size:
                starts.append(at)
        ends = [*starts[1:], size]
        # the number of each part's first line: the newlines before its start, plus one
        firsts = [1]
        fh.seek(0)
        seen, pos = 0, 0
        for start in starts[1:]:
            while pos < start:
                block = fh.read(min(_READ, start - pos))
                seen += block.count(b"\n")
                pos += len(block)
            firsts.append(seen + 1)
    return [Part(s, e, f) for s, e, f in zip(starts, ends, firsts, strict=True)]


class _Range:
    """The bytes ``start`` to ``end`` of a file, read by lines (what
    :func:`review.traces.importcheck.decoded_lines` needs of a file)."""

    def __init__(self, path: Path, part: Part) -> None:
        self.fh = path.open("rb")
        self.fh.seek(part.start)
        self.left = part.end - part.start

    def readline(self, limit: int = -1) -> bytes:
        if self.left <= 0:
            return b""
        raw = self.fh.readline(self.left if limit < 0 else min(limit, self.left))
        self.left -= len(raw)
        return raw

    def __enter__(self) -> _Range:
        return self

    def __exit__(self, *exc: object) -> None:
        self.fh.close()


def part_items(
    path: Path, part: Part, source: str, fmt: str, skip_bad: bool, vocab: TraceVocabulary
) -> Iterator[TraceItem]:
    """The items of one part, numbered by the file's lines."""
    return parse_binary(
        lambda: cast(BinaryIO, _Range(path, part)), source, fmt, skip_bad, vocab, part.first_line
    )


def available_cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


#: How a worker process is started (after the Python executable).
COMMAND: tuple[str, ...] = ("-m", "review.traces.importparts")


@dataclass(frozen=True)
class Parts:
    """How a file is checked: its parts (the first checked here) and the check's settings."""

    path: Path
    parts: tuple[Part, ...]
    fmt: str
    vocab: TraceVocabulary
    url: str  # the database, for each part's look-up of stored trace ids

    def first_items(self, source: str, skip_bad: bool) -> Iterator[TraceItem]:
        return part_items(self.path, self.parts[0], source, self.fmt, skip_bad, self.vocab)


def plan_parts(path: Path, fmt: str, vocab: TraceVocabulary, engine: Engine) -> Parts | None:
    """How to check ``path`` in parts, or None for one pass: a file under
    :data:`PARALLEL_MIN_BYTES`, a format other than canonical JSONL, a machine with one core,
    or a database other processes cannot open (SQLite in memory)."""
    n = min(MAX_PARTS, available_cores())
    if fmt != "canonical" or n < 2 or path.stat().st_size < PARALLEL_MIN_BYTES:
        return None
    if engine.dialect.name == "sqlite" and engine.url.database in (None, "", ":memory:"):
        return None
    parts = split(path, n)
    if len(parts) < 2:
        return None
    url = engine.url.render_as_string(hide_password=False)
    return Parts(path, tuple(parts), fmt, vocab, url)


@dataclass
class _Task:
    parts: Parts
    index: int
    source: str
    skip_bad: bool
    policy: RedactionPolicy | None
    batch_size: int
    folder: str
    rejects: bool


@dataclass
class PartResult:
    """What checking one part found; its spool (and rejects) are files in the check's
    folder."""

    traces: int = 0
    rejected: int = 0
    stored: int = 0
    problems: list[str] = field(default_factory=list)
    spool: str = ""
    rejects: str | None = None


def _checked(task: _Task, progress: ProgressFn) -> PartResult:
    parts = task.parts
    part = parts.parts[task.index]
    folder = Path(task.folder)
    engine = make_engine(parts.url)
    report = ImportReport(None, task.source, parts.fmt)
    out = PartResult(spool=str(folder / f"part-{task.index}.spool"))
    if task.rejects:
        out.rejects = str(folder / f"part-{task.index}.rejects.jsonl")
    try:
        with open(out.spool, "wb") as spool, contextlib.ExitStack() as stack:
            rej: IO[str] | None = None
            if out.rejects is not None:
                rej = stack.enter_context(open(out.rejects, "w", encoding="utf-8"))
            redactor = Redactor(task.policy) if task.policy is not None else None
            check = TraceCheck(
                engine,
                task.source,
                task.skip_bad,
                rej,
                redactor,
                task.batch_size,
                spool,
                report,
                progress,
            )
            check.run(
                part_items(parts.path, part, task.source, parts.fmt, task.skip_bad, parts.vocab)
            )
    finally:
        engine.dispose()
    out.traces, out.rejected, out.stored = report.traces, report.rejected, check.stored
    out.problems = report.problems
    return out


def _serve(stdin: BinaryIO, stdout: BinaryIO) -> None:
    """A worker process (``python -m review.traces.importparts``): read a :class:`_Task`
    from ``stdin``; write ("progress", traces) messages, then ("ok", :class:`PartResult`) or
    ("error", the exception that stopped it), pickled, to ``stdout``."""

    def send(message: tuple[str, Any]) -> None:
        pickle.dump(message, stdout, protocol=pickle.HIGHEST_PROTOCOL)
        stdout.flush()

    try:
        task = pickle.load(stdin)
        send(("ok", _checked(task, lambda _phase, done, _total: send(("progress", done)))))
    except BaseException as exc:  # the error is the parent's to raise
        try:
            send(("error", exc))
        except Exception:  # an error that cannot be pickled goes as its text
            send(("error", RuntimeError(str(exc))))


class _Worker:
    """One process checking one part: started with its task on its standard input; a thread
    reads what it sends (its progress, then its result)."""

    def __init__(self, task: _Task) -> None:
        self.index = task.index
        self.checked = 0
        self.answer: tuple[str, Any] | None = None
        self.errors = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        root = str(Path(__file__).resolve().parents[2])
        path = os.environ.get("PYTHONPATH")
        env = dict(os.environ, PYTHONPATH=root if not path else os.pathsep.join([root, path]))
        self.proc = subprocess.Popen(
            [sys.executable, *COMMAND],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errors,
            env=env,
        )
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            with contextlib.suppress(BrokenPipeError):  # a process that died is reported later
                pickle.dump(task, stdin, protocol=pickle.HIGHEST_PROTOCOL)
        finally:
            with contextlib.suppress(BrokenPipeError):  # closed even when the flush fails
                stdin.close()
        self.reader = threading.Thread(target=self._read, name="wb-import-part", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        try:
            while True:
                kind, value = pickle.load(out)
                if kind == "progress":
                    self.checked = int(value)
                else:
                    self.answer = (kind, value)
                    return
        except Exception:  # the process ended without an answer (results() says so)
            return

    def result(self) -> PartResult:
        self.reader.join()
        self.proc.wait()
        if self.answer is None:
            self.errors.seek(0)
            tail = self.errors.read()[-2000:].decode("utf-8", "replace").strip()
            raise RuntimeError(
                f"checking part {self.index + 1} of the file stopped without an answer "
                f"(exit code {self.proc.returncode}); nothing was written"
                + (f": {tail}" if tail else "")
            )
        kind, value = self.answer
        if kind == "error":
            raise value
        return cast(PartResult, value)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.reader.join()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.errors.close()


class PartWorkers:
    """The processes checking parts 2, 3, ... of a file."""

    def __init__(self, tasks: Sequence[_Task]) -> None:
        self.running = [_Worker(task) for task in tasks]

    def checked(self) -> int:
        """Valid traces the other parts have checked so far (for the progress bar)."""
        return sum(w.checked for w in self.running)

    def results(self) -> list[PartResult]:
        """Each part's result, in order; the first part that failed raises its error."""
        return [w.result() for w in self.running]

    def stop(self) -> None:
        for w in self.running:
            w.stop()


@contextlib.contextmanager
def checked_parts(
    parts: Parts,
    source: str,
    skip_bad: bool,
    policy: RedactionPolicy | None,
    batch_size: int,
    rejects: bool,
) -> Iterator[PartWorkers]:
    """Start checking every part but the first (the caller checks that one); yields the
    workers (:meth:`PartWorkers.results` waits for them). On leaving, unfinished workers are
    stopped and their files deleted."""
    folder = tempfile.mkdtemp(prefix="wb-import-parts-")
    tasks = [
        _Task(parts, k, source, skip_bad, policy, batch_size, folder, rejects)
        for k in range(1, len(parts.parts))
    ]
    workers = PartWorkers(tasks)
    try:
        yield workers
    finally:
        workers.stop()
        shutil.rmtree(folder, ignore_errors=True)


def merge(report: ImportReport, results: Sequence[PartResult], rej_fh: IO[str] | None) -> int:
    """Add the other parts' counts, first problems and rejects (in order) to the first part's
    ``report`` and rejects file; returns the traces they found stored."""
    stored = 0
    for r in results:
        report.traces += r.traces
        report.rejected += r.rejected
        stored += r.stored
        room = MAX_PROBLEMS - len(report.problems)
        report.problems.extend(r.problems[: max(room, 0)])
        if rej_fh is not None and r.rejects is not None:
            with open(r.rejects, encoding="utf-8") as fh:
                shutil.copyfileobj(fh, rej_fh)
    return stored


if __name__ == "__main__":
    # the messages go to the real standard output alone: anything printed goes to stderr
    _messages = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # run as the imported module, so that what is sent pickles under its name, not __main__
    from review.traces import importparts

    importparts._serve(sys.stdin.buffer, _messages)
    _messages.close()
