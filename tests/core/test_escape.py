"""The one Markdown escaper, shared by the pages (ui.plain) and the Markdown exports."""

from __future__ import annotations

from review.core.escape import WORD_JOINER, markdown_cell, markdown_text
from tests.helpers.pages import live_markdown, readable


def test_pages_and_exports_share_one_escaper() -> None:
    from pages import ui

    for raw in ["![x](http://evil.example/x.png)", "a@b.example", "**b** <i>", ":smile:"]:
        assert ui.plain(raw) == markdown_text(raw)


def test_addresses_are_broken_so_no_autolink_is_made() -> None:
    for raw in [
        "http://evil.example/x",
        "HTTPS://evil.example",
        "www.evil.example",
        "mallory@evil.example",
        "see ftp://evil.example and x.y+z@evil.example.",
    ]:
        shown = markdown_text(raw)
        assert not live_markdown(shown), (raw, shown)
        assert WORD_JOINER in shown and readable(shown) == raw


def test_a_table_cell_is_one_line_and_cannot_end_the_cell() -> None:
    cell = markdown_cell("first | second\nthird ![i](http://evil.example/i.png)")
    assert "\n" not in cell and "\\|" in cell and not live_markdown(cell)
    assert readable(cell) == "first | second third ![i](http://evil.example/i.png)"
