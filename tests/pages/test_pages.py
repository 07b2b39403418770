"""AppTest over every registered page (demo data and empty database) and every form."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from sqlalchemy import Engine, func
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import Element

from pages.ui import ACTOR_KEY
from review.admin import users
from review.cases import cases
from review.core.identity import SYSTEM
from review.core.readable import count as readable_count
from review.core.taxonomy import taxonomy
from review.corpus import corpus
from review.corpus.docformat import parse_markdown
from review.policy import inforce
from storage.db import make_engine
from tests.helpers.corpus import GOOD
from tests.helpers.dates import EXTREME_DAYS, store_extreme_dates
from tests.helpers.pages import ADA, INES, PAULA, app, no_exception, open_tab, readable
from tests.helpers.transact import write

PAGES = [
    "pages/overview_page.py",
    "pages/corpus_page.py",
    "pages/cases_page.py",
    "pages/labeling_page.py",
    "pages/adjudication_page.py",
    "pages/agreement_page.py",
    "pages/builder_page.py",
    "pages/runs_page.py",
    "pages/thresholds_page.py",
    "pages/wording_page.py",
    "pages/review_page.py",
    "pages/audit_page.py",
    "pages/traces_page.py",
    "pages/monitoring_page.py",
    "pages/admin_page.py",
]
TITLES = {
    "Overview",
    "Agreement",
    "Case builder",
    "Corpus",
    "Cases",
    "Admin",
    "Label",
    "Adjudicate",
    "Evaluation runs",
    "Thresholds",
    "Wording",
    "Monthly review",
    "Audit",
    "Traces",
    "Monitoring",
}


def _user(engine: Engine, email: str) -> users.UserView:
    row = users.get_by_email(engine, email)
    assert row is not None, email
    return row


def _download_buttons(at: AppTest) -> list[Element]:
    return [e for e in at.get("download_button") if isinstance(e, Element)]


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_with_demo_data(
    page: str, demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = app(demo_url, monkeypatch, ADA).run()
    at.switch_page(page).run()
    no_exception(at)
    assert readable(at.title[0]) in TITLES
    assert not at.error


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_with_extreme_dates_in_the_database(
    page: str, demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Year 9999 and year 1 on a trace and a document version, written past the importers."""
    store_extreme_dates(demo_engine, *EXTREME_DAYS)
    at = app(demo_url, monkeypatch, ADA).run()
    at.switch_page(page).run()
    no_exception(at)
    assert not at.error


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_on_an_empty_database(
    page: str, empty_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = app(empty_url, monkeypatch).run()
    at.switch_page(page).run()
    no_exception(at)
    assert not at.error


def test_overview_shows_counts_and_links_for_my_role(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = app(demo_url, monkeypatch, INES).run()
    no_exception(at)
    metrics = {m.label: m.value for m in at.metric}
    assert int(metrics["Documents (current)"]) >= 25
    assert int(metrics["Cases"]) >= 60
    assert metrics["Expect no answer"].endswith("%")


def test_overview_case_counts_follow_an_edit_made_on_another_server(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Overview keeps the cases' counts between reruns (0.4 s at 500,000 cases), until
    a case is added or edited anywhere: a ready case moved to another split through the case
    service, as another server's page would, shows on the next rerun."""
    from sqlalchemy import exists, select

    from storage.db import read_session
    from storage.models import Case, SplitLock
    from tests.helpers.actors import make_actor

    tax = taxonomy()
    at = app(demo_url, monkeypatch, INES).run()
    no_exception(at)
    caption = next(c.value for c in at.caption if str(c.value).startswith("Split of ready"))
    with read_session(demo_engine) as s:
        row = s.scalars(
            cases.case_query().where(
                Case.status == "ready",
                Case.split == "validation",
                ~exists().where(SplitLock.case_id == Case.id),  # not frozen by a sign-off
            )
        ).first()
        assert row is not None
        case_id, version, record = row.id, row.version, cases.to_record(row)
        by_split = dict(
            s.execute(
                select(Case.split, func.count()).where(Case.status == "ready").group_by(Case.split)
            ).all()
        )
    edit = cases.CaseIn.model_validate({**record, "split": "test"})
    admin = make_actor("admin", "admin@brightwave.example", clearance=True, uid=1)
    write(demo_engine, cases.update_case, admin, case_id, version, edit, tax)
    at.run()
    no_exception(at)
    after = next(c.value for c in at.caption if str(c.value).startswith("Split of ready"))
    assert f"validation {by_split['validation']:d}" in caption
    assert f"validation {by_split['validation'] - 1:d}" in after
    assert f"test {by_split['test'] + 1:d}" in after


def test_empty_database_offers_first_admin_then_signs_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'boot.db'}"
    at = app(url, monkeypatch).run()
    no_exception(at)
    assert "no users yet" in readable(at.info[0])
    at.text_input[0].input("not-an-email")
    at.text_input[1].input("Ada")
    at.button[0].click().run()
    assert "not a valid address" in readable(at.error[0])
    at.text_input[0].input("ada@example.org")
    at.button[0].click().run()
    no_exception(at)
    assert readable(at.title[0]) == "Overview"


def test_the_admin_page_opened_by_a_non_admin_says_who_uses_it_and_offers_nothing(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not in a non-admin's menu (tests/admin/test_navigation.py) but registered hidden, so a
    link to it is no dead end."""
    at = app(demo_url, monkeypatch, INES).run()
    no_exception(at)
    assert at.session_state[ACTOR_KEY].email == INES
    at.switch_page("pages/admin_page.py").run()
    no_exception(at)
    said = [readable(i) for i in at.info]
    assert said[0].startswith("Managing users is for administrators. Your roles (annotator) ")
    assert "Ask an administrator (Ada" in said[0]
    assert not at.get("form") and not at.text_input


@pytest.mark.parametrize(
    ("page", "what"),
    [("pages/labeling_page.py", "Labeling"), ("pages/adjudication_page.py", "Adjudication")],
)
def test_a_page_an_admin_cannot_use_says_who_can_and_links_to_admin(
    demo_url: str, monkeypatch: pytest.MonkeyPatch, page: str, what: str
) -> None:
    """An administrator holds neither labeling nor adjudication: the page says who does and
    links to the Admin page, where the role is given; anyone else is told whom to ask."""
    at = app(demo_url, monkeypatch, ADA).run()
    at.switch_page(page).run()
    no_exception(at)
    said = readable(at.info[0])
    assert said.startswith(f"{what} is for ") and "on the Admin page" in said
    assert "_" not in said
    links = at.get("page_link")
    assert [link.proto.page for link in links] == ["admin"]
    at2 = app(demo_url, monkeypatch, PAULA).run()
    at2.switch_page(page).run()
    said2 = readable(at2.info[0])
    assert "Your roles (product owner)" in said2 and "Ask an administrator (Ada" in said2
    assert not at2.get("page_link")


def test_admin_adds_a_user_and_refuses_a_bad_one(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = app(demo_url, monkeypatch, ADA).run()
    at.switch_page("pages/admin_page.py").run()
    form = at.get("form")
    assert form
    at.text_input(key=None) if False else None
    inputs = [t for t in at.text_input if t.label in ("Email", "Name")]
    inputs[0].input("new.person@brightwave.example")
    inputs[1].input("New Person")
    ms = next(m for m in at.multiselect if m.label == "Roles")
    ms.set_value(["reviewer"])
    next(b for b in at.button if b.label == "Add user").click().run()
    no_exception(at)
    assert users.get_by_email(demo_engine, "new.person@brightwave.example") is not None
    inputs = [t for t in at.text_input if t.label in ("Email", "Name")]
    inputs[0].input(ADA)
    inputs[1].input("Dup")
    next(m for m in at.multiselect if m.label == "Roles").set_value(["reviewer"])
    next(b for b in at.button if b.label == "Add user").click().run()
    assert any("already exists" in readable(e) for e in at.error)


def test_admin_role_change_is_refused_when_someone_saved_first(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = app(demo_url, monkeypatch, ADA).run()
    at.switch_page("pages/admin_page.py").run()
    tom = users.get_by_email(demo_engine, "tom.becker@brightwave.example")
    assert tom is not None
    at.selectbox(key="admin_pick").set_value(tom.id).run()
    # another admin saves first
    users.update_user(
        demo_engine,
        SYSTEM,
        tom.id,
        tom.version,
        name="Tom B.",
        roles=["annotator"],
        clearance=False,
        active=True,
    )
    next(b for b in at.button if b.label == "Save").click().run()
    no_exception(at)
    assert any("was changed by" in readable(e) for e in at.error)


def test_corpus_search_open_and_new_version(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = app(demo_url, monkeypatch, INES).run()
    at.switch_page("pages/corpus_page.py").run()
    assert at.dataframe
    at.text_input(key="corpus_q").input("refund").run()
    no_exception(at)
    rows = corpus.search_documents(demo_engine, SYSTEM, corpus.DocFilter(text="refund"))
    assert rows
    target = rows[0]
    at2 = app(demo_url, monkeypatch, INES, doc=str(target.id)).run()
    at2.switch_page("pages/corpus_page.py").run()
    no_exception(at2)
    assert any(target.ref in readable(s) for s in at2.subheader)
    body_texts = " ".join(t.value for t in at2.text)
    doc = corpus.get_document(demo_engine, SYSTEM, target.id)
    assert doc.title in body_texts
    # error path: empty title
    title_input = next(t for t in at2.text_input if t.label == "Title")
    title_input.input("")
    next(b for b in at2.button if b.label == "Save as new version").click().run()
    assert at2.error
    # success path: change the title
    title_input = next(t for t in at2.text_input if t.label == "Title")
    title_input.input(doc.title + " (revised)")
    next(b for b in at2.button if b.label == "Save as new version").click().run()
    no_exception(at2)
    hist = corpus.version_history(demo_engine, SYSTEM, doc.doc_key)
    assert hist[0].title == doc.title + " (revised)" and len(hist) >= 2


def test_corpus_upload_lands_whole_or_reports_the_line(
    empty_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = app(empty_url, monkeypatch).run()
    at.switch_page("pages/corpus_page.py").run()
    bad = GOOD.replace("POL-REFUND", "OTHER").replace("jurisdiction: EU", "jurisdiction: Mars")
    at.file_uploader[0].set_value(
        [("a.md", GOOD.encode(), "text/markdown"), ("b.md", bad.encode(), "text/markdown")]
    )
    next(b for b in at.button if b.label == "Import").click().run()
    no_exception(at)
    assert any(
        "Nothing was imported" in readable(e) and "b.md: line 10: field jurisdiction" in readable(e)
        for e in at.error
    )
    eng = make_engine(empty_url)
    assert corpus.count_documents(eng, SYSTEM, corpus.DocFilter()) == 0
    at.file_uploader[0].set_value([("a.md", GOOD.encode(), "text/markdown")])
    next(b for b in at.button if b.label == "Import").click().run()
    assert any("1 document version added" in readable(s) for s in at.success)
    assert corpus.count_documents(eng, SYSTEM, corpus.DocFilter()) == 1
    eng.dispose()


def test_cases_filter_open_create_and_edit(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = app(demo_url, monkeypatch, INES).run()
    at.switch_page("pages/cases_page.py").run()
    no_exception(at)
    at.selectbox(key="cases_decision").set_value("escalate").run()
    no_exception(at)
    shown = next(d.value for d in at.dataframe if "author expected" in d.value.columns)
    # the filter is on the author's expected decision; the list shows the agreed one where a
    # case has it, with the author's beside it when they differ
    authors = [a or d for a, d in zip(shown["author expected"], shown["decision"], strict=True)]
    assert set(authors) == {taxonomy().decisions["escalate"].label}  # labels, not keys
    # create: error path (question too short), then success
    before = cases.count_cases(demo_engine, cases.CaseFilter())
    q = next(t for t in at.text_area if t.label == "Question")
    q.input("?")
    next(b for b in at.button if b.label == "Create case").click().run()
    assert any("question" in readable(e) for e in at.error)
    q = next(t for t in at.text_area if t.label == "Question")
    q.input("Does the Team plan include SSO?")
    # the expected decision starts as the category's default (note 004)
    # (the list's filters come first: the form's selects are the last of their label)
    decision = [sb for sb in at.selectbox if sb.label == "Expected decision"][-1]
    assert decision.value == ""
    [sb for sb in at.selectbox if sb.label == "Category"][-1].set_value("ambiguous")
    reasons = next(m for m in at.multiselect if m.label.startswith("Reason codes"))
    reasons.set_value(["ambiguous_question"])
    next(b for b in at.button if b.label == "Create case").click().run()
    no_exception(at)
    assert cases.count_cases(demo_engine, cases.CaseFilter()) == before + 1
    made = cases.list_cases(demo_engine, cases.CaseFilter(text="Team plan include SSO"))
    view = cases.get_case(demo_engine, made[0].id)
    assert view is not None
    assert (view.expected_decision, view.expected_message) == ("clarify", "F1")


def test_cases_split_preview_is_computed_only_on_demand(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 11: the default view never reads every case for the split preview."""
    from review.cases import splits

    real_plan = splits.plan
    calls: list[tuple[int, bool]] = []

    def refuse(*args: object, **kwargs: object) -> splits.SplitPlan:
        raise AssertionError("splits.plan ran without the preview being asked for")

    def counted(engine: Engine, seed: int, *args: object, **kwargs: object) -> splits.SplitPlan:
        calls.append((seed, bool(kwargs.get("keep_existing", True))))
        return real_plan(engine, seed, *args, **kwargs)  # type: ignore[arg-type]

    def would_change(at: AppTest) -> list[str]:
        return [readable(c) for c in at.caption if "would change split" in readable(c)]

    monkeypatch.setattr(splits, "plan", refuse)
    at = app(demo_url, monkeypatch, INES).run()
    at.switch_page("pages/cases_page.py").run()
    no_exception(at)
    assert not would_change(at)
    assert not [b for b in at.button if b.label == "Apply this assignment"]
    at.selectbox(key="cases_decision").set_value("escalate").run()
    no_exception(at)

    monkeypatch.setattr(splits, "plan", counted)
    at.toggle(key="cases_split_keep").set_value(False).run()
    no_exception(at)
    assert calls == [] and not would_change(at)
    shown_seed = at.number_input(key="cases_split_seed").value
    assert shown_seed is not None
    seed = int(shown_seed)
    at.button(key="cases_split_preview_btn").click().run()
    no_exception(at)
    expected = real_plan(demo_engine, seed, keep_existing=False)
    assert calls == [(seed, False)]
    locked = int(expected.cases["locked"].sum())
    assert would_change(at) == [
        f"{readable_count(len(expected.moves), 'case')} would change split; "
        f"{readable_count(locked, 'locked case')} "
        f"{'stays' if locked == 1 else 'stay'} put."
    ]
    assert any(d.value.equals(expected.counts) for d in at.dataframe)
    # the stored preview stays on reruns without computing again
    at.selectbox(key="cases_decision").set_value("").run()
    assert calls == [(seed, False)] and would_change(at)
    assert len(expected.moves), "the demo needs moves for the apply step"
    next(b for b in at.button if b.label == "Apply this assignment").click().run()
    no_exception(at)
    assert any(
        readable(s) == f"{readable_count(len(expected.moves), 'case')} moved; seed {seed} recorded."
        for s in at.success
    )
    assert not would_change(at)  # applied: the preview is gone until asked for again
    last = splits.last_assignment(demo_engine)
    assert last is not None and int(last["seed"]) == seed
    # a changed seed drops a preview made for another seed
    at.button(key="cases_split_preview_btn").click().run()
    assert would_change(at)
    at.number_input(key="cases_split_seed").set_value(seed + 1).run()
    no_exception(at)
    assert not would_change(at)


def test_case_deep_link_edit_and_stale_edit(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = cases.list_cases(demo_engine, cases.CaseFilter(status="ready"), page_size=1)[0]
    at = app(demo_url, monkeypatch, INES, case=str(first.id)).run()
    at.switch_page("pages/cases_page.py").run()
    no_exception(at)
    assert any(first.key in readable(s) for s in at.subheader)
    assert any(first.question == t.value for t in at.text)
    next(b for b in at.button if b.label == "Edit this case").click().run()
    notes = next(t for t in at.text_area if t.label == "Notes for labelers")
    notes.input("Checked by Inés.")
    next(b for b in at.button if b.label == "Save changes").click().run()
    no_exception(at)
    view = cases.get_case(demo_engine, case_id=first.id)
    assert view is not None and view.notes == "Checked by Inés." and view.version == 2
    # open the editor again; Tom saves meanwhile; Inés's save is refused naming Tom
    next(b for b in at.button if b.label == "Edit this case").click().run()
    tom = users.get_by_email(demo_engine, "tom.becker@brightwave.example")
    assert tom is not None
    write(
        demo_engine,
        cases.update_case,
        users.to_actor(tom),
        first.id,
        2,
        cases.CaseIn.model_validate({**view.record, "notes": "Tom's note"}),
        __import__("review.core.taxonomy", fromlist=["x"]).taxonomy(),
    )
    notes = next(t for t in at.text_area if t.label == "Notes for labelers")
    notes.input("Inés again")
    next(b for b in at.button if b.label == "Save changes").click().run()
    assert any("tom.becker@brightwave.example" in readable(e) for e in at.error)
    final = cases.get_case(demo_engine, case_id=first.id)
    assert final is not None and final.notes == "Tom's note"


def test_product_owner_cannot_edit_cases(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = cases.list_cases(demo_engine, cases.CaseFilter(), page_size=1)[0]
    at = app(demo_url, monkeypatch, PAULA, case=str(first.id)).run()
    at.switch_page("pages/cases_page.py").run()
    no_exception(at)
    assert not [b for b in at.button if b.label == "Edit this case"]


def test_invalid_taxonomy_stops_the_app_with_the_reason(
    tmp_path: Path, empty_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "taxonomy.yaml").write_text("version: 1\nversion: 2\n", encoding="utf-8")
    monkeypatch.setenv("WORKBENCH_POLICIES_DIR", str(tmp_path))
    at = app(empty_url, monkeypatch).run()
    no_exception(at)
    assert "taxonomy file is invalid" in readable(at.error[0])
    assert "duplicate key 'version'" in at.code[0].value


def test_cases_upload_lands_whole_or_reports_the_line(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = app(demo_url, monkeypatch, INES).run()
    at.switch_page("pages/cases_page.py").run()
    good = cases.get_case(demo_engine, key="CASE-001")
    assert good is not None
    record = {**good.record, "key": "CASE-NEW-1"}
    bad = {**good.record, "key": "CASE-NEW-2", "split": "holdout"}
    payload = (json.dumps(record) + "\n" + json.dumps(bad) + "\n").encode()
    before = cases.count_cases(demo_engine, cases.CaseFilter())
    at.file_uploader[0].set_value([("new.jsonl", payload, "application/jsonl")])
    next(b for b in at.button if b.label == "Import cases").click().run()
    no_exception(at)
    assert any("new.jsonl: line 2: field split" in readable(e) for e in at.error)
    assert cases.count_cases(demo_engine, cases.CaseFilter()) == before
    at.file_uploader[0].set_value([("new.jsonl", payload.splitlines()[0], "application/jsonl")])
    next(b for b in at.button if b.label == "Import cases").click().run()
    assert any("1 case added" in readable(s) for s in at.success)
    assert cases.count_cases(demo_engine, cases.CaseFilter()) == before + 1


def test_admin_changes_roles(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = app(demo_url, monkeypatch, ADA).run()
    at.switch_page("pages/admin_page.py").run()
    tom = users.get_by_email(demo_engine, "tom.becker@brightwave.example")
    assert tom is not None
    at.selectbox(key="admin_pick").set_value(tom.id).run()
    roles = [m for m in at.multiselect if m.label == "Roles"][-1]
    roles.set_value(["annotator", "reviewer"])
    next(b for b in at.button if b.label == "Save").click().run()
    no_exception(at)
    after = users.get_by_email(demo_engine, tom.email)
    assert after is not None and after.roles == ("annotator", "reviewer")
    assert any("Saved" in readable(s) for s in at.success)


TOM = "tom.becker@brightwave.example"
RAVI = "ravi.menon@brightwave.example"


def test_label_page_next_case_blind_submit_and_errors(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from review.labels import labeling

    at = app(demo_url, monkeypatch, PAULA).run()
    at.switch_page("pages/labeling_page.py").run()
    assert "for annotators" in readable(at.info[0])
    at = app(demo_url, monkeypatch, INES).run()
    at.switch_page("pages/labeling_page.py").run()
    no_exception(at)
    next(b for b in at.button if b.key == "lab_next").click().run()
    no_exception(at)
    heading = next(readable(m) for m in at.markdown if readable(m).startswith("**Case "))
    key = heading.removeprefix("**Case ").split("**", 1)[0]
    view = cases.get_case(demo_engine, key=key)
    assert view is not None
    assert labeling.my_label(demo_engine, users.to_actor(_user(demo_engine, INES)), view.id) is None
    assert "blind until you submit" in heading
    # error path: abstain without a reason code
    next(b for b in at.button if b.key == "lab_btn_abstain").click().run()
    next(b for b in at.button if b.key == "lab_submit").click().run()
    assert any("Abstain needs at least one reason" in readable(e) for e in at.error)
    # success path
    at.pills[0].set_value(["no_answer_bearing_evidence"]).run()
    next(b for b in at.button if b.key == "lab_submit").click().run()
    no_exception(at)
    assert any("Saved your label" in readable(s) for s in at.success)
    ines = users.get_by_email(demo_engine, INES)
    assert ines is not None
    mine = labeling.my_label(demo_engine, users.to_actor(ines), view.id)
    assert mine is not None and mine.decision == "abstain"
    # back on the labeled case, everyone's labels show
    next(b for b in at.button if b.key == "lab_prev").click().run()
    assert any(readable(e.label).startswith("Labels on this case") for e in at.expander)


def test_adjudication_page_sets_gold(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from review.labels import adjudication, labeling

    ravi = users.get_by_email(demo_engine, RAVI)
    assert ravi is not None
    found = labeling.disagreements(demo_engine)
    listed = adjudication.reviewer_queue(demo_engine, users.to_actor(ravi), found, 200).entries
    queue = [(e.case_id, e.key, e.labels) for e in listed]  # without the cases Ravi labeled
    assert queue, "the demo has disagreements to adjudicate"
    at = app(demo_url, monkeypatch, RAVI).run()
    at.switch_page("pages/adjudication_page.py").run()
    no_exception(at)
    assert any(queue[0][1] in readable(s) for s in at.subheader)
    at.pills(key=f"adj_gold_dec_{queue[0][0]}").set_value("answer")
    next(b for b in at.button if b.label == "Set gold label").click().run()
    assert any("note is required" in readable(e) for e in at.error)
    next(t for t in at.text_area if t.label.startswith("Note")).input("Decisive clause present.")
    next(b for b in at.button if b.label == "Set gold label").click().run()
    no_exception(at)
    assert len(labeling.gold_history(demo_engine, queue[0][0])) >= 1
    assert queue[0][0] not in [c for c, _, _ in labeling.disagreements(demo_engine)]


def test_runs_page_metrics_import_and_compare(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = app(demo_url, monkeypatch, INES).run()
    at.switch_page("pages/runs_page.py").run()
    no_exception(at)
    metrics = next(d.value for d in at.dataframe if "metric" in d.value.columns)
    assert "Abstention recall" in set(metrics["metric"])
    assert any("Metamorphic" in readable(s) for s in at.subheader)
    # import: error path names the line, nothing written; then a good file lands
    bad = b'{"case": "CASE-001", "decision": "answer"}\n{"case": "CASE-002", "decision": "x"}\n'
    at.file_uploader[0].set_value([("run.jsonl", bad, "application/jsonl")])
    next(t for t in at.text_input if t.label == "Run name").input("imported one")
    next(b for b in at.button if b.label == "Import run").click().run()
    assert any("run.jsonl: line 2: field decision" in readable(e) for e in at.error)
    good = b'{"case": "CASE-001", "decision": "answer", "score": 0.9, "text": "Yes."}\n'
    at.file_uploader[0].set_value([("run.jsonl", good, "application/jsonl")])
    next(t for t in at.text_input if t.label == "Run name").input("imported one")
    next(b for b in at.button if b.label == "Import run").click().run()
    no_exception(at)
    assert any("imported" in readable(s) for s in at.success)
    # the compare tab computed deltas with intervals
    assert any("delta" in d.value.columns for d in at.dataframe)


OMAR = "omar.haddad@brightwave.example"
CHEN = "chen.li@brightwave.example"


def test_thresholds_propose_then_two_other_people_approve(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from review.policy import signoff

    # the demo's pending proposal: its author cannot sign it
    pending = [v for v in signoff.versions(demo_engine, inforce.KIND) if v.status == "pending"]
    for v in pending:  # clear the demo proposal so this test drives a fresh one
        signoff.sign(
            demo_engine,
            users.to_actor(users.get_by_email(demo_engine, CHEN)),  # type: ignore[arg-type]
            v.id,
            "reject",
            note="superseded by the test's proposal",
        )
    at = app(demo_url, monkeypatch, OMAR).run()
    at.switch_page("pages/thresholds_page.py").run()
    no_exception(at)
    assert any("What the change buys" in readable(s) for s in at.subheader)
    # every chart downloadable with its data: risk-coverage, expected cost, sweep, slices;
    # the sweep and per-slice curves are drawn once their expander is opened
    keys = {b.key for b in at.get("download_button")}
    assert not {"thr_csv_sweep", "thr_csv_slices"} & keys
    assert any(e.label == "Sweep and per-slice curves" for e in at.expander)
    at.session_state["thr_sweeps"] = True
    at.run()
    no_exception(at)
    keys = {b.key for b in at.get("download_button")}
    for name in ("risk_coverage", "expected_cost", "sweep", "slices"):
        assert {f"thr_csv_{name}", f"thr_svg_{name}", f"thr_png_{name}"} <= keys, name
    at.slider(key="thr_proposed_vector").set_value(0.6).run()
    no_exception(at)
    # the caveat slider stays on the better side of the refuse threshold
    assert at.slider(key="thr_caveat_vector").min == 0.6
    at.slider(key="thr_caveat_vector").set_value(0.7).run()
    no_exception(at)
    band = next(readable(c) for c in at.caption if "carry the caveat" in readable(c))
    assert "gain the caveat" in band
    # error path: no rationale
    next(b for b in at.button if b.label == "Propose for sign-off").click().run()
    assert any("rationale" in readable(e) for e in at.error)
    next(t for t in at.text_area if t.label.startswith("Rationale")).input(
        "Raise the vector refuse threshold: fewer unsupported answers on validation."
    )
    next(b for b in at.button if b.label == "Propose for sign-off").click().run()
    no_exception(at)
    assert any("Proposed as version" in readable(s) for s in at.success)
    newest = signoff.versions(demo_engine, inforce.KIND)[0]
    assert newest.status == "pending" and newest.author == OMAR
    # the Sign-off tab, drawn afresh when opened, lists the new proposal at once
    open_tab(at, "Sign-off")
    assert any(f"Version {newest.number}" in readable(h) for h in at.subheader)
    assert "refuse_below: 0.6" in newest.yaml_text and "caveat_below: 0.7" in newest.yaml_text
    stored = newest.snapshot or {}
    assert stored["caveat"]["caveat_below"] == 0.7 and stored["caveat"]["table"]
    # the proposal records the source it was calibrated on, with the figures' fingerprint
    assert stored["source"]["kind"] == "run" and stored["fingerprint"]
    # the author sees that someone else must sign
    at = app(demo_url, monkeypatch, OMAR).run()
    at.switch_page("pages/thresholds_page.py").run()
    open_tab(at, "Sign-off")
    assert any("someone else must sign" in readable(i) for i in at.info)
    # a product owner and compliance approve; the change fails targets (the demo's policy in
    # force fails them already), so each gives a reason and confirms, and is refused without
    for who in (PAULA, CHEN):
        at = app(demo_url, monkeypatch, who).run()
        at.switch_page("pages/thresholds_page.py").run()
        open_tab(at, "Sign-off")
        no_exception(at)
        assert any("fails target" in m.value for m in at.markdown)
        # the signer sees the values they sign, not only their effect
        assert any(
            x.value == "ranking_modes.vector.caveat_below: 0.65 → 0.7\n"
            "ranking_modes.vector.refuse_below: 0.55 → 0.6"
            for x in at.text
        ), [x.value for x in at.text]
        next(b for b in at.button if b.label == "Approve").click().run()
        assert any("was not approved" in readable(e) for e in at.error)
        assert signoff.get_version(demo_engine, newest.id).signatures == tuple(
            s for s in signoff.get_version(demo_engine, newest.id).signatures if s.signer != who
        )
        at.text_area(key=f"thr_sign_note_{newest.id}").input("Accepted for the test.")
        at.checkbox(key=f"thr_sign_confirm_{newest.id}").check()
        next(b for b in at.button if b.label == "Approve").click().run()
        no_exception(at)
    done = signoff.get_version(demo_engine, newest.id)
    assert done.status == "approved"
    assert {s.note for s in done.signatures} == {"Accepted for the test."}
    assert {s.role for s in done.signatures} == {"product_owner", "compliance"}
    assert all(s.data_fingerprint and s.metrics_snapshot for s in done.signatures)
    # every signer signed the figures of the proposal's own source, unchanged since
    assert all(s.metrics_snapshot["source"] == stored["source"] for s in done.signatures)
    assert all(s.data_fingerprint == stored["fingerprint"] for s in done.signatures)
    assert signoff.verify_chain(demo_engine) == []


def test_agreement_page_matches_the_statistics_and_filters(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from review.labels import agreement, labeling

    at = app(demo_url, monkeypatch, RAVI).run()
    at.switch_page("pages/agreement_page.py").run()
    no_exception(at)
    shown = at.dataframe[0].value
    expected = agreement.agreement_table(
        labeling.labels_frame(demo_engine), "decision", item="case_id", value="decision"
    )
    alpha_shown = shown[shown["scope"] == "all"]["krippendorff_alpha"].iloc[0]
    alpha_expected = expected[expected["scope"] == "all"]["krippendorff_alpha"].iloc[0]
    assert alpha_shown == pytest.approx(alpha_expected)
    assert 0 < alpha_expected < 1  # realistic partial disagreement in the demo
    at.selectbox(key="agr_slice").set_value("temporal_mismatch").run()
    no_exception(at)
    assert any(re.search(r"\b\d+ cases?, \d+ annotators?, ", readable(c)) for c in at.caption)
    assert not any("(s)" in readable(c) for c in at.caption)


def test_monthly_review_record_validate_close_and_export(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from review.monthly import reviews

    sessions = reviews.list_sessions(demo_engine)
    assert [s.status for s in sessions] == ["open", "closed", "closed"]
    current = sessions[0]
    at = app(demo_url, monkeypatch, RAVI).run()
    at.switch_page("pages/review_page.py").run()
    no_exception(at)
    # error path: a finding without text
    next(b for b in at.button if b.label == "Add finding").click().run()
    assert any("needs text" in readable(e) for e in at.error)
    next(t for t in at.text_area if t.label == "Finding").input("Caveat rate above average.")
    next(t for t in at.text_area if t.label.startswith("Links")).input("case:CASE-001")
    next(b for b in at.button if b.label == "Add finding").click().run()
    no_exception(at)
    after = reviews.get_session(demo_engine, current.month)
    assert after is not None and len(after.findings) == len(current.findings) + 1
    # the author of the policy in force may not dry-run it (note 004)
    paula = app(demo_url, monkeypatch, "paula.kim@brightwave.example").run()
    paula.switch_page("pages/review_page.py").run()
    next(b for b in paula.button if b.label == "Run and store the validation check").click().run()
    assert any("someone other than the author" in readable(e) for e in paula.error)
    stored = reviews.get_session(demo_engine, current.month)
    assert stored is not None and stored.validation is None
    next(b for b in at.button if b.label == "Run and store the validation check").click().run()
    no_exception(at)
    stored = reviews.get_session(demo_engine, current.month)
    assert stored is not None and stored.validation is not None
    from review.monthly.validation import policy_under_validation

    in_force = policy_under_validation(demo_engine)
    assert stored.validation["ran_by"] == RAVI
    assert stored.validation["policy_version"] == in_force.number is not None
    next(b for b in at.button if b.label.startswith("Close this review")).click().run()
    next(b for b in at.button if b.label == "Yes, close it for good").click().run()
    no_exception(at)
    closed = reviews.get_session(demo_engine, current.month)
    assert closed is not None and closed.closed and closed.validation is not None
    assert any("read-only" in readable(i) for i in at.info)
    assert not [b for b in at.button if b.label == "Add finding"]
    assert any(b.label.startswith("Download the report") for b in _download_buttons(at))


def test_admin_changes_the_label_overlap(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from review.labels import labeling

    at = app(demo_url, monkeypatch, ADA).run()
    at.switch_page("pages/admin_page.py").run()
    next(n for n in at.number_input if n.label.startswith("Independent labels")).set_value(3)
    next(b for b in at.button if b.label == "Save labeling settings").click().run()
    no_exception(at)
    assert labeling.get_settings(demo_engine).overlap == 3


def test_thresholds_calibrate_on_audited_traces_and_replay(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = app(demo_url, monkeypatch, CHEN).run()
    at.switch_page("pages/thresholds_page.py").run()
    at.selectbox(key="thr_run").set_value("Audited production traces").run()
    no_exception(at)
    assert any("What the change buys" in readable(s) for s in at.subheader)
    next(b for b in at.button if b.label.startswith("Replay the proposed")).click().run()
    no_exception(at)
    replayed = next(readable(c) for c in at.caption if "traces replayed" in readable(c))
    # the demo's two wording traces were logged without topics: the gate cannot decide them
    assert "2 not replayable" in replayed and "topics 2" in replayed
    # and the replay says so first (issue 30)
    assert any("2 traces lacked the topics" in readable(w) for w in at.warning)
    # the policy in force reproduces what production logged (History tab)
    open_tab(at, "History")
    next(b for b in at.button if b.label.startswith("Replay the policy in force")).click().run()
    no_exception(at)
    same = next(readable(c) for c in at.caption if "logged decision" in readable(c))
    assert "none differs" in same and "not replayable" in same


def test_thresholds_evidence_gate_tab_decides_a_case(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = app(demo_url, monkeypatch, CHEN).run()
    at.switch_page("pages/thresholds_page.py").run()
    open_tab(at, "Evidence gate")
    no_exception(at)
    assert any("Type a case key" in readable(i) for i in at.info)
    at.text_input(key="thr_gate_case").input("NOPE").run()
    assert any("no case with key" in readable(e) for e in at.error)
    at.text_input(key="thr_gate_case").input("CASE-001").run()
    no_exception(at)
    status = next(m for m in at.metric if m.label == "Status")
    # no support score given yet: the gate fails closed and says which signal it lacked
    assert status.value != "answer"
    assert any("signals missing" in readable(c) and "support_score" in readable(c)
               for c in at.caption)  # fmt: skip
    assert any(b.label.startswith("Download the input line") for b in _download_buttons(at))


def test_overview_lists_the_work_waiting_for_each_role(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from review.audits import plans
    from review.core.taxonomy import load_taxonomy
    from review.labels import labeling
    from review.monthly import overview
    from review.policy import signoff
    from review.wording import versions

    tax = load_taxonomy()

    def waiting(email: str) -> list[overview.Attention]:
        who = users.to_actor(users.get_by_email(demo_engine, email))  # type: ignore[arg-type]
        return overview.build_overview(demo_engine, who, tax).attention

    ines = users.to_actor(users.get_by_email(demo_engine, INES))  # type: ignore[arg-type]
    queue = labeling.queue_size(demo_engine, ines)
    assert queue > 0
    label_items = [a for a in waiting(INES) if a.page == "labeling"]
    assert [a.text for a in label_items] == [
        f"{readable_count(queue, 'ready case')} still "
        f"{'needs' if queue == 1 else 'need'} your label."
    ]
    ravi_pages = {a.page for a in waiting(RAVI)}
    assert "adjudication" in ravi_pages and "audit" in ravi_pages  # demo: disagreements, open batch
    open_batches = [p for p in plans.list_plans(demo_engine) if p.status == "open"]
    assert sum(a.page == "audit" for a in waiting(RAVI)) == len(open_batches)
    # pending changes wait for the approvers who are not their authors
    for kind, page in ((inforce.KIND, "thresholds"), (versions.KIND, "wording")):
        pending = [v for v in signoff.versions(demo_engine, kind) if v.status == "pending"]
        assert pending, kind
        for v in pending:
            assert not any(
                a.page == page and f"version {v.number} " in a.text for a in waiting(v.author)
            )
            # listed for exactly the other approvers holding a role the version still needs
            for email in (OMAR, PAULA, CHEN):
                who = users.to_actor(users.get_by_email(demo_engine, email))  # type: ignore[arg-type]
                needed = {r.value for r in who.roles} & set(v.missing_roles)
                expect = bool(needed) and email != v.author
                listed = any(
                    a.page == page and f"version {v.number} " in a.text for a in waiting(email)
                )
                assert listed == expect, (kind, v.number, email)
    assert not [a for a in waiting(INES) if a.page in ("thresholds", "wording", "audit")]
    # the page shows them with a link to each page
    at = app(demo_url, monkeypatch, RAVI).run()
    no_exception(at)
    assert any("wait for adjudication" in readable(m) for m in at.markdown)


def test_thresholds_history_proposes_a_rollback(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from review.policy import signoff

    approved = [v for v in signoff.versions(demo_engine, inforce.KIND) if v.approved_on is not None]
    in_force = inforce.in_force(demo_engine).version
    assert in_force is not None and len(approved) >= 2, "the demo has a policy history"
    at = app(demo_url, monkeypatch, OMAR).run()
    at.switch_page("pages/thresholds_page.py").run()
    open_tab(at, "History")
    no_exception(at)
    choices = at.selectbox(key="thr_rollback_to").options
    assert str(in_force.number) not in choices and choices
    submit = next(b for b in at.button if b.label == "Propose the rollback")
    submit.click().run()
    assert any("rationale" in readable(e) for e in at.error)  # error path: no reason given
    at.text_area(key="thr_rollback_why").input("Back to the thresholds before the change.")
    next(b for b in at.button if b.label == "Propose the rollback").click().run()
    no_exception(at)
    assert any("waits for sign-off" in readable(s) for s in at.success)
    newest = signoff.versions(demo_engine, inforce.KIND)[0]
    assert newest.status == "pending" and newest.author == OMAR


class _FakeUser(dict):  # type: ignore[type-arg]
    """Stands in for st.user: what the identity provider says about the visitor."""

    @property
    def is_logged_in(self) -> bool:
        return bool(self.get("email"))


@pytest.mark.parametrize(
    ("claims", "shown"),
    [
        ({}, "Sign in with your organisation account"),
        (
            {"email": "stranger@example.org", "email_verified": True},
            "not registered in this workbench",
        ),
        ({"email": "ines.duarte@brightwave.example", "email_verified": True}, "Overview"),
        ({"email": "ines.duarte@brightwave.example", "email_verified": "true"}, "Overview"),
        (
            {"email": "ines.duarte@brightwave.example", "email_verified": False},
            "not verified by the identity provider",
        ),
        ({"email": "ines.duarte@brightwave.example"}, "no email_verified claim"),
    ],
)
def test_sign_in_with_an_identity_provider_maps_the_email_to_a_user(
    demo_url: str, monkeypatch: pytest.MonkeyPatch, claims: dict[str, object], shown: str
) -> None:
    """With [auth] configured, who you are is the provider's verified email: unknown (or
    deactivated) or unverified emails get no page, a registered one works as that user."""
    import streamlit

    monkeypatch.setattr(streamlit, "user", _FakeUser(**claims))
    at = app(demo_url, monkeypatch)
    at.secrets["auth"] = {"redirect_uri": "http://localhost:8501/oauth2callback"}
    at.run()
    no_exception(at)
    texts = (
        [readable(m) for m in at.markdown]
        + [readable(e) for e in at.error]
        + [readable(t) for t in at.title]
    )
    assert any(shown in t for t in texts), texts
    if shown == "Overview":
        assert any("Inés Duarte" in t.value for t in at.sidebar.text)
        assert not at.sidebar.selectbox  # no local user picker when sign-in is on
    else:
        assert ACTOR_KEY not in at.session_state
        assert not at.sidebar.text


def test_a_provider_that_never_sends_email_verified_is_trusted_only_when_configured(
    demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import streamlit

    monkeypatch.setattr(streamlit, "user", _FakeUser(email="ines.duarte@brightwave.example"))
    at = app(demo_url, monkeypatch)
    at.secrets["auth"] = {"redirect_uri": "http://localhost:8501/oauth2callback"}
    at.secrets["workbench"] = {"provider_verifies_email": True}
    at.run()
    no_exception(at)
    assert readable(at.title[0]) == "Overview"
    assert at.session_state[ACTOR_KEY].email == "ines.duarte@brightwave.example"
    # an explicit "not verified" is refused even then
    monkeypatch.setattr(
        streamlit,
        "user",
        _FakeUser(email="ines.duarte@brightwave.example", email_verified=False),
    )
    at2 = app(demo_url, monkeypatch)
    at2.secrets["auth"] = {"redirect_uri": "http://localhost:8501/oauth2callback"}
    at2.secrets["workbench"] = {"provider_verifies_email": True}
    at2.run()
    assert any("not verified" in readable(e) for e in at2.error)
    assert ACTOR_KEY not in at2.session_state


def test_a_deactivated_account_cannot_sign_in(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    import streamlit

    admin = users.to_actor(users.get_by_email(demo_engine, ADA))  # type: ignore[arg-type]
    tom = users.get_by_email(demo_engine, "tom.becker@brightwave.example")
    assert tom is not None
    users.update_user(
        demo_engine,
        admin,
        tom.id,
        tom.version,
        name=tom.name,
        roles=list(tom.roles),
        clearance=tom.clearance,
        active=False,
    )
    monkeypatch.setattr(
        streamlit, "user", _FakeUser(email="tom.becker@brightwave.example", email_verified=True)
    )
    at = app(demo_url, monkeypatch)
    at.secrets["auth"] = {"redirect_uri": "http://localhost:8501/oauth2callback"}
    at.run()
    no_exception(at)
    assert any(
        "not registered in this workbench (or is deactivated)" in readable(e) for e in at.error
    )


def test_corpus_document_shows_its_structure_not_its_marks(
    empty_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Headings are headings and footnotes captions, with no ``#`` or ``[^1]`` marks, and a
    heading's text stays text (a Markdown image in it is escaped, never fetched)."""
    hostile = GOOD.replace("## Monthly plans", "## Monthly plans ![x](http://evil.test/x.png)")
    eng = make_engine(empty_url)
    at = app(empty_url, monkeypatch).run()
    at.switch_page("pages/corpus_page.py").run()
    at.file_uploader[0].set_value([("a.md", hostile.encode(), "text/markdown")])
    next(b for b in at.button if b.label == "Import").click().run()
    doc_id = corpus.search_documents(eng, SYSTEM, corpus.DocFilter())[0].id
    eng.dispose()
    at2 = app(empty_url, monkeypatch, doc=str(doc_id)).run()
    at2.switch_page("pages/corpus_page.py").run()
    no_exception(at2)
    texts = [t.value for t in at2.text]
    assert not any(line.lstrip().startswith("#") for t in texts for line in t.splitlines())
    assert not any("[^" in t for t in texts)
    headings = [readable(m).lstrip("# ") for m in at2.markdown]
    assert "Refund policy" in headings
    assert any(h.startswith("Monthly plans") and "evil" in h for h in headings)
    assert not any("](http" in m.value for m in at2.markdown)  # escaped: no image is made
    assert any(readable(c) == "[1] Counted from the first invoice date." for c in at2.caption)
    assert any("refund[1], except" in t for t in texts)


def test_overview_on_an_empty_database_shows_the_one_next_step_first(
    empty_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new workbench: one "First step" (import the corpus) above everything, not a list of
    "Slice X has 0 ready cases"; after the corpus the step is the first case, then marking
    cases ready; someone who cannot do the step learns who does it."""
    from review.core.identity import Actor, Role
    from review.monthly import overview

    at = app(empty_url, monkeypatch).run()
    no_exception(at)
    assert [readable(h) for h in at.subheader][:1] == ["First step"]
    shown = " ".join(readable(m) for m in at.markdown)
    assert "Start here: import your documents" in shown
    assert "has 0 ready" not in shown and "No cases yet" not in shown
    eng = make_engine(empty_url)
    tax = taxonomy()
    solo = users.to_actor(users.list_users(eng)[0])
    chen = Actor(id=99, email="c@example.org", name="C", roles=frozenset({Role.compliance}))
    assert overview.build_overview(eng, chen, tax).first_step.text.startswith(  # type: ignore[union-attr]
        "The corpus is empty. Annotators and administrators import"
    )
    corpus.import_documents(eng, solo, [parse_markdown(GOOD, "a.md", tax)])
    step = overview.build_overview(eng, solo, tax).first_step
    assert step is not None and step.text.startswith("Next: make your first evaluation cases")
    assert not [a for a in overview.build_overview(eng, solo, tax).attention if "Slice" in a.text]
    eng.dispose()
