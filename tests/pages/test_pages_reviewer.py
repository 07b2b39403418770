"""AppTest of the reviewer's pages (issue 17, items 6, 7 and 15): Adjudicate shows the evidence
beside the labels and walks the list; a reviewer's own cases are left out; the Admin page
allows self-adjudication; a new monthly review opens without an error and closing asks first."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, select

from review.admin import users
from review.labels import adjudication, labeling
from review.monthly import reviews
from storage.db import write_session
from storage.models import EvalOutput
from tests.helpers.pages import ADA, app, no_exception, readable

RAVI = "ravi.menon@brightwave.example"
TOM = "tom.becker@brightwave.example"


def ravi_queue(engine: Engine) -> adjudication.ReviewerQueue:
    row = users.get_by_email(engine, RAVI)
    assert row is not None
    return adjudication.reviewer_queue(
        engine, users.to_actor(row), labeling.disagreements(engine, limit=200), 200
    )


def button(at: object, label: str) -> object:
    return next(b for b in at.button if b.label == label)  # type: ignore[attr-defined]


# --- Adjudicate ------------------------------------------------------------------------------


def test_adjudicate_shows_the_evidence_beside_the_labels_and_walks_the_list(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = ravi_queue(demo_engine)
    assert len(queue.entries) >= 3 and queue.hidden >= 1
    first, second = queue.entries[0], queue.entries[1]
    at = app(demo_url, monkeypatch, RAVI).run()
    at.switch_page("pages/adjudication_page.py").run()
    no_exception(at)
    assert any(first.key in readable(s) for s in at.subheader)
    # the evidence: question, required claims, the documents with their text
    captions = [readable(c) for c in at.caption]
    assert "Question" in captions and "Required claims" in captions
    assert any(c.startswith("Documents available to retrieval") for c in captions)
    assert at.expander, "each document opens to its text"
    # the documents table in words, its title with room and its reference pinned
    (docs,) = [d for d in at.dataframe if "title" in d.value.columns]
    roles = set(docs.value["role"])
    assert "Decisive" in roles and roles <= {
        "Decisive",
        "Distractor",
        "Superseded",
        "Partial",
        "Context",
    }
    assert set(docs.value["access"]) <= {"Public", "Internal", "Restricted"}
    # the labels side by side, by name
    assert any(readable(c) == "Labels side by side" for c in at.caption)
    assert any(t.value in {"Inés Duarte", "Ines Duarte", "Tom Becker"} for t in at.text)
    # the reviewer's own cases wait for someone else, and the list says so
    assert any("you labeled yourself wait for another reviewer" in c for c in captions)
    assert any(f"Case 1 of {len(queue.entries)}" in c for c in captions)
    assert button(at, "Previous").disabled  # type: ignore[attr-defined]
    button(at, "Next").click().run()  # type: ignore[attr-defined]
    no_exception(at)
    assert any(second.key in readable(s) for s in at.subheader)
    assert at.query_params["case"] == str(second.case_id)
    button(at, "Previous").click().run()  # type: ignore[attr-defined]
    assert any(first.key in readable(s) for s in at.subheader)
    # the gold form starts empty: submitted so, it is refused at the button, nothing saved
    gold = at.pills(key=f"adj_gold_dec_{first.case_id}")
    assert gold.value is None
    assert at.pills(key=f"adj_gold_reasons_{first.case_id}").value == []
    next(t for t in at.text_area if t.label.startswith("Note")).input("Decisive clause present.")
    button(at, "Set gold label").click().run()  # type: ignore[attr-defined]
    no_exception(at)
    assert any("Pick a gold decision first" in readable(e) for e in at.error)
    assert labeling.gold_history(demo_engine, first.case_id) == []
    assert any(first.key in readable(s) for s in at.subheader)
    # setting the gold label moves on to the next case
    at.pills(key=f"adj_gold_dec_{first.case_id}").set_value("answer")
    button(at, "Set gold label").click().run()  # type: ignore[attr-defined]
    no_exception(at)
    assert any(f"Gold label set on {first.key}" in readable(s) for s in at.success)
    assert any(second.key in readable(s) for s in at.subheader)
    assert len(labeling.gold_history(demo_engine, first.case_id)) == 1


def test_a_case_the_reviewer_labeled_offers_no_gold_form(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = [cid for cid, _, _ in labeling.disagreements(demo_engine, limit=10_000)]
    mine = sorted(adjudication.labeled_by(demo_engine, RAVI, found))
    assert mine
    at = app(demo_url, monkeypatch, RAVI, case=str(mine[0])).run()
    at.switch_page("pages/adjudication_page.py").run()
    no_exception(at)
    assert any("not in your list" in o for o in at.selectbox[0].options)
    assert any("You labeled this case yourself" in readable(w) for w in at.warning)
    assert not [b for b in at.button if b.label == "Set gold label"]


def test_admin_allows_self_adjudication_and_the_list_marks_the_reviewers_cases(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = app(demo_url, monkeypatch, ADA).run()
    at.switch_page("pages/admin_page.py").run()
    no_exception(at)
    box = next(c for c in at.checkbox if c.label.startswith("Reviewers may adjudicate"))
    assert box.value is False
    box.check()
    button(at, "Save adjudication setting").click().run()  # type: ignore[attr-defined]
    no_exception(at)
    assert adjudication.get_settings(demo_engine).self_adjudication is True
    rv = app(demo_url, monkeypatch, RAVI).run()
    rv.switch_page("pages/adjudication_page.py").run()
    no_exception(rv)
    assert any("you labeled this" in o for o in rv.selectbox[0].options)


def test_adjudicate_hides_restricted_text_without_clearance(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every document body on the page is one the reader may see (clearance, as Cases)."""
    from review.cases import cases

    queue = ravi_queue(demo_engine)
    for entry in queue.entries:
        view = cases.get_case(demo_engine, case_id=entry.case_id)
        assert view is not None
        no_clearance = users.to_actor(users.get_by_email(demo_engine, TOM))  # type: ignore[arg-type]
        for d in adjudication.case_evidence(demo_engine, no_clearance, view):
            if d.access_scope == "restricted" or d.visibility == "forbidden":
                assert d.body is None and d.withheld
            else:
                assert d.body is not None


# --- Monthly review --------------------------------------------------------------------------


def test_opening_a_new_month_creates_it_without_an_error(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = [s.month for s in reviews.list_sessions(demo_engine)]
    new_month = "2031-04"
    assert new_month not in before
    at = app(demo_url, monkeypatch, RAVI).run()
    at.switch_page("pages/review_page.py").run()
    no_exception(at)
    next(t for t in at.text_input if t.label.startswith("Open the review")).input(new_month)
    button(at, "Open review").click().run()  # type: ignore[attr-defined]
    no_exception(at)
    assert not at.error
    assert reviews.get_session(demo_engine, new_month) is not None
    assert at.selectbox[0].value == new_month
    assert any(f"Opened the review of {new_month}" in readable(s) for s in at.success)
    # opening an existing month switches to it, creating nothing
    old = before[-1]
    next(t for t in at.text_input if t.label.startswith("Open the review")).input(old)
    button(at, "Open review").click().run()  # type: ignore[attr-defined]
    no_exception(at)
    assert not at.error
    assert at.selectbox[0].value == old
    assert len(reviews.list_sessions(demo_engine)) == len(before) + 1


def test_closing_a_review_asks_for_confirmation_first(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    current = reviews.list_sessions(demo_engine)[0]
    assert not current.closed
    # the runs as a pipeline that logs no answerable flag would have stored them
    with write_session(demo_engine) as s:
        for out in s.scalars(select(EvalOutput).where(EvalOutput.signals.is_not(None))):
            out.signals = (out.signals or {}) | {"answerable": None}
    at = app(demo_url, monkeypatch, RAVI).run()
    at.switch_page("pages/review_page.py").run()
    button(at, "Run and store the validation check").click().run()  # type: ignore[attr-defined]
    no_exception(at)
    # the dry run refuses those outputs and says so first (issue 30)
    assert "lacked the answerable flag" in readable(at.warning[0])
    button(at, "Close this review…").click().run()  # type: ignore[attr-defined]
    no_exception(at)
    assert any("cannot be undone" in readable(w) for w in at.warning)
    still = reviews.get_session(demo_engine, current.month)
    assert still is not None and not still.closed  # nothing closed yet
    button(at, "Cancel").click().run()  # type: ignore[attr-defined]
    assert not any("cannot be undone" in readable(w) for w in at.warning)
    button(at, "Close this review…").click().run()  # type: ignore[attr-defined]
    button(at, "Yes, close it for good").click().run()  # type: ignore[attr-defined]
    no_exception(at)
    closed = reviews.get_session(demo_engine, current.month)
    assert closed is not None and closed.closed
    assert any("read-only" in readable(i) for i in at.info)
