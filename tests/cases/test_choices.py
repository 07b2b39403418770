"""The case pickers' values (review.cases.choices) found by index seeks and existence checks
equal a DISTINCT over the cases of the status, on both engines: a value only other statuses
carry is left out, nulls are never offered, and a column with more values than the seeks
take is read whole."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, delete, func, insert, select, text
from sqlalchemy.orm import Session

from review.cases import choices
from review.evaluation import execution
from review.labels import queue
from storage.db import make_engine, migrate, read_session, run_write
from storage.models import Case, CaseDocument, CaseFamily, CaseSlice, Document

STATUSES = ("ready", "draft", "retired")


def _reference(s: Session, status: str) -> dict[str, list[str]]:
    """The pickers as a DISTINCT over every case of the status gives them."""
    live = select(Case.id).where(Case.status == status)

    def distinct(stmt: Any) -> list[str]:
        return sorted(str(v) for v in s.scalars(stmt.distinct()) if v is not None)

    return {
        "family": distinct(
            select(CaseFamily.key)
            .join(Case, Case.family_id == CaseFamily.id)
            .where(Case.status == status)
        ),
        "slice": distinct(select(CaseSlice.slice).where(CaseSlice.case_id.in_(live))),
        "split": distinct(select(Case.split).where(Case.status == status)),
        "category": distinct(select(Case.category).where(Case.status == status)),
        "import_batch": distinct(select(Case.import_batch).where(Case.status == status)),
        "language": distinct(select(Case.language).where(Case.status == status)),
        "document": distinct(
            select(Document.doc_key).where(
                Document.id.in_(
                    select(CaseDocument.document_id).where(CaseDocument.case_id.in_(live))
                )
            )
        ),
    }


def _fill(engine: Engine, seed: int, n: int) -> None:
    """``n`` cases of random status, family, slices, documents and fields (some null)."""
    rng = random.Random(seed)

    def work(s: Session) -> None:
        for model in (CaseSlice, CaseDocument, Case, CaseFamily, Document):
            s.execute(delete(model))
        fams = [{"key": f"FAM-{i}", "title": f"family {i}"} for i in range(rng.randint(0, 6))]
        if fams:
            s.execute(insert(CaseFamily), fams)
        fam_ids = list(s.scalars(select(CaseFamily.id)))
        docs = [
            {
                "doc_key": f"DOC-{i % 4}",
                "version": i // 4 + 1,
                "title": "t",
                "body": "x",
                "authority": "policy",
                "owner": "o",
                "access_scope": "public",
                "jurisdiction": "global",
                "sha256": "0" * 64,
            }
            for i in range(rng.randint(0, 8))
        ]
        if docs:
            s.execute(insert(Document), docs)
        doc_ids = list(s.scalars(select(Document.id)))
        rows: list[dict[str, Any]] = [
            {
                "key": f"C-{seed}-{i}",
                "question": "q",
                "identity_name": "i",
                "identity_scopes": [],
                "expected_decision": "abstain",
                "reason_codes": [],
                "category": rng.choice(["billing", "access", "Äpfel", "zeta"]),
                "split": rng.choice(["train", "test", "dev"]),
                "status": rng.choice(STATUSES),
                "language": rng.choice([None, "en", "de"]),
                "import_batch": rng.choice([None, "b1", "b2", "b3"]),
                "family_id": rng.choice([None, *fam_ids]),
                "notes": "",
                "version": 1,
            }
            for i in range(n)
        ]
        if rows:
            s.execute(insert(Case), rows)
        links = list(s.execute(select(Case.id, Case.status)))
        slices = [
            {"case_id": cid, "slice": name}
            for cid, _ in links
            for name in ("empty_retrieval", "stale", "Zürich", "a b")
            if rng.random() < 0.3
        ]
        if slices:
            s.execute(insert(CaseSlice), slices)
        quoted = [
            {
                "case_id": cid,
                "document_id": d,
                "position": k,
                "visibility": "shown",
                "role": "evidence",
            }
            for cid, _ in links
            for k, d in enumerate(doc_ids)
            if rng.random() < 0.2
        ]
        if quoted:
            s.execute(insert(CaseDocument), quoted)

    run_write(engine, work)


def _check(engine: Engine) -> None:
    with read_session(engine) as s:
        for status in STATUSES:
            assert execution.subset_choices(engine, status) == _reference(s, status), status
        ready = _reference(s, "ready")
    facets = queue.queue_facets(engine)
    assert list(facets.families) == ready["family"]
    assert list(facets.slices) == ready["slice"]
    assert list(facets.categories) == ready["category"]
    assert list(facets.splits) == ready["split"]


@pytest.mark.parametrize("seek_limit", [choices.SEEK_LIMIT, 1])
def test_the_choices_equal_a_distinct_over_the_cases_on_both_engines(
    any_engine: Engine, seek_limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both ways: by seeks, and (a limit of one value) the whole read past the limit."""
    monkeypatch.setattr(choices, "SEEK_LIMIT", seek_limit)
    for seed in range(4):
        _fill(any_engine, seed, 60)
        _check(any_engine)
    _fill(any_engine, 9, 0)  # no case at all
    assert execution.subset_choices(any_engine)["slice"] == []
    _check(any_engine)


def test_a_slice_only_retired_cases_carry_is_not_offered(any_engine: Engine) -> None:
    _fill(any_engine, 3, 40)
    with any_engine.begin() as c:
        c.execute(text("UPDATE cases SET status = 'retired' WHERE status = 'ready'"))
        c.execute(text("UPDATE cases SET status = 'ready' WHERE id = (SELECT min(id) FROM cases)"))
    with read_session(any_engine) as s:
        first = s.scalar(select(func.min(Case.id)))
        mine = sorted(s.scalars(select(CaseSlice.slice).where(CaseSlice.case_id == first)))
    assert execution.subset_choices(any_engine)["slice"] == mine
    assert list(queue.queue_facets(any_engine).slices) == mine


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(seed=st.integers(0, 10_000), n=st.integers(0, 40), limit=st.integers(1, 5))
def test_any_mix_of_cases_gives_the_distinct_values(
    sqlite_url: str, seed: int, n: int, limit: int
) -> None:
    engine = make_engine(sqlite_url)
    migrate(engine)
    old = choices.SEEK_LIMIT
    choices.SEEK_LIMIT = limit
    try:
        _fill(engine, seed, n)
        _check(engine)
    finally:
        choices.SEEK_LIMIT = old
        engine.dispose()
