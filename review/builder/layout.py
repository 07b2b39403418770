"""The shape of a Markdown body as the edit operators need it: the blocks of the one Markdown
reader (review.corpus.markdown) with list items apart and paragraphs' prose after clause
numbers and quote markers, sentences, and questions, by character offset."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass

from review.corpus import markdown

FOOTNOTE_REF_RE = re.compile(r"\[\^[^\]\s]+\](?!:)")
_CLAUSE_RE = re.compile(r"\d+(?:\.\d+)+\s+")
_QUOTE_RE = re.compile(r">\s?")
_SENTENCE_END_RE = re.compile(
    r"[.!?](?:\*{1,2}|_)?(?:\[\^[^\]\s]+\])*(?=\s+[^\sa-z]|\s*$)", re.MULTILINE
)
#: Short abbreviations whose period ends no sentence ("St. Louis", "No. 5", "c. 1338")
_ABBREVIATIONS = frozenset(
    {"ca", "cf", "Dr", "Jr", "Mr", "Mrs", "Ms", "Mt", "No", "pp", "Sr", "St", "vs"}
)
_WORD_BEFORE_RE = re.compile(r"([^\W\d_]+)(\W*)$")


@dataclass(frozen=True)
class Block:
    kind: str  # heading | table | footnote | list_item | paragraph
    start: int  # first character of the first line
    end: int  # end of the last line (before its newline)
    content: int  # where the prose starts, after heading/list/footnote/clause markers


def line_ranges(text: str) -> list[tuple[int, int]]:
    return markdown.lines(text)


def text_blocks(text: str) -> list[Block]:
    """The blocks of :func:`review.corpus.markdown.scan` as the operators use them: list items
    one by one, and a paragraph's prose after its clause number or quote marker."""
    blocks: list[Block] = []
    for b in markdown.scan(text):
        if b.kind == "list":
            item: list[tuple[int, int]] = []
            for x, y in b.lines:
                if markdown.LIST_MARK.match(text[x:y]) and item:
                    blocks.append(_list_item(text, item))
                    item = []
                item.append((x, y))
            if item:
                blocks.append(_list_item(text, item))
        elif b.kind == "paragraph":
            first = text[b.start : b.lines[0][1]]
            m = _CLAUSE_RE.match(first) or _QUOTE_RE.match(first)
            blocks.append(Block("paragraph", b.start, b.end, b.start + (m.end() if m else 0)))
        else:
            blocks.append(Block(b.kind, b.start, b.end, b.content))
    return blocks


def _list_item(text: str, item: list[tuple[int, int]]) -> Block:
    a = item[0][0]
    m = markdown.LIST_MARK.match(text, a)
    return Block("list_item", a, item[-1][1], m.end() if m else a)


def sentence_ranges(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Sentence ranges in ``text[start:end]`` (a block's prose)."""
    out: list[tuple[int, int]] = []
    cur = start
    for m in _SENTENCE_END_RE.finditer(text, start, end):
        if _abbreviation(text, max(start, m.start() - 40), m.start()):
            continue
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


def _abbreviation(text: str, lo: int, dot: int) -> bool:
    """Whether the period at ``dot`` closes an abbreviation or an initial, not a sentence: a
    lone lower-case letter ("c. 1338", "e.g."), a short abbreviation ("St.", "No."), or a lone
    capital after a capitalised word, another initial or nothing ("John F. Kennedy", "G. Stanley
    Hall"; but "plan A. Then" ends a sentence). Found on Wikipedia passages (MuSiQue): "Albert
    ( , ; c. 1338 – 1 April 1412) was King of Sweden" is one sentence, and removing it must
    leave no "Albert ( , ; c." behind."""
    if text[dot] != ".":
        return False
    m = _WORD_BEFORE_RE.search(text, lo, dot)
    if m is None or m.group(2):
        return False
    word = m.group(1)
    if word in _ABBREVIATIONS or (len(word) == 1 and word.islower()):
        return True
    if len(word) != 1:
        return False
    before = text[lo : m.start()].rstrip()
    if not before or before.endswith((".", "(", "\n")):
        return True
    prev = _WORD_BEFORE_RE.search(before)
    return prev is not None and not prev.group(2) and prev.group(1)[0].isupper()


def sentence_body_end(text: str, s: int, e: int) -> int:
    """Index of a sentence's final punctuation (or its end when it has none)."""
    m = re.search(r"[.!?](?:\*{1,2}|_)?(?:\[\^[^\]\s]+\])*$", text[s:e])
    return s + m.start() if m else e


def is_question(sentence: str) -> bool:
    core = FOOTNOTE_REF_RE.sub("", sentence).rstrip().rstrip("*_`\"' )")
    return core.endswith("?")


def block_at(blocks: list[Block], pos: int, starts: list[int] | None = None) -> Block | None:
    """The block whose lines contain ``pos`` (blocks are sorted and do not overlap);
    ``starts`` (the blocks' starts) saves building the list when asking many times."""
    if starts is None:
        starts = [b.start for b in blocks]
    i = bisect.bisect_right(starts, pos) - 1
    if i >= 0 and blocks[i].start <= pos <= blocks[i].end:
        return blocks[i]
    return None


def overlapping(blocks: Iterable[Block], s: int, e: int) -> list[Block]:
    return [b for b in blocks if (b.start < e and s < b.end) or (s == e and b.start <= s <= b.end)]


def line_no(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1
