"""Importing labels made in another tool: all or nothing, idempotent, the history kept, and the
agreed label and the Agreement rollup moving with the labels as for labels made here."""

from __future__ import annotations

import datetime as dt
import math
import uuid
from collections.abc import Iterable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, exists, func, select, true

from review.admin import users as user_admin
from review.cases.agreed import agreed_labels
from review.core import database
from review.core.errors import InputError, PermissionDenied
from review.core.identity import SYSTEM, Actor
from review.core.taxonomy import Taxonomy
from review.labels import agreement_rollup, imports, labeling
from review.labels.external import ExternalLabel, Skipped
from storage.db import read_session
from storage.models import Case, Label, LabelImport
from tests.helpers.actors import make_actor
from tests.helpers.labeling import add_cases

RAVI = make_actor("reviewer", "ravi.menon@brightwave.example")
INES_HERE = make_actor("annotator", "ines.duarte@brightwave.example")
USERS = {"17": "ines.duarte@brightwave.example", "tom@ls.example": "tom.becker@brightwave.example"}
WHEN = dt.datetime(2026, 11, 30, 9, 0, tzinfo=dt.UTC)


def ready_keys(engine: Engine, n: int, unlabeled_only: bool = True) -> list[str]:
    """Ready cases (nobody has labeled yet, unless told)."""
    with read_session(engine) as s:
        unlabeled = ~exists().where(Label.case_id == Case.id) if unlabeled_only else true()
        return list(
            s.scalars(
                select(Case.key).where(Case.status == "ready", unlabeled).order_by(Case.id).limit(n)
            )
        )


def rec(
    ref: str, key: str, user: str = "17", decision: str = "answer", **kw: object
) -> ExternalLabel:
    return ExternalLabel(
        tool="label-studio",
        where=f"task {key}, annotation {ref}",
        ref=ref,
        case_key=key,
        user=user,
        decision=decision,
        **kw,  # type: ignore[arg-type]
    )


class Source:
    """A file of records, opened afresh on each call, as a reader over a real file is."""

    def __init__(self, records: Iterable[ExternalLabel], passed_over: int = 0) -> None:
        self.records = list(records)
        self.passed_over = passed_over
        self.opened = 0

    def __call__(self, skipped: Skipped) -> Iterator[ExternalLabel]:
        self.opened += 1
        if self.passed_over:
            skipped.add("cancelled", self.passed_over)
        yield from self.records


def run(
    engine: Engine,
    tax: Taxonomy,
    records: Iterable[ExternalLabel],
    users: dict[str, str] = USERS,
    actor: Actor = RAVI,
) -> imports.ImportReport:
    return database.write(
        engine,
        lambda s: imports.import_labels(
            s,
            actor,
            "label-studio",
            Source(records),
            users,
            tax,
            file_name="export.json",
            sha256="0" * 64,
        ),
    )


def label_rows(engine: Engine) -> int:
    with read_session(engine) as s:
        return int(s.scalar(select(func.count(Label.id))) or 0)


def rollup_matches(engine: Engine) -> bool:
    with read_session(engine) as s:
        return (
            agreement_rollup.stored_counts(s).nonzero()
            == agreement_rollup.reference_counts(s).nonzero()
        )


def test_labels_land_with_their_source_and_the_agreed_label_moves(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    k1, k2 = ready_keys(demo_engine, 2)
    codes = ("no_answer_bearing_evidence",)
    report = run(
        demo_engine,
        tax,
        [
            rec("1", k1, "17", "abstain", reason_codes=codes, labeled_at=WHEN, lead_seconds=12.5),
            rec("2", k1, "tom@ls.example", "abstain", reason_codes=codes, note=" same "),
            rec("3", k2, "17", "answer"),
        ],
    )
    assert (report.added, report.changed, report.unchanged) == (3, 0, 0)
    assert report.cases == 2
    assert report.annotators == tuple(sorted(set(USERS.values())))
    with read_session(demo_engine) as s:
        row = s.scalars(select(Label).where(Label.source_ref == "1")).one()
        assert (row.source, row.import_id, row.lead_seconds) == (
            "label-studio",
            report.import_id,
            12.5,
        )
        assert row.labeled_at == WHEN
        assert row.annotator == "ines.duarte@brightwave.example"
        note = s.scalars(select(Label.rationale).where(Label.source_ref == "2")).one()
        assert note == "same"
        case_id = s.scalar(select(Case.id).where(Case.key == k1))
        imp = s.get(LabelImport, report.import_id)
        assert imp is not None and imp.added == 3 and imp.users == USERS
    assert case_id is not None
    with read_session(demo_engine) as s:
        agreed = agreed_labels(s, [case_id])[case_id]
    assert agreed.decision == "abstain" and agreed.by == "annotators"
    assert rollup_matches(demo_engine)


def test_the_same_file_again_adds_nothing_and_a_changed_annotation_is_a_new_label(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    (k1,) = ready_keys(demo_engine, 1)
    run(demo_engine, tax, [rec("1", k1)])
    n = label_rows(demo_engine)
    again = run(demo_engine, tax, [rec("1", k1)])
    assert (again.added, again.changed, again.unchanged, again.import_id) == (0, 0, 1, None)
    assert label_rows(demo_engine) == n
    codes = ("no_answer_bearing_evidence",)
    changed = run(demo_engine, tax, [rec("1", k1, decision="abstain", reason_codes=codes)])
    assert (changed.added, changed.changed) == (0, 1)
    with read_session(demo_engine) as s:
        rows = s.scalars(select(Label).where(Label.source_ref == "1").order_by(Label.id)).all()
        assert [r.decision for r in rows] == ["answer", "abstain"]  # the old one kept
        assert rows[1].replaces_id == rows[0].id
        assert s.scalar(select(func.count(LabelImport.id))) == 2  # the no-op left no import
    assert rollup_matches(demo_engine)


def test_one_annotator_labelling_a_case_three_times_in_one_file_is_a_chain_in_file_order(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    """A tool can hold several annotations of one task by one person: each replaces the one
    before it in the file, the last is the current label, and the labels of other cases
    and people in between are written once each (the import writes a batch in rounds)."""
    k1, k2 = ready_keys(demo_engine, 2)
    codes = ("no_answer_bearing_evidence",)
    report = run(
        demo_engine,
        tax,
        [
            rec("a", k1, "17", "answer"),
            rec("b", k2, "17", "answer"),
            rec("c", k1, "17", "abstain", reason_codes=codes),
            rec("d", k1, "tom@ls.example", "answer"),
            rec("e", k1, "17", "clarify", reason_codes=codes),
        ],
    )
    assert (report.added, report.changed, report.cases) == (5, 0, 2)
    with read_session(demo_engine) as s:
        rows = {
            r.source_ref: r
            for r in s.scalars(select(Label).where(Label.import_id == report.import_id))
        }
        case_id = s.scalar(select(Case.id).where(Case.key == k1))
        assert case_id is not None
        agreed = agreed_labels(s, [case_id])
    assert rows["a"].replaces_id is None and rows["b"].replaces_id is None
    assert rows["c"].replaces_id == rows["a"].id
    assert rows["e"].replaces_id == rows["c"].id
    assert rows["d"].replaces_id is None
    assert rows["a"].id < rows["c"].id < rows["e"].id
    # ines's current label is "clarify" (not the "abstain" she replaced), tom's "answer":
    # the two disagree, so the case has no agreed label
    assert case_id not in agreed
    assert rollup_matches(demo_engine)


def test_an_imported_label_replaces_the_annotators_label_made_here(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    case_id = labeling.next_case(demo_engine, INES_HERE)
    assert case_id is not None
    mine = labeling.submit(demo_engine, INES_HERE, case_id, labeling.LabelIn("answer"), None, tax)
    with read_session(demo_engine) as s:
        key = s.scalar(select(Case.key).where(Case.id == case_id))
    assert key is not None
    codes = ("no_answer_bearing_evidence",)
    run(demo_engine, tax, [rec("9", key, decision="abstain", reason_codes=codes)])
    current = labeling.my_label(demo_engine, INES_HERE, case_id)
    assert current is not None and current.decision == "abstain"
    assert current.replaces_id == mine.id
    assert rollup_matches(demo_engine)


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (rec("2", "NO-SUCH-CASE"), "field case key"),
        (rec("2", "{k}", user="someone else"), "field user"),
        (rec("2", "{k}", decision="maybe"), "field decision"),
        (rec("2", "{k}", decision="abstain"), "field reason codes"),
        (rec("2", "{k}", decision="abstain", reason_codes=("nope",)), "field reason codes"),
        (rec("2", "{k}", lead_seconds=math.nan), "field lead time"),
        (rec("2", "{k}", lead_seconds=-1.0), "field lead time"),
        (rec("1", "{k}"), "appears twice"),
        (rec("", "{k}"), "field id"),
        (rec("2", "{k}", labeled_at=dt.datetime(2026, 1, 1)), "field time"),
    ],
)
def test_one_bad_record_writes_nothing_and_names_record_and_field(
    demo_engine: Engine, tax: Taxonomy, bad: ExternalLabel, field: str
) -> None:
    k1, k2 = ready_keys(demo_engine, 2)
    bad = ExternalLabel(**{**bad.__dict__, "case_key": bad.case_key.replace("{k}", k2)})
    before = label_rows(demo_engine)
    # good records come first: still nothing written
    records = [rec("1", k1), rec("100", k1, user="tom@ls.example"), bad]
    with pytest.raises(InputError) as err:
        run(demo_engine, tax, records)
    assert field in str(err.value)
    assert bad.where in str(err.value) or field == "field id"
    assert label_rows(demo_engine) == before
    with read_session(demo_engine) as s:
        assert s.scalar(select(func.count(LabelImport.id))) == 0


def test_a_bad_record_past_the_first_batch_still_writes_nothing(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    keys = ready_keys(demo_engine, 4)
    good = [
        rec(str(i), keys[i % 4], user="17" if i % 2 else "tom@ls.example")
        for i in range(imports.BATCH + 5)
    ]
    before = label_rows(demo_engine)
    with pytest.raises(InputError, match="field decision"):
        run(demo_engine, tax, [*good, rec("last", keys[0], decision="nonsense")])
    assert label_rows(demo_engine) == before


@pytest.mark.parametrize(
    ("users", "match"),
    [
        ({}, "user mapping is required"),
        (
            {"17": "nobody@brightwave.example", "tom@ls.example": "tom.becker@brightwave.example"},
            "not a workbench user",
        ),
        (
            {
                "17": "paula.kim@brightwave.example",
                "tom@ls.example": "tom.becker@brightwave.example",
            },
            "no role that labels",
        ),
    ],
)
def test_the_user_mapping_is_required_and_checked(
    demo_engine: Engine, tax: Taxonomy, users: dict[str, str], match: str
) -> None:
    (k1,) = ready_keys(demo_engine, 1)
    with pytest.raises(InputError, match=match):
        run(demo_engine, tax, [rec("1", k1)], users=users)


def test_an_annotation_moved_to_another_case_or_user_is_refused(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    k1, k2 = ready_keys(demo_engine, 2)
    run(demo_engine, tax, [rec("1", k1)])
    with pytest.raises(InputError, match="another case"):
        run(demo_engine, tax, [rec("1", k2)])
    with pytest.raises(InputError, match="imported before as"):
        run(demo_engine, tax, [rec("1", k1, user="tom@ls.example")])


def test_only_those_who_may_exchange_labels_import(demo_engine: Engine, tax: Taxonomy) -> None:
    (k1,) = ready_keys(demo_engine, 1)
    with pytest.raises(PermissionDenied):
        run(demo_engine, tax, [rec("1", k1)], actor=INES_HERE)


def test_answer_with_reason_codes_keeps_none_and_counts_it(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    (k1,) = ready_keys(demo_engine, 1)
    r = run(demo_engine, tax, [rec("1", k1, reason_codes=("no_answer_bearing_evidence",))])
    assert r.reasons_dropped == 1
    with read_session(demo_engine) as s:
        assert s.scalars(select(Label.reason_codes).where(Label.source_ref == "1")).one() == []


def test_user_map_text() -> None:
    assert imports.parse_user_map("# map\n17 = a@x.org\ntom@ls.example, b@x.org\n\n") == {
        "17": "a@x.org",
        "tom@ls.example": "b@x.org",
    }
    with pytest.raises(InputError, match="line 2"):
        imports.parse_user_map("17=a@x.org\njust a name\n")
    with pytest.raises(InputError, match="mapped twice"):
        imports.parse_user_map("17=a@x.org\n17=b@x.org\n")


def test_suggested_users_are_labeling_users_with_that_email(demo_engine: Engine) -> None:
    got = imports.suggested_users(
        demo_engine, ["INES.DUARTE@brightwave.example", "paula.kim@brightwave.example", "17"]
    )
    assert got == {"INES.DUARTE@brightwave.example": "ines.duarte@brightwave.example"}


DECISIONS = st.sampled_from(["answer", "abstain", "clarify", "partial", "escalate"])


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    plan=st.lists(
        st.tuples(st.integers(0, 3), st.sampled_from(sorted(USERS)), DECISIONS, st.integers(0, 5)),
        min_size=1,
        max_size=12,
    )
)
def test_any_sequence_of_imports_keeps_the_rollup_and_agreed_labels_true(
    demo_engine: Engine, tax: Taxonomy, plan: list[tuple[int, str, str, int]]
) -> None:
    keys = ready_keys(demo_engine, 4, unlabeled_only=False)  # labeled by the demo, too
    codes = ("no_answer_bearing_evidence",)
    refs: dict[str, tuple[int, str]] = {}
    tag = uuid.uuid4().hex[:8]  # the database outlives one example: refs of this one only
    for i, (k, user, decision, ref) in enumerate(plan):
        r = f"{tag}-{ref}"
        if r in refs and refs[r] != (k, user):
            continue  # a ref keeps its case and annotator (refused otherwise, tested above)
        refs[r] = (k, user)
        reasons = () if tax.decisions[decision].answers else codes
        run(demo_engine, tax, [rec(r, keys[k], user, decision, reason_codes=reasons, note=str(i))])
    assert rollup_matches(demo_engine)
    with read_session(demo_engine) as s:
        stored = dict(
            s.execute(
                select(Label.source_ref, func.count())
                .where(Label.source == "label-studio")
                .group_by(Label.source_ref)
            ).all()
        )
    assert {r for r in stored if str(r).startswith(tag)} == set(refs)


def test_on_both_databases_an_import_keeps_the_rollup_in_step(
    any_engine: Engine, tax: Taxonomy
) -> None:
    for email in USERS.values():
        user_admin.add_user(any_engine, SYSTEM, email, email.split("@")[0], ["annotator"], False)
    ids = add_cases(any_engine, 600, tax, "EXT", grouped=True)
    assert len(ids) == 600
    codes = ("no_answer_bearing_evidence",)
    records = [
        rec(
            f"{k}-{u}",
            f"EXT-{k:03d}",
            u,
            "abstain" if (k + len(u)) % 3 else "answer",
            reason_codes=codes if (k + len(u)) % 3 else (),
        )
        for k in range(600)
        for u in sorted(USERS)
    ]  # 1,200 records: two batches
    report = run(any_engine, tax, records)
    assert (report.added, report.cases) == (1200, 600)
    assert rollup_matches(any_engine)
    assert run(any_engine, tax, records).written == 0
    with read_session(any_engine) as s:
        assert s.scalar(select(func.count(Label.id))) == 1200
