"""The Agreement page's report from SQL aggregates (``agreement_report_sql``) equals the pandas
reference (``agreement_report`` over ``labels_frame``) on the demo and on random label sets
with revisions, on SQLite and PostgreSQL, for every filter and grouping."""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, event, select, text
from sqlalchemy.engine import cursor as sa_cursor

from review.core.errors import InputError
from review.core.taxonomy import Taxonomy
from review.labels import labeling
from review.labels.agreement import agreement_report
from review.labels.agreement_sql import agreement_report_sql
from storage.db import make_engine, migrate, run_write
from storage.models import Case, CaseFamily, CaseSlice, Label
from tests.helpers.actors import make_actor
from tests.helpers.agreement import assert_same

GROUPINGS = ("slice", "category")


def compare(
    engine: Engine,
    decisions: list[str],
    codes: list[str],
    filters: Sequence[tuple[str, ...]],
) -> int:
    """Both reports for every (slice, category[, family]) filter and grouping; returns how
    many were not None."""
    frame = labeling.labels_frame(engine)
    shown = 0
    for scope, group_by in itertools.product(filters, GROUPINGS):
        slice_, category, family = (*scope, "")[:3]
        kw: dict[str, Any] = {
            "slice_": slice_,
            "category": category,
            "family": family,
            "group_by": group_by,
        }
        ref = agreement_report(frame, decisions, codes, **kw)
        got = agreement_report_sql(engine, decisions, codes, **kw)
        what = f"slice={slice_!r} category={category!r} family={family!r} group_by={group_by}"
        assert_same(got, ref, what)
        shown += ref is not None
    return shown


def test_demo_database_gives_the_same_report_for_every_filter(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    frame = labeling.labels_frame(demo_engine)
    assert len(frame) > 100 and frame["annotator"].nunique() >= 3
    slices = ["", *tax.slices, "no_such_slice"]
    categories = ["", *tax.categories]
    # each slice alone, each category alone, and a dozen slice-and-category pairs with cases
    crossed = {
        (s, str(c))
        for ss, c in zip(frame["slices"], frame["case_category"], strict=True)
        for s in ss
    }
    families = sorted({str(f) for f in frame["family"].dropna()})
    assert families, "the demo labels cases of its families"
    filters: list[tuple[str, ...]] = sorted(
        {(s, "") for s in slices}
        | {("", c) for c in categories}
        | set(itertools.islice(sorted(crossed), 12))
    )
    filters += [("", "", f) for f in [*families, "no_such_family"]]
    filters += [(s, "", families[0]) for s in list(tax.slices)[:3]]
    shown = compare(demo_engine, list(tax.decisions), list(tax.reason_codes), filters)
    assert shown >= 2 * (len(tax.slices) + 1 + len(families))


# --- random label sets through the labeling service ----------------------------------------

ANNOTATORS = [
    make_actor("annotator", email, uid=100 + i)
    for i, email in enumerate(
        [
            "zoe@example.org",
            "Adam@example.org",  # upper case sorts first in code-point order, not in a locale
            "ines@example.org",
            "bob.o@example.org",
            "émile@example.org",
        ]
    )
]
SLICES = ["s_alpha", "s_beta", "S_gamma"]
CATEGORIES = ["in_scope", "near_miss", "out_of_scope", "time_sensitive"]


FAMILIES = ["fam-a", "Fam-b"]


def add_cases(engine: Engine, rng: random.Random, n: int) -> list[int]:
    def work(s: Any) -> list[int]:
        ids = []
        families = [CaseFamily(key=k, title=k) for k in FAMILIES]
        s.add_all(families)
        s.flush()
        for i in range(n):
            case = Case(
                key=f"RND-{i:03d}",
                question=f"question {i}",
                identity_name="anyone",
                expected_decision="answer",
                category=CATEGORIES[i % len(CATEGORIES)],
                split="dev",
                status="ready",
                family_id=[None, families[0].id, families[1].id][i % 3],
            )
            s.add(case)
            s.flush()
            for sl in rng.sample(SLICES, rng.choice([0, 1, 1, 2, 3])):
                s.add(CaseSlice(case_id=case.id, slice=sl))
            ids.append(case.id)
        return ids

    return run_write(engine, work)


def random_label(rng: random.Random, tax: Taxonomy, constant: bool) -> labeling.LabelIn:
    if constant:  # the whole category says the same: kappa and alpha are undefined there
        return labeling.LabelIn("answer")
    decision = rng.choice(list(tax.decisions)[:3])  # few values: agreement happens
    codes = list(tax.reason_codes)[:4]
    n = rng.randint(0 if tax.decisions[decision].answers else 1, 3)
    picked = rng.sample(codes, n)  # random order: the same set is stored in several orders
    return labeling.LabelIn(decision, tuple(picked))


def random_labels(engine: Engine, tax: Taxonomy, seed: int) -> None:
    rng = random.Random(seed)
    cases = add_cases(engine, rng, 28)
    latest: dict[tuple[int, str], int] = {}
    for case_id in cases:
        constant = case_id % len(CATEGORIES) == 3  # one category agrees on everything
        k = rng.choice([0, 1, 2, 2, 3, 3, 4, 5])
        for who in rng.sample(ANNOTATORS, k):
            view = labeling.submit(
                engine, who, case_id, random_label(rng, tax, constant), None, tax
            )
            latest[(case_id, who.email)] = view.id
    # revisions: a third of the labels are edited once or twice; only the newest counts
    for (case_id, email), label_id in sorted(latest.items()):
        if rng.random() < 0.35:
            who = next(a for a in ANNOTATORS if a.email == email)
            for _ in range(rng.randint(1, 2)):
                label_id = labeling.submit(
                    engine, who, case_id, random_label(rng, tax, False), label_id, tax
                ).id


@pytest.mark.parametrize("seed", [3, 11])
def test_random_labels_with_revisions_give_the_same_report(
    any_engine: Engine, tax: Taxonomy, seed: int
) -> None:
    assert agreement_report_sql(any_engine, list(tax.decisions), list(tax.reason_codes)) is None
    random_labels(any_engine, tax, seed)
    frame = labeling.labels_frame(any_engine)
    assert frame["reason_codes"].map(len).max() >= 2
    filters: list[tuple[str, ...]] = [
        (s, c) for s in ["", *SLICES, "nowhere"] for c in ["", *CATEGORIES, "ambiguous"]
    ]
    filters += [(s, "", f) for s in ["", SLICES[0]] for f in [*FAMILIES, "nowhere"]]
    shown = compare(any_engine, list(tax.decisions), list(tax.reason_codes), filters)
    assert shown >= 20
    # what the random data is there to exercise
    whole = agreement_report_sql(any_engine, list(tax.decisions), list(tax.reason_codes))
    assert whole is not None and whole.annotators == len(ANNOTATORS)
    notes = set(whole.reasons["note"]) | set(whole.decision["note"])
    constant = agreement_report_sql(
        any_engine, list(tax.decisions), list(tax.reason_codes), category=CATEGORIES[3]
    )
    assert constant is not None
    notes |= set(constant.decision["note"]) | set(constant.reasons["note"])
    assert any(n.startswith("kappa undefined") for n in notes)
    assert any(n.startswith("alpha undefined") for n in notes)


def test_small_and_degenerate_label_sets(any_engine: Engine, tax: Taxonomy) -> None:
    decisions, codes = list(tax.decisions), list(tax.reason_codes)
    cases = add_cases(any_engine, random.Random(0), 6)

    def work(s: Any) -> None:  # cases without slices
        for sl in s.scalars(select(CaseSlice)):
            s.delete(sl)

    run_write(any_engine, work)
    everything = [("", ""), ("", CATEGORIES[0]), (SLICES[0], "")]
    # one annotator: no pairs, nothing pairable, no slice to group by
    first, second = ANNOTATORS[1], ANNOTATORS[3]
    for case_id in cases[:3]:
        labeling.submit(any_engine, first, case_id, labeling.LabelIn("answer"), None, tax)
    assert compare(any_engine, decisions, codes, everything) == 4
    only = agreement_report_sql(any_engine, decisions, codes)
    assert only is not None and list(only.decision["scope"]) == ["all"] and only.groups.empty
    assert compare(any_engine, decisions, [], everything) == 4  # no reason codes at all
    # a second annotator agrees on one case: a pair, every statistic undefined but raw
    labeling.submit(any_engine, second, cases[0], labeling.LabelIn("answer"), None, tax)
    assert compare(any_engine, decisions, codes, everything) == 4
    # and disagrees on another, with reason codes in both orders
    abstain = labeling.LabelIn("abstain", (codes[1], codes[0]))
    labeling.submit(any_engine, second, cases[1], abstain, None, tax)
    labeling.submit(any_engine, ANNOTATORS[0], cases[1], abstain, None, tax)
    labeling.submit(
        any_engine, first, cases[3], labeling.LabelIn("abstain", (codes[0], codes[1])), None, tax
    )
    labeling.submit(any_engine, second, cases[3], abstain, None, tax)
    assert compare(any_engine, decisions, codes, everything) == 4


@pytest.fixture
def icu_engine(pg_server: str) -> Iterator[Engine]:
    """A PostgreSQL database whose default collation is ICU English (as many servers are):
    it orders annotator emails otherwise than Python does."""
    name = f"wb_icu_{os.getpid()}_{next(_icu_counter)}"
    admin = create_engine(pg_server, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(
            text(
                f'CREATE DATABASE "{name}" TEMPLATE template0 LOCALE_PROVIDER icu '
                "ICU_LOCALE 'en' LOCALE 'C.UTF-8'"
            )
        )
    admin.dispose()
    eng = make_engine(pg_server.rsplit("/", 1)[0] + f"/{name}")
    migrate(eng)
    yield eng
    eng.dispose()


_icu_counter = itertools.count()


@pytest.mark.postgres
def test_a_locale_collation_does_not_reorder_the_annotator_pairs(
    icu_engine: Engine, tax: Taxonomy
) -> None:
    emails = [a.email for a in ANNOTATORS]
    values = ", ".join(f"('{e}')" for e in emails)
    with icu_engine.connect() as c:  # the database orders them otherwise than Python does
        in_sql = list(c.scalars(text(f"SELECT e FROM (VALUES {values}) AS t(e) ORDER BY e")))
    assert in_sql != sorted(emails)
    random_labels(icu_engine, tax, 7)
    filters = [("", ""), (SLICES[0], ""), ("", CATEGORIES[0])]
    assert compare(icu_engine, list(tax.decisions), list(tax.reason_codes), filters) == 6


def test_decisions_and_codes_outside_the_lists_are_refused_alike(
    any_engine: Engine, tax: Taxonomy
) -> None:
    random_labels(any_engine, tax, 5)
    frame = labeling.labels_frame(any_engine)
    decisions, codes = list(tax.decisions), list(tax.reason_codes)
    used_codes = sorted({c for cs in frame["reason_codes"] for c in cs})
    for dec, rc in [
        ([d for d in decisions if d != "abstain"], codes),
        (decisions, [c for c in codes if c not in used_codes[:2]]),
        (decisions, []),
    ]:
        with pytest.raises(InputError) as ref:
            agreement_report(frame, dec, rc)
        with pytest.raises(InputError) as got:
            agreement_report_sql(any_engine, dec, rc)
        assert str(got.value) == str(ref.value)
    # a code outside the list (a retired one, say) counts only while a current label has it
    case_id = int(frame["case_id"].iloc[0])
    email = str(frame["annotator"].iloc[0])

    def add(codes_: list[str]) -> Any:
        return lambda s: s.add(
            Label(case_id=case_id, annotator=email, decision="abstain", reason_codes=codes_)
        )

    run_write(any_engine, add(["retired_code", codes[0]]))
    with pytest.raises(InputError, match="'retired_code'") as got:
        agreement_report_sql(any_engine, decisions, codes)
    with pytest.raises(InputError) as ref:
        agreement_report(labeling.labels_frame(any_engine), decisions, codes)
    assert str(got.value) == str(ref.value)
    run_write(any_engine, add([codes[0]]))  # replaced by a label without it
    compare(any_engine, decisions, codes, [("", "")])


def test_a_decision_outside_the_list_counts_only_while_a_label_is_current(
    any_engine: Engine, tax: Taxonomy
) -> None:
    """The decision's position is looked up in the list inside the one statement (NULL for
    any other value): a retired decision on a current label is refused as the reference
    refuses it, and once that label is revised it no longer counts."""
    random_labels(any_engine, tax, 9)
    decisions, codes = list(tax.decisions), list(tax.reason_codes)
    frame = labeling.labels_frame(any_engine)
    case_id = int(frame["case_id"].iloc[-1])
    email = str(frame["annotator"].iloc[-1])

    def add(decision: str) -> Any:
        return lambda s: s.add(
            Label(case_id=case_id, annotator=email, decision=decision, reason_codes=[])
        )

    run_write(any_engine, add("retired_decision"))
    with pytest.raises(InputError, match="'retired_decision'") as got:
        agreement_report_sql(any_engine, decisions, codes)
    with pytest.raises(InputError) as ref:
        agreement_report(labeling.labels_frame(any_engine), decisions, codes)
    assert str(got.value) == str(ref.value)
    run_write(any_engine, add("answer"))  # revised: the retired value is history only
    filters = [("", ""), (SLICES[0], ""), ("", CATEGORIES[1])]
    assert compare(any_engine, decisions, codes, filters) >= 2


# --- no query returns a row per label ---------------------------------------------------------


@pytest.fixture
def fetched_rows(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Rows handed back by every SQLAlchemy result while the test runs."""
    counts: list[int] = []
    strategy = sa_cursor.CursorFetchStrategy

    def counting(name: str) -> Any:
        original = getattr(strategy, name)

        def fetch(self: Any, *args: Any, **kwargs: Any) -> Any:
            rows = original(self, *args, **kwargs)
            if isinstance(rows, list):
                counts.append(len(rows))
            elif rows is not None:
                counts.append(1)
            return rows

        return fetch

    for name in ("fetchone", "fetchmany", "fetchall"):
        monkeypatch.setattr(strategy, name, counting(name))
    yield counts


def test_the_report_reads_aggregates_not_labels(
    engine: Engine, tax: Taxonomy, fetched_rows: list[int]
) -> None:
    rng = random.Random(1)
    cases = add_cases(engine, rng, 400)
    who = ANNOTATORS[:3]

    def work(s: Any) -> None:
        for case_id in cases:
            for a in who:
                codes = rng.sample(list(tax.reason_codes), rng.randint(0, 2))
                s.add(
                    Label(
                        case_id=case_id,
                        annotator=a.email,
                        decision=rng.choice(["answer", "abstain"]),
                        reason_codes=codes,
                    )
                )

    run_write(engine, work)
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    fetched_rows.clear()
    report = agreement_report_sql(engine, list(tax.decisions), list(tax.reason_codes))
    assert report is not None and report.labels == 3 * len(cases)
    # eight, and the annotators found by index seeks (storage.db.distinct_values): one
    # statement per annotator and one past the last
    assert len(statements) <= 8 + len(who) + 1
    # pairs x decision pairs, label counts per case, groups, distinct code lists: bounded by
    # the vocabulary and the team, not by the 1,200 labels
    assert sum(fetched_rows) < 150, fetched_rows
    assert_same(
        report,
        agreement_report(
            labeling.labels_frame(engine), list(tax.decisions), list(tax.reason_codes)
        ),
        "bulk",
    )
