"""The labeling queue's filters (family, slice, category, split; in SQL), progress for me and
the team within them, going back to my previous case, and which decisions ask for reasons."""

from __future__ import annotations

from sqlalchemy import Engine, select

from review.cases import cases
from review.core import clearance
from review.core.taxonomy import Taxonomy
from review.labels import labeling, queue
from storage.db import read_session
from storage.models import Case
from tests.helpers.actors import make_actor

INES = make_actor("annotator", "ines@example.org")
TOM = make_actor("annotator", "tom@example.org")


def _ready(engine: Engine, **f: str) -> set[int]:
    rows = cases.list_cases(engine, cases.CaseFilter(status="ready", **f), page_size=500)
    return {r.id for r in rows}


def _open(engine: Engine, ids: set[int]) -> set[int]:
    """Of these cases, those still short of the overlap (the demo labeled some already) that
    list no restricted document (the queue of an annotator without clearance counts no other;
    of those, one that retells a restricted document is counted but not given)."""
    overlap = labeling.get_settings(engine).overlap
    with read_session(engine) as s:
        hidden = set(s.scalars(select(Case.id).where(clearance.lists_restricted_document())))
    return {c for c in ids if c not in hidden and len(labeling.current_labels(engine, c)) < overlap}


def test_each_filter_keeps_the_queue_to_matching_cases(demo_engine: Engine) -> None:
    facets = queue.queue_facets(demo_engine)
    everything = labeling.queue_size(demo_engine, INES)
    options = {
        "family": facets.families,
        "slice": facets.slices,
        "category": facets.categories,
        "split": facets.splits,
    }
    for name, values in options.items():
        assert values, name
        # the first value of the facet that still has open cases
        value, allowed = next(
            (v, a) for v in values if (a := _open(demo_engine, _ready(demo_engine, **{name: v})))
        )
        q = queue.QueueFilter(**{name: value})
        assert labeling.queue_size(demo_engine, INES, q) == len(allowed) < everything, name
        got = labeling.next_case(demo_engine, INES, queue=q)
        assert got in allowed, name
        labeling.release(demo_engine, INES, got)
        prog = labeling.progress(demo_engine, INES, q)
        assert prog.ready_cases == len(_ready(demo_engine, **{name: value})), name


def test_a_held_case_outside_the_filter_does_not_come_first(demo_engine: Engine) -> None:
    facets = queue.queue_facets(demo_engine)
    first = labeling.next_case(demo_engine, INES)
    assert first is not None
    view = cases.get_case(demo_engine, case_id=first)
    assert view is not None
    other = next(s for s in facets.splits if s != view.split)
    got = labeling.next_case(demo_engine, INES, queue=queue.QueueFilter(split=other))
    assert got is not None and got != first
    assert got in _ready(demo_engine, split=other)
    # without the filter the held case comes first again
    labeling.release(demo_engine, INES, got)
    assert labeling.next_case(demo_engine, INES) == first


def test_an_empty_part_of_the_queue_gives_no_case(demo_engine: Engine) -> None:
    q = queue.QueueFilter(family="FAM-NO-SUCH-FAMILY")
    assert labeling.next_case(demo_engine, INES, queue=q) is None
    assert labeling.queue_size(demo_engine, INES, q) == 0
    prog = labeling.progress(demo_engine, INES, q)
    assert (prog.ready_cases, prog.mine, prog.complete_cases) == (0, 0, 0)


def test_progress_counts_mine_and_the_team(demo_engine: Engine, tax: Taxonomy) -> None:
    before = labeling.progress(demo_engine, INES)
    case = labeling.next_case(demo_engine, INES)
    assert case is not None
    labeling.submit(demo_engine, INES, case, labeling.LabelIn("answer"), None, tax)
    labeling.submit(demo_engine, TOM, case, labeling.LabelIn("answer"), None, tax)
    after = labeling.progress(demo_engine, INES)
    assert after.mine == before.mine + 1
    assert after.labels == before.labels + 2
    assert after.complete_cases == before.complete_cases + 1


def test_previous_goes_back_through_my_labels_newest_first(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    assert queue.previous_case(demo_engine, INES, None) is None
    done = []
    for _ in range(3):
        case = labeling.next_case(demo_engine, INES)
        assert case is not None
        labeling.submit(demo_engine, INES, case, labeling.LabelIn("answer"), None, tax)
        done.append(case)
    current = labeling.next_case(demo_engine, INES)  # a case I have not labeled yet
    assert queue.previous_case(demo_engine, INES, current) == done[2]
    assert queue.previous_case(demo_engine, INES, done[2]) == done[1]
    assert queue.previous_case(demo_engine, INES, done[0]) is None
    # changing my label on an earlier case makes it the newest
    mine = labeling.my_label(demo_engine, INES, done[0])
    assert mine is not None
    abstain = labeling.LabelIn("abstain", ("no_answer_bearing_evidence",))
    labeling.submit(demo_engine, INES, done[0], abstain, mine.id, tax)
    assert queue.my_labeled_cases(demo_engine, INES) == [done[0], done[2], done[1]]
    history = [h for h in labeling.history(demo_engine, done[0]) if h.annotator == INES.email]
    assert [h.decision for h in history] == ["answer", "abstain"]  # the first one is kept


def test_reasons_are_asked_only_for_decisions_that_need_them(tax: Taxonomy) -> None:
    asks = {d for d in tax.decisions if labeling.needs_reasons(tax, d)}
    assert asks == {d for d, t in tax.decisions.items() if not t.answers}
    assert "answer" not in asks and "abstain" in asks
    assert not labeling.needs_reasons(tax, None)
    codes = list(tax.case_reason_codes())
    assert labeling.label_reasons(tax, "answer", codes[:2]) == ()
    assert labeling.label_reasons(tax, "abstain", [codes[1], codes[0]]) == (codes[0], codes[1])
