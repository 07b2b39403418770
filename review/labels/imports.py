"""Labels made in Label Studio or Argilla, imported into the append-only label history.

A tool's reader turns its export into :class:`~review.labels.external.ExternalLabel` records
(submitted annotations only). :func:`import_labels` checks every record and writes all of them
or none, in one transaction:

* the tool's user must be mapped to a workbench user (``users``: the tool's user as the export
  names them, an e-mail or a user id, to a workbench e-mail), and that user must exist, be
  active and hold a role that labels; a user the mapping leaves out is refused, never guessed;
* the case key must name a ready case (a draft is not labeled), the decision must be one of
  the taxonomy's, the reason codes the taxonomy's case reason codes, listed once, and a
  decision that does not answer must give at least one; the lead time, when given, a finite
  number of seconds, not negative;
* the same annotation (the tool's ``ref``) appears once per file, and keeps its case and its
  annotator across imports (a ref that moved is refused: the file is not the one imported
  before).

Every refusal names the record (``where``) and the field, and nothing from the file is written.

Each accepted annotation becomes a label of its workbench user, with ``source`` the tool, the
tool's ref, a digest of what it says, the import it came with, when it was made and its lead
time. It is appended like a label made on the Labeling page: it replaces that user's current
label of the case (``replaces_id``), and the agreed label and the Agreement page's rollup move
with it in the same transaction. Importing the same file again adds nothing (every ref's newest
label has the same digest); an annotation changed in the tool since becomes a new label, the
one imported before kept in the history. Reason codes picked with a decision that answers are
not kept (the labeling page does the same), and counted.

The file is read twice, from ``records`` (a function that opens it afresh): once to check,
once to write; so it is streamed in batches and never held whole.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from sqlalchemy import Engine, and_, func, or_, select, tuple_
from sqlalchemy.orm import Session

from review.cases.agreed import refresh_agreed
from review.core import readable
from review.core.errors import InputError
from review.core.identity import GRANTS, Actor, Permission, Role, require
from review.core.taxonomy import Taxonomy
from review.core.terms import CaseStatus
from review.labels import agreement_rollup
from review.labels.external import TOOLS, ExternalLabel, Skipped
from storage import changes
from storage.db import read_session
from storage.models import Case, Label, LabelImport, User, utcnow

__all__ = [
    "BATCH",
    "ImportReport",
    "LabelFilePreview",
    "import_labels",
    "imports_list",
    "labelers",
    "parse_user_map",
    "passed_over",
    "preview",
    "suggested_users",
    "summary",
]

#: records checked and written per batch
BATCH = 1000
#: the most distinct tool users one file may name (a mapping is given per user)
MAX_USERS = 10_000


@dataclass(frozen=True)
class LabelFilePreview:
    """What a file holds before anything is written: the submitted annotations per tool user,
    the distinct case keys, and what the reader passed over."""

    annotations: int
    users: dict[str, int]
    cases: int
    skipped: dict[str, int]


@dataclass(frozen=True)
class ImportReport:
    """What an import wrote: labels for annotations never imported before (``added``), new
    labels for annotations changed since their last import (``changed``), annotations whose
    newest label already says the same (``unchanged``, nothing written), reason codes not kept
    because their decision answers, what the reader passed over, and the import's id (None
    when nothing was written)."""

    import_id: int | None
    added: int
    changed: int
    unchanged: int
    reasons_dropped: int
    skipped: dict[str, int]
    cases: int
    annotators: tuple[str, ...] = field(default_factory=tuple)

    @property
    def written(self) -> int:
        return self.added + self.changed


def passed_over(skipped: Mapping[str, int]) -> str:
    """What a reader passed over, as a phrase: "cancelled 1, draft 2"."""
    return ", ".join(f"{why} {n:,}" for why, n in sorted(skipped.items()))


def summary(report: ImportReport, tool_name: str) -> str:
    """What an import did, in a sentence or two, for the page and the command line."""
    if report.import_id is None:
        said = (
            f"Nothing new from {tool_name}: "
            f"{readable.count(report.unchanged, 'annotation')} imported before, unchanged."
        )
    else:
        said = (
            f"Import #{report.import_id} from {tool_name}: "
            f"{readable.count(report.added, 'new label')}"
        )
        if report.changed:
            said += (
                f", {readable.count(report.changed, 'changed annotation')} as new labels "
                "(the earlier ones kept in the history)"
            )
        if report.unchanged:
            said += f", {report.unchanged:,} unchanged"
        said += (
            f"; on {readable.count(report.cases, 'case')} by "
            f"{readable.count(len(report.annotators), 'annotator')}."
        )
    if report.reasons_dropped:
        said += (
            f" {readable.count(report.reasons_dropped, 'label')} gave reason codes with a "
            "decision that answers; those codes were not kept."
        )
    if report.skipped:
        said += f" Not labels, passed over: {passed_over(report.skipped)}."
    return said


def _batches(items: Iterable[ExternalLabel]) -> Iterator[list[ExternalLabel]]:
    it = iter(items)
    while batch := list(islice(it, BATCH)):
        yield batch


def preview(records: Iterable[ExternalLabel], skipped: Skipped) -> LabelFilePreview:
    """Read the whole file once (streamed) and say what it holds, for the user mapping. The
    reader's errors (malformed file) propagate."""
    users: dict[str, int] = {}
    keys: set[str] = set()
    n = 0
    for r in records:
        n += 1
        users[r.user] = users.get(r.user, 0) + 1
        if len(users) > MAX_USERS:
            raise InputError(f"{r.where}: more than {MAX_USERS:,} distinct users in one file")
        keys.add(r.case_key)
    return LabelFilePreview(n, users, len(keys), dict(skipped.counts))


def parse_user_map(text: str) -> dict[str, str]:
    """A user mapping written as lines ``tool user = workbench e-mail`` (or with a comma);
    blank lines and lines starting with # are ignored. Refuses a malformed line or a tool user
    mapped twice, naming the line."""
    out: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        sep = "=" if "=" in line else ","
        left, found, right = line.partition(sep)
        tool_user, email = left.strip(), right.strip()
        if not found or not tool_user or not email:
            raise InputError(f"user mapping line {n}: write it as 'tool user = workbench e-mail'")
        if tool_user in out and out[tool_user] != email:
            raise InputError(f"user mapping line {n}: {tool_user!r} is mapped twice")
        out[tool_user] = email
    return out


def _can_label(roles: Iterable[Any]) -> bool:
    for r in roles:
        try:
            role = Role(r)
        except ValueError:
            continue
        if Permission.label in GRANTS[role]:
            return True
    return False


def labelers(engine: Engine) -> list[str]:
    """The e-mails of the active workbench users who label cases: whom a tool's user may be
    mapped to."""
    with read_session(engine) as s:
        rows = s.execute(
            select(User.email, User.roles).where(User.active.is_(True)).order_by(User.email)
        ).all()
    return [str(e) for e, roles in rows if _can_label(roles)]


def suggested_users(engine: Engine, tool_users: Iterable[str]) -> dict[str, str]:
    """Tool users whose name is the e-mail of an active workbench user who labels: a
    suggestion for the mapping, which the importing user still confirms."""
    wanted = [u for u in tool_users if "@" in u]
    if not wanted:
        return {}
    with read_session(engine) as s:
        rows = s.execute(
            select(User.email, User.roles).where(
                func.lower(User.email).in_([u.lower() for u in wanted]), User.active.is_(True)
            )
        ).all()
    by_lower = {e.lower(): e for e, roles in rows if _can_label(roles)}
    return {u: by_lower[u.lower()] for u in wanted if u.lower() in by_lower}


def _check_users(s: Session, users: Mapping[str, str]) -> None:
    emails = sorted(set(users.values()))
    found = {
        e: (active, roles)
        for e, active, roles in s.execute(
            select(User.email, User.active, User.roles).where(User.email.in_(emails))
        ).all()
    }
    for tool_user, email in users.items():
        if email not in found:
            raise InputError(
                f"user mapping: {tool_user!r} is mapped to {email!r}, who is not a workbench user"
            )
        active, roles = found[email]
        if not active:
            raise InputError(f"user mapping: {email!r} (for {tool_user!r}) is deactivated")
        if not _can_label(roles):
            raise InputError(
                f"user mapping: {email!r} (for {tool_user!r}) holds no role that labels cases"
            )


def _check_record(r: ExternalLabel, tool: str, users: Mapping[str, str], tax: Taxonomy) -> None:
    if r.tool != tool:
        raise InputError(f"{r.where}: a {r.tool} record in a {tool} import")
    if not r.ref or len(r.ref) > 300:
        raise InputError(f"{r.where}: field id: the annotation has no id of at most 300 characters")
    if r.user not in users:
        raise InputError(
            f"{r.where}: field user: {r.user!r} is not in the user mapping; map every "
            "annotator of the file to a workbench user"
        )
    if r.decision not in tax.decisions:
        raise InputError(
            f"{r.where}: field decision: {r.decision!r} is not one of {', '.join(tax.decisions)}"
        )
    codes = tax.case_reason_codes()
    bad = [c for c in r.reason_codes if c not in codes]
    if bad:
        raise InputError(
            f"{r.where}: field reason codes: {bad[0]!r} is not a reason code of the taxonomy"
        )
    if len(set(r.reason_codes)) != len(r.reason_codes):
        raise InputError(f"{r.where}: field reason codes: a reason code is listed twice")
    if not tax.decisions[r.decision].answers and not r.reason_codes:
        raise InputError(
            f"{r.where}: field reason codes: {r.decision!r} needs at least one reason code"
        )
    if r.lead_seconds is not None and (not math.isfinite(r.lead_seconds) or r.lead_seconds < 0):
        raise InputError(
            f"{r.where}: field lead time: {r.lead_seconds!r} is not a number of seconds"
        )
    if r.labeled_at is not None and r.labeled_at.tzinfo is None:
        raise InputError(f"{r.where}: field time: {r.labeled_at!r} has no time zone")


def _cases(s: Session, batch: list[ExternalLabel]) -> dict[str, tuple[int, str]]:
    keys = sorted({r.case_key for r in batch})
    found = {
        k: (i, st)
        for i, k, st in s.execute(
            select(Case.id, Case.key, Case.status).where(Case.key.in_(keys))
        ).all()
    }
    for r in batch:
        if r.case_key not in found:
            raise InputError(f"{r.where}: field case key: no case {r.case_key!r} here")
        if found[r.case_key][1] != CaseStatus.ready:
            raise InputError(
                f"{r.where}: field case key: case {r.case_key!r} is a "
                f"{found[r.case_key][1]}; only ready cases are labeled"
            )
    return found


def _before(s: Session, tool: str, batch: list[ExternalLabel]) -> dict[str, Label]:
    """The newest label each ref of the batch was imported as, if any."""
    refs = sorted({r.ref for r in batch})
    newest = (
        select(func.max(Label.id))
        .where(Label.source == tool, Label.source_ref.in_(refs))
        .group_by(Label.source_ref)
    )
    return {
        str(row.source_ref): row for row in s.scalars(select(Label).where(Label.id.in_(newest)))
    }


def _current(s: Session, pairs: set[tuple[int, str]]) -> dict[tuple[int, str], int]:
    """The current label id of each (case id, annotator)."""
    if not pairs:
        return {}
    ordered = sorted(pairs)
    out: dict[tuple[int, str], int] = {}
    for lo in range(0, len(ordered), 400):
        part = ordered[lo : lo + 400]
        cond = (
            tuple_(Label.case_id, Label.annotator).in_(part)
            if s.get_bind().dialect.name == "postgresql"
            else or_(*(and_(Label.case_id == c, Label.annotator == a) for c, a in part))
        )
        for c, a, i in s.execute(
            select(Label.case_id, Label.annotator, func.max(Label.id))
            .where(cond)
            .group_by(Label.case_id, Label.annotator)
        ).all():
            out[(int(c), str(a))] = int(i)
    return out


@dataclass
class _Tally:
    added: int = 0
    changed: int = 0
    unchanged: int = 0
    dropped: int = 0
    newest: int = 0
    cases: set[int] = field(default_factory=set)
    annotators: set[str] = field(default_factory=set)


def _plan(
    s: Session,
    tool: str,
    batch: list[ExternalLabel],
    users: Mapping[str, str],
    tax: Taxonomy,
    refs_seen: set[str],
) -> tuple[dict[str, tuple[int, str]], list[tuple[ExternalLabel, Label | None]]]:
    """Check one batch; return its cases and the records to write with the label each ref
    was imported as before (None: never)."""
    for r in batch:
        _check_record(r, tool, users, tax)
        if r.ref in refs_seen:
            raise InputError(f"{r.where}: field id: annotation {r.ref!r} appears twice in the file")
        refs_seen.add(r.ref)
    found = _cases(s, batch)
    before = _before(s, tool, batch)
    todo: list[tuple[ExternalLabel, Label | None]] = []
    for r in batch:
        old = before.get(r.ref)
        if old is not None:
            if old.case_id != found[r.case_key][0]:
                raise InputError(
                    f"{r.where}: field case key: annotation {r.ref!r} was imported before "
                    f"for another case; this is not the export it came from"
                )
            if old.annotator != users[r.user]:
                raise InputError(
                    f"{r.where}: field user: annotation {r.ref!r} was imported before as "
                    f"{old.annotator!r}, now mapped to {users[r.user]!r}"
                )
        todo.append((r, old))
    return found, todo


def _write(
    s: Session,
    imp: LabelImport,
    found: dict[str, tuple[int, str]],
    todo: list[tuple[ExternalLabel, Label | None]],
    users: Mapping[str, str],
    tax: Taxonomy,
    tally: _Tally,
) -> None:
    fresh = [(r, old) for r, old in todo if old is None or old.source_digest != r.digest()]
    tally.unchanged += len(todo) - len(fresh)
    if not fresh:
        return
    case_ids = sorted({found[r.case_key][0] for r, _ in fresh})
    # lock the cases in id order (PostgreSQL; SQLite's BEGIN IMMEDIATE serialises writers),
    # as the labeling service does for one case, so labels of a case are written in turns
    s.execute(select(Case.id).where(Case.id.in_(case_ids)).order_by(Case.id).with_for_update())
    counts_before = agreement_rollup.case_counts(s, case_ids)
    current = _current(s, {(found[r.case_key][0], users[r.user]) for r, _ in fresh})
    now = utcnow()
    rows: list[Label] = []
    # in rounds, each written with one flush: a round holds at most one label per case and
    # annotator (a later one of the same pair waits for the next round, as it replaces the
    # label written before it and needs its id)
    pending = fresh
    while pending:
        later: list[tuple[ExternalLabel, Label | None]] = []
        written: dict[tuple[int, str], tuple[Label, bool]] = {}
        for r, old in pending:
            pair = (found[r.case_key][0], users[r.user])
            if pair in written:
                later.append((r, old))
                continue
            answers = tax.decisions[r.decision].answers
            if answers and r.reason_codes:
                tally.dropped += 1
            row = Label(
                case_id=pair[0],
                annotator=pair[1],
                decision=r.decision,
                reason_codes=[] if answers else list(r.reason_codes),
                category=None,
                rationale=r.note.strip(),
                claim_verdicts=[],
                replaces_id=current.get(pair),
                created_at=now,
                source=r.tool,
                source_ref=r.ref,
                source_digest=r.digest(),
                import_id=imp.id,
                labeled_at=r.labeled_at,
                lead_seconds=r.lead_seconds,
            )
            s.add(row)
            written[pair] = (row, old is None)
        s.flush()
        for pair, (row, added) in written.items():
            current[pair] = row.id
            rows.append(row)
            if added:
                tally.added += 1
            else:
                tally.changed += 1
            tally.cases.add(pair[0])
            tally.annotators.add(pair[1])
        pending = later
    newest = max(row.id for row in rows)
    tally.newest = max(tally.newest, newest)
    refresh_agreed(s, case_ids)
    agreement_rollup.refresh_rollup_cases(s, case_ids, counts_before, len(rows), newest)


def import_labels(
    s: Session,
    actor: Actor,
    tool: str,
    records: Callable[[Skipped], Iterable[ExternalLabel]],
    users: Mapping[str, str],
    tax: Taxonomy,
    *,
    file_name: str,
    sha256: str,
) -> ImportReport:
    """Import one tool export whole, or refuse it whole (see the module doc), in the caller's
    transaction. ``records`` opens the file afresh and reads it with the tool's reader,
    counting what it passes over in the :class:`Skipped` it is given; it is called once per
    attempt of the transaction (a busy database re-runs the whole of it)."""
    require(actor, Permission.exchange_labels)
    if tool not in TOOLS:
        raise InputError(f"unknown labeling tool {tool!r}: one of {', '.join(TOOLS)}")
    if not users:
        raise InputError("a user mapping is required: map every annotator of the file")
    if len(users) > MAX_USERS:
        raise InputError(f"the user mapping names more than {MAX_USERS:,} users")
    mapping = {str(k): str(v) for k, v in users.items()}
    _check_users(s, mapping)
    imp = LabelImport(
        tool=tool,
        file_name=file_name[:500],
        sha256=sha256,
        imported_by=actor.email,
        imported_at=utcnow(),
        users=mapping,
        added=0,
        changed=0,
        unchanged=0,
        skipped={},
    )
    s.add(imp)
    s.flush()
    tally = _Tally()
    skipped = Skipped()
    refs_seen: set[str] = set()
    for batch in _batches(records(skipped)):
        found, todo = _plan(s, tool, batch, mapping, tax, refs_seen)
        _write(s, imp, found, todo, mapping, tax, tally)
    if not tally.added and not tally.changed:
        s.delete(imp)  # nothing new: the file was imported before, or held no label
        s.flush()
        return ImportReport(None, 0, 0, tally.unchanged, 0, dict(skipped.counts), 0, ())
    imp.added, imp.changed, imp.unchanged = tally.added, tally.changed, tally.unchanged
    imp.skipped = dict(skipped.counts)
    s.flush()
    changes.record(
        s,
        actor.email,
        "import labels",
        "label_import",
        imp.id,
        None,
        changes.snapshot(imp),
    )
    return ImportReport(
        imp.id,
        tally.added,
        tally.changed,
        tally.unchanged,
        tally.dropped,
        dict(skipped.counts),
        len(tally.cases),
        tuple(sorted(tally.annotators)),
    )


def imports_list(engine: Engine, limit: int = 50) -> list[dict[str, Any]]:
    """The newest label imports, for the page: id, tool, file, sha256 (short), who, when,
    added, changed, unchanged, skipped."""
    with read_session(engine) as s:
        rows = s.scalars(select(LabelImport).order_by(LabelImport.id.desc()).limit(limit)).all()
        return [
            {
                "import": r.id,
                "tool": r.tool,
                "file": r.file_name,
                "sha256": r.sha256[:12],
                "by": r.imported_by,
                "at": r.imported_at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                "added": r.added,
                "changed": r.changed,
                "unchanged": r.unchanged,
                "passed over": passed_over(r.skipped),
            }
            for r in rows
        ]
