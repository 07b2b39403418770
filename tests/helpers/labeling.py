"""Cases of the demo the labeling tests work on."""

from __future__ import annotations

from sqlalchemy import Engine

from review.cases import cases
from review.labels import labeling


def unlabeled_case_with_roles(engine: Engine) -> cases.CaseView:
    """A ready demo case nobody labeled yet whose documents include a decisive and a
    distractor passage and that has notes for labelers (the author's judgement to hide)."""
    for row in cases.list_cases(engine, cases.CaseFilter(status="ready"), page_size=200):
        if labeling.current_labels(engine, row.id):
            continue
        view = cases.get_case(engine, case_id=row.id)
        assert view is not None
        roles = {d.role for d in view.documents}
        if {"decisive", "distractor"} <= roles and view.notes:
            return view
    raise AssertionError("the demo has an unlabeled case with decisive and distractor documents")
