"""Per-annotator figures for the Agreement page: how many cases each annotator labelled, how
often their decision matches a reference decision that their own label did not make, Cohen's
kappa against it, and their progress in the labeling queue.

**The reference** of an annotator A's label on a case is, in this order:

* the case's adjudicated decision (its latest adjudication), where it has one;
* otherwise the decision that *every other* current label on the case gives (at least one
  other annotator, all of them the same).

It is not the stored agreed label (``case_agreed``, review.cases.agreed): an agreed label "by
annotators" is the one A's own label helped make, so comparing A with it would count A's vote
for A. A case without an adjudication whose other annotators disagree, or that nobody else
labelled, has no reference and is not compared (the counts say how many were). The reference
compares decisions only (reason codes have their own tables on the page).

**Progress** is A's labels in the current queue: of the ready cases in the page's scope
(slice, category, family; review.labels.queue), how many A has labelled (with a label from
the scope's source or import, when it names one).

With a source or an import in the scope, everything is over the current labels from there:
the reference's "other annotators" too (the adjudicated decision stays the case's).

Everything is counted in SQL (one aggregate over the current labels in scope, grouped by
annotator and decision pair: annotators x decisions x decisions rows, never a row per label);
the per-case others' agreement comes from each case's decision counts, without a self-join."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine, and_, case, distinct, func, literal, null, select

from review.cases.agreed import current_label_filter
from review.core.terms import CaseStatus
from review.labels.agreement import Scope, cohen_kappa_counts, joined_note
from review.labels.agreement_sql import in_scope
from review.labels.queue import QueueFilter
from storage.db import read_session
from storage.models import Adjudication, Case, Label

__all__ = ["ANNOTATOR_COLUMNS", "EAGER_LABELS", "annotator_figures"]

#: Up to this many label rows the Agreement page counts the per-annotator figures with the
#: page; above it, on request: they take a pass over every current label in scope (about a
#: second per 150,000 labels on SQLite), which would double the page's first view at team
#: scale, where the rest of the page reads stored sums (review.labels.agreement_rollup).
EAGER_LABELS = 50_000

#: The per-annotator table's columns.
ANNOTATOR_COLUMNS = [
    "annotator",
    "cases_labelled",
    "queue_labelled",
    "queue_cases",
    "n_compared",
    "n_adjudicated",
    "agreement_with_reference",
    "kappa_vs_reference",
    "note",
]


def _counts(conn: Any, cats: Sequence[str], scope: Scope) -> list[Any]:
    """Rows (annotator, decision, reference decision or NULL, adjudicated 0/1, labels)."""
    cur = in_scope(
        select(Label.case_id, Label.annotator, Label.decision).where(current_label_filter()),
        scope,
    ).subquery("cur")
    item = (
        select(
            cur.c.case_id,
            func.count().label("m"),
            *[
                func.sum(case((cur.c.decision == d, 1), else_=0)).label(f"d{j}")
                for j, d in enumerate(cats)
            ],
        )
        .group_by(cur.c.case_id)
        .subquery("item")
    )
    latest = (
        select(Adjudication.case_id, func.max(Adjudication.id).label("adj_id"))
        .group_by(Adjudication.case_id)
        .subquery("latest")
    )
    adj = (
        select(latest.c.case_id, Adjudication.decision)
        .join(Adjudication, Adjudication.id == latest.c.adj_id)
        .subquery("adj")
    )
    # the others (m - 1 labels, at least one) all gave d: d's count on the case, less this
    # label's own, is m - 1
    others = case(
        *[
            (
                and_(
                    item.c.m >= 2,
                    item.c[f"d{j}"] - case((cur.c.decision == d, 1), else_=0) == item.c.m - 1,
                ),
                literal(d),
            )
            for j, d in enumerate(cats)
        ],
        else_=null(),
    )
    reference = func.coalesce(adj.c.decision, others).label("reference")
    adjudicated = case((adj.c.decision.is_not(None), 1), else_=0).label("adjudicated")
    stmt = (
        select(cur.c.annotator, cur.c.decision, reference, adjudicated, func.count())
        .select_from(
            cur.join(item, item.c.case_id == cur.c.case_id).outerjoin(
                adj, adj.c.case_id == cur.c.case_id
            )
        )
        .group_by(cur.c.annotator, cur.c.decision, reference, adjudicated)
    )
    return list(conn.execute(stmt).all())


def _label_filters(stmt: Any, scope: Scope) -> Any:
    """The scope's filters on the labels themselves (their source and import)."""
    if scope.source:
        stmt = stmt.where(Label.source == scope.source)
    if scope.import_id is not None:
        stmt = stmt.where(Label.import_id == scope.import_id)
    return stmt


def _queue(conn: Any, scope: Scope) -> tuple[int, dict[str, int]]:
    """Ready cases in scope, and per annotator how many of them they labelled (with a label
    from the scope's source or import, when it names one)."""
    queue = QueueFilter(
        family=scope.family or None, slice=scope.slice_ or None, category=scope.category or None
    )
    ready = select(Case.id).where(Case.status == CaseStatus.ready, *queue.conditions())
    n_ready = int(conn.scalar(select(func.count()).select_from(ready.subquery())) or 0)
    per = conn.execute(
        _label_filters(
            select(Label.annotator, func.count(distinct(Label.case_id))).where(
                Label.case_id.in_(ready)
            ),
            scope,
        ).group_by(Label.annotator)
    ).all()
    return n_ready, {str(a): int(n) for a, n in per}


def annotator_figures(
    engine: Engine,
    decisions: Sequence[str],
    *,
    slice_: str = "",
    category: str = "",
    family: str = "",
    source: str = "",
    import_id: int | None = None,
) -> pd.DataFrame:
    """One row per annotator with a current label in scope (in code-point order of their
    address), columns ``ANNOTATOR_COLUMNS``: cases labelled; how many of them have a
    reference (module doc) and how many of those an adjudication; the share that matches
    it and Cohen's kappa against it (NaN with the reason in ``note`` when undefined); the
    ready cases in scope and how many of them the annotator labelled."""
    cats = list(dict.fromkeys(decisions))
    scope = Scope(slice_, category, family, source, import_id)
    with read_session(engine) as s:
        conn = s.connection()
        rows = _counts(conn, cats, scope)
        n_ready, queue_done = _queue(conn, scope)
    labelled: dict[str, int] = {}
    adjudicated: dict[str, int] = {}
    confusion: dict[str, dict[tuple[str, str], int]] = {}
    for who, decision, ref, adj, n in rows:
        a = str(who)
        labelled[a] = labelled.get(a, 0) + int(n)
        if ref is None:
            continue
        adjudicated[a] = adjudicated.get(a, 0) + int(adj) * int(n)
        cell = confusion.setdefault(a, {})
        key = (str(decision), str(ref))
        cell[key] = cell.get(key, 0) + int(n)
    out = []
    for a in sorted(labelled):
        pairs = confusion.get(a, {})
        compared = sum(pairs.values())
        agree = sum(n for (x, y), n in pairs.items() if x == y)
        kappa = cohen_kappa_counts(pairs)
        notes = []
        if not compared:
            notes.append(
                "no reference yet: no case of theirs is adjudicated or has other annotators "
                "who agree"
            )
        elif kappa is None:
            only = sorted({x for x, _ in pairs})[0]
            notes.append(f"kappa undefined: they and the reference gave only {only!r}")
        out.append(
            {
                "annotator": a,
                "cases_labelled": labelled[a],
                "queue_labelled": queue_done.get(a, 0),
                "queue_cases": n_ready,
                "n_compared": compared,
                "n_adjudicated": adjudicated.get(a, 0),
                "agreement_with_reference": agree / compared if compared else np.nan,
                "kappa_vs_reference": np.nan if kappa is None else kappa,
                "note": joined_note(*notes),
            }
        )
    frame = pd.DataFrame(out, columns=ANNOTATOR_COLUMNS)
    return frame.astype(
        {
            "annotator": object,
            "note": object,
            "agreement_with_reference": float,
            "kappa_vs_reference": float,
        }
    )
