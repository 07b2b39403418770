"""Pages show untrusted text as text: never HTML, and messages quoting input go through ui.plain."""

from __future__ import annotations

import re

from tests.helpers.paths import ROOT


def test_untrusted_text_is_never_rendered_as_html() -> None:
    for p in [ROOT / "app.py", *(ROOT / "pages").glob("*.py")]:
        src = p.read_text(encoding="utf-8")
        assert "unsafe_allow_html=True" not in src, p
        assert "st.html(" not in src, p


def test_messages_that_quote_input_go_through_ui_plain() -> None:
    """Error and status messages quote uploaded values, names and spans of documents; shown
    raw, markdown would fetch remote images and make links. Every exception a page shows in
    st.error/warning/info/success/toast is passed through ui.plain."""
    raw = re.compile(
        r"st\.(error|warning|info|success|toast)\((str\((exc|e)\)|f\"[^\"]*\{(exc|e)[!:}])"
    )
    for p in [ROOT / "app.py", *(ROOT / "pages").glob("*.py")]:
        src = p.read_text(encoding="utf-8")
        bad = [m.group(0) for m in raw.finditer(src)]
        assert not bad, f"{p.name}: {bad[:3]}"


def test_ui_plain_escapes_markdown_and_breaks_links() -> None:
    from pages.ui import plain

    shown = plain("line 9: field jurisdiction: '![p](http://evil.example/x.png)' <b>x</b> *y*")
    assert not re.search(r"(?<!\\)[\[\]<]", shown)  # every bracket and "<" escaped
    assert "http://" not in shown
    assert "!\\[p\\](http:\u2060//evil.example/x.png)" in shown
    assert "line 9: field jurisdiction" in shown  # the message reads as written
    assert plain("www.evil.example") == "www\u2060.evil.example"
    assert plain("\\[x](y)") == "\\\\\\[x\\](y)"  # an escape in the input stays text
