"""The case and its evidence: question and required claims (they stay beside the form) and
the documents in a fixed-height box that scrolls on its own. Bodies keep their structure as
text (``ui.document_body``: headings without their marks, lists with bullets, footnotes,
tables as dataframes of their parsed cells); nothing of a document is rendered as Markdown
or HTML."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from pages import ui
from review.core import clearance, readable
from review.core.database import database_url
from review.core.errors import WorkbenchError
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy
from review.corpus import corpus
from review.labels.blind import LabelingCase, ShownDoc

#: the question's box and the documents' (px): with the page's title row they fit 1280x720
HEADER_MAX = 150
EVIDENCE_HEIGHT = 430
DOCS_MIN = 260


def box_height(case: LabelingCase) -> int:
    """The question's box: as tall as its lines (about), at most HEADER_MAX (then it
    scrolls)."""
    lines = sum(1 + len(line) // 60 for line in case_text(case).splitlines())
    return min(HEADER_MAX, 16 + 25 * lines)


def case_header(tax: Taxonomy, case: LabelingCase) -> None:
    """Key, question and required claims (a box of their own when long); the author's
    judgement only when not blind."""
    if case.blind:
        note = "blind until you submit (documents listed by reference)"
    else:
        note = (
            "author's judgement: "
            + ui.plain(readable.term(tax, "decisions", case.expected_decision))
            + " · category "
            + ui.plain(readable.term(tax, "categories", case.suggested_category))
            + (
                f" · family {ui.plain(case.family)} "
                f"({ui.plain(readable.humanize(case.evidence_state))})"
                if case.family
                else ""
            )
        )
    st.markdown(f"**Case {ui.plain(case.key)}** · :small[{note}]")
    with st.container(height=box_height(case), border=False, key="lab_case_box"):
        st.text(case_text(case))


def case_text(case: LabelingCase) -> str:
    """Question, required claims and notes as one text (no gaps between them)."""
    parts = [case.question]
    if case.required_claims:
        claims = "\n".join(f"{i}. {c}" for i, c in enumerate(case.required_claims, 1))
        parts.append(f"Required claims:\n{claims}")
    if case.notes and not case.blind:  # an author's note often gives the answer away
        parts.append(f"Notes for labelers: {case.notes}")
    return "\n\n".join(parts)


@st.cache_data(ttl=600, show_spinner=False, max_entries=256)
def _body(_engine: Engine, url: str, actor: Actor, document_id: int) -> tuple[str, str]:
    """(metadata line, body) of a document version (versions never change in place)."""
    doc = corpus.get_document(_engine, actor, document_id)
    meta = (
        f"effective {readable.when(doc.effective_date, with_time=False)} · {doc.authority} · "
        f"{doc.jurisdiction} · {doc.access_scope}"
    )
    return meta, doc.body


def _document(engine: Engine, actor: Actor, tax: Taxonomy, d: ShownDoc) -> None:
    forbidden = d.visibility == "forbidden"
    head = [d.ref]
    if forbidden:
        head.insert(0, "FORBIDDEN to this identity")
    if d.role is not None:
        head.append(readable.term(tax, "document_roles", d.role))
    if not d.is_current:
        head.append("not the current version")
    st.markdown("**" + " · ".join(ui.plain(h) for h in head) + "**")
    st.text(clearance.title(actor, d.title, d.access_scope))
    if not clearance.may_see(actor, forbidden):
        st.warning("Forbidden to this identity. Its text is shown only to users with clearance.")
        return
    if not clearance.may_see_document(actor, d.access_scope):
        st.warning("Restricted document: shown only to users with clearance.")
        return
    try:
        meta, body = _body(engine, database_url(), actor, d.document_id)
    except WorkbenchError as exc:
        ui.show_error(exc)
        return
    st.caption(
        ui.plain(meta) + (" · forbidden: the identity must not get this text" if forbidden else "")
    )
    ui.document_body(body)


def documents(engine: Engine, actor: Actor, tax: Taxonomy, case: LabelingCase) -> None:
    """The documents the identity gets, in their own scrolling box."""
    scopes = ", ".join(case.identity_scopes) or "nothing"
    st.caption(f"Evidence as “{ui.plain(case.identity_name)}” gets it (sees: {ui.plain(scopes)})")
    height = max(DOCS_MIN, EVIDENCE_HEIGHT - box_height(case))
    with st.container(height=height, border=True, key="lab_docs"):
        if not case.documents:
            st.info("Retrieval returns nothing for this identity (empty retrieval).")
        for i, d in enumerate(case.documents):
            if i:
                st.divider()
            _document(engine, actor, tax, d)
