"""The parts of the labeling queue an annotator can pick (family, slice, category, split:
conditions applied in SQL by :func:`review.labels.labeling.next_case`, ``queue_size`` and
``progress``), the values they offer, and going back through my own labels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, exists, func, select

from review.cases import choices
from review.core.identity import Actor
from review.core.terms import CaseStatus
from storage.db import read_session
from storage.models import Case, CaseFamily, CaseSlice, Label

__all__ = [
    "NO_FILTER",
    "QueueFacets",
    "QueueFilter",
    "my_labeled_cases",
    "previous_case",
    "queue_facets",
]


@dataclass(frozen=True)
class QueueFilter:
    """Which part of the queue an annotator works on (None: any). Applied in SQL."""

    family: str | None = None
    slice: str | None = None
    category: str | None = None
    split: str | None = None

    def conditions(self) -> list[Any]:
        out: list[Any] = []
        if self.family:
            out.append(
                Case.family_id.in_(select(CaseFamily.id).where(CaseFamily.key == self.family))
            )
        if self.slice:
            out.append(exists().where(CaseSlice.case_id == Case.id, CaseSlice.slice == self.slice))
        if self.category:
            out.append(Case.category == self.category)
        if self.split:
            out.append(Case.split == self.split)
        return out


NO_FILTER = QueueFilter()


@dataclass(frozen=True)
class QueueFacets:
    """The values the queue filters offer: those the ready cases have (the families: the first
    :data:`review.cases.choices.PICKER_LIMIT` + 1, so a picker knows there are more)."""

    families: tuple[str, ...]
    slices: tuple[str, ...]
    categories: tuple[str, ...]
    splits: tuple[str, ...]


def queue_facets(engine: Engine) -> QueueFacets:
    """The values the queue's filters offer, among the ready cases (review.cases.choices)."""
    ready = CaseStatus.ready
    with read_session(engine) as s:
        return QueueFacets(
            tuple(choices.family_keys(s, ready, choices.PICKER_LIMIT)),
            tuple(choices.slice_names(s, ready)),
            tuple(choices.case_values(s, Case.category, ready)),
            tuple(choices.case_values(s, Case.split, ready)),
        )


def my_labeled_cases(engine: Engine, actor: Actor, limit: int = 200) -> list[int]:
    """The cases I labeled, the one I labeled (or relabeled) last first."""
    with read_session(engine) as s:
        newest = func.max(Label.id)
        return [
            int(c)
            for c in s.scalars(
                select(Label.case_id)
                .where(Label.annotator == actor.email)
                .group_by(Label.case_id)
                .order_by(newest.desc())
                .limit(limit)
            )
        ]


def previous_case(engine: Engine, actor: Actor, current: int | None) -> int | None:
    """The case to go back to from ``current``: from a case I have not labeled, the one I
    labeled last; from one I labeled, the one I labeled before it (None: there is none)."""
    mine = my_labeled_cases(engine, actor)
    if current in mine:
        i = mine.index(current)
        return mine[i + 1] if i + 1 < len(mine) else None
    return mine[0] if mine else None
