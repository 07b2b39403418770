"""The blind rule every view of a case asks (review/cases/sight.py): who a case is blind to,
and what of it they see."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, select, text
from sqlalchemy.orm import Session

from review.cases import cases, sight
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy
from review.labels import blind, labeling
from storage.models import Case, CaseSuggestion, Label
from tests.helpers.actors import make_actor

INES = make_actor("annotator", "ines.duarte@brightwave.example")
TOM = make_actor("annotator", "tom.becker@brightwave.example")
EVA = make_actor("annotator", "eva@example.org")
REVIEWER = make_actor("reviewer", "rita@example.org")
OWNER = make_actor("product_owner", "paula@example.org")
ADMIN = make_actor("admin", "ada@example.org")


def _view(engine: Engine, key: str) -> cases.CaseView:
    view = cases.get_case(engine, key=key)
    assert view is not None
    return view


def _blind(engine: Engine, actor: Actor, case_id: int) -> bool:
    return blind.sight(engine, actor).is_blind(engine, case_id)


def test_a_ready_case_waiting_for_labels_is_blind_to_annotators_only(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    view = _view(demo_engine, "CASE-086")  # ready, unlabeled, written by the demo
    assert view.status == "ready" and not labeling.current_labels(demo_engine, view.id)
    assert _blind(demo_engine, INES, view.id) and _blind(demo_engine, TOM, view.id)
    for who in (REVIEWER, OWNER, ADMIN):
        assert not _blind(demo_engine, who, view.id), who.roles
    labeling.submit(demo_engine, INES, view.id, labeling.LabelIn("answer"), None, tax)
    assert not _blind(demo_engine, INES, view.id)  # labeled: the judgement shows
    assert _blind(demo_engine, TOM, view.id)  # one label of two: still waits for Tom's
    labeling.submit(demo_engine, EVA, view.id, labeling.LabelIn("answer"), None, tax)
    assert not _blind(demo_engine, TOM, view.id)  # it has its labels: no longer waits


def test_its_author_and_drafts_are_not_blind(demo_engine: Engine) -> None:
    own = _view(demo_engine, "CASE-005-CF-1")  # a ready variant Inés built
    assert own.status == "ready"
    assert not _blind(demo_engine, INES, own.id)
    assert _blind(demo_engine, TOM, own.id)
    draft = _view(demo_engine, "CASE-056")  # a draft: not in the labeling queue
    assert draft.status == "draft" and not _blind(demo_engine, TOM, draft.id)


def test_a_blind_case_reads_without_its_judgement_and_filters_do_not_find_it(
    demo_engine: Engine,
) -> None:
    view = _view(demo_engine, "CASE-086")
    seen = blind.sight(demo_engine, TOM)
    shown = sight.get_case(demo_engine, seen, view.id, viewer=TOM)
    assert shown is not None and shown.blind
    assert shown.expected_decision == sight.HIDDEN and shown.category == sight.HIDDEN
    assert shown.reason_codes == () and shown.notes == "" and shown.evidence_state is None
    assert {d.role for d in shown.documents} == {sight.HIDDEN}
    assert [d.ref for d in shown.documents] == sorted(d.ref for d in view.documents)
    assert not set(sight.JUDGEMENT_KEYS) & set(shown.record)
    by_decision = cases.CaseFilter(text=view.key, expected_decision=view.expected_decision)
    assert cases.count_cases(demo_engine, by_decision) == 1
    assert sight.count_cases(demo_engine, seen, by_decision, viewer=TOM) == 0
    assert sight.list_cases(demo_engine, seen, by_decision, viewer=TOM) == []
    row = sight.list_cases(demo_engine, seen, cases.CaseFilter(text=view.key), viewer=TOM)[0]
    assert row.blind and row.expected_decision == sight.HIDDEN
    # nobody is blind to the command line (an administrator)
    cleared = make_actor("admin", "ada@example.org", clearance=True)
    whole = cases.get_case(demo_engine, case_id=view.id, viewer=cleared)
    assert sight.get_case(demo_engine, sight.OPEN, view.id, viewer=cleared) == whole


ME = "me@example.org"
OTHERS = ("a@example.org", "b@example.org", "c@example.org")


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    cases_=st.lists(
        st.tuples(
            st.sampled_from(["ready", "draft", "retired"]),
            st.sampled_from([None, ME, OTHERS[0]]),
            st.booleans(),  # a suggestion I confirmed
            st.lists(st.sampled_from([ME, *OTHERS]), max_size=5),  # labels, repeats = relabels
        ),
        min_size=1,
        max_size=12,
    ),
    overlap=st.integers(1, 4),
)
def test_the_blind_clause_is_the_rule_in_words(
    engine: Engine, cases_: list[tuple[str, str | None, bool, list[str]]], overlap: int
) -> None:
    """Blind: ready, not mine, no suggestion of it I confirmed, no label of mine (however many
    times anyone relabelled), and fewer than ``overlap`` annotators; the SQL (one look at the
    case's labels) against those words case by case."""
    with engine.begin() as c:
        for table in ("labels", "case_suggestions", "cases"):
            c.execute(text(f"DELETE FROM {table}"))
    expected: dict[int, bool] = {}
    with Session(engine) as s, s.begin():
        for i, (status, author, confirmed, labelled) in enumerate(cases_):
            row = Case(
                key=f"K{i}",
                question="q",
                identity_name="i",
                identity_scopes=[],
                expected_decision="abstain",
                reason_codes=[],
                category="c",
                split="test",
                status=status,
                notes="",
                version=1,
                created_by=author,
            )
            s.add(row)
            s.flush()
            if confirmed:
                s.add(
                    CaseSuggestion(case_id=row.id, decision="answer", source="t", confirmed_by=ME)
                )
            for who in labelled:
                s.add(Label(case_id=row.id, annotator=who, decision="answer"))
            expected[row.id] = (
                status == "ready"
                and author != ME
                and not confirmed
                and ME not in labelled
                and len(set(labelled)) < overlap
            )
    seen = sight.Sight(ME, True, overlap)
    with Session(engine) as s:
        got = {int(k): v for k, v in s.execute(select(Case.id, seen.blind_clause()))}
    assert {k: bool(v) for k, v in got.items()} == expected
