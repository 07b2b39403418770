"""Four-eyes sign-off: roles, the author rule, the test-split flag, and tamper detection."""

from __future__ import annotations

import pytest
import yaml
from sqlalchemy import Engine, text

from review import cases, signoff
from review.errors import InputError, PermissionDenied
from review.identity import Role
from review.taxonomy import Taxonomy
from tests.conftest import make_actor

KIND = "test_policy"


def _validate(t: str, source: str) -> object:
    data = yaml.safe_load(t)
    if not isinstance(data, dict):
        raise InputError(f"{source}: expected a mapping")
    return data


signoff.register_kind(
    signoff.Kind(
        KIND,
        "test policy",
        _validate,
        canonical=lambda t: yaml.safe_dump(yaml.safe_load(t), sort_keys=True),
        required_roles=lambda t, parent: frozenset({Role.product_owner, Role.compliance}),
    )
)

PO = make_actor("product_owner", "paula@example.org")
PO2 = make_actor("product_owner", "pat@example.org")
COMP = make_actor("compliance", "chen@example.org")


def test_propose_then_both_roles_approve(any_engine: Engine) -> None:
    vid = signoff.propose(any_engine, PO, KIND, "refuse_below: 0.5\n", "first version")
    v = signoff.get_version(any_engine, vid)
    assert v.status == "pending" and v.missing_roles == ["compliance", "product_owner"]
    with pytest.raises(PermissionDenied, match="author of a change can never approve"):
        signoff.sign(any_engine, PO, vid, "approve")
    signoff.sign(any_engine, PO2, vid, "approve", metrics_snapshot={"risk": float("nan")})
    with pytest.raises(InputError, match="already on version"):
        signoff.sign(any_engine, make_actor("product_owner", "third@example.org"), vid, "approve")
    assert signoff.get_version(any_engine, vid).status == "pending"
    signoff.sign(any_engine, COMP, vid, "approve", data_fingerprint="abc")
    v = signoff.get_version(any_engine, vid)
    assert v.status == "approved" and v.approved_on is not None
    assert signoff.current_approved(any_engine, KIND) == v
    assert v.signatures[0].metrics_snapshot == {"risk": None}
    assert signoff.verify_chain(any_engine) == []
    with pytest.raises(InputError, match="already approved"):
        signoff.sign(
            any_engine, make_actor("compliance", "c2@example.org"), vid, "reject", note="late"
        )
    with pytest.raises(InputError, match="nothing changed"):
        signoff.propose(any_engine, PO2, KIND, "refuse_below:   0.5  # same\n", "again")


def test_roles_and_rejection(engine: Engine) -> None:
    with pytest.raises(PermissionDenied):
        signoff.propose(engine, make_actor("annotator"), KIND, "a: 1\n", "x")
    with pytest.raises(InputError, match="rationale"):
        signoff.propose(engine, PO, KIND, "a: 1\n", "  ")
    with pytest.raises(InputError, match="expected a mapping"):
        signoff.propose(engine, PO, KIND, "- 1\n", "list")
    vid = signoff.propose(engine, PO, KIND, "a: 1\n", "x")
    with pytest.raises(PermissionDenied):
        signoff.sign(engine, make_actor("annotator"), vid, "approve")
    with pytest.raises(InputError, match="needs a note"):
        signoff.sign(engine, COMP, vid, "reject")
    signoff.sign(engine, COMP, vid, "reject", note="the false-refusal rate doubles")
    assert signoff.get_version(engine, vid).status == "rejected"


def test_test_split_tuning_needs_an_override_note(engine: Engine) -> None:
    vid = signoff.propose(engine, PO, KIND, "a: 2\n", "tuned", tuned_on_split="test")
    with pytest.raises(InputError, match="tuned on the test split"):
        signoff.sign(engine, COMP, vid, "approve")
    vid2 = signoff.propose(
        engine,
        PO,
        KIND,
        "a: 3\n",
        "tuned",
        tuned_on_split="test",
        override_note="Regulator deadline; validation set too small.",
    )
    signoff.sign(engine, COMP, vid2, "approve")
    assert signoff.get_version(engine, vid2).override_note is not None


def test_rollback_is_a_new_version_signed_again(engine: Engine) -> None:
    v1 = signoff.propose(engine, PO, KIND, "a: 1\n", "v1")
    for who in (PO2, COMP):
        signoff.sign(engine, who, v1, "approve")
    v2 = signoff.propose(engine, PO, KIND, "a: 2\n", "v2")
    for who in (PO2, COMP):
        signoff.sign(engine, who, v2, "approve")
    v3 = signoff.propose(engine, PO2, KIND, "a: 1\n", "roll back to v1")
    assert signoff.get_version(engine, v3).status == "pending"
    assert signoff.get_version(engine, v3).sha256 == signoff.get_version(engine, v1).sha256
    for who in (PO, COMP):
        signoff.sign(engine, who, v3, "approve")
    current = signoff.current_approved(engine, KIND)
    assert current is not None and current.id == v3 and current.number == 3


def _three_signatures(engine: Engine) -> None:
    vid = signoff.propose(engine, PO, KIND, "a: 1\n", "v1")
    signoff.sign(engine, PO2, vid, "approve")
    signoff.sign(engine, COMP, vid, "approve")
    vid2 = signoff.propose(engine, PO, KIND, "a: 2\n", "v2")
    signoff.sign(engine, COMP, vid2, "approve")
    assert signoff.verify_chain(engine) == []


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("update signoffs set note = 'edited' where id = 2", "sign-off 2: its content was altered"),
        (
            "update signoffs set meaning = 'approve', role = 'compliance' where id = 1",
            "sign-off 1: its content was altered",
        ),
        ("delete from signoffs where id = 2", "sign-off 3: does not follow"),
        ("delete from signoffs where id = 3", "rows were deleted or added"),
    ],
)
def test_verify_detects_altered_and_deleted_rows(
    any_engine: Engine, sql: str, expected: str
) -> None:
    _three_signatures(any_engine)
    with any_engine.begin() as c:
        c.execute(text(sql))
    problems = signoff.verify_chain(any_engine)
    assert any(expected in p for p in problems), problems


def test_approval_freezes_the_split_of_the_cases_it_used(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    case = cases.get_case(demo_engine, key="CASE-001")
    assert case is not None
    vid = signoff.propose(demo_engine, PO, KIND, "a: 9\n", "uses CASE-001")
    signoff.sign(demo_engine, COMP, vid, "approve", lock_case_ids=[case.id])
    assert signoff.locked_case_ids(demo_engine, [case.id]) == {case.id}
    moved = cases.CaseIn.model_validate({**case.record, "split": "test"})
    ines = make_actor("annotator", "ines@example.org")
    with pytest.raises(InputError, match="split of CASE-001 is frozen"):
        cases.update_case(demo_engine, ines, case.id, case.version, moved, tax)
    # other edits still work
    noted = cases.CaseIn.model_validate({**case.record, "notes": "still editable"})
    assert cases.update_case(demo_engine, ines, case.id, case.version, noted, tax) == 2
