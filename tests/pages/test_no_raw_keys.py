"""No raw key on any screen (issue 35, item 9): the tables and charts of the demo's pages, as
every role (admin, annotator, reviewer, product owner, compliance), show roles, thresholds,
metrics, wording rules, feedback, signals and decisions in words ("Product owner", "Refuse
below", "Blames the user", "Abstain", "top score missing (NaN)"), never as the stored key
(``product_owner``, ``refuse_below``, ``blames_user``, ``abstain``, ``top_score``), people by
name (never an e-mail), a missing value never as "(none)"; and so do the views that need a
step first: two runs compared, two policy versions compared, a wording draft's caret view, a
Monthly review dry run, an audit plan's strata and estimates. A figure that does not apply
reads "—", never "None" or "nan"; small closed pickers have no "Select all"; and the wide
lists keep the columns that say which row it is fixed while they scroll sideways."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from sqlalchemy import delete, select
from sqlalchemy.orm import Session
from streamlit.testing.v1 import AppTest

from review.audits import plans as audit_plans
from review.audits import population
from review.core.readable import UNDEFINED
from review.evaluation import evalruns
from review.labels.agreement_rollup import rebuild_rollup
from storage.db import make_engine, write_session
from storage.models import EvalOutput, Label
from tests.helpers.pages import (
    ADA,
    CHEN,
    INES,
    PAULA,
    RAVI,
    app,
    no_exception,
    open_tab,
    page_app,
    readable,
)
from tests.helpers.shown import EMAIL, KEY_WORD, caret_notes, column_config, headers, raw_keys

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


@pytest.mark.parametrize(
    "user",
    [ADA, INES, RAVI, PAULA, CHEN],
    ids=["admin", "annotator", "reviewer", "product_owner", "compliance"],
)
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


def _table(at: AppTest, column: str) -> tuple[object, pd.DataFrame]:
    """The shown table with ``column`` (the element and its frame)."""
    for df in at.dataframe:
        if column in df.value.columns:
            return df, df.value
    raise AssertionError(
        f"no table with {column!r}: {[list(d.value.columns) for d in at.dataframe]}"
    )


def test_two_runs_compared_show_each_decision_by_its_label(
    trace_demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = page_app(trace_demo_url, monkeypatch, "pages/runs_page.py", ADA).run()
    no_exception(at)
    element, flips = _table(at, "effect")
    assert not flips.empty
    labels = {"Answer", "Abstain", "Clarify", "Partial answer", "Escalate"}
    shown = set(flips["A"]) | set(flips["B"]) | set(flips["gold"])
    assert shown <= labels | {"infrastructure failure"}, shown
    assert {"expected decision", "run A (before)", "run B (after)"} <= set(headers(element))
    assert not raw_keys(at, "runs")


def test_two_policy_versions_compared_list_each_changed_setting_in_words(
    trace_demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = page_app(trace_demo_url, monkeypatch, "pages/thresholds_page.py", PAULA).run()
    at = open_tab(at, "History", "thr_tab")
    no_exception(at)
    _, changes = _table(at, "setting")
    assert not changes.empty
    assert any("Refuse below" in s or "Caveat below" in s for s in changes["setting"])
    for cell in [*changes["setting"], *changes["before"], *changes["after"]]:
        assert not KEY_WORD.search(str(cell)) and not EMAIL.search(str(cell)), cell
    assert not raw_keys(at, "thresholds history")


def test_a_wording_drafts_caret_view_names_each_rule_by_its_title(
    trace_demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = page_app(trace_demo_url, monkeypatch, "pages/wording_page.py", PAULA).run()
    at = open_tab(at, "Edit and propose", "wd_tab")
    no_exception(at)
    key = next(k for k in at.session_state if str(k).startswith("wd_text_"))
    at.session_state[key] = "There is no refund, you asked it wrong. Contact Mr Smith today."
    at.run()
    no_exception(at)
    notes = list(caret_notes(at))
    assert notes, "the draft's findings are shown in a caret view"
    assert any("Says the answer does not exist" in n for n in notes), notes
    assert not [n for n in notes if KEY_WORD.search(n)], notes
    assert not raw_keys(at, "wording caret view")


def _scores_not_a_number(url: str) -> None:
    """Every output of the reference run logged its top score as NaN (with hits, so that no
    earlier check decides first)."""
    engine = make_engine(url)
    ref = next(r for r in evalruns.list_runs(engine) if r.name.startswith("reference"))
    with write_session(engine) as s:
        for out in s.scalars(select(EvalOutput).where(EvalOutput.run_id == ref.id)):
            out.signals = (out.signals or {}) | {
                "hits_after_filter": 5,
                "topics": [],
                "top_score": math.nan,
            }
    engine.dispose()


def test_a_dry_run_names_what_each_output_lacked_in_words(
    trace_demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _scores_not_a_number(trace_demo_url)
    at = app(trace_demo_url, monkeypatch, RAVI).run()
    at.switch_page("pages/review_page.py").run()
    picker = next(s for s in at.selectbox if s.label == "Run")
    picker.select(next(o for o in picker.options if o.startswith("reference")))
    next(b for b in at.button if b.label == "Run and store the validation check").click().run()
    no_exception(at)
    _, lacked = _table(at, "lacked")
    assert not lacked.empty
    assert all("top score missing (NaN)" in v for v in lacked["lacked"]), set(lacked["lacked"])
    banners = [readable(w) for w in at.warning]
    assert any("top score" in b for b in banners), banners
    assert not [b for b in banners if "top_score" in b], banners
    assert not raw_keys(at, "monthly review dry run")


def test_audit_plans_strata_and_estimates_read_in_words(
    trace_demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine(trace_demo_url)
    plans = {p.id: tuple(p.spec.strata) for p in audit_plans.list_plans(engine)}
    engine.dispose()
    assert any("feedback" in dims for dims in plans.values())
    for plan_id, dims in plans.items():
        for tab in ("Plans", "Estimates"):
            at = page_app(trace_demo_url, monkeypatch, "pages/audit_page.py", RAVI)
            at.session_state["aud_plan"] = plan_id
            at = open_tab(at.run(), tab, "aud_tab")
            no_exception(at)
            assert not raw_keys(at, f"audit plan {plan_id} ({tab})")
            strata = [
                str(v) for df in at.dataframe if "stratum" in df.value for v in df.value["stratum"]
            ]
            words = tuple(f"{population.DIMENSIONS[d]}: " for d in dims)
            for cell in strata:
                for part in cell.split(population.SEP):
                    assert part.startswith(words) or part.startswith("no "), (dims, cell)
            if tab == "Plans":
                _, table = _table(at, "created by")
                assert not any(EMAIL.search(str(v)) for v in table["created by"])
                assert "Ravi Menon" in set(table["created by"])
