"""The Agreement figures for one source tool and one import batch: labels imported from Label
Studio and Argilla (through the one import, review.labels.imports) beside the demo's labels
made here; the SQL report equals the pandas reference for every source and batch, and the
per-annotator figures count only the labels from there."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from review.core import database
from review.core.taxonomy import Taxonomy
from review.labels import argilla_io, imports, labeling
from review.labels.agreement import agreement_report
from review.labels.agreement_sql import agreement_report_sql, import_choices, source_choices
from review.labels.annotator_figures import annotator_figures
from review.labels.external import ExternalLabel, Skipped
from storage.db import make_engine, read_session
from storage.models import Case, Label
from tests.helpers.actors import make_actor
from tests.helpers.agreement import assert_same
from tests.helpers.databases import copy_db
from tests.helpers.label_imports import INES, TOM, import_records, records_for
from tests.helpers.paths import ROOT


@pytest.fixture
def imported(demo_engine: Engine, tax: Taxonomy) -> dict[str, Any]:
    with read_session(demo_engine) as s:
        keys = list(
            s.scalars(select(Case.key).where(Case.status == "ready").order_by(Case.id).limit(30))
        )
    first = import_records(
        demo_engine, tax, "label-studio", "ls.json", records_for("label-studio", keys[:12], 0)
    )
    second = import_records(
        demo_engine, tax, "argilla", "ar.json", records_for("argilla", keys[12:30], 1)
    )
    return {"label-studio": first, "argilla": second}


def test_every_source_and_batch_gives_the_same_report_as_the_reference(
    demo_engine: Engine, tax: Taxonomy, imported: dict[str, int]
) -> None:
    assert source_choices(demo_engine) == ["argilla", "label-studio", "workbench"]
    batches = import_choices(demo_engine)
    assert [(i, tool, name) for i, tool, name, _ in batches] == [
        (imported["argilla"], "argilla", "ar.json"),
        (imported["label-studio"], "label-studio", "ls.json"),
    ]
    frame = labeling.labels_frame(demo_engine)
    decisions, codes = list(tax.decisions), list(tax.reason_codes)
    scopes: list[dict[str, Any]] = [
        {"source": "workbench"},
        {"source": "label-studio"},
        {"source": "argilla"},
        {"import_id": imported["argilla"]},
        {"import_id": imported["label-studio"], "source": "label-studio"},
        {"import_id": imported["label-studio"], "source": "argilla"},  # nothing
        {"source": "workbench", "category": str(frame["case_category"].iloc[0])},
    ]
    for scope in scopes:
        for group_by in ("slice", "category"):
            ref = agreement_report(frame, decisions, codes, group_by=group_by, **scope)
            got = agreement_report_sql(demo_engine, decisions, codes, group_by=group_by, **scope)
            assert_same(got, ref, f"{scope} {group_by}")
    ls = agreement_report_sql(demo_engine, decisions, codes, source="label-studio")
    assert ls is not None and (ls.cases, ls.annotators, ls.labels) == (12, 2, 24)
    assert ls.fleiss["n_items"].iloc[0] == 12  # two labels on each of the 12 cases


def test_per_annotator_figures_count_only_the_labels_from_there(
    demo_engine: Engine, tax: Taxonomy, imported: dict[str, int]
) -> None:
    everything = annotator_figures(demo_engine, list(tax.decisions)).set_index("annotator")
    argilla = annotator_figures(demo_engine, list(tax.decisions), source="argilla")
    assert set(argilla["annotator"]) == {INES, TOM}
    assert set(argilla["cases_labelled"]) == {18}
    assert set(argilla["queue_labelled"]) == {18}
    batch = annotator_figures(demo_engine, list(tax.decisions), import_id=imported["label-studio"])
    assert set(batch["cases_labelled"]) == {12}
    # the imported labels are current labels like any other: they count in everything
    with read_session(demo_engine) as s:
        here = len(
            list(
                s.scalars(
                    select(Label.id).where(Label.annotator == TOM, Label.source == "workbench")
                )
            )
        )
    assert everything.loc[TOM, "cases_labelled"] <= here + 30


def test_labels_from_argillas_own_export_get_their_agreement_figures(
    tmp_path: Path, demo_base_template: Path, tax: Taxonomy
) -> None:
    """The committed export that Argilla's client wrote (tests/labels/data/argilla, made by
    tools/argilla_fixtures.py), read by the Argilla reader and imported: its labels have the
    figures the reference computes, by source and by batch."""
    engine = make_engine(copy_db(demo_base_template, tmp_path))
    path = ROOT / "tests" / "labels" / "data" / "argilla" / "records_flat.json"
    users = {
        "8c576063-82dd-5cd8-89a1-95718d92d3dc": INES,  # the fixtures' "alice"
        "514460ed-b151-5dbf-8e89-1309c8fadd79": TOM,  # and "bob"
    }

    def records(skipped: Skipped) -> Iterator[ExternalLabel]:
        with path.open("rb") as f:
            yield from argilla_io.read_export(f, skipped)

    report = database.write(
        engine,
        lambda s: imports.import_labels(
            s,
            make_actor("reviewer", "ravi.menon@brightwave.example"),
            argilla_io.TOOL,
            records,
            users,
            tax,
            file_name=path.name,
            sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
        ),
    )
    assert report.import_id is not None and report.added >= 2
    decisions, codes = list(tax.decisions), list(tax.reason_codes)
    frame = labeling.labels_frame(engine)
    for scope in ({"source": argilla_io.TOOL}, {"import_id": report.import_id}):
        ref = agreement_report(frame, decisions, codes, **scope)
        got = agreement_report_sql(engine, decisions, codes, **scope)
        assert_same(got, ref, str(scope))
        assert got is not None and got.labels == report.added
        figures = annotator_figures(engine, decisions, **scope)
        assert set(figures["annotator"]) <= {INES, TOM}
        assert figures["cases_labelled"].sum() == report.added
    engine.dispose()
