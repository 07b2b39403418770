"""The one reader of Markdown-shaped document bodies: headings, tables, footnote definitions,
lists and paragraphs, each with the character offsets of its lines.

Lines end as in CommonMark (``\\r\\n``, ``\\r`` or ``\\n``). A heading is, as in CommonMark, up
to three spaces, one to six ``#``, then a space, a tab or the end of the line; a table is a row
with ``|`` followed by a separator row (``|---|---|``) and every following non-blank row with
``|``; a footnote definition (``[^1]: text``) takes the lines
indented by four spaces or a tab after it; other runs of non-blank lines are a list (when every
line is a list item or indented by two spaces) or a paragraph. Nothing is rendered: the corpus
shows the blocks as text (``docformat.parse_blocks``) and the edit operators find and change
spans inside them (``review.builder.layout``); the claim splitter reads an answer's lines,
headings and code fences (``FENCE``, a line opening or closing a fenced code block) with the
same rules (``review.audits.claims``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "FENCE",
    "FOOTNOTE_DEF",
    "HEADING",
    "LIST_MARK",
    "TABLE_SEP",
    "MarkdownBlock",
    "lines",
    "scan",
]

LINE_END = re.compile(r"\r\n|\r|\n")
HEADING = re.compile(r"[ \t]{0,3}(#{1,6})(?:[ \t]+|$)")
FENCE = re.compile(r"[ \t]{0,3}(?:```|~~~)")
# Each run of spaces can be matched in one way only (a space-only line or a row that ends in
# spaces is refused in linear time: two adjacent ``\s*`` made it quadratic, minutes at 300 kB)
TABLE_SEP = re.compile(r"^\s*(?:\|\s*)?:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*(?:\|\s*)?$")
FOOTNOTE_DEF = re.compile(r"\[\^([^\]]+)\]:\s?")
LIST_MARK = re.compile(r"\s*(?:[-*+]|\d+[.)])\s+")


@dataclass(frozen=True)
class MarkdownBlock:
    kind: str  # heading | table | footnote | list | paragraph
    lines: tuple[tuple[int, int], ...]  # (start, end) of each line, without its line ending
    content: int  # where the text starts after a heading or footnote marker (else the start)

    @property
    def start(self) -> int:
        return self.lines[0][0]

    @property
    def end(self) -> int:
        return self.lines[-1][1]


def lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of every line of ``text``, line endings left out."""
    out: list[tuple[int, int]] = []
    pos = 0
    for m in LINE_END.finditer(text):
        out.append((pos, m.start()))
        pos = m.end()
    out.append((pos, len(text)))
    return out


def scan(text: str) -> list[MarkdownBlock]:
    """The blocks of ``text`` in order (blank lines separate them and belong to none)."""
    ls = lines(text)
    blocks: list[MarkdownBlock] = []
    run: list[tuple[int, int]] = []

    def line(i: int) -> str:
        return text[ls[i][0] : ls[i][1]]

    def flush() -> None:
        if run:
            listed = all(LIST_MARK.match(text[a:b]) or text[a:b].startswith("  ") for a, b in run)
            blocks.append(MarkdownBlock("list" if listed else "paragraph", tuple(run), run[0][0]))
            run.clear()

    i = 0
    while i < len(ls):
        a, b = ls[i]
        cur = line(i)
        if not cur.strip():
            flush()
            i += 1
            continue
        h = HEADING.match(cur)
        if h:
            flush()
            blocks.append(MarkdownBlock("heading", (ls[i],), a + h.end()))
            i += 1
            continue
        if "|" in cur and i + 1 < len(ls) and TABLE_SEP.match(line(i + 1)):
            flush()
            j = i + 2
            while j < len(ls) and "|" in line(j) and line(j).strip():
                j += 1
            blocks.append(MarkdownBlock("table", tuple(ls[i:j]), a))
            i = j
            continue
        f = FOOTNOTE_DEF.match(cur)
        if f:
            flush()
            j = i + 1
            while j < len(ls) and line(j).startswith(("    ", "\t")):
                j += 1
            blocks.append(MarkdownBlock("footnote", tuple(ls[i:j]), a + f.end()))
            i = j
            continue
        run.append((a, b))
        i += 1
    flush()
    return blocks
