"""The Label page as an annotator uses it (AppTest on the demo): blind until the label is
submitted, reasons only for decisions that need them, a missing reason refused at the form,
submit advances to the next case, the previous case one key away with my label changeable,
queue filters, and every key of the overlay bound to a button."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine
from streamlit.testing.v1 import AppTest

from review.admin import users
from review.cases import cases
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy
from review.labels import keys, labeling, queue
from tests.helpers.labeling import unlabeled_case_with_roles
from tests.helpers.pages import INES, no_exception, page_app, readable

PAGE = "pages/labeling_page.py"


def _ines(engine: Engine) -> Actor:
    row = users.get_by_email(engine, INES)
    assert row is not None
    return users.to_actor(row)


def _shown(at: AppTest) -> str:
    """Everything the page shows as text (markdown, captions, text, buttons, alerts)."""
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [t.value for t in at.text] + [b.label for b in at.button]
    parts += [e.value for e in [*at.error, *at.success, *at.info, *at.warning]]
    return "\n".join(readable(p) for p in parts)


def _button(at: AppTest, key: str):
    return next(b for b in at.button if b.key == key)


def _open(demo_url: str, monkeypatch: pytest.MonkeyPatch, case_id: int) -> AppTest:
    at = page_app(demo_url, monkeypatch, PAGE, INES, case=str(case_id)).run()
    no_exception(at)
    return at


def test_blind_before_labeling_and_the_judgement_after(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch, tax: Taxonomy
) -> None:
    view = unlabeled_case_with_roles(demo_engine)
    at = _open(demo_url, monkeypatch, view.id)
    shown = _shown(at)
    assert f"Case {view.key}" in shown
    assert "blind until you submit" in shown
    for role in ("decisive", "distractor", "superseded"):
        assert tax.label("document_roles", role) not in shown, role
        assert role not in shown.lower(), role
    assert "author's judgement" not in shown
    assert view.notes not in shown  # the author's note gives the answer away
    category = next(s for s in at.selectbox if s.key == f"lab_cat_{view.id}")
    assert category.value is None  # not the case's suggestion
    assert not at.pills  # no decision yet: no reasons asked
    # label it: abstain with a reason, submit
    _button(at, "lab_btn_abstain").click().run()
    at.pills[0].select("no_answer_bearing_evidence").run()
    _button(at, "lab_submit").click().run()
    no_exception(at)
    assert f"Saved your label on {view.key}" in _shown(at)
    # the next case opened; going back shows the judgement now that I labeled it
    assert at.session_state["lab_case"] != view.id
    _button(at, "lab_prev").click().run()
    no_exception(at)
    assert at.session_state["lab_case"] == view.id
    shown = _shown(at)
    assert "author's judgement" in shown
    assert at.pills[0].value == ["no_answer_bearing_evidence"]  # my label, to change
    assert tax.label("document_roles", "decisive") in shown
    assert view.notes in shown


def test_reasons_only_for_decisions_that_need_them_and_a_missing_one_is_refused_at_the_form(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch, tax: Taxonomy
) -> None:
    view = unlabeled_case_with_roles(demo_engine)
    at = _open(demo_url, monkeypatch, view.id)
    _button(at, "lab_submit").click().run()
    refused = [readable(e) for e in at.error]
    assert refused == ["Pick a decision first (keys 1–5); nothing was saved."]
    _button(at, "lab_btn_answer").click().run()
    assert not at.pills  # an answer is not asked why
    _button(at, "lab_btn_escalate").click().run()
    assert len(at.pills) == 1 and at.pills[0].value == []
    _button(at, "lab_submit").click().run()
    assert any("Escalate needs at least one reason" in readable(e) for e in at.error)
    assert at.session_state["lab_case"] == view.id  # stays on the case
    assert at.pills[0].value == []  # the submit changed nothing of the form
    ines = _ines(demo_engine)
    assert labeling.my_label(demo_engine, ines, view.id) is None
    # reasons picked, then the decision changed to an answer: the reasons are not saved
    at.pills[0].select("restricted_topic").run()
    _button(at, "lab_btn_answer").click().run()
    _button(at, "lab_submit").click().run()
    no_exception(at)
    mine = labeling.my_label(demo_engine, ines, view.id)
    assert mine is not None and (mine.decision, mine.reason_codes) == ("answer", ())


def test_submit_advances_and_my_last_label_can_be_changed(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    view = unlabeled_case_with_roles(demo_engine)
    ines = _ines(demo_engine)
    at = _open(demo_url, monkeypatch, view.id)
    _button(at, "lab_btn_answer").click().run()
    _button(at, "lab_submit").click().run()
    following = at.session_state["lab_case"]
    assert following not in (None, view.id)
    assert at.query_params["case"] == str(following)  # the address names the open case
    _button(at, "lab_prev").click().run()
    assert at.session_state["lab_case"] == view.id
    assert _button(at, "lab_submit").label == "Change my label"
    _button(at, "lab_btn_clarify").click().run()
    at.pills[0].select("ambiguous_question").run()
    _button(at, "lab_submit").click().run()
    no_exception(at)
    assert "(changed; the earlier label stays in the history)" in _shown(at)
    mine = labeling.my_label(demo_engine, ines, view.id)
    assert mine is not None and mine.decision == "clarify"
    assert mine.reason_codes == ("ambiguous_question",)
    history = [h for h in labeling.history(demo_engine, view.id) if h.annotator == INES]
    assert [h.decision for h in history] == ["answer", "clarify"]
    # the next case is the one I was on before going back
    assert at.session_state["lab_case"] == following


def test_a_key_for_a_case_no_longer_open_is_refused_not_applied(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    view = unlabeled_case_with_roles(demo_engine)
    at = _open(demo_url, monkeypatch, view.id)
    # the decision button was drawn for this case; another case opens before its key lands
    stale = _button(at, "lab_btn_abstain")
    other = labeling.next_case(demo_engine, _ines(demo_engine), exclude=[view.id])
    at.session_state["lab_case"] = other
    at.query_params["case"] = str(other)
    stale.click().run()
    no_exception(at)
    assert any("no longer open" in readable(e) for e in at.error)
    assert at.session_state[f"lab_dec_{other}"] is None
    assert f"lab_dec_{view.id}" not in at.session_state or (
        at.session_state[f"lab_dec_{view.id}"] is None
    )


def test_queue_filters_pick_the_next_case(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch, tax: Taxonomy
) -> None:
    facets = queue.queue_facets(demo_engine)
    at = page_app(demo_url, monkeypatch, PAGE, INES).run()
    no_exception(at)
    split = facets.splits[-1]
    next(s for s in at.selectbox if s.key == "lab_f_split").select(split).run()
    _button(at, "lab_next").click().run()
    no_exception(at)
    opened = cases.get_case(demo_engine, case_id=at.session_state["lab_case"])
    assert opened is not None and opened.split == split
    left = labeling.queue_size(demo_engine, _ines(demo_engine), queue.QueueFilter(split=split))
    assert any(f"My queue: {left} to label" in readable(c) for c in at.caption)
    # blind means blind: no filter by the author's suggested category, and the slice and
    # split filters read as the taxonomy's words
    keys = {s.key for s in at.selectbox}
    assert {"lab_f_family", "lab_f_slice", "lab_f_split"} <= keys
    assert "lab_f_category" not in keys
    slice_box = next(s for s in at.selectbox if s.key == "lab_f_slice")
    assert tax.label("slices", facets.slices[0]) in [readable(o) for o in slice_box.options]


def test_every_key_in_the_overlay_is_bound(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch, tax: Taxonomy
) -> None:
    view = unlabeled_case_with_roles(demo_engine)
    at = _open(demo_url, monkeypatch, view.id)
    bound = {b.proto.shortcut for b in at.button if b.proto.shortcut}
    listed = {k.key for k in keys.label_keys(tax)}
    assert listed <= bound, listed - bound
    _button(at, "keys_help_label").click().run()
    no_exception(at)
    frame = at.dataframe[-1].value
    assert "Ctrl+Enter" in set(frame["key"]) and "? or K" in set(frame["key"])
    # the reasons' letters are listed, one per reason a labeler may give
    reasons = keys.reason_keys(tax)
    assert len(reasons) == len(tax.case_reason_codes())
    assert {k.upper() for k in reasons.values()} <= set(frame["key"])


def test_a_document_keeps_its_table_and_footnotes_as_text_never_raw_markdown(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    view = cases.get_case(demo_engine, key="CASE-024")  # cites the data retention policy
    assert view is not None
    at = _open(demo_url, monkeypatch, view.id)
    assert not at.code  # no document body in a code block
    tables = [d.value for d in at.dataframe]
    retention = next(t for t in tables if "Retention period" in t.columns)
    assert "Backups" in set(retention["Data type"])
    shown = _shown(at)
    assert "## 2. Retention periods" in shown  # headings stay readable as text
    assert "|---|" not in shown  # the table is not shown as Markdown source


def test_with_no_ready_case_the_bar_says_so_instead_of_a_rate(
    sqlite_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = users.to_actor(users.bootstrap_admin(engine, "ada@test.example", "Ada"))
    users.add_user(engine, admin, "ines@test.example", "Inés", ["annotator"])
    at = page_app(sqlite_url, monkeypatch, PAGE, "ines@test.example").run()
    no_exception(at)
    shown = [readable(c) for c in at.caption]
    assert "No ready cases to label." in shown
    assert not any("My queue" in c or "undefined" in c for c in shown)
