"""Argilla end to end: the cases exported, labeled by two annotators in Argilla's client and
exported by it (the committed fixtures, tests/labels/data/argilla, made by
tools/argilla_fixtures.py from the committed export), imported through the one label import:
the submitted responses become labels of the mapped users, drafts, discarded responses and
suggestions do not, the agreed label moves, and the same file again adds nothing."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from review.cases.agreed import agreed_labels, current_label_filter
from review.core import database
from review.core.errors import InputError
from review.core.taxonomy import Taxonomy
from review.labels import argilla_io, imports
from review.labels.external import ExternalLabel, Skipped
from storage.db import read_session
from storage.models import Case, Label
from tests.helpers.actors import make_actor
from tests.helpers.databases import copy_db
from tests.helpers.paths import ROOT

DATA = ROOT / "tests" / "labels" / "data" / "argilla"
RAVI = make_actor("reviewer", "ravi.menon@brightwave.example")
#: the fixtures' two Argilla users (uuid5 of "alice" and "bob"), mapped to demo annotators
ALICE = "8c576063-82dd-5cd8-89a1-95718d92d3dc"
BOB = "514460ed-b151-5dbf-8e89-1309c8fadd79"
INES = "ines.duarte@brightwave.example"
TOM = "tom.becker@brightwave.example"
USERS = {ALICE: INES, BOB: TOM}


@pytest.fixture
def demo_url(tmp_path: Path, demo_base_template: Path) -> str:
    """The demo the committed export was made from."""
    return copy_db(demo_base_template, tmp_path)


def source(path: Path) -> Callable[[Skipped], Iterator[ExternalLabel]]:
    def records(skipped: Skipped) -> Iterator[ExternalLabel]:
        with path.open("rb") as f:
            yield from argilla_io.read_export(f, skipped)

    return records


def run(engine: Engine, tax: Taxonomy, path: Path) -> imports.ImportReport:
    return database.write(
        engine,
        lambda s: imports.import_labels(
            s,
            RAVI,
            argilla_io.TOOL,
            source(path),
            USERS,
            tax,
            file_name=path.name,
            sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
        ),
    )


def current(engine: Engine) -> dict[tuple[str, str], tuple[str, tuple[str, ...], str]]:
    """(case key, annotator) -> (decision, reason codes, source) of the fixtures' cases."""
    with read_session(engine) as s:
        rows = s.execute(
            select(Case.key, Label.annotator, Label.decision, Label.reason_codes, Label.source)
            .join(Case, Case.id == Label.case_id)
            .where(Case.key.in_(["CASE-009", "CASE-010", "CASE-011"]), current_label_filter())
        )
        return {(k, a): (d, tuple(r), src) for k, a, d, r, src in rows}


@pytest.mark.parametrize("name", ["records_flat.json", "records_hf.jsonl"])
def test_labels_made_in_argilla_come_back_as_labels(
    demo_engine: Engine, tax: Taxonomy, tmp_path: Path, name: str
) -> None:
    # the export the client answered is the one the code writes for these cases
    fresh = tmp_path / "export"
    flt = argilla_io.ExportFilter(family="FAM-EDU-DISCOUNT")
    argilla_io.export_dir(demo_engine, RAVI, tax, fresh, flt, name="workbench-cases")
    assert (fresh / "records.json").read_bytes() == (DATA / "export" / "records.json").read_bytes()
    before = current(demo_engine)

    report = run(demo_engine, tax, DATA / name)

    assert (report.added, report.changed, report.unchanged) == (4, 0, 0)
    assert report.skipped == {"draft": 1, "discarded": 1, "suggestion": 2}
    assert report.annotators == (INES, TOM)
    both = ("no_answer_bearing_evidence", "source_not_allowed")
    after = current(demo_engine)
    got = {k: (d, tuple(sorted(r)), src) for k, (d, r, src) in after.items()}
    assert got[("CASE-009", INES)] == ("abstain", both, "argilla")
    assert got[("CASE-009", TOM)] == ("abstain", both, "argilla")
    assert got[("CASE-010", INES)] == ("answer", (), "argilla")
    assert got[("CASE-011", TOM)] == ("answer", (), "argilla")
    # Bob's draft on CASE-010 and Alice's discarded CASE-011 left their labels as they were
    assert after[("CASE-010", TOM)] == before[("CASE-010", TOM)]
    assert after[("CASE-011", INES)] == before[("CASE-011", INES)]
    with read_session(demo_engine) as s:
        refs = set(s.scalars(select(Label.source_ref).where(Label.source == "argilla")))
        note = s.scalar(select(Label.rationale).where(Label.source_ref == f"CASE-009/{BOB}"))
        keys = ["CASE-009", "CASE-010", "CASE-011"]
        ids = {k: i for k, i in s.execute(select(Case.key, Case.id).where(Case.key.in_(keys)))}
        agreed = agreed_labels(s, [ids["CASE-009"], ids["CASE-010"], ids["CASE-011"]])
    assert refs == {f"CASE-009/{ALICE}", f"CASE-009/{BOB}", f"CASE-010/{ALICE}", f"CASE-011/{BOB}"}
    assert note is not None and note.startswith("<img src=x onerror=alert(1)>")
    # both annotators agree on CASE-009 now; CASE-010 still disagrees (Tom's label stands)
    nine = agreed[ids["CASE-009"]]
    assert (nine.decision, nine.by) == ("abstain", "annotators")
    assert sorted(nine.reason_codes) == list(both)
    assert ids["CASE-010"] not in agreed
    # CASE-011's adjudication still rules
    assert agreed[ids["CASE-011"]].by == "adjudication"

    again = run(demo_engine, tax, DATA / name)
    assert (again.added, again.changed, again.unchanged, again.import_id) == (0, 0, 4, None)


def test_the_clients_records_json_imports_nothing(demo_engine: Engine, tax: Taxonomy) -> None:
    """to_disk's records.json has no response status: refused whole, nothing written."""
    with read_session(demo_engine) as s:
        n = s.scalar(select(func.count(Label.id)))
    with pytest.raises(InputError, match=r"responses.decision\[0\] has no status"):
        run(demo_engine, tax, DATA / "nested" / "records.json")
    with read_session(demo_engine) as s:
        assert s.scalar(select(func.count(Label.id))) == n
