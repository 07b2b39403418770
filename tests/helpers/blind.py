"""What a page shows of a case blind to the user: every text of an AppTest's tree, and the
author's judgement of a case as it would read there."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from streamlit.testing.v1 import AppTest

from review.cases.cases import CaseView
from review.core.taxonomy import Taxonomy
from tests.helpers.pages import readable


def all_text(at: AppTest) -> str:
    """Every text the page shows: element values and labels, dataframe cells and column
    names, metric values, the chosen value of each widget (not the options a select offers:
    those list every decision whatever the case)."""
    found: list[str] = []

    def walk(node: object) -> None:
        for child in getattr(node, "children", {}).values():
            for attr in ("value", "label", "body", "help"):
                try:
                    got = getattr(child, attr, None)
                except Exception:  # an element AppTest does not model has no such value
                    got = None
                if isinstance(got, pd.DataFrame):
                    found.append(got.to_csv(index=False))
                elif isinstance(got, str | int | float):
                    found.append(str(got))
                elif isinstance(got, list | tuple):
                    found.extend(str(g) for g in got)
            walk(child)

    walk(at._tree)
    return "\n".join(readable(t) for t in found)


@dataclass(frozen=True)
class Judgement:
    """What must not show of a case while it is blind to the user."""

    decision: str
    category: str
    notes: str
    roles: tuple[str, ...]

    def shown_in(self, text: str) -> list[str]:
        """The parts of the judgement ``text`` holds."""
        parts = [("decision", self.decision), ("category", self.category)]
        parts += [("notes", self.notes)] + [("role", r) for r in self.roles]
        return [f"{what}: {value}" for what, value in parts if value and value in text]


def judgement(view: CaseView, tax: Taxonomy) -> Judgement:
    return Judgement(
        decision=tax.label("decisions", view.expected_decision),
        category=tax.label("categories", view.category),
        notes=view.notes,
        roles=tuple(
            sorted({tax.label("document_roles", d.role) for d in view.documents if d.role})
        ),
    )
