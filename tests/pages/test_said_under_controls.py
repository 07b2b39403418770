"""Every save or refusal is said right under the control that caused it, never at the top of
a long page (issue 35 item 4, the sweep after Label, Audit queue and Adjudicate): the
message is the next element after the button (or its row, or its form) in page order."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine
from streamlit.testing.v1 import AppTest

from review.admin import users
from review.audits import plans
from review.audits.plans import PlanSpec
from review.cases import cases
from review.core.identity import SYSTEM
from review.core.taxonomy import Taxonomy, taxonomy
from review.demo import batches, wording_versions
from review.policy import inforce, signoff
from review.traces import retention
from review.wording import versions as wording
from storage.db import make_engine
from tests.helpers.actors import REVIEWER
from tests.helpers.audits import add_trace, realistic_traces
from tests.helpers.pages import ADA, INES, app, no_exception, page_app, readable
from tests.helpers.placement import leaves, said_under
from tests.helpers.transact import write

RAVI = "ravi.menon@brightwave.example"
OMAR = "omar.haddad@brightwave.example"
CHEN = "chen.li@brightwave.example"


@pytest.fixture
def audit_url(demo_url: str, tax: Taxonomy) -> str:
    eng = make_engine(demo_url)
    realistic_traces(eng)
    batches.build_demo_audits(eng, tax)
    eng.dispose()
    return demo_url


def test_audit_plans_say_what_create_draw_and_close_did_under_their_buttons(
    audit_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = page_app(audit_url, monkeypatch, "pages/audit_page.py", RAVI).run()
    no_exception(at)
    # what Create did, under the form's buttons; a refusal there too
    at.text_input(key="aud_name").input("Ad-hoc check")
    at.number_input(key="aud_total").set_value(5)
    next(b for b in at.button if b.label == "Create plan").click().run()
    no_exception(at)
    assert said_under(at, "Create plan") == [
        "Plan 'Ad-hoc check' created. Check the allocation, then draw the sample."
    ]
    assert [s.value for s in at.success if "created" in s.value] != [] and len(
        [s for s in at.success if "created" in s.value]
    ) == 1  # said once, there, not at the top too
    at.text_input(key="aud_name").input("Ad-hoc check")
    next(b for b in at.button if b.label == "Create plan").click().run()
    (refused,) = said_under(at, "Create plan")
    assert refused.startswith("Nothing was created.") and "already exists" in refused
    # the plan's buttons: what Draw did under its row (Draw gave way to Close)
    at.button(key="aud_draw").click().run()
    no_exception(at)
    assert said_under(at, "aud_verify") == ["Drew 5 traces into 'Ad-hoc check'; the queue is open."]
    at.button(key="aud_close").click().run()
    no_exception(at)
    (refused,) = said_under(at, "aud_verify")  # refused there too
    assert "5 items of 'Ad-hoc check' still need verdicts" in refused
    at.button(key="aud_verify").click().run()
    (checked,) = said_under(at, "aud_verify")
    assert "reproduc" in checked.lower() or "sample" in checked.lower()


def test_audit_plans_refuse_a_draw_under_the_buttons(
    audit_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    eng = make_engine(audit_url)
    pid = write(eng, plans.create_plan, REVIEWER, PlanSpec(name="to draw", total=5))
    add_trace(eng, "arrived-later")
    eng.dispose()
    at = page_app(audit_url, monkeypatch, "pages/audit_page.py", RAVI, plan=str(pid)).run()
    at.button(key="aud_draw").click().run()
    (refused,) = said_under(at, "aud_recount")
    assert "Nothing was drawn" in refused
    at.button(key="aud_recount").click().run()
    no_exception(at)
    assert said_under(at, "aud_recount") == ["Population counted again."]


def test_cases_say_a_save_under_the_edit_button_and_a_refusal_under_the_form(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = cases.list_cases(demo_engine, cases.CaseFilter(status="ready"), page_size=1)[0]
    at = app(demo_url, monkeypatch, INES, case=str(first.id)).run()
    at.switch_page("pages/cases_page.py").run()
    at.button(key=f"cases_edit_btn_{first.id}").click().run()
    next(t for t in at.text_area if t.label == "Notes for labelers").input("Checked.")
    next(b for b in at.button if b.label == "Save changes").click().run()
    no_exception(at)
    assert said_under(at, f"cases_edit_btn_{first.id}") == [f"Saved {first.key} (version 2)."]
    # a stale save is refused under the form's button
    at.button(key=f"cases_edit_btn_{first.id}").click().run()
    view = cases.get_case(demo_engine, case_id=first.id)
    assert view is not None
    tom = users.get_by_email(demo_engine, "tom.becker@brightwave.example")
    assert tom is not None
    record = cases.CaseIn.model_validate({**view.record, "notes": "Tom's note"})
    write(demo_engine, cases.update_case, users.to_actor(tom), first.id, 2, record, taxonomy())
    next(t for t in at.text_area if t.label == "Notes for labelers").input("Again.")
    next(b for b in at.button if b.label == "Save changes").click().run()
    (refused,) = said_under(at, "Save changes")
    assert "was changed by tom.becker" in refused and "Nothing was saved" in refused


def test_cases_say_an_applied_split_under_the_split_buttons(
    demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = app(demo_url, monkeypatch, INES).run()
    at.switch_page("pages/cases_page.py").run()
    at.toggle(key="cases_split_keep").set_value(False).run()
    at.button(key="cases_split_preview_btn").click().run()
    next(b for b in at.button if b.label == "Apply this assignment").click().run()
    no_exception(at)
    (applied,) = said_under(at, "cases_split_preview_btn")
    assert applied.endswith("recorded.") and "moved" in applied


def _open_runs(url: str, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    at = app(url, monkeypatch, RAVI).run()
    at.switch_page("pages/runs_page.py").run()
    no_exception(at)
    return at


def test_runs_say_an_import_and_a_refusal_under_their_forms(
    demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = _open_runs(demo_url, monkeypatch)
    run_form = next(u for u in at.file_uploader if u.label.startswith("Outputs JSONL"))
    next(b for b in at.button if b.label == "Import run").click().run()
    assert said_under(at, "Import run") == ["Nothing was imported. choose a file"]
    good = b'{"case": "CASE-001", "decision": "answer", "score": 0.9, "text": "Yes."}\n'
    run_form = next(u for u in at.file_uploader if u.label.startswith("Outputs JSONL"))
    run_form.set_value([("run.jsonl", good, "application/jsonl")])
    next(t for t in at.text_input if t.label == "Run name").input("imported")
    next(b for b in at.button if b.label == "Import run").click().run()
    no_exception(at)
    assert said_under(at, "Import run") == ["Run 'imported' imported."]
    body = b'{"case": "CASE-001", "judge": "judge-a", "decision": "answer"}\n'
    up = next(u for u in at.file_uploader if u.label == "Judge labels JSONL")
    up.set_value([("judge.jsonl", body, "application/jsonl")])
    next(b for b in at.button if b.label == "Import judge labels").click().run()
    no_exception(at)
    assert said_under(at, "Import judge labels") == ["1 judge label imported."]


def test_admin_says_an_added_user_a_refusal_and_a_saved_setting_under_their_forms(
    demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = app(demo_url, monkeypatch, ADA).run()
    at.switch_page("pages/admin_page.py").run()
    inputs = [t for t in at.text_input if t.label in ("Email", "Name")]
    inputs[0].input("new.person@brightwave.example")
    inputs[1].input("New Person")
    next(m for m in at.multiselect if m.label == "Roles").set_value(["reviewer"])
    next(b for b in at.button if b.label == "Add user").click().run()
    no_exception(at)
    assert said_under(at, "Add user") == ["Added new.person@brightwave.example."]
    inputs = [t for t in at.text_input if t.label in ("Email", "Name")]
    inputs[0].input(ADA)
    inputs[1].input("Dup")
    next(m for m in at.multiselect if m.label == "Roles").set_value(["reviewer"])
    next(b for b in at.button if b.label == "Add user").click().run()
    (refused,) = said_under(at, "Add user")
    assert "already exists" in refused
    next(b for b in at.button if b.label == "Save").click().run()
    no_exception(at)
    (saved,) = said_under(at, "Save")
    assert saved.startswith("Saved ")
    next(n for n in at.number_input if n.label.startswith("Independent labels")).set_value(3)
    next(b for b in at.button if b.label == "Save labeling settings").click().run()
    no_exception(at)
    assert said_under(at, "Save labeling settings") == ["Labeling settings saved."]


def test_thresholds_say_a_refused_and_a_partial_approval_on_the_proposal(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    (v,) = [x for x in signoff.versions(demo_engine, inforce.KIND) if x.status == "pending"]
    at = app(demo_url, monkeypatch, CHEN, tab="signoff").run()
    at.switch_page("pages/thresholds_page.py").run()
    next(b for b in at.button if b.label == "Approve").click().run()
    no_exception(at)
    (refused,) = said_under(at, "Reject")
    assert f"Version {v.number} was not approved" in refused
    at.text_area(key=f"thr_sign_note_{v.id}").input("Compliance accepts it.")
    at.checkbox(key=f"thr_sign_confirm_{v.id}").check()
    next(b for b in at.button if b.label == "Approve").click().run()
    no_exception(at)
    # the form is gone (compliance has signed): said where it was, at the proposal's end
    assert said_under(at, "Signatures come from a product owner and compliance.") == [
        f"Version {v.number} approved as Compliance; it still needs: Product owner."
    ]


def test_wording_says_a_proposal_under_your_draft_and_a_signature_where_its_form_was(
    demo_url: str, demo_engine: Engine, tax: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    wording_versions.build_demo_wording(demo_engine, tax)
    (r2,) = wording.pending(demo_engine)
    at = page_app(demo_url, monkeypatch, "pages/wording_page.py", OMAR).run()
    at.selectbox(key="wd_key").select("F1").run()
    at.text_area(key="wd_text_F1").input("Which {missing_item} do you mean?").run()
    at.text_area(key="wd_rationale").input("Shorter follow-up.")
    at.button(key="wd_submit").click().run()
    no_exception(at)
    proposed, warned = said_under(at, "Your draft")
    assert proposed.startswith("Proposed as version 3.")
    assert f"proposal {r2.number}" in warned
    # Omar's approval puts R2 in force: its card is gone, said where the cards start
    at = page_app(demo_url, monkeypatch, "pages/wording_page.py", OMAR).run()
    at.button(key=f"wd_approve_{r2.id}").click().run()
    no_exception(at)
    tab = next(t for t in at.tabs if t.label == "Sign-off")
    first = [readable(e) for e in list(leaves(tab))[:2]]
    assert first == [
        f"Version {r2.number} approved as Product owner: it is the wording in force now.",
        f"Pending proposal 3 is stale now, superseded by version {r2.number}: reject it and "
        f"propose the change again on top of version {r2.number}.",
    ]


def test_traces_say_a_saved_rule_a_refusal_and_a_purge_under_their_buttons(
    trace_demo_url: str, trace_demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = page_app(trace_demo_url, monkeypatch, "pages/traces_page.py", ADA).run()
    next(n for n in at.number_input if n.label.startswith("Keep traces for")).set_value(60)
    next(b for b in at.button if b.label == "Save retention rule").click().run()
    no_exception(at)
    assert said_under(at, "Save retention rule") == ["Retention rule saved."]
    retention.set_retention(trace_demo_engine, SYSTEM, 45, 1)
    next(n for n in at.number_input if n.label.startswith("Keep traces for")).set_value(30)
    next(b for b in at.button if b.label == "Save retention rule").click().run()
    (refused,) = said_under(at, "Save retention rule")
    assert "was changed by system" in refused
    at = page_app(trace_demo_url, monkeypatch, "pages/traces_page.py", ADA).run()
    at.checkbox(key="traces_purge_sure").check().run()
    next(b for b in at.button if b.label == "Purge now").click().run()
    no_exception(at)
    (purged,) = said_under(at, "Purge now")
    assert "deleted with their chunks" in purged


def test_the_monthly_review_says_an_opened_month_and_a_refusal_under_its_form(
    demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = app(demo_url, monkeypatch, RAVI).run()
    at.switch_page("pages/review_page.py").run()
    next(t for t in at.text_input if t.label.startswith("Open the review")).input("2031-04")
    next(b for b in at.button if b.label == "Open review").click().run()
    no_exception(at)
    assert said_under(at, "Open review") == ["Opened the review of 2031-04."]
    next(t for t in at.text_input if t.label.startswith("Open the review")).input("April")
    next(b for b in at.button if b.label == "Open review").click().run()
    (refused,) = said_under(at, "Open review")
    assert "April" in refused
