"""The Argilla export: the to_disk layout Argilla's client loads (checked with the client by
tools/argilla_fixtures.py on the committed copy, which this test keeps current), built from
the taxonomy, blind, and cleared as review.core.clearance decides."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from review.core import clearance
from review.core.errors import InputError, PermissionDenied
from review.core.taxonomy import Taxonomy
from review.labels import argilla_io
from review.labels.external import Skipped
from storage.db import read_session
from storage.models import Case, Document
from tests.helpers.actors import make_actor
from tests.helpers.databases import copy_db
from tests.helpers.paths import ROOT
from tests.helpers.transact import write

DATA = ROOT / "tests" / "labels" / "data" / "argilla"
FAMILY = "FAM-EDU-DISCOUNT"
#: who exports (exchanging labels is a reviewer's or an admin's); the committed export was
#: made by one without clearance
ANNOTATOR = make_actor("reviewer")
CLEARED = make_actor("reviewer", "cleared@test.example", clearance=True)


@pytest.fixture
def demo_url(tmp_path: Path, demo_base_template: Path) -> str:
    """The demo without builder variants (the committed export was made from it)."""
    return copy_db(demo_base_template, tmp_path)


def export(engine: Engine, tax: Taxonomy, path: Path, **kw: Any) -> dict[str, Any]:
    argilla_io.export_dir(engine, kw.pop("actor", ANNOTATOR), tax, path, name="wb", **kw)
    return {
        "dataset": json.loads((path / argilla_io.DATASET_PATH).read_text()),
        "settings": json.loads((path / argilla_io.SETTINGS_PATH).read_text()),
        "records": json.loads((path / argilla_io.RECORDS_PATH).read_text()),
    }


def test_the_committed_export_is_what_the_code_writes(
    demo_engine: Engine, tax: Taxonomy, tmp_path: Path
) -> None:
    """tests/labels/data/argilla/export is the one Argilla's client loaded with from_disk;
    if this fails, the export changed: write it again and re-run tools/argilla_fixtures.py."""
    argilla_io.export_dir(
        demo_engine,
        ANNOTATOR,
        tax,
        tmp_path,
        argilla_io.ExportFilter(family=FAMILY),
        name="workbench-cases",
    )
    for name in (argilla_io.DATASET_PATH, argilla_io.SETTINGS_PATH, argilla_io.RECORDS_PATH):
        assert (tmp_path / name).read_bytes() == (DATA / "export" / name).read_bytes(), name


def strip_ids(props: list[dict[str, Any]]) -> list[dict[str, Any]]:
    drop = {"id", "inserted_at", "updated_at", "dataset_id"}
    return [{k: v for k, v in p.items() if k not in drop} for p in props]


def test_argilla_loaded_the_settings_as_written() -> None:
    """The settings Argilla's client wrote back (to_disk after from_disk, in nested/) say
    what ours say, but for the ids its server gave."""
    ours = json.loads((DATA / "export" / argilla_io.SETTINGS_PATH).read_text())
    theirs = json.loads((DATA / "nested" / argilla_io.SETTINGS_PATH).read_text())
    for part in ("questions", "fields", "metadata"):
        assert strip_ids(theirs[part]) == strip_ids(ours[part]), part
    for key in ("guidelines", "distribution", "allow_extra_metadata", "vectors"):
        assert theirs[key] == ours[key], key


def test_questions_come_from_the_taxonomy(
    demo_engine: Engine, tax: Taxonomy, tmp_path: Path
) -> None:
    out = export(demo_engine, tax, tmp_path)
    settings = out["settings"]
    q = {x["name"]: x for x in settings["questions"]}
    assert list(q) == ["decision", "reason_codes", "note"]
    assert q["decision"]["type"] == "label_selection" and q["decision"]["required"] is True
    assert [o["value"] for o in q["decision"]["settings"]["options"]] == list(tax.decisions)
    assert [o["text"] for o in q["decision"]["settings"]["options"]] == [
        t.label for t in tax.decisions.values()
    ]
    reasons = q["reason_codes"]
    assert reasons["type"] == "multi_label_selection" and reasons["required"] is False
    values = [o["value"] for o in reasons["settings"]["options"]]
    assert values == list(tax.case_reason_codes())
    assert "signal_missing" not in values  # a gate-only code is not offered to labelers
    assert reasons["description"].startswith("Only when the decision does not answer")
    for term in tax.decisions.values():
        assert (term.label in reasons["description"]) is (not term.answers)
    assert q["note"]["type"] == "text" and q["note"]["required"] is False
    # every field is plain text: a markdown field would fetch a document's image links
    assert all(f["settings"] == {"type": "text", "use_markdown": False} for f in settings["fields"])
    assert [m["name"] for m in settings["metadata"]] == list(argilla_io.METADATA)
    assert settings["distribution"] == {"strategy": "overlap", "min_submitted": 2}
    for key in tax.case_reason_codes():
        assert key in settings["guidelines"]
    assert out["dataset"]["name"] == "wb" and out["dataset"]["guidelines"] == settings["guidelines"]


def test_every_ready_case_is_a_record_keyed_by_its_case(
    demo_engine: Engine, tax: Taxonomy, tmp_path: Path
) -> None:
    with read_session(demo_engine) as s:
        ready = set(s.scalars(select(Case.key).where(Case.status == "ready")))
        drafts = set(s.scalars(select(Case.key).where(Case.status != "ready")))
    records = export(demo_engine, tax, tmp_path)["records"]
    assert {r["id"] for r in records} == ready and not drafts & {r["id"] for r in records}
    for r in records:
        assert set(r) == {
            "id",
            "fields",
            "metadata",
            "suggestions",
            "responses",
            "vectors",
            "status",
            "_server_id",
        }
        assert r["metadata"]["case_key"] == r["id"]
        assert set(r["fields"]) <= set(argilla_io.FIELDS)
        assert {"question", "asked_by", "documents"} <= set(r["fields"])
        assert r["responses"] == {} and r["suggestions"] == {}


def test_filters_by_family_and_slice(demo_engine: Engine, tax: Taxonomy, tmp_path: Path) -> None:
    fam = export(demo_engine, tax, tmp_path / "f", flt=argilla_io.ExportFilter(family=FAMILY))
    assert fam["records"] and all(r["metadata"]["family"] == FAMILY for r in fam["records"])
    sl = export(
        demo_engine, tax, tmp_path / "s", flt=argilla_io.ExportFilter(slice="temporal_mismatch")
    )
    assert sl["records"]
    assert all("temporal_mismatch" in r["metadata"]["slice"] for r in sl["records"])
    none = export(demo_engine, tax, tmp_path / "n", flt=argilla_io.ExportFilter(family="NOPE"))
    assert none["records"] == []


def test_records_are_blind(demo_engine: Engine, tax: Taxonomy, tmp_path: Path) -> None:
    """Nothing of the author's judgement: no expected decision, reasons, category, evidence
    state, roles or notes; documents by reference, forbidden ones marked."""
    records = {r["id"]: r for r in export(demo_engine, tax, tmp_path, actor=CLEARED)["records"]}
    with read_session(demo_engine) as s:
        cases = list(s.scalars(select(Case).where(Case.status == "ready")))
        checked_notes = 0
        for case in cases:
            text = json.dumps(records[case.key], ensure_ascii=False)
            for word in ("expected", "reason_codes", "category", "evidence_state", "role"):
                assert f'"{word}' not in text
            if len(case.notes) > 20:
                assert case.notes not in text
                checked_notes += 1
            docs = records[case.key]["fields"]["documents"]
            heads = re.findall(r"^=== (.*) ===$", docs, flags=re.M)
            refs = [h.split(" · ")[1 if h.startswith("FORBIDDEN") else 0] for h in heads]
            want = sorted((cd.document.doc_key, cd.document.version) for cd in case.documents)
            assert refs == [f"{k}@{v}" for k, v in want]
            n_forbidden = sum(cd.visibility != "visible" for cd in case.documents)
            assert sum(h.startswith("FORBIDDEN") for h in heads) == n_forbidden
            for cd in case.documents:
                assert cd.role not in {h.split(" · ")[-1] for h in heads}
    assert checked_notes > 0


def test_restricted_text_only_with_clearance(
    demo_engine: Engine, tax: Taxonomy, tmp_path: Path
) -> None:
    plain = export(demo_engine, tax, tmp_path / "p")["records"]
    cleared = export(demo_engine, tax, tmp_path / "c", actor=CLEARED)["records"]
    plain_text = json.dumps(plain, ensure_ascii=False)
    cleared_text = json.dumps(cleared, ensure_ascii=False)
    with read_session(demo_engine) as s:
        bodies = list(
            s.scalars(
                select(Document.body).where(Document.access_scope == clearance.RESTRICTED_SCOPE)
            )
        )
        secret = clearance.restricted_cases(s, list(s.scalars(select(Case.id))))
        secret_keys = set(s.scalars(select(Case.key).where(Case.id.in_(secret))))
    assert bodies and secret_keys
    for body in bodies:
        assert json.dumps(body, ensure_ascii=False)[1:-1] not in plain_text
    assert any(json.dumps(b, ensure_ascii=False)[1:-1] in cleared_text for b in bodies)
    by_key = {r["id"]: r for r in plain}
    redacted = [k for k in secret_keys if k in by_key]
    assert redacted
    for key in redacted:
        fields = by_key[key]["fields"]
        assert fields["question"] == clearance.REDACTED
        claims = fields.get("required_claims", "")
        assert all(line.endswith(clearance.REDACTED) for line in claims.splitlines())
    cleared_by_key = {r["id"]: r for r in cleared}
    assert all(cleared_by_key[k]["fields"]["question"] != clearance.REDACTED for k in redacted)


def test_the_zip_holds_the_same_files(demo_engine: Engine, tax: Taxonomy, tmp_path: Path) -> None:
    class Unseekable(io.RawIOBase):
        def __init__(self) -> None:
            self.data = bytearray()

        def writable(self) -> bool:
            return True

        def write(self, b: Any) -> int:
            self.data += bytes(b)
            return len(b)

    out = Unseekable()
    flt = argilla_io.ExportFilter(family=FAMILY)
    with io.BufferedWriter(out) as stream:
        report = argilla_io.export_zip(demo_engine, ANNOTATOR, tax, stream, flt, name="wb")
        stream.flush()
    argilla_io.export_dir(demo_engine, ANNOTATOR, tax, tmp_path, flt, name="wb")
    with zipfile.ZipFile(io.BytesIO(bytes(out.data))) as zf:
        names = sorted(zf.namelist())
        assert names == sorted(
            [argilla_io.DATASET_PATH, argilla_io.SETTINGS_PATH, argilla_io.RECORDS_PATH]
        )
        for name in names:
            assert zf.read(name) == (tmp_path / name).read_bytes(), name
    assert report.written == len(json.loads((tmp_path / argilla_io.RECORDS_PATH).read_text()))


def test_exporting_needs_the_exchange_permission(
    demo_engine: Engine, tax: Taxonomy, tmp_path: Path
) -> None:
    out = io.BytesIO()
    with pytest.raises(PermissionDenied):
        argilla_io.export_dir(demo_engine, make_actor("annotator"), tax, tmp_path / "out")
    with pytest.raises(PermissionDenied):
        argilla_io.export_zip(demo_engine, make_actor("annotator"), tax, out)
    assert not (tmp_path / "out").exists() and out.getvalue() == b""


def test_an_export_never_overwrites(demo_engine: Engine, tax: Taxonomy, tmp_path: Path) -> None:
    (tmp_path / "records.json").write_text("mine")
    with pytest.raises(InputError, match=r"records\.json exists already"):
        argilla_io.export_dir(demo_engine, ANNOTATOR, tax, tmp_path)
    assert (tmp_path / "records.json").read_text() == "mine"
    assert not (tmp_path / argilla_io.SETTINGS_PATH).exists()


def test_a_failed_export_leaves_no_half_dataset(
    demo_engine: Engine, tax: Taxonomy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database failing while the records are written (here: the clearance check)
    removes what was written, so from_disk never loads a dataset without all its records."""

    def broken(*args: Any) -> Any:
        raise RuntimeError("database went away")

    monkeypatch.setattr(clearance, "restricted_cases", broken)
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="went away"):
        argilla_io.export_dir(demo_engine, ANNOTATOR, tax, out)
    assert [p for p in out.rglob("*") if p.is_file()] == []


@pytest.mark.parametrize("name", ["", "../x", "a b", "é", "x" * 201, "-x"])
def test_a_bad_dataset_name_is_refused(
    demo_engine: Engine, tax: Taxonomy, tmp_path: Path, name: str
) -> None:
    with pytest.raises(InputError, match="dataset name"):
        argilla_io.export_dir(demo_engine, ANNOTATOR, tax, tmp_path, name=name)


def test_an_empty_export_is_an_empty_list(engine: Engine, tax: Taxonomy, tmp_path: Path) -> None:
    out = export(engine, tax, tmp_path)
    assert out["records"] == []


HOSTILE = (
    '<script>alert(1)</script> ![x](http://198.51.100.7/x.png) =HYPERLINK("http://x") '
    "+cmd|' /C calc'!A0 \u202e\x1b[2J\r\n\t end"
)


def test_hostile_text_is_written_as_the_text_it_is(
    demo_engine: Engine, tax: Taxonomy, tmp_path: Path
) -> None:
    """Question, claims, identity, document titles and bodies with markup, formulas and
    control characters: written as JSON text, read back equal, shown by Argilla as plain text
    (no field uses markdown)."""

    def plant(s: Session) -> str:
        case = s.scalars(
            select(Case).where(Case.status == "ready").order_by(Case.id).limit(1)
        ).one()
        case.question = HOSTILE
        case.identity_name = HOSTILE
        for claim in case.claims:
            claim.text = HOSTILE
        for cd in case.documents:
            cd.document.title = HOSTILE
            cd.document.body = HOSTILE
        return case.key

    key = write(demo_engine, plant)
    out = export(demo_engine, tax, tmp_path, actor=CLEARED)
    [rec] = [r for r in out["records"] if r["id"] == key]
    assert rec["fields"]["question"] == HOSTILE
    assert rec["fields"]["asked_by"].startswith(HOSTILE)
    claims = rec["fields"]["required_claims"]
    assert claims == "\n".join(f"{i}. {HOSTILE}" for i in range(1, claims.count("<script>") + 1))
    assert rec["fields"]["documents"].count(HOSTILE) >= 2
    assert all(not f["settings"]["use_markdown"] for f in out["settings"]["fields"])


def test_the_clients_records_are_the_exported_cases() -> None:
    """The committed records Argilla's client wrote carry the exported cases' fields and
    metadata unchanged (its flat form puts both at the top level)."""
    exported = {
        r["id"]: r for r in json.loads((DATA / "export" / argilla_io.RECORDS_PATH).read_text())
    }
    flat = json.loads((DATA / "records_flat.json").read_text())
    assert [r["id"] for r in flat] == list(exported)
    for r in flat:
        want = {**exported[r["id"]]["fields"], **exported[r["id"]]["metadata"]}
        assert {k: r[k] for k in want} == want


def argilla_python() -> Path | None:
    """Argilla's own venv, when this machine has one: ``ARGILLA_PYTHON`` or .argilla-venv/
    (see tools/argilla_fixtures.py)."""
    named = os.environ.get("ARGILLA_PYTHON")
    for candidate in (Path(named) if named else None, ROOT / ".argilla-venv" / "bin" / "python"):
        if candidate is not None and candidate.exists():
            return candidate
    return None


@pytest.mark.skipif(argilla_python() is None, reason="no venv with Argilla's client here")
def test_the_client_loads_a_fresh_export_and_its_labels_come_back(
    demo_engine: Engine, tax: Taxonomy, tmp_path: Path
) -> None:
    """The whole way with Argilla's client where it is installed: a fresh export loaded by
    from_disk, answered by two annotators, exported by the client, read back."""
    python = argilla_python()
    assert python is not None
    flt = argilla_io.ExportFilter(family=FAMILY)
    argilla_io.export_dir(demo_engine, ANNOTATOR, tax, tmp_path / "export", flt, name="wb")
    done = subprocess.run(
        [str(python), str(ROOT / "tools" / "argilla_fixtures.py"), "export", "out"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "settings valid, fields and metadata as written" in done.stdout
    for name in ("records_flat.json", "records_hf.jsonl"):
        skipped = Skipped()
        with (tmp_path / "out" / name).open("rb") as f:
            labels = list(argilla_io.read_export(f, skipped))
        assert len(labels) == 4 and skipped.counts == {"draft": 1, "discarded": 1, "suggestion": 2}
