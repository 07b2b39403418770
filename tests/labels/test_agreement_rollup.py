"""The stored annotator-pair counts of the Agreement page (agreement_pairs, issue 18) are always
what the rule computed from the current labels gives (review.labels.agreement_rollup
.reference_counts): after every label, revision and adjudication made through the labeling
service, on the demo, after a bulk load and a rebuild, and after the migration's backfill of an
older database. The report read through them equals the report counted from the labels and the
pandas reference; a label written past the service makes the report count the pairs again
until a rebuild. On SQLite and on PostgreSQL."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

import pytest
from alembic import command
from sqlalchemy import Engine

from review.core.taxonomy import Taxonomy
from review.labels import labeling
from review.labels.agreement import agreement_report
from review.labels.agreement_rollup import (
    RollupCounts,
    rebuild_rollup,
    reference_counts,
    stored_counts,
)
from review.labels.agreement_sql import agreement_report_sql
from storage.db import alembic_config, read_session, write_session
from storage.models import AgreementRollupStamp
from tests.helpers.actors import make_actor
from tests.helpers.agreement import assert_same, sent_statements
from tests.helpers.labeling import add_cases, insert_labels_past_service

ANNOTATORS = [
    make_actor("annotator", email, uid=60 + i)
    for i, email in enumerate(
        ["zoe@pairs.example", "Adam@pairs.example", "émile@pairs.example", "bo@pairs.example"]
    )
]
REVIEWER = make_actor("reviewer", "rev@pairs.example", uid=70)


def stamp(engine: Engine) -> tuple[int, int] | None:
    with read_session(engine) as s:
        row = s.get(AgreementRollupStamp, 1)
        return None if row is None else (row.labels, row.newest_label_id)


def every_label(counts: RollupCounts) -> RollupCounts:
    """The counts of the scope of every label (``""``), keys without the scope."""
    pairs, pair_codes, item_values = (
        {key[1:]: v for key, v in table.items() if key[0] == ""}
        for table in (counts.pairs, counts.pair_codes, counts.item_values)
    )
    return RollupCounts(pairs, pair_codes, item_values)


def assert_in_step(engine: Engine) -> RollupCounts:
    """The stored tables in every scope equal the rule's; returns the scope of every label."""
    with read_session(engine) as s:
        ref = reference_counts(s).nonzero()
        got = stored_counts(s)
    assert got.pairs == ref.pairs
    assert got.pair_codes == ref.pair_codes
    assert got.item_values == ref.item_values
    assert (stamp(engine) or (0, 0)) == labeling.labels_stamp(engine)  # no row: no label
    return every_label(ref)


def random_label(rng: random.Random, tax: Taxonomy) -> labeling.LabelIn:
    decision = rng.choice(["answer", "abstain", "abstain", "clarify"])
    codes = list(tax.reason_codes)[:4]
    n = rng.randint(0 if tax.decisions[decision].answers else 1, 3)
    return labeling.LabelIn(decision, tuple(rng.sample(codes, n)))  # in random order


def random_history(
    engine: Engine, tax: Taxonomy, seed: int, steps: int, check: bool = True
) -> list[int]:
    """Submits, revisions and adjudications on a few cases in random order; after each step
    (``check``) the stored counts equal the rule's."""
    rng = random.Random(seed)
    case_ids = add_cases(engine, 6, tax, "PAIRS", grouped=True)
    # each case has its own team of one to four annotators: cases end with 1 to 4 labels
    team = {case_id: rng.sample(ANNOTATORS, 1 + k % 4) for k, case_id in enumerate(case_ids)}
    for _ in range(steps):
        case_id = rng.choice(case_ids)
        if rng.random() < 0.15:
            label = random_label(rng, tax)
            labeling.adjudicate(
                engine, REVIEWER, case_id, label.decision, label.reason_codes, "settled", tax
            )
        else:
            who = rng.choice(team[case_id])
            mine = labeling.my_label(engine, who, case_id)
            labeling.submit(
                engine, who, case_id, random_label(rng, tax), mine.id if mine else None, tax
            )
        if check:
            assert_in_step(engine)
    return case_ids


@pytest.fixture
def statements(any_engine: Engine) -> Iterator[list[str]]:
    with sent_statements(any_engine) as seen:
        yield seen


def read_rollup(seen: list[str]) -> bool:
    return any(re.search(r"FROM agreement_pairs\b", s) for s in seen)  # not ..._stamp


def assert_reports_equal(engine: Engine, tax: Taxonomy, seen: list[str], *, rollup: bool) -> None:
    """The unfiltered reports (by slice, by category) and one filtered by the labels' source
    equal the pandas reference, read through the rollup (the filter's scope of it) or not as
    ``rollup`` says (a category's view needs the figures per group stamped as well:
    test_agreement_groups)."""
    decisions, codes = list(tax.decisions), list(tax.reason_codes)
    frame = labeling.labels_frame(engine)
    for group_by in ("slice", "category"):
        seen.clear()
        got = agreement_report_sql(engine, decisions, codes, group_by=group_by)
        assert read_rollup(seen) is rollup
        assert_same(got, agreement_report(frame, decisions, codes, group_by=group_by), group_by)
    seen.clear()
    got = agreement_report_sql(engine, decisions, codes, source="workbench")
    assert read_rollup(seen) is rollup
    assert_same(got, agreement_report(frame, decisions, codes, source="workbench"), "workbench")


def test_every_label_revision_and_adjudication_keeps_the_pair_counts_right(
    any_engine: Engine, tax: Taxonomy, statements: list[str]
) -> None:
    assert stamp(any_engine) is None  # an empty database: no stamp row (no label)
    random_history(any_engine, tax, seed=18, steps=70)
    with read_session(any_engine) as s:
        counts = every_label(stored_counts(s))
    # what the random history is there to exercise: every annotator pair, agreement and not
    assert len({(a, b) for a, b, _, _ in counts.pairs}) == 6
    assert any(da == db for _, _, da, db in counts.pairs)
    assert any(da != db for _, _, da, db in counts.pairs)
    assert any(x < y for x, y, _ in counts.pair_codes.values())
    assert {m for m, _, _ in counts.item_values} >= {1, 2, 3}
    assert_reports_equal(any_engine, tax, statements, rollup=True)


def test_a_revision_moves_the_case_from_one_pair_row_to_another(
    any_engine: Engine, tax: Taxonomy
) -> None:
    [case_id] = add_cases(any_engine, 1, tax, "PAIRS", grouped=True)
    a, b = ANNOTATORS[0], ANNOTATORS[1]  # "zoe" sorts after "Adam": the pair is (Adam, zoe)
    code = next(iter(tax.reason_codes))
    labeling.submit(any_engine, a, case_id, labeling.LabelIn("answer"), None, tax)
    counts = assert_in_step(any_engine)
    assert counts.pairs == {}  # one label: no pair
    assert counts.item_values == {(1, "decision", "answer"): (1, 1)}
    second = labeling.submit(
        any_engine, b, case_id, labeling.LabelIn("abstain", (code,)), None, tax
    )
    counts = assert_in_step(any_engine)
    assert counts.pairs == {(b.email, a.email, "abstain", "answer"): (1,)}
    assert counts.pair_codes == {(b.email, a.email, code): (0, 1, 0)}
    assert counts.item_values == {
        (2, "decision", "answer"): (1, 1),
        (2, "decision", "abstain"): (1, 1),
        (2, "code", code): (1, 1),
    }
    labeling.submit(any_engine, b, case_id, labeling.LabelIn("answer"), second.id, tax)
    counts = assert_in_step(any_engine)  # the old rows fell to 0 and are gone
    assert counts.pairs == {(b.email, a.email, "answer", "answer"): (1,)}
    assert counts.pair_codes == {}
    assert counts.item_values == {(2, "decision", "answer"): (2, 4)}


def test_a_label_past_the_service_is_counted_until_a_rebuild(
    any_engine: Engine, tax: Taxonomy, statements: list[str]
) -> None:
    case_ids = random_history(any_engine, tax, seed=7, steps=30, check=False)
    assert_in_step(any_engine)
    rng = random.Random(3)
    insert_labels_past_service(
        any_engine, case_ids, rng, lambda r: random_label(r, tax), "pairs.example"
    )
    assert stamp(any_engine) != labeling.labels_stamp(any_engine)
    assert_reports_equal(any_engine, tax, statements, rollup=False)
    # a submit through the service keeps the stamp behind: the rollup stays unused
    who = ANNOTATORS[2]
    mine = labeling.my_label(any_engine, who, case_ids[0])
    labeling.submit(
        any_engine, who, case_ids[0], random_label(rng, tax), mine.id if mine else None, tax
    )
    assert_reports_equal(any_engine, tax, statements, rollup=False)
    with write_session(any_engine) as s:
        rebuild_rollup(s)
    assert_in_step(any_engine)
    assert_reports_equal(any_engine, tax, statements, rollup=True)


def test_the_demo_stores_the_pair_counts_of_the_rule(demo_engine: Engine, tax: Taxonomy) -> None:
    before = assert_in_step(demo_engine)
    assert before.pairs and before.pair_codes and before.item_values
    with write_session(demo_engine) as s:
        rebuild_rollup(s)
    assert assert_in_step(demo_engine) == before


def test_the_migration_fills_the_tables_as_the_rule_does(any_engine: Engine, tax: Taxonomy) -> None:
    random_history(any_engine, tax, seed=5, steps=40, check=False)
    before = assert_in_step(any_engine)
    assert before.pairs
    cfg = alembic_config(any_engine)
    command.downgrade(cfg, "0022")
    command.upgrade(cfg, "head")
    assert assert_in_step(any_engine) == before
