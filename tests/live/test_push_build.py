"""Building the span annotations of a verdict (review.traces.live.push, pure): names, labels,
the reviewer as identifier, the note as explanation; hostile and long text stays bounded text;
a missing or unknown piece sends nothing of it and says why."""

from __future__ import annotations

import datetime as dt
import json
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from review.audits.pushback import VOCABULARY
from review.core import clearance
from review.traces.live import push
from review.traces.live.push import (
    MAX_EXPLANATION,
    PushReport,
    VerdictFacts,
    build_annotations,
    clean_text,
    withdrawn,
)

SPAN = "a1b2c3d4e5f60718"
WHEN = dt.datetime(2025, 6, 2, 9, 30, tzinfo=dt.UTC)


def facts(**kw: object) -> VerdictFacts:
    base: dict[str, object] = {
        "plan_id": 3,
        "plan_name": "June review",
        "item_id": 17,
        "trace_id": "0af7651916cd43dd8448eb211c80319c",
        "verdict_id": 41,
        "reviewer": "ravi@brightwave.example",
        "verdict": "unsupported_answer",
        "restricted": False,
        "stages": ("retrieval_missed", "citation_partial"),
        "notes": "The monthly plan allows 14 days, not 30.",
        "claims": (
            {"text": "Refunds within 30 days.", "cited": ["c1"], "verdict": "unsupported"},
            {"text": "Ask support.", "cited": [], "verdict": "supported"},
        ),
        "judged_at": WHEN,
    }
    base.update(kw)
    return VerdictFacts(**base)  # type: ignore[arg-type]


def test_a_verdict_becomes_its_verdict_stage_and_claim_annotations() -> None:
    built = build_annotations(facts(), SPAN, VOCABULARY)
    assert built.problems == ()
    by_name = {a.name: a for a in built.annotations}
    assert list(by_name) == [
        "workbench.verdict",
        "workbench.stage.retrieval_missed",
        "workbench.stage.citation_partial",
        "workbench.claim.1",
        "workbench.claim.2",
    ]
    verdict = by_name["workbench.verdict"].payload()
    assert verdict["annotator_kind"] == "HUMAN"
    assert verdict["identifier"] == "ravi@brightwave.example"
    assert verdict["span_id"] == SPAN
    assert verdict["result"] == {
        "label": "unsupported_answer",
        "score": None,
        "explanation": "The monthly plan allows 14 days, not 30.",
    }
    meta = verdict["metadata"]
    assert meta["plan_id"] == 3 and meta["item_id"] == 17 and meta["verdict_id"] == 41
    assert meta["trace_id"] == "0af7651916cd43dd8448eb211c80319c"
    assert meta["verdict_text"].startswith("Unsupported answer")
    assert meta["judged_at"] == WHEN.isoformat()
    stage = by_name["workbench.stage.retrieval_missed"].payload()["result"]
    assert stage["label"] == "failed" and stage["explanation"] == "Retrieval missed the evidence"
    claim = by_name["workbench.claim.1"].payload()
    assert claim["result"]["label"] == "unsupported"
    assert claim["result"]["explanation"] == "Refunds within 30 days."
    assert claim["metadata"]["claim"] == 1 and claim["metadata"]["cited"] == ["c1"]
    # every annotation names the reviewer and the span; none is named 'note' (Phoenix reserves it)
    assert {a.identifier for a in built.annotations} == {"ravi@brightwave.example"}
    assert {a.span_id for a in built.annotations} == {SPAN}


def test_the_digest_follows_the_value() -> None:
    a = build_annotations(facts(), SPAN, VOCABULARY).annotations[0]
    b = build_annotations(facts(), SPAN, VOCABULARY).annotations[0]
    assert a.digest == b.digest and len(a.digest) == 64
    newer = build_annotations(facts(notes="changed", verdict_id=42), SPAN, VOCABULARY)
    assert newer.annotations[0].digest != a.digest


HOSTILE = (
    "<script>alert(1)</script> ![x](https://evil.example/p.png) **bold** "
    "\x00nul\x07bell\x1b[31mred\u202eevil\ud800 tab\tline\nend 🙂 Ω"
)


def test_hostile_notes_stay_text_without_control_characters() -> None:
    built = build_annotations(
        facts(notes=HOSTILE, reviewer="  o'brien@x.example "), SPAN, VOCABULARY
    )
    verdict = built.annotations[0]
    text = verdict.explanation
    assert "<script>alert(1)</script>" in text  # sent as typed: Phoenix stores text
    assert "![x](https://evil.example/p.png)" in text
    assert "\x00" not in text and "\x07" not in text and "\x1b" not in text
    assert "\ud800" not in text
    assert "tab\tline\nend 🙂 Ω" in text
    assert verdict.identifier == "o'brien@x.example"
    # the request body is valid JSON, and UTF-8 encodable
    body = json.dumps({"data": [a.payload() for a in built.annotations]}, ensure_ascii=False)
    body.encode("utf-8")
    assert json.loads(body)["data"][0]["result"]["explanation"] == text


def test_long_text_is_cut_with_a_marker_within_the_bound() -> None:
    note = "x" * 10_000
    claim = {"text": "y" * 50_000, "verdict": "supported", "cited": [f"c{i}" for i in range(500)]}
    built = build_annotations(facts(notes=note, claims=(claim,)), SPAN, VOCABULARY)
    verdict, *_, last = built.annotations
    assert len(verdict.explanation) == MAX_EXPLANATION
    assert verdict.explanation.endswith("[cut: 10,000 characters]")
    assert len(last.explanation) == MAX_EXPLANATION
    assert len(last.metadata["cited"]) == push.MAX_CITED
    long_plan = build_annotations(facts(plan_name="p" * 5000), SPAN, VOCABULARY)
    assert len(long_plan.annotations[0].metadata["plan"]) <= push.MAX_SHORT


@pytest.mark.parametrize(
    ("change", "span", "reason"),
    [
        ({}, "A1B2C3D4E5F60718", "is not 16 hex digits"),
        ({}, "a1b2c3", "is not 16 hex digits"),
        ({}, "0000000000000000", "is not 16 hex digits"),
        ({"reviewer": " \x00 "}, SPAN, "no usable reviewer"),
        ({"reviewer": "r" * 400}, SPAN, "no usable reviewer"),
        ({"verdict": "looks_fine"}, SPAN, "verdict 'looks_fine' is not in the vocabulary"),
        ({"verdict": ""}, SPAN, "is not in the vocabulary"),
    ],
)
def test_a_missing_piece_sends_nothing_of_the_verdict(
    change: dict[str, object], span: str, reason: str
) -> None:
    built = build_annotations(facts(**change), span, VOCABULARY)
    assert built.annotations == ()
    [problem] = built.problems
    assert reason in problem and "not sent" in problem and "item 17" in problem


def test_an_unknown_stage_or_an_unjudged_claim_leaves_out_that_annotation() -> None:
    built = build_annotations(
        facts(
            stages=("retrieval_missed", "cosmic_rays"),
            claims=(
                {"text": "judged", "verdict": "contradicted"},
                {"text": "not judged yet", "verdict": None},
                {"text": "", "verdict": "supported"},
                {"text": "odd", "verdict": "maybe"},
                "not a record",
            ),
        ),
        SPAN,
        VOCABULARY,
    )
    names = [a.name for a in built.annotations]
    assert names == ["workbench.verdict", "workbench.stage.retrieval_missed", "workbench.claim.1"]
    joined = "\n".join(built.problems)
    assert "stage 'cosmic_rays' is not in the vocabulary" in joined
    assert "claim 2 has no verdict" in joined
    assert "claim 3 has no text" in joined
    assert "claim 4 has verdict 'maybe', not a claim verdict" in joined
    assert "claim 5 is not a claim record" in joined


def test_a_withdrawn_annotation_says_so() -> None:
    a = withdrawn(facts(), SPAN, "workbench.stage.citation_partial")
    p = a.payload()
    assert p["name"] == "workbench.stage.citation_partial"
    assert p["result"]["label"] == "withdrawn"
    assert "newest verdict" in p["result"]["explanation"]
    assert p["identifier"] == "ravi@brightwave.example"


def _no_controls(text: str) -> bool:
    return all(ch in "\t\n\r" or unicodedata.category(ch) not in ("Cc", "Cs") for ch in text)


@settings(max_examples=200, deadline=None)
@given(
    notes=st.text(max_size=6000),
    reviewer=st.text(max_size=50),
    claim=st.text(max_size=5000),
    verdict=st.sampled_from([*VOCABULARY.verdicts, "", "other"]),
    claim_verdict=st.one_of(st.none(), st.sampled_from(["supported", "unsupported", "x", ""])),
)
def test_any_text_builds_bounded_clean_json_or_a_reason(
    notes: str, reviewer: str, claim: str, verdict: str, claim_verdict: str | None
) -> None:
    built = build_annotations(
        facts(
            notes=notes,
            reviewer=reviewer,
            verdict=verdict,
            claims=({"text": claim, "verdict": claim_verdict},),
        ),
        SPAN,
        VOCABULARY,
    )
    sent = {a.name for a in built.annotations}
    if verdict not in VOCABULARY.verdicts or not clean_text(reviewer, 400).strip():
        assert built.annotations == () and len(built.problems) == 1
    if built.annotations:
        assert "workbench.verdict" in sent
    for a in built.annotations:
        assert len(a.explanation) <= MAX_EXPLANATION
        assert 0 < len(a.identifier) <= push.MAX_SHORT
        assert _no_controls(a.explanation) and _no_controls(a.identifier)
        json.dumps(a.payload(), ensure_ascii=False).encode("utf-8")
    # nothing is dropped silently: a claim that was not sent has its reason
    if built.annotations and "workbench.claim.1" not in sent:
        assert any("claim 1" in p for p in built.problems)


@given(st.text(max_size=300), st.integers(min_value=1, max_value=200))
def test_clean_text_never_exceeds_its_limit(text: str, limit: int) -> None:
    out = clean_text(text, limit)
    assert len(out) <= limit and _no_controls(out)


def test_the_report_says_what_happened_in_words() -> None:
    report = PushReport(
        pushed=5,
        already=2,
        failed=3,
        not_pushable=1,
        failures=(("phx: Phoenix at http://127.0.0.1:9 is unreachable (refused)", 3),),
        unpushable=(("imported from a file (no Phoenix span)", 1),),
        problems=("item 4 (...): claim 2 has no verdict; not sent",),
    )
    lines = report.lines()
    assert lines[0] == (
        "Pushed 5 annotations to Phoenix; 2 annotations already there; 3 annotations failed; "
        "1 trace not pushable."
    )
    assert "Failed (3): phx: Phoenix at http://127.0.0.1:9 is unreachable (refused)" in lines
    assert "Not pushable (1 trace): imported from a file (no Phoenix span)" in lines
    assert not report.ok and PushReport(pushed=1).ok


SECRET = "The Lisbon severance multiplier is four point two months per year of service."


def test_a_restricted_verdict_sends_its_labels_and_none_of_its_words() -> None:
    """Phoenix's readers have no clearance: a restricted verdict's note and claims go as the
    clearance module's placeholder, its cited chunks not at all; the labels still go."""
    quoting = facts(
        restricted=True,
        notes=f"It said: {SECRET[4:60]}",
        claims=(
            {"text": SECRET, "cited": ["HR-7@1#2"], "verdict": "unsupported"},
            {"text": "Ask support.", "cited": [], "verdict": "supported"},
        ),
    )
    built = build_annotations(quoting, SPAN, VOCABULARY)
    assert built.problems == ()
    by_name = {a.name: a for a in built.annotations}
    assert by_name["workbench.verdict"].label == "unsupported_answer"
    assert [by_name[f"workbench.claim.{n}"].label for n in (1, 2)] == ["unsupported", "supported"]
    sent = json.dumps([a.payload() for a in built.annotations])
    assert not clearance.word_runs(sent) & clearance.word_runs(SECRET)
    assert "HR-7" not in sent and "Ask support" not in sent
    assert by_name["workbench.verdict"].explanation == clearance.REDACTED
    # an empty note stays empty (nothing to withhold)
    empty = build_annotations(facts(restricted=True, notes="", claims=()), SPAN, VOCABULARY)
    assert empty.annotations[0].explanation == ""


def test_withholding_changes_the_digest_so_phoenix_gets_the_placeholder_over_the_note() -> None:
    """A document restricted after a push: the next push's annotation differs, so the note
    Phoenix holds is replaced (the identifier and name stay the same)."""
    before = build_annotations(facts(), SPAN, VOCABULARY).annotations[0]
    after = build_annotations(facts(restricted=True), SPAN, VOCABULARY).annotations[0]
    assert (before.name, before.identifier) == (after.name, after.identifier)
    assert before.digest != after.digest
