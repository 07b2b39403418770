"""The one Markdown escaper: untrusted text (a name, a title, a question, a message quoting an
uploaded value) made inert for the Markdown it is shown in, on a page (titles, captions,
headers, alerts, widget labels and tooltips render Markdown) or in a Markdown export.

Every character Markdown (with Streamlit's ``:emoji:`` and ``:color[...]`` directives) gives a
meaning to is escaped with a backslash, and web and mail addresses are broken with an invisible
word joiner (GFM turns bare addresses into links after the escapes are read), so no image is
fetched and no link, autolink, emoji, directive or HTML is made; the text reads as typed."""

from __future__ import annotations

import re

# Every character Markdown (with Streamlit's :emoji: and :color[...] directives) gives a
# meaning to, escaped with a backslash so it shows as typed.
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")
# GFM turns bare web addresses ("http://", "www.") and mail addresses ("a@b.c") into links
# after escapes are read; a word joiner (invisible) inside "://", after "www" and after the
# "@" of an address keeps them text
_AUTOLINK = re.compile(r"(?i)(?<=[a-z]):(?=//)|(?<=www)(?=\.)|(?<=[\w.+-])@(?=[\w-])")
WORD_JOINER = "\u2060"


def markdown_text(value: object) -> str:
    """``value`` as text that Markdown shows exactly as typed (see the module docstring)."""
    broken = _AUTOLINK.sub(lambda m: m.group(0) + WORD_JOINER, str(value))
    return _MD_SPECIAL.sub(r"\\\1", broken)


def markdown_cell(value: object) -> str:
    """``value`` as the text of one cell of a Markdown table: escaped like
    :func:`markdown_text`, its line breaks made spaces (a table row is one line)."""
    return markdown_text(" ".join(str(value).splitlines()))
