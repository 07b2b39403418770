"""Issue 16, items 7 and 8 on the Thresholds page and its services: a threshold proposal
whose parent is no longer the policy in force cannot be approved (the page says why, and
rejecting still works); when the sign-off record does not verify, the page shows a blocking
banner and serves the last verified version."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text

from review.core.errors import InputError
from review.core.identity import SYSTEM
from review.policy import chain, inforce, signoff
from review.thresholds import thresholds
from tests.helpers.actors import make_actor
from tests.helpers.pages import PAULA, no_exception, open_tab, page_app, readable

PAGE = "pages/thresholds_page.py"
OMAR = make_actor("product_owner", "omar.haddad@brightwave.example")
PAT = make_actor("product_owner", "pat@example.org")
COMP = make_actor("compliance", "chen.li@brightwave.example")
CHEN = "chen.li@brightwave.example"


@pytest.fixture(autouse=True)
def _fresh_checks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(chain.ENV_KEY, raising=False)
    chain.set_signing_key(None)
    signoff.clear_chain_cache()
    yield
    chain.set_signing_key(None)  # a page may have passed a key from its secrets
    signoff.clear_chain_cache()


def _clear_pending(engine: Engine) -> None:
    for v in signoff.versions(engine, inforce.KIND):
        if v.status == "pending":
            signer = COMP if v.author != COMP.email else OMAR
            signoff.sign(engine, signer, v.id, "reject", note="cleared for the test")


def _two_proposals(engine: Engine) -> tuple[int, int]:
    """Two proposals on top of the policy in force; the first is approved."""
    _clear_pending(engine)
    first = thresholds.propose_thresholds(
        engine, OMAR, "vector", 0.5, 0.6, "one way", tuned_on_split="validation"
    )
    second = thresholds.propose_thresholds(
        engine, OMAR, "vector", 0.4, 0.6, "another way", tuned_on_split="validation"
    )
    for who in (PAT, COMP):
        signoff.sign(engine, who, first, "approve")
    return first, second


def test_a_threshold_proposal_overtaken_by_an_approval_cannot_be_approved(
    demo_engine: Engine,
) -> None:
    first, second = _two_proposals(demo_engine)
    in_force = inforce.in_force(demo_engine).version
    assert in_force is not None and in_force.id == first
    stale = signoff.get_version(demo_engine, second)
    parent = signoff.get_version(demo_engine, stale.parent_id or 0)
    with pytest.raises(InputError) as err:
        signoff.sign(demo_engine, PAT, second, "approve")
    message = str(err.value)
    assert f"version {stale.number} was proposed on top of version {parent.number}" in message
    assert f"version {in_force.number} is in force now" in message
    assert "propose the change again on top of the version in force" in message
    assert signoff.get_version(demo_engine, second).status == "pending"
    signoff.sign(demo_engine, PAT, second, "reject", note="overtaken")
    assert signoff.get_version(demo_engine, second).status == "rejected"


def test_the_sign_off_tab_says_why_a_stale_proposal_cannot_be_approved(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, second = _two_proposals(demo_engine)
    stale = signoff.get_version(demo_engine, second)
    at = page_app(demo_url, monkeypatch, PAGE, PAULA).run()
    open_tab(at, "Sign-off")
    no_exception(at)
    errors = [readable(e) for e in at.error]
    assert any(
        f"version {stale.number} was proposed on top of" in e and "is in force now" in e
        for e in errors
    ), errors
    # the page offers no approval of it (the service refuses one, see the test above): only
    # Reject, and nothing is signed
    assert [b.label for b in at.button if b.label in ("Approve", "Reject")] == ["Reject"]
    assert signoff.get_version(demo_engine, second).signatures == ()


def test_a_broken_record_shows_a_banner_and_serves_the_last_verified_version(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    current = inforce.in_force(demo_engine).version
    assert current is not None and current.number == 2
    with demo_engine.begin() as c:
        c.execute(
            text("update policy_versions set author = :a where id = :i"),
            {"a": CHEN, "i": current.id},
        )
    signoff.clear_chain_cache()
    served = inforce.in_force(demo_engine).version
    assert served is not None and served.number == 1
    at = page_app(demo_url, monkeypatch, PAGE, PAULA).run()
    no_exception(at)
    banner = next((readable(e) for e in at.error if "does not verify" in readable(e)), "")
    assert "no-answer policy version 1 is served, the last verified one" in banner, banner
    assert "the record says version 2" in banner
    assert any("sign-off v1" in readable(c) for c in at.caption)
    # the wording was signed after the broken row: no verified wording is left, so none is
    # served and the Wording page says it cannot be read (fail closed)
    assert "no refusal wording is served" in banner
    at = page_app(demo_url, monkeypatch, "pages/wording_page.py", PAULA).run()
    no_exception(at)
    assert any("cannot be read" in readable(e) for e in at.error)


@pytest.mark.parametrize(
    "page",
    [
        "pages/thresholds_page.py",
        "pages/wording_page.py",
        "pages/runs_page.py",
        "pages/review_page.py",
        "pages/audit_page.py",
        "pages/monitoring_page.py",
    ],
)
def test_every_page_that_uses_the_policy_in_force_shows_the_banner(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch, page: str
) -> None:
    """A signature appended without the chain head (a forged rejection of the policy in
    force): the banner shows on every page that uses the policy or wording in force, and the
    forged row, not verified, changes nothing that is served."""
    current = inforce.in_force(demo_engine).version
    assert current is not None
    head, _ = signoff.chain_head(demo_engine)
    with demo_engine.begin() as c:
        c.execute(
            text(
                "insert into signoffs (policy_version_id, signer, role, meaning, note, at, "
                "policy_sha256, data_fingerprint, metrics_snapshot, prev_hash, row_hash, "
                "chain_format, hash_alg) values (:v, 'mallory@example.org', 'compliance', "
                "'reject', 'forged', '2026-01-01 00:00:00', :d, '', '{}', :p, 'forged', 2, "
                "'sha256')"
            ),
            {"v": current.id, "d": current.sha256, "p": head},
        )
    signoff.clear_chain_cache()
    served = inforce.in_force(demo_engine).version
    assert served is not None and served.id == current.id
    at = page_app(demo_url, monkeypatch, page, PAULA).run()
    no_exception(at)
    banner = next((readable(e) for e in at.error if "does not verify" in readable(e)), "")
    assert "rows were deleted or added" in banner, (page, banner)
    # the record, believing the forged rejection, says version 1; version 2 is what verifies
    assert (
        f"no-answer policy version {current.number} is served, the last verified one (the "
        f"record says version {current.number - 1})"
    ) in banner, banner
    assert "refusal wording version 1 is served (it verifies)" in banner


def test_with_no_verified_policy_left_the_decisions_are_refused_with_the_reason(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first signature of the first policy version edited: nothing after it verifies,
    so no policy is served and `workbench decide` (which uses the policy in force) refuses,
    naming why, instead of deciding with an unverified or superseded policy."""
    from click.testing import CliRunner

    from review.cli.main import main
    from tests.helpers.paths import ROOT

    first = min(sg.id for v in signoff.versions(demo_engine, inforce.KIND) for sg in v.signatures)
    with demo_engine.begin() as c:
        c.execute(text("update signoffs set note = 'edited' where id = :i"), {"i": first})
    signoff.clear_chain_cache()
    with pytest.raises(signoff.TamperedPolicyError, match="none is in force"):
        inforce.in_force(demo_engine)
    fixtures = ROOT / "examples" / "evidence-gate-fixtures.jsonl"
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", demo_url)
    result = CliRunner().invoke(main, ["decide", str(fixtures)])
    assert result.exit_code == 1
    assert f"sign-off {first}: its content was altered" in result.output
    assert "No verified no-answer policy version is left to serve" in result.output
    assert "{" not in result.output  # no decision printed


def test_the_pages_pass_the_signing_key_from_the_secrets_down(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(chain.ENV_KEY, "the deployment's key")
    signoff.adopt_signing_key(demo_engine, SYSTEM)  # the demo's plain rows, sealed by the key
    pending = next(v for v in signoff.versions(demo_engine, inforce.KIND) if v.status == "pending")
    signer = COMP if pending.author != COMP.email else OMAR
    signoff.sign(demo_engine, signer, pending.id, "reject", note="keyed row")
    assert signoff.verify_chain(demo_engine) == []
    monkeypatch.delenv(chain.ENV_KEY)
    signoff.clear_chain_cache()
    # no key anywhere: the keyed row cannot be checked, and the page says so
    at = page_app(demo_url, monkeypatch, PAGE, PAULA).run()
    no_exception(at)
    assert any("cannot be checked without the signing key" in readable(e) for e in at.error)
    # the key in .streamlit/secrets.toml ([signing] key): the record verifies, no banner
    signoff.clear_chain_cache()
    at = page_app(demo_url, monkeypatch, PAGE, PAULA)
    at.secrets["signing"] = {"key": "the deployment's key"}
    at.run()
    no_exception(at)
    assert not any("does not verify" in readable(e) for e in at.error)
    # a key in the secrets that never sealed this record: the page says so
    signoff.clear_chain_cache()
    at = page_app(demo_url, monkeypatch, PAGE, PAULA)
    at.secrets["signing"] = {"key": "a key that sealed nothing"}
    at.run()
    no_exception(at)
    assert any("not sealed with the signing key" in readable(e) for e in at.error)
