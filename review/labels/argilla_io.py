"""Argilla 2.x in and out: cases written as a dataset Argilla's client loads from disk, and the
labels its annotators submitted read back.

**Export.** :func:`export_dir` writes the layout ``rg.Dataset.to_disk(path)`` writes and
``rg.Dataset.from_disk(path)`` reads (argilla 2.8, ``datasets/_io/_disk.py``):

* ``.argilla/dataset.json``: the dataset model (its name, guidelines, task distribution);
* ``.argilla/settings.json``: ``Settings.serialize()``: the fields, questions and metadata
  properties, the guidelines, and the task distribution (``min_submitted`` is the labeling
  overlap, so Argilla asks for as many annotators per case as the workbench does);
* ``records.json``: a JSON array of records as ``Record.to_dict()`` writes them, one per case,
  the record id being the case key.

:func:`export_zip` writes the same three files into a zip (for a download button). Both read the
cases 500 at a time and stream the records out.

Each record shows the case as a blind annotator sees it (:mod:`review.cases.sight`,
:mod:`review.labels.blind`): the question, the required claims, who asks with what access, and
the documents listed by reference (not in the author's order), each forbidden one marked as
such, with the text of the visible ones. Nothing of the author's judgement is written: no
expected decision, message, reason codes, category, evidence state, document roles, notes or
agreed label. Restricted text (the case's own text when it relies on a restricted document, a
restricted document's title and body, a forbidden document's text) is written only when the
exporting actor has clearance, else :data:`review.core.clearance.REDACTED`, as
:mod:`review.core.clearance` decides. Fields are plain text (``use_markdown: false``): Argilla
renders a markdown field, and an image link in a document would make every annotator's browser
fetch it.

The questions come from the taxonomy: ``decision``, one label of ``Taxonomy.decisions``
(required); ``reason_codes``, labels of ``Taxonomy.case_reason_codes()`` (optional: Argilla has
no conditional questions, so its description says it applies only when the decision does not
answer); ``note``, free text (optional). Metadata: ``case_key``, ``family`` and ``slice``
(terms, so annotators and managers can filter by them).

**Import.** :func:`read_export` streams an Argilla records export and yields one
:class:`~review.labels.external.ExternalLabel` per (record, user) whose response was
submitted. Argilla keeps one status per user and record (submitted, draft or discarded); only
submitted responses are labels: drafts and discarded responses are counted in ``skipped``, and
so are suggestions (model pre-annotations, never labels). Two forms are read, in a JSON array or
as JSON Lines:

* nested, as ``Record.to_dict()``: ``"responses": {"decision": [{"value": "abstain",
  "user_id": "…", "status": "submitted"}]}``, ``"suggestions": {"decision": {"value": …}}``;
* flat, as ``dataset.records.to_list(flatten=True)`` and the Hugging Face export
  (``to_datasets()``, ``to_hub``) write it: ``"decision.responses": ["abstain"],
  "decision.responses.users": ["…"], "decision.responses.status": ["submitted"]``,
  ``"decision.suggestion": …``, fields and metadata at the top level.

Argilla 2.8's own ``records.json`` (``to_disk``, ``records.to_json``, ``to_list(flatten=False)``)
drops each response's status (``RecordResponses.to_dict`` writes only ``value`` and
``user_id``), so a draft there looks like a submitted label. Such a file is refused, naming the
record and the response, with the export that keeps the status: reading it as labels would turn
drafts and discarded responses into labels.
"""

# Long module: the export and the reader share the question names and the file layout, and
# the notes above on what Argilla's client writes and drops belong to both halves.

from __future__ import annotations

import datetime as dt
import io
import json
import re
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import ijson
from sqlalchemy import Engine

from review.cases.cases import CaseFilter
from review.core import clearance
from review.core.errors import InputError
from review.core.identity import Actor, Permission, require
from review.core.taxonomy import Taxonomy
from review.labels import labeling, outbound
from review.labels.external import ExternalLabel, Skipped
from storage.models import Case

__all__ = [
    "DATASET_PATH",
    "DECISION",
    "FIELDS",
    "MAX_BYTES",
    "METADATA",
    "NOTE",
    "REASONS",
    "RECORDS_PATH",
    "SETTINGS_PATH",
    "TOOL",
    "ExportFilter",
    "ExportReport",
    "dataset_json",
    "export_dir",
    "export_zip",
    "read_export",
    "settings_json",
]

TOOL = "argilla"
#: the files of ``rg.Dataset.to_disk`` (argilla 2.x), relative to the dataset's directory
DATASET_PATH = ".argilla/dataset.json"
SETTINGS_PATH = ".argilla/settings.json"
RECORDS_PATH = "records.json"

#: the questions, by their names in Argilla
DECISION = "decision"
REASONS = "reason_codes"
NOTE = "note"
QUESTIONS = (DECISION, REASONS, NOTE)
#: the fields (what the annotator reads), by name
FIELDS = ("question", "required_claims", "asked_by", "documents")
#: the metadata properties
METADATA = ("case_key", "family", "slice")

#: the largest export read (bytes); the command line and pages may pass less
MAX_BYTES = 2**30
BATCH = 500
#: how long a record id (a case key), a user id, a decision and a note may be
MAX_ID = 120
MAX_USER = 200
MAX_CHOICE = 100
MAX_NOTE = 20_000
MAX_REASONS = 100

_STATUSES = ("submitted", "draft", "discarded")
#: the bytes of a UTF-8 byte order mark, skipped before the first value
_BOM = (b"\xef", b"\xbb", b"\xbf")
_RESPONSES_KEY = re.compile(r"^(?P<q>.+)\.responses$")
_SUGGESTION_KEY = re.compile(r"^(?P<q>.+)\.suggestion$")


# ------------------------------------------------------------------------------------------
# Export


@dataclass(frozen=True)
class ExportFilter:
    """Which cases to export: ready cases, optionally of one family and/or slice."""

    family: str | None = None
    slice: str | None = None


@dataclass(frozen=True)
class ExportReport:
    written: int
    #: cases whose text was written as the redaction text (the exporter has no clearance)
    redacted: int = 0


def _guidelines(tax: Taxonomy) -> str:
    decisions = "\n".join(
        f"- {term.label} ({key}): {term.definition}" for key, term in tax.decisions.items()
    )
    reasons = "\n".join(
        f"- {term.label} ({key}): {term.definition}"
        for key, term in tax.case_reason_codes().items()
    )
    return (
        "Label each case as the assistant should behave given ONLY the documents the asking "
        "identity may use. Documents marked FORBIDDEN must not be used for the answer.\n\n"
        f"Decision:\n{decisions}\n\n"
        f"Reason codes (only when the decision does not answer):\n{reasons}\n\n"
        "Note: optional, why you chose this (it is kept with your label)."
    )


#: what Argilla's serialize() writes for a property not yet created on a server
_NEW = {"id": None, "inserted_at": None, "updated_at": None}


def _question(
    name: str, title: str, description: str, required: bool, settings: dict[str, Any]
) -> dict[str, Any]:
    return {
        **_NEW,
        "name": name,
        "settings": settings,
        "title": title,
        "description": description,
        "required": required,
        "dataset_id": None,
        "type": settings["type"],
    }


def _field(name: str, title: str, required: bool, description: str) -> dict[str, Any]:
    return {
        **_NEW,
        "name": name,
        "settings": {"type": "text", "use_markdown": False},
        "title": title,
        "required": required,
        "description": description,
        "dataset_id": None,
        "type": "text",
    }


def _terms(name: str, title: str) -> dict[str, Any]:
    return {
        **_NEW,
        "name": name,
        "settings": {"visible_for_annotators": True, "type": "terms", "values": None},
        "title": title,
        "visible_for_annotators": True,
        "dataset_id": None,
    }


def settings_json(tax: Taxonomy, overlap: int) -> dict[str, Any]:
    """The dataset's settings as ``rg.Settings.serialize()`` writes them (argilla 2.8)."""
    decisions = [{"text": t.label, "value": k} for k, t in tax.decisions.items()]
    reasons = [{"text": t.label, "value": k} for k, t in tax.case_reason_codes().items()]
    non_answers = ", ".join(t.label for t in tax.decisions.values() if not t.answers)
    return {
        "guidelines": _guidelines(tax),
        "questions": [
            _question(
                DECISION,
                "Decision",
                "What the assistant should do with only the documents this identity may use "
                "(the guidelines define each decision).",
                True,
                {
                    "type": "label_selection",
                    "options": decisions,
                    "visible_options": len(decisions),
                },
            ),
            _question(
                REASONS,
                "Reason codes",
                "Only when the decision does not answer"
                + (f" ({non_answers})" if non_answers else "")
                + ": why the evidence is insufficient, one or more. Leave empty for an answer "
                "(Argilla cannot hide this question by the decision; reason codes given with "
                "an answer are not kept).",
                False,
                {
                    "type": "multi_label_selection",
                    "options": reasons,
                    "visible_options": len(reasons),
                    "options_order": "natural",
                },
            ),
            _question(
                NOTE,
                "Note",
                "Optional: why you chose this.",
                False,
                {"type": "text", "use_markdown": False},
            ),
        ],
        "fields": [
            _field("question", "Question", True, "What the user asked."),
            _field(
                "required_claims",
                "Required claims",
                False,
                "What an answer must establish (a compound question has several).",
            ),
            _field("asked_by", "Asked by", True, "The identity asking and what it may access."),
            _field(
                "documents",
                "Documents",
                False,
                "The documents retrieval can return for this case, by reference; FORBIDDEN ones "
                "must not be used for the answer.",
            ),
        ],
        "vectors": [],
        "metadata": [
            _terms("case_key", "Case"),
            _terms("family", "Family"),
            _terms("slice", "Slice"),
        ],
        "allow_extra_metadata": False,
        "distribution": {"strategy": "overlap", "min_submitted": overlap},
        "mapping": None,
    }


def dataset_json(name: str, tax: Taxonomy, overlap: int) -> dict[str, Any]:
    """The dataset model as ``Dataset.to_disk`` writes it (``DatasetModel.model_dump()``)."""
    return {
        "id": None,
        "inserted_at": None,
        "updated_at": None,
        "name": name,
        "status": "draft",
        "guidelines": _guidelines(tax),
        "allow_extra_metadata": False,
        "distribution": {"strategy": "overlap", "min_submitted": overlap},
        "workspace_id": None,
        "last_activity_at": None,
    }


def _documents_text(actor: Actor, row: Case) -> str:
    """The case's documents as a blind annotator sees them: by reference (never the author's
    order, which tends to put the decisive passage first), without their roles, forbidden ones
    marked, restricted or forbidden text only for an exporter with clearance."""
    docs = sorted(row.documents, key=lambda cd: (cd.document.doc_key, cd.document.version))
    if not docs:
        return "Retrieval returns nothing for this identity (empty retrieval)."
    parts: list[str] = []
    for cd in docs:
        d = cd.document
        forbidden = cd.visibility != "visible"
        head = [f"{d.doc_key}@{d.version}"]
        if forbidden:
            head.insert(0, "FORBIDDEN to this identity (do not use it for the answer)")
        if not d.is_current:
            head.append("not the current version")
        when = d.effective_date.isoformat() if d.effective_date else "no effective date"
        lines = [
            "=== " + " · ".join(head) + " ===",
            clearance.title(actor, d.title, d.access_scope),
            f"effective {when} · {d.authority} · {d.jurisdiction} · {d.access_scope}",
        ]
        if not clearance.may_see(actor, forbidden):
            lines.append(clearance.REDACTED)
        else:
            restricted = clearance.document_restricted(d.access_scope)
            lines.append(clearance.shown(actor, d.body, restricted))
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _record(actor: Actor, row: Case, restricted: bool) -> dict[str, Any]:
    """One case as a record in ``Record.to_dict()``'s form (no responses or suggestions)."""
    claims = clearance.shown_all(actor, tuple(c.text for c in row.claims), restricted)
    scopes = ", ".join(str(s) for s in row.identity_scopes) or "nothing"
    fields: dict[str, Any] = {
        "question": clearance.shown(actor, row.question, restricted),
        "asked_by": f"{row.identity_name} (may access: {scopes})",
        "documents": _documents_text(actor, row),
    }
    if claims:
        fields["required_claims"] = "\n".join(f"{i}. {c}" for i, c in enumerate(claims, 1))
    metadata: dict[str, Any] = {"case_key": row.key}
    if row.family is not None:
        metadata["family"] = row.family.key
    slices = sorted(sl.slice for sl in row.slices)
    if slices:
        metadata["slice"] = slices
    return {
        "id": row.key,
        "fields": fields,
        "metadata": metadata,
        "suggestions": {},
        "responses": {},
        "vectors": {},
        "status": "pending",
        "_server_id": None,
    }


def _records(
    engine: Engine, actor: Actor, flt: ExportFilter
) -> Iterator[tuple[dict[str, Any], bool]]:
    """(record, text redacted) of each exported case, read 500 at a time in id order."""
    chosen = CaseFilter(family=flt.family, slice=flt.slice)
    for rows in outbound.ready_batches(engine, chosen, BATCH):
        for r, restricted in rows:
            yield _record(actor, r, restricted), not clearance.may_see(actor, restricted)


def _write_records(out: IO[bytes], engine: Engine, actor: Actor, flt: ExportFilter) -> ExportReport:
    written = redacted = 0
    out.write(b"[")
    for record, hidden in _records(engine, actor, flt):
        out.write((b"\n" if not written else b",\n") + json.dumps(record).encode("utf-8"))
        written += 1
        redacted += hidden
    out.write(b"\n]\n" if written else b"]\n")
    return ExportReport(written, redacted)


def _config(engine: Engine, tax: Taxonomy, name: str) -> tuple[bytes, bytes]:
    overlap = labeling.get_settings(engine).overlap
    return (
        json.dumps(dataset_json(name, tax, overlap)).encode("utf-8"),
        json.dumps(settings_json(tax, overlap)).encode("utf-8"),
    )


def _dataset_name(name: str | None) -> str:
    if name is None:
        return f"workbench-cases-{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}"
    name = name.strip()
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,199}", name):
        raise InputError(
            f"dataset name {name[:60]!r}: use letters, digits, '-', '_' and '.', starting with a "
            "letter or digit, at most 200 characters"
        )
    return name


def export_dir(
    engine: Engine,
    actor: Actor,
    tax: Taxonomy,
    path: Path,
    flt: ExportFilter | None = None,
    *,
    name: str | None = None,
) -> ExportReport:
    """Write the ready cases matching ``flt`` into the directory ``path`` as
    ``rg.Dataset.to_disk`` lays a dataset out, as ``actor`` may see them. Refused, writing
    nothing, when one of the three files is there already (as ``to_disk`` refuses)."""
    require(actor, Permission.exchange_labels)
    name = _dataset_name(name)
    path.mkdir(parents=True, exist_ok=True)
    targets = [path / DATASET_PATH, path / SETTINGS_PATH, path / RECORDS_PATH]
    there = [str(t.relative_to(path)) for t in targets if t.exists()]
    if there:
        raise InputError(f"{path}: {', '.join(there)} exists already; export into an empty folder")
    dataset, settings = _config(engine, tax, name)
    (path / ".argilla").mkdir(exist_ok=True)
    partial = path / f"{RECORDS_PATH}.partial"
    try:
        targets[0].write_bytes(dataset)
        targets[1].write_bytes(settings)
        with partial.open("wb") as out:
            report = _write_records(out, engine, actor, flt or ExportFilter())
        partial.rename(targets[2])
    except BaseException:
        for t in (*targets[:2], partial):  # no half export for from_disk to load
            t.unlink(missing_ok=True)
        raise
    return report


def export_zip(
    engine: Engine,
    actor: Actor,
    tax: Taxonomy,
    out: IO[bytes],
    flt: ExportFilter | None = None,
    *,
    name: str | None = None,
) -> ExportReport:
    """The same files as :func:`export_dir`, in a zip written to ``out`` (unzip it and
    ``rg.Dataset.from_disk`` the folder). ``out`` need not be seekable."""
    require(actor, Permission.exchange_labels)
    name = _dataset_name(name)
    dataset, settings = _config(engine, tax, name)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(DATASET_PATH, dataset)
        zf.writestr(SETTINGS_PATH, settings)
        with zf.open(RECORDS_PATH, "w", force_zip64=True) as records:
            return _write_records(records, engine, actor, flt or ExportFilter())


# ------------------------------------------------------------------------------------------
# Import


def _too_large(limit: int) -> str:
    return (
        f"the Argilla export is larger than {limit} bytes, the most read at once; split it "
        "(for example by records) and import the parts"
    )


class _Bounded(io.RawIOBase):
    """A binary stream that refuses to give more than ``limit`` bytes."""

    def __init__(self, raw: IO[bytes], limit: int, first: bytes, count: int) -> None:
        self._raw = raw
        self._limit = limit
        self._pending = first
        self.count = count

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if size == 0:  # ijson asks for nothing first, to tell bytes from text
            return b""
        if self._pending:
            chunk, self._pending = self._pending, b""
            return chunk
        want = 65536 if size is None or size < 0 else min(size, 1 << 20)
        chunk = self._raw.read(want)
        self.count += len(chunk)
        if self.count > self._limit:
            raise InputError(_too_large(self._limit))
        return chunk

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)


def _where(index: int, record_id: object) -> str:
    if isinstance(record_id, str) and record_id:
        return f"record {index} ({record_id[:MAX_ID]!r})"
    return f"record {index}"


def _text(value: object, where: str, field: str, limit: int, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InputError(f"{where}, {field}: expected text, got {_kind(value)}")
    if "\x00" in value:
        raise InputError(f"{where}, {field}: contains a NUL character (\\x00)")
    if len(value) > limit:
        raise InputError(f"{where}, {field}: longer than {limit} characters")
    if not empty and not value.strip():
        raise InputError(f"{where}, {field}: is empty")
    return value


_KINDS = ((bool, "a boolean"), (int | float, "a number"), (str, "text"), (list, "a list"))


def _kind(value: object) -> str:
    """What a JSON value is, for an error message."""
    if value is None:
        return "null"
    return next((n for t, n in _KINDS if isinstance(value, t)), "an object")


@dataclass
class _Answer:
    """One user's responses to one record: question -> value, and the status they carry."""

    values: dict[str, object]
    status: str
    first_field: str


_MISSING_STATUS = (
    "Argilla's records.json (Dataset.to_disk, records.to_json, records.to_list(flatten=False)) "
    "does not keep whether a response was submitted, a draft or discarded, so drafts cannot be "
    "told from labels; export the records with their status: "
    "json.dump(dataset.records.to_list(flatten=True), f), or "
    "dataset.records.to_datasets().to_json(path)"
)


def _answers_nested(rec: Mapping[str, Any], where: str) -> tuple[dict[str, _Answer], list[str]]:
    """(user -> answer, questions with suggestions) of a record in ``Record.to_dict`` form."""
    responses = rec.get("responses")
    if responses is None:
        responses = {}
    if not isinstance(responses, dict):
        raise InputError(f"{where}, responses: expected an object, got {_kind(responses)}")
    answers: dict[str, _Answer] = {}
    for question, items in responses.items():
        if items is None:
            continue
        if not isinstance(items, list):
            raise InputError(f"{where}, responses.{question}: expected a list, got {_kind(items)}")
        for i, item in enumerate(items):
            field = f"responses.{question}[{i}]"
            if not isinstance(item, dict):
                raise InputError(f"{where}, {field}: expected an object, got {_kind(item)}")
            user = _text(item.get("user_id"), where, f"{field}.user_id", MAX_USER)
            if "status" not in item:
                raise InputError(f"{where}, {field} has no status. {_MISSING_STATUS}")
            _add(answers, where, field, question, user, item.get("value"), item["status"])
    suggestions = rec.get("suggestions")
    if suggestions is None:
        suggestions = {}
    if not isinstance(suggestions, dict):
        raise InputError(f"{where}, suggestions: expected an object, got {_kind(suggestions)}")
    return answers, [q for q, s in suggestions.items() if s is not None]


def _answers_flat(rec: Mapping[str, Any], where: str) -> tuple[dict[str, _Answer], list[str]]:
    """(user -> answer, questions with suggestions) of a record in ``to_list(flatten=True)``
    form: ``q.responses``, ``q.responses.users`` and ``q.responses.status`` side by side."""
    answers: dict[str, _Answer] = {}
    for key in rec:
        m = _RESPONSES_KEY.match(key)
        if not m:
            continue
        question = m.group("q")
        values = rec[key]
        if values is None:
            continue
        users = rec.get(f"{key}.users")
        statuses = rec.get(f"{key}.status", _ABSENT)
        if statuses is _ABSENT:
            raise InputError(
                f"{where}, {key}.status: missing; a response without its status {_MISSING_STATUS}"
            )
        for field, seq in ((key, values), (f"{key}.users", users), (f"{key}.status", statuses)):
            if not isinstance(seq, list):
                raise InputError(f"{where}, {field}: expected a list, got {_kind(seq)}")
        assert isinstance(values, list) and isinstance(users, list) and isinstance(statuses, list)
        if not len(values) == len(users) == len(statuses):
            raise InputError(
                f"{where}, {key}: {len(values)} responses but {len(users)} users and "
                f"{len(statuses)} statuses"
            )
        for i, (value, user, status) in enumerate(zip(values, users, statuses, strict=True)):
            field = f"{key}[{i}]"
            uid = _text(user, where, f"{key}.users[{i}]", MAX_USER)
            _add(answers, where, field, question, uid, value, status)
    suggested = [
        m.group("q")
        for key, value in rec.items()
        if (m := _SUGGESTION_KEY.match(key)) and _suggested(rec, key, value)
    ]
    return answers, suggested


def _suggested(rec: Mapping[str, Any], key: str, value: object) -> bool:
    """Whether a flat record's ``q.suggestion`` holds a suggestion. The Hugging Face export
    turns a label question's suggestions into class indexes, "none" among them, so an index
    without a score or an agent is not counted."""
    if value is None:
        return False
    if isinstance(value, int) and not isinstance(value, bool):
        return rec.get(f"{key}.score") is not None or rec.get(f"{key}.agent") is not None
    return True


_ABSENT = object()


def _add(
    answers: dict[str, _Answer],
    where: str,
    field: str,
    question: str,
    user: str,
    value: object,
    status: object,
) -> None:
    if status not in _STATUSES:
        raise InputError(
            f"{where}, {field}.status: {str(status)[:40]!r} is not one of {', '.join(_STATUSES)}"
        )
    assert isinstance(status, str)
    answer = answers.get(user)
    if answer is None:
        answers[user] = _Answer({question: value}, status, field)
        return
    if question in answer.values:
        raise InputError(
            f"{where}, {field}: user {user[:MAX_USER]!r} answers {question!r} twice in one record"
        )
    if answer.status != status:
        raise InputError(
            f"{where}, {field}.status: user {user[:MAX_USER]!r} has {status!r} here but "
            f"{answer.status!r} at {answer.first_field}; Argilla keeps one status per user and "
            "record"
        )
    answer.values[question] = value


def _label(record_id: str, case_key: str, where: str, user: str, answer: _Answer) -> ExternalLabel:
    here = f"{where}, user {user!r}"
    if DECISION not in answer.values or answer.values[DECISION] is None:
        raise InputError(f"{here}, {DECISION}: a submitted response has no decision")
    decision = _text(answer.values[DECISION], here, DECISION, MAX_CHOICE).strip()
    raw_reasons = answer.values.get(REASONS)
    reasons: tuple[str, ...] = ()
    if raw_reasons is not None:
        if not isinstance(raw_reasons, list):
            raise InputError(
                f"{here}, {REASONS}: expected a list of labels, got {_kind(raw_reasons)}"
            )
        if len(raw_reasons) > MAX_REASONS:
            raise InputError(f"{here}, {REASONS}: more than {MAX_REASONS} labels")
        reasons = tuple(
            _text(r, here, f"{REASONS}[{i}]", MAX_CHOICE).strip() for i, r in enumerate(raw_reasons)
        )
        if len(set(reasons)) != len(reasons):
            raise InputError(f"{here}, {REASONS}: a reason code is listed twice")
    raw_note = answer.values.get(NOTE)
    note = "" if raw_note is None else _text(raw_note, here, NOTE, MAX_NOTE, empty=True)
    return ExternalLabel(
        tool=TOOL,
        where=here,
        ref=f"{record_id}/{user}",
        case_key=case_key,
        user=user,
        decision=decision,
        reason_codes=reasons,
        note=note.strip(),
    )


def _case_key(rec: Mapping[str, Any], where: str, nested: bool) -> tuple[str, str]:
    """(record id, case key): the record id is the case key; a ``case_key`` metadata value,
    when there, must say the same."""
    record_id = _text(rec.get("id"), where, "id", MAX_ID).strip()
    if nested:
        meta = rec.get("metadata")
        if meta is None:
            meta = {}
        if not isinstance(meta, dict):
            raise InputError(f"{where}, metadata: expected an object, got {_kind(meta)}")
        key, field = meta.get("case_key"), "metadata.case_key"
    else:
        key, field = rec.get("case_key"), "case_key"
    if key is not None:
        key = _text(key, where, field, MAX_ID).strip()
        if key != record_id:
            raise InputError(
                f"{where}, {field}: {key!r} is not the record id {record_id!r} (the record id "
                "is the case key)"
            )
    return record_id, record_id


def _is_nested(rec: Mapping[str, Any]) -> bool:
    return "responses" in rec or "suggestions" in rec or isinstance(rec.get("fields"), dict)


def _items(stream: IO[bytes], max_bytes: int) -> Iterator[object]:
    """The top-level records: the items of a JSON array, or the values of JSON Lines."""
    first = b""
    skipped = 0
    while skipped <= max_bytes:
        chunk = stream.read(1)
        skipped += 1
        if not chunk:
            break
        if not chunk.isspace() and chunk not in _BOM:
            first = chunk
            break
    if skipped > max_bytes:
        raise InputError(_too_large(max_bytes))
    if not first:
        raise InputError("the Argilla export is empty")
    bounded = _Bounded(stream, max_bytes, first, skipped)
    items: Iterator[object]
    if first == b"[":
        items = ijson.items(bounded, "item", use_float=True)
        return items
    if first == b"{":
        items = ijson.items(bounded, "", multiple_values=True, use_float=True)
        return items
    raise InputError(
        "the Argilla export is neither a JSON array of records nor JSON Lines (it starts with "
        f"{first!r})"
    )


def read_export(
    stream: IO[bytes], skipped: Skipped, *, max_bytes: int = MAX_BYTES
) -> Iterator[ExternalLabel]:
    """The submitted labels of an Argilla records export, one per (record, user), streamed.

    Drafts, discarded responses and suggestions are counted in ``skipped`` ("draft",
    "discarded", "suggestion"). Raises :class:`InputError` naming the record and the field for
    malformed JSON, a record or response of the wrong shape, a missing record id (case key), a
    response without a status, a value outside its question's shape, a record id seen twice,
    a user answering a question twice, or more than ``max_bytes`` of input."""
    items = _items(stream, max_bytes)
    seen: set[str] = set()
    index = 0
    try:
        for index, rec in enumerate(items, 1):
            yield from _record_labels(rec, index, seen, skipped)
    except ijson.JSONError as exc:
        raise InputError(
            f"record {index + 1}: the file is not valid JSON there ({str(exc)[:120]})"
        ) from None


def _record_labels(
    rec: object, index: int, seen: set[str], skipped: Skipped
) -> Iterator[ExternalLabel]:
    if not isinstance(rec, dict):
        raise InputError(f"record {index}: expected an object, got {_kind(rec)}")
    where = _where(index, rec.get("id"))
    nested = _is_nested(rec)
    record_id, case_key = _case_key(rec, where, nested)
    if record_id in seen:
        raise InputError(f"{where}, id: the record id {record_id!r} is in the file twice")
    seen.add(record_id)
    answers, suggested = (_answers_nested if nested else _answers_flat)(rec, where)
    if suggested:
        skipped.add("suggestion", len(suggested))
    for user, answer in answers.items():
        if answer.status != "submitted":
            skipped.add(answer.status)
            continue
        yield _label(record_id, case_key, where, user, answer)
