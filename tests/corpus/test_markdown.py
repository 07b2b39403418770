"""The one Markdown block reader: the corpus view of a body (parse_blocks) and the edit
operators' layout are both made from corpus.markdown.scan, so they see the same blocks."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from review.builder import layout
from review.corpus import markdown
from review.corpus.docformat import parse_blocks, readable_blocks

BODY = (
    "# Refunds\n\n2.1 Monthly plans: 14 days.[^1]\n\n| Plan | Days |\n|---|---|\n"
    "| Monthly | 14 |\n\n- one\n  more\n- two\n\n[^1]: From the invoice date.\n    Continued.\n"
)
FRAGMENTS = [
    "# H",
    "## Sub heading ",
    "| a | b |",
    "|---|---|",
    "| 1 | 2 |",
    "[^1]: note",
    "    more",
    "\tmore",
    "- item",
    "  cont",
    "1. one",
    "2) two",
    "Para text. Next one? Yes!",
    "",
    "   ",
    "2.1 Clause text",
    "> quote",
    "####### seven",
    "#nospace",
    "a|b",
]


def test_blocks_with_their_offsets() -> None:
    blocks = markdown.scan(BODY)
    assert [b.kind for b in blocks] == ["heading", "paragraph", "table", "list", "footnote"]
    heading, para, table, lst, note = blocks
    assert BODY[heading.content : heading.end] == "Refunds"
    assert BODY[para.start : para.end] == "2.1 Monthly plans: 14 days.[^1]"
    assert len(table.lines) == 3 and len(lst.lines) == 3 and len(note.lines) == 2
    assert BODY[note.content : note.lines[0][1]] == "From the invoice date."


def test_line_endings_are_commonmark_ones() -> None:
    crlf = BODY.replace("\n", "\r\n")
    assert [b.kind for b in markdown.scan(crlf)] == [b.kind for b in markdown.scan(BODY)]
    assert [vars(b) for b in parse_blocks(crlf)] == [vars(b) for b in parse_blocks(BODY)]
    assert markdown.lines("a\rb\r\nc\n") == [(0, 1), (2, 3), (5, 6), (7, 7)]


@given(st.lists(st.sampled_from(FRAGMENTS), max_size=14))
def test_the_corpus_view_and_the_operators_see_the_same_blocks(parts: list[str]) -> None:
    text = "\n".join(parts)
    scanned = markdown.scan(text)
    assert [b.kind for b in parse_blocks(text)] == [b.kind for b in scanned]
    merged: list[tuple[str, int, int]] = []
    for b in layout.text_blocks(text):
        kind = "list" if b.kind == "list_item" else b.kind
        if kind == "list" and merged and merged[-1][0] == "list" and merged[-1][2] + 1 == b.start:
            merged[-1] = ("list", merged[-1][1], b.end)
        else:
            merged.append((kind, b.start, b.end))
    assert merged == [(b.kind, b.start, b.end) for b in scanned]


_OLD_TABLE_SEP = r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$"
SEP_PIECES = ["|", " ", "\t", "-", "--", ":", "x", "|--|", ":--:"]


@given(st.lists(st.sampled_from(SEP_PIECES), max_size=10))
def test_the_table_separator_reads_the_same_rows_as_before(parts: list[str]) -> None:
    """The separator pattern was rewritten so that each run of spaces matches in one way only
    (two adjacent ``\\s*`` made a long space-only line quadratic); it accepts the same rows."""
    import re

    row = "".join(parts)
    assert bool(markdown.TABLE_SEP.match(row)) == bool(re.match(_OLD_TABLE_SEP, row))


def test_a_long_space_only_line_under_a_pipe_row_is_a_paragraph() -> None:
    body = "| a | b |\n" + " " * 200_000 + "x\n"
    assert [b.kind for b in markdown.scan(body)] == ["paragraph"]
    assert parse_blocks("| a |\n|--" + " " * 200_000 + "|\n| 1 |")[0].kind == "table"


def test_headings_are_commonmark_ones_for_documents_and_answers() -> None:
    """One heading rule for a document body and an answer cut into claims: up to three
    spaces, one to six '#', then a space, a tab or the end of the line."""
    from review.audits.claims import split_claims

    for line, heading in [
        ("# Refunds", True),
        ("   ## Indented three", True),
        ("#", True),
        ("#\tTabbed", True),
        ("    # Four spaces", False),
        ("#hashtag", False),
        ("####### seven", False),
    ]:
        assert (markdown.scan(line)[0].kind == "heading") == heading
        claims = [c.text for c in split_claims(line + "\nA claim.")]
        assert claims == (["A claim."] if heading else [line.strip(), "A claim."])
    fenced = "```\n# not a heading\n```\nA claim."
    assert [c.text for c in split_claims(fenced)] == ["A claim."]


def test_readable_blocks_show_structure_without_its_marks() -> None:
    """What a reader sees: a heading without ``#`` (also a closing run), bullets for ``-``,
    ``*`` and ``+`` items with numbers and indentation kept, footnote references as ``[1]``;
    a ``#`` that is part of the text (``C#``) stays."""
    body = (
        "# Refund policy #\n\n## Learn C#\n\n- first\n  * nested\n+ third\n1. numbered\n\n"
        "Text with a note[^1] here.\n\n| a | b[^2] |\n|---|---|\n| 1 | 2 |\n\n"
        "[^1]: The note\n    continued\n"
    )
    blocks = readable_blocks(body)
    assert [(b.kind, b.text, b.level) for b in blocks if b.kind == "heading"] == [
        ("heading", "Refund policy", 1),
        ("heading", "Learn C#", 2),
    ]
    listed = next(b for b in blocks if b.kind == "list")
    assert listed.text == "• first\n  • nested\n• third\n1. numbered"
    assert next(b for b in blocks if b.kind == "paragraph").text == "Text with a note[1] here."
    assert next(b for b in blocks if b.kind == "table").rows == [["a", "b[2]"], ["1", "2"]]
    note = next(b for b in blocks if b.kind == "footnote")
    assert (note.rows, note.text) == ([["1"]], "The note\ncontinued")
    shown = "\n".join(b.text for b in blocks)
    assert "[^" not in shown and not any(line.startswith("#") for line in shown.splitlines())
