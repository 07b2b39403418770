"""The one UI helper module: engine and taxonomy caches, the signed-in user, small widgets.

Untrusted text (document bodies, questions, claims, titles) goes through :func:`text` or
dataframes, never markdown or HTML; where a short untrusted value must sit inside a title,
caption, header or message (which render markdown), it goes through :func:`plain` first, the
one escaper of the pages. Errors meant for the user are shown by :func:`reported`; a write
runs a Session-taking service through :func:`transact`, the pages' one write transaction.
"""

from __future__ import annotations

import contextlib
import math
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import streamlit as st
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from review.admin import navigation, users
from review.cases import cases
from review.cases.choices import PICKER_LIMIT as PICKER_LIMIT  # (re-exported for the pages)
from review.core import database, readable, uploads
from review.core.database import database_url, open_database
from review.core.errors import WorkbenchError
from review.core.escape import markdown_text
from review.core.identity import Actor, Role
from review.core.taxonomy import Taxonomy, taxonomy
from review.corpus.docformat import readable_blocks, table_frame

T = TypeVar("T")

ACTOR_KEY = "wb_actor"
LOCAL_AS_KEY = "wb_local_as"


@st.cache_resource(show_spinner="Preparing the database…")
def _engine_for(url: str) -> Engine:
    return open_database(url)


def engine() -> Engine:
    """The shared engine for the configured URL, migrated to head once per process."""
    return _engine_for(database_url())


def tax() -> Taxonomy:
    return taxonomy()


def actor() -> Actor:
    """The signed-in user (set by app.py before any page runs)."""
    value = st.session_state.get(ACTOR_KEY)
    if not isinstance(value, Actor):
        st.error("No user is signed in.")
        st.stop()
    return value


def text(value: str, *, label: str | None = None) -> None:
    """Show untrusted text verbatim (never rendered as markdown or HTML)."""
    if label:
        st.caption(label)
    st.text(value)


def requested_page(key: str) -> int:
    """The page the picker of :func:`paginate` ``key`` asks for, before it is drawn (it may
    lie beyond the last page; paginate then moves it back)."""
    value = st.session_state.get(f"{key}_page", 1)
    return max(1, int(value)) if isinstance(value, int | float) else 1


def paginate(total: int, key: str, page_size: int = 25, *, more: bool = False) -> int:
    """A page picker; returns the 1-based page number (server-side pagination). ``more``:
    there are more than ``total`` items (counting stopped there), said so in the caption;
    the picker then reaches the pages of the counted items only."""
    pages = max(1, math.ceil(total / page_size))
    state_key = f"{key}_page"
    st.session_state.setdefault(state_key, 1)
    if st.session_state[state_key] > pages:
        st.session_state[state_key] = pages
    cols = st.columns([1, 3])
    with cols[0]:
        page = int(st.number_input("Page", min_value=1, max_value=pages, step=1, key=state_key))
    with cols[1]:
        first = 0 if total == 0 else (page - 1) * page_size + 1
        last = min(total, page * page_size)
        if more:
            st.caption(
                f"Showing {first:,}–{last:,} of more than {total:,} (counting stopped there) "
                f"· page {page:,} of more than {pages:,}"
            )
        else:
            st.caption(f"Showing {first:,}–{last:,} of {total:,} · page {page:,} of {pages:,}")
    return page


def fmt_option(labels: dict[str, Any]) -> Any:
    def f(v: str) -> str:
        if v == "":
            return "(any)"
        term = labels.get(v)
        return getattr(term, "label", v) if term is not None else v

    return f


def many_choice(
    where: Any,
    label: str,
    values: Sequence[str],
    key: str,
    *,
    empty: str = "",
    limit: int | None = None,
    format_func: Callable[[str], str] | None = None,
    known: Callable[[str], bool] | None = None,
) -> str:
    """A selectbox of ``values`` (as a service gave them: at most ``limit`` + 1, default
    :data:`PICKER_LIMIT`) with ``empty`` first for "any"; past ``limit`` values, a text field
    for the value instead (empty: any): tens of thousands of options cost the browser seconds
    to receive and draw. ``known(value)`` says whether a typed value exists; one that does
    not is said under the field."""
    limit = PICKER_LIMIT if limit is None else limit
    if len(values) <= limit:
        fmt = format_func or (lambda v: "(any)" if v == empty else v)
        return str(where.selectbox(plain(label), [empty, *values], key=key, format_func=fmt))
    typed = str(
        where.text_input(
            plain(label),
            key=key,
            placeholder=f"(any; more than {limit:,}: type a key)",
            help=f"There are more than {limit:,}, too many to list: type the key of one.",
        )
    ).strip()
    if typed and typed != empty and known is not None and not known(typed):
        where.caption(f"No {plain(label.lower())} has the key {plain(typed)}.")
    return typed or empty


_ID_MAX = 2**31 - 1  # the database's integer ids hold no more


def plain(value: object) -> str:
    """The one escaper of the pages: untrusted text (a name, an id, a message quoting an
    uploaded value or a document) made inert for the Markdown that titles, captions, headers,
    alerts, messages, widget labels and tooltips render. It is
    :func:`review.core.escape.markdown_text`, the escaper the Markdown exports use too: every
    Markdown character is escaped and web and mail addresses are broken, so no image is
    fetched, no link, autolink, emoji or HTML is made, and the text reads exactly as typed.
    tests/pages/test_markdown_safety.py fails when a page shows a value in Markdown without
    it."""
    return markdown_text(value)


def error(message: object, where: Any = None, *, icon: str | None = None) -> None:
    """The pages' one way to show an error message that is not an exception ("Choose a
    file.", "Case 3 does not exist."): ``message`` is shown as typed (through :func:`plain`),
    so a value quoted in it needs no escaping of its own. No page calls ``st.error`` itself
    (tests/pages/test_ui.py)."""
    (where or st).error(plain(message), icon=icon)


def show_error(exc: BaseException, prefix: str = "", where: Any = None) -> None:
    """Show an error meant for the user (its message through :func:`plain`)."""
    (where or st).error(plain(prefix + str(exc)))


@contextlib.contextmanager
def reported(prefix: str = "", where: Any = None) -> Iterator[None]:
    """Run the block; a :class:`WorkbenchError` (bad input, a refused permission, a stale
    write) ends it and is shown as an error, ``prefix`` first ("Nothing was saved. "). The
    rest of the block (a success message, a rerun) runs only when nothing was raised."""
    try:
        yield
    except WorkbenchError as exc:
        show_error(exc, prefix, where)


def transact(
    work: Callable[[Session], T], prefix: str = "Nothing was saved. ", where: Any = None
) -> T | None:
    """The pages' one way to write: run ``work`` (a Session-taking service, e.g.
    ``lambda s: promote.promote_to_case(s, actor, item, tax)``) as one transaction on the
    app's database; a busy database or a serialization conflict re-runs it, a
    :class:`WorkbenchError` (bad input, a refused permission, a stale edit) rolls it back and
    is shown as an error, ``prefix`` first, in ``where`` (next to the control). Returns what
    ``work`` returned, or None when an error was shown (a work that returns nothing may
    return True to tell the two apart). Call ``st.rerun`` after it, never inside ``work``."""
    with reported(prefix, where):
        return database.write(engine(), work)
    return None


def query_int(name: str) -> int | None:
    """A whole-number query parameter (an id); None when absent, not a number or out of the
    range an id can have."""
    raw = st.query_params.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        return None
    return value if 0 <= value <= _ID_MAX else None


def query_case(name: str = "case") -> int | None:
    """The case a deep link names (``?case=5`` or ``?case=CASE-005``), None when absent; a
    name no case has is said on the page (a link that quietly shows the list instead would
    look like a fault of the list)."""
    raw = st.query_params.get(name)
    if raw is None:
        return None
    as_id = query_int(name)
    if as_id is not None:
        return as_id
    found = cases.case_id_for_key(engine(), raw.strip())
    if found is None:
        error(f"There is no case {raw!r}: the link names a case id (a number) or key.")
    return found


def table_height(rows: int, max_rows: int = 25) -> int:
    """Height (px) that shows ``rows`` rows of a dataframe without an inner scrollbar."""
    return 38 + 35 * max(1, min(rows, max_rows))


Pin = bool | Sequence[str]


def table_columns(
    frame: Any, column_config: dict[str, Any] | None = None, *, pin: Pin = False
) -> dict[str, Any]:
    """The column configuration of a shown table: ``column_config`` as given, plus a header
    in words for every column named like a stored key (``false_refusal_rate`` reads "False
    refusal rate", through readable.humanize) and the columns that say which row it is
    fixed while a wide table scrolls sideways inside its frame: with ``pin=True`` the first
    column, or the columns ``pin`` names (the open link and the id)."""
    config: dict[str, Any] = dict(column_config or {})
    names = [str(c) for c in getattr(frame, "columns", [])]
    for name in names:
        if "_" in name and name not in config:
            config[name] = st.column_config.Column(readable.humanize(name))
    pinned = names[:1] if pin is True else [] if pin is False else [p for p in pin if p in names]
    for name in pinned:
        given = config.get(name)
        if name not in config:
            config[name] = st.column_config.Column(pinned=True)
        elif isinstance(given, dict):
            config[name] = {**given, "pinned": True}
        elif isinstance(given, str):
            config[name] = st.column_config.Column(given, pinned=True)
    return config


def table(
    frame: Any, *, pin: Pin = False, column_config: dict[str, Any] | None = None, **kwargs: Any
) -> Any:
    """Every page's table (``st.dataframe`` without the index, as wide as the page): headers
    in words, a missing figure as "—" and, with ``pin``, its identifying columns fixed
    (:func:`table_columns`).
    Returns what ``st.dataframe`` returns (the selection, when ``on_select`` is given)."""
    kwargs.setdefault("hide_index", True)
    kwargs.setdefault("width", "stretch")
    # a figure that does not apply reads as a dash (its reason sits in the row's note),
    # never "None" or "nan"
    kwargs.setdefault("placeholder", readable.UNDEFINED)
    return st.dataframe(frame, column_config=table_columns(frame, column_config, pin=pin), **kwargs)


def link(path: str = "", **params: object) -> str:
    """A link to a page of the app; in local mode it carries who is acting (``as``), so a
    link opened in a new tab keeps the same user."""
    query = {k: str(v) for k, v in params.items()}
    who = st.session_state.get(LOCAL_AS_KEY)
    if who is not None:
        query["as"] = str(who)
    # every value URL-encoded: a value with & = # or a space stays one value of one key (a
    # comma, which lists several values of one filter, stays readable)
    qs = urllib.parse.urlencode(query, safe=",", quote_via=urllib.parse.quote)
    where = urllib.parse.quote(path)
    return f"{('/' + where) if where else ''}?{qs}" if qs else f"/{where}"


def file_upload(label: str, kind: str, **kwargs: Any) -> Any:
    """Every page's file upload (``kind``: a key of ``uploads.COMMANDS``): the widget, which
    lets a file above the workbench's limit reach the server so the page's
    ``uploads.read_text(name, data, kind)`` refuses it with its size, the limit and the
    command-line import; and a caption that states the limit and that command up front."""
    files = st.file_uploader(label, max_upload_size=uploads.widget_limit_mb(), **kwargs)
    st.caption(plain(uploads.limit_note(kind)))
    return files


def in_fragment_run() -> bool:
    """Whether this run is a fragment's own (a click in it), not the whole page's."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return bool(ctx is not None and ctx.fragment_ids_this_run)


def rerun_here() -> None:
    """Run again the fragment this code runs in when the run is that fragment's, else the
    whole page (a full run draws the fragment too: Streamlit refuses a fragment-scoped
    rerun there)."""
    if in_fragment_run():
        st.rerun(scope="fragment")
    st.rerun()


def document_body(body: str, *, table_rows: int = 25) -> None:
    """A document's (or a chunk's) text as its reader sees the structure: a heading as one,
    a list with bullets, a footnote as a caption, a table as a dataframe of its parsed cells,
    every other block as text (``docformat.readable_blocks``). Never Markdown or HTML from the
    document: a heading's text goes through :func:`plain`, the rest through ``st.text``."""
    for block in readable_blocks(body):
        if block.kind == "heading":
            shown = plain(block.text)  # levels 1 and 2 as small headings, deeper as bold
            if not shown:
                continue
            if block.level <= 2:
                st.markdown(("#### " if block.level == 1 else "##### ") + shown)
            else:
                st.markdown(f"**{shown}**")
        elif block.kind == "table":
            frame = table_frame(block.rows)
            st.dataframe(
                frame, hide_index=True, width="stretch", height=table_height(len(frame), table_rows)
            )
        elif block.kind == "footnote":
            st.caption(plain(f"[{block.rows[0][0]}] {block.text}"))
        else:
            st.text(block.text)


def not_for_you(what: str, roles: Iterable[Role], actor: Actor) -> None:
    """Tell someone whose roles do not let them use this page who can and what to do
    (``navigation.not_yours``): an administrator gets a link to the Admin page, anyone else
    the names of the administrators to ask."""
    admins = [u.name for u in users.list_users(engine(), False) if Role.admin.value in u.roles]
    said = navigation.not_yours(what, roles, actor.roles, admins)
    st.info(plain(said.text))
    if said.admin_link:
        st.page_link("pages/admin_page.py", label="Open Admin", icon=":material/arrow_forward:")


def charts_exported(make: Callable[[], T]) -> T:
    """Run ``make`` (a download's content that draws Altair charts: the Monthly review's
    report) while no page is converting its own charts. ``st.altair_chart`` switches Altair's
    process-wide theme and data transformer while it converts a chart, under a lock of its
    own; a download callable runs in another thread, and a ``to_dict`` of its charts in that
    window took Streamlit's settings (no view size), so the same report downloaded twice
    differed. Holding that lock keeps an export on Altair's defaults."""
    from streamlit.elements import vega_charts

    with vega_charts._altair_globals_lock:
        return make()


#: Less room above the title, for the pages whose controls must fit 1280x720 (Label,
#: Adjudicate); a literal constant (st.html never shows text built at run time).
_COMPACT = "<style>.stMainBlockContainer { padding-top: 2.5rem; }</style>"


def compact() -> None:
    """Less room above the page's title (see :data:`_COMPACT`)."""
    st.html(_COMPACT)


_SAID = "said_"  # session-state prefix: what a control's last press did, said once under it
_SAY = {"success", "info", "warning", "error"}


def said(control: str, message: str, kind: str = "success") -> None:
    """Remember what pressing ``control`` (a button's or form's key) did, to say it right
    under that control on the next run (after anything said before): call it, then
    ``st.rerun()``. Every page
    acknowledges a save, an approval, an import, a creation or a deletion this way, next to
    the control that caused it, never at the top of a long page (issue 35 item 4)."""
    said_before = st.session_state.setdefault(_SAID + control, [])
    said_before.append((kind if kind in _SAY else "success", message))


def under(control: str, where: Any = None) -> Any:
    """The place right under ``control``: call it right after drawing the control (in the
    same column or container, ``where``). What the control's last press did (:func:`said`)
    is shown there once; the returned slot takes what this run says about it (a refusal:
    ``ui.transact(..., where=slot)``, ``ui.error(..., where=slot)``)."""
    slot = (where or st).container(key=f"said_{control}")
    for kind, message in st.session_state.pop(_SAID + control, []):
        if kind == "error":
            error(message, where=slot)
        else:
            getattr(slot, kind)(plain(message))
    return slot
