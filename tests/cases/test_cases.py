"""Cases: the JSONL format against malformed input, import/export round trip, edits."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from sqlalchemy import Engine

from review.cases import cases
from review.core.errors import InputError, PermissionDenied, StaleWriteError
from review.core.identity import SYSTEM, Actor
from review.core.taxonomy import Taxonomy
from review.corpus import corpus
from review.corpus.docformat import parse_markdown
from storage.db import make_engine, migrate
from tests.helpers.actors import make_actor
from tests.helpers.corpus import GOOD
from tests.helpers.transact import write


def case(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "key": "CASE-T1",
        "question": "How long is the refund window for monthly plans?",
        "required_claims": ["Monthly plans have a 14-day refund window."],
        "identity": {"name": "customer-eu", "scopes": ["public"]},
        "documents": [
            {"doc_id": "POL-REFUND", "version": 2, "visibility": "visible", "role": "decisive"}
        ],
        "expected_decision": "answer",
        "reason_codes": [],
        "category": "in_scope",
        "slices": [],
        "split": "test",
        "family": None,
        "evidence_state": None,
        "status": "ready",
        "notes": "",
    }
    base.update(over)
    return base


@pytest.fixture
def seeded(engine: Engine, tax: Taxonomy, admin: Actor) -> Engine:
    corpus.import_documents(engine, admin, [parse_markdown(GOOD, "a.md", tax)])
    return engine


def lines(*items: dict[str, Any]) -> list[str]:
    return [json.dumps(i) for i in items]


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        (case(expected_decision="refuse"), "field expected_decision: 'refuse' is not one of"),
        (case(expected_decision="abstain"), "field reason_codes: a case expecting 'abstain' needs"),
        (case(reason_codes=["evidence_stale"]), "an 'answer' case may only carry false_premise"),
        (case(slices=["empty"]), "field slices.0: 'empty' is not one of"),
        (
            case(
                documents=[
                    {"doc_id": "X", "version": 1, "visibility": "hidden", "role": "decisive"}
                ]
            ),
            "field documents.0.visibility",
        ),
        (case(identity={"name": "x"}), "field identity.scopes: required field is missing"),
        (case(question=""), "field question"),
        (case(colour="red"), "field colour: unknown field"),
        (case(evidence_state="removed"), "field evidence_state: an evidence state needs a family"),
        (case(required_claims=["ok", "  "]), "field required_claims"),
        (case(key="bad key!"), "field key"),
        # sizes: every free text and list has a limit
        (case(required_claims=["c"] * 31), "field required_claims: List should have at most 30"),
        (case(required_claims=["ok", "x" * 2001]), "field required_claims.1: String should have"),
        (case(notes="n" * 10_001), "field notes: String should have at most 10000 characters"),
        (case(expected_decision="a" * 100_000), "field expected_decision: String should have"),
        (case(slices=["s"] * 51), "field slices: List should have at most 50"),
        (
            case(identity={"name": "x", "scopes": ["public"] * 51}),
            "field identity.scopes: List should have at most 50",
        ),
        (
            case(
                documents=[
                    {"doc_id": "D" * 121, "version": 1, "visibility": "visible", "role": "decisive"}
                ]
            ),
            "field documents.0.doc_id: String should have at most 120",
        ),
    ],
)
def test_malformed_cases_are_refused_with_line_and_field(
    tax: Taxonomy, item: dict[str, Any], expected: str
) -> None:
    with pytest.raises(InputError) as info:
        list(cases.iter_cases_jsonl(["", *lines(case(key="OK-1"), item)], "c.jsonl", tax))
    assert str(info.value).startswith("c.jsonl: line 3:")
    assert expected in str(info.value)


def test_unknown_document_reference_writes_nothing(
    seeded: Engine, tax: Taxonomy, admin: Actor
) -> None:
    items = list(
        cases.iter_cases_jsonl(
            lines(
                case(key="A"),
                case(
                    key="B",
                    documents=[
                        {
                            "doc_id": "POL-REFUND",
                            "version": 9,
                            "visibility": "visible",
                            "role": "decisive",
                        }
                    ],
                ),
            ),
            "c.jsonl",
            tax,
        )
    )
    with pytest.raises(InputError, match=r"line 2: field documents.0: document POL-REFUND@9"):
        write(seeded, cases.import_cases, admin, items, "c.jsonl")
    assert cases.count_cases(seeded, cases.CaseFilter()) == 0


def test_export_then_import_round_trips_exactly(
    seeded: Engine, tax: Taxonomy, admin: Actor, tmp_path: Any
) -> None:
    originals = [
        case(
            key="A",
            slices=["temporal_mismatch", "entity_collision"],
            family="FAM-1",
            evidence_state="present",
            language="de-CH",
        ),
        case(
            key="B",
            expected_decision="abstain",
            reason_codes=["no_answer_bearing_evidence"],
            documents=[],
            slices=["empty_retrieval"],
            family="FAM-1",
            evidence_state="removed",
            required_claims=[],
            category="near_miss",
            split="validation",
            notes="n",
        ),
    ]
    items = list(cases.iter_cases_jsonl(lines(*originals), "c.jsonl", tax))
    assert write(seeded, cases.import_cases, admin, items, "c.jsonl").added == 2
    out = io.StringIO()
    assert cases.export_cases(seeded, out, viewer=SYSTEM) == 2
    exported = [json.loads(x) for x in out.getvalue().splitlines()]
    # the export names the wording key each case expects: B's is the suggested one
    keys = {"A": None, "B": "R2"}
    expected = [
        dict(
            o,
            slices=sorted(o["slices"]),
            expected_message=keys[o["key"]],
            language=o.get("language"),
        )
        for o in originals
    ]
    assert exported == expected

    # into a fresh database with the same corpus: identical export
    other = make_engine(f"sqlite:///{tmp_path / 'other.db'}")
    migrate(other)
    corpus.import_documents(other, admin, [parse_markdown(GOOD, "a.md", tax)])
    again = list(cases.iter_cases_jsonl(out.getvalue().splitlines(), "x.jsonl", tax))
    write(other, cases.import_cases, admin, again, "x.jsonl")
    out2 = io.StringIO()
    cases.export_cases(other, out2, viewer=SYSTEM)
    assert out2.getvalue() == out.getvalue()
    other.dispose()
    # re-importing the same file changes nothing
    assert write(seeded, cases.import_cases, admin, items, "c.jsonl").unchanged == 2


@pytest.mark.parametrize(
    ("tag", "stored"), [("en", "en"), ("EN", "en"), ("pt-BR", "pt-BR"), (" de ", "de"), ("", None)]
)
def test_a_case_states_its_question_language(tag: str, stored: str | None, tax: Taxonomy) -> None:
    ((_, item),) = cases.iter_cases_jsonl(lines(case(key="L", language=tag)), "c.jsonl", tax)
    assert item.language == stored


@pytest.mark.parametrize("tag", ["english", "e", "en_US", "en-", "<b>en</b>", "x" * 40])
def test_a_bad_language_tag_is_refused_naming_the_line_and_field(tag: str, tax: Taxonomy) -> None:
    why = r"(must be a language tag such as en|String should have at most 35 characters)"
    with pytest.raises(InputError, match=rf"line 1: field language: {why}"):
        list(cases.iter_cases_jsonl(lines(case(key="L", language=tag)), "c.jsonl", tax))


def test_import_refuses_a_changed_case_with_the_same_key(
    seeded: Engine, tax: Taxonomy, admin: Actor
) -> None:
    write(
        seeded,
        cases.import_cases,
        admin,
        list(cases.iter_cases_jsonl(lines(case()), "a", tax)),
        "a",
    )
    changed = list(cases.iter_cases_jsonl(lines(case(question="Something else?")), "b", tax))
    with pytest.raises(InputError, match="already exists with different content"):
        write(seeded, cases.import_cases, admin, changed, "b")


def test_edit_is_version_checked_and_audited(seeded: Engine, tax: Taxonomy, admin: Actor) -> None:
    cid = write(seeded, cases.create_case, admin, cases.CaseIn.model_validate(case(key=None)), tax)
    view = cases.get_case(seeded, case_id=cid)
    assert view is not None and view.key.startswith("CASE-") and view.version == 1
    ines = make_actor("annotator", "ines@example.org")
    tom = make_actor("annotator", "tom@example.org")
    edit = cases.CaseIn.model_validate(case(notes="Ines was here"))
    assert write(seeded, cases.update_case, ines, cid, 1, edit, tax) == 2
    with pytest.raises(StaleWriteError, match=r"ines@example\.org"):
        write(
            seeded,
            cases.update_case,
            tom,
            cid,
            1,
            cases.CaseIn.model_validate(case(notes="Tom")),
            tax,
        )
    after = cases.get_case(seeded, case_id=cid)
    assert after is not None and after.notes == "Ines was here" and after.updated_by == ines.email
    with pytest.raises(InputError, match="nothing changed"):
        write(seeded, cases.update_case, ines, cid, 2, edit, tax)


def test_only_case_editors_write(seeded: Engine, tax: Taxonomy) -> None:
    with pytest.raises(PermissionDenied):
        write(
            seeded,
            cases.create_case,
            make_actor("compliance"),
            cases.CaseIn.model_validate(case()),
            tax,
        )


def test_filters_and_pagination(seeded: Engine, tax: Taxonomy, admin: Actor) -> None:
    items = [
        case(
            key=f"K{i:02d}",
            split="train" if i % 3 else "test",
            slices=["entity_collision"] if i % 2 else [],
        )
        for i in range(23)
    ]
    write(
        seeded,
        cases.import_cases,
        admin,
        list(cases.iter_cases_jsonl(lines(*items), "c", tax)),
        "c",
    )
    f = cases.CaseFilter(slice="entity_collision")
    assert cases.count_cases(seeded, f) == 11
    assert cases.count_cases(seeded, cases.CaseFilter(split="test")) == 8
    assert cases.count_cases(seeded, cases.CaseFilter(split="test", slice="entity_collision")) == 4
    p1 = cases.list_cases(seeded, f, page=1, page_size=5)
    p3 = cases.list_cases(seeded, f, page=3, page_size=5)
    assert len(p1) == 5 and len(p3) == 1
    assert all(r.slices == ("entity_collision",) and r.documents == 1 for r in p1)
