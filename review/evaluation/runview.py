"""What the Runs page shows of one run, and of two runs compared, worked out in one go from
the stored outputs, so that a page can keep it per data stamp and serve every viewer and
every rerun from the copy kept (the figures are the same for everyone; only the text a user
without clearance may not read, and the judgement of cases blind to a user, are withheld
when shown, by :func:`review.evaluation.clearance.withhold` and
:mod:`review.evaluation.blinding`).

:func:`stamp` says when a kept copy is stale: the outputs' stamp
(:func:`review.evaluation.evalruns.outputs_stamp`) and the restricted documents' (a document
whose access scope changes restricts, or frees, the outputs quoting it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlalchemy import Engine, func, select

from review.core.clearance import RESTRICTED_SCOPE
from review.core.taxonomy import Taxonomy
from review.evaluation import clearance, evalruns, runmetrics
from storage.db import read_session
from storage.models import (
    Adjudication,
    Case,
    CaseDocument,
    CaseFamily,
    CaseSlice,
    Document,
    EvalOutput,
    Label,
)

__all__ = ["Comparison", "RunView", "compare", "one_run", "stamp"]


def stamp(engine: Engine, run_id: int | None) -> tuple[Any, ...]:
    """A cache key of what :func:`one_run` (``run_id``) or the drift over every run (None)
    reads: it moves with every output, and with every change to the cases those outputs are
    on, their documents, slices, labels and adjudications (outputs, labels, adjudications,
    documents and families are only added or deleted, so a count and the newest id move; a
    case edit bumps its version and replaces its documents and slices), a new document
    version or family, and a change of a document's access scope (a document restricted
    later restricts, or frees, the outputs quoting it).

    Only the run's cases are aggregated (as
    :func:`review.evaluation.evalruns.outputs_stamp` does for every case, at 50,000 cases
    and 200,000 labels a fifth of a Runs page rerun): index look-ups per case."""
    of_run = [EvalOutput.run_id == run_id] if run_id is not None else []
    mine = select(EvalOutput.case_id).where(*of_run)

    def count_max(model: Any, *where: Any) -> list[Any]:
        return [
            select(func.count()).select_from(model).where(*where),
            select(func.coalesce(func.max(model.id), 0)).where(*where),
        ]

    restricted = Document.access_scope == RESTRICTED_SCOPE
    parts = [
        *count_max(EvalOutput, *of_run),
        select(func.coalesce(func.sum(Case.version), 0)).where(Case.id.in_(mine)),
        *count_max(CaseDocument, CaseDocument.case_id.in_(mine)),
        select(func.count()).select_from(CaseSlice).where(CaseSlice.case_id.in_(mine)),
        *count_max(Label, Label.case_id.in_(mine)),
        *count_max(Adjudication, Adjudication.case_id.in_(mine)),
        *count_max(Document),
        *count_max(CaseFamily),
        select(func.count()).select_from(Document).where(restricted),
        select(func.coalesce(func.sum(Document.id), 0)).where(restricted),
    ]
    with read_session(engine) as s:
        row = s.execute(select(*(p.scalar_subquery() for p in parts))).one()
    return (run_id, *(int(v or 0) for v in row))


@dataclass(frozen=True)
class RunView:
    """One run as the Runs page shows it: ``frame`` is
    :func:`review.evaluation.evalruns.outputs_frame` with the ``restricted`` column,
    ``perturbed`` the judged perturbed answers (runmetrics.judge_perturbed) with it; the rest
    are runmetrics' tables of ``frame`` (summary_table, state_recall, confusion,
    metamorphic_checks)."""

    frame: pd.DataFrame
    perturbed: pd.DataFrame
    summary: pd.DataFrame
    recall: pd.DataFrame
    confusion: pd.DataFrame
    checks: pd.DataFrame


def one_run(engine: Engine, run_id: int, tax: Taxonomy, *, partial_allowed: bool) -> RunView:
    """The figures and tables of run ``run_id`` (see :class:`RunView`)."""
    decisions = list(tax.decisions)
    frame = clearance.mark_restricted(engine, evalruns.outputs_frame(engine, run_id, tax))
    perturbed = clearance.mark_restricted(
        engine, runmetrics.judge_perturbed(evalruns.perturbed_frame(engine, run_id, tax))
    )
    return RunView(
        frame=frame,
        perturbed=perturbed,
        summary=runmetrics.summary_table(frame, partial_allowed=partial_allowed),
        recall=runmetrics.state_recall(frame, decisions),
        confusion=runmetrics.confusion(frame, decisions),
        checks=runmetrics.metamorphic_checks(frame, perturbed),
    )


@dataclass(frozen=True)
class Comparison:
    """Run B against run A: runmetrics.paired_bootstrap and runmetrics.decision_flips."""

    bootstrap: pd.DataFrame
    flips: pd.DataFrame


def compare(
    engine: Engine, run_a: int, run_b: int, tax: Taxonomy, *, partial_allowed: bool
) -> Comparison:
    """Run ``run_b`` (after) against ``run_a`` (before)."""
    da = evalruns.outputs_frame(engine, run_a, tax)
    db = evalruns.outputs_frame(engine, run_b, tax)
    return Comparison(
        bootstrap=runmetrics.paired_bootstrap(da, db, partial_allowed=partial_allowed),
        flips=runmetrics.decision_flips(da, db),
    )
