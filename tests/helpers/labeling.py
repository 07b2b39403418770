"""Cases of the demo the labeling tests work on, and labels written past the service."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from sqlalchemy import Engine, insert

from review.cases import cases
from review.core.taxonomy import Taxonomy
from review.labels import labeling
from storage.db import write_session
from storage.models import Case, CaseSlice, Label, utcnow


def unlabeled_case_with_roles(engine: Engine) -> cases.CaseView:
    """A ready demo case nobody labeled yet whose documents include a decisive and a
    distractor passage and that has notes for labelers (the author's judgement to hide), and
    whose text an annotator without clearance may read (one who may not is never given it)."""
    for row in cases.list_cases(engine, cases.CaseFilter(status="ready"), page_size=200):
        if labeling.current_labels(engine, row.id):
            continue
        view = cases.get_case(engine, case_id=row.id)
        assert view is not None
        if view.text_restricted:
            continue
        roles = {d.role for d in view.documents}
        if {"decisive", "distractor"} <= roles and view.notes:
            return view
    raise AssertionError("the demo has an unlabeled case with decisive and distractor documents")


def insert_labels_past_service(
    engine: Engine,
    case_ids: Sequence[int],
    rng: random.Random,
    make_label: Callable[[random.Random], labeling.LabelIn],
    domain: str,
) -> None:
    """Up to two labels per case written straight into the table, past the labeling service
    (as benchmarks/scale.py bulk-loads them): by ``bulk<k>@<domain>``."""
    with write_session(engine) as s:
        for case_id in case_ids:
            for k in range(rng.randrange(0, 3)):
                label = make_label(rng)
                s.execute(
                    insert(Label).values(
                        case_id=case_id,
                        annotator=f"bulk{k}@{domain}",
                        decision=label.decision,
                        reason_codes=list(label.reason_codes),
                        category=None,
                        rationale="",
                        claim_verdicts=[],
                        created_at=utcnow(),
                    )
                )


def add_cases(
    engine: Engine, n: int, tax: Taxonomy, prefix: str, *, grouped: bool = False
) -> list[int]:
    """``n`` ready cases keyed ``<prefix>-000`` on. With ``grouped`` they alternate between
    the first two categories and two of three are in one of the first two slices; without, all
    are in the first category and no slice."""
    categories, slices = list(tax.categories), list(tax.slices)
    with write_session(engine) as s:
        rows = [
            Case(
                key=f"{prefix}-{k:03d}",
                question=f"Question {k}?",
                identity_name="customer-team-eu",
                identity_scopes=["public"],
                expected_decision="answer",
                reason_codes=[],
                category=categories[k % 2] if grouped else categories[0],
                split="dev",
                status="ready",
            )
            for k in range(n)
        ]
        s.add_all(rows)
        s.flush()
        if grouped:
            for k, row in enumerate(rows):
                if k % 3:
                    s.add(CaseSlice(case_id=row.id, slice=slices[k % 2]))
        return [r.id for r in rows]
