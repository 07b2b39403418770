"""Labeling: overlap, blind rule, reservations and their expiry, concurrency, stale edits."""

from __future__ import annotations

import datetime as dt
import random
import threading
from typing import Any

import pytest
from sqlalchemy import Engine

from review.core.errors import InputError, PermissionDenied, StaleWriteError
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy
from review.labels import labeling
from storage.db import run_write
from storage.models import Adjudication, Case, Label, utcnow
from tests.helpers.actors import make_actor

INES = make_actor("annotator", "ines@example.org")
TOM = make_actor("annotator", "tom@example.org")
SAM = make_actor("annotator", "sam@example.org")
RAVI = make_actor("reviewer", "ravi@example.org")
ABSTAIN = labeling.LabelIn("abstain", ("no_answer_bearing_evidence",))
ANSWER = labeling.LabelIn("answer")


def test_overlap_limits_how_many_annotators_get_a_case(demo_engine: Engine, tax: Taxonomy) -> None:
    a = labeling.next_case(demo_engine, INES)
    b = labeling.next_case(demo_engine, TOM)
    c = labeling.next_case(demo_engine, SAM)
    assert a is not None and a == b  # overlap 2: two annotators share the first case
    assert c is not None and c != a  # the third gets the next one
    # asking again returns the case I already hold, not a new one
    assert labeling.next_case(demo_engine, INES) == a
    labeling.submit(demo_engine, INES, a, ANSWER, None, tax)
    assert labeling.next_case(demo_engine, INES) not in (a, None)


def test_expired_reservations_return_to_the_queue(demo_engine: Engine) -> None:
    first = labeling.next_case(demo_engine, INES)
    labeling.next_case(demo_engine, TOM)
    assert labeling.next_case(demo_engine, SAM) != first
    later = utcnow() + dt.timedelta(minutes=31)
    assert labeling.next_case(demo_engine, SAM, now=later, exclude=[]) == first


def test_skip_gives_the_case_back(demo_engine: Engine) -> None:
    first = labeling.next_case(demo_engine, INES)
    assert first is not None
    labeling.release(demo_engine, INES, first)
    assert labeling.next_case(demo_engine, INES, exclude=[first]) != first


def test_blind_until_i_submit(demo_engine: Engine, tax: Taxonomy) -> None:
    case = labeling.next_case(demo_engine, INES)
    assert case is not None
    labeling.submit(demo_engine, TOM, case, ABSTAIN, None, tax)
    assert labeling.visible_labels(demo_engine, INES, case) is None
    assert labeling.visible_labels(demo_engine, RAVI, case) is not None  # adjudicator
    labeling.submit(demo_engine, INES, case, ANSWER, None, tax)
    seen = labeling.visible_labels(demo_engine, INES, case)
    assert seen is not None and {v.annotator for v in seen} == {INES.email, TOM.email}


def test_edits_are_appended_and_stale_edits_refused(demo_engine: Engine, tax: Taxonomy) -> None:
    case = labeling.next_case(demo_engine, INES)
    assert case is not None
    first = labeling.submit(demo_engine, INES, case, ANSWER, None, tax)
    second = labeling.submit(demo_engine, INES, case, ABSTAIN, first.id, tax)
    assert second.replaces_id == first.id
    with pytest.raises(StaleWriteError, match="nothing was saved"):
        labeling.submit(demo_engine, INES, case, ANSWER, first.id, tax)  # other tab
    with pytest.raises(StaleWriteError):
        labeling.submit(demo_engine, INES, case, ANSWER, None, tax)
    hist = labeling.history(demo_engine, case)
    assert [h.decision for h in hist] == ["answer", "abstain"]
    mine = labeling.my_label(demo_engine, INES, case)
    assert mine is not None and mine.decision == "abstain"


def test_label_validation(demo_engine: Engine, tax: Taxonomy) -> None:
    case = labeling.next_case(demo_engine, INES)
    assert case is not None
    with pytest.raises(InputError, match="needs at least one reason code"):
        labeling.submit(demo_engine, INES, case, labeling.LabelIn("abstain"), None, tax)
    with pytest.raises(InputError, match="not one of"):
        labeling.submit(demo_engine, INES, case, labeling.LabelIn("refuse"), None, tax)
    with pytest.raises(InputError, match="unknown claim"):
        labeling.submit(
            demo_engine,
            INES,
            case,
            labeling.LabelIn("answer", claim_verdicts=({"claim": 7, "verdict": "supported"},)),
            None,
            tax,
        )
    with pytest.raises(PermissionDenied):
        labeling.submit(demo_engine, make_actor("compliance"), case, ANSWER, None, tax)


def test_simultaneous_submissions_by_different_annotators_both_land(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    case = labeling.next_case(demo_engine, INES)
    assert case is not None
    people = [make_actor("annotator", f"a{i}@example.org") for i in range(6)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(people))

    def go(who: Actor) -> None:
        barrier.wait()
        try:
            labeling.submit(demo_engine, who, case, ANSWER, None, tax)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(p,)) for p in people]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(labeling.current_labels(demo_engine, case)) == len(people)


def test_disagreements_go_to_adjudication_and_gold_is_kept(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    case = labeling.next_case(demo_engine, INES)
    assert case is not None
    labeling.submit(demo_engine, INES, case, ANSWER, None, tax)
    labeling.submit(demo_engine, TOM, case, ABSTAIN, None, tax)
    queue = labeling.disagreements(demo_engine)
    assert case in [c for c, _, _ in queue]
    with pytest.raises(PermissionDenied):
        labeling.adjudicate(demo_engine, INES, case, "answer", [], "mine", tax)
    with pytest.raises(InputError, match="note is required"):
        labeling.adjudicate(demo_engine, RAVI, case, "answer", [], " ", tax)
    labeling.adjudicate(
        demo_engine,
        RAVI,
        case,
        "abstain",
        ["no_answer_bearing_evidence"],
        "Clause 2.1 was removed in this variant.",
        tax,
    )
    assert case not in [c for c, _, _ in labeling.disagreements(demo_engine)]
    labeling.adjudicate(
        demo_engine,
        RAVI,
        case,
        "abstain",
        ["no_answer_bearing_evidence", "required_claim_not_covered"],
        "Added the claim code.",
        tax,
    )
    gold = labeling.gold_history(demo_engine, case)
    assert len(gold) == 2 and gold[-1].reason_codes[-1] == "required_claim_not_covered"


def test_progress_counts(demo_engine: Engine, tax: Taxonomy) -> None:
    before = labeling.progress(demo_engine, INES)
    case = labeling.next_case(demo_engine, INES)
    assert case is not None
    assert labeling.progress(demo_engine, INES).held_by_me == 1
    labeling.submit(demo_engine, INES, case, ANSWER, None, tax)
    labeling.submit(demo_engine, TOM, case, ANSWER, None, tax)
    after = labeling.progress(demo_engine, INES)
    assert after.mine == before.mine + 1
    assert after.complete_cases == before.complete_cases + 1
    assert after.held_by_me == 0


def test_settings_are_version_checked(demo_engine: Engine, admin: Actor) -> None:
    cfg = labeling.get_settings(demo_engine)
    labeling.set_settings(demo_engine, admin, 3, 10, cfg.version)
    assert labeling.get_settings(demo_engine).overlap == 3
    with pytest.raises(StaleWriteError):
        labeling.set_settings(demo_engine, admin, 2, 10, cfg.version)
    with pytest.raises(InputError):
        labeling.set_settings(demo_engine, admin, 0, 10, cfg.version + 1)


def _reference_disagreements(engine: Engine) -> list[tuple[int, str, int]]:
    """The rule computed the plain way, from every current label in pandas."""
    from sqlalchemy import func, select

    from storage.db import read_session

    df = labeling.labels_frame(engine)
    df["reasons"] = [tuple(sorted(r or [])) for r in df["reason_codes"]]
    g = df.groupby("case_id").agg(
        key=("key", "first"),
        n=("annotator", "count"),
        d=("decision", "nunique"),
        r=("reasons", "nunique"),
    )
    split = g[(g["n"] >= 2) & ((g["d"] > 1) | (g["r"] > 1))]
    with read_session(engine) as s:
        last = dict(
            s.execute(
                select(Label.case_id, func.max(Label.created_at)).group_by(Label.case_id)
            ).all()
        )
        gold = dict(
            s.execute(
                select(Adjudication.case_id, func.max(Adjudication.created_at)).group_by(
                    Adjudication.case_id
                )
            ).all()
        )
    return [
        (int(c), str(split.loc[c, "key"]), int(split.loc[c, "n"]))
        for c in split.index
        if gold.get(c) is None or gold[c] < last[c]
    ]


def test_disagreements_in_sql_match_the_rule_on_every_label(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    codes = [c for c in tax.reason_codes][:2]
    made: list[int] = []
    for _ in range(4):
        case = labeling.next_case(demo_engine, INES, exclude=made)
        assert case is not None and case not in made
        made.append(case)
    same_order, other_order, other_set, revised = made
    # the same codes in another order: agreement, not a disagreement
    labeling.submit(
        demo_engine, INES, same_order, labeling.LabelIn("abstain", (codes[0], codes[1])), None, tax
    )
    labeling.submit(
        demo_engine, TOM, same_order, labeling.LabelIn("abstain", (codes[1], codes[0])), None, tax
    )
    # same decision, different code sets: a disagreement
    labeling.submit(
        demo_engine, INES, other_set, labeling.LabelIn("abstain", (codes[0],)), None, tax
    )
    labeling.submit(
        demo_engine, TOM, other_set, labeling.LabelIn("abstain", (codes[0], codes[1])), None, tax
    )
    # different decisions
    labeling.submit(demo_engine, INES, other_order, ANSWER, None, tax)
    labeling.submit(demo_engine, TOM, other_order, ABSTAIN, None, tax)
    # disagree, then Tom revises his label to agree: only the current label counts
    labeling.submit(demo_engine, INES, revised, ANSWER, None, tax)
    first = labeling.submit(demo_engine, TOM, revised, ABSTAIN, None, tax)
    labeling.submit(demo_engine, TOM, revised, ANSWER, first.id, tax)

    got = labeling.disagreements(demo_engine, limit=10_000)
    listed = [c for c, _, _ in got]
    assert same_order not in listed and revised not in listed
    assert other_set in listed and other_order in listed
    assert got == _reference_disagreements(demo_engine)
    assert labeling.disagreements(demo_engine, limit=3) == got[:3]
    # gold settles a case until a newer label arrives
    labeling.adjudicate(demo_engine, RAVI, other_set, "abstain", [codes[0]], "codes agreed", tax)
    assert other_set not in [c for c, _, _ in labeling.disagreements(demo_engine, limit=10_000)]
    labeling.submit(
        demo_engine, SAM, other_set, labeling.LabelIn("abstain", (codes[1],)), None, tax
    )
    assert other_set in [c for c, _, _ in labeling.disagreements(demo_engine, limit=10_000)]
    assert labeling.disagreements(demo_engine, limit=10_000) == _reference_disagreements(
        demo_engine
    )


def test_disagreements_page_through_settled_and_revised_cases(any_engine: Engine) -> None:
    """More disagreeing cases than a page of candidates holds, with revised labels, code
    lists in another order and adjudications before and after the newest label: every limit
    gives the first cases of the plain rule, on both databases."""
    rng = random.Random(4)
    emails = ["ines@example.org", "tom@example.org", "sam@example.org"]

    def work(s: Any) -> None:
        t0 = utcnow() - dt.timedelta(days=3)
        for i in range(260):
            case = Case(
                key=f"PAGE-{i:03d}",
                question=f"question {i}",
                identity_name="anyone",
                expected_decision="answer",
                category="in_scope",
                split="dev",
                status="ready",
            )
            s.add(case)
            s.flush()
            for j, who in enumerate(rng.sample(emails, rng.choice([1, 2, 2, 3]))):
                for rev in range(rng.choice([1, 1, 2])):  # a revision is a newer row
                    s.add(
                        Label(
                            case_id=case.id,
                            annotator=who,
                            decision=rng.choice(["answer", "abstain"]),
                            reason_codes=rng.sample(["a", "b", "c"], rng.randint(0, 2)),
                            created_at=t0 + dt.timedelta(minutes=10 * i + 3 * j + rev),
                        )
                    )
            if rng.random() < 0.3:  # before the newest label (open) or after it (settled)
                s.add(
                    Adjudication(
                        case_id=case.id,
                        adjudicator="ravi@example.org",
                        decision="answer",
                        reason_codes=[],
                        created_at=t0 + dt.timedelta(minutes=10 * i + rng.choice([1, 9])),
                    )
                )

    run_write(any_engine, work)
    ref = _reference_disagreements(any_engine)
    assert len(ref) > 110
    for limit in (1, 7, 100, 101, 150, len(ref), 10_000):
        assert labeling.disagreements(any_engine, limit=limit) == ref[:limit], limit


def test_a_deep_link_follows_the_queue_rules(demo_engine: Engine, tax: Taxonomy) -> None:
    """Opening a case by its link holds it like the queue does: not while someone else
    holds it, not once it has its labels; my own labeled case opens to edit my label."""
    case = labeling.next_case(demo_engine, INES)  # Ines holds it now
    assert case is not None
    with pytest.raises(InputError, match=r"ines@example\.org is labeling this case"):
        labeling.reserve(demo_engine, TOM, case)
    labeling.submit(demo_engine, INES, case, ANSWER, None, tax)
    labeling.reserve(demo_engine, TOM, case)  # free again after Ines saved
    labeling.submit(demo_engine, TOM, case, ABSTAIN, None, tax)
    overlap = labeling.get_settings(demo_engine).overlap
    assert overlap == 2
    with pytest.raises(InputError, match="already has the 2 labels it needs"):
        labeling.reserve(demo_engine, SAM, case)
    labeling.reserve(demo_engine, INES, case)  # my own label: opens for editing
    with pytest.raises(InputError, match="does not exist"):
        labeling.reserve(demo_engine, SAM, 10**9)


def test_an_adjudicator_who_may_still_label_a_case_does_not_see_its_labels(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    """Blind labeling holds for a reviewer who is also an annotator: with overlap 3, a case
    with two disagreeing labels is in the adjudication queue, but to someone who may still
    give the third label its labels stay hidden and adjudicating it is refused."""
    from review.core.identity import Role

    admin = make_actor("admin")
    cfg = labeling.get_settings(demo_engine)
    labeling.set_settings(demo_engine, admin, 3, cfg.reservation_minutes, cfg.version)
    both = make_actor("reviewer", "both@example.org")
    both = type(both)(**{**both.__dict__, "roles": frozenset({Role.reviewer, Role.annotator})})
    from sqlalchemy import exists, select

    from review.core import clearance
    from storage.db import read_session
    from storage.models import Case, Label

    with read_session(demo_engine) as s:  # a ready case nobody has labeled yet, readable
        unlabeled = list(
            s.scalars(
                select(Case.id)
                .where(Case.status == "ready", ~exists().where(Label.case_id == Case.id))
                .order_by(Case.id)
            )
        )
        hidden = clearance.restricted_cases(s, unlabeled)
    case = next((c for c in unlabeled if c not in hidden), None)
    assert case is not None
    labeling.submit(demo_engine, INES, case, ANSWER, None, tax)
    labeling.submit(demo_engine, TOM, case, ABSTAIN, None, tax)
    assert case in [c for c, _, _ in labeling.disagreements(demo_engine, limit=10_000)]
    assert labeling.still_blind(demo_engine, both, case)
    assert labeling.visible_labels(demo_engine, both, case) is None
    with pytest.raises(PermissionDenied, match="label it first"):
        labeling.adjudicate(demo_engine, both, case, "answer", [], "looks answerable", tax)
    # a reviewer who does not label sees them and may adjudicate
    assert labeling.visible_labels(demo_engine, RAVI, case) is not None
    # once the blind annotator has labeled, the labels show
    labeling.submit(demo_engine, both, case, ANSWER, None, tax)
    assert not labeling.still_blind(demo_engine, both, case)
    assert labeling.visible_labels(demo_engine, both, case) is not None
    # ... but a reviewer does not adjudicate a case they labeled (review/labels/adjudication)
    with pytest.raises(PermissionDenied, match="you labeled this case"):
        labeling.adjudicate(demo_engine, both, case, "answer", [], "two of three answer", tax)
