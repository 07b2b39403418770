"""Label Studio in and out: the labeling configuration, the tasks export (blind, with
clearance), and the reader of its JSON and JSON-MIN exports, on the exports a real Label
Studio made (tests/labels/data/labelstudio/, by tools/labelstudio_roundtrip.py) and on hostile
ones."""

from __future__ import annotations

import io
import json
import re
import tracemalloc
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from review.cases import cases
from review.core import clearance
from review.core.errors import InputError, PermissionDenied
from review.core.taxonomy import DecisionTerm, ReasonTerm, Taxonomy
from review.labels import labeling, labelstudio
from review.labels.external import Skipped
from storage.db import read_session
from storage.models import Case
from tests.helpers.actors import make_actor
from tests.helpers.labelstudio import (
    EXPORTS,
    check_exports,
    expected_labels,
    load_expected,
    read,
)

DATA = Path(__file__).parent / "data" / "labelstudio"
ADMIN = make_actor("admin", "admin@test.example", clearance=True, uid=1)
UNCLEARED = make_actor("admin", "admin2@test.example", clearance=False, uid=2)
SAFE_TAGS = {"View", "Header", "Text", "Choices", "Choice", "TextArea"}
HOSTILE = (
    '<script>alert(1)</script> <img src=x onerror="alert(2)"> ![p](http://evil.example/p.png) '
    '=HYPERLINK("http://evil.example","x") bell\x07 esc\x1b[31m \u202eexe.txt\u202c '
    '"quoted" & </Text></View>'
)


# ------------------------------------------------------------------------------------------
# The labeling configuration


def _config(tax: Taxonomy) -> ET.Element:
    return ET.fromstring(labelstudio.labeling_config(tax))


def _choices(root: ET.Element, name: str) -> ET.Element:
    found = [c for c in root.iter("Choices") if c.get("name") == name]
    assert len(found) == 1
    return found[0]


def test_the_configuration_builds_its_choices_from_the_taxonomy(tax: Taxonomy) -> None:
    root = _config(tax)
    decision = _choices(root, "decision")
    assert decision.get("choice") == "single" and decision.get("required") == "true"
    assert [c.get("value") for c in decision] == list(tax.decisions)
    for c in decision:
        term = tax.decisions[str(c.get("value"))]
        assert c.get("hint") == f"{term.label}: {term.definition}"
    reasons = _choices(root, "reason_codes")
    assert reasons.get("choice") == "multiple" and reasons.get("required") is None
    assert [c.get("value") for c in reasons] == list(tax.case_reason_codes())
    gate_only = set(tax.reason_codes) - set(tax.case_reason_codes())
    assert not gate_only & {c.get("value") for c in reasons}
    # shown only while a decision that asks for reasons is picked
    assert reasons.get("visibleWhen") == "choice-selected"
    assert reasons.get("whenTagName") == "decision"
    asking = str(reasons.get("whenChoiceValue")).split(",")
    assert asking == [d for d in tax.decisions if labeling.needs_reasons(tax, d)]
    notes = [t for t in root.iter("TextArea")]
    assert [n.get("name") for n in notes] == ["note"]
    assert {t.tag for t in root.iter()} <= SAFE_TAGS  # no HyperText, HTML or Markdown tag
    objects = {t.get("name"): t.get("value") for t in root.iter() if t.tag == "Text"}
    assert set(objects.values()) == {f"${k}" for k in labelstudio.DATA_KEYS}
    for ctl in root.iter():
        if ctl.tag in {"Choices", "TextArea"}:
            assert ctl.get("toName") in objects


def test_the_configuration_escapes_what_the_taxonomy_says(tax: Taxonomy) -> None:
    hostile_decisions = {
        k: DecisionTerm(
            label=f"{v.label} {HOSTILE}",
            definition=f"{v.definition} {HOSTILE}"[:300],
            answers=v.answers,
            messages=v.messages,
        )
        for k, v in tax.decisions.items()
    }
    hostile_reasons = {
        k: ReasonTerm(label=f'{v.label} "/><script>x</script>', definition=v.definition)
        for k, v in tax.reason_codes.items()
    }
    bad = tax.model_copy(update={"decisions": hostile_decisions, "reason_codes": hostile_reasons})
    text = labelstudio.labeling_config(bad)
    root = ET.fromstring(text)  # well-formed XML whatever the labels say
    assert "<script" not in text and "<img" not in text
    assert {t.tag for t in root.iter()} <= SAFE_TAGS
    first = _choices(root, "decision")[0]
    hint = str(first.get("hint"))
    assert "<script>alert(1)</script>" in hint  # kept as text, escaped in the attribute
    assert "\x07" not in hint and "\x1b" not in hint  # XML cannot hold them: dropped
    assert "\u202e" in hint  # a character XML holds is kept
    assert [c.get("value") for c in _choices(root, "decision")] == list(tax.decisions)


def test_the_committed_configuration_is_the_one_the_taxonomy_makes(tax: Taxonomy) -> None:
    """The exports under data/ were made with this configuration (the script wrote it):
    when the taxonomy changes, run tools/labelstudio_roundtrip.py again."""
    committed = (DATA / labelstudio.CONFIG_FILE).read_text("utf-8")
    assert committed == labelstudio.labeling_config(tax)


# ------------------------------------------------------------------------------------------
# The tasks export


def _tasks(engine: Engine, tax: Taxonomy, viewer: Any, **flt: Any) -> list[dict[str, Any]]:
    out = io.BytesIO()
    report = labelstudio.export_tasks(
        engine, out, tax, cases.CaseFilter(**flt) if flt else None, viewer=viewer
    )
    tasks: list[dict[str, Any]] = json.loads(out.getvalue())
    assert report.written == len(tasks)
    return tasks


def _blocks(text: str) -> list[dict[str, str]]:
    """The documents of a task's ``documents`` text: reference line, then its text."""
    parts = re.split(r"^=== (.*) ===$", text, flags=re.M)
    if len(parts) == 1:
        assert text == labelstudio.EMPTY_RETRIEVAL
        return []
    assert parts[0] == ""
    return [{"ref": r, "text": t} for r, t in zip(parts[1::2], parts[2::2], strict=True)]


def _ready(engine: Engine) -> dict[str, Case]:
    with read_session(engine) as s:
        rows = s.scalars(cases.case_query().where(Case.status == "ready")).all()
        return {r.key: r for r in rows}


def test_every_ready_case_is_a_task_with_its_key_and_nothing_of_the_judgement(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    tasks = _tasks(demo_engine, tax, ADMIN)
    ready = _ready(demo_engine)
    assert sorted(t["data"]["case_key"] for t in tasks) == sorted(ready)
    noted = 0
    for t in tasks:
        assert set(t) == {"data", "meta"}
        assert set(t["data"]) == set(labelstudio.DATA_KEYS)
        assert t["meta"]["case_key"] == t["data"]["case_key"]
        row = ready[t["data"]["case_key"]]
        body = json.dumps(t, ensure_ascii=False)
        # the author's notes (which often give the answer away) never leave
        if len(row.notes) > 20:
            noted += 1
            assert row.notes not in body
        for key in ("expected_decision", "reason_codes", "category", "evidence_state", "role"):
            assert f'"{key}"' not in body
        refs = [d["ref"].split(" · ") for d in _blocks(t["data"]["documents"])]
        bare = [next(p for p in r if "@" in p) for r in refs]
        assert bare == sorted(bare), "documents are listed by reference, not the author's order"
        assert t["data"]["question"] == row.question  # the exporter has clearance
    assert noted > 5


def test_forbidden_documents_are_marked_and_restricted_text_needs_clearance(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    with read_session(demo_engine) as s:
        ready = _ready(demo_engine)
        secret = clearance.restricted_cases(s, [r.id for r in ready.values()])
    assert secret, "the demo has cases relying on restricted documents"
    cleared = {t["data"]["case_key"]: t["data"] for t in _tasks(demo_engine, tax, ADMIN)}
    out = io.BytesIO()
    report = labelstudio.export_tasks(demo_engine, out, tax, viewer=UNCLEARED)
    plain = {t["data"]["case_key"]: t["data"] for t in json.loads(out.getvalue())}
    assert report.redacted_cases == len(secret) and report.withheld_documents > 0
    forbidden = 0
    for key, row in ready.items():
        data = plain[key]
        if row.id in secret:
            assert data["question"] == clearance.REDACTED
            assert row.question not in json.dumps(data, ensure_ascii=False)
            assert cleared[key]["question"] == row.question
        else:
            assert data["question"] == row.question
        for cd, shown in zip(
            sorted(row.documents, key=lambda d: f"{d.document.doc_key}@{d.document.version}"),
            _blocks(data["documents"]),
            strict=True,
        ):
            restricted = cd.document.access_scope == clearance.RESTRICTED_SCOPE
            if cd.visibility != "visible":
                forbidden += 1
                assert shown["ref"].startswith(labelstudio.FORBIDDEN)
            if restricted or cd.visibility != "visible":
                assert cd.document.body not in shown["text"]
                assert clearance.REDACTED in shown["text"]
            else:
                assert cd.document.body in shown["text"]
            if restricted:
                assert cd.document.title not in shown["text"]
    assert forbidden > 0
    assert "TaskExport" not in report.summary() and "withheld" in report.summary()


def test_a_filter_picks_a_family_and_a_judgement_filter_is_refused(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    family = cases.family_keys(demo_engine)[0]
    tasks = _tasks(demo_engine, tax, ADMIN, family=family)
    in_family = [r.key for r in _ready(demo_engine).values() if r.family and r.family.key == family]
    assert sorted(t["data"]["case_key"] for t in tasks) == sorted(in_family)
    with pytest.raises(InputError, match="blind"):
        _tasks(demo_engine, tax, ADMIN, expected_decision="abstain")
    with pytest.raises(InputError, match="blind"):
        _tasks(demo_engine, tax, ADMIN, category="out_of_scope")
    with pytest.raises(InputError, match="ready"):
        _tasks(demo_engine, tax, ADMIN, status="draft")


def test_only_a_user_who_exchanges_labels_exports(demo_engine: Engine, tax: Taxonomy) -> None:
    for role in ("annotator", "product_owner", "compliance"):
        with pytest.raises(PermissionDenied):
            labelstudio.export_tasks(demo_engine, io.BytesIO(), tax, viewer=make_actor(role))
    reviewer = make_actor("reviewer")
    assert labelstudio.export_tasks(demo_engine, io.BytesIO(), tax, viewer=reviewer).written


def test_tasks_are_written_in_batches_as_one_array(
    demo_engine: Engine, tax: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = _tasks(demo_engine, tax, ADMIN)
    monkeypatch.setattr(labelstudio, "BATCH", 7)
    assert _tasks(demo_engine, tax, ADMIN) == whole
    out = io.BytesIO()
    assert (
        labelstudio.export_tasks(
            demo_engine, out, tax, cases.CaseFilter(family="no-such-family"), viewer=ADMIN
        ).written
        == 0
    )
    assert json.loads(out.getvalue()) == []


def test_write_project_writes_the_configuration_and_the_tasks(
    demo_engine: Engine, tax: Taxonomy, tmp_path: Path
) -> None:
    report = labelstudio.write_project(demo_engine, tmp_path / "ls", tax, viewer=ADMIN)
    assert (tmp_path / "ls" / labelstudio.CONFIG_FILE).read_text() == labelstudio.labeling_config(
        tax
    )
    tasks = json.loads((tmp_path / "ls" / labelstudio.TASKS_FILE).read_bytes())
    assert len(tasks) == report.written > 0


def test_the_tasks_file_is_not_an_export(demo_engine: Engine, tax: Taxonomy) -> None:
    out = io.BytesIO()
    labelstudio.export_tasks(demo_engine, out, tax, viewer=ADMIN)
    with pytest.raises(InputError, match="tasks file, not an export"):
        read(out.getvalue())


# ------------------------------------------------------------------------------------------
# Reading real exports


def test_the_exports_label_studio_made_read_back_as_submitted() -> None:
    """Label Studio 1.23's JSON and JSON-MIN exports, by user id (its export button) and by
    e-mail (a snapshot export): each submitted label once, as last changed; the cancelled
    annotation, the draft and the prediction skipped."""
    expected = load_expected(DATA)
    assert expected["label_studio"]
    check_exports(DATA, expected)
    kinds = {s["kind"] for s in expected["steps"]}
    assert kinds == {"label", "cancel", "change", "draft", "prediction"}


def test_a_changed_annotation_reads_as_changed_and_hostile_notes_stay_text() -> None:
    expected = load_expected(DATA)
    change = next(s for s in expected["steps"] if s["kind"] == "change")
    hostile = next(s for s in expected["steps"] if "<script>" in s["note"])
    for name in EXPORTS:
        labels, _ = read((DATA / name).read_bytes())
        by_ref = {x.ref: x for x in labels}
        assert by_ref[str(change["id"])].decision == change["decision"]
        assert by_ref[str(hostile["id"])].note == hostile["note"].strip()
        assert "\x07" in by_ref[str(hostile["id"])].note  # the reader keeps text as it is


def test_the_exports_carry_the_tasks_data_as_exported() -> None:
    tasks = {
        t["data"]["case_key"]: t["data"] for t in json.loads((DATA / "tasks.json").read_bytes())
    }
    for t in json.loads((DATA / "full.json").read_bytes()):
        assert t["data"] == tasks[t["data"]["case_key"]]


# ------------------------------------------------------------------------------------------
# Hostile and malformed exports


def _task(tid: int = 1, annotations: Any = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": tid,
        "data": {"case_key": f"CASE-{tid:03d}", "question": "q"},
        "annotations": [_ann(tid * 10)] if annotations is None else annotations,
        "predictions": [],
        "drafts": [],
        **extra,
    }


def _choice(name: str, *values: Any) -> dict[str, Any]:
    return {
        "from_name": name,
        "to_name": "question",
        "type": "choices",
        "value": {"choices": list(values)},
    }


def _ann(aid: Any, result: Any = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": aid,
        "completed_by": {"id": 3, "email": "ann@example.org"},
        "result": [_choice("decision", "abstain")] if result is None else result,
        "was_cancelled": False,
        "created_at": "2026-01-02T03:04:05.123456Z",
        "updated_at": "2026-01-02T03:05:05Z",
        "lead_time": 12.5,
        **extra,
    }


def _body(items: Any) -> bytes:
    return json.dumps(items).encode()


def _refused(body: bytes, match: str, **kw: Any) -> None:
    with pytest.raises(InputError, match=match):
        list(labelstudio.read_export(io.BytesIO(body), Skipped(), **kw))


def test_a_plain_task_reads_with_its_fields() -> None:
    ann = _ann(
        7,
        [
            _choice("decision", "abstain"),
            _choice("reason_codes", "evidence_stale", "no_answer_bearing_evidence"),
            {
                "from_name": "note",
                "to_name": "question",
                "type": "textarea",
                "value": {"text": ["a", "b"]},
            },
        ],
    )
    labels, skipped = read(_body([_task(1, [ann], predictions=[1, 2], drafts=[{"id": 1}])]))
    (x,) = labels
    assert (x.ref, x.case_key, x.user, x.decision) == (
        "7",
        "CASE-001",
        "ann@example.org",
        "abstain",
    )
    assert x.reason_codes == ("evidence_stale", "no_answer_bearing_evidence")
    assert x.note == "a\nb" and x.lead_seconds == 12.5
    assert x.labeled_at is not None and x.labeled_at.isoformat() == "2026-01-02T03:05:05+00:00"
    assert x.where == "task 1, annotation 7"
    assert skipped.counts == {"prediction": 2, "draft": 1}


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"", "empty"),
        (b"   \n", "empty"),
        (b'{"id": 1}', "not a JSON array"),
        (b'"text"', "not a JSON array"),
        (b"[1, 2]", r"item 1: expected a task"),
        (b'[{"id": 1, "data": {"case_key": "C"}, "annotations": [', "not valid JSON"),
        (b'[{"id": 1, "data": {"case_key": "C"}}]', "tasks file, not an export"),
        (b'[{"id": 1}]', "neither a task"),
        (b"[] trailing", "not valid JSON"),
        (b'[{"a": 1,}]', "not valid JSON"),
        (b'[{"a": "\xff\xfe"}]', "not valid JSON"),
    ],
)
def test_malformed_files_are_refused(body: bytes, match: str) -> None:
    _refused(body, match)


@pytest.mark.parametrize(
    ("task", "match"),
    [
        (_task(annotations={"id": 1}), r"task 1: annotations: expected a list"),
        (_task(annotations=[5]), r"task 1, annotation 1: expected an object"),
        (_task(annotations=[_ann(None)]), r"task 1, annotation 1: id is missing"),
        (_task(annotations=[_ann(True)]), r"task 1, annotation 1: id is missing"),
        (_task(annotations=[_ann(4, result={"a": 1})]), r"annotation 4: result: expected a list"),
        (_task(annotations=[_ann(4, result=[])]), r"annotation 4: result: no 'decision'"),
        (_task(annotations=[_ann(4, result=[7])]), r"annotation 4, result 1: expected an object"),
        (
            _task(annotations=[_ann(4, result=[_choice("verdict", "abstain")])]),
            r"annotation 4, result 1: from_name 'verdict' is not one of",
        ),
        (
            _task(
                annotations=[
                    _ann(4, result=[{**_choice("decision", "x"), "value": {"text": ["x"]}}])
                ]
            ),
            r"annotation 4, result 1: value.choices: expected a list",
        ),
        (
            _task(annotations=[_ann(4, result=[{**_choice("decision", "x"), "value": None}])]),
            r"value.choices: expected a list",
        ),
        (
            _task(annotations=[_ann(4, result=[{**_choice("decision", "x"), "type": "textarea"}])]),
            r"type: decision is a choices result",
        ),
        (
            _task(annotations=[_ann(4, result=[_choice("decision", "abstain", "answer")])]),
            r"annotation 4: decision: 2 choices .* exactly one decision",
        ),
        (
            _task(annotations=[_ann(4, result=[_choice("decision")])]),
            r"annotation 4: decision: 0 choices",
        ),
        (
            _task(
                annotations=[_ann(4, result=[_choice("decision", "a"), _choice("decision", "b")])]
            ),
            r"annotation 4, result 2: a second 'decision' result",
        ),
        (
            _task(annotations=[_ann(4, result=[_choice("decision", "")])]),
            r"expected a non-empty choice",
        ),
        (
            _task(annotations=[_ann(4, result=[_choice("decision", {"x": 1})])]),
            r"expected a non-empty choice",
        ),
        (
            _task(annotations=[_ann(4, result=[_choice("decision", "x" * 500)])]),
            r"not a taxonomy key",
        ),
        (
            _task(annotations=[_ann(4, completed_by=None)]),
            r"annotation 4: completed_by: no annotator",
        ),
        (_task(annotations=[_ann(4, completed_by={"email": ""})]), r"completed_by: no annotator"),
        (_task(annotations=[_ann(4, completed_by=[1])]), r"completed_by: no annotator"),
        (
            _task(annotations=[_ann(4, lead_time="12")]),
            r"annotation 4: lead_time: expected seconds",
        ),
        (_task(annotations=[_ann(4, lead_time=-1)]), r"lead_time: -1 is not a number of seconds"),
        (_task(annotations=[_ann(4, updated_at="yesterday")]), r"updated_at: 'yesterday' is not"),
        (
            _task(annotations=[_ann(4, created_at=5, updated_at=None)]),
            r"created_at: expected an ISO",
        ),
        (
            _task(annotations=[_ann(4, was_cancelled="no")]),
            r"was_cancelled: expected true or false",
        ),
        (_task(predictions={"a": 1}), r"task 1: predictions: expected a list"),
        (_task(drafts="x"), r"task 1: drafts: expected a list"),
        ({**_task(), "data": {"question": "q"}}, r"task 1: data.case_key is missing"),
        ({**_task(), "data": {"case_key": 12}}, r"task 1: data.case_key is missing"),
        ({**_task(), "data": ["x"]}, r"task 1: data: expected an object"),
        ({**_task(), "data": {"case_key": "K" * 121}}, r"data.case_key: 121 characters"),
        (_task(annotations=[_ann("12")]), r"task 1, annotation 1: id is missing or not a number"),
        (_task(annotations=[_ann(-3)]), r"task 1, annotation 1: id is missing or not a number"),
        (
            {**_task(annotations=[_ann("<b>x</b>" * 1000)]), "id": "<script>" * 1000},
            r"^item 1, annotation 1: id is missing",
        ),
        (
            _task(
                annotations=[
                    _ann(
                        4,
                        [
                            _choice("decision", "abstain"),
                            {
                                "from_name": "note",
                                "to_name": "question",
                                "type": "textarea",
                                "value": {"text": ["x" * 10_001]},
                            },
                        ],
                    )
                ]
            ),
            r"note: 10,001 characters",
        ),
        (
            _task(
                annotations=[
                    _ann(
                        4,
                        [
                            _choice("decision", "abstain"),
                            {
                                "from_name": "note",
                                "to_name": "question",
                                "type": "textarea",
                                "value": {"text": [3]},
                            },
                        ],
                    )
                ]
            ),
            r"value.text: expected text",
        ),
    ],
)
def test_wrong_shapes_are_refused_with_task_annotation_and_field(
    task: dict[str, Any], match: str
) -> None:
    _refused(_body([task]), match)


def test_duplicate_annotation_ids_are_refused() -> None:
    _refused(
        _body([_task(1, [_ann(5)]), _task(2, [_ann(5)])]), r"task 2, annotation 5: id: .*twice"
    )
    # a cancelled annotation's id counts too
    _refused(
        _body([_task(1, [_ann(5, was_cancelled=True, result=[])]), _task(2, [_ann(5)])]),
        r"twice",
    )
    rows = [_min_row(1, 9), _min_row(2, 9)]
    _refused(_body(rows), r"task 2, annotation 9: annotation_id: .*twice")


def test_cancelled_and_skipped_annotations_are_not_labels() -> None:
    anns = [
        _ann(1, result=[], was_cancelled=True),
        _ann(2, skipped=True),
        _ann(3),
    ]
    labels, skipped = read(_body([_task(1, anns), _task(2, [])]))
    assert [x.ref for x in labels] == ["3"]
    assert skipped.counts == {"cancelled": 2, "task without annotation": 1}


def test_a_user_id_names_the_annotator_when_the_export_has_no_email() -> None:
    labels, _ = read(
        _body([_task(1, [_ann(1, completed_by=17), _ann(2, completed_by={"id": 18})])])
    )
    assert [x.user for x in labels] == ["17", "18"]


def test_hostile_text_passes_through_as_text() -> None:
    note = {
        "from_name": "note",
        "to_name": "question",
        "type": "textarea",
        "value": {"text": [HOSTILE]},
    }
    task = _task(1, [_ann(1, [_choice("decision", "abstain"), note])])
    task["data"]["question"] = HOSTILE
    (x,) = read(_body([task]))[0]
    assert x.note == HOSTILE.strip()
    # a hostile choice is read as text; the import refuses it as outside the taxonomy
    (y,) = read(_body([_task(1, [_ann(1, [_choice("decision", HOSTILE[:100])])])]))[0]
    assert y.decision == HOSTILE[:100].strip()
    # a hostile key in the case key is the import's to refuse (unknown case); the message
    # of a refusal quotes at most a short piece of hostile input
    with pytest.raises(InputError) as err:
        read(_body([_task(1, [_ann(1, [_choice("verdict" + "x" * 5000, "a")])])]))
    assert len(str(err.value)) < 400


# --- JSON-MIN -------------------------------------------------------------------------------


def _min_row(tid: int, aid: Any, **extra: Any) -> dict[str, Any]:
    return {
        "case_key": f"CASE-{tid:03d}",
        "question": "q",
        "id": tid,
        "decision": "abstain",
        "annotator": "ann@example.org",
        "annotation_id": aid,
        "created_at": "2026-01-02T03:04:05Z",
        "updated_at": "2026-01-02T03:04:05Z",
        "lead_time": 3,
        **extra,
    }


def test_json_min_rows_read_in_each_form_label_studio_writes() -> None:
    rows = [
        _min_row(1, 1),
        _min_row(2, 2, reason_codes="evidence_stale", note="one line", annotator=4),
        _min_row(3, 3, decision={"choices": ["clarify"]}, reason_codes={"choices": ["a", "b"]},
                 note={"text": ["x", "y"]}),
        _min_row(4, 4, reason_codes=[{"choices": ["a"]}, {"choices": ["b", "a"]}]),
        {**_min_row(5, None), "annotator": None, "decision": None},
    ]  # fmt: skip
    labels, skipped = read(_body(rows))
    assert [(x.ref, x.user, x.decision, x.reason_codes, x.note) for x in labels] == [
        ("1", "ann@example.org", "abstain", (), ""),
        ("2", "4", "abstain", ("evidence_stale",), "one line"),
        ("3", "ann@example.org", "clarify", ("a", "b"), "x\ny"),
        ("4", "ann@example.org", "abstain", ("a", "b"), ""),
    ]
    assert skipped.counts == {"task without annotation": 1}


@pytest.mark.parametrize(
    ("row", "match"),
    [
        (_min_row(1, 2, decision={"choices": ["a", "b"]}), r"annotation 2: decision: 2 choices"),
        (_min_row(1, 2, decision=[{"choices": ["a"]}, {"choices": ["b"]}]), r"decision: 2 choices"),
        (
            _min_row(1, 2, decision={"text": ["a"]}),
            r"decision: expected text or an object with a 'choices",
        ),
        (_min_row(1, 2, decision=None), r"task 1, annotation 2: decision: missing"),
        (_min_row(1, 2, reason_codes=5), r"reason_codes: expected text or an object"),
        (_min_row(1, 2, note={"choices": ["x"]}), r"note: expected text or an object with a 'text"),
        (_min_row(1, 2, case_key=None), r"task 1, annotation 2: data.case_key is missing"),
        (_min_row(1, 2, annotator=None), r"annotator: no annotator"),
        (_min_row(1, {"x": 1}), r"task 1: annotation_id: expected"),
        (_min_row(1, "7"), r"task 1: annotation_id: expected the annotation's id \(a number\)"),
        (_min_row(1, 2, lead_time=float("inf")), r"lead_time"),
    ],
)
def test_json_min_wrong_shapes_are_refused(row: dict[str, Any], match: str) -> None:
    body = json.dumps([row]).replace("Infinity", "1e999").encode()
    _refused(body, match)


def test_mixed_exports_are_refused() -> None:
    _refused(_body([_task(1), _min_row(2, 5)]), r"item 2: the export mixes JSON and JSON-MIN")


# --- size and memory ------------------------------------------------------------------------


def test_an_oversized_export_is_refused_before_it_is_read_whole() -> None:
    body = _body([_task(i) for i in range(1, 200)])
    _refused(body, r"larger than 1,000 bytes", max_bytes=1_000)
    labels, _ = read(body)
    assert len(labels) == 199
    huge = _task(1)
    huge["data"]["question"] = "x" * 300_000
    _refused(
        _body([_task(2), huge]),
        r"item 2 of the export is larger than 100,000 bytes",
        max_task_bytes=100_000,
    )


def test_deep_nesting_is_refused_at_once() -> None:
    """A megabyte of brackets: refused by depth (a parser building each event's path would
    take hours and gigabytes on it)."""
    deep = b"[" * 1_000_000 + b"]" * 1_000_000
    body = b'[{"id": 1, "data": {"case_key": "C", "x": ' + deep + b'}, "annotations": []}]'
    _refused(body, r"item 1: nested more than 64 levels deep")
    shallow = b"[" * 50 + b"]" * 50
    body = b'[{"id": 1, "data": {"case_key": "C", "x": ' + shallow + b'}, "annotations": []}]'
    assert read(body)[1].counts == {"task without annotation": 1}


class _Generated(io.RawIOBase):
    """A JSON-MIN-sized full export of ``n`` tasks made while it is read: the test holds no
    copy of it."""

    def __init__(self, n: int) -> None:
        self.parts = self._parts(n)
        self.buf = b""
        self.size = 0

    @staticmethod
    def _parts(n: int) -> Iterator[bytes]:
        yield b"["
        for i in range(1, n + 1):
            task = _task(i, [_ann(i * 2), _ann(i * 2 + 1, completed_by=5)])
            task["data"]["documents"] = "\n\n".join(
                f"=== D{j} ===\n" + "body " * 200 for j in range(4)
            )
            yield (b"," if i > 1 else b"") + json.dumps(task).encode()
        yield b"]"

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while len(self.buf) < len(b):
            part = next(self.parts, None)
            if part is None:
                break
            self.buf += part
        n = min(len(b), len(self.buf))
        b[:n] = self.buf[:n]
        self.buf = self.buf[n:]
        self.size += n
        return n


def test_a_large_export_is_read_in_bounded_memory() -> None:
    """About 20 MB of tasks read with a memory peak far below the file: one task is held at
    a time (the 100 MB case is the same stream, longer)."""
    stream = _Generated(4_000)
    count = 0
    tracemalloc.start()
    try:
        for _ in labelstudio.read_export(stream, Skipped()):  # type: ignore[arg-type]
            count += 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 8_000
    assert stream.size > 18_000_000
    assert peak < 5_000_000, f"peak {peak:,} bytes for a {stream.size:,}-byte export"


def test_expected_labels_helper_reads_both_namings() -> None:
    expected = load_expected(DATA)
    by_id = expected_labels(expected, by_email=False)
    by_email = expected_labels(expected, by_email=True)
    assert len(by_id) == len(by_email) > 4
    assert {x[2] for x in by_id} == set(expected["users"])


def test_the_committed_case_keys_are_the_exported_family(tax: Taxonomy) -> None:
    expected = load_expected(DATA)
    keys = [t["data"]["case_key"] for t in json.loads((DATA / "tasks.json").read_bytes())]
    assert sorted(keys) == expected["case_keys"]
