"""The Agreement page's stored figures in every scope (the rollup and the figures per slice and
per category, agreement_group_values and agreement_group_annotators, for every label and for
the labels of each slice, category, source and import: issue 33) are always what the rule
computed from the current labels and the cases' groups gives
(review.cases.agreement_counts.reference_counts): after every label, revision, label import,
case edit that moves a labelled case between slices and categories, and case created, made
through the services; after a bulk load and a rebuild; after the migrations' backfills. The
report reads them while they are stamped right, for the unfiltered view and each view of one
filter, and equals the pandas reference; a slice or category written past the case service, or
a missing stamp, makes it count from the labels again until a rebuild. On SQLite and on
PostgreSQL."""

from __future__ import annotations

import random
import re
import threading
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
from alembic import command
from sqlalchemy import Engine, delete, insert, select, update

from review.admin import users
from review.cases import agreement_counts, agreement_groups, cases
from review.cases.agreement_counts import RollupCounts
from review.core import database
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy
from review.corpus import corpus
from review.corpus.docformat import parse_markdown
from review.labels import imports, labeling
from review.labels.agreement import agreement_report
from review.labels.agreement_rollup import rebuild_rollup
from review.labels.agreement_sql import agreement_report_sql
from review.labels.external import ExternalLabel, Skipped
from storage.db import alembic_config, make_engine, migrate, read_session, write_session
from storage.models import Case, CaseSlice, Counter, Label
from tests.helpers.actors import make_actor
from tests.helpers.agreement import assert_same, sent_statements
from tests.helpers.corpus import GOOD
from tests.helpers.transact import write

ANNOTATORS = [
    make_actor("annotator", email, uid=80 + i)
    for i, email in enumerate(
        ["zoe@groups.example", "Adam@groups.example", "émile@groups.example", "bo@groups.example"]
    )
]


def case_in(tax: Taxonomy, key: str, category: str, slices: list[str], notes: str) -> Any:
    return cases.CaseIn.model_validate(
        {
            "key": key,
            "question": f"How long is the refund window ({key})?",
            "required_claims": ["Monthly plans have a 14-day refund window."],
            "identity": {"name": "customer-eu", "scopes": ["public"]},
            "documents": [
                {"doc_id": "POL-REFUND", "version": 2, "visibility": "visible", "role": "decisive"}
            ],
            "expected_decision": "answer",
            "reason_codes": [],
            "category": category,
            "slices": slices,
            "split": "test",
            "family": None,
            "evidence_state": None,
            "status": "ready",
            "notes": notes,  # any category may then expect "answer"
        }
    )


def random_groups(rng: random.Random, tax: Taxonomy) -> tuple[str, list[str]]:
    categories, slices = sorted(tax.categories), sorted(tax.slices)
    return rng.choice(categories[:3]), sorted(rng.sample(slices[:4], rng.randint(0, 2)))


#: the label-studio users of the imports in the history, mapped to two of the annotators
TOOL_USERS = {"17": ANNOTATORS[0].email, "tom@ls.example": ANNOTATORS[3].email}


def assert_in_step(engine: Engine) -> RollupCounts:
    with read_session(engine) as s:
        ref = agreement_counts.reference_counts(s).nonzero()
        got = agreement_counts.stored_counts(s)
        stamp, now = s.execute(select(*agreement_groups.stamp_columns())).one()
    assert got == ref
    assert stamp == now
    return ref


@pytest.fixture
def statements(any_engine: Engine) -> Iterator[list[str]]:
    with sent_statements(any_engine) as seen:
        yield seen


def read_table(seen: list[str], table: str) -> bool:
    return any(re.search(rf"FROM {table}\b", s) for s in seen)


def views(engine: Engine) -> list[dict[str, Any]]:
    """The page's views: unfiltered, each slice, category, source and import of the labelled
    cases alone, and some of their combinations (all stored); a family's."""
    with read_session(engine) as s:
        labelled = select(Label.case_id)
        slices = s.scalars(
            select(CaseSlice.slice).distinct().where(CaseSlice.case_id.in_(labelled))
        ).all()
        categories = sorted(
            s.scalars(select(Case.category).distinct().where(Case.id.in_(labelled)))
        )
        sources = s.scalars(select(Label.source).distinct()).all()
        import_ids = s.scalars(select(Label.import_id).distinct().where(Label.import_id > 0))
        out: list[dict[str, Any]] = [{}]
        out += [{"slice_": x} for x in sorted(slices)]
        out += [{"category": x} for x in sorted(categories)]
        out += [{"source": x} for x in sorted(sources)]
        imported = sorted(int(x) for x in import_ids if x is not None)
        out += [{"import_id": x} for x in imported]
        out += [{"slice_": x, "source": y} for x in sorted(slices)[:2] for y in sorted(sources)]
        out += [{"category": x, "import_id": y} for x in sorted(categories)[:2] for y in imported]
        out += [{"slice_": x, "category": y} for x in sorted(slices)[:1] for y in categories[:2]]
        out += [{"source": "label-studio", "import_id": y} for y in imported[:2]]
        out += [{"source": "workbench", "import_id": y} for y in imported[:1]]  # none
        out += [
            {"slice_": x, "category": y, "source": "label-studio", "import_id": z}
            for x in sorted(slices)[:2]
            for y in categories[:2]
            for z in imported[:1]
        ]
        out += [{"slice_": "no such slice"}, {"source": "no such tool"}]
        out += [{"family": "no such family"}, {"family": "no such family", "source": "workbench"}]
    return out


def assert_reports_equal(engine: Engine, tax: Taxonomy, seen: list[str], *, stored: bool) -> None:
    """Every view equals the pandas reference. With ``stored`` (both stamps right) each view of
    one filter or none reads the stored rows of its scope (rollup and group figures); without
    (the group figures stale) only the unfiltered view and those of a source or an import
    alone read the rollup, and no view reads the group figures."""
    decisions, codes = list(tax.decisions), list(tax.reason_codes)
    frame = labeling.labels_frame(engine)
    for kw in views(engine):
        for group_by in ("slice", "category"):
            seen.clear()
            got = agreement_report_sql(engine, decisions, codes, group_by=group_by, **kw)
            ref = agreement_report(frame, decisions, codes, group_by=group_by, **kw)
            assert_same(got, ref, f"{kw} by {group_by}")
            kept = "family" not in kw  # a family's views are counted (a handful of cases)
            on_cases = {*kw} & {"slice_", "category"}
            assert read_table(seen, "agreement_pairs") is (kept and (stored or not on_cases)), kw
            assert read_table(seen, "agreement_group_values") is (kept and stored), kw


def label_file(s: Any, admin: Actor, records: list[ExternalLabel], tax: Taxonomy) -> object:
    def source(skipped: Skipped) -> Any:
        yield from records

    return imports.import_labels(
        s,
        admin,
        "label-studio",
        source,
        TOOL_USERS,
        tax,
        file_name="export.json",
        sha256="0" * 64,
    )


def history(engine: Engine, tax: Taxonomy, admin: Actor, seed: int, steps: int) -> list[int]:
    """Cases made through the case service, then labels, revisions and case edits (groups
    moved or not) in random order; after each step the stored figures equal the rule's."""
    corpus.import_documents(engine, admin, [parse_markdown(GOOD, "a.md", tax)])
    rng = random.Random(seed)
    ids = []
    for k in range(6):
        category, slices = random_groups(rng, tax)
        ids.append(
            write(
                engine,
                cases.create_case,
                admin,
                case_in(tax, f"GRP-{k}", category, slices, "n"),
                tax,
            )
        )
        assert_in_step(engine)
    keys = [f"GRP-{k}" for k in range(6)]
    for email in sorted(set(TOOL_USERS.values())):
        users.add_user(engine, admin, email, email.split("@")[0], ["annotator"])
    # each case has its own team of one to four annotators: cases end with 1 to 4 labels
    team = {case_id: rng.sample(ANNOTATORS, 1 + k % 4) for k, case_id in enumerate(ids)}
    for step in range(steps):
        case_id = rng.choice(ids)
        view = cases.get_case(engine, case_id=case_id)
        assert view is not None
        chance = rng.random()
        if chance < 0.12:  # a label-studio file: one to three labels, new or replacing
            records = [
                ExternalLabel(
                    tool="label-studio",
                    where=f"step {step}, record {n}",
                    ref=f"s{step}-{n}",
                    case_key=rng.choice(keys),
                    user=rng.choice(sorted(TOOL_USERS)),
                    decision=decision,
                    reason_codes=() if decision == "answer" else (sorted(tax.reason_codes)[1],),
                )
                for n, decision in enumerate(
                    rng.choice(["answer", "abstain"]) for _ in range(rng.randint(1, 3))
                )
            ]
            database.write(engine, partial(label_file, admin=admin, records=records, tax=tax))
        elif chance < 0.35:
            category, slices = random_groups(rng, tax)
            if (category, slices) == (view.category, sorted(view.slices)):
                category, slices = view.category, sorted(view.slices)  # a notes-only edit
            edit = case_in(tax, view.key, category, slices, f"edit {step}")
            write(engine, cases.update_case, admin, case_id, view.version, edit, tax)
        else:
            who = rng.choice(team[case_id])
            mine = labeling.my_label(engine, who, case_id)
            decision = rng.choice(["answer", "abstain", "clarify"])
            codes = () if decision == "answer" else (sorted(tax.reason_codes)[0],)
            labeling.submit(
                engine,
                who,
                case_id,
                labeling.LabelIn(decision, codes),
                mine.id if mine else None,
                tax,
            )
        assert_in_step(engine)
    return ids


def test_labels_and_case_edits_keep_the_group_figures_right(
    any_engine: Engine, tax: Taxonomy, admin: Actor, statements: list[str]
) -> None:
    history(any_engine, tax, admin, seed=11, steps=60)
    got = assert_in_step(any_engine)
    # what the random history is there to exercise: both kinds, several m, several groups,
    # every kind of scope, labels of two sources on one case, a label replaced by an import
    values = got.groups.values
    assert {kind for _, kind, _, _, _ in values} == {"slice", "category"}
    assert len({m for _, _, _, m, _ in values}) >= 3
    assert len({name for _, _, name, _, _ in values}) >= 4
    scopes = {scope.partition(":")[0] for scope, *_ in got.item_values}
    assert scopes == {"", "slice", "category", "source", "import"}
    assert {scope for scope, *_ in got.pairs} >= {"source:workbench", "source:label-studio"}
    assert any(scope.endswith("|source:label-studio") for scope, *_ in got.pairs)
    assert any("|import:" in scope for scope, *_ in got.item_values)
    with read_session(any_engine) as s:
        replaced = s.scalars(
            select(Label.source).where(Label.id.in_(select(Label.replaces_id)))
        ).all()
    assert {"workbench", "label-studio"} <= set(replaced)
    assert_reports_equal(any_engine, tax, statements, stored=True)


def test_a_label_moves_the_figures_of_each_of_its_cases_groups(
    any_engine: Engine, tax: Taxonomy, admin: Actor
) -> None:
    corpus.import_documents(any_engine, admin, [parse_markdown(GOOD, "a.md", tax)])
    slices = sorted(tax.slices)[:2]
    category = sorted(tax.categories)[0]
    case_id = write(
        any_engine, cases.create_case, admin, case_in(tax, "ONE", category, slices, "n"), tax
    )
    a, b = ANNOTATORS[0], ANNOTATORS[1]
    labeling.submit(any_engine, a, case_id, labeling.LabelIn("answer"), None, tax)
    code = sorted(tax.reason_codes)[0]
    labeling.submit(any_engine, b, case_id, labeling.LabelIn("abstain", (code,)), None, tax)
    got = assert_in_step(any_engine).groups
    groups = [("category", category), *[("slice", sl) for sl in slices]]
    # the same figures in every scope of the case: every label, each of its groups, the source
    on_cases = ["", *[f"{kind}:{name}" for kind, name in groups]]
    on_cases += [f"slice:{sl}|category:{category}" for sl in slices]
    scopes = [*on_cases, *[f"{x}|source:workbench".lstrip("|") for x in on_cases]]
    assert got.values == {
        (scope, kind, name, 2, d): (1, 1)
        for scope in scopes
        for kind, name in groups
        for d in ("answer", "abstain")
    }
    assert got.annotators == {
        (scope, kind, name, who.email): (1,)
        for scope in scopes
        for kind, name in groups
        for who in (a, b)
    }
    # the case leaves its slices and changes category: its figures move with it
    view = cases.get_case(any_engine, case_id=case_id)
    assert view is not None
    other = sorted(tax.categories)[1]
    edit = case_in(tax, "ONE", other, [], "moved")
    write(any_engine, cases.update_case, admin, case_id, view.version, edit, tax)
    moved = assert_in_step(any_engine)
    scopes = ["", f"category:{other}", "source:workbench", f"category:{other}|source:workbench"]
    assert moved.groups.values == {
        (scope, "category", other, 2, d): (1, 1) for scope in scopes for d in ("answer", "abstain")
    }
    assert {scope for scope, *_ in moved.pairs} == set(scopes)


@pytest.mark.parametrize("past", ["slice", "category", "stamp"])
def test_a_group_written_past_the_case_service_is_counted_until_a_rebuild(
    any_engine: Engine, tax: Taxonomy, admin: Actor, statements: list[str], past: str
) -> None:
    ids = history(any_engine, tax, admin, seed=4, steps=30)
    assert_reports_equal(any_engine, tax, statements, stored=True)
    with write_session(any_engine) as s:
        if past == "slice":  # a labelled case joins a slice it was not in
            have = set(s.scalars(select(CaseSlice.slice).where(CaseSlice.case_id == ids[0])))
            new = sorted(set(tax.slices) - have)[0]
            s.execute(insert(CaseSlice).values(case_id=ids[0], slice=new))
        elif past == "category":
            s.execute(update(Case).where(Case.id == ids[0]).values(category="zz_bulk"))
        else:  # the stamp row is gone
            s.execute(delete(Counter).where(Counter.name == agreement_groups.STAMP))
    assert_reports_equal(any_engine, tax, statements, stored=False)
    # an edit through the service does not stamp figures that were already behind
    view = cases.get_case(any_engine, case_id=ids[1])
    assert view is not None
    edit = case_in(tax, view.key, view.category, sorted(view.slices), "after the bulk write")
    write(any_engine, cases.update_case, admin, ids[1], view.version, edit, tax)
    assert_reports_equal(any_engine, tax, statements, stored=False)
    with write_session(any_engine) as s:
        rebuild_rollup(s)
    assert_in_step(any_engine)
    assert_reports_equal(any_engine, tax, statements, stored=True)


def test_the_migration_fills_the_tables_as_the_rule_does(
    any_engine: Engine, tax: Taxonomy, admin: Actor
) -> None:
    history(any_engine, tax, admin, seed=5, steps=30)
    before = assert_in_step(any_engine)
    cfg = alembic_config(any_engine)
    command.downgrade(cfg, "0038")
    command.upgrade(cfg, "head")
    assert assert_in_step(any_engine) == before


def test_concurrent_labels_and_case_edits_on_postgresql_stay_in_step(
    pg_url: str, tax: Taxonomy, admin: Actor
) -> None:
    """Two writers at once on PostgreSQL: each moves three cases between slices and
    categories while labelling the other's three (a label and an edit of the same case, and
    the shared group rows, meet): no error, and the stored figures equal the rule's."""
    engine = make_engine(pg_url)
    migrate(engine)
    try:
        ids = history(engine, tax, admin, seed=2, steps=0)
        halves = [ids[:3], ids[3:]]
        errors: list[BaseException] = []
        decisions = [("answer", ()), ("clarify", (sorted(tax.reason_codes)[0],))]

        def worker(n: int) -> None:
            rng = random.Random(n)
            mine, theirs = halves[n], halves[1 - n]
            try:
                for step in range(12):
                    case_id = rng.choice(mine)
                    view = cases.get_case(engine, case_id=case_id)
                    assert view is not None
                    category, slices = random_groups(rng, tax)
                    edit = case_in(tax, view.key, category, slices, f"writer {n} step {step}")
                    write(engine, cases.update_case, admin, case_id, view.version, edit, tax)
                    who = ANNOTATORS[(step + n) % len(ANNOTATORS)]
                    target = rng.choice(theirs)
                    label = labeling.my_label(engine, who, target)
                    labeling.submit(
                        engine,
                        who,
                        target,
                        labeling.LabelIn(*rng.choice(decisions)),
                        label.id if label else None,
                        tax,
                    )
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(n,)) for n in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert assert_in_step(engine).groups.values
    finally:
        engine.dispose()


def test_a_slice_name_that_reads_like_two_filters_keeps_its_own_figures(
    any_engine: Engine, tax: Taxonomy, admin: Actor, statements: list[str]
) -> None:
    """Slices written past the case service may hold any text: one named like a slice with a
    source ("S|source:workbench") and one with a "%" are their own scopes after a rebuild;
    the view of the slice S with the source workbench is not mixed with the first."""
    ids = history(any_engine, tax, admin, seed=8, steps=24)
    with read_session(any_engine) as s:
        real = s.scalars(select(CaseSlice.slice).where(CaseSlice.case_id == ids[1])).first()
        assert real is not None
        have = set(s.scalars(select(CaseSlice.slice).where(CaseSlice.case_id == ids[0])))
    odd = f"{real}|source:workbench"
    assert real not in have
    with write_session(any_engine) as s:
        s.execute(insert(CaseSlice).values(case_id=ids[0], slice=odd))
        s.execute(insert(CaseSlice).values(case_id=ids[2], slice="100%|x"))
        rebuild_rollup(s)
    got = assert_in_step(any_engine)
    scopes = {scope for scope, *_ in got.item_values}
    assert f"slice:{real}|source:workbench" in scopes
    assert f"slice:{real}%7Csource:workbench" in scopes
    assert "slice:100%25%7Cx|source:workbench" in scopes
    assert_reports_equal(any_engine, tax, statements, stored=True)
