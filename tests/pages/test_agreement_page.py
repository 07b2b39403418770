"""The Agreement page: Fleiss' kappa beside kappa and alpha, the per-annotator table, the
family filter, and a CSV download of every table, written by the safe CSV writer (hostile
annotator names and filter values made inert), on the demo data."""

from __future__ import annotations

import csv
import io
import math
import re
from typing import Any

import pandas as pd
import pytest
from sqlalchemy import Engine
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.testing.v1 import AppTest

from review.admin import users
from review.cases import cases
from review.core.taxonomy import Taxonomy
from review.labels import labeling
from review.labels.agreement import agreement_report, fleiss_sums
from review.labels.annotator_figures import annotator_figures
from review.labels.fleiss import ALL_PAIRABLE, fleiss_from_sums
from storage.db import read_session
from storage.models import Case
from tests.helpers.actors import make_actor
from tests.helpers.label_imports import import_records, records_for
from tests.helpers.pages import (
    ADA,
    RAVI,
    live_markdown,
    markdown_shown,
    no_exception,
    page_app,
    readable,
)
from tests.helpers.transact import write

EVIL = "http://evil.example"
HOSTILE_NAME = f'=HYPERLINK("{EVIL}","x") ![face]({EVIL}/face.png) <b>Mallory</b>'
HOSTILE_EMAIL = "mallory@brightwave.example"


@pytest.fixture
def downloads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str | None, str, bytes]]:
    """Every file the page hands to a download button: (file name, media type, bytes)."""
    files: list[tuple[str | None, str, bytes]] = []
    original = MemoryMediaFileStorage.load_and_get_id

    def spy(
        self: MemoryMediaFileStorage,
        path_or_data: str | bytes,
        mimetype: str,
        kind: Any,
        filename: str | None = None,
    ) -> str:
        data = path_or_data.encode() if isinstance(path_or_data, str) else path_or_data
        files.append((filename, mimetype, data))
        return original(self, path_or_data, mimetype, kind, filename)

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", spy)
    return files


def frames(at: AppTest) -> list[pd.DataFrame]:
    return [df.value for df in at.dataframe]


def test_the_page_shows_fleiss_and_per_annotator_figures_and_offers_every_table(
    demo_url: str,
    demo_engine: Engine,
    tax: Taxonomy,
    monkeypatch: pytest.MonkeyPatch,
    downloads: list[tuple[str | None, str, bytes]],
) -> None:
    at = page_app(demo_url, monkeypatch, "pages/agreement_page.py", RAVI).run()
    no_exception(at)
    shown = frames(at)
    assert "krippendorff_alpha" in shown[0].columns  # the decision table stays first
    fleiss = next(f for f in shown if "fleiss_kappa" in f.columns and "method" in f.columns)
    overall = fleiss[fleiss["labels_per_case"] == ALL_PAIRABLE].iloc[0]
    want = fleiss_from_sums(
        fleiss_sums(labeling.labels_frame(demo_engine), item="case_id", value="decision")
    )
    assert want.kappa is not None and overall["fleiss_kappa"] == pytest.approx(want.kappa)
    assert overall["n_items"] == want.items and overall["n_left_out"] == want.left_out
    groups = next(f for f in shown if "fleiss kappa" in f.columns)
    assert len(groups) > 3
    per = next(f for f in shown if "kappa_vs_reference" in f.columns)
    names = users.display_names(demo_engine)
    expected = annotator_figures(demo_engine, list(tax.decisions))
    assert list(per["annotator"]) == [names[e] for e in expected["annotator"]]
    assert not any("@" in str(a) for a in per["annotator"])  # names, never addresses
    assert list(per["cases_labelled"]) == list(expected["cases_labelled"])
    # one CSV per table shown, each as the table reads, and one of the heat map's pairs
    buttons = at.get("download_button")
    assert len(buttons) == len(at.dataframe) + 1 == len(downloads)
    assert all(kind == "text/csv" and name and name.endswith(".csv") for name, kind, _ in downloads)
    by_name = {name: data for name, _, data in downloads}
    grid = list(csv.DictReader(io.StringIO(by_name["agreement-decision-pairs.csv"].decode())))
    assert len(grid) == len(tax.decisions) ** 2
    assert {r["value_a"] for r in grid} == {t.label for t in tax.decisions.values()}
    rows = list(csv.DictReader(io.StringIO(by_name["agreement-annotators.csv"].decode())))
    assert [r["annotator"] for r in rows] == list(per["annotator"])
    assert [int(r["cases_labelled"]) for r in rows] == list(per["cases_labelled"])

    # one family: fewer cases, the same tables, no error
    family = at.selectbox(key="agr_family")
    assert len(family.options) > 1
    downloads.clear()
    family.set_value(family.options[1]).run()
    no_exception(at)
    counts = next(f for f in frames(at) if "kappa_vs_reference" in f.columns)
    assert counts["cases_labelled"].sum() < per["cases_labelled"].sum()
    assert any("family-" in str(name) for name, _, _ in downloads)


def test_hostile_annotator_names_are_inert_on_the_page_and_in_every_csv(
    demo_url: str,
    demo_engine: Engine,
    tax: Taxonomy,
    monkeypatch: pytest.MonkeyPatch,
    downloads: list[tuple[str | None, str, bytes]],
) -> None:
    admin = users.get_by_email(demo_engine, ADA)
    assert admin is not None
    users.add_user(demo_engine, users.to_actor(admin), HOSTILE_EMAIL, HOSTILE_NAME, ["annotator"])
    mallory = make_actor("annotator", HOSTILE_EMAIL, uid=777)
    frame = labeling.labels_frame(demo_engine)
    for case_id in sorted(set(frame["case_id"]))[:12]:  # cases others labelled: pairs form
        labeling.submit(demo_engine, mallory, int(case_id), labeling.LabelIn("answer"), None, tax)
    at = page_app(demo_url, monkeypatch, "pages/agreement_page.py", ADA).run()
    no_exception(at)
    live = {t: found for t in markdown_shown(at) if (found := live_markdown(t))}
    assert not live, live
    cells = {str(v) for f in frames(at) for col in f.columns for v in f[col]}
    assert HOSTILE_NAME in cells  # shown as typed, in table cells (never Markdown)
    assert downloads
    seen = 0
    for name, _, data in downloads:
        text = data.decode()
        for row in csv.reader(io.StringIO(text)):
            for cell in row:
                assert not cell.startswith(("=", "+", "-", "@")) or _number(cell), (name, cell)
                if HOSTILE_NAME in cell:
                    assert cell == "'" + HOSTILE_NAME, (name, cell)
                    seen += 1
    assert seen >= 2  # in the pair table and the per-annotator table at least


def _number(cell: str) -> bool:
    """A negative number (a kappa below 0) is a number, not a formula."""
    try:
        return not math.isnan(float(cell))
    except ValueError:
        return False


def test_figures_for_one_source_tool_and_one_import_batch(
    demo_url: str,
    demo_engine: Engine,
    tax: Taxonomy,
    monkeypatch: pytest.MonkeyPatch,
    downloads: list[tuple[str | None, str, bytes]],
) -> None:
    frame = labeling.labels_frame(demo_engine)
    keys = sorted(set(frame["key"].astype(str)))[:10]
    batch = import_records(
        demo_engine, tax, "label-studio", "ls.json", records_for("label-studio", keys, 0)
    )
    at = page_app(demo_url, monkeypatch, "pages/agreement_page.py", RAVI).run()
    no_exception(at)
    source = at.selectbox(key="agr_source")
    assert source.options == ["(anywhere)", "Label Studio", "made here"]
    source.set_value("label-studio").run()
    no_exception(at)
    per = next(f for f in frames(at) if "kappa_vs_reference" in f.columns)
    assert list(per["cases_labelled"]) == [10, 10]
    assert any(re.search(r"\b10 cases, 2 annotators, 20 current labels", readable(c))
               for c in at.caption)  # fmt: skip
    at.selectbox(key="agr_source").set_value("")
    imports_box = at.selectbox(key="agr_import")
    assert imports_box.options[1].startswith(f"#{batch} label-studio: ls.json")
    downloads.clear()
    imports_box.set_value(batch).run()
    no_exception(at)
    per = next(f for f in frames(at) if "kappa_vs_reference" in f.columns)
    assert list(per["cases_labelled"]) == [10, 10]
    assert any(f"import-id-{batch}" in str(name) for name, _, _ in downloads)


def test_on_a_large_label_set_the_per_annotator_figures_wait_for_a_request(
    demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from review.labels import annotator_figures as figures

    monkeypatch.setattr(figures, "EAGER_LABELS", 10)  # the demo's labels count as many
    at = page_app(demo_url, monkeypatch, "pages/agreement_page.py", RAVI).run()
    no_exception(at)
    assert not any("kappa_vs_reference" in f.columns for f in frames(at))
    at.toggle(key="agr_per_annotator").set_value(True).run()
    no_exception(at)
    assert any("kappa_vs_reference" in f.columns for f in frames(at))


def test_a_case_moved_to_another_slice_moves_the_group_table_on_the_next_run(
    demo_url: str, demo_engine: Engine, tax: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = page_app(demo_url, monkeypatch, "pages/agreement_page.py", RAVI).run()
    no_exception(at)
    before = next(f for f in frames(at) if "fleiss kappa" in f.columns).set_index("group")
    # a case labelled by two annotators, in a slice, leaves it for a slice it was not in
    labelled = labeling.labels_frame(demo_engine)
    per_case = labelled.groupby("case_id")["annotator"].nunique()
    with read_session(demo_engine) as s:
        row = next(
            r
            for r in s.scalars(
                cases.case_query().where(
                    Case.id.in_([int(c) for c in per_case[per_case >= 2].index])
                )
            )
            if r.slices
        )
        case_id, version, record = row.id, row.version, cases.to_record(row)
    left = record["slices"][0]
    joined = sorted(set(tax.slices) - set(record["slices"]))[0]
    edit = cases.CaseIn.model_validate({**record, "slices": [joined], "notes": "moved"})
    admin = make_actor("admin", "admin@brightwave.example", clearance=True, uid=1)
    write(demo_engine, cases.update_case, admin, case_id, version, edit, tax)
    at.run()
    no_exception(at)
    after = next(f for f in frames(at) if "fleiss kappa" in f.columns).set_index("group")
    report = agreement_report(
        labeling.labels_frame(demo_engine), list(tax.decisions), list(tax.reason_codes)
    )
    assert report is not None
    want = report.groups
    want["group"] = [tax.slices[g].label for g in want["group"]]  # the page shows labels
    want = want.set_index("group")
    left, joined = tax.slices[left].label, tax.slices[joined].label
    assert after.loc[left, "items"] == before.loc[left, "items"] - 1
    assert after.loc[joined, "items"] == before.loc[joined, "items"] + 1
    assert list(after.index) == list(want.index)
    assert list(after["items"]) == list(want["items"])
    assert list(after["annotators"]) == list(want["annotators"])
