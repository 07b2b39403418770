"""AppTest of the Traces and Monitoring pages (through the one-page router until app.py
registers them): demo and empty databases, every form's happy and error path, clearance,
untrusted text rendered as text, deep links from alerts."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from sqlalchemy import Engine, select
from streamlit.testing.v1 import AppTest

from review.core.identity import SYSTEM
from review.core.taxonomy import taxonomy
from review.demo import tracedemo
from review.demo.fixtures import EXTRA_DEMO_TRACES
from review.traces import browse, retention
from storage.db import make_engine
from storage.models import Trace as TraceRow
from storage.models import TraceChunk
from tests.helpers.dates import store_extreme_dates
from tests.helpers.pages import ADA, INES, PAULA, no_exception, page_app, readable
from tests.helpers.paths import ROOT
from tests.helpers.traces import chunk, import_traces, make_trace

RAVI = "ravi.menon@brightwave.example"  # reviewer with clearance
CHEN = "chen.li@brightwave.example"  # compliance with clearance
TRACES = "pages/traces_page.py"
MONITORING = "pages/monitoring_page.py"
SAMPLE = (ROOT / "tests" / "data" / "traces" / "canonical.jsonl").read_bytes()


def texts(at: AppTest) -> list[str]:
    return [t.value for t in at.text]


def shown(at: AppTest) -> str:
    """Everything the page shows as text, in tables included."""
    parts = texts(at) + [c.value for c in at.code] + [readable(c) for c in at.caption]
    parts += [d.value.to_string() for d in at.dataframe]
    return "\n".join(parts)


def listing(at: AppTest):
    return next(d.value for d in at.dataframe if "question" in d.value.columns)


def button(at: AppTest, label: str):
    return next(b for b in at.button if b.label == label)


def restricted_pk(engine: Engine) -> int:
    with engine.connect() as c:
        return int(
            c.execute(
                select(TraceRow.id).where(TraceRow.restricted.is_(True)).limit(1)
            ).scalar_one()
        )


# ---------------------------------------------------------------------------------------
# Traces page


def test_list_renders_with_demo_traces(
    trace_demo_url: str,
    trace_demo_engine: Engine,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    at = page_app(trace_demo_url, monkeypatch, TRACES, RAVI).run()
    no_exception(at)
    assert readable(at.title[0]) == "Traces" and not at.error
    assert len(listing(at)) == 25
    assert f"of {tracedemo.DEMO_TRACES + EXTRA_DEMO_TRACES:,}" in " ".join(
        readable(c) for c in at.caption
    )
    # without clearance the restricted traces are left out of the count
    at = page_app(trace_demo_url, monkeypatch, TRACES, PAULA).run()
    no_exception(at)
    hidden = (
        tracedemo.DEMO_TRACES
        + EXTRA_DEMO_TRACES
        - browse.count_traces(trace_demo_engine, _paula(trace_demo_engine), browse.TraceFilter())
    )
    assert hidden > 0
    captions = " ".join(readable(c) for c in at.caption)
    assert f"of {tracedemo.DEMO_TRACES + EXTRA_DEMO_TRACES - hidden:,}" in captions
    assert "Restricted traces are left out" in captions
    assert not listing(at)["restricted"].any()
    assert "Import traces" not in [b.label for b in at.button]  # product owners do not import


def _paula(engine: Engine):
    from review.admin import users

    row = users.get_by_email(engine, PAULA)
    assert row is not None
    return users.to_actor(row)


def test_annotators_do_not_see_traces(
    trace_demo_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    at = page_app(trace_demo_url, monkeypatch, TRACES, INES).run()
    no_exception(at)
    said = readable(at.info[0])
    assert said.startswith(
        "Browsing production traces is for reviewers, product owners, compliance and "
        "administrators. Your roles (annotator) do not include it. Ask an administrator ("
    )
    assert not at.dataframe


def test_empty_database_then_upload_happy_path(
    empty_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    at = page_app(empty_url, monkeypatch, TRACES, "solo@example.org").run()
    no_exception(at)
    assert any("No production traces yet" in readable(i) for i in at.info)
    at.file_uploader[0].set_value([("canonical.jsonl", SAMPLE, "application/jsonl")])
    button(at, "Import traces").click().run()
    no_exception(at)
    assert any(readable(s) == "Import finished." for s in at.success)
    assert any("5 traces added" in t for t in texts(at))
    assert len(listing(at)) == 5
    recent = next(d.value for d in at.dataframe if "source" in d.value.columns)
    assert list(recent["added"]) == [5]
    # the same file again adds nothing
    at.file_uploader[0].set_value([("canonical.jsonl", SAMPLE, "application/jsonl")])
    button(at, "Import traces").click().run()
    assert any("0 traces added; 5 already present" in t for t in texts(at))


def test_upload_error_path_writes_nothing_and_names_the_line(
    empty_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = SAMPLE.decode().splitlines()
    bad = json.loads(lines[1])
    bad["top_score"] = "very high"
    payload = "\n".join([lines[0], json.dumps(bad), *lines[2:]]).encode()
    at = page_app(empty_url, monkeypatch, TRACES, "solo@example.org").run()
    button(at, "Import traces").click().run()
    assert any("Choose a file" in readable(e) for e in at.error)
    at.file_uploader[0].set_value([("bad.jsonl", payload, "application/jsonl")])
    button(at, "Import traces").click().run()
    no_exception(at)
    assert any("Nothing was imported" in readable(e) for e in at.error)
    assert any("bad.jsonl: line 2: field top_score" in c.value for c in at.code)
    eng = make_engine(empty_url)
    assert browse.total_traces(eng) == 0
    # skipping bad lines imports the rest and offers the rejected lines
    at.file_uploader[0].set_value([("bad.jsonl", payload, "application/jsonl")])
    next(c for c in at.checkbox if c.label.startswith("Skip bad lines")).check()
    button(at, "Import traces").click().run()
    no_exception(at)
    assert any("4 traces added" in t and "1 rejected" in t for t in texts(at))
    assert any("line 2: field top_score" in c.value for c in at.code)
    assert at.get("download_button")
    assert browse.total_traces(eng) == 4
    eng.dispose()


def test_trace_view_respects_clearance(
    trace_demo_url: str,
    trace_demo_engine: Engine,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pk = restricted_pk(trace_demo_engine)
    at = page_app(trace_demo_url, monkeypatch, TRACES, PAULA, trace=str(pk)).run()
    no_exception(at)
    assert any("restricted" in readable(e) for e in at.error)
    assert not at.dataframe
    view = browse.get_trace(trace_demo_engine, SYSTEM, pk=pk)
    assert view is not None
    assert view.query not in shown(at)
    at = page_app(trace_demo_url, monkeypatch, TRACES, CHEN, trace=str(pk)).run()
    no_exception(at)
    assert readable(at.subheader[0]) == f"Trace {pk}"
    assert view.query in texts(at)
    assert any("Restricted trace" in readable(w) for w in at.warning)


def test_filtered_chunks_only_with_clearance(
    trace_demo_url: str,
    trace_demo_engine: Engine,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with trace_demo_engine.connect() as c:
        pk, secret = c.execute(
            select(TraceRow.id, TraceChunk.text)
            .join(TraceChunk, TraceChunk.trace_pk == TraceRow.id)
            .where(TraceChunk.filtered.is_(True), TraceRow.restricted.is_(False))
            .where(TraceChunk.doc_id == "LEGAL-DISPUTE-HALVORSEN")
            .limit(1)
        ).one()
    at = page_app(trace_demo_url, monkeypatch, TRACES, PAULA, trace=str(pk)).run()
    no_exception(at)
    page = shown(at)
    assert secret not in page and "LEGAL-DISPUTE-HALVORSEN" not in page
    hidden = re.compile(
        r"\b[1-9][\d,]* chunks? removed by the authorization filter (is|are) hidden"
    )
    assert any(hidden.search(readable(c)) for c in at.caption)
    at = page_app(trace_demo_url, monkeypatch, TRACES, RAVI, trace=str(pk)).run()
    no_exception(at)
    assert secret in texts(at)


def test_hostile_trace_text_is_shown_as_text(
    empty_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hostile = (
        "**bold** <script>alert(1)</script> ![x](https://evil.example/p.png) [a](javascript:x)"
    )
    eng = make_engine(empty_url)
    import_traces(
        eng,
        [
            make_trace(
                "hostile",
                query=hostile,
                answer_text=hostile,
                chunks=[chunk("<b>id</b>", text=hostile)],
                context_sent=hostile,
            )
        ],
    )
    pk = browse.list_traces(eng, SYSTEM, browse.TraceFilter())[0].id
    eng.dispose()
    at = page_app(empty_url, monkeypatch, TRACES, "solo@example.org", trace=str(pk)).run()
    no_exception(at)
    assert texts(at).count(hostile) >= 4  # question, final text, context, chunk text
    rendered = [readable(m) for m in at.markdown] + [readable(s) for s in at.subheader]
    rendered += [readable(e) for e in at.error] + [readable(i) for i in at.info]
    assert not any("<script>" in r or "evil.example" in r for r in rendered)


def test_deep_links_set_the_filters(
    trace_demo_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    at = page_app(trace_demo_url, monkeypatch, TRACES, RAVI, decision="escalate").run()
    no_exception(at)
    assert set(listing(at)["decision"]) == {taxonomy().decisions["escalate"].label}
    at = page_app(trace_demo_url, monkeypatch, TRACES, RAVI, missing_reason="1").run()
    no_exception(at)
    assert len(listing(at)) == 4
    assert set(listing(at)["reason"]) == {""}
    at = page_app(
        trace_demo_url, monkeypatch, TRACES, RAVI, negative="1", vkey="index", vval="nope"
    ).run()
    no_exception(at)
    assert any("No traces match" in readable(i) for i in at.info)
    button(at, "Clear filters").click().run()
    no_exception(at)
    assert len(listing(at)) == 25


def test_filter_widgets(
    trace_demo_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    at = page_app(trace_demo_url, monkeypatch, TRACES, RAVI).run()
    at.selectbox(key="traces_reason").set_value("ambiguous_question").run()
    no_exception(at)
    assert set(listing(at)["reason"]) == {taxonomy().reason_codes["ambiguous_question"].label}
    at.checkbox(key="traces_caveat").check().run()
    assert any("No traces match" in readable(i) for i in at.info)
    at.checkbox(key="traces_caveat").uncheck().run()
    at.text_input(key="traces_q").input("[email]").run()
    no_exception(at)
    assert listing(at)["question"].str.contains(r"\[email\]").all()
    at.date_input(key="traces_from").set_value(tracedemo.demo_weeks()[-1].date()).run()
    at.date_input(key="traces_to").set_value(tracedemo.demo_weeks()[0].date()).run()
    assert any("after the" in readable(e) for e in at.error)


def test_a_text_searchs_count_stops_at_the_limit_and_says_so_until_asked(
    trace_demo_url: str,
    trace_demo_engine: Engine,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(browse, "COUNT_LIMIT", 30)
    flt = browse.TraceFilter(text="refund")
    exact = browse.count_traces(trace_demo_engine, _ravi(trace_demo_engine), flt)
    assert exact > 30
    at = page_app(trace_demo_url, monkeypatch, TRACES, RAVI).run()
    at.text_input(key="traces_q").input("refund").run()
    no_exception(at)
    captions = " ".join(readable(c) for c in at.caption)
    assert "Showing 1–25 of more than 30 (counting stopped there)" in captions
    assert f"{exact:,}" not in captions
    assert len(listing(at)) == 25
    button(at, "Count every match").click().run()
    no_exception(at)
    captions = " ".join(readable(c) for c in at.caption)
    assert f"Showing 1–25 of {exact:,} ·" in captions and "more than" not in captions
    assert "Count every match" not in [b.label for b in at.button]
    # another search counts up to the limit again
    at.text_input(key="traces_q").input("monthly").run()
    assert "of more than 30 (counting stopped there)" in " ".join(readable(c) for c in at.caption)
    # a search with few matches is counted exactly
    at.text_input(key="traces_q").input("zq-no-such-words").run()
    no_exception(at)
    assert any("No traces match" in readable(i) for i in at.info)


def _ravi(engine: Engine):
    from review.admin import users

    row = users.get_by_email(engine, RAVI)
    assert row is not None
    return users.to_actor(row)


def test_retention_form_and_purge(
    trace_demo_url: str,
    trace_demo_engine: Engine,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    at = page_app(trace_demo_url, monkeypatch, TRACES, ADA).run()
    no_exception(at)
    days = next(n for n in at.number_input if n.label.startswith("Keep traces for"))
    days.set_value(60)
    button(at, "Save retention rule").click().run()
    no_exception(at)
    assert any("Retention rule saved" in readable(s) for s in at.success)
    assert retention.get_retention(trace_demo_engine).days == 60
    # error path: someone else changes the rule while the form is open
    retention.set_retention(trace_demo_engine, SYSTEM, 45, 1)
    next(n for n in at.number_input if n.label.startswith("Keep traces for")).set_value(30)
    button(at, "Save retention rule").click().run()
    assert any("was changed by system" in readable(e) for e in at.error)
    at = page_app(trace_demo_url, monkeypatch, TRACES, ADA).run()
    at.checkbox(key="traces_purge_sure").check().run()
    button(at, "Purge now").click().run()
    no_exception(at)
    assert any("deleted with their chunks" in readable(s) for s in at.success)
    assert browse.total_traces(trace_demo_engine) < tracedemo.DEMO_TRACES
    # reviewers do not get the retention form
    at = page_app(trace_demo_url, monkeypatch, TRACES, RAVI).run()
    assert not [b for b in at.button if b.label == "Purge now"]


# ---------------------------------------------------------------------------------------
# Monitoring page


def test_monitoring_renders_alerts_from_the_demo_drift(
    trace_demo_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    at = page_app(trace_demo_url, monkeypatch, MONITORING, PAULA).run()
    no_exception(at)
    assert readable(at.title[0]) == "Monitoring" and not at.error
    alerts = next(d.value for d in at.dataframe if "what happened" in d.value.columns)
    from review.core.taxonomy import load_taxonomy
    from review.traces import monitoring

    engine = make_engine(trace_demo_url)
    expected = monitoring.monitor(
        engine, load_taxonomy(), monitoring.load_monitoring_policy(), weeks=12
    ).alerts
    engine.dispose()
    assert len(alerts) == len(expected) >= 3
    assert any(m.startswith("No-answer rate") for m in alerts["what happened"])
    # each alert says what to do (note 004's actions)
    assert all(alerts["what to do"].str.len() > 0)
    link = next(
        u
        for u, m in zip(alerts["traces"], alerts["what happened"], strict=True)
        if m.startswith("No-answer")
    )
    assert "decision=abstain,clarify,escalate" in link and "from=" in link
    weekly = next(d.value for d in at.dataframe if "negative feedback (count)" in d.value.columns)
    assert len(weekly) == 12
    # segment by index version: the rebuilt index alone
    at.selectbox(key="monitoring_dim").set_value("version.index").run()
    no_exception(at)
    values = at.selectbox(key="monitoring_value_version.index").options
    assert len(values) == 2
    at.selectbox(key="monitoring_compare").set_value("ranking_mode").run()
    no_exception(at)


def test_monitoring_link_opens_the_traces_behind_the_alert(
    trace_demo_url: str,
    trace_demo_engine: Engine,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from review.core.taxonomy import load_taxonomy
    from review.traces import monitoring

    result = monitoring.monitor(
        trace_demo_engine, load_taxonomy(), monitoring.load_monitoring_policy(), weeks=12
    )
    alert = next(a for a in result.alerts if a.rule == "missing_reason")
    at = page_app(trace_demo_url, monkeypatch, TRACES, RAVI, **alert.params()).run()
    no_exception(at)
    assert len(listing(at)) == 4


def test_monitoring_empty_database_annotator_and_bad_policy(
    empty_url: str,
    trace_demo_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    at = page_app(empty_url, monkeypatch, MONITORING, "solo@example.org").run()
    no_exception(at)
    assert any("No production traces yet" in readable(i) for i in at.info)
    at = page_app(trace_demo_url, monkeypatch, MONITORING, INES).run()
    no_exception(at)
    assert at.info and not at.dataframe
    policies = tmp_path / "policies"
    shutil.copytree(ROOT / "policies", policies)
    path = policies / "monitoring.yaml"
    path.write_text(
        path.read_text(encoding="utf-8").replace("max_change_points: 5", "max_change_points: x"),
        encoding="utf-8",
    )
    monkeypatch.setenv("WORKBENCH_POLICIES_DIR", str(policies))
    at = page_app(trace_demo_url, monkeypatch, MONITORING, PAULA).run()
    no_exception(at)
    assert any("monitoring policy file is invalid" in readable(e) for e in at.error)
    assert any("alerts.no_answer_move.max_change_points" in c.value for c in at.code)


def test_monitoring_shows_wording_violations_once_the_production_check_ran(
    trace_demo_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from review.admin import users
    from review.wording import production

    production.clear_production_cache()
    at = page_app(trace_demo_url, monkeypatch, MONITORING, PAULA).run()
    no_exception(at)
    assert any("production wording check has" in readable(i) for i in at.info)
    eng = make_engine(trace_demo_url)
    paula = users.to_actor(users.get_by_email(eng, PAULA))  # type: ignore[arg-type]
    summary = production.production_counts(eng, paula)
    assert summary.offending > 0
    at = page_app(trace_demo_url, monkeypatch, MONITORING, PAULA).run()
    no_exception(at)
    offending = "refusals breaking a rule"
    weekly = next(d.value for d in at.dataframe if offending in d.value.columns)
    assert int(weekly[offending].sum()) > 0
    assert int(weekly[offending].sum()) <= summary.offending
    # every rule is headed by its title, never by its id
    assert "Blames the user" in weekly.columns and "blames_user" not in weekly.columns
    assert any("break a wording rule" in readable(c) for c in at.caption)
    production.clear_production_cache()


# ---------------------------------------------------------------------------------------
# Extreme dates written straight into the database (the importers refuse them)


@pytest.mark.parametrize("days", [("9999-12-31",), ("0001-01-01",), ("9999-12-31", "0001-01-01")])
def test_no_stored_date_crashes_monitoring_or_traces_nor_moves_the_window(
    trace_demo_url: str, monkeypatch: pytest.MonkeyPatch, days: tuple[str, ...]
) -> None:
    def weeks(at: AppTest) -> list[object]:
        table = next(
            d.value for d in at.dataframe if "negative feedback (count)" in d.value.columns
        )
        return list(table.iloc[:, 0])

    before = weeks(page_app(trace_demo_url, monkeypatch, MONITORING, PAULA).run())
    engine = make_engine(trace_demo_url)
    store_extreme_dates(engine, *days)
    engine.dispose()
    at = page_app(trace_demo_url, monkeypatch, MONITORING, PAULA).run()
    no_exception(at)
    assert not at.error
    assert weeks(at) == before  # the window still ends at the newest real week
    at = page_app(trace_demo_url, monkeypatch, TRACES, RAVI).run()
    no_exception(at)
    assert not at.error


def test_an_admin_marks_a_trace_restricted_on_its_page(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    with demo_engine.connect() as c:
        pk = int(
            c.execute(
                select(TraceRow.id).where(TraceRow.restricted.is_(False)).limit(1)
            ).scalar_one()
        )
    # a viewer without clearance opens it and sees no admin controls
    at = page_app(demo_url, monkeypatch, TRACES, PAULA, trace=str(pk)).run()
    no_exception(at)
    assert readable(at.subheader[0]) == f"Trace {pk}" and not at.radio
    at = page_app(demo_url, monkeypatch, TRACES, ADA, trace=str(pk)).run()
    no_exception(at)
    assert "Open: no reason makes this trace restricted." in texts(at)
    button(at, "Save the mark").click().run()  # no note: refused, nothing saved
    assert any("say why" in readable(e) for e in at.error)
    at.text_input[0].input("quotes a customer by name")
    button(at, "Save the mark").click().run()
    no_exception(at)
    assert any("the trace is restricted" in readable(s) for s in at.success)
    assert any(
        t.startswith("Restricted because: marked restricted by ada.admin") for t in texts(at)
    )
    at = page_app(demo_url, monkeypatch, TRACES, PAULA, trace=str(pk)).run()
    assert any("restricted" in readable(e) for e in at.error)
    assert not at.dataframe


def test_the_admin_page_turns_the_unknown_documents_setting(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from review.traces import restricted

    import_traces(demo_engine, [make_trace("unseen", chunks=[chunk("u1", doc="NEVER-SEEN")])])
    assert browse.get_trace(demo_engine, SYSTEM, trace_id="unseen").restricted  # type: ignore[union-attr]
    at = page_app(demo_url, monkeypatch, "pages/admin_page.py", ADA).run()
    no_exception(at)
    box = next(c for c in at.checkbox if c.label.startswith("Traces citing unknown documents"))
    assert box.value is True
    box.uncheck()
    button(at, "Save the setting").click().run()
    no_exception(at)
    assert any("1 became open" in readable(s) for s in at.success)
    assert not restricted.get_unknown_setting(demo_engine).on
    assert not browse.get_trace(demo_engine, SYSTEM, trace_id="unseen").restricted  # type: ignore[union-attr]
