"""Label Studio: cases out as tasks with a labeling configuration, labels back from its exports.

Out (:func:`labeling_config`, :func:`export_tasks`, :func:`write_project`):

* the labeling configuration (XML) builds its choices from the taxonomy: the decision a single,
  required choice over ``Taxonomy.decisions``; the reason codes a multiple choice over
  ``Taxonomy.case_reason_codes()``, shown only while a decision that does not answer is picked
  (:func:`review.labels.labeling.needs_reasons`); an optional note. Each choice's value is the
  taxonomy key, so the labels come back as keys; its hint is the key's label and definition.
  The case is shown with Label Studio's ``Text`` tag only, which shows its data as text with
  its line breaks (a document keeps its headings, lists and tables as lines; each document
  opens with a ``=== reference ===`` line): no tag that renders HTML or Markdown, so a
  question or document cannot script the annotator's browser or make it fetch an image (a
  browser test checks this in Label Studio itself). Every value put in the XML goes through
  ElementTree, which escapes it.
* a task per ready case (a JSON array, written in batches of :data:`BATCH` cases): the case as a
  blind annotator sees it on the labeling page (:mod:`review.labels.blind`): the question, the
  required claims, the identity and its documents listed by reference, forbidden ones marked;
  never the expected decision, message, reason codes, category, evidence state, document roles,
  the author's notes or the agreed label. Labels made in Label Studio are independent labels
  like those made here, so the export is blind whoever writes it. Restricted text (the case's
  own text when it relies on a restricted document, a restricted document's title and body, a
  forbidden document's body) is written only when the exporting user has clearance, else
  :data:`review.core.clearance.REDACTED`, as :mod:`review.core.clearance` decides. The case key
  is in the task's data (``case_key``), which Label Studio keeps and exports, so each label
  returns to its case.

In (:func:`read_export`): Label Studio's full JSON export (tasks with their ``annotations``,
``predictions`` and ``drafts``) or its JSON-MIN export (one flat object per annotation: the
task's data, the answers by control name, ``annotator``, ``annotation_id``, times), told apart
by the first item. Each submitted annotation becomes one :class:`ExternalLabel`; a cancelled
(skipped) annotation, a draft, a prediction or a task nobody annotated is counted in
:class:`Skipped` and not yielded. The file is read as a stream with ijson: no more than one task
is held at a time, a file larger than ``max_bytes`` or a task larger than ``max_task_bytes`` is
refused, and every problem is an :class:`InputError` naming the task, the annotation and the
field. The reader does not look at the database or the taxonomy: an unknown case, user or
choice is for the import (:mod:`review.labels.imports`) to refuse.
"""

from __future__ import annotations

# Long module: the configuration, the tasks and the reader share one contract with Label Studio
# (the control names the reader expects are the ones the configuration defines, the data keys
# the tasks carry are the ones its objects show and the reader finds the case key in); split,
# each half would restate the other's names.
import datetime as dt
import json
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

import ijson
from sqlalchemy import Engine

from review.cases.cases import CaseFilter
from review.core import clearance, readable
from review.core.errors import InputError
from review.core.identity import Actor, Permission, require
from review.core.taxonomy import Taxonomy
from review.labels import outbound
from review.labels.external import ExternalLabel, Skipped
from storage.models import Case, CaseDocument

__all__ = [
    "BATCH",
    "CONFIG_FILE",
    "CONTROLS",
    "DATA_KEYS",
    "MAX_BYTES",
    "MAX_TASK_BYTES",
    "TASKS_FILE",
    "TOOL",
    "TaskExport",
    "doc_heading",
    "export_tasks",
    "labeling_config",
    "read_export",
    "task_data",
    "write_project",
]

TOOL = "label-studio"
#: the control tags of the configuration, by the ``from_name`` Label Studio stores
DECISION, REASONS, NOTE = "decision", "reason_codes", "note"
CONTROLS: tuple[str, ...] = (DECISION, REASONS, NOTE)
#: the keys of a task's data (the object tags' ``$`` values, and the case key)
DATA_KEYS: tuple[str, ...] = ("case_key", "question", "claims", "identity", "documents")
#: the object tag the choices and the note are attached to
QUESTION = "question"
#: cases per database read while writing tasks
BATCH = 200
#: the largest export read (bytes), and the largest single task in it
MAX_BYTES = 512 * 1024 * 1024
MAX_TASK_BYTES = 32 * 1024 * 1024
#: the deepest nesting of arrays and objects in an export (Label Studio's is about 8)
MAX_DEPTH = 64
#: the files :func:`write_project` writes
TASKS_FILE = "tasks.json"
CONFIG_FILE = "labeling_config.xml"
#: the longest choice value and note read
MAX_CHOICE_CHARS = 120
#: the longest case key read (the workbench's keys are at most 120 characters)
MAX_KEY_CHARS = 120
MAX_NOTE_CHARS = 10_000

NO_CLAIMS = "(no required claims)"
EMPTY_RETRIEVAL = "Retrieval returns nothing for this identity (empty retrieval)."
FORBIDDEN = "FORBIDDEN to this identity"
FORBIDDEN_TEXT = "forbidden: the identity must not get this text"

# Characters XML 1.0 cannot hold at all (ElementTree would write them and Label Studio refuse
# the configuration): C0 controls but tab, newline and carriage return, surrogates, U+FFFE/F.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


# ------------------------------------------------------------------------------------------
# The labeling configuration


def _attr(text: str) -> str:
    """Text for an XML attribute: characters XML cannot hold dropped (ElementTree escapes
    the rest)."""
    return _NOT_XML.sub("", text)


def _hint(label: str, definition: str) -> str:
    return _attr(f"{label}: {definition}")


def labeling_config(tax: Taxonomy) -> str:
    """The Label Studio labeling configuration (XML) for labeling cases with ``tax``."""
    view = ET.Element("View")
    ET.SubElement(view, "Header", value="Case")
    ET.SubElement(view, "Text", name="case_key", value="$case_key", valueType="text")
    ET.SubElement(view, "Header", value="Question")
    ET.SubElement(view, "Text", name=QUESTION, value="$question", valueType="text")
    ET.SubElement(view, "Header", value="Required claims")
    ET.SubElement(view, "Text", name="claims", value="$claims", valueType="text")
    ET.SubElement(view, "Header", value="Evidence")
    ET.SubElement(view, "Text", name="identity", value="$identity", valueType="text")
    ET.SubElement(view, "Text", name="documents", value="$documents", valueType="text")
    ET.SubElement(view, "Header", value="Decision")
    decision = ET.SubElement(
        view,
        "Choices",
        name=DECISION,
        toName=QUESTION,
        choice="single",
        required="true",
        showInline="false",
    )
    for key, term in tax.decisions.items():
        ET.SubElement(decision, "Choice", value=_attr(key), hint=_hint(term.label, term.definition))
    asking = [k for k, t in tax.decisions.items() if not t.answers]
    reasons_view = ET.SubElement(
        view,
        "View",
        visibleWhen="choice-selected",
        whenTagName=DECISION,
        whenChoiceValue=",".join(asking),
    )
    ET.SubElement(reasons_view, "Header", value="Why the evidence is not enough")
    reasons = ET.SubElement(
        reasons_view,
        "Choices",
        name=REASONS,
        toName=QUESTION,
        choice="multiple",
        showInline="false",
        visibleWhen="choice-selected",
        whenTagName=DECISION,
        whenChoiceValue=",".join(asking),
    )
    for key, rterm in tax.case_reason_codes().items():
        ET.SubElement(
            reasons, "Choice", value=_attr(key), hint=_hint(rterm.label, rterm.definition)
        )
    ET.SubElement(view, "Header", value="Note (optional)")
    ET.SubElement(
        view,
        "TextArea",
        name=NOTE,
        toName=QUESTION,
        rows="3",
        maxSubmissions="1",
        editable="true",
        placeholder="Anything the adjudicator should know",
    )
    ET.indent(view)
    return ET.tostring(view, encoding="unicode") + "\n"


# ------------------------------------------------------------------------------------------
# Tasks


@dataclass(frozen=True)
class TaskExport:
    """What an export wrote: tasks, and how many of them had restricted text withheld."""

    written: int
    redacted_cases: int = 0
    withheld_documents: int = 0

    def summary(self) -> str:
        parts = [f"{readable.count(self.written, 'task')} written"]
        if self.redacted_cases:
            parts.append(
                f"{readable.count(self.redacted_cases, 'case')} with restricted text withheld"
            )
        if self.withheld_documents:
            parts.append(
                f"{readable.count(self.withheld_documents, 'document text')} withheld "
                "(restricted or forbidden)"
            )
        return "; ".join(parts)


def _text(value: str) -> str:
    """Text as a task carries it: NUL (which PostgreSQL's JSON refuses) replaced."""
    return value.replace("\x00", "\ufffd")


def doc_heading(head: str) -> str:
    """The line that opens a document in a task's ``documents`` text."""
    return f"=== {head} ==="


def _document(viewer: Actor, cd: CaseDocument) -> tuple[str, bool]:
    """One document as the labeling page shows it blind (no role), and whether its text was
    withheld."""
    d = cd.document
    forbidden = cd.visibility != "visible"
    head = [f"{d.doc_key}@{d.version}"]
    if forbidden:
        head.insert(0, FORBIDDEN)
    if not d.is_current:
        head.append("not the current version")
    lines = [clearance.title(viewer, d.title, d.access_scope)]
    withheld = not (
        clearance.may_see(viewer, forbidden) and clearance.may_see_document(viewer, d.access_scope)
    )
    if withheld:
        lines.append(clearance.REDACTED)
    else:
        meta = (
            f"effective {readable.when(d.effective_date, with_time=False)} · {d.authority} · "
            f"{d.jurisdiction} · {d.access_scope}"
        )
        lines.append(meta + (f" · {FORBIDDEN_TEXT}" if forbidden else ""))
        lines.append("")
        lines.append(d.body)
    return _text("\n".join([doc_heading(" · ".join(head)), *lines])), withheld


def task_data(viewer: Actor, row: Case, restricted: bool) -> tuple[dict[str, Any], int]:
    """A task's data for one case as a blind annotator sees it, as ``viewer`` may see it
    (``restricted``: the case's own text is restricted), and how many document texts were
    withheld. Documents are listed by reference, never in the author's order."""
    question = clearance.shown(viewer, row.question, restricted)
    claims = clearance.shown_all(viewer, [c.text for c in row.claims], restricted)
    scopes = ", ".join(str(s) for s in row.identity_scopes) or "nothing"
    docs = sorted(
        row.documents, key=lambda cd: (f"{cd.document.doc_key}@{cd.document.version}", cd.id)
    )
    shown: list[str] = []
    withheld = 0
    for cd in docs:
        doc, w = _document(viewer, cd)
        shown.append(doc)
        withheld += w
    if not shown:
        shown.append(EMPTY_RETRIEVAL)
    data: dict[str, Any] = {
        "case_key": row.key,
        "question": _text(question),
        "claims": _text("\n".join(f"{i}. {c}" for i, c in enumerate(claims, 1)) or NO_CLAIMS),
        "identity": _text(f"Evidence as “{row.identity_name}” gets it (sees: {scopes})"),
        "documents": "\n\n".join(shown),
    }
    return data, withheld


def export_tasks(
    engine: Engine,
    out: IO[bytes],
    tax: Taxonomy,
    flt: CaseFilter | None = None,
    *,
    viewer: Actor,
) -> TaskExport:
    """Write the ready cases matching ``flt`` (family, slice, split, text; every ready case by
    default) as a Label Studio tasks file (a JSON array), as ``viewer`` may see them, reading
    and writing :data:`BATCH` cases at a time. Only a user who may exchange labels with
    other tools (reviewers, administrators) may export."""
    require(viewer, Permission.exchange_labels)
    flt = outbound.blind_filter(flt)  # refused before anything is written
    meta = {"source": "abstention-workbench", "taxonomy_version": tax.version}
    written = redacted = withheld = 0
    out.write(b"[")
    for rows in outbound.ready_batches(engine, flt, BATCH):
        for row, restricted in rows:
            data, w = task_data(viewer, row, restricted)
            task = {"data": data, "meta": {**meta, "case_key": row.key}}
            out.write(b"\n" if written == 0 else b",\n")
            out.write(json.dumps(task, ensure_ascii=False).encode("utf-8"))
            written += 1
            redacted += restricted and not clearance.may_see(viewer, restricted)
            withheld += w
    out.write(b"\n]\n" if written else b"]\n")
    return TaskExport(written, redacted, withheld)


def write_project(
    engine: Engine,
    directory: Path,
    tax: Taxonomy,
    flt: CaseFilter | None = None,
    *,
    viewer: Actor,
) -> TaskExport:
    """Write :data:`CONFIG_FILE` (the labeling configuration, to paste into the project's
    Labeling Interface) and :data:`TASKS_FILE` (the tasks, to import) into ``directory``."""
    require(viewer, Permission.exchange_labels)
    outbound.blind_filter(flt)  # refused before anything is written
    directory.mkdir(parents=True, exist_ok=True)
    (directory / CONFIG_FILE).write_text(labeling_config(tax), encoding="utf-8")
    with (directory / TASKS_FILE).open("wb") as f:
        return export_tasks(engine, f, tax, flt, viewer=viewer)


# ------------------------------------------------------------------------------------------
# Reading an export


class _Bounded:
    """A binary stream that refuses to be read past ``max_bytes`` in all, or past
    ``max_task`` bytes since the last call of :meth:`mark` (the start of the current item)."""

    def __init__(self, raw: IO[bytes], max_bytes: int, max_task: int) -> None:
        self.raw = raw
        self.max_bytes = max_bytes
        self.max_task = max_task
        self.total = 0
        self.since = 0
        self.item = 0
        self.pending = b""

    def mark(self, item: int) -> None:
        self.item = item
        self.since = 0

    def first(self) -> bytes:
        """The first byte that is not white space (or a byte order mark), b"" for none; it
        is still read again."""
        while True:
            chunk = self.read(65536)
            if not chunk:
                return b""
            self.pending = chunk
            rest = chunk.lstrip(b"\xef\xbb\xbf \t\r\n")
            if rest:
                return rest[:1]
            self.pending = b""

    def read(self, n: int = -1) -> bytes:
        if n == 0:
            return b""
        if self.pending:
            chunk, self.pending = self.pending, b""
            return chunk
        chunk = bytes(self.raw.read(n if n > 0 else 65536))
        self.total += len(chunk)
        self.since += len(chunk)
        if self.total > self.max_bytes:
            raise InputError(
                f"the export is larger than {self.max_bytes:,} bytes: it was not read "
                "(export fewer tasks at a time)"
            )
        if self.since > self.max_task:
            raise InputError(
                f"item {self.item + 1} of the export is larger than {self.max_task:,} bytes: "
                "the export was not read"
            )
        return chunk


Shape = Literal["full", "min"]


def _shape(item: Any, n: int) -> Shape:
    if not isinstance(item, dict):
        raise InputError(f"item {n}: expected a task (a JSON object), found {type(item).__name__}")
    if "annotations" in item or "completions" in item:
        return "full"
    if "annotation_id" in item:
        return "min"
    if "data" in item:
        raise InputError(
            f"item {n}: a task without annotations: this is a tasks file, not an export "
            "(export the project from Label Studio as JSON or JSON-MIN)"
        )
    raise InputError(
        f"item {n}: neither a task with annotations (JSON export) nor an annotation with "
        "annotation_id (JSON-MIN export)"
    )


def read_export(
    stream: IO[bytes],
    skipped: Skipped,
    *,
    max_bytes: int = MAX_BYTES,
    max_task_bytes: int = MAX_TASK_BYTES,
) -> Iterator[ExternalLabel]:
    """The submitted annotations of a Label Studio JSON or JSON-MIN export, one at a time.

    Cancelled annotations, drafts, predictions and tasks without an annotation are counted in
    ``skipped``. Raises :class:`InputError` naming the item, task, annotation and field for
    malformed JSON, a shape that is neither export, a missing case key or decision, a choice
    that is empty, not text or more than one for the single decision, an unknown control,
    an annotation id seen twice, or a file over ``max_bytes`` (a task over
    ``max_task_bytes``)."""
    bounded = _Bounded(stream, max_bytes, max_task_bytes)
    first = bounded.first()
    if first != b"[":
        raise InputError(
            "the export is empty: expected a JSON array of tasks"
            if not first
            else "the export is not a JSON array of tasks (Label Studio exports one)"
        )
    seen: set[str] = set()
    shape: Shape | None = None
    n = 0
    items = _items(bounded)
    while True:
        try:
            item = next(items)
        except StopIteration:
            break
        except (ijson.JSONError, UnicodeDecodeError) as exc:
            raise InputError(
                f"the export is not valid JSON (after item {n}, near byte {bounded.total:,}): "
                f"{_short(str(exc))}"
            ) from None
        n += 1
        if shape is None:
            shape = _shape(item, n)
        elif _shape(item, n) != shape:
            raise InputError(
                f"item {n}: the export mixes JSON and JSON-MIN items (item 1 was "
                f"{'a task' if shape == 'full' else 'a JSON-MIN annotation'})"
            )
        if shape == "full":
            yield from _full_task(item, n, skipped, seen)
        else:
            label = _min_item(item, n, skipped, seen)
            if label is not None:
                yield label
        bounded.mark(n)


def _items(bounded: _Bounded) -> Iterator[Any]:
    """The items of the top-level array, built one at a time from the parser's events.
    (ijson's own ``items`` builds each event's path, which grows with the nesting: a
    megabyte of brackets would take hours and gigabytes; here nesting deeper than
    :data:`MAX_DEPTH` is refused.)"""
    depth = 0
    builder: Any = None
    for event, value in ijson.basic_parse(bounded, use_float=True):
        if depth == 0:  # the array itself (the first byte was checked to be "[")
            depth = 1
            continue
        if depth == 1:
            if event == "end_array":
                depth = 0
                continue
            builder = ijson.ObjectBuilder()
        if event in ("start_map", "start_array"):
            depth += 1
            if depth > MAX_DEPTH:
                raise InputError(
                    f"item {bounded.item + 1}: nested more than {MAX_DEPTH} levels deep: not "
                    "a Label Studio export"
                )
        elif event in ("end_map", "end_array"):
            depth -= 1
        builder.event(event, value)
        if depth == 1:
            yield builder.value
            builder = None


def _short(text: str, n: int = 200) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


# --- the full JSON export -----------------------------------------------------------------


def _id(value: Any) -> int | None:
    """Label Studio's id of a task or annotation (a non-negative integer), or None."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        return None
    return value


def _task_id(task: Mapping[str, Any], n: int) -> str:
    """The task for messages: its id when it has a proper one, else its place in the file
    (never text from the file, which could be anything)."""
    tid = _id(task.get("id"))
    return f"item {n}" if tid is None else f"task {tid}"


def _case_key(data: Any, where: str) -> str:
    if not isinstance(data, dict):
        raise InputError(f"{where}: data: expected an object with case_key")
    key = data.get("case_key")
    if not isinstance(key, str) or not key.strip():
        raise InputError(
            f"{where}: data.case_key is missing or not text: this task was not exported from "
            "the workbench"
        )
    if len(key.strip()) > MAX_KEY_CHARS:
        raise InputError(
            f"{where}: data.case_key: {len(key):,} characters: not a workbench case key"
        )
    return key.strip()


def _count_list(
    task: Mapping[str, Any], field: str, why: str, where: str, skipped: Skipped
) -> None:
    value = task.get(field)
    if value is None:
        return
    if not isinstance(value, list):
        raise InputError(f"{where}: {field}: expected a list, found {type(value).__name__}")
    if value:
        skipped.add(why, len(value))


def _full_task(
    task: dict[str, Any], n: int, skipped: Skipped, seen: set[str]
) -> Iterator[ExternalLabel]:
    where = _task_id(task, n)
    key = _case_key(task.get("data"), where)
    _count_list(task, "predictions", "prediction", where, skipped)
    _count_list(task, "drafts", "draft", where, skipped)
    field = "annotations" if "annotations" in task else "completions"
    annotations = task.get(field)
    if not isinstance(annotations, list):
        raise InputError(f"{where}: {field}: expected a list, found {type(annotations).__name__}")
    if not annotations:
        skipped.add("task without annotation")
    for i, ann in enumerate(annotations, 1):
        label = _annotation(ann, i, where, key, skipped, seen)
        if label is not None:
            yield label


def _annotation_ref(ann: Mapping[str, Any], where: str, i: int) -> str:
    aid = _id(ann.get("id"))
    if aid is None:
        raise InputError(
            f"{where}, annotation {i}: id is missing or not a number (Label Studio gives "
            "every annotation one)"
        )
    return str(aid)


def _annotation(
    ann: Any, i: int, task_where: str, key: str, skipped: Skipped, seen: set[str]
) -> ExternalLabel | None:
    if not isinstance(ann, dict):
        raise InputError(f"{task_where}, annotation {i}: expected an object")
    ref = _annotation_ref(ann, task_where, i)
    where = f"{task_where}, annotation {ref}"
    if ref in seen:
        raise InputError(f"{where}: id: the annotation id {ref} appears twice in the export")
    seen.add(ref)
    if _flag(ann, "was_cancelled", where) or _flag(ann, "skipped", where):
        skipped.add("cancelled")
        return None
    result = ann.get("result")
    if not isinstance(result, list):
        raise InputError(f"{where}: result: expected a list, found {type(result).__name__}")
    answers = _results(result, where)
    if DECISION not in answers:
        raise InputError(f"{where}: result: no {DECISION!r} choice: a submitted label names one")
    return ExternalLabel(
        tool=TOOL,
        where=where,
        ref=ref,
        case_key=key,
        user=_user(ann.get("completed_by"), where, "completed_by"),
        decision=_single(answers[DECISION], where),
        reason_codes=tuple(dict.fromkeys(answers.get(REASONS, []))),
        note=_note(answers.get(NOTE, []), where),
        labeled_at=_when(ann, where),
        lead_seconds=_lead(ann.get("lead_time"), where, "lead_time"),
    )


def _flag(ann: Mapping[str, Any], field: str, where: str) -> bool:
    value = ann.get(field)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InputError(f"{where}: {field}: expected true or false")
    return value


_RESULT_TYPE = {DECISION: "choices", REASONS: "choices", NOTE: "textarea"}
_VALUE_KEY = {"choices": "choices", "textarea": "text"}


def _results(result: list[Any], where: str) -> dict[str, list[str]]:
    """The answers of one annotation by control: the choices (decision, reason codes) or the
    note's lines, each checked for its shape."""
    answers: dict[str, list[str]] = {}
    for j, r in enumerate(result, 1):
        at = f"{where}, result {j}"
        if not isinstance(r, dict):
            raise InputError(f"{at}: expected an object")
        name = r.get("from_name")
        if name not in _RESULT_TYPE:
            raise InputError(
                f"{at}: from_name {_short(repr(name), 60)} is not one of the configuration's "
                f"controls ({', '.join(CONTROLS)}): was the project set up with the "
                "workbench's labeling configuration?"
            )
        kind = _RESULT_TYPE[name]
        if r.get("type") != kind:
            raise InputError(f"{at}: type: {name} is a {kind} result, found {r.get('type')!r}")
        value = r.get("value")
        vkey = _VALUE_KEY[kind]
        if not isinstance(value, dict) or not isinstance(value.get(vkey), list):
            raise InputError(f"{at}: value.{vkey}: expected a list of {name} values")
        if name == DECISION and DECISION in answers:
            raise InputError(f"{at}: a second {DECISION!r} result: a label has one decision")
        values = value[vkey]
        answers.setdefault(name, []).extend(
            _choice(v, f"{at}: value.{vkey}") if kind == "choices" else _line(v, at) for v in values
        )
    return answers


def _choice(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{where}: expected a non-empty choice, found {_short(repr(value), 60)}")
    if len(value) > MAX_CHOICE_CHARS:
        raise InputError(f"{where}: a choice of {len(value):,} characters is not a taxonomy key")
    return value.strip()


def _line(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"{where}: value.text: expected text, found {type(value).__name__}")
    return value


def _single(choices: list[str], where: str) -> str:
    if len(choices) != 1:
        raise InputError(
            f"{where}: {DECISION}: {len(choices)} choices "
            f"({', '.join(map(repr, choices)) or 'none'}): a label has exactly one decision"
        )
    return choices[0]


def _note(lines: list[str], where: str) -> str:
    note = "\n".join(lines).strip()
    if len(note) > MAX_NOTE_CHARS:
        raise InputError(
            f"{where}: {NOTE}: {len(note):,} characters, more than the {MAX_NOTE_CHARS:,} a "
            "note may have"
        )
    return note


def _user(value: Any, where: str, field: str) -> str:
    """The annotator as the export names them: an e-mail, or Label Studio's user id."""
    if isinstance(value, dict):
        email = value.get("email")
        if isinstance(email, str) and email.strip():
            return email.strip()
        value = value.get("id")
    if isinstance(value, bool):
        value = None
    if isinstance(value, int) or (isinstance(value, str) and value.strip()):
        text = str(value).strip()
        if len(text) <= 320:
            return text
    raise InputError(f"{where}: {field}: no annotator (a user id or an e-mail) is given")


def _when(ann: Mapping[str, Any], where: str) -> dt.datetime | None:
    """When the annotation was last changed (updated_at, else created_at), in UTC."""
    for field in ("updated_at", "created_at"):
        value = ann.get(field)
        if value is None or value == "":
            continue
        if not isinstance(value, str) or len(value) > 40:
            raise InputError(f"{where}: {field}: expected an ISO 8601 time")
        try:
            when = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InputError(
                f"{where}: {field}: {_short(value, 40)!r} is not an ISO 8601 time"
            ) from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        return when.astimezone(dt.UTC)
    return None


def _lead(value: Any, where: str, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{where}: {field}: expected seconds (a number)")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0:
        raise InputError(f"{where}: {field}: {value!r} is not a number of seconds")
    return seconds


# --- the JSON-MIN export ------------------------------------------------------------------


def _min_item(
    item: dict[str, Any], n: int, skipped: Skipped, seen: set[str]
) -> ExternalLabel | None:
    """One JSON-MIN record: the task's data at the top level, each control's answer under its
    name (one choice or line as text, several as ``{"choices": [...]}`` or ``{"text": [...]}``,
    several results as a list of those), the annotator and the annotation's id and times."""
    task = _task_id(item, n)
    aid = item.get("annotation_id")
    if aid is None:
        skipped.add("task without annotation")
        return None
    if _id(aid) is None:
        raise InputError(f"{task}: annotation_id: expected the annotation's id (a number)")
    ref = str(aid)
    where = f"{task}, annotation {ref}"
    if ref in seen:
        raise InputError(
            f"{where}: annotation_id: the annotation id {ref} appears twice in the export"
        )
    seen.add(ref)
    key = _case_key(item, where)
    if DECISION not in item or item[DECISION] in (None, "", []):
        raise InputError(f"{where}: {DECISION}: missing: a submitted label names one")
    decision = _single(_min_values(item[DECISION], "choices", f"{where}: {DECISION}"), where)
    reasons = _min_values(item.get(REASONS), "choices", f"{where}: {REASONS}")
    note = _min_values(item.get(NOTE), "text", f"{where}: {NOTE}")
    return ExternalLabel(
        tool=TOOL,
        where=where,
        ref=ref,
        case_key=key,
        user=_user(item.get("annotator"), where, "annotator"),
        decision=decision,
        reason_codes=tuple(dict.fromkeys(reasons)),
        note=_note(note, where),
        labeled_at=_when(item, where),
        lead_seconds=_lead(item.get("lead_time"), where, "lead_time"),
    )


def _min_values(value: Any, vkey: str, where: str) -> list[str]:
    """The values of one control in a JSON-MIN record."""
    if value is None:
        return []
    parts = value if isinstance(value, list) else [value]
    out: list[str] = []
    for part in parts:
        if isinstance(part, str):
            values: list[Any] = [part]
        elif isinstance(part, dict) and isinstance(part.get(vkey), list):
            values = part[vkey]
        else:
            raise InputError(
                f"{where}: expected text or an object with a {vkey!r} list, found "
                f"{type(part).__name__}"
            )
        out.extend(_choice(v, where) if vkey == "choices" else _line(v, where) for v in values)
    return out
