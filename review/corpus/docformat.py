"""Parsing documents: Markdown/text with YAML front matter, or JSONL; and body structure.

Parsers are pure: they take text and a source name and return validated records, or raise
InputError naming the source, the line and the field. Nothing here touches the database.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from review.core.errors import InputError
from review.core.records import JsonProblem, json_lines, parse_json, validate_record
from review.core.taxonomy import Taxonomy
from review.core.yamlstrict import load_yaml_text
from review.corpus import markdown

DOC_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,119}$")
REF_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,119}(@[0-9]+)?$")
MAX_BODY_CHARS = 2_000_000
#: Effective dates a document may carry (year 1 or 9999 is a typo, and date arithmetic on it,
#: such as the case builder's "a year earlier", would leave the calendar)
EARLIEST_DATE = dt.date(1900, 1, 1)
LATEST_DATE = dt.date(2199, 12, 31)
#: The longest front matter read (a real one is a few hundred characters; the YAML parser is
#: pure Python, so an unbounded block would hold a core for as long as it is long).
MAX_FRONT_MATTER_CHARS = 20_000


class DocumentIn(BaseModel):
    """One document version as it arrives from a file."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    doc_id: str
    version: int = Field(ge=1, le=2**31 - 1)  # the database's integer columns hold no more
    title: str = Field(min_length=1, max_length=500)
    effective_date: dt.date | None = None
    superseded_by: str | None = Field(default=None, max_length=140)
    authority: str = Field(max_length=60)  # vocabulary keys (checked against the taxonomy)
    owner: str = Field(min_length=1, max_length=200)
    access_scope: str = Field(max_length=60)
    jurisdiction: str = Field(max_length=60)
    body: str = Field(min_length=1, max_length=MAX_BODY_CHARS)
    # where the record was read (``file: line N``) and the line of each front-matter key, so a
    # check made later (against the corpus) still names the file, the line and the field
    _source: str = PrivateAttr(default="")
    _line: int = PrivateAttr(default=0)
    _key_lines: dict[str, int] = PrivateAttr(default_factory=dict)

    def where(self, fld: str) -> str:
        """``file: line N: field F`` for ``fld`` of this record (the version when unknown)."""
        if not self._source:
            return f"{self.doc_id}@{self.version}: field {fld}"
        line = self._key_lines.get(fld, self._line)
        return f"{self._source}: line {line}: field {fld}"

    @field_validator("doc_id")
    @classmethod
    def _doc_id(cls, v: str) -> str:
        if not DOC_ID_RE.match(v):
            raise ValueError("must be letters, digits, '.', '_' or '-' (at most 120 characters)")
        return v

    @field_validator("effective_date")
    @classmethod
    def _effective(cls, v: dt.date | None) -> dt.date | None:
        if v is not None and not EARLIEST_DATE <= v <= LATEST_DATE:
            raise ValueError(f"must lie between {EARLIEST_DATE} and {LATEST_DATE}")
        return v

    @field_validator("superseded_by")
    @classmethod
    def _ref(cls, v: str | None) -> str | None:
        if v in (None, ""):
            return None
        assert v is not None
        if not REF_RE.match(v):
            raise ValueError("must be a document id, optionally with @version (e.g. POL-1@2)")
        return v

    @field_validator("version", mode="before")
    @classmethod
    def _version(cls, v: Any) -> Any:
        if isinstance(v, bool) or (isinstance(v, float) and not v.is_integer()):
            raise ValueError("must be a whole number")
        return v

    def sha256(self) -> str:
        return hashlib.sha256(self.body.encode("utf-8")).hexdigest()

    def check_vocabulary(self, tax: Taxonomy) -> list[tuple[str, str]]:
        problems = []
        for fname, section in (
            ("authority", tax.authorities),
            ("access_scope", tax.access_scopes),
            ("jurisdiction", tax.jurisdictions),
        ):
            value = getattr(self, fname)
            if value not in section:
                problems.append((fname, f"{value!r} is not one of: {', '.join(section)}"))
        return problems


def _build(data: Any, source: str, line: int, tax: Taxonomy) -> DocumentIn:
    doc = validate_record(DocumentIn, data, f"{source}: line {line}")
    problems = doc.check_vocabulary(tax)
    if problems:
        fld, msg = problems[0]
        raise InputError(f"{source}: line {line}: field {fld}: {msg}")
    doc._source, doc._line = source, line
    return doc


def parse_markdown(text: str, source: str, tax: Taxonomy) -> DocumentIn:
    """A Markdown or text file with a YAML front matter block between ``---`` lines."""
    if "\x00" in text:
        raise InputError(f"{source}: line 1: the file is binary, not text")
    lines = text.splitlines()
    end = _front_matter_end(lines, source)
    meta = _front_matter(lines[1:end], source)
    body = "\n".join(lines[end + 1 :]).strip("\n")
    if "body" in meta:
        raise InputError(f"{source}: line 2: field body: the body goes after the front matter")
    data = {**meta, "body": body}
    for key in ("effective_date",):
        if isinstance(data.get(key), dt.datetime):
            data[key] = data[key].date()
    meta_lines = lines[1:end]
    # report the line of the offending front-matter key when we can
    try:
        doc = _build(data, source, 2, tax)
    except InputError as exc:
        m = re.search(r"field ([A-Za-z_]+)", str(exc))
        at = _key_line(meta_lines, m.group(1)) if m else None
        if at is not None:
            raise InputError(str(exc).replace("line 2", f"line {at}", 1)) from None
        raise
    for i, line in enumerate(meta_lines, start=2):
        key = line.split(":", 1)[0].strip()
        if key in meta:
            doc._key_lines.setdefault(key, i)
    return doc


def _front_matter_end(lines: Sequence[str], source: str) -> int:
    """The index of the line that closes the front matter the file starts with."""
    if not lines or lines[0].strip() != "---":
        raise InputError(
            f"{source}: line 1: front matter: the file must start with a '---' line "
            "followed by YAML metadata (doc_id, version, title, ...) and a closing '---'"
        )
    try:
        return next(i for i in range(1, len(lines)) if lines[i].strip() in ("---", "..."))
    except StopIteration:
        raise InputError(
            f"{source}: line 1: front matter: no closing '---' line after the metadata"
        ) from None


def _front_matter(meta_lines: Sequence[str], source: str) -> dict[Any, Any]:
    """The front matter's key: value pairs (its lines start at the file's line 2)."""
    meta_text = "\n".join(meta_lines)
    if len(meta_text) > MAX_FRONT_MATTER_CHARS:
        raise InputError(
            f"{source}: line 2: front matter: longer than {MAX_FRONT_MATTER_CHARS:,} characters "
            f"({len(meta_text):,}); the metadata is a few short keys"
        )
    try:
        meta = load_yaml_text(meta_text, source, max_chars=MAX_FRONT_MATTER_CHARS)
    except InputError as exc:
        # re-base the YAML line number on the file
        msg = str(exc)
        m = re.search(r"line (\d+)", msg)
        if m:
            msg = msg.replace(f"line {m.group(1)}", f"line {int(m.group(1)) + 1}", 1)
        raise InputError(msg.replace(f"{source}: ", f"{source}: ", 1)) from None
    if not isinstance(meta, dict):
        raise InputError(f"{source}: line 2: front matter: expected key: value pairs")
    return meta


def _key_line(meta_lines: Sequence[str], key: str) -> int | None:
    """The file's line of the first front-matter line that sets ``key``."""
    for i, line in enumerate(meta_lines, start=2):
        if line.split(":", 1)[0].strip() == key:
            return i
    return None


def iter_jsonl(lines: Iterable[str], source: str, tax: Taxonomy) -> Iterator[DocumentIn]:
    """One JSON object per line; blank lines are allowed. Errors name the line and field."""
    for n, _raw, text in json_lines(lines):
        try:
            data = parse_json(text)
        except JsonProblem as exc:
            raise exc.where(f"{source}: line {n}") from None
        yield _build(data, source, n, tax)


# ------------------------------------------------------------------------------------------
# Body structure: headings, paragraphs, lists, tables, footnotes (for display as text).


@dataclass
class Block:
    kind: str  # heading | paragraph | list | table | footnote
    text: str = ""
    level: int = 0
    rows: list[list[str]] = field(default_factory=list)


def _cells(line: str) -> list[str]:
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|"):
        s = s[:-1]
    return [c.strip() for c in s.split("|")]


def parse_blocks(body: str) -> list[Block]:
    """The body's blocks (read by :func:`review.corpus.markdown.scan`) with their text kept
    verbatim for display as text (never rendered)."""
    blocks: list[Block] = []
    for b in markdown.scan(body):
        texts = [body[x:y] for x, y in b.lines]
        if b.kind == "heading":
            level = len(body[b.start : b.content].strip())
            blocks.append(Block(kind="heading", text=body[b.content : b.end].strip(), level=level))
        elif b.kind == "table":
            header = _cells(texts[0])
            rows = [header] + [(_cells(t) + [""] * len(header))[: len(header)] for t in texts[2:]]
            blocks.append(Block(kind="table", rows=rows))
        elif b.kind == "footnote":
            m = markdown.FOOTNOTE_DEF.match(body, b.start)
            label = m.group(1) if m else ""
            text = body[b.content : b.lines[0][1]] + "".join("\n" + t.strip() for t in texts[1:])
            blocks.append(Block(kind="footnote", text=text, rows=[[label]]))
        else:
            blocks.append(Block(kind=b.kind, text="\n".join(texts)))
    return blocks


_CLOSING_HASHES = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_FOOTNOTE_REF = re.compile(r"\[\^([^\]\s]+)\]")
_BULLET = re.compile(r"^(\s*)[-*+][ \t]+")


def _refs(text: str) -> str:
    """Footnote references ``[^1]`` as ``[1]``."""
    return _FOOTNOTE_REF.sub(r"[\1]", text)


def readable_blocks(body: str) -> list[Block]:
    """The body's blocks as a reader sees them, without the marks that only structure it: a
    heading's text (without its ``#`` marks, also a closing run of ``#``) with its level; a
    list with ``•`` for ``-``, ``*`` and ``+`` items (numbers and indentation kept); a
    footnote's label and text; footnote references ``[^1]`` as ``[1]``; tables as parsed
    cells. The text stays text: pages show it through ``st.text`` and the one escaper, never
    as Markdown or HTML."""
    out: list[Block] = []
    for b in parse_blocks(body):
        if b.kind == "heading":
            text = _CLOSING_HASHES.sub("", b.text).strip()
            out.append(Block(kind="heading", text=_refs(text), level=b.level))
        elif b.kind == "table":
            out.append(Block(kind="table", rows=[[_refs(c) for c in row] for row in b.rows]))
        elif b.kind == "list":
            items = [_BULLET.sub(lambda m: m.group(1) + "• ", ln) for ln in b.text.split("\n")]
            out.append(Block(kind="list", text=_refs("\n".join(items))))
        else:
            out.append(Block(kind=b.kind, text=_refs(b.text), level=b.level, rows=b.rows))
    return out


def table_frame(rows: list[list[str]]) -> pd.DataFrame:
    """A table block as a frame: the first row is the header; an empty header cell is named
    ``col N`` and repeated names get their position, so every column can be shown."""
    header, *body = rows
    cols = [h or f"col {i + 1}" for i, h in enumerate(header)]
    cols = [c if cols.count(c) == 1 else f"{c} ({i + 1})" for i, c in enumerate(cols)]
    return pd.DataFrame(body, columns=cols)


def outline(body: str) -> dict[str, int]:
    """Counts of structural elements, shown beside a document."""
    counts = {"headings": 0, "tables": 0, "footnotes": 0}
    for b in parse_blocks(body):
        if b.kind == "heading":
            counts["headings"] += 1
        elif b.kind == "table":
            counts["tables"] += 1
        elif b.kind == "footnote":
            counts["footnotes"] += 1
    return counts
