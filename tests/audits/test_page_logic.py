"""The Audit page's logic, unit-tested without Streamlit: what its forms read
(review.audits.forms: the new-plan form turned into a population filter and a plan, the rows of
the claim editor) and how it shows a batch (review.audits.display: tables, summaries, rates)."""

from __future__ import annotations

import datetime as dt
import itertools
import math

import pandas as pd
import pytest

from review.audits import display, forms
from review.audits.estimates import RATE_COLUMNS
from review.audits.items import ClaimDraft, ItemView, check_claims
from review.audits.plans import PlanSpec, PlanView, StratumCount
from review.audits.population import NONE, PopulationFilter
from review.audits.queue import ItemRow
from review.audits.verdicts import VerdictView
from review.audits.vocabulary import HEADLINE, VERDICTS
from review.core.errors import InputError
from review.core.taxonomy import taxonomy
from review.traces.chunks import ChunkView

AT = dt.datetime(2025, 7, 3, 9, 30, tzinfo=dt.UTC)


def item_view(**changes: object) -> ItemView:
    base: dict[str, object] = dict(
        id=7, plan_id=2, plan_name="July", plan_status="open", overlap=1, blind=True,
        stratum="answer", position=3, trace_pk=40, trace_id="tr-40", at=AT,
        query="Can I get a refund?", rewritten_query=None, user_role=None, identity_scopes=(),
        decision="answer", reason_code=None,
        answer_text="Refunds take 14 days [REF#1]. The Team plan has 20 seats.",
        citations=({"claim": "The Team plan has 20 seats.", "chunk_ids": ["PLANS#2"]},),
        feedback=None, ranking_mode="hybrid", hits_after_filter=2, top_score=0.8,
        answerable=True, ambiguous=False, ungrounded=None, versions={"index": "idx-1"},
        attributes={}, restricted=False,
        chunks=(
            ChunkView("REF#1", "REF", 1, 1, 0.8, "Refunds within 14 days.", False, False, None),
            ChunkView("PLANS#2", "PLANS", 3, 2, 0.5, "Team: 20 seats.", True, False, None),
        ),
        reserved_by=None, reserved_until=None,
    )  # fmt: skip
    base.update(changes)
    return ItemView(**base)  # type: ignore[arg-type]


def verdict_view(**changes: object) -> VerdictView:
    base: dict[str, object] = dict(
        id=1, item_id=7, reviewer="ravi@example.org", verdict="supported_answer", stages=(),
        notes="", claims=(), replaces_id=None, promoted_case_id=None, created_at=AT,
    )  # fmt: skip
    base.update(changes)
    return VerdictView(**base)  # type: ignore[arg-type]


# --- the new-plan form ----------------------------------------------------------------------


def test_the_attribute_filter_reads_one_key_and_its_values() -> None:
    assert forms.parse_attribute_filter("") == ()
    assert forms.parse_attribute_filter("   ") == ()
    assert forms.parse_attribute_filter(" region = EU, UK ,") == (("region", ("EU", "UK")),)
    assert forms.parse_attribute_filter("tier=gold") == (("tier", ("gold",)),)


@pytest.mark.parametrize("text", ["region", "=EU", "region=", "region=  ", " = "])
def test_a_malformed_attribute_filter_is_refused(text: str) -> None:
    with pytest.raises(InputError, match="key=value1,value2"):
        forms.parse_attribute_filter(text)


def test_attribute_strata_become_attr_dimensions() -> None:
    assert forms.parse_attribute_strata("") == ()
    assert forms.parse_attribute_strata(" region, ,plan ") == ("attr.region", "attr.plan")


def test_the_form_describes_its_population() -> None:
    form = forms.PlanForm(
        date_from=dt.date(2025, 7, 1),
        date_to=(dt.date(2025, 7, 1),),  # a range still being picked: no date yet
        decisions=["answer", NONE],
        index_versions=["idx-new"],
        attribute_filter="region=EU",
        include_restricted=False,
    )
    flt = form.population_filter()
    assert flt == PopulationFilter(
        date_from=dt.date(2025, 7, 1),
        decisions=("answer", NONE),
        index_versions=("idx-new",),
        attributes=(("region", ("EU",)),),
        include_restricted=False,
    )
    assert forms.PlanForm().population_filter() == PopulationFilter()


def test_the_form_stratifies_by_dimensions_then_attributes() -> None:
    form = forms.PlanForm(strata=["decision", "version.prompt"], attribute_strata="region")
    assert form.dimensions() == ("decision", "version.prompt", "attr.region")


def test_the_form_makes_the_plan_reading_explicit_sizes_only_when_asked() -> None:
    form = forms.PlanForm(
        name="July review", strata=["decision"], total=40, seed=9, overlap=2, blind=False,
        explicit="answer: lots",
    )  # fmt: skip
    spec = form.spec()  # proportional: the explicit text is not read
    assert (spec.name, spec.strata, spec.allocation, spec.total, spec.seed) == (
        "July review", ("decision",), "proportional", 40, 9,
    )  # fmt: skip
    assert (spec.overlap, spec.blind, spec.explicit_sizes) == (2, False, None)
    with pytest.raises(InputError, match="'lots' is not a whole number"):
        forms.PlanForm(name="x", allocation="explicit", explicit="answer: lots").spec()
    explicit = forms.PlanForm(name="x", allocation="explicit", explicit="answer: 5\nabstain: 2")
    assert explicit.spec().explicit_sizes == {"answer": 5, "abstain": 2}


def test_a_bad_attribute_filter_stops_the_plan_before_its_sizes_are_read() -> None:
    form = forms.PlanForm(name="x", attribute_filter="region", allocation="explicit")
    with pytest.raises(InputError, match="attribute filter"):
        form.spec()


# --- the claim editor -----------------------------------------------------------------------


def test_cited_ids_are_read_comma_separated() -> None:
    assert forms.parse_cited("") == ()
    assert forms.parse_cited(" A#1, ,B@2#3 ,") == ("A#1", "B@2#3")


def test_editor_rows_round_trip_to_claims() -> None:
    draft = ClaimDraft("Refunds take 14 days.", ("REF#1", "TERMS#4"), "supported")
    row = forms.claim_row(5, draft)
    assert row == {
        "uid": 5,
        "text": "Refunds take 14 days.",
        "cited": "REF#1, TERMS#4",
        "verdict": "supported",
    }
    assert forms.draft_of_row(row) == draft
    assert forms.claim_row(6) == {"uid": 6, "text": "", "cited": "", "verdict": None}
    assert forms.draft_of_row(forms.claim_row(6)) == ClaimDraft("", (), None)


def test_the_editor_starts_from_the_answer_or_from_the_saved_claims() -> None:
    uids = itertools.count(1)
    rows = forms.claim_rows(item_view(), None, lambda: next(uids))
    assert [r["uid"] for r in rows] == [1, 2]
    assert [r["text"] for r in rows] == [
        "Refunds take 14 days [REF#1].",
        "The Team plan has 20 seats.",
    ]
    assert [r["cited"] for r in rows] == ["REF#1", "PLANS#2"]
    saved = verdict_view(
        claims=({"text": "Saved claim", "cited": ["X#1"], "verdict": "unsupported"},)
    )
    rows = forms.claim_rows(item_view(), saved, lambda: next(uids))
    assert rows == [{"uid": 3, "text": "Saved claim", "cited": "X#1", "verdict": "unsupported"}]
    # a saved verdict without claims: the answer is split again
    rows = forms.claim_rows(item_view(), verdict_view(), lambda: next(uids))
    assert [r["uid"] for r in rows] == [4, 5]


def test_claim_verdict_choices() -> None:
    opts = forms.claim_verdict_options()
    assert opts[0] == forms.NOT_JUDGED and "supported" in opts and "unsupported" in opts
    assert forms.claim_verdict_index(None) == 0
    assert forms.claim_verdict_index("no such verdict") == 0
    assert opts[forms.claim_verdict_index("unsupported")] == "unsupported"
    assert forms.verdict_of_choice(forms.NOT_JUDGED) is None
    assert forms.verdict_of_choice("supported") == "supported"


def test_claim_review_is_on_for_answers_or_as_last_saved() -> None:
    assert forms.review_claims_by_default(item_view(decision="answer"), None)
    assert forms.review_claims_by_default(item_view(decision="partial"), None)
    assert not forms.review_claims_by_default(item_view(decision="abstain"), None)
    assert not forms.review_claims_by_default(item_view(decision="answer"), verdict_view())
    with_claims = verdict_view(claims=({"text": "c", "cited": [], "verdict": None},))
    assert forms.review_claims_by_default(item_view(decision="abstain"), with_claims)


# --- display: rates -------------------------------------------------------------------------


def test_rates_read_as_percentages_with_a_dash_for_none() -> None:
    # the one way rates read (review.core.readable), like every other page
    assert display.pct(0.1234) == "12%"
    assert display.pct(0.035) == "3.5%"
    assert display.pct(1) == "100%"
    assert display.pct(0) == "0%"
    assert display.pct(None) == "—"
    assert display.pct(float("nan")) == "—"
    assert display.pct(pd.NA) == "—"
    assert display.pct_range(0.14, 0.03, 0.51) == "14% (3–51%)"
    assert display.pct_range(0.05, None, 0.2) == "5%"  # no interval rather than half of one


# --- display: plans -------------------------------------------------------------------------


def plan_view(**changes: object) -> PlanView:
    spec = PlanSpec(
        name="July review", filter=PopulationFilter(decisions=("answer",)),
        strata=("decision",), total=30, seed=4, overlap=2, blind=False,
    )  # fmt: skip
    base: dict[str, object] = dict(
        id=2, name="July review", status="open", spec=spec,
        population=(StratumCount("abstain", 40, 1, 90, 0, 0),
                    StratumCount("answer", 60, 2, 99, 0, 0)),
        allocation={"abstain": 12, "answer": 18}, fingerprint="0123456789abcdef0123",
        counted_at="2025-07-01T08:15:42+00:00", created_by="ravi@example.org", created_at=AT,
        items=30, complete=11, verdicts=14,
    )  # fmt: skip
    base.update(changes)
    return PlanView(**base)  # type: ignore[arg-type]


def test_a_plan_in_the_batch_picker_and_its_summary() -> None:
    plan = plan_view()
    assert display.batch_label(plan) == "July review · open · 11/30 audited"
    assert display.plan_summary(plan) == (
        "open · proportional allocation of 30 · seed 4 · 2 reviewers per trace · open "
        "review · population counted 2025-07-01 08:15 UTC · fingerprint 0123456789abcdef0…"
    )
    assert "· blind review ·" in display.plan_summary(plan_view(spec=PlanSpec(name="x")))


def test_the_plans_table_has_one_row_per_plan() -> None:
    frame = display.plans_frame([plan_view(), plan_view(id=3, name="June", spec=PlanSpec("June"))])
    assert list(frame["plan"]) == ["July review", "June"]
    first = frame.iloc[0]
    assert (first["population"], first["sample"], first["audited"], first["verdicts"]) == (
        100, 30, 11, 14,
    )  # fmt: skip
    assert first["strata"] == "Decision" and frame.iloc[1]["strata"] == "none"
    assert first["population filter"] == "decisions: answer"
    assert frame.iloc[1]["population filter"] == "every trace"


def test_what_a_changed_population_means_depends_on_the_plan_state() -> None:
    assert display.population_note("planned") == " Recount before drawing."
    for status in ("open", "closed"):
        assert "keep the counts of the draw" in display.population_note(status)


def test_the_reproducibility_check_reads_three_ways() -> None:
    assert display.reproducibility(True)[0] == "success"
    assert display.reproducibility(None) == (
        "warning",
        "The population changed, so a new draw would differ.",
    )
    assert display.reproducibility(False)[0] == "error"


def test_the_population_preview() -> None:
    counts = [StratumCount("abstain", 3, 1, 3, 6, 0), StratumCount("answer", 5, 4, 8, 30, 0)]
    flt = PopulationFilter(index_versions=("idx-new",))
    assert display.counts_caption(counts, flt) == "8 traces in 2 strata (index versions: idx-new)"
    frame = display.counts_frame(counts)
    assert frame.to_dict("list") == {"stratum": ["abstain", "answer"], "traces": [3, 5]}
    assert list(display.counts_frame([]).columns) == ["stratum", "traces"]


def test_the_sample_table_links_each_item() -> None:
    rows = [
        ItemRow(11, 1, "answer", "tr-1", AT, "answer", None, False, 2, "false_refusal", None),
        ItemRow(12, 2, "abstain", "tr-2", AT, "abstain", "up", True, 0, None, "ines@x.org"),
    ]
    frame = display.items_frame(
        rows, lambda i: f"/audit?item={i}", names={"ines@x.org": "Ines Duarte"}
    )
    assert list(frame["open"]) == ["/audit?item=11", "/audit?item=12"]
    assert list(frame["verdict"]) == [VERDICTS["false_refusal"], ""]
    assert list(frame["held by"]) == ["", "Ines Duarte"]  # a name, never the e-mail
    assert list(frame["#"]) == [1, 2]


def test_export_file_names_keep_letters_and_digits() -> None:
    assert display.export_stem("July 2025 / monthly review!") == "july-2025---monthly-review"
    assert display.export_stem("Ünïcode Plan") == "ünïcode-plan"
    assert display.export_stem("***") == ""


# --- display: one item ----------------------------------------------------------------------


def test_the_item_caption_says_where_it_sits_and_what_happened() -> None:
    assert display.item_caption(item_view(), 30) == (
        "item 3 of 30 · stratum answer · 2025-07-03 09:30 UTC · decision answer · feedback —"
    )
    hidden = item_view(decision="abstain", reason_code="no_evidence", feedback="down",
                       restricted=True)  # fmt: skip
    assert display.item_caption(hidden, None) == (
        "item 3 of ? · stratum answer · 2025-07-03 09:30 UTC · decision abstain (No evidence) "
        "· feedback down · RESTRICTED"
    )
    tax = taxonomy()  # with the taxonomy: decisions and reason codes by their labels
    worded = item_view(decision="abstain", reason_code="no_answer_bearing_evidence")
    assert "decision Abstain (No answer-bearing evidence)" in display.item_caption(worded, 3, tax)
    assert "stratum not logged" in display.item_caption(item_view(stratum="(none)"), 3, tax)


def test_signals_and_chunks_tables() -> None:
    signals = display.signals_frame(item_view())
    as_dict = dict(zip(signals["signal"], signals["value"], strict=True))
    assert as_dict["ranking mode"] == "hybrid"
    assert as_dict["hits after filter"] == "2"
    assert as_dict["ungrounded"] == "—"
    assert as_dict["version: index"] == "idx-1"
    assert len(signals) == 7
    chunks = display.chunks_frame(item_view().chunks)
    assert list(chunks["document"]) == ["REF@1", "PLANS@3"]
    assert list(chunks["in context"]) == [True, False]


def test_wording_findings_table() -> None:
    class Hit:
        rule = "no_names"
        excerpt = "Maria Lopez"
        explanation = "names a person"

    frame = display.findings_frame([Hit()])
    assert frame.to_dict("records") == [
        {"rule": "No names", "excerpt": "Maria Lopez", "why": "names a person"}
    ]


def test_the_claim_review_summary() -> None:
    drafts = [ClaimDraft("a", ("REF#1",), "supported"), ClaimDraft("b", ("PLANS#2",), None)]
    report = check_claims(drafts, ["REF#1"])
    assert display.claims_summary(report) == (
        "Answer fails · citations valid: no · 1 of 2 claims supported"
    )
    report = check_claims([ClaimDraft("a", ("REF#1",), "supported")], ["REF#1"])
    assert display.claims_summary(report) == (
        "Answer passes · citations valid: yes · 1 of 1 claims supported"
    )


def test_verdicts_and_history_tables() -> None:
    claims = (
        {"text": "a", "cited": [], "verdict": "supported"},
        {"text": "b", "cited": [], "verdict": "unsupported"},
    )
    mine = verdict_view(verdict="partially_supported", stages=("citation_partial",), claims=claims)
    other = verdict_view(id=2, reviewer="ines@example.org", replaces_id=None)
    frame = display.verdicts_frame([mine, other])
    assert list(frame["verdict"]) == [VERDICTS["partially_supported"], VERDICTS["supported_answer"]]
    assert list(frame["claims supported"]) == [1, 0]
    assert list(frame["claims"]) == [2, 0]
    assert frame.iloc[0]["stages"] == "citation_partial"
    newer = verdict_view(id=3, verdict="false_refusal", replaces_id=1)
    history = display.history_frame([mine, other, newer], "ravi@example.org")
    assert list(history["replaces"].fillna(0)) == [0, 1]
    assert list(history["verdict"]) == [VERDICTS["partially_supported"], VERDICTS["false_refusal"]]


# --- display: estimates ---------------------------------------------------------------------


def rates_frame(unsampled: float = 0.0) -> pd.DataFrame:
    rows = []
    for i, v in enumerate([*HEADLINE, *[v for v in VERDICTS if v not in HEADLINE]]):
        rows.append(
            {
                "verdict": v, "label": VERDICTS[v], "count": i, "audited": 20,
                "sample_rate": i / 20, "sample_lo": 0.0, "sample_hi": 0.5,
                "population_rate": None if i == 0 else i / 25, "population_lo": None,
                "population_hi": 0.25, "estimated_traces": 4.0 * i,
                "unsampled_share": unsampled,
            }
        )  # fmt: skip
    return pd.DataFrame(rows, columns=RATE_COLUMNS)


def test_the_share_left_unsampled_is_reported_only_when_there_is_one() -> None:
    assert display.unsampled_share(rates_frame()) is None
    share = display.unsampled_share(rates_frame(0.125))
    assert share is not None and math.isclose(share, 0.125)


def test_the_rates_table_reads_as_percentages_and_intervals() -> None:
    table = display.rates_table(rates_frame())
    assert list(table.columns) == [
        "verdict", "count", "audited", "sample rate (95 % Wilson)",
        "population rate, weighted (95 %)", "≈ traces",
    ]  # fmt: skip
    first, second = table.iloc[0], table.iloc[1]
    assert first["verdict"] == VERDICTS[HEADLINE[0]]
    assert first["sample rate (95 % Wilson)"] == "0% (0–50%)"
    assert first["population rate, weighted (95 %)"] == "—"
    assert second["sample rate (95 % Wilson)"] == "5% (0–50%)"
    assert second["population rate, weighted (95 %)"] == "4%"  # no lower bound: no interval
    assert second["≈ traces"] == "4"
    assert len(table) == len(VERDICTS)


def test_the_chart_data_holds_the_headline_verdicts_twice() -> None:
    long = display.headline_intervals(rates_frame())
    assert list(long.columns) == ["verdict", "kind", "rate", "lo", "hi"]
    assert len(long) == 2 * len(HEADLINE)
    assert set(long["verdict"]) == {VERDICTS[v] for v in HEADLINE}
    sample = long[long["kind"] == "sample (raw)"]
    assert list(sample["rate"]) == [i / 20 for i in range(len(HEADLINE))]
    assert set(long["kind"]) == {"population (weighted)", "sample (raw)"}


SLICE_COLUMNS = [
    "slice", "audited", "count", "sample_rate", "sample_lo", "sample_hi", "population_rate",
    "population_lo", "population_hi", "estimated_traces_in_slice",
]  # fmt: skip


def test_the_slice_table_reads_as_percentages_and_keeps_its_input() -> None:
    raw = pd.DataFrame(
        [["en", 10, 2, 0.2, 0.05, 0.5, 0.25, 0.1, 0.4, 120.0],
         ["de", 4, 0, 0.0, 0.0, 0.49, None, None, None, 30.0]],
        columns=SLICE_COLUMNS,
    )  # fmt: skip
    table = display.slice_table(raw)
    assert list(table.columns) == [
        "slice", "audited", "count", "≈ traces in slice", "sample rate (95 %)",
        "population rate, weighted (95 %)",
    ]  # fmt: skip
    assert table.iloc[0].to_dict() == {
        "slice": "en", "audited": 10, "count": 2, "≈ traces in slice": "120",
        "sample rate (95 %)": "20% (5–50%)", "population rate, weighted (95 %)": "25% (10–40%)",
    }  # fmt: skip
    assert table.iloc[1]["population rate, weighted (95 %)"] == "—"
    assert list(raw.columns) == SLICE_COLUMNS  # the caller's frame is left as it was
    empty = display.slice_table(pd.DataFrame(columns=SLICE_COLUMNS))
    assert empty.empty and "sample rate (95 %)" in empty.columns


# --- issue 17, item 7: chunks picked by label, claim verdict keys -------------------------------


def test_chunk_labels_read_rank_document_and_first_words() -> None:
    view = item_view()
    ref, plans = view.chunks
    assert display.chunk_label(ref) == "#1 · REF@1 · Refunds within 14 days."
    assert display.chunk_label(plans) == "#2 · PLANS@3 · Team: 20 seats. · not in the context"
    words = " ".join(f"w{i}" for i in range(20))
    long = ChunkView("L#1", "L", 1, 4, 0.1, words, False, False, None)
    assert display.chunk_label(long).endswith("w0 w1 w2 w3 w4 w5 w6 w7…")
    hidden = ChunkView("H#1", "H", 1, 5, 0.1, "secret", True, True, None)
    assert "secret" not in display.chunk_label(hidden)
    assert display.chunk_label(None, "GONE#9") == "GONE#9 · not among the retrieved chunks"


def test_cited_options_are_the_traces_chunks_and_keep_an_unknown_citation() -> None:
    view = item_view()
    assert forms.cited_options(view) == ["REF#1", "PLANS#2"]
    assert forms.cited_options(view, ["PLANS#2", "GONE#9", "GONE#9"]) == [
        "REF#1",
        "PLANS#2",
        "GONE#9",
    ]


def test_claim_verdict_choices_and_keys() -> None:
    opts = forms.claim_verdict_options()
    assert opts == [forms.NOT_JUDGED, "supported", "unsupported", "contradicted", "not_a_claim"]
    assert [forms.claim_verdict_label(o) for o in opts][1:] == [
        "Supported",
        "Unsupported",
        "Contradicted",
        "Not a claim",
    ]
    assert set(forms.CLAIM_KEYS) == set(opts[1:])
    assert len(set(forms.CLAIM_KEYS.values())) == 4
    assert not set(forms.CLAIM_KEYS.values()) & {"c", "r"}  # Streamlit's own keys
