"""Reading Argilla's records export: the files Argilla's own client wrote (argilla 2.8.0,
tests/labels/data/argilla, made by tools/argilla_fixtures.py), and hostile input."""

from __future__ import annotations

import io
import json
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from review.core.errors import InputError
from review.labels import argilla_io
from review.labels.external import ExternalLabel, Skipped
from tests.helpers.paths import ROOT

DATA = ROOT / "tests" / "labels" / "data" / "argilla"
#: the two annotators of the fixtures (uuid5 of "alice" and "bob" in the script's namespace)
ALICE = "8c576063-82dd-5cd8-89a1-95718d92d3dc"
BOB = "514460ed-b151-5dbf-8e89-1309c8fadd79"
HOSTILE = (
    '<img src=x onerror=alert(1)> ![t](http://198.51.100.7/p.png) =HYPERLINK("http://x") '
    "\u202e\x1b[31m"
)


def read(data: bytes, skipped: Skipped | None = None, **kw: Any) -> list[ExternalLabel]:
    return list(argilla_io.read_export(io.BytesIO(data), skipped or Skipped(), **kw))


def read_json(records: Any, skipped: Skipped | None = None) -> list[ExternalLabel]:
    return read(json.dumps(records).encode(), skipped)


def test_client_version_is_the_one_pinned() -> None:
    pinned = (ROOT / "tools" / "argilla" / "requirements.txt").read_text()
    assert f"argilla=={(DATA / 'ARGILLA_VERSION').read_text().strip()}" in pinned


@pytest.mark.parametrize("name", ["records_flat.json", "records_hf.jsonl"])
def test_the_clients_exports_with_status_give_the_submitted_labels(name: str) -> None:
    """Argilla's flat list (to_list(flatten=True)) and its Hugging Face export (JSON Lines):
    submitted responses per (record, user); the draft, the discarded one and the
    suggestions are counted, not labels."""
    skipped = Skipped()
    with (DATA / name).open("rb") as f:
        labels = list(argilla_io.read_export(f, skipped))
    got = {(x.case_key, x.user): (x.decision, x.reason_codes, x.note) for x in labels}
    assert got == {
        ("CASE-009", ALICE): (
            "abstain",
            ("source_not_allowed", "no_answer_bearing_evidence"),
            "only the forbidden doc",
        ),
        ("CASE-009", BOB): (
            "abstain",
            ("source_not_allowed", "no_answer_bearing_evidence"),
            HOSTILE.strip(),
        ),
        ("CASE-010", ALICE): ("answer", (), ""),
        ("CASE-011", BOB): ("answer", (), "the FAQ says so"),
    }
    assert skipped.counts == {"draft": 1, "discarded": 1, "suggestion": 2}
    assert {x.ref for x in labels} == {f"{k}/{u}" for k, u in got}
    assert all(x.tool == "argilla" and x.where.startswith("record ") for x in labels)


def test_the_clients_records_json_is_refused_for_it_has_no_status() -> None:
    """Dataset.to_disk's records.json drops each response's status: a draft there looks
    like a label, so the file is refused with the record, the response and the export to
    use instead."""
    with (DATA / "nested" / "records.json").open("rb") as f, pytest.raises(InputError) as err:
        list(argilla_io.read_export(f, Skipped()))
    msg = str(err.value)
    assert "record 1 ('CASE-009'), responses.decision[0] has no status" in msg
    assert "to_list(flatten=True)" in msg and "to_datasets().to_json" in msg


def test_the_export_itself_has_no_labels() -> None:
    skipped = Skipped()
    with (DATA / "export" / "records.json").open("rb") as f:
        assert list(argilla_io.read_export(f, skipped)) == []
    assert skipped.counts == {}


def nested(record_id: str = "CASE-1", **responses: Any) -> dict[str, Any]:
    return {
        "id": record_id,
        "fields": {"question": "q"},
        "metadata": {"case_key": record_id},
        "suggestions": {},
        "responses": responses,
        "vectors": {},
        "status": "pending",
        "_server_id": None,
    }


def answer(value: Any, user: str = ALICE, status: str = "submitted") -> dict[str, Any]:
    return {"value": value, "user_id": user, "status": status}


def test_nested_records_with_status_are_read() -> None:
    """Record.to_dict with the status kept (argilla-sdk before 2.0 wrote it; a script may
    add it): the same labels as the flat form."""
    rec = nested(
        decision=[answer("abstain"), answer("answer", BOB, "draft")],
        reason_codes=[answer(["evidence_stale"])],
        note=[answer("  old version  ")],
    )
    rec["suggestions"] = {"decision": {"value": "answer", "score": 0.3, "agent": "m"}}
    skipped = Skipped()
    [label] = read_json([rec], skipped)
    assert (label.decision, label.reason_codes, label.note) == (
        "abstain",
        ("evidence_stale",),
        "old version",
    )
    assert (label.ref, label.user, label.case_key) == (f"CASE-1/{ALICE}", ALICE, "CASE-1")
    assert skipped.counts == {"draft": 1, "suggestion": 1}


def flat(record_id: str = "CASE-1", cols: dict[str, Any] | None = None) -> dict[str, Any]:
    base = {"id": record_id, "status": "pending", "_server_id": None, "case_key": record_id}
    return {**base, **(cols or {})}


@pytest.mark.parametrize(
    ("data", "where"),
    [
        (b'[{"id": "CASE-1", "fields": {', "record 1: the file is not valid JSON"),
        (b'[{"id": "CASE-1"}, {"id": "CASE-2",, }]', "record 2: the file is not valid JSON"),
        (b"[1, 2]", "record 1: expected an object, got a number"),
        (b"null", "neither a JSON array of records nor JSON Lines"),
        (b"   ", "the Argilla export is empty"),
        (b'{"id": "CASE-1"}\n{"id": ', "record 2: the file is not valid JSON"),
    ],
)
def test_malformed_json_names_the_record(data: bytes, where: str) -> None:
    with pytest.raises(InputError, match=where):
        read(data)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"fields": {}}, r"record 1, id: expected text, got null"),
        ({"id": 7, "fields": {}}, r"record 1, id: expected text, got a number"),
        ({"id": " ", "fields": {}}, r"record 1 \(' '\), id: is empty"),
        ({"id": "x" * 121, "fields": {}}, r"id: longer than 120 characters"),
        ({**nested(), "responses": []}, r"responses: expected an object, got a list"),
        ({**nested(), "metadata": "CASE-1"}, r"metadata: expected an object, got text"),
        ({**nested(), "metadata": {"case_key": "CASE-2"}}, r"metadata.case_key: 'CASE-2' is not"),
        ({**nested(), "suggestions": [1]}, r"suggestions: expected an object, got a list"),
        (nested(decision={"value": "x"}), r"responses.decision: expected a list, got an object"),
        (nested(decision=["abstain"]), r"responses.decision\[0\]: expected an object, got text"),
        (nested(decision=[{"value": "answer", "status": "submitted"}]), r"user_id: expected"),
        (nested(decision=[answer("answer", status="accepted")]), r"'accepted' is not one of"),
        (nested(decision=[answer(["answer"])]), r"user '.*', decision: expected text, got a list"),
        (nested(decision=[answer("")]), r"decision: is empty"),
        (nested(decision=[answer(None)]), r"decision: a submitted response has no decision"),
        (nested(note=[answer("n")]), r"decision: a submitted response has no decision"),
        (
            nested(decision=[answer("abstain")], reason_codes=[answer("stale")]),
            r"reason_codes: expected a list of labels, got text",
        ),
        (
            nested(decision=[answer("abstain")], reason_codes=[answer([1])]),
            r"reason_codes\[0\]: expected text, got a number",
        ),
        (
            nested(decision=[answer("abstain")], reason_codes=[answer(["a", "a"])]),
            r"reason_codes: a reason code is listed twice",
        ),
        (
            nested(decision=[answer("abstain")], note=[answer({"t": 1})]),
            r"note: expected text, got an object",
        ),
        (
            nested(decision=[answer("abstain")], note=[answer("x" * 20_001)]),
            r"note: longer than 20000 characters",
        ),
        (
            nested(decision=[answer("abstain")], note=[answer("a\x00b")]),
            r"note: contains a NUL character",
        ),
        (
            nested(decision=[answer("abstain")], note=[answer("n", status="draft")]),
            r"has 'draft' here but 'submitted' at responses.decision\[0\]",
        ),
        (flat(cols={"decision.responses": ["answer"]}), r"decision.responses.status: missing"),
        (
            flat(
                cols={
                    "decision.responses": "answer",
                    "decision.responses.users": [ALICE],
                    "decision.responses.status": ["submitted"],
                }
            ),
            r"decision.responses: expected a list, got text",
        ),
        (
            flat(
                cols={
                    "decision.responses": ["answer", "abstain"],
                    "decision.responses.users": [ALICE],
                    "decision.responses.status": ["submitted", "submitted"],
                }
            ),
            r"decision.responses: 2 responses but 1 users and 2 statuses",
        ),
        ({**flat(), "case_key": "CASE-9"}, r"record 1 \('CASE-1'\), case_key: 'CASE-9' is not"),
    ],
)
def test_wrong_shapes_name_record_and_field(record: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        read_json([record])


def test_duplicate_record_ids_are_refused() -> None:
    recs = [nested(decision=[answer("answer")]), nested(decision=[answer("abstain", BOB)])]
    with pytest.raises(InputError, match=r"record 2 \('CASE-1'\), id: .* is in the file twice"):
        read_json(recs)


def test_a_user_answering_a_question_twice_in_a_record_is_refused() -> None:
    rec = nested(decision=[answer("answer"), answer("abstain")])
    with pytest.raises(
        InputError, match=r"responses.decision\[1\]: user .* answers 'decision' twice"
    ):
        read_json([rec])


def test_a_flat_users_duplicate_is_refused() -> None:
    rec = flat(
        cols={
            "decision.responses": ["answer", "abstain"],
            "decision.responses.users": [ALICE, ALICE],
            "decision.responses.status": ["submitted", "submitted"],
        }
    )
    with pytest.raises(InputError, match=r"decision.responses\[1\]: user .* answers 'decision'"):
        read_json([rec])


HOSTILE_TEXTS = [
    "<script>alert(1)</script>",
    "![x](http://198.51.100.7/x.png)",
    '=HYPERLINK("http://198.51.100.7","click")',
    "+cmd|' /C calc'!A0",
    "line\r\nbreak\ttab\x07bell\x1b[2J",
    "\u202eRTL \u200bzero-width",
    "ünïcödé 漢字 🙂",
]


@pytest.mark.parametrize("text", HOSTILE_TEXTS)
def test_hostile_text_in_every_field_is_kept_as_text(text: str) -> None:
    """Ids, users, choices and notes pass through as the text they are (the import refuses
    choices outside the taxonomy, the pages escape); nothing is interpreted."""
    key = text[:100]
    rec = nested(
        key,
        decision=[answer(text, user=text)],
        reason_codes=[answer([text], user=text)],
        note=[answer(text, user=text)],
    )
    rec["fields"] = {"question": text, "documents": text}
    rec["suggestions"] = {"decision": {"value": text, "score": None, "agent": text}}
    [label] = read_json([rec])
    assert label.case_key == key.strip()
    assert label.user == text
    assert label.decision == text.strip()
    assert label.reason_codes == (text.strip(),)
    assert label.note == text.strip()


def test_oversized_input_is_refused_before_it_is_read_whole() -> None:
    recs = [nested(f"CASE-{i}", decision=[answer("answer")]) for i in range(2000)]
    data = json.dumps(recs).encode()
    assert len(read(data, max_bytes=len(data))) == 2000
    with pytest.raises(InputError, match=r"larger than 100000 bytes"):
        read(data, max_bytes=100_000)


def generated_record(i: int) -> dict[str, Any]:
    return {
        "id": f"CASE-{i}",
        "status": "pending",
        "_server_id": None,
        "question": "q" * 200,
        "documents": "d" * 6000,
        "case_key": f"CASE-{i}",
        "decision.responses": ["abstain", "answer"],
        "decision.responses.users": [ALICE, BOB],
        "decision.responses.status": ["submitted", "draft"],
        "note.responses": ["n" * 400, None],
        "note.responses.users": [ALICE, BOB],
        "note.responses.status": ["submitted", "draft"],
    }


def test_leading_whitespace_and_a_byte_order_mark_are_read_past_within_the_limit() -> None:
    data = json.dumps([nested(decision=[answer("answer")])]).encode()
    assert len(read(b"\xef\xbb\xbf \n" + data)) == 1
    with pytest.raises(InputError, match="larger than 1000 bytes"):
        read(b" " * 5000 + data, max_bytes=1000)


class Generated(io.RawIOBase):
    """A large flat export made on the fly as it is read, never whole in memory."""

    def __init__(self, n: int) -> None:
        self._chunks = self._make(n)
        self._buf = b""
        self.size = 0

    @staticmethod
    def _make(n: int) -> Iterator[bytes]:
        yield b"["
        for i in range(n):
            yield (b",\n" if i else b"") + json.dumps(generated_record(i)).encode()
        yield b"]"

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while len(self._buf) < len(b):
            more = next(self._chunks, None)
            if more is None:
                break
            self._buf += more
        chunk, self._buf = self._buf[: len(b)], self._buf[len(b) :]
        b[: len(chunk)] = chunk
        self.size += len(chunk)
        return len(chunk)


def test_memory_stays_bounded_on_a_large_export() -> None:
    """About 60 MB streamed through the reader: the peak of traced memory stays a small
    fraction of the input (the labels counted, not kept). What grows with the file is the set
    of record ids (duplicates are refused), some 100 bytes a record."""
    n = 8_000
    stream = io.BufferedReader(Generated(n), buffer_size=1 << 16)
    skipped = Skipped()
    tracemalloc.start()
    try:
        labels: Iterator[ExternalLabel] = argilla_io.read_export(stream, skipped)
        count = sum(1 for _ in labels)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    raw = stream.raw
    assert isinstance(raw, Generated)
    assert count == n and skipped.counts == {"draft": n}
    assert raw.size > 55_000_000
    assert peak < raw.size / 20, (peak, raw.size)


def test_read_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    lines = [json.dumps(flat(f"CASE-{i}")) for i in range(3)]
    path.write_text("\n".join(lines) + "\n")
    with path.open("rb") as f:
        assert list(argilla_io.read_export(f, Skipped())) == []
