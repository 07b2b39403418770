"""What the Traces page shows, as plain data: the tables and labels of one trace (as a viewer
with and without clearance sees it), the list and import tables, the progress and retention
texts, and the filters: deep-link parameters, picker choices, widget values to a filter."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from sqlalchemy import Engine

from review.core.identity import SYSTEM
from review.core.taxonomy import Taxonomy, taxonomy
from review.traces import browse, display, importer, listing, retention
from review.traces.browse import COLUMN_FILTERS, TraceFilter, TraceView
from tests.helpers.actors import make_actor
from tests.helpers.traces import add_document, chunk, cited, import_traces, make_trace

CLEARED = make_actor("reviewer", "cleared@test.example", clearance=True, uid=12)
UNCLEARED = make_actor("reviewer", "plain@test.example", clearance=False, uid=13)


@pytest.fixture
def mixed(engine: Engine) -> Engine:
    add_document(engine, "POL")  # a document the corpus has: the trace stays open
    import_traces(
        engine,
        [
            make_trace(
                "mixed",
                decision="abstain",
                reason="no_answer_bearing_evidence",
                top_score=0.41234,
                hits_after_filter=1,
                answerable=False,
                identity_scopes=("sales", "emea"),
                versions={"policy": "p@2", "index": "kb-1"},
                chunks=[
                    chunk("LEGAL@1#p2", doc="LEGAL", rank=1, filtered=True, text="secret"),
                    chunk("POL@2#p1", doc="POL", rank=2, score=0.7),
                ],
                context_sent="[POL@2#p1] text of POL@2#p1",
                citations=(cited("claim one", "POL@2#p1"), cited("claim two")),
            ),
            make_trace("mailer", "2025-06-01T10:00:00Z", query="Write to jane.doe@example.org"),
        ],
    )
    return engine


def _view(engine: Engine, clearance: bool) -> TraceView:
    view = browse.get_trace(engine, CLEARED if clearance else UNCLEARED, trace_id="mixed")
    assert view is not None
    return view


def test_flags_values_and_scores_read_as_text() -> None:
    assert [display.yes_no(v) for v in (True, False, None)] == ["yes", "no", "—"]
    frame = display.value_frame([("a", None), ("b", 3), ("c", "x")])
    assert list(frame.columns) == ["", "value"]
    assert list(frame["value"]) == ["—", "3", "x"]
    assert display.score_text(None) == "—" and display.score_text(0.41234) == "0.412"


def test_decision_and_reason_labels_come_from_the_taxonomy(tax: Taxonomy) -> None:
    assert display.decision_label("abstain", tax) == tax.decisions["abstain"].label
    assert display.decision_label("made_up", tax) == "made_up"
    assert display.decision_label(None, tax) == "not logged"
    code = next(iter(tax.reason_codes))
    assert display.reason_line(code, tax) == f"{code}: {tax.definition('reason_codes', code)}"
    assert display.reason_line(None, tax) == "(none logged)"


def test_a_cleared_viewer_sees_every_chunk_with_its_flags(mixed: Engine) -> None:
    view = _view(mixed, clearance=True)
    frame = display.chunks_frame(view)
    assert list(frame["chunk"]) == ["LEGAL@1#p2", "POL@2#p1"]
    assert list(frame["filtered by authorization"]) == [True, False]
    assert list(frame["in context"]) == ["no", "yes"]
    assert list(frame["text"]) == ["secret", "text of POL@2#p1"]
    assert [display.chunk_label(c) for c in view.chunks] == [
        "#1 (filtered by authorization)",
        "#2",
    ]
    assert display.hidden_chunks_note(view) is None


def test_a_viewer_without_clearance_is_told_chunks_are_hidden(mixed: Engine) -> None:
    view = _view(mixed, clearance=False)
    frame = display.chunks_frame(view)
    assert list(frame["chunk"]) == ["POL@2#p1"]
    assert "secret" not in frame.to_csv() and "LEGAL" not in frame.to_csv()
    note = display.hidden_chunks_note(view)
    assert note is not None and note.startswith("1 chunk removed by the authorization")
    assert display.no_chunks_text(view) == "(no chunks you may see)"
    assert display.no_chunks_text(_view(mixed, clearance=True)) == "(no chunks retrieved)"


def test_citations_say_what_they_cite_and_what_is_wrong(mixed: Engine) -> None:
    frame = display.citations_frame(_view(mixed, clearance=True))
    assert list(frame["cites"]) == ["POL@2#p1", "(nothing)"]
    assert list(frame["valid"]) == [True, False]
    assert list(frame["problems"]) == ["", "cites nothing"]


def test_signals_versions_and_redactions(mixed: Engine) -> None:
    view = _view(mixed, clearance=True)
    signals = dict(display.signals_frame(view).values.tolist())
    assert signals["top score"] == "0.41234"
    assert signals["answerable (model)"] == "no"
    assert signals["ambiguous (model)"] == "—"
    assert signals["topics (topic classifier)"] == "—"  # not classified: the gate fails closed
    assert signals["identity scopes"] == "sales, emea"
    assert signals["feedback"] == "—"
    assert display.value_frame(sorted(view.versions.items())).values.tolist() == [
        ["index", "kb-1"],
        ["policy", "p@2"],
    ]
    redacted = browse.get_trace(mixed, CLEARED, trace_id="mailer")
    assert redacted is not None
    assert dict(display.redactions_frame(redacted).values.tolist())["email"] == "1"


def test_the_list_links_each_trace_and_names_missing_decisions(mixed: Engine) -> None:
    import_traces(mixed, [make_trace("none", "2025-06-03T10:00:00Z", decision=None)])
    rows = browse.list_traces(mixed, CLEARED, TraceFilter())
    frame = display.listing_frame(rows, lambda pk: f"/traces?trace={pk}")
    assert list(frame["open"]) == [f"/traces?trace={r.id}" for r in rows]
    assert list(frame["decision"]) == ["(not logged)", "abstain", "answer"]
    assert list(frame["time (UTC)"])[:2] == ["2025-06-03 10:00", "2025-06-02 10:00"]
    labelled = display.listing_frame(rows, lambda pk: f"/traces?trace={pk}", taxonomy())
    assert list(labelled["decision"]) == [
        "(not logged)",
        taxonomy().decisions["abstain"].label,
        taxonomy().decisions["answer"].label,
    ]


def test_recent_imports_list_what_was_redacted(engine: Engine) -> None:
    import_traces(engine, [make_trace("r1", query="Mail me at jane.doe@example.org please")])
    frame = display.imports_frame(importer.recent_imports(engine))
    assert list(frame["added"]) == [1] and list(frame["source"]) == ["test"]
    assert "email" in frame["redacted"].iloc[0]
    who = frame["by"].iloc[0]
    named = display.imports_frame(importer.recent_imports(engine), {who.lower(): "Ada Admin"})
    assert named["by"].iloc[0] == "Ada Admin"


def test_import_progress_texts() -> None:
    assert display.import_progress("checking", 1500, None) == (
        0.0,
        "Checking the file… 1,500 traces read",
    )
    assert display.import_progress("writing", 500, 2000) == (0.25, "Writing… 500 of 2,000")
    assert display.import_progress("writing", 10, 5) == (1.0, "Writing… 10 of 5")
    assert display.import_progress("writing", 10, None) is None


def test_retention_caption(engine: Engine) -> None:
    assert display.retention_caption(retention.get_retention(engine)).startswith(
        "No retention rule is set"
    )
    rule = retention.set_retention(engine, SYSTEM, 30, 0)
    assert display.retention_caption(rule) == (
        f"Traces older than 30 days are deleted when a purge runs (set by {rule.updated_by})."
    )


# ---------------------------------------------------------------------------------------
# Filters


def test_a_link_is_keyed_by_its_filter_parameters_only() -> None:
    a = listing.link_key({"decision": "abstain", "from": "2025-06-01", "as": "3"})
    b = listing.link_key({"from": "2025-06-01", "decision": "abstain"})
    assert a == b == (("decision", "abstain"), ("from", "2025-06-01"))
    assert listing.link_key({"trace": "5", "as": "1"}) == ()


def test_a_deep_link_sets_the_filters_it_names(tax: Taxonomy) -> None:
    query = {
        "from": "2025-06-01",
        "to": "not a date",
        "decision": "abstain,made_up,(none)",
        "reason": "no_answer_bearing_evidence",
        "feedback": "positive",
        "missing_reason": "1",
        "caveat": "0",
        "language": "de",
        "vkey": "index",
        "q": "refund",
    }
    values = listing.values_from_query(query, tax.decisions, tax.reason_codes)
    assert values == {
        "from": dt.date(2025, 6, 1),
        "decisions": ["abstain", "(none)"],
        "reason": "no_answer_bearing_evidence",
        "feedback": "positive",
        "missing": True,
        "language": "de",
        "q": "refund",
    }
    both = listing.values_from_query(
        {"negative": "1", "feedback": "positive", "vkey": "index", "vval": "kb-2", "reason": "x"},
        tax.decisions,
        tax.reason_codes,
    )
    assert both == {"feedback": listing.NEGATIVE, "vkey": "index", "vval": "kb-2"}
    assert set(listing.FILTER_PARAMS) >= set(COLUMN_FILTERS) | {"from", "to", "q"}


def test_picker_choices_keep_a_linked_value() -> None:
    assert listing.picker_options(["a", "b"], None) == ["", "a", "b"]
    assert listing.picker_options(["a", "b"], "b") == ["", "a", "b"]
    assert listing.picker_options(["a"], "old") == ["", "a", "old"]
    options = listing.feedback_options(["negative", "thumbs_down"])
    assert options[:2] == ["", listing.NEGATIVE]
    assert options[-1] == "thumbs_down" and options.count("negative") == 1


def test_widget_values_become_the_filter() -> None:
    assert listing.build_filter({}) == TraceFilter()
    values: dict[str, Any] = {
        "q": "refund",
        "from": dt.date(2025, 6, 1),
        "to": (dt.date(2025, 6, 2),),  # a half-set range is no date
        "decisions": ["abstain"],
        "reason": "",
        "feedback": listing.NEGATIVE,
        "ranking_mode": "vector",
        "vkey": "index",
        "vval": "kb-1",
        "smin": 0.5,
        "smax": None,
        "missing": True,
        "restricted": False,
    }
    assert listing.build_filter(values) == TraceFilter(
        date_from=dt.date(2025, 6, 1),
        decisions=("abstain",),
        negative_feedback=True,
        ranking_mode="vector",
        version_key="index",
        version_value="kb-1",
        score_min=0.5,
        text="refund",
        missing_reason=True,
    )
    assert listing.build_filter({"feedback": "positive"}).feedback == "positive"
    assert not listing.build_filter({"feedback": "positive"}).negative_feedback


def test_reversed_dates_are_caught() -> None:
    early, late = dt.date(2025, 6, 1), dt.date(2025, 6, 9)
    assert listing.dates_reversed(TraceFilter(date_from=late, date_to=early))
    assert not listing.dates_reversed(TraceFilter(date_from=early, date_to=late))
    assert not listing.dates_reversed(TraceFilter(date_from=late))
