"""What of a case a user may see now: the one blind rule every view of a case asks.

A case carries its author's judgement: the expected decision, message and reason codes, the
suggested category, the family's evidence state, the role of each document (decisive,
distractor, superseded, ...), the agreed label, and the author's notes (which often state the
answer). A user who may still give a case one of its independent labels sees none of that
anywhere: not on the Cases page, in an export, in the builder, in a run's outputs or in
adjudication. The case is blind to them when

- it is ready (in the labeling queue; a draft is still being built and is not labeled),
- they hold a role that labels cases,
- they did not write the case nor confirm its expected decision in the builder (they know
  the judgement already),
- they have not labeled it, and
- it has fewer labels than the overlap asks (so it still waits for their label).

After they label it, or once it has all its labels, the judgement shows. A user who cannot
label (reviewer, product owner, compliance, admin) is never blind. The overlap is the labeling
setting; :func:`review.labels.blind.sight` builds the :class:`Sight` of a user from it, and the
views of every area take that sight (cases may not read the labels area's settings).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import IO, Any

from sqlalchemy import ColumnElement, Engine, and_, case, exists, false, func, or_, select

from review.cases import cases
from review.cases.cases import CaseDocView, CaseFilter, CaseRow, CaseView
from review.core.identity import Actor
from review.core.terms import CaseStatus
from storage.db import read_session
from storage.models import Case, CaseSuggestion, Label

__all__ = [
    "BLIND_NOTE",
    "HIDDEN",
    "JUDGEMENT_KEYS",
    "OPEN",
    "Sight",
    "blind_record",
    "blind_row",
    "blind_view",
    "count_cases",
    "export_cases",
    "get_case",
    "list_cases",
]

#: What a hidden field reads as
HIDDEN = "hidden until you label it"

#: What a page says about a case blind to the user
BLIND_NOTE = (
    "Blind: you may still label this case, so its expected decision, reasons, category, "
    "evidence state, document roles and the author's notes stay hidden until you do."
)

#: The keys of a canonical case record that carry the author's judgement
JUDGEMENT_KEYS = (
    "expected_decision",
    "expected_message",
    "reason_codes",
    "category",
    "evidence_state",
    "notes",
    "agreed",
)


@dataclass(frozen=True)
class Sight:
    """The user looking at cases, as the blind rule needs them: their address, whether they
    may label, and how many labels a case needs (the labeling overlap)."""

    email: str
    may_label: bool
    overlap: int

    def blind_clause(self) -> ColumnElement[bool]:
        """SQL over ``Case``: the case is blind to this user."""
        if not self.may_label or self.overlap < 1:
            return false()
        # "no label of mine and fewer than overlap annotators" as one look at the case's
        # labels: the annotators, plus overlap for any label of mine. A separate NOT EXISTS
        # for my labels made PostgreSQL hash every label of the user first (167,000 rows,
        # half a GB of pages read cold, at 2,000,000 labels) to list 25 cases.
        mine = func.count(case((Label.annotator == self.email, 1)))
        n_labels = (
            select(func.count(func.distinct(Label.annotator)) + self.overlap * mine)
            .where(Label.case_id == Case.id)
            .correlate(Case)
            .scalar_subquery()
        )
        return and_(
            Case.status == CaseStatus.ready,
            or_(Case.created_by.is_(None), Case.created_by != self.email),
            ~exists().where(
                CaseSuggestion.case_id == Case.id, CaseSuggestion.confirmed_by == self.email
            ),
            n_labels < self.overlap,
        )

    def blind_ids(self, engine: Engine, case_ids: Iterable[int]) -> frozenset[int]:
        """Of ``case_ids``, those blind to this user."""
        return frozenset(
            int(i) for i in self._blind_of(engine, Case.id, {int(i) for i in case_ids})
        )

    def blind_keys(self, engine: Engine, keys: Iterable[str]) -> frozenset[str]:
        """Of the case keys ``keys``, those blind to this user."""
        return frozenset(str(k) for k in self._blind_of(engine, Case.key, {str(k) for k in keys}))

    def _blind_of(self, engine: Engine, column: Any, values: set[Any]) -> set[Any]:
        """Of ``values`` of the case ``column`` (its id or key), those blind to this user,
        looked up 500 at a time."""
        wanted = sorted(values)
        found: set[Any] = set()
        if not wanted or not self.may_label:
            return found
        with read_session(engine) as s:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                found.update(
                    s.scalars(select(column).where(column.in_(chunk), self.blind_clause()))
                )
        return found

    def is_blind(self, engine: Engine, case_id: int) -> bool:
        return case_id in self.blind_ids(engine, [case_id])


#: Nobody blind: the command line and the system act as administrators, who do not label
OPEN = Sight("", False, 0)


def _blind_doc(d: CaseDocView) -> CaseDocView:
    return dataclasses.replace(d, role=HIDDEN)


def blind_view(view: CaseView) -> CaseView:
    """The case as a user it is blind to sees it: the judgement withheld, the documents by
    reference (authors tend to list the decisive passage first)."""
    docs = sorted((_blind_doc(d) for d in view.documents), key=lambda d: (d.ref, d.document_id))
    return dataclasses.replace(
        view,
        documents=tuple(docs),
        expected_decision=HIDDEN,
        expected_message=None,
        reason_codes=(),
        category=HIDDEN,
        evidence_state=None,
        notes="",
        record=blind_record(view.record),
        agreed=None,
        blind=True,
    )


def blind_row(row: CaseRow) -> CaseRow:
    """A row of the case list as a user it is blind to sees it."""
    return dataclasses.replace(
        row,
        expected_decision=HIDDEN,
        category=HIDDEN,
        evidence_state=None,
        agreed_decision=None,
        agreed_by=None,
        blind=True,
    )


def blind_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """A canonical case record without the judgement (document roles dropped too)."""
    out = {k: v for k, v in record.items() if k not in JUDGEMENT_KEYS}
    docs = record.get("documents")
    if isinstance(docs, list):
        out["documents"] = sorted(
            (
                {k: v for k, v in d.items() if k != "role"} if isinstance(d, dict) else d
                for d in docs
            ),
            key=lambda d: str(d.get("doc_id", "")) if isinstance(d, dict) else "",
        )
    return out


# ------------------------------------------------------------------------------------------
# The case store as a user sees it


def _also(sight: Sight, f: CaseFilter) -> list[ColumnElement[bool]]:
    """A filter on the judgement (expected decision, category) never matches a case blind to
    the user: otherwise the filter itself would tell them its value."""
    if sight.may_label and (f.expected_decision or f.category):
        return [~sight.blind_clause()]
    return []


def count_cases(engine: Engine, sight: Sight, f: CaseFilter, *, viewer: Actor) -> int:
    return cases.count_cases(engine, f, _also(sight, f), viewer=viewer)


def list_cases(
    engine: Engine,
    sight: Sight,
    f: CaseFilter,
    page: int = 1,
    page_size: int = 25,
    *,
    viewer: Actor,
) -> list[CaseRow]:
    """One page of the case list as ``viewer`` may see it: restricted text redacted without
    clearance, and each case blind to the user without its judgement."""
    rows = cases.list_cases(
        engine, f, page=page, page_size=page_size, also=_also(sight, f), viewer=viewer
    )
    blind = sight.blind_ids(engine, [r.id for r in rows])
    return [blind_row(r) if r.id in blind else r for r in rows]


def get_case(engine: Engine, sight: Sight, case_id: int, *, viewer: Actor) -> CaseView | None:
    """One case as ``viewer`` may see it: restricted text redacted without clearance, and
    without its judgement when it is blind to the user."""
    view = cases.get_case(engine, case_id=case_id, viewer=viewer)
    if view is None or not sight.is_blind(engine, view.id):
        return view
    return blind_view(view)


def export_cases(
    engine: Engine, sight: Sight, out: IO[str], f: CaseFilter | None = None, *, viewer: Actor
) -> tuple[int, int]:
    """Write the filtered cases the user may see whole as canonical JSONL; returns (written,
    left out as blind to the user). A record without its judgement could not be imported
    back, so a blind case is left out rather than written in part."""
    flt = f or CaseFilter()
    written = cases.export_cases(engine, out, flt, also=[~sight.blind_clause()], viewer=viewer)
    withheld = cases.count_cases(engine, flt, [sight.blind_clause()]) if sight.may_label else 0
    return written, withheld
