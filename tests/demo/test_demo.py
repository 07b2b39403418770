"""The demo data meets what a newcomer should see: a realistic corpus and a balanced case set."""

from __future__ import annotations

import re

from sqlalchemy import Engine, func, select

from review.admin import users
from review.cases import cases
from review.core.identity import SYSTEM
from review.core.taxonomy import Taxonomy
from review.corpus import corpus
from review.corpus.docformat import outline
from review.demo import fixtures
from storage.db import read_session
from storage.models import Case, CaseFamily, CaseSlice, Document


def test_demo_corpus_is_realistic(demo_engine: Engine) -> None:
    with read_session(demo_engine) as s:
        docs = s.scalars(select(Document)).all()
        current = [d for d in docs if d.is_current]
        assert len(current) >= 25
        assert sum(outline(d.body)["tables"] > 0 for d in docs) >= 8
        assert sum(outline(d.body)["footnotes"] > 0 for d in docs) >= 6
        assert sum(d.superseded_by is not None for d in docs) >= 5
        assert all(d.effective_date is not None for d in docs)
        assert sum(d.access_scope == "restricted" for d in current) >= 3
        assert {d.jurisdiction for d in docs} >= {"EU", "UK", "APAC", "global"}
        # every superseded_by points at a version that exists
        refs = {f"{d.doc_key}@{d.version}" for d in docs}
        assert all(d.superseded_by in refs for d in docs if d.superseded_by)


def test_demo_cases_cover_the_taxonomy(demo_engine: Engine, tax: Taxonomy) -> None:
    with read_session(demo_engine) as s:
        total = s.scalar(select(func.count(Case.id)))
        decisions = dict(
            s.execute(
                select(Case.expected_decision, func.count()).group_by(Case.expected_decision)
            ).all()
        )
        categories = set(s.scalars(select(Case.category).distinct()))
        slices = set(s.scalars(select(CaseSlice.slice).distinct()))
        families = s.scalar(select(func.count(CaseFamily.id)))
    assert total is not None and total >= 60
    assert set(decisions) == set(tax.decisions)
    assert categories == set(tax.categories)
    assert slices == set(tax.slices)
    unanswerable = sum(v for k, v in decisions.items() if k not in tax.answering_decisions())
    assert unanswerable / total >= 0.25
    assert families is not None and families >= 8


def test_every_family_has_exactly_one_evidence_present_variant(demo_engine: Engine) -> None:
    for fam in cases.family_keys(demo_engine):
        rows = cases.list_cases(demo_engine, cases.CaseFilter(family=fam), page_size=100)
        states = [r.evidence_state for r in rows]
        assert states.count("present") == 1, fam
        assert len(rows) >= 3, fam
        present = next(r for r in rows if r.evidence_state == "present")
        assert present.expected_decision == "answer", fam


def test_demo_users_have_different_roles(demo_engine: Engine) -> None:
    people = users.list_users(demo_engine)
    assert len(people) >= 4
    roles = {r for u in people for r in u.roles}
    assert roles == {"annotator", "reviewer", "product_owner", "compliance", "admin"}
    assert any(u.clearance for u in people) and any(not u.clearance for u in people)


def test_demo_forbidden_documents_match_identity_scopes(demo_engine: Engine) -> None:
    """Outside 'forbidden' variants, a document is forbidden exactly when its scope is not
    one the identity may see."""
    first = 1
    checked = 0
    while True:
        rows = cases.list_cases(demo_engine, cases.CaseFilter(), page=first, page_size=50)
        if not rows:
            break
        for r in rows:
            view = cases.get_case(demo_engine, case_id=r.id)
            assert view is not None
            if view.evidence_state == "forbidden" or not re.fullmatch(r"CASE-\d{3}", view.key):
                continue  # only the hand-written demo set (not promoted traces or variants)
            for d in view.documents:
                expected = "visible" if d.access_scope in view.identity_scopes else "forbidden"
                assert d.visibility == expected, (view.key, d.ref)
                checked += 1
        first += 1
    assert checked > 100


def test_building_the_demo_twice_adds_nothing(demo_engine: Engine, tax: Taxonomy) -> None:
    again = fixtures.build_demo(demo_engine, tax)
    assert (
        again.users,
        again.documents,
        again.cases,
        again.runs,
        again.labels,
        again.policies,
    ) == (0,) * 6
    assert not fixtures.is_empty(demo_engine)
    assert corpus.count_documents(demo_engine, SYSTEM, corpus.DocFilter()) >= 25
