"""AppTest of the Wording page: live preview and lint, propose, two-person approval, compare,
history and the production check (demo database and an empty one)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session
from streamlit.testing.v1 import AppTest

from review.admin import users
from review.core.identity import SYSTEM
from review.core.taxonomy import Taxonomy
from review.demo import wording_versions
from review.policy import signoff
from review.wording import drafts, production, signing, versions
from storage.db import make_engine, migrate, run_write
from storage.models import Trace
from tests.helpers.pages import (
    ADA,
    INES,
    PAULA,
    actor_of,
    no_exception,
    open_tab,
    page_app,
    readable,
)

PAGE = "pages/wording_page.py"
OMAR = "omar.haddad@brightwave.example"
CHEN = "chen.li@brightwave.example"
TOM = "tom.becker@brightwave.example"

NEW_R3 = (
    "I drafted an answer, but the documents available to you do not back all of it, so I have "
    "held it back. Please raise a support ticket and {role} will look at your question."
)


@pytest.fixture(autouse=True)
def _fresh_scans() -> Iterator[None]:
    production.clear_production_cache()
    yield
    production.clear_production_cache()


@pytest.fixture
def wording_url(demo_url: str, demo_engine: Engine, tax: Taxonomy) -> str:
    """The demo database with the demo wording history (what the lead's builder adds)."""
    if not versions.versions(demo_engine):
        wording_versions.build_demo_wording(demo_engine, tax)
    return demo_url


@pytest.fixture
def empty_db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    eng = make_engine(url)
    migrate(eng)
    users.add_user(eng, SYSTEM, "solo@example.org", "Solo Admin", ["admin", "annotator"], True)
    eng.dispose()
    return url


def run(url: str, monkeypatch: pytest.MonkeyPatch, user: str) -> AppTest:
    at = page_app(url, monkeypatch, PAGE, user).run()
    no_exception(at)
    return at


def texts_of(at: AppTest) -> str:
    return "\n".join(str(e.value) for e in [*at.code, *at.text, *at.caption])


def button(at: AppTest, key: str) -> Any:
    return next(b for b in at.button if b.key == key)


# --- rendering -------------------------------------------------------------------------------


def test_renders_with_demo_data(wording_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = run(wording_url, monkeypatch, ADA)
    assert readable(at.title[0]) == "Wording"
    assert not at.error
    assert any("In force: sign-off v1 · file version 1" in readable(c) for c in at.caption)
    # the pending R2 change is in the sign-off tab with its word diff
    assert any(readable(s) == "Version 2" for s in at.subheader)
    assert any(
        readable(c).startswith("Proposed by Paula Kim")
        for c in at.caption  # a name, not an address
    )
    assert any(c.value.startswith("[-I found -]{+The +}documents") for c in at.code)


def test_renders_on_an_empty_database(empty_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = run(empty_db, monkeypatch, "solo@example.org")
    assert not at.error
    assert any("No refusal wording has been signed" in readable(w) for w in at.warning)
    infos = " ".join(readable(i) for i in at.info)
    assert "No wording change is waiting" in infos
    assert "No wording version has been proposed yet" in infos
    at = open_tab(at, "Production check", "wd_tab")  # drawn only while open
    assert not at.error
    assert "No refusal texts to check yet" in " ".join(readable(i) for i in at.info)


# --- edit with live preview and lint --------------------------------------------------------


def test_editing_shows_preview_and_live_lint_with_carets(
    wording_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = run(wording_url, monkeypatch, INES)
    at.selectbox(key="wd_key").select("R2").run()
    at.text_area(key="wd_text_R2").input(
        "There is no such discount for {topic}. Could you tell me {missing_item}?"
    ).run()
    no_exception(at)
    assert any("1 finding in the template" in readable(w) for w in at.warning)
    shown = texts_of(at)
    assert "^^^^^^^^^^^  Says the answer does not exist" in shown
    assert (
        "There is no such discount for refunds for annual plans. Could you tell me the "
        "contract name?" in shown
    )
    frame = at.dataframe[0].value
    assert frame["rule"].tolist() == ["Says the answer does not exist"]
    assert frame["excerpt"].tolist() == ["There is no"]
    # the draft table names the changed key; an annotator cannot propose
    assert any("Proposals come from product owners" in readable(i) for i in at.info)
    # a user-given value changes the preview
    at.text_input(key="wd_val_topic").input("SLA credits").run()
    assert "discount for SLA credits." in texts_of(at)


def test_a_clean_edit_says_so(wording_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = run(wording_url, monkeypatch, INES)
    at.selectbox(key="wd_key").select("F1").run()
    at.text_area(key="wd_text_F1").input("Which {missing_item} do you mean?").run()
    assert any("no findings in the template" in readable(s) for s in at.success)


def test_an_invalid_draft_is_reported_with_its_key(
    wording_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = run(wording_url, monkeypatch, PAULA)
    at.selectbox(key="wd_key").select("R1").run()
    at.text_area(key="wd_text_R1").input("Nothing about {Topic} here.").run()
    no_exception(at)
    assert any("not valid yet" in readable(e) for e in at.error)
    assert "messages.R1.text: has a brace" in texts_of(at)


# --- propose ---------------------------------------------------------------------------------


def test_product_owner_proposes_an_edit(
    wording_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = run(wording_url, monkeypatch, OMAR)
    at.selectbox(key="wd_key").select("R3").run()
    at.text_area(key="wd_text_R3").input(NEW_R3).run()
    assert any("Compliance signs too: R3 changed." in readable(c) for c in at.caption)
    at.text_area(key="wd_rationale").input("Plainer wording for held-back answers.")
    button(at, "wd_submit").click().run()
    no_exception(at)
    assert not at.error
    assert any(
        "Proposed as version 3. Needs: Compliance, Product owner" in readable(s) for s in at.success
    )
    newest = versions.versions(demo_engine)[0]
    assert newest.number == 3 and newest.author == OMAR
    assert signing.review_version(demo_engine, newest.id).changes[2].new_text == NEW_R3
    # the draft is cleared after proposing
    assert not any("Edited in your draft" in readable(c) for c in at.caption)


def test_proposing_without_a_rationale_is_refused(
    wording_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = run(wording_url, monkeypatch, OMAR)
    at.selectbox(key="wd_key").select("R3").run()
    at.text_area(key="wd_text_R3").input(NEW_R3).run()
    button(at, "wd_submit").click().run()
    no_exception(at)
    assert any("rationale is required" in readable(e) for e in at.error)
    assert len(versions.versions(demo_engine)) == 2


def test_a_draft_overtaken_by_an_approval_must_be_rebased(
    wording_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = run(wording_url, monkeypatch, OMAR)
    at.selectbox(key="wd_key").select("F1").run()
    at.text_area(key="wd_text_F1").input("Which {missing_item} do you mean?").run()
    # meanwhile the pending R2 change is approved, so the draft was started on an old version
    (r2,) = versions.pending(demo_engine)
    signing.sign_wording(demo_engine, actor_of(demo_engine, OMAR), r2.id, "approve")
    at.run()
    assert any("changed while you were drafting" in readable(w) for w in at.warning)
    at.text_area(key="wd_rationale").input("Shorter follow-up.")
    button(at, "wd_submit").click().run()
    assert any(
        "the wording in force changed while you were editing" in readable(e) for e in at.error
    )
    assert len(versions.versions(demo_engine)) == 2
    button(at, "wd_rebase").click().run()
    at.text_area(key="wd_rationale").input("Shorter follow-up.")
    button(at, "wd_submit").click().run()
    no_exception(at)
    assert any("Proposed as version 3" in readable(s) for s in at.success)
    v3 = signing.review_version(demo_engine, versions.versions(demo_engine)[0].id)
    # the rebased proposal keeps the approved R2 edit and adds the F1 edit
    assert [c.key for c in v3.changes if c.status == "changed"] == ["F1"]
    assert v3.wording.messages["R2"].text.startswith("The documents available to you cover")


def test_custom_key_is_added_to_the_draft(
    wording_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = run(wording_url, monkeypatch, PAULA)
    at.text_input(key="wd_new_key").input("bad key").run()
    button(at, "wd_add").click().run()
    assert any("Message keys use capital letters" in readable(e) for e in at.error)
    at.text_input(key="wd_new_key").input("R2_BILLING").run()
    button(at, "wd_add").click().run()
    no_exception(at)
    assert at.selectbox(key="wd_key").value == "R2_BILLING"
    at.text_area(key="wd_text_R2_BILLING").input("Please ask {role} about invoices.").run()
    at.text_input(key="wd_desc_R2_BILLING").input("Billing questions we cannot answer").run()
    assert not at.error
    draft = next(df.value for df in at.dataframe if "fields" in df.value)
    assert draft[["key", "status"]].values.tolist() == [["R2_BILLING", "added"]]


# --- approval by two users -------------------------------------------------------------------


def test_r3_change_is_approved_by_a_product_owner_then_compliance(
    wording_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    paula = actor_of(demo_engine, PAULA)
    # the demo's pending R2 change is rejected first so this one has the version in force as
    # its parent
    (r2,) = versions.pending(demo_engine)
    omar = actor_of(demo_engine, OMAR)
    signing.sign_wording(demo_engine, omar, r2.id, "reject", note="later")
    vid = signing.propose_edits(
        demo_engine, paula, {"R3": drafts.MessageDraft(NEW_R3)}, "plainer R3"
    )

    at = run(wording_url, monkeypatch, PAULA)
    assert any("You proposed this change" in readable(i) for i in at.info)
    assert not [b for b in at.button if b.key == f"wd_approve_{vid}"]

    at = run(wording_url, monkeypatch, OMAR)
    button(at, f"wd_approve_{vid}").click().run()
    no_exception(at)
    assert any("approved as Product owner" in readable(s) for s in at.success)
    assert signoff.get_version(demo_engine, vid).missing_roles == ["compliance"]
    assert versions.in_force(demo_engine).version is not None
    assert versions.in_force(demo_engine).wording.messages["R3"].text != NEW_R3

    at = run(wording_url, monkeypatch, CHEN)
    button(at, f"wd_approve_{vid}").click().run()
    no_exception(at)
    assert any("approved as Compliance" in readable(s) for s in at.success)
    assert versions.in_force(demo_engine).wording.messages["R3"].text == NEW_R3
    assert any("In force: sign-off v3" in readable(c) for c in at.caption)


def test_compliance_is_not_asked_for_an_r2_change(
    wording_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    (r2,) = versions.pending(demo_engine)
    at = run(wording_url, monkeypatch, CHEN)
    assert not [b for b in at.button if b.key == f"wd_approve_{r2.id}"]
    assert any("Your signature is not needed" in readable(c) for c in at.caption)
    at = run(wording_url, monkeypatch, OMAR)
    button(at, f"wd_approve_{r2.id}").click().run()
    assert signoff.get_version(demo_engine, r2.id).status == "approved"


def test_rejecting_without_a_note_and_approving_lint_findings_without_a_note_fail(
    wording_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    (r2,) = versions.pending(demo_engine)
    omar = actor_of(demo_engine, OMAR)
    signing.sign_wording(demo_engine, omar, r2.id, "reject", note="later")
    paula = actor_of(demo_engine, PAULA)
    bad = "There is no such discount. Could you tell me {missing_item}?"
    vid = signing.propose_edits(demo_engine, paula, {"R2": drafts.MessageDraft(bad)}, "shorter")

    at = run(wording_url, monkeypatch, OMAR)
    assert any("1 lint finding in this version" in readable(w) for w in at.warning)
    button(at, f"wd_reject_{vid}").click().run()
    assert any("rejection needs a note" in readable(e) for e in at.error)
    button(at, f"wd_approve_{vid}").click().run()
    assert any("1 lint finding; approving it needs a note" in readable(e) for e in at.error)
    assert signoff.get_version(demo_engine, vid).status == "pending"
    at.text_area(key=f"wd_note_{vid}").input("The discount was withdrawn; deliberate.")
    button(at, f"wd_approve_{vid}").click().run()
    no_exception(at)
    assert signoff.get_version(demo_engine, vid).status == "approved"


# --- compare and history ---------------------------------------------------------------------


def test_compare_and_history(wording_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = run(wording_url, monkeypatch, PAULA)
    # default: the version in force (1) against the newest (2, the pending R2 edit)
    compare = next(df.value for df in at.dataframe if "compliance signs" in df.value)
    assert compare.set_index("key")["status"].to_dict() == {
        "R1": "unchanged",
        "R2": "changed",
        "R3": "unchanged",
        "C1": "unchanged",
        "F1": "unchanged",
        "E1": "unchanged",
    }
    assert any("intact" in readable(s) for s in at.success)
    history = next(df.value for df in at.dataframe if "signatures" in df.value)
    assert history["status"].tolist() == ["proposal, waiting for sign-off", "in force"]
    assert history["changed keys"].tolist()[0] == "R2"
    # the shipped file against version 1 (which is the shipped file, signed)
    at.selectbox(key="wd_cmp_a").set_value(None).run()
    v1 = at.selectbox(key="wd_cmp_b").options[1]
    assert v1 == "sign-off v1 · file version 1 (in force)"
    at.selectbox(key="wd_cmp_b").select(v1).run()
    no_exception(at)
    assert any("say the same thing" in readable(i) for i in at.info)


# --- production check ------------------------------------------------------------------------

LATE = dt.datetime(2031, 1, 1, tzinfo=dt.UTC)


def add_traces(engine: Engine) -> None:
    def work(s: Session) -> None:
        for i, (tid, decision, text, restricted) in enumerate(
            [
                ("wd-late-1", "abstain", "That plan does not exist.", False),
                (
                    "wd-late-2",
                    "abstain",
                    "Legal hold procedure covers this, so I cannot answer.",
                    True,
                ),
            ]
        ):
            s.add(
                Trace(
                    trace_id=tid,
                    at=LATE + dt.timedelta(minutes=i),
                    query="q",
                    decision=decision,
                    answer_text=text,
                    restricted=restricted,
                )
            )

    run_write(engine, work)


def test_production_check_lists_offending_traces_by_clearance(
    wording_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_traces(demo_engine)
    at = open_tab(run(wording_url, monkeypatch, ADA), "Production check", "wd_tab")  # clearance
    table = next(df.value for df in at.dataframe if "first finding" in df.value)
    assert table["trace"].tolist()[:2] == ["wd-late-2", "wd-late-1"]
    assert at.selectbox(key="wd_prod_trace").value == "wd-late-2"
    assert "Legal hold procedure covers this" in texts_of(at)

    at = open_tab(run(wording_url, monkeypatch, TOM), "Production check", "wd_tab")
    table = next(df.value for df in at.dataframe if "first finding" in df.value)
    assert "wd-late-2" not in table["trace"].tolist()
    assert table["trace"].tolist()[0] == "wd-late-1"
    hidden = re.compile(r"\b[1-9][\d,]* offending restricted traces? (is|are) hidden")
    assert any(hidden.search(readable(c)) for c in at.caption)
    assert "Legal hold procedure" not in texts_of(at)
    at.selectbox(key="wd_prod_rule").select("universal_negative").run()
    no_exception(at)
    table = next(df.value for df in at.dataframe if "first finding" in df.value)
    assert table["trace"].tolist()[0] == "wd-late-1"
    title = "Says the answer does not exist"
    assert set(table["rules"]) == {r for r in table["rules"] if title in r}
