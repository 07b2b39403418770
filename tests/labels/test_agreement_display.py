"""The Agreement page's tables read reason codes, slices and categories by their labels and
annotators by their names (issue 17, item 12)."""

from __future__ import annotations

import pandas as pd

from review.core.taxonomy import Taxonomy
from review.labels import display


def test_codes_and_annotators_read_as_labels_and_names(tax: Taxonomy) -> None:
    code = next(iter(tax.reason_codes))
    table = pd.DataFrame(
        {
            "field": [code],
            "scope": ["pair"],
            "annotator_a": ["ines.duarte@brightwave.example"],
            "annotator_b": ["tom.becker@brightwave.example"],
            "raw_agreement": [0.75],
        }
    )
    names = {"ines.duarte@brightwave.example": "Inês Duarte"}
    shown = display.agreement_frame(table, tax, names, "reason_codes").iloc[0]
    assert shown["field"] == tax.reason_codes[code].label
    assert shown["annotator_a"] == "Inês Duarte"
    assert shown["annotator_b"] == "tom.becker"  # never the address, even when unknown
    assert shown["raw_agreement"] == 0.75  # a number: the page shows it in %
    assert display.agreement_frame(table, tax, names).iloc[0]["field"] == code  # no section


def test_groups_read_as_slice_or_category_labels(tax: Taxonomy) -> None:
    key = next(iter(tax.slices))
    groups = pd.DataFrame({"group": [key], "items": [4], "raw agreement": [0.5]})
    assert display.groups_frame(groups, tax, "slice")["group"].iloc[0] == tax.slices[key].label
    assert display.groups_frame(groups, tax, "family").equals(groups)


def test_csv_names_keep_to_safe_characters() -> None:
    name = display.csv_name(
        "annotators",
        {"slice_": "=cmd|' /C calc'!A0", "family": "../../etc/passwd", "category": "", "x": None},
    )
    assert name.startswith("agreement-annotators_slice-") and name.endswith(".csv")
    assert all(ch.isascii() and (ch.isalnum() or ch in ".-_") for ch in name)
    assert "/" not in name and ".." in name  # dots stay, but no separator makes a path
    assert len(name) <= len("agreement-") + 120 + len(".csv")


def test_a_table_csv_quotes_hostile_cells_and_leaves_undefined_figures_empty(
    tax: Taxonomy,
) -> None:
    import csv
    import io

    from review.charts import downloads
    from review.labels.fleiss import fleiss_table

    table = fleiss_table("=1+1", [(2, 2, {"@SUM(A1)": 4}, 8)])  # one value: undefined
    text = downloads.csv_text(display.fleiss_frame(table, tax))
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows[0]["field"] == "'=1+1"
    assert rows[0]["fleiss_kappa"] == ""  # undefined: no number, the reason beside it
    assert "one value" in rows[0]["note"] and rows[0]["note"].startswith("Fleiss")
    assert rows[0]["n_items"] == "2"
