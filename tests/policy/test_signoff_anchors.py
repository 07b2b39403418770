"""Issue 30, item 10: a sign-off record that shrank or vanished is caught. Deleting every
sign-off and the chain head used to leave a record that verified, with the shipped policy in
force and no page warning. The record's length and head are now anchored outside what one
write to the signoffs and settings tables can change: the signatures the audit log recorded,
the head printed in an exported policy (``verify-signoffs --head``) and, with a signing key,
the key's seal. A shrunk record serves nothing: ``workbench decide`` refuses and the pages
show the banner."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine, text

from review.cli.main import main
from review.core.identity import SYSTEM
from review.core.readable import count as readable_count
from review.core.taxonomy import Taxonomy
from review.policy import chain, inforce, signoff
from tests.helpers.pages import PAULA, no_exception, page_app, readable
from tests.helpers.paths import ROOT

FIXTURES = ROOT / "examples" / "evidence-gate-fixtures.jsonl"


@pytest.fixture(autouse=True)
def _fresh_checks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(chain.ENV_KEY, raising=False)
    chain.set_signing_key(None)
    signoff.clear_chain_cache()
    yield
    chain.set_signing_key(None)
    signoff.clear_chain_cache()


def _empty_the_record(engine: Engine, *, audit_log_too: bool = False) -> None:
    """What someone with write access to the database does to make the record vanish: every
    sign-off (and the split locks that point at them) and the chain head deleted."""
    with engine.begin() as c:
        c.execute(text("delete from split_locks"))
        c.execute(text("delete from signoffs"))
        c.execute(text("delete from settings where key = :k"), {"k": signoff.CHAIN_KEY})
        if audit_log_too:
            c.execute(
                text(
                    "delete from audit_log where entity = 'policy_version' "
                    "and action in ('approve', 'reject')"
                )
            )
    signoff.clear_chain_cache()


def _decide(url: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", url)
    r = CliRunner().invoke(main, ["decide", str(FIXTURES)])
    return r.exit_code, r.output


def test_an_emptied_record_is_caught_by_the_audit_log_and_blocks_decide(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _decide(demo_url, monkeypatch)[0] == 0
    signed = sum(
        len(v.signatures)
        for name in signoff.BUILTIN_KINDS
        for v in signoff.versions(demo_engine, name)
    )
    assert signed > 0
    _empty_the_record(demo_engine)
    problems = signoff.verify_chain(demo_engine)
    assert any(
        p.startswith(
            f"the audit log records {readable_count(signed, 'signature')} "
            "the record no longer holds"
        )
        for p in problems
    ), problems
    # nothing is served: not an older version, not the shipped file
    with pytest.raises(signoff.TamperedPolicyError, match="shorter than its anchors say"):
        inforce.in_force(demo_engine)
    code, output = _decide(demo_url, monkeypatch)
    assert code == 1, output
    assert "error: the sign-off record is shorter than its anchors say" in output
    assert "{" not in output  # no decision printed
    r = CliRunner().invoke(main, ["verify-signoffs"])
    assert r.exit_code == 1 and "SHRUNK: the audit log records" in r.output, r.output


def test_a_record_cut_back_with_a_consistent_head_blocks_decide(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last signatures deleted and the head rewritten to name the one left last: the
    chain itself is consistent, the audit log is not; the older version is not served in
    place of what was approved after it."""
    with demo_engine.connect() as c:
        rows = c.execute(text("select id, row_hash from signoffs order by id")).all()
    keep = rows[:-2]
    with demo_engine.begin() as c:
        c.execute(text("delete from split_locks where signoff_id > :i"), {"i": keep[-1][0]})
        c.execute(text("delete from signoffs where id > :i"), {"i": keep[-1][0]})
        c.execute(
            text("update settings set value = :v where key = :k"),
            {
                "v": f'{{"count": {len(keep)}, "head": "{keep[-1][1]}"}}',
                "k": signoff.CHAIN_KEY,
            },
        )
    signoff.clear_chain_cache()
    problems = signoff.verify_chain(demo_engine)
    assert any(p.startswith("the audit log records 2 signatures") for p in problems), problems
    code, output = _decide(demo_url, monkeypatch)
    assert code == 1 and "shorter than its anchors say" in output, output


def test_an_emptied_record_and_audit_log_is_caught_by_the_recorded_head(
    demo_url: str, demo_engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", demo_url)
    run = CliRunner().invoke
    out = tmp_path / "approved.yaml"
    assert run(main, ["export-policy", str(out)]).exit_code == 0
    first = out.read_text(encoding="utf-8").splitlines()[0]
    head = first.split("sign-off chain head: ")[1].split()[0]
    _empty_the_record(demo_engine, audit_log_too=True)
    # without a key, a writer who also rewrites the audit log leaves nothing in the database
    # to catch it (SECURITY.md says so) ...
    assert signoff.verify_chain(demo_engine) == []
    # ... the head recorded elsewhere does
    r = run(main, ["verify-signoffs", "--head", head])
    assert r.exit_code == 1, r.output
    assert f"HEAD MISMATCH: no stored signature has the recorded head {head} (0 stored)" in (
        r.output
    )


def test_with_a_key_an_emptied_record_is_caught_by_the_seal(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(chain.ENV_KEY, "the deployment's key")
    signoff.adopt_signing_key(demo_engine, SYSTEM)
    signoff.clear_chain_cache()
    assert signoff.verify_chain(demo_engine) == []
    assert _decide(demo_url, monkeypatch)[0] == 0
    _empty_the_record(demo_engine, audit_log_too=True)
    problems = signoff.verify_chain(demo_engine)
    assert problems == [
        "the sign-off record is not sealed with the signing key: the chain head record is missing"
    ], problems
    code, output = _decide(demo_url, monkeypatch)
    assert code == 1 and "vouched for by nothing" in output, output


def test_an_emptied_record_shows_the_banner_on_the_pages(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    _empty_the_record(demo_engine)
    at = page_app(demo_url, monkeypatch, "pages/thresholds_page.py", PAULA).run()
    no_exception(at)
    banner = next((readable(e) for e in at.error if "does not verify" in readable(e)), "")
    assert "the audit log records" in banner and "no longer holds" in banner, banner
    assert "no no-answer policy is served" in banner
    assert "no refusal wording is served" in banner


def test_a_demo_built_with_a_signing_key_adopts_it_on_the_empty_record(
    engine: Engine, tax: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a key, only a sealed record verifies, so the demo builder adopts the key on its
    empty record first (audited, as the command line would) and every demo signature is
    keyed."""
    from review.demo import fixtures

    monkeypatch.setenv(chain.ENV_KEY, "the demo's key")
    fixtures.build_demo(engine, tax, variants=False, with_traces=False)
    signoff.clear_chain_cache()
    assert signoff.verify_chain(engine) == []
    status = signoff.check_afresh(engine)
    assert status.seal is not None and status.seal.adopted_count == 0
    assert status.plain == () and len(status.keyed) == status.count > 0
    with engine.connect() as c:
        adopted = c.execute(
            text("select actor from audit_log where action = 'adopt_signing_key'")
        ).all()
    assert [a for (a,) in adopted] == ["demo-data"]
