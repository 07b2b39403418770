"""Audit verdicts back to Phoenix, as span annotations on each trace's root span (issue 31
item 3).

A reviewer's current verdict on an audited trace (the newest of that reviewer) becomes, on the
trace's **root span** in every Phoenix source that sent it (``source_spans`` rows with no
parent), these annotations, all with annotator kind ``HUMAN`` and the reviewer's email as
Phoenix's ``identifier`` (Phoenix keeps one annotation per name, span and identifier, so a
value sent again replaces the old one instead of adding a second):

* ``workbench.verdict``: the verdict key as label (``unsupported_answer``), the note as
  explanation;
* ``workbench.stage.<stage>`` for each failing stage: label ``failed``, the stage in words as
  explanation;
* ``workbench.claim.<n>`` for each judged claim (1-based): the claim verdict as label
  (``supported``, ``unsupported``, ``contradicted``, ``not_a_claim``), the claim as
  explanation;
* an annotation sent before that the reviewer's newest verdict no longer has (a stage cleared,
  a claim removed) is sent again with label ``withdrawn``.

**Restricted content stays in the workbench.** Phoenix's readers hold no workbench clearance,
so a verdict whose text is restricted content (``VerdictFacts.restricted``, decided by the
audit side with ``review.core.clearance``: the trace is restricted, or the note or a claim
retells a restricted document, a run of its words no other document has) sends its labels
(verdict, stages, claim verdicts) but in place of the note and each claim's text the
clearance module's one placeholder, :data:`review.core.clearance.REDACTED`, and no cited
chunk ids. The labels are what the pipeline's engineers act on; the words are read in the
workbench by those with clearance. Since the placeholder changes the digest, a push after a
document became restricted replaces a note Phoenix holds from before.

Every annotation carries metadata naming the workbench, the batch, the item, the verdict row
and the trace. Text is sent as text, bounded (:data:`MAX_EXPLANATION` characters, cut with a
marker) and without NUL or other control characters; anything missing or unknown (a verdict or
stage outside the vocabulary, a claim without a verdict, a span id that is not 16 hex digits)
is not sent, with a reason.

**Idempotence and retries.** ``verdict_pushes`` holds, per (source, item, reviewer, name), the
digest of what Phoenix acknowledged: an annotation whose digest is already there is not sent
again; a newer verdict's is. A row is marked pushed only after Phoenix answered the request
with the id of every annotation in it (``POST /v1/span_annotations?sync=true``, which inserts
before it answers); a refused request, an unreachable or slow server is recorded on each of
its rows with the reason, and the next push sends them again. Requests are bounded: at most
:data:`BATCH` annotations, a timeout, a bounded answer; after a transport error or a server
error the rest of that source is not tried (recorded as failed with the same reason) so a
push to a dead server ends at once.

Traces without a Phoenix root span (imported from a file, or received only over OTLP) are
reported as not pushable, never silently dropped. The audit side (which batches, the newest
verdict per reviewer, the vocabulary) is ``review.audits.pushback``'s.
"""

# Long module: building the annotations, deciding what is already there and talking to Phoenix
# share the annotation record and its digest, and are read together when a push is checked.

from __future__ import annotations

import datetime as dt
import hashlib
import http.client
import json
import re
import unicodedata
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from review.core import clearance, database, readable
from review.core.errors import InputError, PermissionDenied
from review.core.identity import Actor, Permission, roles_text
from review.core.terms import CLAIM_VERDICTS, ClaimVerdict
from review.traces.live import deadline, sources
from storage import changes
from storage.db import read_session
from storage.models import SourceSpan, TraceSource, VerdictPush, utcnow

__all__ = [
    "BATCH",
    "MAX_EXPLANATION",
    "TIMEOUT",
    "Annotation",
    "Built",
    "Key",
    "Pending",
    "PushPlan",
    "PushReport",
    "Target",
    "VerdictFacts",
    "Vocabulary",
    "build_annotations",
    "clean_text",
    "env_secret",
    "may_push",
    "plan_pushes",
    "push_verdicts",
    "require_push",
    "withdrawn",
]

#: Annotations per request.
BATCH = 100
#: Seconds a request may take, from connecting to the last byte of Phoenix's answer.
TIMEOUT = 30.0
#: The longest answer read from Phoenix (its answer to a batch is a list of ids).
MAX_RESPONSE = 1_000_000
#: The longest explanation sent (a note is at most 4000 characters; a claim may be longer).
MAX_EXPLANATION = 4000
#: The longest label, identifier or metadata text sent.
MAX_SHORT = 320
#: Cited chunk ids kept in a claim's metadata.
MAX_CITED = 50

PREFIX = "workbench."
VERDICT_NAME = PREFIX + "verdict"
STAGE_PREFIX = PREFIX + "stage."
CLAIM_PREFIX = PREFIX + "claim."
FAILED = "failed"
WITHDRAWN = "withdrawn"
PHOENIX = "phoenix"

_SPAN_ID = re.compile(r"[0-9a-f]{16}")
_CLAIM_LABELS = frozenset({*CLAIM_VERDICTS, ClaimVerdict.not_a_claim})


# --- building the annotations (pure) ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """The words a verdict may use (``review.audits.vocabulary``'s, passed in by the audit
    side): verdict keys and stage keys, each with its text."""

    verdicts: Mapping[str, str]
    stages: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class VerdictFacts:
    """One reviewer's current verdict on one audited trace, as plain data."""

    plan_id: int
    plan_name: str
    item_id: int
    trace_id: str
    verdict_id: int
    reviewer: str
    verdict: str
    #: whether the verdict's text is restricted content (see :func:`build_annotations`);
    #: no default, so a caller that never asked cannot send a restricted note by omission
    restricted: bool
    stages: tuple[str, ...] = ()
    notes: str = ""
    claims: tuple[Mapping[str, Any], ...] = ()
    judged_at: dt.datetime | None = None


@dataclass(frozen=True, slots=True)
class Annotation:
    """One span annotation as Phoenix's ``SpanAnnotationData`` takes it."""

    span_id: str
    name: str
    identifier: str
    label: str
    explanation: str
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def payload(self) -> dict[str, Any]:
        return {
            "span_id": self.span_id,
            "name": self.name,
            "annotator_kind": "HUMAN",
            "identifier": self.identifier,
            "result": {"label": self.label, "score": None, "explanation": self.explanation},
            "metadata": dict(self.metadata),
        }

    @property
    def digest(self) -> str:
        """What identifies the value sent: the same digest means Phoenix already has it."""
        text = json.dumps(self.payload(), sort_keys=True, ensure_ascii=True, default=str)
        return hashlib.sha256(text.encode("ascii")).hexdigest()


@dataclass(frozen=True, slots=True)
class Built:
    annotations: tuple[Annotation, ...]
    problems: tuple[str, ...]


def clean_text(value: object, limit: int) -> str:
    """``value`` as text Phoenix stores as typed: NUL and other control characters (tabs and
    line breaks kept) and unpaired surrogates removed, cut to ``limit`` characters with a
    marker saying how much was left out."""
    text = value if isinstance(value, str) else ("" if value is None else str(value))
    text = text.encode("utf-8", "replace").decode("utf-8")  # lone surrogates become '?'
    text = "".join(
        ch for ch in text if ch in "\t\n\r" or unicodedata.category(ch) not in ("Cc", "Cs")
    )
    if len(text) <= limit:
        return text
    marker = f" … [cut: {len(text):,} characters]"
    return text[: max(0, limit - len(marker))] + marker[:limit]


def _meta(f: VerdictFacts, **extra: Any) -> dict[str, Any]:
    return {
        "source": "abstention-workbench",
        "plan_id": f.plan_id,
        "plan": clean_text(f.plan_name, MAX_SHORT),
        "item_id": f.item_id,
        "verdict_id": f.verdict_id,
        "trace_id": clean_text(f.trace_id, MAX_SHORT),
        "judged_at": f.judged_at.isoformat() if f.judged_at else None,
        **extra,
    }


def _where(f: VerdictFacts) -> str:
    return f"item {f.item_id} (trace {clean_text(f.trace_id, 80)!r}, reviewer {f.reviewer!r})"


def build_annotations(f: VerdictFacts, span_id: str, vocab: Vocabulary) -> Built:
    """The annotations of one verdict on the root span ``span_id``, and what could not be
    sent and why. A verdict that is unknown, a reviewer that is empty or a span id that is
    not 16 lowercase hex digits sends nothing of the verdict; an unknown stage or a claim
    without a verdict or text leaves out that one annotation."""
    where = _where(f)
    if not isinstance(span_id, str) or not _SPAN_ID.fullmatch(span_id) or set(span_id) == {"0"}:
        return Built((), (f"{where}: root span id {span_id!r} is not 16 hex digits; not sent",))
    who = clean_text(f.reviewer, MAX_SHORT + 1).strip()
    if not who or len(who) > MAX_SHORT:
        return Built((), (f"{where}: no usable reviewer to name; not sent",))
    if f.verdict not in vocab.verdicts:
        return Built((), (f"{where}: verdict {f.verdict!r} is not in the vocabulary; not sent",))
    out = [
        Annotation(
            span_id,
            VERDICT_NAME,
            who,
            f.verdict,
            _withheld(f, f.notes),
            _meta(
                f,
                verdict_text=vocab.verdicts[f.verdict],
                stages=[clean_text(s, MAX_SHORT) for s in f.stages],
            ),
        )
    ]
    problems: list[str] = []
    for stage in dict.fromkeys(f.stages):
        if stage not in vocab.stages:
            problems.append(f"{where}: stage {stage!r} is not in the vocabulary; not sent")
            continue
        out.append(
            Annotation(span_id, STAGE_PREFIX + stage, who, FAILED, vocab.stages[stage], _meta(f))
        )
    for n, claim in enumerate(f.claims, start=1):
        built = _claim(f, n, claim, span_id, who)
        if isinstance(built, str):
            problems.append(f"{where}: claim {n} {built}; not sent")
        else:
            out.append(built)
    return Built(tuple(out), tuple(problems))


def _claim(
    f: VerdictFacts, n: int, claim: Mapping[str, Any], span_id: str, who: str
) -> Annotation | str:
    if not isinstance(claim, Mapping):
        return "is not a claim record"
    verdict = claim.get("verdict")
    if verdict is None or verdict == "":
        return "has no verdict"
    if verdict not in _CLAIM_LABELS:
        return f"has verdict {clean_text(verdict, 40)!r}, not a claim verdict"
    text = clean_text(claim.get("text"), MAX_EXPLANATION)
    if not text.strip():
        return "has no text"
    cited_raw = claim.get("cited") or ()
    cited = (
        [clean_text(c, MAX_SHORT) for c in list(cited_raw)[:MAX_CITED]]
        if isinstance(cited_raw, list | tuple) and not f.restricted
        else []
    )
    text = _withheld(f, text)
    return Annotation(
        span_id, f"{CLAIM_PREFIX}{n}", who, str(verdict), text, _meta(f, claim=n, cited=cited)
    )


def _withheld(f: VerdictFacts, text: str) -> str:
    """``text`` as Phoenix may hold it: the clearance module's placeholder for a restricted
    verdict's text (Phoenix's readers hold no workbench clearance), itself cleaned and cut
    otherwise; an empty note stays empty."""
    if f.restricted and text.strip():
        return clearance.REDACTED
    return clean_text(text, MAX_EXPLANATION)


def withdrawn(f: VerdictFacts, span_id: str, name: str) -> Annotation:
    """The annotation ``name`` sent again for a verdict that no longer has it."""
    who = clean_text(f.reviewer, MAX_SHORT).strip()
    return Annotation(
        span_id,
        name,
        who,
        WITHDRAWN,
        f"not in {who}'s newest verdict on this trace",
        _meta(f),
    )


# --- the report ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PushReport:
    """What a push did, counted in annotations (traces for the ones not pushable)."""

    pushed: int = 0
    already: int = 0
    failed: int = 0
    not_pushable: int = 0
    #: why annotations failed, with how many, most frequent first
    failures: tuple[tuple[str, int], ...] = ()
    #: why traces are not pushable, with how many
    unpushable: tuple[tuple[str, int], ...] = ()
    #: annotations not built (missing or unknown pieces), each with its reason
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.failed

    def lines(self) -> list[str]:
        """The report as sentences: the counts first, then each reason."""
        head = (
            f"Pushed {readable.count(self.pushed, 'annotation')} to Phoenix; "
            f"{readable.count(self.already, 'annotation')} already there; "
            f"{readable.count(self.failed, 'annotation')} failed; "
            f"{readable.count(self.not_pushable, 'trace')} not pushable."
        )
        out = [head]
        out += [f"Failed ({n}): {why}" for why, n in self.failures]
        out += [
            f"Not pushable ({n} {readable.plural(n, 'trace')}): {why}" for why, n in self.unpushable
        ]
        out += [f"Not sent: {p}" for p in self.problems[:20]]
        if len(self.problems) > 20:
            out.append(f"… and {len(self.problems) - 20} more not sent")
        return out

    def summary(self) -> str:
        return "\n\n".join(self.lines())


# --- where each trace's root span is ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Target:
    """A Phoenix source to push to."""

    id: int
    name: str
    url: str
    project: str
    secret_name: str | None


def _sources(s: Session, name: str | None) -> dict[int, Target]:
    q = select(TraceSource).where(TraceSource.kind == PHOENIX)
    if name is not None:
        row = s.scalar(select(TraceSource).where(TraceSource.name == name))
        if row is None:
            raise InputError(f"there is no trace source named {name!r}")
        if row.kind != PHOENIX:
            raise InputError(
                f"source {name!r} is a {row.kind} source; verdicts go back to a Phoenix source"
            )
        q = q.where(TraceSource.id == row.id)
    return {r.id: Target(r.id, r.name, r.url, r.project, r.secret_name) for r in s.scalars(q)}


def _roots(s: Session, trace_ids: Sequence[str]) -> dict[str, list[tuple[int, str]]]:
    """(source id, root span id) of each trace, from every source that sent its root."""
    out: dict[str, list[tuple[int, str]]] = {}
    ids = sorted(set(trace_ids))
    for lo in range(0, len(ids), 500):
        for tid, source_id, span_id in s.execute(
            select(SourceSpan.trace_id, SourceSpan.source_id, SourceSpan.span_id)
            .where(SourceSpan.trace_id.in_(ids[lo : lo + 500]), SourceSpan.parent_id.is_(None))
            .order_by(SourceSpan.source_id, SourceSpan.span_id)
        ):
            out.setdefault(str(tid), []).append((int(source_id), str(span_id)))
    return out


#: what a ``verdict_pushes`` row is for: source id, item id, reviewer, annotation name
Key = tuple[int, int, str, str]


def _pushed(s: Session, item_ids: Sequence[int]) -> dict[Key, tuple[str | None, str | None]]:
    """(digest, label) Phoenix acknowledged last, per key, for these items."""
    out: dict[Key, tuple[str | None, str | None]] = {}
    ids = sorted(set(item_ids))
    for lo in range(0, len(ids), 500):
        for r in s.execute(
            select(
                VerdictPush.source_id,
                VerdictPush.item_id,
                VerdictPush.reviewer,
                VerdictPush.name,
                VerdictPush.pushed_digest,
                VerdictPush.label,
            ).where(VerdictPush.item_id.in_(ids[lo : lo + 500]))
        ):
            out[(int(r[0]), int(r[1]), str(r[2]), str(r[3]))] = (r[4], r[5])
    return out


@dataclass(frozen=True, slots=True)
class Pending:
    """An annotation to send, with the row it is recorded in and the verdict it is from."""

    key: Key
    verdict_id: int
    annotation: Annotation


@dataclass
class PushPlan:
    """What a push will send per source id, what is already there (counted), the traces not
    pushable (by reason) and what could not be built (reasons)."""

    pending: dict[int, list[Pending]] = field(default_factory=dict)
    already: int = 0
    unpushable: Tally[str] = field(default_factory=Tally)
    problems: list[str] = field(default_factory=list)


def _no_span_reason(roots: list[tuple[int, str]] | None, source: str | None) -> str:
    if source is not None:
        return f"no span of theirs in source {source!r} (no Phoenix span)"
    if roots:
        return "received over OTLP, not from a Phoenix source (no Phoenix span)"
    return "imported from a file (no Phoenix span)"


def plan_pushes(
    facts: Sequence[VerdictFacts],
    vocab: Vocabulary,
    targets: Mapping[int, Target],
    roots: Mapping[str, list[tuple[int, str]]],
    pushed: Mapping[Key, tuple[str | None, str | None]],
    source: str | None,
) -> PushPlan:
    """Decide, without touching the network or the database, what to send: each verdict's
    annotations on each root span of a target source whose digest Phoenix has not
    acknowledged (``pushed``: key -> (digest, label) acknowledged last), plus a ``withdrawn``
    annotation for each name acknowledged before that the newest verdict no longer has."""
    plan = PushPlan()
    unpushable_traces: dict[str, str] = {}
    names_pushed: dict[tuple[int, int, str], list[str]] = {}
    for key, (digest, label) in pushed.items():
        if digest is not None and label != WITHDRAWN:
            names_pushed.setdefault(key[:3], []).append(key[3])
    for f in facts:
        mine = [(sid, span) for sid, span in roots.get(f.trace_id, []) if sid in targets]
        if not mine:
            unpushable_traces.setdefault(f.trace_id, _no_span_reason(roots.get(f.trace_id), source))
            continue
        for sid, span in mine:
            built = build_annotations(f, span, vocab)
            plan.problems += built.problems
            wanted = list(built.annotations)
            if built.annotations:  # a verdict not sent at all withdraws nothing
                names = {a.name for a in built.annotations}
                wanted += [
                    withdrawn(f, span, name)
                    for name in names_pushed.get((sid, f.item_id, f.reviewer), [])
                    if name not in names
                ]
            for a in wanted:
                key = (sid, f.item_id, f.reviewer, a.name)
                if pushed.get(key, (None, None))[0] == a.digest:
                    plan.already += 1
                else:
                    plan.pending.setdefault(sid, []).append(Pending(key, f.verdict_id, a))
    plan.unpushable.update(unpushable_traces.values())
    return plan


# --- talking to Phoenix -------------------------------------------------------------------


class _Refused(Exception):
    """A request Phoenix did not acknowledge; ``fatal`` stops the rest of the source."""

    def __init__(self, reason: str, *, fatal: bool, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.fatal = fatal
        self.status = status


def env_secret(name: str) -> str | None:
    """The secret named ``name`` as the sources read it (the environment, else
    ``.streamlit/secrets.toml``), or None when it is set nowhere (the push then records the
    failure on every row of the source instead of sending unauthenticated)."""
    try:
        return sources.secret_value(name)
    except InputError:
        return None


def _shown(url: str) -> str:
    """``url`` as an error message may show it: without a user name or password."""
    try:
        parts = urllib.parse.urlsplit(url.strip())
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(an unreadable URL)"
    host = f"[{host}]" if ":" in host else host
    return urllib.parse.urlunsplit((parts.scheme, host + port, parts.path, "", ""))


def _endpoint(t: Target) -> str:
    try:
        parts = urllib.parse.urlsplit(t.url.strip())
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        _ = parts.port  # a port that is not a number raises here
    except ValueError:
        ok = False
    if not ok:
        raise _Refused(f"source {t.name!r} has no usable http or https URL", fatal=True)
    if parts.username or parts.password:
        raise _Refused(
            f"source {t.name!r} has a user name or password in its URL; name the secret "
            "instead (nothing was sent)",
            fatal=True,
        )
    return urllib.parse.urlunsplit(
        (
            parts.scheme,
            parts.netloc,
            parts.path.rstrip("/") + "/v1/span_annotations",
            "sync=true",
            "",
        )
    )


def _detail(body: bytes) -> str:
    try:
        data = json.loads(body.decode("utf-8", "replace"))
    except ValueError:
        return clean_text(body.decode("utf-8", "replace"), 300).strip()
    if isinstance(data, dict) and "detail" in data:
        return clean_text(
            json.dumps(data["detail"]) if not isinstance(data["detail"], str) else data["detail"],
            300,
        )
    return clean_text(json.dumps(data), 300)


def _post(t: Target, batch: Sequence[Annotation], timeout: float, secret: str | None) -> list[str]:
    """Send one batch; Phoenix's ids of the annotations, in order, or :class:`_Refused`."""
    url = _endpoint(t)
    body = json.dumps({"data": [a.payload() for a in batch]}, ensure_ascii=True).encode("ascii")
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if secret:
        headers["Authorization"] = f"Bearer {secret}"
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    clock = deadline.Deadline(timeout)
    opener = deadline.opener(clock, url)
    late = f"Phoenix at {_shown(t.url)} did not answer within {timeout:g} s"
    try:
        with clock, opener.open(request, timeout=timeout) as answer:
            raw = answer.read(MAX_RESPONSE + 1)
    except urllib.error.HTTPError as exc:
        try:
            detail = _detail(exc.read(4096))
        except OSError:
            detail = ""
        status = exc.code
        fatal = status >= 500 or status in (401, 403)
        raise _Refused(
            f"Phoenix answered {status} {exc.reason}: {detail}".rstrip(": "),
            fatal=fatal,
            status=status,
        ) from None
    except (TimeoutError, OSError) as exc:  # URLError is an OSError
        why = getattr(exc, "reason", exc)
        if clock.expired or isinstance(why, TimeoutError) or isinstance(exc, TimeoutError):
            raise _Refused(late, fatal=True) from None
        raise _Refused(
            f"Phoenix at {_shown(t.url)} is unreachable ({clean_text(why, 200)})", fatal=True
        ) from None
    except http.client.HTTPException as exc:  # a broken answer (cut short, not HTTP)
        if clock.expired:
            raise _Refused(late, fatal=True) from None
        raise _Refused(
            f"Phoenix at {_shown(t.url)} broke off its answer ({type(exc).__name__}); "
            "not taken as acknowledged",
            fatal=True,
        ) from None
    if clock.expired:  # cut off at the deadline: what was read is not the whole answer
        raise _Refused(late, fatal=True)
    return _acknowledged(raw, len(batch))


def _acknowledged(raw: bytes, sent: int) -> list[str]:
    """Phoenix's ids of the ``sent`` annotations from its answer ``raw``, or :class:`_Refused`."""
    if len(raw) > MAX_RESPONSE:
        raise _Refused(
            "Phoenix's answer is larger than expected; not taken as acknowledged", fatal=True
        )
    try:
        data = json.loads(raw.decode("utf-8"))
        ids = [str(d["id"]) for d in data["data"]]
    except (ValueError, KeyError, TypeError):
        raise _Refused(
            "Phoenix's answer is not the list of annotation ids; not taken as acknowledged",
            fatal=True,
        ) from None
    if len(ids) != sent:
        raise _Refused(
            f"Phoenix acknowledged {len(ids)} of {sent} annotations "
            "(a Phoenix without synchronous annotation writes?); not taken as acknowledged",
            fatal=True,
        )
    return ids


def _send(
    t: Target,
    pending: Sequence[Pending],
    batch_size: int,
    timeout: float,
    secret: str | None,
    record: Callable[[Sequence[Pending], list[str] | None, str | None], None],
) -> None:
    """Send ``pending`` in batches, recording each batch's outcome as soon as it is known;
    a batch refused with 404 (a span Phoenix does not have) is sent again span by span, so
    the others still go; after a fatal refusal the rest is recorded as failed with it."""
    if t.secret_name and not secret:
        record(
            pending,
            None,
            f"the API key named {t.secret_name!r} is not set (environment or secrets)",
        )
        return
    queue = [list(pending[i : i + batch_size]) for i in range(0, len(pending), batch_size)]
    while queue:
        batch = queue.pop(0)
        try:
            ids = _post(t, [p.annotation for p in batch], timeout, secret)
        except _Refused as exc:
            spans = {p.annotation.span_id for p in batch}
            if exc.status == 404 and len(spans) > 1:
                for span in sorted(spans):
                    queue.insert(0, [p for p in batch if p.annotation.span_id == span])
                continue
            reason = (
                f"span {batch[0].annotation.span_id} is not in Phoenix project {t.project!r} "
                f"at {_shown(t.url)} ({exc.reason})"
                if exc.status == 404
                else exc.reason
            )
            record(batch, None, reason)
            if exc.fatal:
                rest = [p for b in queue for p in b]
                if rest:
                    record(rest, None, f"not sent: {exc.reason}")
                return
            continue
        record(batch, ids, None)


# --- the service --------------------------------------------------------------------------


def may_push(actor: Actor) -> bool:
    """Whether ``actor`` may send verdicts back (a reviewer or an administrator: the roles
    that import traces)."""
    return actor.can(Permission.import_traces)


def require_push(actor: Actor) -> None:
    """Raise PermissionDenied unless :func:`may_push`."""
    if not may_push(actor):
        raise PermissionDenied(
            f"{actor.name} ({roles_text(actor.roles)}) may not send audit verdicts to a trace "
            "store; this needs one of the roles: Admin, Reviewer."
        )


def _recorder(
    engine: Engine, t: Target, tally: Tally[str], failures: Tally[str]
) -> Callable[[Sequence[Pending], list[str] | None, str | None], None]:
    def record(batch: Sequence[Pending], ids: list[str] | None, error: str | None) -> None:
        now = utcnow()

        def work(s: Session) -> None:
            rows = {
                (r.source_id, r.item_id, r.reviewer, r.name): r
                for r in s.scalars(
                    select(VerdictPush).where(
                        VerdictPush.source_id == t.id,
                        VerdictPush.item_id.in_({p.key[1] for p in batch}),
                    )
                )
            }
            for i, p in enumerate(batch):
                row = rows.get(p.key)
                if row is None:
                    row = VerdictPush(
                        source_id=t.id,
                        item_id=p.key[1],
                        reviewer=p.key[2],
                        name=p.key[3],
                        span_id=p.annotation.span_id,
                        verdict_id=p.verdict_id,
                        attempts=0,
                    )
                    s.add(row)
                    rows[p.key] = row
                row.attempts = (row.attempts or 0) + 1
                if ids is not None:
                    row.span_id = p.annotation.span_id
                    row.verdict_id = p.verdict_id
                    row.label = p.annotation.label
                    row.pushed_digest = p.annotation.digest
                    row.pushed_at = now
                    row.phoenix_id = ids[i][:200]
                    row.error = None
                    row.failed_at = None
                else:
                    row.error = error
                    row.failed_at = now

        try:
            database.write(engine, work)
        except IntegrityError:
            # another push recorded one of these rows meanwhile (its annotation is the same:
            # Phoenix keeps one per name, span and reviewer): record over it
            database.write(engine, work)
        if ids is not None:
            tally["pushed"] += len(batch)
        else:
            tally["failed"] += len(batch)
            failures[f"{t.name}: {error}"] += len(batch)

    return record


def push_verdicts(
    engine: Engine,
    actor: Actor,
    facts: Iterable[VerdictFacts],
    vocab: Vocabulary,
    *,
    source: str | None = None,
    batch_size: int = BATCH,
    timeout: float = TIMEOUT,
    secrets: Callable[[str], str | None] = env_secret,
) -> PushReport:
    """Push the annotations of ``facts`` to the root span of each trace in every Phoenix
    source that sent it (only source ``source`` when named) and say what happened. Each
    batch's outcome is recorded when Phoenix answered (or failed to); nothing is recorded as
    pushed that Phoenix did not acknowledge."""
    require_push(actor)
    if not 1 <= batch_size <= 1000:
        raise InputError(f"batch size {batch_size} is not between 1 and 1000")
    if not 0 < timeout <= 600:
        raise InputError(f"timeout {timeout:g} s is not between 0 and 600 seconds")
    facts = list(facts)
    with read_session(engine) as s:
        targets = _sources(s, source)
        roots = _roots(s, [f.trace_id for f in facts])
        pushed = _pushed(s, [f.item_id for f in facts])
    plan = plan_pushes(facts, vocab, targets, roots, pushed, source)
    tally: Tally[str] = Tally()
    failures: Tally[str] = Tally()
    for sid, pending in sorted(plan.pending.items()):
        t = targets[sid]
        secret = secrets(t.secret_name) if t.secret_name else None
        here: Tally[str] = Tally()
        why: Tally[str] = Tally()
        _send(t, pending, batch_size, timeout, secret, _recorder(engine, t, here, why))
        _log(engine, actor, t, facts, here, why)
        tally.update(here)
        failures.update(why)
    return PushReport(
        pushed=tally["pushed"],
        already=plan.already,
        failed=tally["failed"],
        not_pushable=sum(plan.unpushable.values()),
        failures=tuple(failures.most_common()),
        unpushable=tuple(plan.unpushable.most_common()),
        problems=tuple(plan.problems),
    )


def _log(
    engine: Engine,
    actor: Actor,
    t: Target,
    facts: Sequence[VerdictFacts],
    tally: Tally[str],
    failures: Tally[str],
) -> None:
    after = {
        "source": t.name,
        "plans": sorted({f.plan_id for f in facts}),
        "pushed": tally["pushed"],
        "failed": tally["failed"],
        "reasons": [why for why, _ in failures.most_common(5)],
    }
    database.write(
        engine,
        lambda s: changes.record(s, actor.email, "push", sources.ENTITY, t.id, None, after),
    )
