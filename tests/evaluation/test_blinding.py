"""A run's outputs with the judgement of blind cases withheld (review.evaluation.blinding) on
the demo's runs: a withheld cell reads as hidden and every column keeps one type, so the
table converts to Arrow as it is (Streamlit carries every table to the browser as Arrow; a
column mixing true/false with text does not convert)."""

from __future__ import annotations

import pyarrow as pa  # type: ignore[import-untyped]  # (Streamlit's, no stubs)
from sqlalchemy import Engine

from review.admin import users
from review.cases.sight import HIDDEN, Sight
from review.core.taxonomy import Taxonomy
from review.evaluation import blinding, evalruns
from review.labels import blind
from tests.helpers.pages import INES


def _ines(engine: Engine) -> Sight:
    row = users.get_by_email(engine, INES)
    assert row is not None
    return blind.sight(engine, users.to_actor(row))


def test_a_blinded_outputs_table_converts_to_arrow_and_reads_hidden(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    seen = _ines(demo_engine)
    run = evalruns.list_runs(demo_engine)[0]
    frame = evalruns.outputs_frame(demo_engine, run.id, tax)
    assert frame["answer_ok"].map(type).eq(bool).any(), "the stored frame has true/false cells"
    shown = blinding.outputs_table(demo_engine, seen, frame)
    hidden = shown["gold"].eq(HIDDEN)
    assert hidden.any() and not hidden.all(), "the demo has blind and seen cases for Inés"
    assert set(shown.loc[hidden, "answer_ok"]) == {HIDDEN}
    # the cases Inés may see keep their judgement, as text
    seen_ok = shown.loc[~hidden, "answer_ok"].dropna()
    assert set(seen_ok) <= {"yes", "no"} and len(seen_ok) > 0
    stored = frame.loc[seen_ok.index, "answer_ok"].astype(bool)
    assert (seen_ok == "yes").tolist() == stored.tolist()
    table = pa.Table.from_pandas(shown, preserve_index=False)  # raises on a mixed column
    assert pa.types.is_string(table.schema.field("answer_ok").type) or pa.types.is_large_string(
        table.schema.field("answer_ok").type
    )
    assert table.num_rows == len(frame)


def test_a_table_with_nothing_blind_is_left_as_it_is(demo_engine: Engine, tax: Taxonomy) -> None:
    seen = _ines(demo_engine)
    run = evalruns.list_runs(demo_engine)[0]
    frame = evalruns.outputs_frame(demo_engine, run.id, tax)
    mine = frame[~frame["case_id"].isin(sorted(seen.blind_ids(demo_engine, frame["case_id"])))]
    assert blinding.outputs_table(demo_engine, seen, mine) is mine
    pa.Table.from_pandas(mine, preserve_index=False)
