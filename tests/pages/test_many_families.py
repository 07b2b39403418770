"""A family filter past :data:`review.cases.choices.PICKER_LIMIT` families (50,000 at ten
million traces, whose selectbox cost the browser seconds to receive and draw) is a field to
type the key in, on every page that filters by family: a typed key filters as a picked one,
and a key no family has is said under the field. Below the limit it stays a selectbox. The
limit is made 2 here (the demo has a few dozen families)."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import Engine, select

from review.cases import cases, choices
from review.core.terms import CaseStatus
from review.labels import agreement_sql
from storage.db import read_session
from storage.models import CaseFamily
from tests.helpers.bulk import add_cases, add_rows
from tests.helpers.pages import ADA, INES, RAVI, no_exception, page_app, readable

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
PAGES = [
    ("pages/cases_page.py", ADA, "cases_family"),
    ("pages/exchange_page.py", ADA, "exch_family"),
    ("pages/agreement_page.py", RAVI, "agr_family"),
    ("pages/labeling_page.py", INES, "lab_f_family"),
    ("pages/runs_page.py", ADA, "runs_subset_family"),
]


@pytest.fixture
def two(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr("pages.ui.PICKER_LIMIT", 2)
    monkeypatch.setattr("review.cases.choices.PICKER_LIMIT", 2)
    return 2


@pytest.mark.parametrize(("page", "user", "key"), PAGES)
def test_past_the_limit_the_family_is_typed(
    demo_url: str, monkeypatch: pytest.MonkeyPatch, two: int, page: str, user: str, key: str
) -> None:
    at = page_app(demo_url, monkeypatch, page, user).run()
    no_exception(at)
    assert key not in {s.key for s in at.selectbox}
    field = next(t for t in at.text_input if t.key == key)
    if page.endswith("runs_page.py"):  # in a form: applied on submit, tested below
        return
    field.input("NO-SUCH-FAMILY").run()
    no_exception(at)
    assert any("has the key NO-SUCH-FAMILY" in readable(c) for c in at.caption)


def test_a_typed_family_lists_that_familys_cases(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch, two: int
) -> None:
    family = cases.family_keys(demo_engine)[-1]  # past the two listed ones
    n = cases.count_cases(demo_engine, cases.CaseFilter(family=family))
    assert n > 0
    at = page_app(demo_url, monkeypatch, "pages/cases_page.py", ADA).run()
    next(t for t in at.text_input if t.key == "cases_family").input(family).run()
    no_exception(at)
    assert not any("has the key" in readable(c) for c in at.caption)
    assert any(f"of {n:,}" in readable(c) or f"{n} case" in readable(c) for c in at.caption), [
        readable(c) for c in at.caption
    ]


@pytest.mark.parametrize(("page", "user", "key"), PAGES[:3])
def test_below_the_limit_the_family_is_picked(
    demo_url: str, monkeypatch: pytest.MonkeyPatch, page: str, user: str, key: str
) -> None:
    at = page_app(demo_url, monkeypatch, page, user).run()
    no_exception(at)
    assert key in {s.key for s in at.selectbox}
    assert key not in {t.key for t in at.text_input}


def test_the_pickers_read_the_first_families_in_order(any_engine: Engine) -> None:
    """The services give the first ``limit`` + 1 families in key order (the picker shows
    ``limit`` and knows there are more), equal to the whole list's head, on both engines;
    the run form's list holds the families with a ready case only."""
    keys = [f"FAM-{c}" for c in "QBZAYCX"]
    add_rows(any_engine, CaseFamily, [{"key": k, "title": k, "created_at": NOW} for k in keys])
    with read_session(any_engine) as s:
        ids = {str(k): int(i) for k, i in s.execute(select(CaseFamily.key, CaseFamily.id))}
    for i, k in enumerate(keys):  # FAM-X's cases are drafts
        add_cases(any_engine, 2, prefix=f"K{i}", family_id=ids[k],
                  status="draft" if k == "FAM-X" else "ready")  # fmt: skip
    every = cases.family_keys(any_engine)
    assert every == sorted(keys)
    with read_session(any_engine) as s:
        ready = choices.family_keys(s, CaseStatus.ready)
    assert ready == sorted(set(keys) - {"FAM-X"})
    for limit in (0, 2, 5, 6, 7, 50):
        assert cases.family_keys(any_engine, limit) == every[: limit + 1]
        with read_session(any_engine) as s:
            assert choices.family_keys(s, CaseStatus.ready, limit) == ready[: limit + 1]
    assert cases.family_exists(any_engine, "FAM-Z") and not cases.family_exists(any_engine, "FAM")


def test_the_agreement_families_are_the_first_labelled_ones(demo_engine: Engine) -> None:
    every = agreement_sql.family_keys(demo_engine)
    assert len(every) > 3 and every == sorted(every)
    for limit in (0, 2, len(every) - 1, len(every)):
        assert agreement_sql.family_keys(demo_engine, limit) == every[: limit + 1]
