"""The stored agreed label (case_agreed, issue 18) is always what the rule computed from the
labels and adjudications gives (review.cases.agreed.agreed_reference_subquery): after every
label, revision and adjudication made through the labeling service, on the demo, after a bulk
load and a rebuild, after the migration's backfill of an older database, and after a restore
of a backup. On SQLite and on PostgreSQL."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import Engine, create_engine, delete, insert, select, text

from review.admin import backup
from review.cases.agreed import (
    agreed_labels,
    agreed_reference_subquery,
    agreed_subquery,
    rebuild_agreed,
    refresh_agreed,
)
from review.core.taxonomy import Taxonomy
from review.labels import labeling
from storage.db import alembic_config, make_engine, migrate, read_session, write_session
from storage.models import Adjudication, Case, CaseAgreed, utcnow
from tests.helpers.actors import make_actor
from tests.helpers.labeling import add_cases, insert_labels_past_service

Row = tuple[int, str, tuple[str, ...], str, int]


def stored(engine: Engine) -> list[Row]:
    with read_session(engine) as s:
        rows = s.execute(
            select(
                CaseAgreed.case_id,
                CaseAgreed.decision,
                CaseAgreed.reason_codes,
                CaseAgreed.agreed_by,
                CaseAgreed.source_id,
            ).order_by(CaseAgreed.case_id)
        ).all()
    return [(int(c), str(d), tuple(r), str(b), int(i)) for c, d, r, b, i in rows]


def reference(engine: Engine) -> list[Row]:
    ref = agreed_reference_subquery()
    with read_session(engine) as s:
        rows = s.execute(
            select(
                ref.c.case_id,
                ref.c.gold_decision,
                ref.c.gold_reasons,
                ref.c.agreed_by,
                ref.c.source_id,
            ).order_by(ref.c.case_id)
        ).all()
    return [(int(c), str(d), tuple(r), str(b), int(i)) for c, d, r, b, i in rows]


def read_through_subquery(engine: Engine) -> list[tuple[int, str, tuple[str, ...], str]]:
    """What evalruns and the cases code read: agreed_subquery() and agreed_labels()."""
    gold = agreed_subquery()
    with read_session(engine) as s:
        rows = s.execute(
            select(
                gold.c.case_id, gold.c.gold_decision, gold.c.gold_reasons, gold.c.agreed_by
            ).order_by(gold.c.case_id)
        ).all()
        ids = list(s.scalars(select(Case.id)))
        by_labels = agreed_labels(s, ids)
    out = [(int(c), str(d), tuple(r), str(b)) for c, d, r, b in rows]
    assert out == [(cid, a.decision, a.reason_codes, a.by) for cid, a in sorted(by_labels.items())]
    return out


def assert_in_step(engine: Engine) -> list[Row]:
    ref = reference(engine)
    assert stored(engine) == ref
    assert read_through_subquery(engine) == [r[:4] for r in ref]
    return ref


def _label(rng: random.Random, tax: Taxonomy) -> labeling.LabelIn:
    """A label from a small set of choices, so that annotators often agree (and sometimes
    differ only in their reason codes or their order)."""
    decision = rng.choice(["answer", "answer", "abstain", "abstain", "clarify"])
    if tax.decisions[decision].answers:
        return labeling.LabelIn(decision)
    codes = [c for c in tax.reason_codes if c != "false_premise"][:3]
    picked = rng.choice([codes[:1], codes[:1], codes[:2], list(reversed(codes[:2])), codes[1:2]])
    return labeling.LabelIn(decision, tuple(picked))


def random_history(
    engine: Engine, tax: Taxonomy, seed: int, steps: int, check: bool = True
) -> list[int]:
    """Submits, revisions and adjudications by several annotators and reviewers on a few
    cases, in random order; after each step the stored table equals the reference."""
    rng = random.Random(seed)
    case_ids = add_cases(engine, 5, tax, "AGREE")
    annotators = [make_actor("annotator", f"ann{k}@test.example", uid=20 + k) for k in range(4)]
    reviewers = [make_actor("reviewer", f"rev{k}@test.example", uid=30 + k) for k in range(2)]
    kinds: set[str] = set()
    for _ in range(steps):
        case_id = rng.choice(case_ids)
        if rng.random() < 0.2:
            reviewer = rng.choice(reviewers)
            label = _label(rng, tax)
            labeling.adjudicate(
                engine, reviewer, case_id, label.decision, label.reason_codes, "settled", tax
            )
        else:
            who = rng.choice(annotators)
            mine = labeling.my_label(engine, who, case_id)
            labeling.submit(engine, who, case_id, _label(rng, tax), mine.id if mine else None, tax)
        if check:
            kinds |= {r[3] for r in assert_in_step(engine)}
    if check:
        assert kinds == {"adjudication", "annotators"}  # both kinds of agreement were seen
    return case_ids


def test_every_label_revision_and_adjudication_keeps_the_stored_agreed_label_right(
    any_engine: Engine, tax: Taxonomy
) -> None:
    random_history(any_engine, tax, seed=18, steps=60)


def test_a_case_without_agreement_has_no_stored_row(any_engine: Engine, tax: Taxonomy) -> None:
    [case_id] = add_cases(any_engine, 1, tax, "AGREE")
    a, b = (make_actor("annotator", f"a{k}@test.example", uid=40 + k) for k in range(2))
    labeling.submit(any_engine, a, case_id, labeling.LabelIn("answer"), None, tax)
    assert stored(any_engine) == []  # one label is not an agreement
    codes = tuple(tax.reason_codes)[:1]
    second = labeling.submit(any_engine, b, case_id, labeling.LabelIn("abstain", codes), None, tax)
    assert stored(any_engine) == []  # two labels that differ
    third = labeling.submit(any_engine, b, case_id, labeling.LabelIn("answer"), second.id, tax)
    assert stored(any_engine) == [(case_id, "answer", (), "annotators", third.id)]
    # a revision away from the agreement takes the stored agreed label away again
    mine = labeling.my_label(any_engine, a, case_id)
    assert mine is not None
    labeling.submit(any_engine, a, case_id, labeling.LabelIn("abstain", codes), mine.id, tax)
    assert stored(any_engine) == []
    assert_in_step(any_engine)


def test_a_bulk_load_is_made_right_by_a_rebuild_and_a_refresh(
    any_engine: Engine, tax: Taxonomy
) -> None:
    case_ids = random_history(any_engine, tax, seed=7, steps=25, check=False)
    rng = random.Random(3)
    # labels and adjudications written past the service (as benchmarks/scale.py loads them)
    insert_labels_past_service(any_engine, case_ids, rng, lambda r: _label(r, tax), "test.example")
    with write_session(any_engine) as s:
        for case_id in case_ids:
            if rng.random() < 0.3:
                s.execute(
                    insert(Adjudication).values(
                        case_id=case_id,
                        adjudicator="bulk-rev@test.example",
                        decision="clarify",
                        reason_codes=list(tax.reason_codes)[:1],
                        note="bulk",
                        created_at=utcnow(),
                    )
                )
    with write_session(any_engine) as s:
        assert rebuild_agreed(s) == len(reference(any_engine))
    assert_in_step(any_engine)
    # a refresh of a set of cases puts back rows lost or damaged, and only theirs
    with write_session(any_engine) as s:
        s.execute(delete(CaseAgreed))
        refresh_agreed(s, case_ids[:2])
    assert stored(any_engine) == [r for r in reference(any_engine) if r[0] in case_ids[:2]]
    with write_session(any_engine) as s:
        refresh_agreed(s, case_ids)
    assert_in_step(any_engine)


def test_the_demo_stores_the_agreed_labels_of_the_reference(demo_engine: Engine) -> None:
    rows = assert_in_step(demo_engine)
    assert {r[3] for r in rows} == {"adjudication", "annotators"}
    # and a rebuild changes nothing
    before = stored(demo_engine)
    with write_session(demo_engine) as s:
        rebuild_agreed(s)
    assert stored(demo_engine) == before


def test_the_migration_fills_the_table_as_the_reference_does(
    any_engine: Engine, tax: Taxonomy
) -> None:
    random_history(any_engine, tax, seed=5, steps=40, check=False)
    before = assert_in_step(any_engine)
    assert before
    cfg = alembic_config(any_engine)
    command.downgrade(cfg, "0017")
    command.upgrade(cfg, "head")
    assert stored(any_engine) == before


def _second_database(url: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if url.startswith("sqlite"):
        return f"sqlite:///{tmp_path / 'restored' / 'wb.db'}"
    server: str = request.getfixturevalue("pg_server")
    name = url.rsplit("/", 1)[1] + "_restored"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return server.rsplit("/", 1)[0] + f"/{name}"


@pytest.mark.parametrize("older", [False, True], ids=["same-revision", "before-0018"])
def test_a_restored_backup_has_the_agreed_labels_of_its_labels(
    any_url: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    tax: Taxonomy,
    older: bool,
) -> None:
    """A backup of this revision brings its table along; one taken before the table existed
    is upgraded on restore, and the backfill fills it."""
    engine = make_engine(any_url)
    migrate(engine)
    random_history(engine, tax, seed=11, steps=30, check=False)
    expected = assert_in_step(engine)
    if older:
        command.downgrade(alembic_config(engine), "0017")
    engine.dispose()
    target = _second_database(any_url, request, tmp_path)
    path = tmp_path / "wb.backup"
    backup.backup(any_url, path)
    report = backup.restore(target, path)
    assert (report.revision == "0017") is older
    restored = make_engine(target)
    try:
        assert stored(restored) == expected
        assert_in_step(restored)
    finally:
        restored.dispose()
