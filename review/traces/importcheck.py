"""Phase 1 of a trace import (:mod:`review.traces.importer`): reading a source and checking it.

Sources are read as lines of UTF-8 text (:func:`decoded_lines`: a line that is not UTF-8 or
is longer than :data:`MAX_LINE_BYTES` is refused, or rejected with ``skip_bad``) and parsed by
the format's parser. :class:`TraceCheck` validates every record, looks the valid traces up by id
(:data:`ID_WINDOW` at a time; stored ones are counted and go no further), redacts the others
(:class:`Redactor`) and spools their rows to a temporary file in batches. Nothing here writes
to the database; :mod:`review.traces.importer` writes the spooled batches."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import pickle
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any, BinaryIO

from sqlalchemy import Engine, select

from review.core import readable
from review.core.errors import InputError
from review.traces import tracerows
from review.traces.formats import FORMATS, detect_format, iter_traces
from review.traces.model import (
    ParsedTrace,
    Rejected,
    Trace,
    TraceItem,
    TraceVocabulary,
)
from review.traces.redaction import RedactionPolicy, redact
from review.traces.unknowndocs import UnknownDocuments
from storage.db import one_of, read_session
from storage.models import Trace as TraceRow

__all__ = [
    "MAX_LINE_BYTES",
    "MAX_PROBLEMS",
    "ImportReport",
    "Prepared",
    "ProgressFn",
    "Redactor",
    "TraceCheck",
    "first_line",
    "parse_binary",
    "resolve_format",
    "unwrap",
]


MAX_LINE_BYTES = 64 * 2**20  # a longer line is refused without being held in memory


MAX_PROBLEMS = 20  # rejected lines listed in the report (all are in the rejects file)


#: (phase, done, total): phase "checking" (total unknown, None) then "writing" (total known).
ProgressFn = Callable[[str, int, int | None], None]


# Column widths of storage.models.Trace/TraceChunk that a parsed value must fit.
_FITS: tuple[tuple[str, int], ...] = (
    ("user_role", 120),
    ("ranking_mode", 40),
    ("feedback", 60),
)


_ATTR_COLUMNS: tuple[tuple[str, int], ...] = (
    ("language", 20),
    ("customer_tier", 60),
    ("document_type", 60),
)


# ---------------------------------------------------------------------------------------
# Reading sources


def decoded_lines(
    fh: BinaryIO, source: str, skip_bad: bool, bad: list[Rejected], first: int = 1
) -> Iterator[str]:
    """Lines of a binary file as text. A line that is not UTF-8 (or longer than
    MAX_LINE_BYTES) raises InputError, or with ``skip_bad`` is put in ``bad`` and replaced
    by an empty line, so the parsers' line numbers stay right. ``first``: the number of the
    first line read (a part of a file, :mod:`review.traces.importparts`)."""
    n = first - 1
    while True:
        raw = fh.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        n += 1
        reason: str | None = None
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):  # drop the rest of the line
                raw = fh.readline(MAX_LINE_BYTES)
            reason = f"the line is longer than {MAX_LINE_BYTES // 2**20} MiB"
            shown = "(not kept: too long)"
        else:
            try:
                yield raw.decode("utf-8")
                continue
            except UnicodeDecodeError as exc:
                reason = (
                    f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at byte {exc.start + 1} "
                    "of the line)"
                )
                shown = raw.decode("utf-8", "backslashreplace").rstrip("\r\n")
        if not skip_bad:
            raise InputError(f"{source}: line {n}: {reason}")
        bad.append(Rejected(n, shown, reason))
        yield "\n"


def first_line(fh: BinaryIO) -> str:
    for _ in range(1000):
        raw = fh.readline(MAX_LINE_BYTES)
        if not raw:
            break
        text = raw.decode("utf-8", "replace").strip()
        if text:
            return text
    return ""


def resolve_format(fmt: str, first: str, name: str) -> str:
    if fmt == "auto":
        if not first:
            raise InputError(f"{name}: the file is empty")
        return detect_format(first, name)
    if fmt not in FORMATS:
        raise InputError(f"{name}: unknown trace format {fmt!r} (one of {', '.join(FORMATS)})")
    return fmt


def parse_binary(
    open_fh: Callable[[], BinaryIO],
    source: str,
    fmt: str,
    skip_bad: bool,
    vocab: TraceVocabulary,
    first: int = 1,
) -> Iterator[TraceItem]:
    """The items of a file in ``fmt``; ``first``: the number of its first line, when
    ``open_fh`` opens a part of a file that starts at that line (the parser is given that many
    blank lines before it, so its line numbers are the file's and a byte-order mark is only
    taken off the file's first line)."""
    with open_fh() as fh:
        bad: list[Rejected] = []
        lines: Iterable[str] = decoded_lines(fh, source, skip_bad, bad, first)
        if first > 1:
            lines = itertools.chain(itertools.repeat("\n", first - 1), lines)
        for item in iter_traces(lines, source, fmt, skip_bad, vocab=vocab):
            if bad:
                yield from bad
                bad.clear()
            yield item
        yield from bad


# ---------------------------------------------------------------------------------------
# Import


@dataclass
class ImportReport:
    """What an import did. ``traces`` counts the valid traces in the source."""

    import_id: int | None
    source: str
    format: str
    traces: int = 0
    added: int = 0
    skipped: int = 0
    rejected: int = 0
    restricted: int = 0
    redacted: bool = True
    redactions: dict[str, int] = field(default_factory=dict)
    rejects_file: str | None = None
    problems: list[str] = field(default_factory=list)
    #: the traces restricted because they cite documents the corpus has never seen
    unknown: UnknownDocuments = field(default_factory=UnknownDocuments)

    def summary(self) -> str:
        parts = [
            f"{readable.count(self.added, 'trace')} added",
            f"{self.skipped} already present or repeated in the file",
        ]
        if self.rejected:
            where = f" (see {self.rejects_file})" if self.rejects_file else ""
            parts.append(f"{self.rejected} rejected{where}")
        if self.restricted:
            parts.append(
                f"{self.restricted} restricted"
                + (
                    f" ({self.unknown.traces} cite documents the corpus has never seen)"
                    if self.unknown.traces
                    else ""
                )
            )
        if not self.redacted:
            parts.append("redaction was switched off")
        else:
            found = {k: v for k, v in self.redactions.items() if v}
            if found:
                parts.append("redacted: " + ", ".join(f"{v} {k}" for k, v in sorted(found.items())))
            else:
                parts.append("nothing needed redaction")
        return f"{self.source}: " + "; ".join(parts) + "."


class Redactor:
    """Applies a redaction policy field by field, exactly like
    :func:`review.traces.redaction.redact_trace`, but faster: a text in which no rule can match (one
    search of all patterns combined) is left as it is, results for repeated texts (chunks are
    retrieved again and again) are remembered, and unchanged parts are not copied."""

    _FLAGS = ((re.IGNORECASE, "i"), (re.MULTILINE, "m"), (re.DOTALL, "s"), (re.VERBOSE, "x"))
    _NONE: tuple[tuple[str, int], ...] = ()

    def __init__(self, policy: RedactionPolicy, cache_size: int = 8192) -> None:
        self.policy = policy
        parts: list[str] = []
        for rule in policy.rules():
            flags = "".join(ch for fl, ch in self._FLAGS if rule.pattern.flags & fl)
            parts.append(f"(?{flags}:{rule.pattern.pattern})" if flags else rule.pattern.pattern)
        self.any: re.Pattern[str] | None
        try:
            self.any = re.compile("|".join(f"(?:{p})" for p in parts)) if parts else None
        except re.error:  # pragma: no cover - fall back to running every rule
            self.any = None
        self.nothing = not parts
        self.cached = functools.lru_cache(maxsize=cache_size)(self._redact)

    def _redact(self, text: str) -> tuple[str, tuple[tuple[str, int], ...]]:
        if self.any is not None and not self.any.search(text):
            return text, self._NONE
        out, counts = redact(text, self.policy)
        return out, tuple((k, v) for k, v in counts.items() if v)

    def text(self, text: str, counts: dict[str, int]) -> str:
        if not text or self.nothing:
            return text
        out, found = self.cached(text) if len(text) <= 8192 else self._redact(text)
        for k, v in found:
            counts[k] = counts.get(k, 0) + v
        return out

    def trace(self, t: Trace) -> tuple[Trace, dict[str, int]]:
        counts: dict[str, int] = {}
        r = self.text
        chunks = t.chunks
        new_texts = [r(c.text, counts) for c in chunks]
        if any(n != c.text for n, c in zip(new_texts, chunks, strict=True)):
            chunks = tuple(
                c if n == c.text else dataclasses.replace(c, text=n)
                for n, c in zip(new_texts, chunks, strict=True)
            )
        claims = [r(c.claim, counts) for c in t.citations]
        citations = t.citations
        if any(n != c.claim for n, c in zip(claims, citations, strict=True)):
            citations = tuple(
                c if n == c.claim else dataclasses.replace(c, claim=n)
                for n, c in zip(claims, citations, strict=True)
            )
        query = r(t.query, counts)
        rewritten = None if t.rewritten_query is None else r(t.rewritten_query, counts)
        context = r(t.context_sent, counts)
        answer = r(t.answer_text, counts)
        if not counts:
            return t, counts
        redacted = dataclasses.replace(
            t,
            query=query,
            rewritten_query=rewritten,
            chunks=chunks,
            context_sent=context,
            answer_text=answer,
            citations=citations,
        )
        return redacted, counts


def fit_problem(t: Trace) -> str | None:
    """A value longer than its database column (None when everything fits)."""
    for name, width in _FITS:
        value = getattr(t, name)
        if value is not None and len(value) > width:
            return f"field {name}: longer than {width} characters"
    for key in ("policy", "model"):
        v = t.versions.get(key)
        if v is not None and len(v) > 200:
            return f"field versions.{key}: longer than 200 characters"
    for name, width in _ATTR_COLUMNS:
        a = t.attributes.get(name)
        if a is not None and len(str(a)) > width:
            return f"field attributes.{name}: longer than {width} characters"
    for i, c in enumerate(t.chunks):
        if len(c.chunk_id) > 300:
            return f"field chunks.{i}.chunk_id: longer than 300 characters"
        if c.doc_id is not None and len(c.doc_id) > 120:
            return f"field chunks.{i}.doc_id: longer than 120 characters"
    return None


def unwrap(item: TraceItem | Trace, index: int) -> tuple[Trace, int] | Rejected:
    if isinstance(item, Trace):
        return item, index
    if isinstance(item, ParsedTrace):
        return item.trace, item.line_no
    return item


#: One spooled trace: its row values (in the order of the batch's keys), its chunk tuples
#: (``tracerows.CHUNK_COLUMNS`` order) and its redaction counts.
Prepared = tuple[tuple[Any, ...], list[tuple[Any, ...]], dict[str, int]]

#: Traces whose ids are looked up together while checking (stored ones are not spooled).
ID_WINDOW = 1000

#: Positions of the chunk texts that repeat from trace to trace (shared in the spool).
_SHARED_CHUNK_TEXTS = tuple(
    tracerows.CHUNK_COLUMNS.index(c) for c in ("chunk_id", "doc_id", "text")
)


def stored_ids(engine: Engine, ids: list[str]) -> set[str]:
    """Which of ``ids`` are in the traces table (one indexed lookup)."""
    if not ids:
        return set()
    with read_session(engine) as s, tracerows.custom_plans(s.connection()):
        found = s.scalars(select(TraceRow.trace_id).where(one_of(s, TraceRow.trace_id, ids)))
        return set(found)


class TraceCheck:
    """Phase 1 (module docs): every record is validated (refused or rejected with its line);
    the valid traces are looked up by id a window at a time, and only those not stored yet
    are redacted, turned into rows and spooled. Stored ones are counted as skipped."""

    def __init__(
        self,
        engine: Engine,
        source: str,
        skip_bad: bool,
        rej_fh: IO[str] | None,
        redactor: Redactor | None,
        batch_size: int,
        spool: IO[bytes],
        report: ImportReport,
        progress: ProgressFn | None,
    ) -> None:
        self.engine = engine
        self.source = source
        self.skip_bad = skip_bad
        self.rej_fh = rej_fh
        self.redactor = redactor
        self.batch_size = batch_size
        self.spool = spool
        self.report = report
        self.progress = progress
        self.window: list[Trace] = []
        self.batch: list[Prepared] = []
        self.keys: tuple[str, ...] = ()
        self.stored = 0  # valid traces already in the database
        self.memo: dict[str, str] = {}  # texts of the batch's chunks (shared)

    def item(self, got: tuple[Trace, int] | Rejected) -> None:
        if isinstance(got, Rejected):
            self.reject(got)
            return
        t, line = got
        why = fit_problem(t)
        if why is not None:
            if not self.skip_bad:
                raise InputError(f"{self.source}: line {line}: {why}")
            self.reject(Rejected(line, json.dumps({"trace_id": t.trace_id}), why))
            return
        self.window.append(t)
        self.report.traces += 1
        if self.progress is not None and self.report.traces % 1000 == 0:
            self.progress("checking", self.report.traces, None)
        if len(self.window) >= ID_WINDOW:
            self.flush_window()

    def reject(self, problem: Rejected) -> None:
        report = self.report
        report.rejected += 1
        if len(report.problems) < MAX_PROBLEMS:
            report.problems.append(problem.message(self.source))
        write_rejected(self.rej_fh, problem)

    def flush_window(self) -> None:
        stored = stored_ids(self.engine, [t.trace_id for t in self.window])
        redactor = self.redactor
        for t in self.window:
            if t.trace_id in stored:
                self.stored += 1
                continue
            counts: dict[str, int] = {}
            if redactor is not None:
                t, counts = redactor.trace(t)
            # the restricted flag is set in the write transaction (_write_batch)
            values = tracerows.trace_values(t, counts)
            if not self.keys:
                self.keys = tuple(values)
            chunks = [self.shared(c) for c in tracerows.chunk_values(t)]
            self.batch.append((tuple(values.values()), chunks, counts))
            if len(self.batch) >= self.batch_size:
                self.dump()
        self.window = []

    def shared(self, chunk: tuple[Any, ...]) -> tuple[Any, ...]:
        """``chunk`` with its texts replaced by an equal text seen before in the batch, so
        that a chunk retrieved again and again is spooled once (pickle writes an object it
        has written before as a reference)."""
        memo = self.memo
        vals = list(chunk)
        for i in _SHARED_CHUNK_TEXTS:
            v = vals[i]
            if v is not None:
                vals[i] = memo.setdefault(v, v)
        return tuple(vals)

    def dump(self) -> None:
        pickle.dump((self.keys, self.batch), self.spool, protocol=pickle.HIGHEST_PROTOCOL)
        self.batch = []
        self.memo = {}

    def finish(self) -> None:
        if self.window:
            self.flush_window()
        if self.batch:
            self.dump()

    def run(self, items: Iterable[TraceItem | Trace]) -> None:
        """Check every item (Trace objects are numbered 1, 2, ... in messages), then spool
        what is left."""
        for i, item in enumerate(items, start=1):
            self.item(unwrap(item, i))
        self.finish()


def write_rejected(fh: IO[str] | None, problem: Rejected) -> None:
    if fh is not None:
        record = {"line": problem.line_no, "reason": problem.reason, "raw": problem.raw_line}
        fh.write(json.dumps(record, ensure_ascii=False) + "\n")
