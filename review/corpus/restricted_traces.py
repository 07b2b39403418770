"""Which production traces are restricted content, derived from the corpus as it is now.

The rule (:func:`reasons`): a trace is restricted, shown only to users with clearance, when

1. a person marked it restricted by hand (``traces.restricted_mark = "restricted"``);
2. its ``attributes.restricted`` is true;
3. its identity scopes include ``restricted``;
4. a chunk that authorization did *not* filter out comes from a document any version of which
   is restricted in the corpus (its text reached the context);
5. its answer or context names the title (8 characters or more) of a restricted document
   version (a leak: the trace itself is now restricted content);
6. the setting ``unknown_documents_restricted`` is on (it is when never set: fail closed) and
   an unfiltered chunk comes from a document no version of the corpus has, or names no
   document at all, unless a person cleared the trace (``restricted_mark = "cleared"``,
   which lifts this reason only: never a restricted document, scope, title or attribute).

``traces.restricted`` stores the rule's answer, so that every listing filters on one indexed
column; this module keeps it derived:

* **Corpus writes.** Documents are append-only (a change is a new version), so a new version
  can only make its document key restricted, make the key known, or add a restricted title.
  :func:`document_added` (called by the one version writer, ``corpus.insert_version``) notes
  which of these happened, and just before the transaction commits :func:`follow` recomputes,
  with the full rule, the traces it can affect: those with an unfiltered chunk of that key
  (the ``trace_chunks.doc_id`` index) and, for a new restricted title, those whose answer or
  context contains it. The title search scans the traces' texts (SQL ``LIKE``): acceptable for
  a rare event (a restricted document with a new title) and done once per transaction however
  many documents it adds.
* **The setting** and **a person's mark** recompute what they affect in their transaction
  (:func:`recompute_unknown`, :func:`recompute`).
* The importer computes each batch's flags inside the batch's transaction (:func:`flags_of`,
  from facts it made beforehand with :func:`new_trace_facts`)
  and ``workbench recompute-restricted`` rebuilds every flag (:func:`recompute_range`).

Concurrency: SQLite serialises write transactions (``BEGIN IMMEDIATE``). On PostgreSQL every
transaction that reads the corpus to write flags takes a transaction-level advisory lock
(:func:`lock`): shared for imports and rebuild batches, exclusive for what changes the rule's
inputs (a document version, the setting, a mark), so a flag is never computed from a corpus
that a concurrent transaction is changing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from sqlalchemy import event, exists, or_, select, text, update
from sqlalchemy.orm import Session

from review.core import clearance
from storage.db import one_of
from storage.models import Document, Setting, TraceChunk
from storage.models import Trace as TraceRow

__all__ = [
    "MARKS",
    "MARK_CLEARED",
    "MARK_RESTRICTED",
    "UNKNOWN_KEY",
    "CorpusFacts",
    "Flips",
    "Reason",
    "TraceFacts",
    "corpus_facts",
    "document_added",
    "flags_of",
    "follow",
    "is_restricted",
    "lock",
    "new_trace_facts",
    "reasons",
    "reasons_of",
    "recompute",
    "recompute_range",
    "recompute_unknown",
    "trace_reasons",
    "unknown_documents_restricted",
]

MARK_RESTRICTED: Final = "restricted"
MARK_CLEARED: Final = "cleared"
MARKS: Final = (MARK_RESTRICTED, MARK_CLEARED)

#: The settings row saying whether a chunk of a document the corpus has never seen makes a
#: trace restricted (``{"on": bool}``; absent: on).
UNKNOWN_KEY: Final = "unknown_documents_restricted"

#: Shorter titles ("Pricing") are too common in ordinary text to mean a leak.
MIN_TITLE: Final = 8

_LOCK_KEY: Final = 0x57425F5245535452  # "WB_RESTR": the advisory lock of the flag writers

_BATCH: Final = 500  # traces (and ids in one IN list) per query

_PENDING: Final = "restricted_traces.pending"


# ---------------------------------------------------------------------------------------
# The rule (pure)


def _truthy(v: object) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        return v.strip().lower() in ("true", "yes", "1")
    return isinstance(v, int) and v == 1


def _title_key(title: str) -> str:
    return title.strip().lower()


@dataclass(frozen=True)
class TraceFacts:
    """What the rule reads of one trace."""

    attributes: Mapping[str, Any]
    identity_scopes: tuple[str, ...]
    #: the document ids of the chunks authorization did not filter out (None: none named)
    doc_ids: tuple[str | None, ...]
    answer_text: str
    context_sent: str
    mark: str | None = None


@dataclass(frozen=True)
class CorpusFacts:
    """What the rule reads of the corpus: the restricted document keys (any version), the
    restricted titles (lower-cased, 8 characters or more, each with a key that has it), which
    of the asked-about keys the corpus has, and the unknown-documents setting."""

    restricted: frozenset[str] = frozenset()
    titles: tuple[tuple[str, str], ...] = ()
    known: frozenset[str] = frozenset()
    unknown_restricted: bool = True


@dataclass(frozen=True)
class Reason:
    """One reason a trace is restricted: ``kind`` is mark, attribute, scope, document,
    title or unknown; ``subject`` the document key it names (or "")."""

    kind: str
    subject: str = ""

    def text(self) -> str:
        s = self.subject
        return {
            "mark": "marked restricted by a person",
            "attribute": "the trace's attributes say restricted",
            "scope": "the identity's scopes include restricted",
            "document": f"cites restricted document {s}",
            "title": f"names the title of restricted document {s}",
            "unknown": f"cites document {s}, which the corpus has never seen"
            if s
            else "cites a chunk that names no document",
        }[self.kind]


def reasons(t: TraceFacts, corpus: CorpusFacts) -> tuple[Reason, ...]:
    """Every reason the rule of the module docs finds (none: the trace is open)."""
    out: list[Reason] = []
    if t.mark == MARK_RESTRICTED:
        out.append(Reason("mark"))
    if _truthy(t.attributes.get("restricted")):
        out.append(Reason("attribute"))
    if clearance.RESTRICTED_SCOPE in t.identity_scopes:
        out.append(Reason("scope"))
    named = sorted({d for d in t.doc_ids if d})
    out.extend(Reason("document", d) for d in named if d in corpus.restricted)
    if corpus.titles:
        said = f"{t.answer_text}\n{t.context_sent}".lower()
        hit = sorted({key for title, key in corpus.titles if title in said})
        out.extend(Reason("title", key) for key in hit)
    if corpus.unknown_restricted and t.mark != MARK_CLEARED:
        if any(not d for d in t.doc_ids):
            out.append(Reason("unknown"))
        out.extend(Reason("unknown", d) for d in named if d not in corpus.known)
    return tuple(out)


def is_restricted(t: TraceFacts, corpus: CorpusFacts) -> bool:
    return bool(reasons(t, corpus))


# ---------------------------------------------------------------------------------------
# Reading the corpus and the traces (inside the caller's transaction)


def unknown_documents_restricted(s: Session) -> bool:
    """The setting (on when never set)."""
    row = s.get(Setting, UNKNOWN_KEY)
    return True if row is None else bool((row.value or {}).get("on", True))


def _chunks(seq: Sequence[Any], n: int = _BATCH) -> Iterable[Sequence[Any]]:
    for i in range(0, len(seq), n):
        yield seq[i : i + n]


def corpus_facts(s: Session, doc_ids: Iterable[str | None]) -> CorpusFacts:
    """The corpus as the rule reads it, ``known`` limited to ``doc_ids``."""
    rows = s.execute(
        select(Document.doc_key, Document.title).where(
            Document.access_scope == clearance.RESTRICTED_SCOPE
        )
    ).all()
    titles: dict[str, str] = {}
    for key, title in sorted(rows):
        t = _title_key(title)
        if len(t) >= MIN_TITLE:
            titles.setdefault(t, key)
    wanted = sorted({d for d in doc_ids if d})
    known: set[str] = set()
    for part in _chunks(wanted):
        known.update(
            s.scalars(select(Document.doc_key).where(one_of(s, Document.doc_key, part)).distinct())
        )
    return CorpusFacts(
        frozenset(k for k, _ in rows),
        tuple(sorted(titles.items())),
        frozenset(known),
        unknown_documents_restricted(s),
    )


def _facts(s: Session, pks: Sequence[int]) -> dict[int, tuple[bool, TraceFacts]]:
    """Trace id -> (stored flag, facts) for ``pks``."""
    rows = s.execute(
        select(
            TraceRow.id,
            TraceRow.restricted,
            TraceRow.restricted_mark,
            TraceRow.attributes,
            TraceRow.identity_scopes,
            TraceRow.answer_text,
            TraceRow.context_sent,
        ).where(TraceRow.id.in_(pks))
    ).all()
    docs: dict[int, list[str | None]] = {int(r.id): [] for r in rows}
    for pk, doc in s.execute(
        select(TraceChunk.trace_pk, TraceChunk.doc_id).where(
            TraceChunk.trace_pk.in_(pks), TraceChunk.filtered.is_(False)
        )
    ):
        docs[int(pk)].append(doc)
    return {
        int(r.id): (
            bool(r.restricted),
            TraceFacts(
                dict(r.attributes or {}),
                tuple(str(x) for x in r.identity_scopes or ()),
                tuple(docs[int(r.id)]),
                r.answer_text or "",
                r.context_sent or "",
                r.restricted_mark,
            ),
        )
        for r in rows
    }


def trace_reasons(
    s: Session, pk: int, *, unmarked: bool = False, unknown_on: bool | None = None
) -> tuple[Reason, ...] | None:
    """Why trace ``pk`` is restricted by the rule now (None: no such trace); ``unmarked``
    ignores a person's mark and ``unknown_on`` overrides the unknown-documents setting."""
    got = _facts(s, [pk]).get(pk)
    if got is None:
        return None
    facts = replace(got[1], mark=None) if unmarked else got[1]
    corpus = corpus_facts(s, facts.doc_ids)
    if unknown_on is not None:
        corpus = replace(corpus, unknown_restricted=unknown_on)
    return reasons(facts, corpus)


def new_trace_facts(
    rows: Iterable[tuple[Mapping[str, Any], Sequence[Mapping[str, Any]]]],
) -> list[TraceFacts]:
    """The rule's facts of new traces about to be inserted (no database read, so an importer
    can make them ahead of its transaction): ``rows`` holds (trace row, chunk rows) as the
    importer writes them (mappings with the trace columns; chunks with ``doc_id`` and
    ``filtered``)."""
    return [
        TraceFacts(
            dict(row.get("attributes") or {}),
            tuple(str(x) for x in row.get("identity_scopes") or ()),
            tuple(c["doc_id"] for c in chunks if not c["filtered"]),
            str(row.get("answer_text") or ""),
            str(row.get("context_sent") or ""),
            row.get("restricted_mark"),
        )
        for row, chunks in rows
    ]


def flags_of(s: Session, facts: Sequence[TraceFacts]) -> list[bool]:
    """The flags of new traces (:func:`new_trace_facts`) against the corpus as the inserting
    transaction sees it. Read after :func:`lock`."""
    return [bool(r) for r in reasons_of(s, facts)]


def reasons_of(s: Session, facts: Sequence[TraceFacts]) -> list[tuple[Reason, ...]]:
    """Why each of new traces (:func:`new_trace_facts`) is restricted against the corpus as
    the inserting transaction sees it (empty: open), so an import can say why. Read after
    :func:`lock`."""
    corpus = corpus_facts(s, (d for f in facts for d in f.doc_ids))
    return [reasons(f, corpus) for f in facts]


# ---------------------------------------------------------------------------------------
# Recomputing stored flags (inside the caller's transaction)


@dataclass
class Flips:
    """How many stored flags a recompute changed, each way, out of ``checked`` traces."""

    restricted: int = 0
    opened: int = 0
    checked: int = 0

    def add(self, other: Flips) -> None:
        self.restricted += other.restricted
        self.opened += other.opened
        self.checked += other.checked


def lock(s: Session, *, exclusive: bool) -> None:
    """The flag writers' advisory lock on PostgreSQL (module docs); SQLite needs none."""
    if s.get_bind().dialect.name == "postgresql":
        fn = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
        s.execute(text(f"SELECT {fn}(:k)"), {"k": _LOCK_KEY})


def recompute(s: Session, pks: Iterable[int]) -> Flips:
    """Recompute the flags of ``pks`` with the full rule and store the ones that changed."""
    flips = Flips()
    ids = sorted(set(pks))
    for part in _chunks(ids):
        got = _facts(s, part)
        corpus = corpus_facts(s, (d for _, f in got.values() for d in f.doc_ids))
        to_true: list[int] = []
        to_false: list[int] = []
        for pk, (stored, facts) in got.items():
            now = is_restricted(facts, corpus)
            if now != stored:
                (to_true if now else to_false).append(pk)
        for value, chosen in ((True, to_true), (False, to_false)):
            if chosen:
                s.execute(
                    update(TraceRow)
                    .where(TraceRow.id.in_(chosen))
                    .values(restricted=value)
                    .execution_options(synchronize_session=False)
                )
        flips.add(Flips(len(to_true), len(to_false), len(got)))
    return flips


def recompute_range(s: Session, after: int, limit: int) -> tuple[int | None, Flips]:
    """Recompute the next ``limit`` traces with an id above ``after``: (the last id done,
    None when there were none; the flips). One batch of ``workbench recompute-restricted``."""
    lock(s, exclusive=False)
    ids = list(
        s.scalars(select(TraceRow.id).where(TraceRow.id > after).order_by(TraceRow.id).limit(limit))
    )
    if not ids:
        return None, Flips()
    return ids[-1], recompute(s, ids)


def recompute_unknown(s: Session) -> Flips:
    """Recompute the traces with an unfiltered chunk of a document the corpus does not have
    (or of none): after the unknown-documents setting changed. Scans the chunks (a rare
    event)."""
    lock(s, exclusive=True)
    pks = s.scalars(
        select(TraceChunk.trace_pk)
        .where(
            TraceChunk.filtered.is_(False),
            or_(
                TraceChunk.doc_id.is_(None),
                TraceChunk.doc_id == "",
                ~exists().where(Document.doc_key == TraceChunk.doc_id),
            ),
        )
        .distinct()
    ).all()
    return recompute(s, pks)


# ---------------------------------------------------------------------------------------
# Following corpus writes


@dataclass
class _Pending:
    keys: set[str]
    titles: set[str]


def _like(title: str) -> str:
    """A LIKE pattern matching ``title`` anywhere; characters outside ASCII become ``_``
    (SQLite folds only ASCII case), so the search finds a superset that the rule narrows."""
    out = []
    for ch in title:
        if ch in "\\%_":
            out.append("\\" + ch)
        elif ord(ch) > 127:
            out.append("_")
        else:
            out.append(ch)
    return f"%{''.join(out)}%"


def document_added(s: Session, doc_key: str, access_scope: str, title: str) -> None:
    """Called by the version writer *before* it adds a version of ``doc_key``: note what the
    new version changes for the rule, and have :func:`follow` run before the commit."""
    known = s.scalar(select(Document.id).where(Document.doc_key == doc_key).limit(1))
    already = s.scalar(
        select(Document.id)
        .where(Document.doc_key == doc_key, Document.access_scope == clearance.RESTRICTED_SCOPE)
        .limit(1)
    )
    restricted = access_scope == clearance.RESTRICTED_SCOPE
    changes_key = known is None or (restricted and already is None)
    new_title = ""
    t = _title_key(title)
    if restricted and len(t) >= MIN_TITLE:
        titles = {
            _title_key(x)
            for x in s.scalars(
                select(Document.title).where(Document.access_scope == clearance.RESTRICTED_SCOPE)
            )
        }
        if t not in titles:
            new_title = t
    if not changes_key and not new_title:
        return
    pending: _Pending | None = s.info.get(_PENDING)
    if pending is None:
        pending = _Pending(set(), set())
        s.info[_PENDING] = pending
        event.listen(s, "before_commit", _before_commit, once=True)
    if changes_key:
        pending.keys.add(doc_key)
    if new_title:
        pending.titles.add(new_title)


def _before_commit(s: Session) -> None:
    follow(s)


def follow(s: Session) -> Flips:
    """Recompute the traces the document versions noted by :func:`document_added` in this
    transaction can affect (module docs). Runs before the commit; safe to call again."""
    pending: _Pending | None = s.info.pop(_PENDING, None)
    if pending is None:
        return Flips()
    s.flush()
    lock(s, exclusive=True)
    pks: set[int] = set()
    keys = sorted(pending.keys)
    for part in _chunks(keys):
        pks.update(
            s.scalars(
                select(TraceChunk.trace_pk)
                .where(TraceChunk.doc_id.in_(part), TraceChunk.filtered.is_(False))
                .distinct()
            )
        )
    titles = sorted(pending.titles)
    for part in _chunks(titles, 20):
        conds = []
        for t in part:
            pat = _like(t)
            conds.append(TraceRow.answer_text.ilike(pat, escape="\\"))
            conds.append(TraceRow.context_sent.ilike(pat, escape="\\"))
        pks.update(s.scalars(select(TraceRow.id).where(or_(*conds))))
    return recompute(s, pks)
