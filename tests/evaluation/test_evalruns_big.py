"""A run of 70,000 outputs (PostgreSQL takes at most 65,535 parameters a statement): its
import; its scored frame with every case's slices, documents and claims; the release gate's
scoring of a file, a subset of 70,000 typed keys and the drift over 70,000 run ids; all on
PostgreSQL. (The import writes its outputs through the ORM, the slow part: the frame's test
stores its run with one bulk insert.)"""

from __future__ import annotations

import datetime as dt

import pandas as pd
from sqlalchemy import Engine, select

from review.core.taxonomy import Taxonomy
from review.evaluation import evalruns, execution
from review.evaluation.evalruns import OutputIn
from storage.db import read_session
from storage.models import Case, CaseClaim, CaseDocument, CaseSlice, EvalOutput, EvalRun
from tests.helpers.actors import make_actor
from tests.helpers.bulk import BIG, add_cases, add_document, add_rows, migrated

CLAIM = "A refund of a monthly plan charge must be requested within 14 days of the charge date."
KEYS = [f"K{i:06d}" for i in range(1, BIG + 1)]
AT = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _cases_and_outputs(engine: Engine) -> tuple[list[int], list[tuple[int, OutputIn]]]:
    """70,000 cases, every third also in a second slice, each with a public document and
    every 7th with a forbidden one, every 5th with a claim of 14 days; and an output per
    case, citing the public document (every 7th the forbidden one) and every 5th saying 30
    days. Returns the cases' ids (in key order) and the outputs."""
    ids = add_cases(engine, BIG, slices=("every",))
    add_rows(engine, CaseSlice, ({"case_id": c, "slice": "third"} for c in ids[::3]))
    public = add_document(engine, "PUB")
    secret = add_document(engine, "SEC", "The secret rebate code is ZX-99.")
    add_rows(
        engine,
        CaseDocument,
        (
            {"case_id": c, "document_id": public, "position": 0, "visibility": "visible",
             "role": "decisive"}
            for c in ids
        ),
    )  # fmt: skip
    add_rows(
        engine,
        CaseDocument,
        (
            {"case_id": c, "document_id": secret, "position": 1, "visibility": "forbidden",
             "role": "distractor"}
            for c in ids[::7]
        ),
    )  # fmt: skip
    add_rows(engine, CaseClaim, ({"case_id": c, "position": 0, "text": CLAIM} for c in ids[::5]))
    return ids, [
        (
            n + 1,
            OutputIn(
                case=k,
                decision="answer",
                text="Refunds within 30 days." if n % 5 == 0 else "Refunds are possible.",
                cited_ids=["SEC@1"] if n % 7 == 0 else ["PUB@1"],
            ),
        )
        for n, k in enumerate(KEYS)
    ]


def _check(frame: pd.DataFrame) -> None:
    assert len(frame) == BIG
    frame = frame.sort_values("key")
    assert list(frame["key"]) == KEYS
    n = range(BIG)
    assert list(frame["slices"]) == [("every", "third") if i % 3 == 0 else ("every",) for i in n]
    assert list(frame["leaked"]) == [i % 7 == 0 for i in n]
    assert list(frame["citations_valid"]) == [i % 7 != 0 for i in n]
    assert list(frame["contradicts_claim"]) == [i % 5 == 0 for i in n]


def test_importing_a_run_of_more_outputs_than_a_statement_takes_parameters(pg_url: str) -> None:
    engine = migrated(pg_url)
    try:
        _, items = _cases_and_outputs(engine)
        admin = make_actor("admin", clearance=True, uid=1)
        run_id = evalruns.import_run(engine, admin, "big", "v1", items, "big.jsonl")
        with read_session(engine) as s:
            stored = s.execute(
                select(Case.key, EvalOutput.text)
                .join(Case, Case.id == EvalOutput.case_id)
                .where(EvalOutput.run_id == run_id)
                .order_by(Case.key)
            ).all()
        assert stored == [(it.case, it.text) for _, it in items]
    finally:
        engine.dispose()


def test_the_frame_of_a_run_of_more_outputs_than_parameters(pg_url: str, tax: Taxonomy) -> None:
    engine = migrated(pg_url)
    try:
        case_ids, items = _cases_and_outputs(engine)
        add_rows(
            engine,
            EvalRun,
            [{"id": 1, "name": "big", "system_version": "v1", "source": "import", "config": {},
              "notes": "", "created_at": AT, "created_by": "a@example.org"}],
        )  # fmt: skip
        ids = dict(zip(KEYS, case_ids, strict=True))
        add_rows(
            engine,
            EvalOutput,
            (
                {"run_id": 1, "case_id": ids[it.case], "repeat": 0, "decision": it.decision,
                 "text": it.text, "cited_doc_ids": it.cited_ids, "versions": {}}
                for _, it in items
            ),
        )  # fmt: skip
        _check(evalruns.outputs_frame(engine, 1, tax))
    finally:
        engine.dispose()


def test_scoring_a_file_and_a_subset_of_more_keys_than_parameters(
    pg_url: str, tax: Taxonomy
) -> None:
    engine = migrated(pg_url)
    try:
        _, items = _cases_and_outputs(engine)
        _check(evalruns.score_outputs(engine, items, "big.jsonl", tax))
        subset = execution.CaseSubset(keys=tuple(KEYS[1:]))
        assert execution.subset_size(engine, subset) == BIG - 1
        assert evalruns.family_history(engine, tax, run_ids=list(range(BIG))).empty
    finally:
        engine.dispose()
