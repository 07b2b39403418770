"""Issue 16, items 7 and 8: an approval applies only on top of what is in force; the sign-off
chain covers everything that decides what is in force (the signed version's parent, author,
kind, number, text digest and required roles too), optionally under a signing key; what is
put in force is only what verifies (the last verified version, or nothing); old-format rows
keep verifying and cannot be downgraded silently; ``verify-signoffs --head`` compares with a
head recorded elsewhere."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from sqlalchemy import Engine, select, text

from review.cli.main import main
from review.core.errors import InputError, PermissionDenied
from review.core.identity import Role
from review.policy import chain, signoff
from storage.db import read_session
from storage.models import SignOff
from tests.helpers.actors import make_actor

KIND = "chain_test_policy"
OTHER_KIND = "chain_test_other"


def _validate(t: str, source: str) -> object:
    data = yaml.safe_load(t)
    if not isinstance(data, dict):
        raise InputError(f"{source}: expected a mapping")
    return data


def _roles(t: str, parent: str | None) -> frozenset[Role]:
    """Compliance signs when ``escalate`` changed from the parent (or there is no parent)."""
    new = yaml.safe_load(t) if t else None
    old = yaml.safe_load(parent) if parent else None
    if (
        isinstance(new, dict)
        and isinstance(old, dict)
        and new.get("escalate") == old.get("escalate")
    ):
        return frozenset({Role.product_owner})
    return frozenset({Role.product_owner, Role.compliance})


for _name in (KIND, OTHER_KIND):
    signoff.register_kind(
        signoff.Kind(
            _name,
            f"{_name.replace('_', ' ')}",
            _validate,
            canonical=lambda t: yaml.safe_dump(yaml.safe_load(t), sort_keys=True),
            required_roles=_roles,
        )
    )

PO = make_actor("product_owner", "paula@example.org")
PO2 = make_actor("product_owner", "pat@example.org")
COMP = make_actor("compliance", "chen@example.org")


@pytest.fixture(autouse=True)
def _fresh_checks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No signing key unless a test sets one; every check afresh (tests edit rows in place)."""
    monkeypatch.delenv(chain.ENV_KEY, raising=False)
    chain.set_signing_key(None)
    signoff.clear_chain_cache()
    yield
    chain.set_signing_key(None)
    signoff.clear_chain_cache()


def _approve(engine: Engine, vid: int) -> None:
    v = signoff.get_version(engine, vid)
    for who in (PO2, COMP):
        if who.roles & v.required_roles:
            signoff.sign(engine, who, vid, "approve")


def _two_versions(engine: Engine) -> tuple[int, int]:
    """Version 1 (both roles) approved, then version 2 on top of it (both roles: escalate
    changed) approved: 4 signatures, version 2 in force."""
    v1 = signoff.propose(engine, PO, KIND, "refuse_below: 0.5\nescalate: team\n", "first")
    _approve(engine, v1)
    v2 = signoff.propose(engine, PO, KIND, "refuse_below: 0.6\nescalate: legal\n", "second")
    _approve(engine, v2)
    assert signoff.verify_chain(engine) == []
    served = signoff.in_force_version(engine, KIND)
    assert served is not None and served.id == v2
    return v1, v2


def _sql(engine: Engine, statement: str, **params: object) -> None:
    with engine.begin() as c:
        c.execute(text(statement), params)
    signoff.clear_chain_cache()


def _log_hash(engine: Engine, signoff_id: int, digest: str) -> None:
    """Rewrite the hash the audit log recorded for a signature (a writer covering tracks)."""
    with engine.begin() as c:
        logged = c.execute(
            text("select id, after from audit_log where entity = 'policy_version'")
        ).all()
        for aid, after in logged:
            data = json.loads(after) if isinstance(after, str) else after
            if isinstance(data, dict) and data.get("signoff") == signoff_id:
                data["row_hash"] = digest
                c.execute(
                    text("update audit_log set after = :a where id = :i"),
                    {"a": json.dumps(data), "i": aid},
                )
    signoff.clear_chain_cache()


def _served(engine: Engine) -> int | None:
    v = signoff.in_force_version(engine, KIND)
    return v.number if v is not None else None


# ---------------------------------------------------------------------------------------------
# Item 7: an approval applies only on top of what is in force


def test_approving_a_proposal_whose_parent_is_no_longer_in_force_is_refused(
    engine: Engine,
) -> None:
    v1 = signoff.propose(engine, PO, KIND, "a: 1\nescalate: team\n", "v1")
    _approve(engine, v1)
    left = signoff.propose(engine, PO, KIND, "a: 2\nescalate: legal\n", "from v1, one way")
    right = signoff.propose(engine, PO2, KIND, "a: 3\nescalate: desk\n", "from v1, another")
    signoff.sign(engine, COMP, right, "approve")  # a first signature while v1 is in force
    _approve(engine, left)  # version 2 goes into force
    assert _served(engine) == 2
    stale = signoff.get_version(engine, right)
    why = signoff.stale_parent(engine, stale)
    assert why is not None and "version 3 was proposed on top of version 1" in why
    assert "version 2 is in force" in why and "propose the change again" in why
    with pytest.raises(InputError, match="proposed on top of version 1, but version 2 is in"):
        signoff.sign(engine, PO, right, "approve")
    assert signoff.get_version(engine, right).status == "pending"
    assert _served(engine) == 2
    # rejecting stays allowed
    signoff.sign(engine, PO, right, "reject", note="made on top of version 1")
    assert signoff.get_version(engine, right).status == "rejected"
    assert signoff.verify_chain(engine) == []


def test_a_first_proposal_cannot_be_approved_once_another_is_in_force(engine: Engine) -> None:
    one = signoff.propose(engine, PO, KIND, "a: 1\n", "first try")
    two = signoff.propose(engine, PO2, KIND, "a: 2\n", "second try")
    assert signoff.get_version(engine, two).parent_id is None
    _approve(engine, one)
    with pytest.raises(InputError, match=r"on top of nothing .*, but version 1 is in force"):
        signoff.sign(engine, COMP, two, "approve")
    signoff.sign(engine, COMP, two, "reject", note="version 1 went first")


# ---------------------------------------------------------------------------------------------
# Item 8: every field that decides what is in force is covered


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("update policy_versions set parent_id = null where id = :v2", "altered"),
        ("update policy_versions set author = 'pat@example.org' where id = :v2", "altered"),
        ("update policy_versions set number = 7 where id = :v2", "altered"),
        (f"update policy_versions set kind = '{OTHER_KIND}' where id = :v2", "altered"),
        ("update signoffs set signer = 'mallory@example.org' where id = :s2", "altered"),
        ("update signoffs set role = 'product_owner' where id = :s2", "altered"),
        ("update signoffs set meaning = 'reject' where id = :s1", "altered"),
        ("update signoffs set at = '2020-01-01 00:00:00' where id = :s2", "altered"),
        ("update signoffs set hash_alg = 'md5' where id = :s2", "unknown hash algorithm"),
    ],
)
def test_editing_a_covered_field_of_the_version_in_force_serves_the_last_verified_one(
    engine: Engine, statement: str, expected: str
) -> None:
    _, v2 = _two_versions(engine)
    s1, s2 = [sg.id for sg in signoff.get_version(engine, v2).signatures]
    _sql(engine, statement, v2=v2, s1=s1, s2=s2)
    problems = signoff.verify_chain(engine)
    first = f"sign-off {s1 if ':s1' in statement or 'policy_versions' in statement else s2}: "
    assert any(p.startswith(first) and expected in p for p in problems), problems
    # version 2's approval is not verified: version 1, the last verified version, is served
    assert _served(engine) == 1
    banner = signoff.integrity_banner(engine)
    assert banner is not None and "does not verify" in banner
    # nothing new can be proposed or approved while the record is broken
    with pytest.raises(signoff.TamperedPolicyError, match="nothing can be proposed"):
        signoff.propose(engine, PO, KIND, "a: 9\n", "on a broken record")


def test_an_edited_text_of_the_version_in_force_falls_back_and_of_both_serves_nothing(
    engine: Engine,
) -> None:
    v1, v2 = _two_versions(engine)
    _sql(
        engine,
        "update policy_versions set yaml_text = 'refuse_below: 0.1\nescalate: legal\n' "
        "where id = :v",
        v=v2,
    )
    problems = signoff.verify_chain(engine)
    assert any(p.startswith(f"policy version {v2} ") for p in problems), problems
    assert _served(engine) == 1
    _sql(
        engine,
        "update policy_versions set yaml_text = 'refuse_below: 0.1\nescalate: team\n' "
        "where id = :v",
        v=v1,
    )
    with pytest.raises(signoff.TamperedPolicyError, match="none is in force"):
        signoff.in_force_version(engine, KIND)


def test_required_roles_are_covered_through_the_parent_text(engine: Engine) -> None:
    """Version 2 needed compliance because ``escalate`` changed from version 1; rewriting
    version 1's text (and its sha256 and signatures' sha256: a careful forger) so that
    ``escalate`` did not change breaks version 2's signatures, which recorded the roles."""
    v1, v2 = _two_versions(engine)
    forged = "refuse_below: 0.5\nescalate: legal\n"
    digest = signoff.sha256_text(signoff.kind(KIND).canonical(forged))
    _sql(engine, "update policy_versions set yaml_text = :t, sha256 = :d where id = :v",
         t=forged, d=digest, v=v1)  # fmt: skip
    _sql(engine, "update signoffs set policy_sha256 = :d where policy_version_id = :v",
         d=digest, v=v1)  # fmt: skip
    assert signoff.get_version(engine, v2).required_roles == {Role.product_owner}
    problems = signoff.verify_chain(engine)
    broken = {int(p.split(":")[0].split()[1]) for p in problems if p.startswith("sign-off")}
    v2_sigs = {sg.id for sg in signoff.get_version(engine, v2).signatures}
    assert v2_sigs <= broken  # the roles version 2's signers saw are no longer the roles
    # version 1's own rows are broken too (their sha256), so nothing verified is left
    with pytest.raises(signoff.TamperedPolicyError):
        signoff.in_force_version(engine, KIND)


def test_a_broken_row_cuts_off_everything_signed_after_it(engine: Engine) -> None:
    v1, _ = _two_versions(engine)
    first_of_v1 = signoff.get_version(engine, v1).signatures[0].id
    _sql(engine, "update signoffs set note = 'edited' where id = :i", i=first_of_v1)
    assert any(p.startswith(f"sign-off {first_of_v1}: ") for p in signoff.verify_chain(engine))
    with pytest.raises(signoff.TamperedPolicyError, match="does not verify"):
        signoff.in_force_version(engine, KIND)


def test_a_forged_rejection_appended_to_the_version_in_force_is_not_believed(
    engine: Engine,
) -> None:
    """A row added after the head (without updating it) is not verified: it cannot reject."""
    _, v2 = _two_versions(engine)
    with read_session(engine) as s:
        last = s.scalars(select(SignOff).order_by(SignOff.id.desc())).first()
        assert last is not None
        prev = last.row_hash
    _sql(
        engine,
        "insert into signoffs (policy_version_id, signer, role, meaning, note, at, "
        "policy_sha256, data_fingerprint, metrics_snapshot, prev_hash, row_hash, chain_format, "
        "hash_alg) values (:v, 'mallory@example.org', 'compliance', 'reject', 'no', "
        "'2026-01-01 00:00:00', 'x', '', '{}', :p, 'forged', 2, 'sha256')",
        v=v2,
        p=prev,
    )
    assert signoff.get_version(engine, v2).status == "rejected"  # as recorded
    problems = signoff.verify_chain(engine)
    assert any("rows were deleted or added" in p for p in problems), problems
    assert _served(engine) == 2  # the forged row is after the verified head: ignored


def test_a_last_row_rewritten_with_a_consistent_hash_is_caught_by_the_head(
    engine: Engine,
) -> None:
    """Without a key anyone can recompute a row's hash; the head then no longer names it."""
    _, v2 = _two_versions(engine)
    with read_session(engine) as s:
        rows = [signoff.row_data(sg) for sg in s.scalars(select(SignOff).order_by(SignOff.id))]
    last = rows[-1]
    edited = chain.RowData(**{**last.__dict__, "note": "rewritten"})
    fields = signoff.version_fields_of(engine, v2)
    digest = chain.row_hash(last.prev_hash, chain.payload(edited, fields), chain.PLAIN, None)
    _sql(engine, "update signoffs set note = 'rewritten', row_hash = :h where id = :i",
         h=digest, i=last.id)  # fmt: skip
    assert signoff.verify_chain(engine) == [
        "the last signature does not match the chain head",
        f"sign-off {last.id}: its hash is not the one the audit log recorded when it was "
        "signed (the row was rewritten)",
    ]
    assert _served(engine) == 1  # version 2's last approval is the replaced row
    # the head rewritten too: the audit log, which recorded the hash it was signed with,
    # still catches it (it used to verify)
    _sql(engine, "update settings set value = :v where key = :k",
         v=json.dumps({"count": len(rows), "head": digest}), k=signoff.CHAIN_KEY)  # fmt: skip
    assert signoff.verify_chain(engine) == [
        f"sign-off {last.id}: its hash is not the one the audit log recorded when it was "
        "signed (the row was rewritten)"
    ]
    # the audit log rewritten as well: nothing in the database catches it; the head recorded
    # elsewhere does (`workbench verify-signoffs --head`)
    _log_hash(engine, last.id, str(digest))
    assert signoff.verify_chain(engine) == []
    assert signoff.chain_head(engine)[0] != last.row_hash
    assert signoff.recorded_head(engine, last.row_hash)[0] is False


# ---------------------------------------------------------------------------------------------
# Old-format rows and no silent downgrade


def _rewrite_as_format_1(engine: Engine) -> None:
    """Turn every row into what a database signed before revision 0016 holds."""
    prev = chain.GENESIS
    logged: list[tuple[int, str]] = []
    with read_session(engine) as s:
        rows = [signoff.row_data(sg) for sg in s.scalars(select(SignOff).order_by(SignOff.id))]
    with engine.begin() as c:
        for r in rows:
            old = chain.RowData(**{**r.__dict__, "prev_hash": prev, "chain_format": 1})
            digest = chain.row_hash(prev, chain.payload(old, None), chain.PLAIN, None)
            c.execute(
                text(
                    "update signoffs set chain_format = 1, hash_alg = 'sha256', prev_hash = :p, "
                    "row_hash = :h where id = :i"
                ),
                {"p": prev, "h": digest, "i": r.id},
            )
            prev = str(digest)
            logged.append((r.id, prev))
        value = json.dumps({"count": len(rows), "head": prev})
        c.execute(text("update settings set value = :v where key = :k"),
                  {"v": value, "k": signoff.CHAIN_KEY})  # fmt: skip
    for sid, digest in logged:  # such a database logged the hashes its rows were signed with
        _log_hash(engine, sid, digest)
    signoff.clear_chain_cache()


def test_old_format_rows_still_verify_and_new_rows_follow_them(engine: Engine) -> None:
    _two_versions(engine)
    _rewrite_as_format_1(engine)
    assert signoff.verify_chain(engine) == []
    assert _served(engine) == 2
    v3 = signoff.propose(engine, PO, KIND, "refuse_below: 0.7\nescalate: legal\n", "third")
    _approve(engine, v3)
    with read_session(engine) as s:
        formats = list(s.scalars(select(SignOff.chain_format).order_by(SignOff.id)))
    assert formats == [1, 1, 1, 1, 2]
    assert signoff.verify_chain(engine) == []
    assert _served(engine) == 3
    # an old-format row is not covered for the version's fields: an edit there is reported
    # only through the text check (documented); a new-format row is
    _sql(engine, "update policy_versions set author = 'x@example.org' where id = :v", v=v3)
    assert signoff.verify_chain(engine) != []


def test_a_new_format_row_downgraded_to_the_old_format_is_reported(engine: Engine) -> None:
    _two_versions(engine)
    with read_session(engine) as s:
        rows = [signoff.row_data(sg) for sg in s.scalars(select(SignOff).order_by(SignOff.id))]
    last = rows[-1]
    # the forger recomputes the last row as an old-format one, and the head with it
    old = chain.RowData(**{**last.__dict__, "chain_format": 1})
    digest = chain.row_hash(last.prev_hash, chain.payload(old, None), chain.PLAIN, None)
    _sql(engine, "update signoffs set chain_format = 1, row_hash = :h where id = :i",
         h=digest, i=last.id)  # fmt: skip
    _sql(engine, "update settings set value = :v where key = :k",
         v=json.dumps({"count": len(rows), "head": digest}), k=signoff.CHAIN_KEY)  # fmt: skip
    problems = signoff.verify_chain(engine)
    assert any(
        p.startswith(f"sign-off {last.id}: recorded in the old chain format") for p in problems
    ), problems
    assert _served(engine) == 1


# ---------------------------------------------------------------------------------------------
# The signing key

ADMIN = make_actor("admin", "ada@example.org")


def _adopt(engine: Engine) -> signoff.Adoption:
    done = signoff.adopt_signing_key(engine, ADMIN)
    signoff.clear_chain_cache()
    return done


def _rows(engine: Engine) -> list[chain.RowData]:
    with read_session(engine) as s:
        return [signoff.row_data(sg) for sg in s.scalars(select(SignOff).order_by(SignOff.id))]


def _head_value(engine: Engine) -> dict[str, object]:
    with engine.connect() as c:
        raw = c.execute(
            text("select value from settings where key = :k"), {"k": signoff.CHAIN_KEY}
        ).scalar_one()
    value = json.loads(raw) if isinstance(raw, str) else raw
    assert isinstance(value, dict)
    return value


def _recompute_as_plain(engine: Engine, signer: dict[int, str]) -> str:
    """What someone with write access to the database and no key can do: recompute every row
    as a plain sha256 row (some with a forged signer), write a head without the key's seal,
    and rewrite the hashes the audit log recorded to match. Returns the new head."""
    prev = chain.GENESIS
    rows = _rows(engine)
    new: list[tuple[int, str, str]] = []
    for r in rows:
        who = signer.get(r.id, r.signer)
        forged = chain.RowData(
            **{**r.__dict__, "signer": who, "prev_hash": prev, "hash_alg": chain.PLAIN}
        )
        fields = signoff.version_fields_of(engine, r.policy_version_id)
        digest = chain.row_hash(prev, chain.payload(forged, fields), chain.PLAIN, None)
        assert digest is not None
        new.append((r.id, who, digest))
        _sql(engine, "update signoffs set signer = :s, hash_alg = 'sha256', prev_hash = :p, "
             "row_hash = :h where id = :i", s=who, p=prev, h=digest, i=r.id)  # fmt: skip
        prev = digest
    _sql(engine, "update settings set value = :v where key = :k",
         v=json.dumps({"count": len(rows), "head": prev}), k=signoff.CHAIN_KEY)  # fmt: skip
    for sid, _, digest in new:
        _log_hash(engine, sid, digest)
    return prev


def test_with_a_key_a_record_recomputed_as_plain_rows_without_the_seal_does_not_verify(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, sqlite_url: str
) -> None:
    """Issue 30, item 9: the record rewritten as plain sha256 rows with a forged signer, the
    key's seal dropped and the audit log made to match used to verify with the key
    ("intact ... keyed with the signing key"). With the key it fails, naming every row."""
    monkeypatch.setenv(chain.ENV_KEY, "the deployment key")
    _adopt(engine)
    _two_versions(engine)
    ids = [r.id for r in _rows(engine)]
    assert all(chain.is_keyed(r.hash_alg) for r in _rows(engine))
    _recompute_as_plain(engine, {ids[1]: "mallory@example.org"})
    problems = signoff.verify_chain(engine)
    assert any(p.startswith("the sign-off record is not sealed with the signing key") for p in
               problems), problems  # fmt: skip
    for i in ids:
        assert (
            f"sign-off {i}: hashed without the signing key, and no seal of the key covers it "
            "(recomputed by someone without the key?)"
        ) in problems, problems
    with pytest.raises(signoff.TamperedPolicyError, match="vouched for by nothing"):
        signoff.in_force_version(engine, KIND)
    # the command line says it, and says which rows are keyed: none
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", sqlite_url)
    r = CliRunner().invoke(main, ["verify-signoffs"])
    assert r.exit_code == 1, r.output
    assert "UNSEALED: the sign-off record is not sealed with the signing key" in r.output
    assert "keyed with the signing key (hmac-sha256:" in r.output and "): no row" in r.output
    assert (
        f"plain sha256 and covered by no seal of the key (not verified): 4 rows, "
        f"sign-offs {ids[0]}–{ids[-1]}"
    ) in r.output
    assert "intact" not in r.output


def test_with_a_key_a_seal_moved_onto_a_rewritten_head_does_not_verify(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(chain.ENV_KEY, "the deployment key")
    _adopt(engine)
    _two_versions(engine)
    seal = _head_value(engine)["seal"]
    head = _recompute_as_plain(engine, {})
    _sql(engine, "update settings set value = :v where key = :k",
         v=json.dumps({"count": 4, "head": head, "seal": seal}), k=signoff.CHAIN_KEY)  # fmt: skip
    problems = signoff.verify_chain(engine)
    assert any("its seal does not match the count and head" in p for p in problems), problems


def test_with_a_key_forging_without_it_is_detected(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    v1 = signoff.propose(engine, PO, KIND, "refuse_below: 0.5\nescalate: team\n", "plain")
    _approve(engine, v1)  # signed before the deployment had a key: plain rows
    monkeypatch.setenv(chain.ENV_KEY, "a long random deployment secret")
    signoff.clear_chain_cache()
    # a key configured on a record it never sealed: nothing verifies, nothing is signed
    assert any("it was never sealed with this key" in p for p in signoff.verify_chain(engine))
    with pytest.raises(signoff.TamperedPolicyError, match="nothing can be proposed"):
        signoff.propose(engine, PO, KIND, "refuse_below: 0.6\nescalate: legal\n", "keyed")
    _adopt(engine)
    v2 = signoff.propose(engine, PO, KIND, "refuse_below: 0.6\nescalate: legal\n", "keyed")
    _approve(engine, v2)
    rows = _rows(engine)
    assert [chain.is_keyed(r.hash_alg) for r in rows] == [False, False, True, True]
    assert signoff.verify_chain(engine) == []  # adopted plain rows, then keyed rows
    assert _served(engine) == 2

    # a forger without the key edits a keyed row and recomputes it as a plain row: suspicious
    last = rows[-1]
    edited = chain.RowData(**{**last.__dict__, "note": "forged", "hash_alg": chain.PLAIN})
    fields = signoff.version_fields_of(engine, last.policy_version_id)
    forged = chain.row_hash(last.prev_hash, chain.payload(edited, fields), chain.PLAIN, None)
    _sql(engine, "update signoffs set note = 'forged', hash_alg = 'sha256', row_hash = :h "
         "where id = :i", h=forged, i=last.id)  # fmt: skip
    _sql(engine, "update settings set value = :v where key = :k",
         v=json.dumps({"count": 4, "head": forged}), k=signoff.CHAIN_KEY)  # fmt: skip
    problems = signoff.verify_chain(engine)
    assert any(
        p.startswith(f"sign-off {last.id}: hashed without the signing key") for p in problems
    ), problems
    assert any("not sealed with the signing key" in p for p in problems), problems
    # its length is no longer vouched for by the key: nothing is served
    with pytest.raises(signoff.TamperedPolicyError):
        signoff.in_force_version(engine, KIND)


def test_adopting_a_key_is_an_explicit_audited_step_that_checks_the_record(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, sqlite_url: str
) -> None:
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", sqlite_url)
    run = CliRunner().invoke
    _two_versions(engine)  # a record kept without a key
    plain_head, _ = signoff.chain_head(engine)
    r = run(main, ["adopt-signing-key", "--yes"])
    assert r.exit_code == 1 and "no signing key is configured" in r.output, r.output
    monkeypatch.setenv(chain.ENV_KEY, "the deployment key")
    signoff.clear_chain_cache()
    with pytest.raises(signoff.TamperedPolicyError):
        signoff.in_force_version(engine, KIND)  # a record never sealed with the key
    # a head recorded elsewhere that the record does not hold: nothing is sealed
    r = run(main, ["adopt-signing-key", "--yes", "--head", "ab" * 32])
    assert r.exit_code == 1 and "HEAD MISMATCH" in r.output and "nothing was sealed" in r.output
    # asked first; declining seals nothing
    r = run(main, ["adopt-signing-key", "--head", plain_head], input="n\n")
    assert r.exit_code == 1 and "4 signatures (4 plain, 0 keyed)" in r.output, r.output
    assert "seal" not in _head_value(engine)
    r = run(main, ["adopt-signing-key", "--head", plain_head], input="y\n")
    assert r.exit_code == 0 and "now seals the sign-off record: 4 signatures" in r.output
    with engine.connect() as c:
        logged = c.execute(
            text("select actor, entity, after from audit_log where action = 'adopt_signing_key'")
        ).all()
    assert len(logged) == 1 and logged[0][0].startswith("cli:")
    after = json.loads(logged[0][2]) if isinstance(logged[0][2], str) else logged[0][2]
    assert after["count"] == 4 and after["head"] == plain_head and after["plain"] == 4
    signoff.clear_chain_cache()
    assert signoff.verify_chain(engine) == [] and _served(engine) == 2
    v3 = signoff.propose(engine, PO, KIND, "refuse_below: 0.7\nescalate: law\n", "keyed now")
    _approve(engine, v3)
    r = run(main, ["verify-signoffs"])
    assert r.exit_code == 0, r.output
    ids = [x.id for x in _rows(engine)]
    assert f"): 2 rows, sign-offs {ids[4]}–{ids[5]}" in r.output  # keyed
    assert "plain sha256, sealed by the key (adopted by cli:" in r.output
    assert f": 4 rows, sign-offs {ids[0]}–{ids[3]}" in r.output
    assert "sign-off chain intact and sealed with the signing key" in r.output
    r = run(main, ["adopt-signing-key", "--yes"])
    assert r.exit_code == 0 and "already sealed" in r.output


def test_adopting_a_key_refuses_a_record_that_does_not_verify(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row rewritten with a consistent hash and head (possible without a key): the audit
    log still has the hash it was signed with, and the key will not vouch for the row."""
    _two_versions(engine)
    last = _rows(engine)[-1]
    edited = chain.RowData(**{**last.__dict__, "note": "rewritten"})
    fields = signoff.version_fields_of(engine, last.policy_version_id)
    digest = chain.row_hash(last.prev_hash, chain.payload(edited, fields), chain.PLAIN, None)
    _sql(engine, "update signoffs set note = 'rewritten', row_hash = :h where id = :i",
         h=digest, i=last.id)  # fmt: skip
    _sql(engine, "update settings set value = :v where key = :k",
         v=json.dumps({"count": 4, "head": digest}), k=signoff.CHAIN_KEY)  # fmt: skip
    monkeypatch.setenv(chain.ENV_KEY, "the deployment key")
    with pytest.raises(signoff.TamperedPolicyError, match=r"cannot adopt it.*audit log"):
        signoff.adopt_signing_key(engine, ADMIN)
    with pytest.raises(PermissionDenied):
        signoff.adopt_signing_key(engine, PO)
    assert "seal" not in _head_value(engine)


def test_with_a_key_a_guessed_key_or_a_cut_chain_is_detected(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(chain.ENV_KEY, "the real key")
    _adopt(engine)  # a new deployment adopts its key on the empty record
    _two_versions(engine)
    rows = _rows(engine)
    last = rows[-1]
    # keyed with a guessed key under the real key's label: does not verify
    edited = chain.RowData(**{**last.__dict__, "note": "forged"})
    fields = signoff.version_fields_of(engine, last.policy_version_id)
    data = (last.prev_hash + json.dumps(chain.payload(edited, fields), sort_keys=True,
            separators=(",", ":"), default=str)).encode()  # fmt: skip
    import hashlib
    import hmac

    guessed = hmac.new(b"a guess", data, hashlib.sha256).hexdigest()
    _sql(engine, "update signoffs set note = 'forged', row_hash = :h where id = :i",
         h=guessed, i=last.id)  # fmt: skip
    problems = signoff.verify_chain(engine)
    assert any(p.startswith(f"sign-off {last.id}: its content was altered") for p in problems)
    _sql(engine, "update signoffs set note = '', row_hash = :h where id = :i",
         h=last.row_hash, i=last.id)  # fmt: skip
    assert signoff.verify_chain(engine) == []
    # the last signature deleted and the head rewritten to match: the seal fails, and the
    # audit log still records the deleted signature
    _sql(engine, "delete from signoffs where id = :i", i=last.id)
    _sql(engine, "update settings set value = :v where key = :k",
         v=json.dumps({"count": 3, "head": rows[-2].row_hash}), k=signoff.CHAIN_KEY)  # fmt: skip
    problems = signoff.verify_chain(engine)
    assert problems[0].startswith("the sign-off record is not sealed with the signing key")
    assert any(p.startswith("the audit log records 1 signature the record no longer holds "
                            f"(sign-off {last.id} (approve by") for p in problems)  # fmt: skip
    with pytest.raises(signoff.TamperedPolicyError, match="shorter than its anchors say"):
        signoff.in_force_version(engine, KIND)


def test_keyed_rows_without_the_key_cannot_be_checked_and_are_not_served(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    v1 = signoff.propose(engine, PO, KIND, "refuse_below: 0.5\nescalate: team\n", "plain")
    _approve(engine, v1)
    monkeypatch.setenv(chain.ENV_KEY, "the deployment key")
    _adopt(engine)
    v2 = signoff.propose(engine, PO, KIND, "refuse_below: 0.6\nescalate: legal\n", "keyed")
    _approve(engine, v2)
    v3 = signoff.propose(engine, PO, KIND, "refuse_below: 0.7\nescalate: law\n", "next")
    monkeypatch.delenv(chain.ENV_KEY)
    signoff.clear_chain_cache()
    problems = signoff.verify_chain(engine)
    assert problems and all("cannot be checked without the signing key" in p or
                            "none is configured: the seal cannot be checked" in p
                            for p in problems), problems  # fmt: skip
    assert not any("altered" in p for p in problems)
    assert _served(engine) == 1  # fail closed: the unverifiable approval is not served
    with pytest.raises(InputError, match="does not verify"):
        signoff.sign(engine, COMP, v3, "approve")
    # not even a rejection is appended unkeyed after keyed rows
    with pytest.raises(InputError, match="no signing key is configured: nothing was signed"):
        signoff.sign(engine, COMP, v3, "reject", note="no")
    # the key passed down by the pages (from the secrets) works like the environment's
    chain.set_signing_key("the deployment key")
    assert signoff.verify_chain(engine) == []
    # a different key is refused for signing: the chain keeps its key
    chain.set_signing_key("another key")
    signoff.clear_chain_cache()
    with pytest.raises(InputError, match="does not verify"):
        signoff.sign(engine, COMP, v3, "approve")
    with pytest.raises(InputError, match="another key"):
        signoff.adopt_signing_key(engine, ADMIN)


# ---------------------------------------------------------------------------------------------
# The head recorded elsewhere


def test_verify_signoffs_compares_with_a_recorded_head(
    demo_url: str, demo_engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", demo_url)
    run = CliRunner().invoke
    out = tmp_path / "approved.yaml"
    r = run(main, ["export-policy", str(out)])
    assert r.exit_code == 0, r.output
    first = out.read_text(encoding="utf-8").splitlines()[0]
    head, count = signoff.chain_head(demo_engine)
    signatures = f"{count} signature" + ("" if count == 1 else "s")
    assert first.startswith(f"# sign-off chain head: {head} ({signatures})")
    assert yaml.safe_load(out.read_text(encoding="utf-8"))["approved_on"]  # still the policy
    r = run(main, ["verify-signoffs", "--head", head])
    assert r.exit_code == 0 and "it holds the recorded head" in r.output, r.output
    assert f"signature {count} of {count}" in r.output
    # signatures added since are fine: the record still holds the recorded head (it used to
    # be reported as a mismatch; what the head guards against is a record rewritten or cut
    # back before it)
    pending = next(
        v for v in signoff.versions(demo_engine, "no_answer_policy") if v.status == "pending"
    )
    signer = next(a for a in (PO, COMP) if a.email != pending.author)
    signoff.sign(demo_engine, signer, pending.id, "reject", note="no")
    r = run(main, ["verify-signoffs", "--head", head])
    assert r.exit_code == 0, r.output
    assert f"signature {count} of {count + 1}; 1 signed since" in r.output
    # a head the record does not hold (rewritten before it) fails
    r = run(main, ["verify-signoffs", "--head", "cd" * 32])
    assert r.exit_code == 1 and "HEAD MISMATCH" in r.output, r.output
    assert "TAMPERED" not in r.output  # the chain itself verifies
