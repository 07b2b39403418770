"""Reading the shape of a Markdown body for the edit operators: blocks (headings, tables,
list items, footnote definitions, quotes), sentences and clause numbers, by character offset."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass

# ------------------------------------------------------------------------------------------
# Reading the shape of a Markdown body (mirrors review.corpus.docformat.parse_blocks)

_HEADING_RE = re.compile(r"#{1,6}\s+")


_TABLE_SEP_RE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")


_FOOTNOTE_DEF_RE = re.compile(r"\[\^[^\]]+\]:\s?")


_FOOTNOTE_REF_RE = re.compile(r"\[\^[^\]\s]+\](?!:)")


_LIST_RE = re.compile(r"\s*(?:[-*+]|\d+[.)])\s+")


_CLAUSE_RE = re.compile(r"\d+(?:\.\d+)+\s+")


_QUOTE_RE = re.compile(r">\s?")


_SENTENCE_END_RE = re.compile(
    r"[.!?](?:\*{1,2}|_)?(?:\[\^[^\]\s]+\])*(?=\s+[^\sa-z]|\s*$)", re.MULTILINE
)


@dataclass(frozen=True)
class _Block:
    kind: str  # heading | table | footnote | list_item | paragraph
    start: int  # first character of the first line
    end: int  # end of the last line (before its newline)
    content: int  # where the prose starts, after heading/list/footnote/clause markers


def _lines(text: str) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    pos = 0
    for line in text.split("\n"):
        out.append((pos, pos + len(line)))
        pos += len(line) + 1
    return out


def _layout(text: str) -> list[_Block]:
    """Blocks with character offsets: the same shapes parse_blocks sees."""
    lines = _lines(text)
    blocks: list[_Block] = []
    i = 0
    run: list[tuple[int, int]] = []

    def flush() -> None:
        if not run:
            return
        texts = [text[a:b] for a, b in run]
        if all(_LIST_RE.match(t) or t.startswith("  ") for t in texts):
            item: list[tuple[int, int]] = []
            for (a, b), t in zip(run, texts, strict=True):
                if _LIST_RE.match(t) and item:
                    blocks.append(_list_item(text, item))
                    item = []
                item.append((a, b))
            if item:
                blocks.append(_list_item(text, item))
        else:
            a, b = run[0][0], run[-1][1]
            first = text[a : run[0][1]]
            m = _CLAUSE_RE.match(first) or _QUOTE_RE.match(first)
            blocks.append(_Block("paragraph", a, b, a + (m.end() if m else 0)))
        run.clear()

    while i < len(lines):
        a, b = lines[i]
        line = text[a:b]
        if not line.strip():
            flush()
            i += 1
            continue
        h = _HEADING_RE.match(line)
        if h and line.startswith("#"):
            flush()
            blocks.append(_Block("heading", a, b, a + h.end()))
            i += 1
            continue
        if "|" in line and i + 1 < len(lines) and _TABLE_SEP_RE.match(text[slice(*lines[i + 1])]):
            flush()
            j = i + 2
            while (
                j < len(lines) and "|" in text[slice(*lines[j])] and text[slice(*lines[j])].strip()
            ):
                j += 1
            blocks.append(_Block("table", a, lines[j - 1][1], a))
            i = j
            continue
        f = _FOOTNOTE_DEF_RE.match(line)
        if f:
            flush()
            j = i + 1
            while j < len(lines) and text[slice(*lines[j])].startswith(("    ", "\t")):
                j += 1
            blocks.append(_Block("footnote", a, lines[j - 1][1], a + f.end()))
            i = j
            continue
        run.append((a, b))
        i += 1
    flush()
    return blocks


def _list_item(text: str, item: list[tuple[int, int]]) -> _Block:
    a = item[0][0]
    m = _LIST_RE.match(text, a)
    return _Block("list_item", a, item[-1][1], m.end() if m else a)


def _sentences(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Sentence ranges in ``text[start:end]`` (a block's prose)."""
    out: list[tuple[int, int]] = []
    cur = start
    for m in _SENTENCE_END_RE.finditer(text, start, end):
        s = cur
        while s < m.end() and text[s].isspace():
            s += 1
        if s < m.end():
            out.append((s, m.end()))
        cur = m.end()
    s = cur
    while s < end and text[s].isspace():
        s += 1
    e = end
    while e > s and text[e - 1].isspace():
        e -= 1
    if s < e:
        out.append((s, e))
    return out


def _body_end(text: str, s: int, e: int) -> int:
    """Index of a sentence's final punctuation (or its end when it has none)."""
    m = re.search(r"[.!?](?:\*{1,2}|_)?(?:\[\^[^\]\s]+\])*$", text[s:e])
    return s + m.start() if m else e


def _is_question(sentence: str) -> bool:
    core = _FOOTNOTE_REF_RE.sub("", sentence).rstrip().rstrip("*_`\"' )")
    return core.endswith("?")


def _block_at(blocks: list[_Block], pos: int) -> _Block | None:
    """The block whose lines contain ``pos`` (blocks are sorted and do not overlap)."""
    i = bisect.bisect_right([b.start for b in blocks], pos) - 1
    if i >= 0 and blocks[i].start <= pos <= blocks[i].end:
        return blocks[i]
    return None


def _overlapping(blocks: Iterable[_Block], s: int, e: int) -> list[_Block]:
    return [b for b in blocks if (b.start < e and s < b.end) or (s == e and b.start <= s <= b.end)]


def _line_no(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1
