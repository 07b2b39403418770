"""What the Runs page keeps per data stamp (review.evaluation.runview): the same figures as
runmetrics computes from the run's frame, restriction marked once and withheld per viewer
as clearance.for_viewer does, and a stamp that moves with whatever the kept copy reads."""

from __future__ import annotations

import pandas as pd
from sqlalchemy import Engine, select, update

from review.core.clearance import REDACTED
from review.core.taxonomy import Taxonomy
from review.evaluation import clearance, evalruns, runmetrics, runview
from review.labels import labeling
from storage.db import read_session, write_session
from storage.models import Document
from tests.helpers.actors import make_actor
from tests.helpers.transact import write

NO_CLEARANCE = make_actor("product_owner", "po@example.org")
CLEARED = make_actor("admin", "admin@example.org", clearance=True)


def test_the_kept_view_holds_the_figures_runmetrics_computes(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    decisions = list(tax.decisions)
    for run in evalruns.list_runs(demo_engine):
        for partial in (False, True):
            view = runview.one_run(demo_engine, run.id, tax, partial_allowed=partial)
            frame = evalruns.outputs_frame(demo_engine, run.id, tax)
            perturbed = runmetrics.judge_perturbed(
                evalruns.perturbed_frame(demo_engine, run.id, tax)
            )
            pd.testing.assert_frame_equal(
                view.summary, runmetrics.summary_table(frame, partial_allowed=partial)
            )
            pd.testing.assert_frame_equal(view.recall, runmetrics.state_recall(frame, decisions))
            pd.testing.assert_frame_equal(view.confusion, runmetrics.confusion(frame, decisions))
            pd.testing.assert_frame_equal(
                view.checks, runmetrics.metamorphic_checks(frame, perturbed)
            )
            for actor in (NO_CLEARANCE, CLEARED):
                pd.testing.assert_frame_equal(
                    clearance.withhold(actor, view.frame),
                    clearance.for_viewer(demo_engine, actor, frame),
                )
                pd.testing.assert_frame_equal(
                    clearance.withhold(actor, view.perturbed),
                    clearance.for_viewer(demo_engine, actor, perturbed),
                )


def test_a_comparison_is_runmetrics_on_both_frames(demo_engine: Engine, tax: Taxonomy) -> None:
    b, a = evalruns.list_runs(demo_engine)[:2]
    got = runview.compare(demo_engine, a.id, b.id, tax, partial_allowed=False)
    da = evalruns.outputs_frame(demo_engine, a.id, tax)
    db = evalruns.outputs_frame(demo_engine, b.id, tax)
    pd.testing.assert_frame_equal(got.bootstrap, runmetrics.paired_bootstrap(da, db))
    pd.testing.assert_frame_equal(got.flips, runmetrics.decision_flips(da, db))


def test_the_stamp_moves_with_labels_case_edits_and_restriction(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    from review.cases import cases

    run = evalruns.list_runs(demo_engine)[0]
    frame = evalruns.outputs_frame(demo_engine, run.id, tax)
    stamps = [runview.stamp(demo_engine, run.id), runview.stamp(demo_engine, None)]
    assert runview.stamp(demo_engine, run.id) == stamps[0]  # nothing changed
    assert runview.stamp(demo_engine, None) == stamps[1]

    def moved() -> None:
        now = [runview.stamp(demo_engine, run.id), runview.stamp(demo_engine, None)]
        assert now[0] != stamps[0] and now[1] != stamps[1]
        stamps[:] = now

    case = int(frame["case_id"].iloc[0])
    labeling.submit(
        demo_engine,
        make_actor("annotator", "a@example.org"),
        case,
        labeling.LabelIn("escalate", ("restricted_topic",)),
        None,
        tax,
    )
    moved()
    view = cases.get_case(demo_engine, case)
    assert view is not None
    edited = cases.CaseIn.model_validate({**view.record, "notes": view.record["notes"] + " +"})
    write(demo_engine, cases.update_case, CLEARED, view.id, view.version, edited, tax)
    moved()
    with read_session(demo_engine) as s:
        public = s.scalars(
            select(Document.doc_key).where(Document.access_scope != "restricted")
        ).first()
    with write_session(demo_engine) as s:
        s.execute(
            update(Document).where(Document.doc_key == public).values(access_scope="restricted")
        )
    moved()
    # and the kept view read afresh follows the corpus as it is now
    after = runview.one_run(demo_engine, run.id, tax, partial_allowed=False)
    hidden = clearance.withhold(NO_CLEARANCE, after.frame)
    assert (hidden.loc[after.frame["restricted"], "text"] == REDACTED).all()
