"""Four-eyes sign-off: roles, the author rule, distinct approvers, the test-split flag, and
tamper detection (of the signatures and of the signed policy texts)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from sqlalchemy import Engine, text

from review.cases import cases
from review.cli.main import main
from review.core.errors import InputError, PermissionDenied, PolicyFileError
from review.core.identity import Actor, Role
from review.core.taxonomy import Taxonomy
from review.policy import inforce, signoff
from review.thresholds import thresholds
from review.wording import versions
from tests.helpers.actors import make_actor
from tests.helpers.transact import write

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
    with pytest.raises(InputError, match="tuned on the test data it is reported on"):
        signoff.sign(engine, COMP, vid, "approve")
    # audited traces form one sample, tuned and reported on: flagged the same way
    audit = signoff.propose(engine, PO, KIND, "a: 4\n", "from audits", tuned_on_split="audit")
    with pytest.raises(InputError, match="tuned on the audit data it is reported on"):
        signoff.sign(engine, COMP, audit, "approve")
    assert signoff.needs_override("audit") and not signoff.needs_override("validation")
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
        write(demo_engine, cases.update_case, ines, case.id, case.version, moved, tax)
    # other edits still work
    noted = cases.CaseIn.model_validate({**case.record, "notes": "still editable"})
    assert write(demo_engine, cases.update_case, ines, case.id, case.version, noted, tax) == 2


# ---------------------------------------------------------------------------------------
# The required approvals come from different people

BOTH = Actor(
    id=98,
    email="both.roles@example.org",
    name="Both Roles",
    roles=frozenset({Role.product_owner, Role.compliance}),
    clearance=False,
)


def test_a_person_holding_both_roles_gives_only_one_approval(any_engine: Engine) -> None:
    vid = signoff.propose(any_engine, PO, KIND, "a: 1\n", "v1")
    signoff.sign(any_engine, BOTH, vid, "approve", role=Role.product_owner)
    for who in (BOTH, replace(BOTH, email="  Both.Roles@EXAMPLE.org ")):
        with pytest.raises(PermissionDenied, match="must come from different people"):
            signoff.sign(any_engine, who, vid, "approve", role=Role.compliance)
    v = signoff.get_version(any_engine, vid)
    assert v.status == "pending" and v.missing_roles == ["compliance"]
    assert [s.signer for s in v.signatures] == [BOTH.email]
    signoff.sign(any_engine, COMP, vid, "approve")  # another person completes it
    assert signoff.get_version(any_engine, vid).status == "approved"
    assert signoff.verify_chain(any_engine) == []


def test_a_person_who_approved_may_still_reject_in_their_other_role(engine: Engine) -> None:
    """A rejection can only stop a change, so it is not a second approval."""
    vid = signoff.propose(engine, PO, KIND, "a: 1\n", "v1")
    signoff.sign(engine, BOTH, vid, "approve", role=Role.compliance)
    signoff.sign(engine, BOTH, vid, "reject", role=Role.product_owner, note="second thoughts")
    assert signoff.get_version(engine, vid).status == "rejected"


# ---------------------------------------------------------------------------------------
# A policy text edited in the database after signing


def _set_text(engine: Engine, version_id: int, yaml_text: str, sha256: str | None = None) -> None:
    with engine.begin() as c:
        c.execute(
            text("update policy_versions set yaml_text = :t where id = :i"),
            {"t": yaml_text, "i": version_id},
        )
        if sha256 is not None:
            c.execute(
                text("update policy_versions set sha256 = :s where id = :i"),
                {"s": sha256, "i": version_id},
            )


def _in_force_policy(engine: Engine) -> signoff.VersionView:
    v = signoff.current_approved(engine, inforce.KIND)
    assert v is not None and v.status == "approved" and v.number == 2
    return v


def test_an_edited_approved_policy_is_reported_and_not_served(demo_engine: Engine) -> None:
    assert signoff.verify_chain(demo_engine) == []
    v = _in_force_policy(demo_engine)
    edited = v.yaml_text.replace("refuse_below: 0.55", "refuse_below: 0.05", 1)
    assert edited != v.yaml_text
    _set_text(demo_engine, v.id, edited)

    problems = signoff.verify_chain(demo_engine)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"policy version {v.id} (no-answer policy version 2): ")
    assert "no longer hashes to the sha256 its signatures recorded" in problems[0]
    # never served: the last verified version (1) is, and the pages say so in a banner
    pif = inforce.in_force(demo_engine)
    assert pif.version is not None and pif.version.number == 1
    banner = signoff.integrity_banner(demo_engine)
    assert banner is not None and "no-answer policy version 1 is served" in banner
    assert "the record says version 2" in banner
    with pytest.raises(signoff.TamperedPolicyError, match="version 2"):
        thresholds.export_approved(demo_engine)
    with pytest.raises(signoff.TamperedPolicyError, match="nothing can be proposed"):
        thresholds.propose_thresholds(
            demo_engine, PO, "vector", 0.4, 0.5, "on top of it", tuned_on_split="validation"
        )
    # with version 1 edited too, no verified version is left: nothing is served
    v1 = pif.version
    _set_text(demo_engine, v1.id, v1.yaml_text.replace("refuse_below:", "refuse_below: 0.01 #", 1))
    with pytest.raises(signoff.TamperedPolicyError, match="no-answer policy version 2") as err:
        inforce.in_force(demo_engine)
    assert isinstance(err.value, PolicyFileError)  # the pages show it as an unreadable policy
    assert "no older version is put in force" in str(err.value)
    _set_text(demo_engine, v1.id, v1.yaml_text)

    _set_text(demo_engine, v.id, v.yaml_text)  # put back: served again
    assert signoff.verify_chain(demo_engine) == []
    pif = inforce.in_force(demo_engine)
    assert pif.version is not None and pif.version.id == v.id
    # what a signature covers is the policy's meaning: a comment is not a change
    _set_text(demo_engine, v.id, v.yaml_text + "# reviewed\n")
    assert signoff.verify_chain(demo_engine) == []


def test_text_and_sha256_rewritten_together_are_reported(demo_engine: Engine) -> None:
    v = _in_force_policy(demo_engine)
    edited = v.yaml_text.replace("caveat_below: 0.65", "caveat_below: 0.95", 1)
    assert edited != v.yaml_text
    digest = signoff.sha256_text(signoff.kind(inforce.KIND).canonical(edited))
    _set_text(demo_engine, v.id, edited, sha256=digest)
    problems = signoff.verify_chain(demo_engine)
    # the signatures cover the version's sha256 (chain format 2), and the text check sees it
    assert any(f"policy version {v.id} " in p for p in problems), problems
    assert any("is not the sha256 sign-off" in p for p in problems)
    first = v.signatures[0].id
    assert any(p.startswith(f"sign-off {first}: its content was altered") for p in problems)
    signoff.clear_chain_cache()
    pif = inforce.in_force(demo_engine)  # the last verified version is served
    assert pif.version is not None and pif.version.number == 1


def test_an_edited_superseded_version_is_reported_but_the_policy_in_force_stays(
    demo_engine: Engine,
) -> None:
    current = _in_force_policy(demo_engine)
    v1 = next(v for v in signoff.versions(demo_engine, inforce.KIND) if v.number == 1)
    _set_text(demo_engine, v1.id, "not: [a policy\n")
    problems = signoff.verify_chain(demo_engine)
    assert len(problems) == 1 and problems[0].startswith(f"policy version {v1.id} "), problems
    assert "no longer reads as a valid policy file" in problems[0]
    pif = inforce.in_force(demo_engine)
    assert pif.version is not None and pif.version.id == current.id


def test_an_edited_approved_wording_is_reported_and_not_served(demo_engine: Engine) -> None:
    w = versions.in_force(demo_engine).version
    assert w is not None and w.number == 1
    edited = w.yaml_text.replace("could you tell me", "you must tell me", 1)
    assert edited != w.yaml_text
    _set_text(demo_engine, w.id, edited)
    problems = signoff.verify_chain(demo_engine)
    assert problems == [
        p for p in problems if p.startswith(f"policy version {w.id} (refusal wording version 1)")
    ]
    assert len(problems) == 1
    with pytest.raises(signoff.TamperedPolicyError, match="refusal wording version 1"):
        versions.in_force(demo_engine)


def test_an_edited_pending_version_cannot_be_signed(engine: Engine) -> None:
    vid = signoff.propose(engine, PO, KIND, "a: 1\n", "v1")
    _set_text(engine, vid, "a: 2\n")
    problems = signoff.verify_chain(engine)
    assert len(problems) == 1 and "the sha256 recorded when it was proposed" in problems[0]
    with pytest.raises(signoff.TamperedPolicyError, match="version 1 cannot be signed"):
        signoff.sign(engine, COMP, vid, "approve")
    assert signoff.get_version(engine, vid).signatures == ()


def test_cli_verify_signoffs_and_export_fail_on_an_edited_policy(
    demo_url: str, demo_engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", demo_url)
    run = CliRunner().invoke
    v = _in_force_policy(demo_engine)
    _set_text(demo_engine, v.id, v.yaml_text.replace("refuse_below: 0.55", "refuse_below: 0.1"))
    r = run(main, ["verify-signoffs"])
    assert r.exit_code == 1, r.output
    assert f"TAMPERED: policy version {v.id} (no-answer policy version 2)" in r.output
    out = tmp_path / "approved.yaml"
    r = run(main, ["export-policy", str(out)])
    assert r.exit_code != 0 and "version 2" in r.output and not out.exists()
