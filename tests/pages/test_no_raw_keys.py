"""No raw key on any screen (issue 35, item 9): the tables and charts of the demo's pages, as
an admin and as a product owner, show roles, thresholds, metrics, wording rules, feedback
and decisions in words ("Product owner", "Refuse below", "Blames the user"), never as the
stored key (``product_owner``, ``refuse_below``, ``blames_user``); a figure that does not
apply reads "—", never "None" or "nan"; small closed pickers have no "Select all"; and the
wide lists keep the columns that say which row it is fixed while they scroll sideways."""

from __future__ import annotations

import math

import pytest
from sqlalchemy import delete, select
from sqlalchemy.orm import Session
from streamlit.testing.v1 import AppTest

from review.core.readable import UNDEFINED
from review.labels.agreement_rollup import rebuild_rollup
from storage.db import make_engine
from storage.models import Label
from tests.helpers.pages import ADA, PAULA, no_exception, open_tab, page_app
from tests.helpers.shown import column_config, raw_keys

#: Every page with tables or charts, with its lazy tabs (session key, labels) when it has
#: them.
PAGES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("pages/admin_page.py", "", ()),
    ("pages/agreement_page.py", "", ()),
    ("pages/monitoring_page.py", "", ()),
    ("pages/runs_page.py", "", ()),
    ("pages/cases_page.py", "", ()),
    ("pages/traces_page.py", "", ()),
    ("pages/review_page.py", "", ()),
    (
        "pages/thresholds_page.py",
        "thr_tab",
        ("Calibrate and propose", "Sign-off", "History", "Evidence gate"),
    ),
    (
        "pages/wording_page.py",
        "wd_tab",
        ("Edit and propose", "Sign-off", "Compare versions", "History", "Production check"),
    ),
    ("pages/audit_page.py", "aud_tab", ("Plans", "My queue", "Estimates", "Export")),
)


def _shown_keys(url: str, monkeypatch: pytest.MonkeyPatch, user: str) -> list[str]:
    found: list[str] = []
    for page, key, tabs in PAGES:
        at = page_app(url, monkeypatch, page, user).run()
        no_exception(at)
        found += raw_keys(at, page)
        for tab in tabs:
            at = open_tab(at, tab, key)
            no_exception(at)
            found += raw_keys(at, f"{page} ({tab})")
    return sorted(set(found))


@pytest.mark.parametrize("user", [ADA, PAULA], ids=["admin", "product_owner"])
def test_no_table_or_chart_shows_a_stored_key(
    trace_demo_url: str, monkeypatch: pytest.MonkeyPatch, user: str
) -> None:
    found = _shown_keys(trace_demo_url, monkeypatch, user)
    assert not found, "stored keys on screen:\n" + "\n".join(found)


def _cells(at: AppTest) -> list[object]:
    return [v for df in at.dataframe for col in df.value.columns for v in df.value[col]]


def _missing_figures_read_as_a_dash(at: AppTest) -> None:
    tables = list(at.dataframe)
    assert tables
    for df in tables:
        assert df.proto.placeholder == UNDEFINED, "a missing figure must read '—', not 'None'"
    texts = {str(v) for v in _cells(at) if isinstance(v, str)}
    assert not texts & {"None", "nan", "NaN", "<NA>"}


def test_agreement_figures_that_do_not_apply_read_as_a_dash(
    trace_demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = page_app(trace_demo_url, monkeypatch, "pages/agreement_page.py", ADA).run()
    no_exception(at)
    # kappa is per pair: it does not apply to the row of everyone (NaN there, shown "—")
    assert any(isinstance(v, float) and math.isnan(v) for v in _cells(at))
    _missing_figures_read_as_a_dash(at)


def test_agreement_with_a_single_annotator_says_why_and_shows_no_none(
    trace_demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine(trace_demo_url)
    with Session(engine) as s, s.begin():
        first = s.scalar(select(Label.annotator).order_by(Label.id).limit(1))
        s.execute(delete(Label).where(Label.annotator != first))
        rebuild_rollup(s)
    engine.dispose()
    at = page_app(trace_demo_url, monkeypatch, "pages/agreement_page.py", ADA).run()
    no_exception(at)
    _missing_figures_read_as_a_dash(at)
    notes = [str(v) for df in at.dataframe if "note" in df.value for v in df.value["note"]]
    assert any("two annotators" in n for n in notes), notes


def test_small_closed_pickers_have_no_select_all(
    trace_demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = page_app(trace_demo_url, monkeypatch, "pages/admin_page.py", ADA).run()
    no_exception(admin)
    roles = [m for m in admin.multiselect if m.label == "Roles"]
    assert len(roles) == 2
    for picker in roles:
        assert picker.proto.select_all == 0
        assert picker.options == ["Annotator", "Reviewer", "Product owner", "Compliance", "Admin"]
    traces = page_app(trace_demo_url, monkeypatch, "pages/traces_page.py", ADA).run()
    no_exception(traces)
    decision = next(m for m in traces.multiselect if m.label == "Decision")
    assert decision.proto.select_all == 0


def test_wide_lists_keep_the_row_that_says_which_fixed(
    trace_demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pinned = {
        "pages/traces_page.py": {"open", "time (UTC)"},
        "pages/cases_page.py": {"open", "case"},
        "pages/runs_page.py": {"run"},
        "pages/agreement_page.py": {"field"},
    }
    for page, columns in pinned.items():
        at = page_app(trace_demo_url, monkeypatch, page, ADA).run()
        no_exception(at)
        table = next(df for df in at.dataframe if columns <= set(map(str, df.value.columns)))
        fixed = {name for name, conf in column_config(table).items() if conf.get("pinned")}
        assert fixed == columns, page
