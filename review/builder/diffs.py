"""Marking changes in plain text, never HTML (the page shows it with st.code and dataframes):
word-level change markers, diff rows, side-by-side text, and the preview of an operator on a
span."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from review.builder.edits import OPERATORS, EditRecord, edit_document
from review.builder.operator import EditResult, Suggestion, common_ends, span_at
from review.core.errors import InputError

__all__ = [
    "MARKERS",
    "DiffRow",
    "GroupPreview",
    "Preview",
    "diff_rows",
    "escape_markers",
    "mark_changes",
    "preview",
    "preview_group",
    "side_by_side",
]


# ------------------------------------------------------------------------------------------
# Pure: marking changes in plain text (never HTML: the page shows it with st.code/dataframes)

MARKERS = {"removed": ("[-", "-]"), "added": ("{+", "+}")}


_ESCAPES = (("\\", "\\\\"), ("[-", "[\\-"), ("-]", "\\-]"), ("{+", "{\\+"), ("+}", "\\+}"))


_TOKEN_RE = re.compile(r"\s+|\w+|[^\w\s]")


def escape_markers(text: str) -> str:
    """Escape the marker sequences (and backslashes) already in ``text``.

    Applied before marking, so that ``[-``/``-]``/``{+``/``+}`` in a document can never be
    mistaken for a highlighted change.
    """
    for old, new in _ESCAPES:
        text = text.replace(old, new)
    return text


#: Unchanged characters kept on either side of a change inside one line, and the most of an
#: unchanged line a diff shows: a document stored as one long line (an imported passage) shows
#: the words around its change, not every character of the line.
CONTEXT_CHARS = 160

#: Tokens compared word by word in the changed middle of a line (after the common start and
#: end are set aside); past this a longer middle is shown as removed and added whole. The
#: word diff is quadratic: a 58,000-character line took 15 s, one of 120,000 a minute.
MAX_DIFF_TOKENS = 2_000


def _clip(text: str, keep: str) -> str:
    """Unchanged ``text`` shortened for display: ``keep`` is "start" (text before a change:
    its end is kept), "end" (text after a change: its start is kept), "both" (between two
    changes) or "line" (an unchanged line). Whole words where it can; "…" marks the cut."""
    n = CONTEXT_CHARS
    if len(text) <= (2 * n if keep in ("both", "line") else n):
        return text
    if keep == "start":
        tail = text[-n:]
        cut = tail.find(" ")
        return "…" + (tail[cut:] if 0 <= cut < n // 2 else tail)
    head = text[:n]
    cut = head.rfind(" ")
    head = head[:cut] if cut > n // 2 else head
    if keep in ("end", "line"):
        return head + "…"
    return head + " … " + _clip(text, "start")[1:]


def _equal(text: str, first: bool, last: bool) -> str:
    if first and last:
        return _clip(text, "line")
    return _clip(text, "start" if first else "end" if last else "both")


def _opcodes(a: list[str], b: list[str]) -> list[tuple[str, int, int, int, int]]:
    """The changes of two token lists: the common start and end set aside, the middle word
    by word when it is short enough, else replaced whole (bounded work on any line)."""
    p, q = common_ends(a, b)
    ea, eb = len(a) - q, len(b) - q
    ops: list[tuple[str, int, int, int, int]] = []
    if p:
        ops.append(("equal", 0, p, 0, p))
    if ea - p + eb - p <= MAX_DIFF_TOKENS:
        matcher = difflib.SequenceMatcher(None, a[p:ea], b[p:eb], autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            ops.append((tag, p + i1, p + i2, p + j1, p + j2))
    elif ea > p or eb > p:
        ops.append(("replace", p, ea, p, eb))
    if q:
        ops.append(("equal", ea, len(a), eb, len(b)))
    return ops


def mark_changes(before: str, after: str) -> tuple[str, str]:
    """Word-level marks: removed words as ``[-...-]`` in before, added as ``{+...+}`` in after.

    Both texts are escaped first (see :func:`escape_markers`). Unchanged text longer than
    :data:`CONTEXT_CHARS` around a change is shortened with "…".
    """
    a = _TOKEN_RE.findall(before)
    b = _TOKEN_RE.findall(after)
    out_a: list[str] = []
    out_b: list[str] = []
    (ro, rc), (ao, ac) = MARKERS["removed"], MARKERS["added"]
    ops = _opcodes(a, b)
    for k, (tag, i1, i2, j1, j2) in enumerate(ops):
        if tag == "equal":
            first, last = k == 0, k == len(ops) - 1
            out_a.append(escape_markers(_equal("".join(a[i1:i2]), first, last)))
            out_b.append(escape_markers(_equal("".join(b[j1:j2]), first, last)))
            continue
        left = escape_markers("".join(a[i1:i2]))
        right = escape_markers("".join(b[j1:j2]))
        if left:
            out_a.append(f"{ro}{left}{rc}")
        if right:
            out_b.append(f"{ao}{right}{ac}")
    return "".join(out_a), "".join(out_b)


@dataclass(frozen=True)
class DiffRow:
    """One line of a line diff; ``before``/``after`` carry escaped word-level marks."""

    line_before: int | None
    line_after: int | None
    change: str  # same | changed | removed | added
    before: str
    after: str


def _changed_window(a: list[str], b: list[str]) -> tuple[int, int, int]:
    """Common prefix length and the ends of the differing middles of two line lists."""
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    ea, eb = len(a), len(b)
    while ea > p and eb > p and a[ea - 1] == b[eb - 1]:
        ea -= 1
        eb -= 1
    return p, ea, eb


def diff_rows(before_text: str, after_text: str, context: int = 1) -> list[DiffRow]:
    """The changed lines of two texts, with ``context`` unchanged lines around them.

    Linear in the document size outside the changed region (common prefix and suffix are
    skipped before the diff), so a small edit of a large document stays cheap.
    """
    a = before_text.split("\n")
    b = after_text.split("\n")
    p, ea, eb = _changed_window(a, b)
    rows: list[DiffRow] = []
    for i in range(max(0, p - context), p):
        t = escape_markers(_clip(a[i], "line"))
        rows.append(DiffRow(i + 1, i + 1, "same", t, t))
    matcher = difflib.SequenceMatcher(None, a[p:ea], b[p:eb], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                t = escape_markers(_clip(a[p + i1 + k], "line"))
                rows.append(DiffRow(p + i1 + k + 1, p + j1 + k + 1, "same", t, t))
            continue
        n = max(i2 - i1, j2 - j1)
        for k in range(n):
            ia, jb = i1 + k, j1 + k
            la = a[p + ia] if ia < i2 else None
            lb = b[p + jb] if jb < j2 else None
            if la is not None and lb is not None:
                ma, mb = mark_changes(la, lb)
                rows.append(DiffRow(p + ia + 1, p + jb + 1, "changed", ma, mb))
            elif la is not None:
                ro, rc = MARKERS["removed"]
                marked = f"{ro}{escape_markers(_clip(la, 'line'))}{rc}" if la else ""
                rows.append(DiffRow(p + ia + 1, None, "removed", marked, ""))
            elif lb is not None:
                ao, ac = MARKERS["added"]
                marked = f"{ao}{escape_markers(_clip(lb, 'line'))}{ac}" if lb else ""
                rows.append(DiffRow(None, p + jb + 1, "added", "", marked))
    tail = len(a) - ea
    for k in range(min(context, tail)):
        t = escape_markers(_clip(a[ea + k], "line"))
        rows.append(DiffRow(ea + k + 1, eb + k + 1, "same", t, t))
    return rows


def side_by_side(rows: Sequence[DiffRow]) -> tuple[str, str]:
    """Two plain-text excerpts (before, after) with line numbers, for st.code blocks."""
    left: list[str] = []
    right: list[str] = []
    last_a: int | None = None
    for r in rows:
        if r.line_before is not None and last_a is not None and r.line_before > last_a + 1:
            left.append("     …")
            right.append("     …")
        if r.line_before is not None:
            last_a = r.line_before
            left.append(f"{r.line_before:>4} │ {r.before}")
        if r.line_after is not None:
            right.append(f"{r.line_after:>4} │ {r.after}")
    return "\n".join(left), "\n".join(right)


@dataclass(frozen=True)
class Preview:
    """What an operator does to a span: the result, its record, the diff and the suggestion."""

    result: EditResult
    record: EditRecord
    rows: tuple[DiffRow, ...]
    before_excerpt: str
    after_excerpt: str
    suggestion: Suggestion
    metadata: Mapping[str, str]
    extra_documents: tuple[tuple[str, str, str], ...]  # (title, access scope, body)


def preview(
    body: str,
    operator: str,
    start: int,
    end: int,
    params: Mapping[str, object],
    *,
    doc_ref: str = "document@1",
    other_decisive: Sequence[str] = (),
) -> Preview:
    """Apply ``operator`` to ``body[start:end]`` without saving; InputError when refused.
    ``other_decisive``: the case's other visible decisive documents, which still carry the
    answer whatever the edit does (the suggestion then keeps the base case's decision)."""
    op = OPERATORS.get(operator)
    if op is None:
        raise InputError(f"unknown edit operator {operator!r}; use one of: {', '.join(OPERATORS)}")
    key, _, ver = doc_ref.partition("@")
    span = span_at(body, start, end, "position" if start == end else "selection")
    result, record = edit_document(
        body, operator, span, params, doc_id=key, version=int(ver) if ver.isdigit() else 1
    )
    rows = tuple(diff_rows(body, result.text))
    left, right = side_by_side(rows)
    extras = tuple((x.title, x.access_scope, x.body) for x in result.extra_documents)
    suggestion = op.suggestion.kept_by(other_decisive)
    return Preview(result, record, rows, left, right, suggestion, result.metadata, extras)


@dataclass(frozen=True)
class GroupPreview:
    """One edit of several documents: a preview (one diff) per document and the one
    suggestion for the variant they make together."""

    previews: tuple[tuple[str, Preview], ...]  # (document reference, its preview)
    suggestion: Suggestion


def preview_group(
    items: Sequence[tuple[str, str, int, int]],
    operator: str,
    params: Mapping[str, object],
    *,
    other_decisive: Sequence[str] = (),
) -> GroupPreview:
    """Apply ``operator`` with the same ``params`` to each of ``items`` (document reference,
    body, start, end) without saving. ``other_decisive``: the visible decisive documents
    left out, which still carry the answer (the suggestion then keeps the base case's
    decision). InputError names the document an edit is refused on."""
    if not items:
        raise InputError("choose at least one document to edit")
    refs = [ref for ref, _b, _s, _e in items]
    if len(set(refs)) != len(refs):
        raise InputError("a document is listed twice; edit each document once")
    out: list[tuple[str, Preview]] = []
    for ref, body, start, end in items:
        try:
            pv = preview(body, operator, start, end, params, doc_ref=ref)
        except InputError as exc:
            raise InputError(f"{ref}: {exc}" if len(items) > 1 else str(exc)) from None
        out.append((ref, pv))
    suggestion = OPERATORS[operator].suggestion.kept_by(other_decisive)
    return GroupPreview(tuple(out), suggestion)
