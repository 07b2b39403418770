"""The labeling queue: blind, overlapping labels with reservations, history and adjudication.

- Each ready case needs ``overlap`` independent labels (a setting, default 2).
- Opening a case reserves it to the annotator for ``reservation_minutes``; expired
  reservations return the slot to the queue.
- Labels are append-only: an edit is a new row that names the row it replaces; the current
  label of (case, annotator) is the newest. An edit based on an older row is refused.
- Blind: an annotator sees other labels on a case only after submitting their own.
- Cases whose current labels disagree go to adjudication; the newest adjudication is gold.
"""

# Long module: the queue (the next case, holds, its size and what is left in it), labels and
# their changes, and the blind rule's reads all go through _open_cases, the case lock and the
# one-case clearance check; split apart, each part would reach into the others' private code.

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine, Text, cast, delete, distinct, exists, func, or_, select, update
from sqlalchemy.orm import Session

from review.cases.agreed import current_label_filter, refresh_agreed
from review.core import clearance, readable
from review.core.errors import InputError, PermissionDenied, StaleWriteError
from review.core.identity import Actor, Permission, require
from review.core.taxonomy import Taxonomy
from review.core.terms import CLAIM_VERDICTS, CaseStatus
from review.labels import adjudication, agreement_rollup
from review.labels.queue import NO_FILTER, QueueFilter
from storage import changes
from storage.db import plain_rows, read_session, run_write
from storage.models import (
    Adjudication,
    Case,
    CaseClaim,
    CaseFamily,
    CaseSlice,
    Label,
    Reservation,
    Setting,
    utcnow,
)
from storage.settings import put_setting

SETTINGS_KEY = "labeling"
DEFAULTS: dict[str, Any] = {"overlap": 2, "reservation_minutes": 30}


@dataclass(frozen=True)
class LabelSettings:
    overlap: int
    reservation_minutes: int
    version: int


def get_settings(engine: Engine) -> LabelSettings:
    with read_session(engine) as s:
        row = s.get(Setting, SETTINGS_KEY)
        value = {**DEFAULTS, **(row.value if row else {})}
        return LabelSettings(
            int(value["overlap"]), int(value["reservation_minutes"]), row.version if row else 0
        )


def set_settings(
    engine: Engine, actor: Actor, overlap: int, reservation_minutes: int, expected_version: int
) -> LabelSettings:
    require(actor, Permission.manage_users)
    if not 1 <= overlap <= 10:
        raise InputError("overlap must be between 1 and 10 labels per case")
    if not 1 <= reservation_minutes <= 24 * 60:
        raise InputError("a reservation lasts between 1 minute and 24 hours")

    def work(s: Session) -> LabelSettings:
        value = {"overlap": overlap, "reservation_minutes": reservation_minutes}
        row, before = put_setting(
            s,
            SETTINGS_KEY,
            value,
            actor.email,
            expected_version=expected_version,
            what="the labeling setting",
        )
        changes.record(s, actor.email, "update", "setting", SETTINGS_KEY, before, value)
        return LabelSettings(overlap, reservation_minutes, row.version)

    return run_write(engine, work)


# ---------------------------------------------------------------------------------------
# The queue


def next_case(
    engine: Engine,
    actor: Actor,
    *,
    exclude: Iterable[int] = (),
    now: dt.datetime | None = None,
    queue: QueueFilter = NO_FILTER,
) -> int | None:
    """Reserve and return the next ready case that still needs my label (None when done),
    within the part of the queue ``queue`` names.

    A case I already hold a live reservation on comes first; otherwise the oldest case whose
    labels plus other people's live reservations are below the overlap. Without clearance, a
    case whose text is restricted (:func:`review.core.clearance.restricted_cases`) is not in
    my queue: its question and claims would be hidden from me, so it waits for an annotator
    with clearance.

    The case row is locked before it is reserved and the conditions are checked again after
    the lock, so on PostgreSQL (where the search reads a snapshot) a label or reservation
    saved meanwhile by someone else, or by me in another tab, is never overtaken.
    """
    require(actor, Permission.label)
    cfg = get_settings(engine)
    skip = set(exclude)

    def work(s: Session) -> int | None:
        t = now or utcnow()
        tried = set(skip)
        # the restricted documents' word runs, read once for every case this call looks at
        runs = None if clearance.cleared(actor) else clearance.restricted_runs(s)
        while True:
            mine_held = s.scalar(
                select(Reservation.case_id)
                .join(Case, Case.id == Reservation.case_id)
                .where(
                    Reservation.annotator == actor.email,
                    Reservation.expires_at > t,
                    Case.status == CaseStatus.ready,
                    Reservation.case_id.not_in(sorted(tried)),
                    *queue.conditions(),
                    ~exists().where(
                        Label.case_id == Reservation.case_id, Label.annotator == actor.email
                    ),
                )
                .order_by(Reservation.case_id)
                .limit(1)
            )
            if mine_held is not None:
                case_id = int(mine_held)
                _lock_case(s, case_id)
            else:
                found = s.scalar(
                    _open_cases(actor, t, cfg.overlap)
                    .where(Case.id.not_in(sorted(tried)), *queue.conditions())
                    .order_by(Case.id)
                    .limit(1)
                    .with_for_update(skip_locked=True)
                )
                if found is None:
                    return None
                case_id = int(found)
            # re-read under the case lock: every label and reservation of this case is
            # written under the same lock, so this answer cannot change until we commit
            if s.scalar(
                _open_cases(actor, t, cfg.overlap, held_by_me_counts=True).where(Case.id == case_id)
            ) is None or _unreadable(s, actor, case_id, runs):
                if mine_held is not None:
                    # a case I held that I may no longer take (one of its documents became
                    # restricted meanwhile, and I have no clearance): let go of it
                    s.execute(
                        delete(Reservation).where(
                            Reservation.case_id == case_id, Reservation.annotator == actor.email
                        )
                    )
                tried.add(case_id)
                continue
            _reserve(s, actor, case_id, t, cfg)
            return case_id

    return run_write(engine, work)


def queue_size(
    engine: Engine,
    actor: Actor,
    queue: QueueFilter = NO_FILTER,
    now: dt.datetime | None = None,
) -> int:
    """How many ready cases my queue (the part ``queue`` names) still holds (not labeled by
    me, below the overlap counting other people's live reservations, or held by me; without
    clearance, none that lists a restricted document); at ``now`` (default: the present), for
    the reservations live then. A case that retells a restricted document without listing it
    is counted here but not given to me by :func:`next_case` (telling it apart reads its
    text), so when that returns None while this is not 0, those are what is left."""
    cfg = get_settings(engine)
    t = now or utcnow()
    with read_session(engine) as s:
        ids = (
            _open_cases(actor, t, cfg.overlap, held_by_me_counts=True)
            .where(*queue.conditions())
            .subquery()
        )
        return int(s.scalar(select(func.count()).select_from(ids)) or 0)


#: how many of the cases left in a queue :func:`empty_queue_message` reads to say what they are
LEFT_READ_LIMIT = 5_000


def empty_queue_message(
    engine: Engine, actor: Actor, queue: QueueFilter = NO_FILTER, *, skipped: Iterable[int] = ()
) -> tuple[str, str]:
    """(kind, text) to show when :func:`next_case` found nothing: the queue is empty, or what
    the cases still in it are (skipped this session, or hidden from me without clearance)."""
    cfg = get_settings(engine)
    with read_session(engine) as s:
        ids = list(
            s.scalars(
                _open_cases(actor, utcnow(), cfg.overlap, held_by_me_counts=True)
                .where(*queue.conditions())
                .order_by(Case.id)
                .limit(LEFT_READ_LIMIT + 1)
            )
        )
        hidden = (
            set()
            if clearance.cleared(actor)
            else set(clearance.restricted_cases(s, ids[:LEFT_READ_LIMIT]))
        )
    mine_skipped = len(set(ids) & set(skipped) - hidden)
    parts = []
    if mine_skipped:
        parts.append(
            f"{readable.count(mine_skipped, 'case')} you skipped this session (bring them back "
            "below)"
        )
    if hidden:
        parts.append(
            f"{readable.count(len(hidden), 'case')} whose question retells a restricted "
            "document, which wait for an annotator with clearance"
        )
    if not parts:
        return "success", "Your queue is empty: nothing left to label here."
    more = f" (more than {LEFT_READ_LIMIT:,})" if len(ids) > LEFT_READ_LIMIT else ""
    return "info", f"Nothing more to open here. Left in your queue{more}: {'; '.join(parts)}."


def _open_cases(actor: Actor, t: dt.datetime, overlap: int, held_by_me_counts: bool = False) -> Any:
    """Ready cases I have not labeled whose labels plus other people's live reservations are
    below the overlap (or, with ``held_by_me_counts``, that I hold a live reservation on)."""
    n_labels = (
        select(func.count(func.distinct(Label.annotator)))
        .where(Label.case_id == Case.id)
        .correlate(Case)
        .scalar_subquery()
    )
    n_held = (
        select(func.count(Reservation.id))
        .where(
            Reservation.case_id == Case.id,
            Reservation.annotator != actor.email,
            Reservation.expires_at > t,
        )
        .correlate(Case)
        .scalar_subquery()
    )
    room = n_labels + n_held < overlap
    if held_by_me_counts:
        room = or_(
            room,
            exists().where(
                Reservation.case_id == Case.id,
                Reservation.annotator == actor.email,
                Reservation.expires_at > t,
            ),
        )
    readable = () if clearance.cleared(actor) else (~clearance.lists_restricted_document(),)
    return select(Case.id).where(
        Case.status == CaseStatus.ready,
        ~exists().where(Label.case_id == Case.id, Label.annotator == actor.email),
        room,
        *readable,
    )


def _unreadable(s: Session, actor: Actor, case_id: int, runs: frozenset[str] | None = None) -> bool:
    """Whether the case's text is restricted and I have no clearance: I would label a
    question I cannot read (a case that retells a restricted document without listing it
    is found here, as :func:`_open_cases` only sees the documents a case lists)."""
    if clearance.cleared(actor):
        return False
    return bool(clearance.restricted_cases(s, [case_id], runs))


def _refuse_unreadable(s: Session, actor: Actor, case: Case) -> None:
    if _unreadable(s, actor, case.id):
        raise PermissionDenied(
            f"{case.key} relies on a restricted document, so its question and claims are "
            "hidden from you: only annotators with clearance may label it; nothing was saved"
        )


def _lock_case(s: Session, case_id: int) -> Case | None:
    """Lock the case row (PostgreSQL; SQLite's BEGIN IMMEDIATE already serialises writers).
    Labels and reservations of a case are written only under this lock."""
    return s.get(Case, case_id, with_for_update=True, populate_existing=True)


def _reserve(s: Session, actor: Actor, case_id: int, t: dt.datetime, cfg: LabelSettings) -> None:
    until = t + dt.timedelta(minutes=cfg.reservation_minutes)
    mine = (Reservation.case_id == case_id, Reservation.annotator == actor.email)
    done = s.execute(
        update(Reservation)
        .where(*mine)
        .values(expires_at=until)
        .execution_options(synchronize_session=False)
    )
    if done.rowcount == 0:  # type: ignore[attr-defined]
        s.add(Reservation(case_id=case_id, annotator=actor.email, expires_at=until))
    s.flush()


def reserve(engine: Engine, actor: Actor, case_id: int) -> dt.datetime:
    """Hold a specific case (opened through a deep link) for me; returns the expiry.

    A case I labeled already opens for editing my label (nothing is held). Otherwise the
    queue's rules hold: refused while someone else holds the case (no double work), and
    when it already has the labels the overlap asks for."""
    require(actor, Permission.label)
    cfg = get_settings(engine)

    def work(s: Session) -> dt.datetime:
        case = _lock_case(s, case_id)
        if case is None:
            raise InputError(f"case {case_id} does not exist")
        t = utcnow()
        labeled = select(func.count(func.distinct(Label.annotator))).where(Label.case_id == case_id)
        mine = s.scalar(
            select(func.count()).where(Label.case_id == case_id, Label.annotator == actor.email)
        )
        if mine:
            return t
        _refuse_unreadable(s, actor, case)
        held = s.execute(
            select(Reservation.annotator, Reservation.expires_at)
            .where(
                Reservation.case_id == case_id,
                Reservation.annotator != actor.email,
                Reservation.expires_at > t,
            )
            .limit(1)
        ).first()
        if held is not None:
            raise InputError(
                f"{held.annotator} is labeling this case (held until "
                f"{held.expires_at:%H:%M} UTC); it returns to the queue if they skip it"
            )
        if int(s.scalar(labeled) or 0) >= cfg.overlap:
            raise InputError(
                f"this case already has the {cfg.overlap} labels it needs; take the next "
                "case from your queue"
            )
        _reserve(s, actor, case_id, t, cfg)
        return t + dt.timedelta(minutes=cfg.reservation_minutes)

    return run_write(engine, work)


def release(engine: Engine, actor: Actor, case_id: int) -> None:
    """Give a reserved case back to the queue (skip)."""
    require(actor, Permission.label)

    def work(s: Session) -> None:
        _lock_case(s, case_id)
        s.execute(
            delete(Reservation).where(
                Reservation.case_id == case_id, Reservation.annotator == actor.email
            )
        )

    run_write(engine, work)


# ---------------------------------------------------------------------------------------
# Labels


@dataclass(frozen=True)
class LabelView:
    id: int
    case_id: int
    annotator: str
    decision: str
    reason_codes: tuple[str, ...]
    category: str | None
    rationale: str
    claim_verdicts: tuple[dict[str, Any], ...]
    replaces_id: int | None
    created_at: dt.datetime


def _view(r: Label) -> LabelView:
    return LabelView(
        r.id,
        r.case_id,
        r.annotator,
        r.decision,
        tuple(r.reason_codes),
        r.category,
        r.rationale,
        tuple(r.claim_verdicts),
        r.replaces_id,
        r.created_at,
    )


@dataclass(frozen=True)
class LabelIn:
    decision: str
    reason_codes: tuple[str, ...] = ()
    category: str | None = None
    rationale: str = ""
    claim_verdicts: tuple[dict[str, Any], ...] = field(default_factory=tuple)

    def check(self, tax: Taxonomy, n_claims: int) -> None:
        if self.decision not in tax.decisions:
            raise InputError(
                f"decision {self.decision!r} is not one of: {', '.join(tax.decisions)}"
            )
        bad = [c for c in self.reason_codes if c not in tax.reason_codes]
        if bad:
            raise InputError(f"reason code {bad[0]!r} is not in the taxonomy")
        if len(set(self.reason_codes)) != len(self.reason_codes):
            raise InputError("a reason code is listed twice")
        if not tax.decisions[self.decision].answers and not self.reason_codes:
            raise InputError(f"say why: {self.decision!r} needs at least one reason code")
        if self.category is not None and self.category not in tax.categories:
            raise InputError(f"category {self.category!r} is not in the taxonomy")
        for v in self.claim_verdicts:
            idx = v.get("claim")
            if not isinstance(idx, int) or not 0 <= idx < n_claims:
                raise InputError(f"claim verdict for unknown claim {idx!r}")
            if v.get("verdict") not in CLAIM_VERDICTS:
                raise InputError(
                    f"claim {idx + 1}: verdict must be one of {', '.join(CLAIM_VERDICTS)}"
                )


def needs_reasons(tax: Taxonomy, decision: str | None) -> bool:
    """Whether a label with this decision must say why (the taxonomy's non-answers: abstain,
    clarify, escalate); an answer or partial answer is not asked for reason codes."""
    term = tax.decisions.get(decision) if decision else None
    return term is not None and not term.answers


def label_reasons(tax: Taxonomy, decision: str, picked: Iterable[str]) -> tuple[str, ...]:
    """The reason codes a label with ``decision`` keeps: the picked ones, in the taxonomy's
    order, when the decision asks for reasons; none otherwise (codes picked before the
    decision changed to an answer are not saved)."""
    if not needs_reasons(tax, decision):
        return ()
    chosen = set(picked)
    return tuple(k for k in tax.case_reason_codes() if k in chosen)


def my_label(engine: Engine, actor: Actor, case_id: int) -> LabelView | None:
    with read_session(engine) as s:
        row = s.scalar(
            select(Label)
            .where(Label.case_id == case_id, Label.annotator == actor.email)
            .order_by(Label.id.desc())
            .limit(1)
        )
        return _view(row) if row else None


def submit(
    engine: Engine,
    actor: Actor,
    case_id: int,
    label: LabelIn,
    based_on: int | None,
    tax: Taxonomy,
) -> LabelView:
    """Append my label for a case. ``based_on`` is the id of my label I started editing from
    (None for a first label); if my label changed since (another tab), nothing is saved."""
    require(actor, Permission.label)

    def work(s: Session) -> LabelView:
        # the case lock makes two saves of the same label (two tabs) take turns, so the
        # second one sees the first and is refused below instead of forking the history
        case = _lock_case(s, case_id)
        if case is None:
            raise InputError(f"case {case_id} does not exist")
        _refuse_unreadable(s, actor, case)
        n_claims = int(
            s.scalar(select(func.count(CaseClaim.id)).where(CaseClaim.case_id == case_id)) or 0
        )
        label.check(tax, n_claims)
        latest = s.scalar(
            select(Label)
            .where(Label.case_id == case_id, Label.annotator == actor.email)
            .order_by(Label.id.desc())
            .limit(1)
            .with_for_update()
        )
        latest_id = latest.id if latest else None
        if latest_id != based_on:
            when = f" at {latest.created_at:%Y-%m-%d %H:%M UTC}" if latest else ""
            raise StaleWriteError(
                f"your label on {case.key} was changed{when} (in another tab or session) "
                "after you opened it; nothing was saved. Reload to see it, then edit again."
            )
        # the case's agreement counts before the label, to move the stored ones by the change
        counts_before = agreement_rollup.case_counts(s, [case_id])
        row = Label(
            case_id=case_id,
            annotator=actor.email,
            decision=label.decision,
            reason_codes=list(label.reason_codes),
            category=label.category,
            rationale=label.rationale.strip(),
            claim_verdicts=[dict(v) for v in label.claim_verdicts],
            replaces_id=latest_id,
            created_at=utcnow(),
        )
        s.add(row)
        s.flush()
        refresh_agreed(s, [case_id])  # the stored agreed label moves with the label
        agreement_rollup.refresh_rollup(s, case_id, counts_before, row.id)
        s.execute(
            delete(Reservation).where(
                Reservation.case_id == case_id, Reservation.annotator == actor.email
            )
        )
        changes.record(
            s,
            actor.email,
            "label",
            "case",
            case.key,
            changes.snapshot(latest) if latest else None,
            changes.snapshot(row),
        )
        return _view(row)

    return run_write(engine, work)


def still_blind(engine: Engine, actor: Actor, case_id: int) -> bool:
    """Whether I may still label this case blind: I can label, have not, and it has fewer
    labels than the overlap asks. Then nobody's labels are shown to me, adjudicator or not
    (a reviewer who is also an annotator must not see the others before labeling)."""
    if not actor.can(Permission.label) or my_label(engine, actor, case_id) is not None:
        return False
    overlap = get_settings(engine).overlap
    with read_session(engine) as s:
        n = s.scalar(
            select(func.count(func.distinct(Label.annotator))).where(Label.case_id == case_id)
        )
    return int(n or 0) < overlap


def visible_labels(engine: Engine, actor: Actor, case_id: int) -> list[LabelView] | None:
    """Everyone's current labels on a case, or None while they are hidden from me: I have
    not labeled it and am not an adjudicator, or I may still label it blind."""
    if still_blind(engine, actor, case_id):
        return None
    if not actor.can(Permission.adjudicate) and my_label(engine, actor, case_id) is None:
        return None
    return current_labels(engine, case_id)


def current_labels(engine: Engine, case_id: int) -> list[LabelView]:
    with read_session(engine) as s:
        rows = s.scalars(
            select(Label)
            .where(Label.case_id == case_id, current_label_filter())
            .order_by(Label.annotator)
        )
        return [_view(r) for r in rows]


def history(engine: Engine, case_id: int) -> list[LabelView]:
    with read_session(engine) as s:
        return [
            _view(r)
            for r in s.scalars(select(Label).where(Label.case_id == case_id).order_by(Label.id))
        ]


@dataclass(frozen=True)
class Progress:
    mine: int
    ready_cases: int
    complete_cases: int  # cases with at least `overlap` labels
    labels: int
    overlap: int
    held_by_me: int


def progress(engine: Engine, actor: Actor, queue: QueueFilter = NO_FILTER) -> Progress:
    """My progress and the team's over the ready cases (those ``queue`` names)."""
    cfg = get_settings(engine)
    ready_ids = select(Case.id).where(Case.status == CaseStatus.ready, *queue.conditions())
    with read_session(engine) as s:
        ready = int(s.scalar(select(func.count()).select_from(ready_ids.subquery())) or 0)
        per_case = (
            select(Label.case_id, func.count(func.distinct(Label.annotator)).label("n"))
            .where(Label.case_id.in_(ready_ids))
            .group_by(Label.case_id)
            .subquery()
        )
        complete = int(
            s.scalar(select(func.count()).select_from(per_case).where(per_case.c.n >= cfg.overlap))
            or 0
        )
        labels = int(s.scalar(select(func.sum(per_case.c.n))) or 0)
        mine = int(
            s.scalar(
                select(func.count(func.distinct(Label.case_id))).where(
                    Label.annotator == actor.email, Label.case_id.in_(ready_ids)
                )
            )
            or 0
        )
        held = int(
            s.scalar(
                select(func.count(Reservation.id)).where(
                    Reservation.annotator == actor.email, Reservation.expires_at > utcnow()
                )
            )
            or 0
        )
    return Progress(mine, ready, complete, labels, cfg.overlap, held)


def labels_stamp(engine: Engine) -> tuple[int, int]:
    """(label rows, newest label id): changes whenever a label is added, for caches."""
    with read_session(engine) as s:
        n, newest = s.execute(
            select(func.count(Label.id), func.coalesce(func.max(Label.id), 0))
        ).one()
    return int(n), int(newest)


def labels_frame(engine: Engine) -> pd.DataFrame:
    """Current labels (latest per case and annotator) with the case's slices, category and
    family key (None: in no family), and the label's source and import (None: not imported),
    for the agreement statistics. One row per (case,
    annotator); annotator, decision and category are categorical columns.

    Read through the driver's plain rows (reason codes as JSON text): at 200,000 labels the
    ORM's per-row processing costs seconds, the query itself a fraction of one."""
    stmt = (
        select(
            Label.case_id,
            Case.key,
            Case.category,
            Label.annotator,
            Label.decision,
            cast(Label.reason_codes, Text),
            CaseFamily.key,
            Label.source,
            Label.import_id,
        )
        .join(Case, Case.id == Label.case_id)
        .outerjoin(CaseFamily, CaseFamily.id == Case.family_id)
        .where(current_label_filter())
        .order_by(Label.case_id, Label.annotator)
    )
    slices_stmt = (
        select(CaseSlice.case_id, CaseSlice.slice)
        .where(CaseSlice.case_id.in_(select(Label.case_id).distinct()))
        .order_by(CaseSlice.case_id, CaseSlice.slice)
    )
    with read_session(engine) as s:
        rows = plain_rows(s, stmt)
        slice_rows = plain_rows(s, slices_stmt)
    columns = [
        "case_id",
        "key",
        "case_category",
        "annotator",
        "decision",
        "reason_codes",
        "family",
        "source",
        "import_id",
    ]
    if not rows:
        return pd.DataFrame(columns=[*columns, "slices"])
    df = pd.DataFrame.from_records(rows, columns=columns)
    for col in ("case_category", "annotator", "decision"):
        df[col] = df[col].astype("category")
    df["case_id"] = df["case_id"].astype(np.int64)
    df["reason_codes"] = _parse_lists(df["reason_codes"].tolist())
    slices: dict[int, list[str]] = {}
    for cid, sl in slice_rows:
        slices.setdefault(int(cid), []).append(str(sl))
    df["slices"] = [tuple(slices.get(c, ())) for c in df["case_id"].tolist()]
    return df


def _parse_lists(texts: Iterable[str | None]) -> list[tuple[str, ...]]:
    """JSON lists to tuples, each distinct text parsed once (label code lists repeat)."""
    seen: dict[str | None, tuple[str, ...]] = {}
    out = []
    for t in texts:
        got = seen.get(t)
        if got is None:
            got = seen[t] = tuple(json.loads(t)) if t else ()
        out.append(got)
    return out


# ---------------------------------------------------------------------------------------
# Adjudication


@dataclass(frozen=True)
class GoldView:
    id: int
    case_id: int
    adjudicator: str
    decision: str
    reason_codes: tuple[str, ...]
    note: str
    created_at: dt.datetime


def _disagreement_candidates(after: int, page: int) -> Any:
    """SQL: of the cases after ``after`` in id order, the first ``page`` with two or more
    current labels that differ in decision or in the stored reason-code list; columns
    case_id, key, n (current labels), decisions (distinct decisions) and settled (an
    adjudication at or after their newest label). Lists that hold the same codes in another
    order also count here; ``disagreements`` checks those.

    The labels are grouped in case order from the (case, annotator, id) index and the group
    stops after ``page`` cases, so a page reads the labels of its cases, not every label."""
    n = func.count()
    decisions = func.count(distinct(Label.decision))
    grouped = (
        select(
            Label.case_id.label("case_id"),
            n.label("n"),
            decisions.label("decisions"),
            func.max(Label.created_at).label("last"),
        )
        .where(current_label_filter(), Label.case_id > after)
        .group_by(Label.case_id)
        .having(
            n >= 2, or_(decisions > 1, func.count(distinct(cast(Label.reason_codes, Text))) > 1)
        )
        .order_by(Label.case_id)
        .limit(page)
        .subquery("grouped")
    )
    settled = exists().where(
        Adjudication.case_id == grouped.c.case_id, Adjudication.created_at >= grouped.c.last
    )
    return (
        select(
            grouped.c.case_id,
            Case.key,
            grouped.c.n,
            grouped.c.decisions,
            settled.label("settled"),
        )
        .join(Case, Case.id == grouped.c.case_id)
        .order_by(grouped.c.case_id)
    )


def disagreements(engine: Engine, limit: int = 200) -> list[tuple[int, str, int]]:
    """Cases (id, key, number of current labels), by id, whose current labels disagree on the
    decision or the set of reason codes and that have no adjudication newer than their
    newest label; at most ``limit``. Found in SQL a page of cases at a time (never every
    label)."""
    out: list[tuple[int, str, int]] = []
    after = 0
    page = max(limit, 100)
    with read_session(engine) as s:
        while len(out) < limit:
            rows = s.execute(_disagreement_candidates(after, page)).all()
            if not rows:
                break
            after = int(rows[-1].case_id)
            # same decision everywhere: a real disagreement only if the code sets differ
            check = [int(r.case_id) for r in rows if not r.settled and int(r.decisions) <= 1]
            sets: dict[int, set[tuple[str, ...]]] = {}
            if check:
                for cid, codes in s.execute(
                    select(Label.case_id, Label.reason_codes).where(
                        Label.case_id.in_(check), current_label_filter()
                    )
                ):
                    sets.setdefault(int(cid), set()).add(tuple(sorted(codes or [])))
            for r in rows:
                cid = int(r.case_id)
                if not r.settled and (int(r.decisions) > 1 or len(sets.get(cid, ())) > 1):
                    out.append((cid, str(r.key), int(r.n)))
            if len(rows) < page:
                break
    return out[:limit]


def adjudicate(
    engine: Engine,
    actor: Actor,
    case_id: int,
    decision: str,
    reason_codes: Iterable[str],
    note: str,
    tax: Taxonomy,
) -> GoldView:
    """Set the gold label of a case (appended; earlier gold labels stay in the history).
    Refused to a reviewer who labeled the case unless an admin allows it (adjudication)."""
    require(actor, Permission.adjudicate)
    if still_blind(engine, actor, case_id):
        raise PermissionDenied(
            "you may still label this case blind: label it first, or adjudicate it once it "
            "has the labels it needs"
        )
    refusal = adjudication.self_adjudication_refusal(engine, actor, case_id)
    if refusal is not None:  # a reviewer does not settle a case they labeled (unless allowed)
        raise PermissionDenied(refusal)
    reasons = tuple(reason_codes)
    LabelIn(decision, reasons).check(tax, 0)
    if not note.strip():
        raise InputError("say why: the adjudication note is required")

    def work(s: Session) -> GoldView:
        # under the case lock, as labels are written: the stored agreed label of the case is
        # refreshed from a view no other writer of this case can change meanwhile
        case = _lock_case(s, case_id)
        if case is None:
            raise InputError(f"case {case_id} does not exist")
        row = Adjudication(
            case_id=case_id,
            adjudicator=actor.email,
            decision=decision,
            reason_codes=list(reasons),
            note=note.strip(),
            created_at=utcnow(),
        )
        s.add(row)
        s.flush()
        refresh_agreed(s, [case_id])
        changes.record(s, actor.email, "adjudicate", "case", case.key, None, changes.snapshot(row))
        return GoldView(
            row.id, case_id, row.adjudicator, decision, reasons, row.note, row.created_at
        )

    return run_write(engine, work)


def gold_history(engine: Engine, case_id: int) -> list[GoldView]:
    with read_session(engine) as s:
        return [
            GoldView(
                r.id,
                r.case_id,
                r.adjudicator,
                r.decision,
                tuple(r.reason_codes),
                r.note,
                r.created_at,
            )
            for r in s.scalars(
                select(Adjudication)
                .where(Adjudication.case_id == case_id)
                .order_by(Adjudication.id)
            )
        ]
