"""Adjudication: who may set the gold label of a case whose labels disagree, the reviewer's
list of such cases, and the evidence shown beside the labels.

- A reviewer does not adjudicate a case they labeled themselves, unless an admin allows it
  (the ``adjudication`` setting, ``self_adjudication``; off by default). The gold-label writer
  (``labeling.adjudicate``) refuses it with :func:`self_adjudication_refusal`;
  :func:`reviewer_queue` leaves such cases out of the reviewer's list while the rule holds,
  and marks them "you labeled this" when it is allowed.
- :func:`case_evidence`: the case's documents beside the labels, clearance-checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from review.cases.cases import CaseView
from review.core import clearance
from review.core.errors import InputError
from review.core.identity import Actor, Permission, require
from review.corpus import corpus
from storage import changes
from storage.db import one_of, read_session, run_write
from storage.models import Label, Setting
from storage.settings import put_setting

# review.labels.labeling keeps the disagreement list and the gold-label writer (``adjudicate``),
# which asks this module whether the reviewer may adjudicate; so this module does not import
# labeling.

SETTINGS_KEY = "adjudication"
DEFAULTS: dict[str, Any] = {"self_adjudication": False}


@dataclass(frozen=True)
class AdjudicationSettings:
    """Whether a reviewer may adjudicate a case they labeled; ``version`` 0: never saved."""

    self_adjudication: bool
    version: int


def get_settings(engine: Engine) -> AdjudicationSettings:
    with read_session(engine) as s:
        row = s.get(Setting, SETTINGS_KEY)
        value = {**DEFAULTS, **(row.value if row else {})}
        return AdjudicationSettings(bool(value["self_adjudication"]), row.version if row else 0)


def set_settings(
    engine: Engine, actor: Actor, self_adjudication: bool, expected_version: int
) -> AdjudicationSettings:
    """Allow (or forbid) reviewers to adjudicate cases they labeled. Admins only; refused
    when someone saved the setting since ``expected_version``; audited."""
    require(actor, Permission.manage_users)
    if not isinstance(self_adjudication, bool):
        raise InputError("self-adjudication is either allowed or not (true or false)")

    def work(s: Session) -> AdjudicationSettings:
        value = {"self_adjudication": self_adjudication}
        row, before = put_setting(
            s,
            SETTINGS_KEY,
            value,
            actor.email,
            expected_version=expected_version,
            what="the adjudication setting",
        )
        changes.record(s, actor.email, "update", "setting", SETTINGS_KEY, before, value)
        return AdjudicationSettings(self_adjudication, row.version)

    return run_write(engine, work)


def labeled_by(engine: Engine, email: str, case_ids: Iterable[int]) -> set[int]:
    """Which of ``case_ids`` ``email`` has labeled (any label, edited or not)."""
    ids = sorted(set(case_ids))
    if not ids:
        return set()
    with read_session(engine) as s:
        return {
            int(c)
            for c in s.scalars(
                select(Label.case_id)
                .where(Label.annotator == email, one_of(s, Label.case_id, ids))
                .distinct()
            )
        }


def self_adjudication_refusal(engine: Engine, actor: Actor, case_id: int) -> str | None:
    """Why ``actor`` may not adjudicate this case because they labeled it (None: they did
    not, or an admin allows it)."""
    if not labeled_by(engine, actor.email, [case_id]):
        return None
    if get_settings(engine).self_adjudication:
        return None
    return (
        "you labeled this case yourself, so another reviewer sets its gold label (an admin "
        "can allow reviewers to adjudicate cases they labeled: Admin, Settings tab)"
    )


@dataclass(frozen=True)
class QueueEntry:
    """A case in a reviewer's adjudication list: ``labels`` current labels that disagree;
    ``mine``: the reviewer labeled it (listed only while self-adjudication is allowed)."""

    case_id: int
    key: str
    labels: int
    mine: bool


@dataclass(frozen=True)
class ReviewerQueue:
    """The reviewer's adjudication list; ``hidden``: disagreements left out because the
    reviewer labeled them; ``limited``: the list stops at the limit (there may be more)."""

    entries: tuple[QueueEntry, ...]
    hidden: int
    limited: bool

    def ids(self) -> list[int]:
        return [e.case_id for e in self.entries]

    def neighbours(self, case_id: int | None) -> tuple[int | None, int | None]:
        """The cases before and after ``case_id`` in the list (None at either end; a case
        not in the list has the first case after it and nothing before)."""
        ids = self.ids()
        if case_id not in ids:
            return None, (ids[0] if ids else None)
        i = ids.index(case_id)
        return (ids[i - 1] if i > 0 else None), (ids[i + 1] if i + 1 < len(ids) else None)

    def position(self, case_id: int | None) -> int | None:
        """1-based place of ``case_id`` in the list; None when it is not listed."""
        ids = self.ids()
        return ids.index(case_id) + 1 if case_id in ids else None


def reviewer_queue(
    engine: Engine, actor: Actor, found: Sequence[tuple[int, str, int]], limit: int
) -> ReviewerQueue:
    """Of ``found`` (``labeling.disagreements(engine, limit)``: case id, key, labels), the
    cases ``actor`` can adjudicate: without the cases they labeled while self-adjudication is
    not allowed (counted in ``hidden``), marked ``mine`` when it is."""
    mine = labeled_by(engine, actor.email, [cid for cid, _, _ in found])
    allowed = get_settings(engine).self_adjudication
    entries = tuple(
        QueueEntry(cid, key, n, cid in mine) for cid, key, n in found if allowed or cid not in mine
    )
    return ReviewerQueue(entries, len(found) - len(entries), len(found) >= limit)


# ---------------------------------------------------------------------------------------
# The evidence beside the labels


@dataclass(frozen=True)
class EvidenceDoc:
    """A document of the case as the adjudicator may read it: ``body`` None with the reason
    in ``withheld`` where clearance is needed (a restricted document, or one forbidden to the
    case's identity), the title hidden for a restricted one, as the Cases page does."""

    document_id: int
    ref: str
    title: str
    role: str
    visibility: str
    access_scope: str
    body: str | None
    withheld: str | None


def case_evidence(engine: Engine, actor: Actor, view: CaseView) -> list[EvidenceDoc]:
    """The case's documents with their text, clearance-checked for ``actor``."""
    out = []
    for d in view.documents:
        forbidden = d.visibility == "forbidden"
        title = clearance.title(actor, d.title, d.access_scope)
        body: str | None = None
        withheld: str | None = None
        if not clearance.may_see_document(actor, d.access_scope):
            withheld = "Restricted document: its text is shown only to users with clearance."
        elif not clearance.may_see(actor, forbidden):
            withheld = "Forbidden to this identity: its text is shown only to users with clearance."
        else:
            body = corpus.get_document(engine, actor, d.document_id).body
        out.append(
            EvidenceDoc(
                d.document_id, d.ref, title, d.role, d.visibility, d.access_scope, body, withheld
            )
        )
    return out
