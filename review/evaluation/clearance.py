"""Which outputs of an evaluation run quote restricted content, derived from the corpus as it
is now (never a flag frozen when the run was stored), and the same outputs with their text
withheld from a user without clearance.

An output (or a perturbed re-run of it) is restricted when its case quotes a restricted
document version, when it cites a document any of whose versions is restricted, or when its
text names a restricted document's title or repeats one of its passages (the fragments of
:func:`review.builder.family_checks.restricted_text_in`). A document that becomes restricted
later makes the outputs quoting it restricted from then on, on every surface that reads them
through here. Whether a user may see a restricted output, and what they see instead, is the
verdict of :mod:`review.core.clearance`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pandas as pd
from sqlalchemy import Engine, select

from review.builder.family_checks import repeats_fragment, restricted_fragments
from review.core import clearance
from review.core.identity import Actor
from storage.db import read_session
from storage.models import Document

#: titles shorter than this are common words ("Memo"), not a sign of a leak
MIN_TITLE = 8


@dataclass(frozen=True)
class RestrictedContent:
    """The restricted part of the corpus and the cases that quote it."""

    doc_keys: frozenset[str]
    titles: tuple[str, ...]
    bodies: tuple[str, ...]
    case_ids: frozenset[int]

    def quotes(self, case_id: Any, cited: Iterable[str] | None, text: Any) -> bool:
        """Whether one output quotes restricted content (the rule of the module docs)."""
        if case_id in self.case_ids:
            return True
        if any(str(d).split("@", 1)[0] in self.doc_keys for d in cited or ()):
            return True
        said = text if isinstance(text, str) else ""
        if not said.strip():
            return False
        low = said.lower()
        if any(t in low for t in self.titles):
            return True
        return repeats_fragment(said, self.fragments)

    @cached_property
    def fragments(self) -> tuple[str, ...]:
        """The passages' fragments, worked out once for every output checked."""
        return restricted_fragments(self.bodies)


def restricted_content(engine: Engine, case_ids: Iterable[int] = ()) -> RestrictedContent:
    """The restricted documents of the corpus (every version counts) and which of
    ``case_ids`` quote one of them."""
    with read_session(engine) as s:
        docs = s.execute(
            select(Document.doc_key, Document.title, Document.body).where(
                Document.access_scope == clearance.RESTRICTED_SCOPE
            )
        ).all()
        quoting = clearance.restricted_cases(s, list(case_ids))
    titles = {d.title.strip().lower() for d in docs if len(d.title.strip()) >= MIN_TITLE}
    return RestrictedContent(
        frozenset(d.doc_key for d in docs),
        tuple(sorted(titles)),
        tuple(d.body for d in docs),
        quoting,
    )


def restricted_mask(content: RestrictedContent, frame: pd.DataFrame) -> pd.Series:
    """One boolean per row of an outputs frame (``case_id``, ``cited_doc_ids``, ``text``)."""
    if frame.empty:
        return pd.Series([], dtype=bool, index=frame.index)
    cited = frame["cited_doc_ids"] if "cited_doc_ids" in frame else [None] * len(frame)
    texts = frame["text"] if "text" in frame else [None] * len(frame)
    flags = [
        content.quotes(cid, c, t) for cid, c, t in zip(frame["case_id"], cited, texts, strict=True)
    ]
    return pd.Series(flags, dtype=bool, index=frame.index)


#: the columns of an outputs frame that can carry restricted text
TEXT_COLUMNS = ("text", "base_text", "perturbation")


def mark_restricted(engine: Engine, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with a ``restricted`` column (whatever the viewer): what
    :func:`withhold` reads; it depends on the corpus and the cases, not on who looks, so it
    may be worked out once and kept for every viewer."""
    if frame.empty:
        return frame.assign(restricted=pd.Series([], dtype=bool))
    content = restricted_content(engine, frame["case_id"].unique().tolist())
    return frame.assign(restricted=restricted_mask(content, frame))


def withhold(actor: Actor, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (with the ``restricted`` column of :func:`mark_restricted`) as ``actor``
    sees it: for a user without clearance, the text of its restricted rows (and what a
    perturbation added) withheld."""
    if frame.empty:
        return frame
    mask = frame["restricted"].astype(bool)
    if clearance.cleared(actor) or not mask.any():
        return frame
    out = frame.copy()
    for col in TEXT_COLUMNS:
        if col not in out:
            continue
        if col == "perturbation":
            out[col] = [
                {"withheld": clearance.REDACTED} if hidden else value
                for hidden, value in zip(mask, out[col], strict=True)
            ]
        else:
            out[col] = out[col].where(~mask, clearance.REDACTED)
    return out


def for_viewer(engine: Engine, actor: Actor, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with a ``restricted`` column and, for a user without clearance, the text of
    its restricted rows (and what a perturbation added) withheld."""
    return withhold(actor, mark_restricted(engine, frame))
