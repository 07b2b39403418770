"""The Thresholds and Wording History tables say where each version stands in the words the
pickers and headers of the history use (issue 35 item 7): "in force", "approved, replaced by
version N", "proposal, waiting for sign-off", "stale: superseded by version M", never the
stored keys "pending" and "approved"."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine

from review.admin import users
from review.core.identity import Actor, Role
from review.core.taxonomy import Taxonomy
from review.demo import wording_versions
from review.policy import display as policy_display
from review.policy import inforce, signoff
from review.wording import drafts, signing, versions
from tests.helpers.pages import PAULA, app, no_exception, open_tab, page_app

OMAR = "omar.haddad@brightwave.example"
CHEN = "chen.li@brightwave.example"
STORED_KEYS = {"pending", "approved", "rejected"}


def _actor(engine: Engine, email: str) -> Actor:
    row = users.get_by_email(engine, email)
    assert row is not None
    return users.to_actor(row)


def _status_column(at: Any) -> dict[int, str]:
    frame = next(df.value for df in at.dataframe if "sha256" in df.value.columns)
    return dict(zip(frame["version"], frame["status"], strict=True))


def test_thresholds_history_status_reads_in_words(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the demo's proposal P stays pending; Q, proposed on the same parent, is approved
    (p,) = [v for v in signoff.versions(demo_engine, inforce.KIND) if v.status == "pending"]
    pif = inforce.in_force(demo_engine)
    assert pif.version is not None
    was = pif.version
    text = pif.text.replace("refuse_below: 0.55", "refuse_below: 0.56", 1)
    author = next(e for e in (OMAR, PAULA) if e != p.author)
    qid = signoff.propose(demo_engine, _actor(demo_engine, author), inforce.KIND, text, "Step.")
    signer = next(e for e in (OMAR, PAULA) if e != author)
    signoff.sign(demo_engine, _actor(demo_engine, signer), qid, "approve", role=Role.product_owner)
    signoff.sign(demo_engine, _actor(demo_engine, CHEN), qid, "approve", role=Role.compliance)
    q = signoff.get_version(demo_engine, qid)
    assert q.status == "approved"

    at = app(demo_url, monkeypatch, CHEN).run()
    at.switch_page("pages/thresholds_page.py").run()
    open_tab(at, "History")
    no_exception(at)
    status = _status_column(at)
    assert status[q.number] == "in force"
    assert status[was.number] == f"approved, replaced by version {q.number}"
    assert status[p.number] == f"stale: superseded by version {q.number}"
    assert not STORED_KEYS & set(status.values()), status
    # the pickers use the same words, from the same function
    allv = signoff.versions(demo_engine, inforce.KIND)
    for v in allv:
        assert status[v.number] == policy_display.status_text(v, q.id, allv)
    options = at.selectbox(key=f"thr_hist_a_{q.id}").options
    assert any(o.endswith(f"(stale: superseded by version {q.number})") for o in options)


def test_wording_history_status_reads_in_words(
    demo_url: str, demo_engine: Engine, tax: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    wording_versions.build_demo_wording(demo_engine, tax)
    (r2,) = versions.pending(demo_engine)
    signing.propose_edits(
        demo_engine,
        _actor(demo_engine, OMAR),
        {"F1": drafts.MessageDraft("Which {missing_item} do you mean?")},
        "Shorter follow-up.",
    )
    n3 = max(v.number for v in versions.versions(demo_engine))
    at = page_app(demo_url, monkeypatch, "pages/wording_page.py", PAULA).run()
    no_exception(at)
    before = _status_column(at)
    assert before == {
        1: "in force",
        r2.number: "proposal, waiting for sign-off",
        n3: "proposal, waiting for sign-off",
    }
    signing.sign_wording(demo_engine, _actor(demo_engine, OMAR), r2.id, "approve")
    at = page_app(demo_url, monkeypatch, "pages/wording_page.py", PAULA).run()
    no_exception(at)
    after = _status_column(at)
    assert after == {
        1: f"approved, replaced by version {r2.number}",
        r2.number: "in force",
        n3: f"stale: superseded by version {r2.number}",
    }
