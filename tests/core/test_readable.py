"""How values read: taxonomy labels, percentages with intervals, numbers, dates, badges."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pandas as pd
import pytest

from review.core import readable
from review.core.taxonomy import taxonomy


def test_taxonomy_keys_read_as_labels_and_unknown_keys_as_words() -> None:
    tax = taxonomy()
    key = next(iter(tax.categories))
    assert readable.term(tax, "categories", key) == tax.categories[key].label
    assert readable.term(tax, "categories", "not_in_taxonomy") == "Not in taxonomy"
    assert readable.term(tax, "categories", None) == "—"
    assert readable.humanize("near_miss") == "Near miss"


@pytest.mark.parametrize(
    ("share", "text"),
    [
        (0.14, "14%"),
        (0.035, "3.5%"),
        (0.0004, "0.04%"),
        (0.0, "0%"),
        (1.0, "100%"),
        (0.3409090909090909, "34%"),
        (None, "—"),
        (math.nan, "—"),
        (pd.NA, "—"),
        (math.inf, "—"),
    ],
)
def test_percent(share: object, text: str) -> None:
    assert readable.percent(share) == text  # type: ignore[arg-type]


def test_percent_interval_and_count_rate() -> None:
    assert readable.percent_interval(0.14, 0.03, 0.51) == "14% (3–51%)"
    assert readable.percent_interval(0.14, None, 0.51) == "14%"
    assert readable.percent_interval(math.nan, 0.1, 0.2) == "—"
    assert readable.count_rate(3, 21) == "14% (3 of 21)"
    assert readable.count_rate(0, 0).startswith("undefined")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (12345, "12,345"),
        (0.3409090909090909, "0.341"),
        (2.50, "2.5"),
        (3.0, "3"),
        (math.nan, "—"),
        (None, "—"),
        (True, "yes"),
        (-0.0001, "0"),
    ],
)
def test_number(value: object, text: str) -> None:
    assert readable.number(value) == text


def test_when() -> None:
    assert readable.when("2026-11-03T14:05:09.123+00:00") == "2026-11-03 14:05 UTC"
    assert readable.when("2026-11-03T16:05:00+02:00") == "2026-11-03 14:05 UTC"
    assert readable.when("2026-11-03") == "2026-11-03"
    assert readable.when(datetime(2026, 1, 2, 3, 4, tzinfo=UTC), with_time=False) == "2026-01-02"
    assert readable.when(None) == "—"
    assert readable.when("soon") == "soon"


def test_badge() -> None:
    assert readable.badge(True) == ":green-badge[pass]"
    assert readable.badge(False) == ":red-badge[fail]"
    assert readable.badge(None) == ":gray-badge[undefined]"


def test_people_read_as_names_never_as_addresses() -> None:
    names = {"ada.admin@brightwave.example": "Ada Admin"}
    assert readable.person("Ada.Admin@brightwave.example", names) == "Ada Admin"
    assert readable.person("ada.admin@brightwave.example", names) == "Ada Admin"
    assert readable.person("new.person@brightwave.example", names) == "new.person"
    assert readable.person(None, names) == "—"
    assert readable.person("", names) == "—"


def test_whole_numbers_keep_their_zeros() -> None:
    assert readable.number(549.6, decimals=0) == "550"
    assert readable.number(1200.4, decimals=0) == "1,200"
    assert readable.number(0.30, decimals=2) == "0.3"


def test_the_sign_off_number_and_the_files_own_version_are_labelled_apart() -> None:
    assert readable.version_label(7, 3) == "sign-off v7 · file version 3"
    assert readable.version_label(7) == "sign-off v7"
    assert readable.version_label(None, 3) == "the shipped file · file version 3"


@pytest.mark.parametrize(
    ("n", "noun", "plural", "text"),
    [
        (1, "case", None, "1 case"),
        (0, "case", None, "0 cases"),
        (3, "case", None, "3 cases"),
        (1204, "case", None, "1,204 cases"),
        (2, "lint finding", None, "2 lint findings"),
        (2, "entry", None, "2 entries"),
        (2, "day", None, "2 days"),
        (2, "match", None, "2 matches"),
        (1, "stratum", "strata", "1 stratum"),
        (4, "stratum", "strata", "4 strata"),
    ],
)
def test_a_count_meets_its_noun_in_the_right_number(
    n: int, noun: str, plural: str | None, text: str
) -> None:
    assert readable.count(n, noun, plural) == text
    assert "(s)" not in text


def test_plural_chooses_the_word_alone() -> None:
    assert readable.plural(1, "is", "are") == "is"
    assert readable.plural(2, "is", "are") == "are"
    assert readable.plural(0, "column") == "columns"
