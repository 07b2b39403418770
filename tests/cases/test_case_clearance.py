"""A case's text (question, required claims, notes) is as restricted as the documents it relies
on: a user without clearance sees the redaction text in its place on every read and export of
the cases area, decided from the documents at read time."""

from __future__ import annotations

import io
import json

import pytest
from sqlalchemy import Engine, select, update

from review.cases import cases, exchange
from review.core.clearance import REDACTED
from review.core.errors import PermissionDenied
from review.core.identity import SYSTEM
from review.core.taxonomy import Taxonomy
from storage.db import write_session
from storage.models import CaseDocument, Document
from tests.helpers.actors import make_actor
from tests.helpers.transact import write

INES = make_actor("annotator")  # no clearance
CLEARED = make_actor("annotator", clearance=True)
#: a required claim that quotes the restricted pricing memo (and no public document)
MEMO_CLAIM = "Starter will be closed to new customers from 1 October 2025"


def test_a_case_relying_on_a_restricted_document_shows_its_text_only_with_clearance(
    demo_engine: Engine,
) -> None:
    hidden = cases.get_case(demo_engine, key="CASE-082", viewer=INES)
    assert hidden is not None
    assert hidden.question == REDACTED
    assert hidden.required_claims == (REDACTED,)
    assert hidden.notes == REDACTED
    assert MEMO_CLAIM not in json.dumps(hidden.record)
    shown = cases.get_case(demo_engine, key="CASE-082", viewer=CLEARED)
    assert shown is not None and shown.required_claims[0].startswith(MEMO_CLAIM)
    public = cases.get_case(demo_engine, key="CASE-001", viewer=INES)
    assert public is not None and REDACTED not in (public.question, *public.required_claims)


def test_no_case_read_without_clearance_quotes_the_memo(demo_engine: Engine) -> None:
    rows = cases.list_cases(demo_engine, cases.CaseFilter(), page_size=500, viewer=INES)
    quoting = []
    for row in rows:
        view = cases.get_case(demo_engine, case_id=row.id, viewer=INES)
        assert view is not None
        if MEMO_CLAIM in json.dumps([row.question, view.question, view.required_claims]):
            quoting.append(row.key)
    assert quoting == []
    with_clearance = []
    for row in rows:
        view = cases.get_case(demo_engine, case_id=row.id, viewer=CLEARED)
        assert view is not None
        if MEMO_CLAIM in " ".join(view.required_claims):
            with_clearance.append(row.key)
    assert "CASE-082" in with_clearance


def test_restriction_follows_the_documents_at_read_time(demo_engine: Engine) -> None:
    """A public document restricted later restricts the cases that rely on it from then on."""
    before = cases.get_case(demo_engine, key="CASE-001", viewer=INES)
    assert before is not None and before.question != REDACTED
    with write_session(demo_engine) as s:
        doc_ids = list(
            s.scalars(select(CaseDocument.document_id).where(CaseDocument.case_id == before.id))
        )
        s.execute(
            update(Document).where(Document.id.in_(doc_ids[:1])).values(access_scope="restricted")
        )
    after = cases.get_case(demo_engine, key="CASE-001", viewer=INES)
    assert after is not None and after.question == REDACTED
    rows = cases.list_cases(demo_engine, cases.CaseFilter(text="CASE-001"), viewer=INES)
    assert [r.question for r in rows if r.key == "CASE-001"] == [REDACTED]


@pytest.mark.parametrize("fmt", exchange.FORMATS)
def test_exports_without_clearance_leave_the_case_text_out(
    demo_engine: Engine, tax: Taxonomy, fmt: str
) -> None:
    hidden, full = io.StringIO(), io.StringIO()
    exchange.export(demo_engine, hidden, fmt, tax, viewer=INES)
    exchange.export(demo_engine, full, fmt, tax, viewer=SYSTEM)
    assert MEMO_CLAIM not in hidden.getvalue()
    assert REDACTED in hidden.getvalue()
    assert MEMO_CLAIM in full.getvalue()


def test_editing_a_restricted_case_needs_clearance(demo_engine: Engine, tax: Taxonomy) -> None:
    view = cases.get_case(demo_engine, key="CASE-082")
    assert view is not None
    edit = cases.CaseIn.model_validate({**view.record, "notes": view.notes + " (checked)"})
    with pytest.raises(PermissionDenied, match="clearance"):
        write(demo_engine, cases.update_case, INES, view.id, view.version, edit, tax)
    after = cases.get_case(demo_engine, key="CASE-082")
    assert after is not None and after.version == view.version
    assert (
        write(demo_engine, cases.update_case, CLEARED, view.id, view.version, edit, tax)
        > view.version
    )


def test_a_case_retelling_a_restricted_document_it_does_not_list_is_restricted(
    demo_engine: Engine,
) -> None:
    """CASE-049 lists only the public retention policy, but a claim retells the restricted
    legal-hold procedure ("the Legal Operations lead or the General Counsel")."""
    view = cases.get_case(demo_engine, key="CASE-049")
    assert view is not None and view.text_restricted
    assert all(d.access_scope != "restricted" for d in view.documents)
    hidden = cases.get_case(demo_engine, key="CASE-049", viewer=INES)
    assert hidden is not None and "General Counsel" not in json.dumps(hidden.record)


def test_the_text_search_does_not_look_into_a_hidden_question(demo_engine: Engine) -> None:
    """Searching for words of CASE-082's question finds it only with clearance: a match
    would tell a user without clearance what the hidden question says."""
    words = cases.CaseFilter(text="Starter plan being discontinued")
    assert "CASE-082" in [r.key for r in cases.list_cases(demo_engine, words, viewer=CLEARED)]
    assert cases.count_cases(demo_engine, words, viewer=CLEARED) >= 1
    hidden = cases.list_cases(demo_engine, words, viewer=INES)
    assert "CASE-082" not in [r.key for r in hidden]
    assert cases.count_cases(demo_engine, words, viewer=INES) == len(hidden)
    by_key = cases.CaseFilter(text="CASE-082")
    assert [r.question for r in cases.list_cases(demo_engine, by_key, viewer=INES)] == [REDACTED]
