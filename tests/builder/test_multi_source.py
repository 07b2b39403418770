"""Issue 35, items 1 and 2: the builder on evidence from several documents, and on passages
imported as one long line.

Item 1: a multi-hop question has 3-9 answer-bearing passages. One edit takes the answer out of
every decisive document (or a chosen set), one edit record per document with the same
provenance and edit group; the suggestion and the family check account for every decisive
document.

Item 2: "Swap the year" on a passage stored as one line gave no preview for a minute (the
word diff of the whole line was quadratic) and its two candidates read the same ("line 1:
2018"). Candidates are now told apart by their context and a diff's work and size are bounded.
"""

from __future__ import annotations

import copy
import dataclasses
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, func, select

from review.builder import diffs, documents, family_view, forms, tables, variants
from review.builder.edits import OPERATORS
from review.builder.families import (
    DocEdit,
    derive_conflicted,
    derive_edited,
    derive_forbidden,
    derive_removed,
    present_variant,
)
from review.builder.family_checks import family_checks
from review.builder.operator import Span
from review.cases import cases
from review.core.errors import InputError, PermissionDenied
from review.core.identity import SYSTEM
from review.core.taxonomy import Taxonomy, load_taxonomy
from review.corpus import corpus
from review.corpus.docformat import parse_markdown
from storage.db import read_session
from storage.models import AuditLog, Case, CaseEdit, Document
from tests.helpers.actors import make_actor
from tests.helpers.paths import ROOT
from tests.helpers.transact import write

TAX = load_taxonomy(ROOT / "policies" / "taxonomy.yaml")
CITIES = ["Moscow", "Paris", "Berlin", "Rome", "Madrid", "Vienna", "Prague", "Lisbon", "Oslo"]


def answer(i: int) -> str:
    return f"Source {i} states that the 2018 final was played in {CITIES[i]} before a full house."


def hop_doc(i: int, scope: str = "public", twice: bool = False) -> Any:
    """One answer-bearing passage of a multi-hop question (HOP-<i>)."""
    text = answer(i) + (f" Again: {answer(i)}" if twice else "")
    return parse_markdown(
        f"---\ndoc_id: HOP-{i}\nversion: 1\ntitle: Hop {i}\nauthority: faq\nowner: Ops\n"
        f"access_scope: {scope}\njurisdiction: global\n---\n# Hop {i}\n\n"
        f"What happened in 2018?\n\n{text}\n\nThe rest is about the group stage.\n",
        f"hop{i}.md",
        TAX,
    )


def hop_case(n: int, scopes: tuple[str, ...] = ("public",)) -> dict[str, Any]:
    return {
        "key": f"HOP-CASE-{n}",
        "question": "Where was the 2018 final played?",
        "required_claims": ["The 2018 final was played in Moscow."],
        "identity": {"name": "customer", "scopes": list(scopes)},
        "documents": [
            {"doc_id": f"HOP-{i}", "version": 1, "visibility": "visible", "role": "decisive"}
            for i in range(n)
        ],
        "expected_decision": "answer",
        "reason_codes": [],
        "category": "in_scope",
        "slices": [],
        "split": "train",
        "family": f"FAM-HOP-{n}",
        "evidence_state": "present",
        "status": "ready",
    }


def hop_dicts(n: int, twice: int | None = None) -> list[dict[str, Any]]:
    return [hop_doc(i, twice=i == twice).model_dump() for i in range(n)]


def answer_span(body: str, i: int) -> Span:
    return next(s for s in OPERATORS["remove_answer"].candidates(body) if answer(i) in s.text)


def edit_all(n: int, keep: int = 0, twice: int | None = None) -> Any:
    """Remove the answer from the first ``n - keep`` of ``n`` decisive documents, one edit."""
    docs = hop_dicts(n, twice)
    spans = [answer_span(d["body"], i) for i, d in enumerate(docs)]
    also = [DocEdit(f"HOP-{i}", spans[i]) for i in range(1, n - keep)]
    v = derive_edited(
        copy.deepcopy(hop_case(n)),
        docs,
        operator="remove_answer",
        span=spans[0],
        doc_id="HOP-0",
        also=also,
    )
    present = present_variant(hop_case(n), passage=answer(0))
    return v, family_checks([present, v], docs)


WORDS = ["the", "final", "of", "2018", "was", "played", "in", "Moscow", "14 days", "Team", "."]


def one_line(words: int, seed: int = 1) -> str:
    rng = random.Random(seed)
    return "2018 " + " ".join(rng.choice(WORDS) for _ in range(words)) + " in 2018 again."


# ------------------------------------------------------------------------------------------
# Item 2: candidates told apart, diffs bounded


def test_two_years_on_line_one_get_different_labels_with_their_words() -> None:
    body = "2018 World Cup: the final of 2018 was played in Moscow.\n\n2018\n"
    spans = OPERATORS["swap_year"].candidates(body)
    assert [forms.span_label(body, s) for s in spans][:2] == ["line 1: 2018", "line 1: 2018"]
    labels = forms.span_labels(body, spans)
    assert labels == [
        "line 1: 2018 · «2018» World Cup: the final of 2018 was…",
        "line 1: 2018 · 2018 World Cup: the final of «2018» was played in Moscow.",
        "line 3: 2018 · «2018»",
    ]


def test_the_same_words_twice_on_a_line_say_where_they_start() -> None:
    body = "Team 2018 Team 2018 Team 2018 Team"
    spans = OPERATORS["replace_tier"].candidates(body)
    labels = forms.span_labels(body, spans)
    assert len(set(labels)) == len(labels) == 4
    # a long sentence needs no context: its words tell it apart
    long = "The final of the tournament was played in Moscow on 15 July."
    assert forms.span_labels(long, [Span(0, len(long), long)]) == [f"line 1: {long}"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["2018", "2019", "Team", "x", "\n", "14 days"]), max_size=40))
def test_candidate_labels_are_always_unique(tokens: list[str]) -> None:
    body = " ".join(tokens)
    for name in ("swap_year", "replace_tier", "change_unit"):
        spans = OPERATORS[name].candidates(body)
        labels = forms.span_labels(body, spans)
        assert len(set(labels)) == len(labels), (name, body)


def test_an_operator_without_candidates_says_what_it_looks_for() -> None:
    assert forms.no_candidates("swap_year", "WC-2018@1") == (
        "Swap the year finds no year (1900-2099) standing as a word of its own in WC-2018@1, "
        "so it has nothing to preview here: choose another document or operator, or type the "
        "offsets of a span by hand (Custom offsets…)."
    )
    for name, op in OPERATORS.items():
        assert op.finds != "place to edit", name  # each operator names what it looks for


def test_a_change_in_a_long_line_is_shown_with_the_words_around_it() -> None:
    body = one_line(20_000)  # about 115,000 characters on line 1
    span = OPERATORS["swap_year"].candidates(body)[-1]
    pv = diffs.preview(body, "swap_year", span.start, span.end, {"to_year": 2017})
    (row,) = pv.rows
    assert row.change == "changed" and row.after.endswith(" in {+2017+} again.")
    assert row.before.startswith("…") and len(row.before) <= diffs.CONTEXT_CHARS + 40
    assert len(pv.before_excerpt) < 400 and len(pv.after_excerpt) < 400


def test_a_line_rewritten_whole_is_marked_whole_without_a_word_diff() -> None:
    a = " ".join(f"a{i}" for i in range(3_000))
    b = " ".join(f"b{i}" for i in range(3_000))
    before, after = diffs.mark_changes(a, b)
    assert before == f"[-{a}-]" and after == f"{{+{b}+}}"
    rows = diffs.diff_rows(f"same\n{a}\n{'x ' * 500}", f"same\n{b}\n{'x ' * 500}")
    assert rows[-1].change == "same" and rows[-1].before.endswith("…")
    assert len(rows[-1].before) <= 2 * diffs.CONTEXT_CHARS + 1


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "b", "2018", " ", ".", "Team", "x y"]), max_size=30),
    st.lists(st.sampled_from(["a", "b", "2019", " ", ".", "Business", "z"]), max_size=30),
)
def test_short_lines_are_marked_whole_and_unmarking_gives_them_back(
    left: list[str], right: list[str]
) -> None:
    a, b = "".join(left), "".join(right)
    before, after = diffs.mark_changes(a, b)
    assert before.replace("[-", "").replace("-]", "") == a
    assert after.replace("{+", "").replace("+}", "") == b


# ------------------------------------------------------------------------------------------
# Item 1: one edit over every decisive document (pure)


@pytest.mark.parametrize("n", [1, 3, 9])
def test_one_edit_of_every_decisive_document_suggests_abstain_and_passes(n: int) -> None:
    v, checks = edit_all(n)
    assert (v.suggested_decision, v.evidence_state) == ("abstain", "removed")
    assert len(v.edits) == len(v.new_documents) == n  # one record and one copy per document
    assert {e.operator for e in v.edits} == {"remove_answer"}
    assert [e.doc_id for e in v.edits] == [f"HOP-{i}" for i in range(n)]
    assert all(answer(i) not in d["body"] for i, d in enumerate(v.new_documents))
    assert {d["role"] for d in v.case["documents"]} == {"distractor"}
    assert [c for c in checks if not c.passed] == []
    accounted = [c for c in checks if c.name == "decisive_documents_accounted"]
    if n > 1:
        (c,) = accounted
        assert c.detail.startswith("no decisive document still carries the answer: HOP-0@1, ")
    else:
        assert accounted == []
    if n > 1:
        assert f"One edit of {n} decisive documents." in v.derivation


def test_an_edit_that_leaves_some_decisive_documents_keeps_the_answer_and_names_them() -> None:
    v, checks = edit_all(9, keep=2)
    assert (v.suggested_decision, v.evidence_state) == ("answer", None)
    assert len(v.edits) == 7
    (flag,) = [c for c in checks if not c.passed]
    assert flag.name == "decisive_documents_accounted"
    assert "HOP-7@1, HOP-8@1 still carry the answer" in flag.detail
    assert flag.detail.startswith(
        "HOP-0@1, HOP-1@1, HOP-2@1, HOP-3@1, HOP-4@1, HOP-5@1, HOP-6@1 are"
    )


def test_an_answer_said_twice_in_one_document_is_caught_by_the_family_check() -> None:
    v, checks = edit_all(3, twice=1)  # HOP-1 says it twice: one removal leaves the other
    assert v.suggested_decision == "abstain"  # the operator's suggestion; the check catches it
    failed = [c for c in checks if not c.passed]
    assert [c.name for c in failed] == ["removed_no_passage"]
    assert "is visible in HOP-1-CF-REMOVE-ANSWER@1" in failed[0].detail


def test_a_parameter_that_matches_nothing_in_one_document_names_it_and_derives_nothing() -> None:
    docs = hop_dicts(3)
    years = [OPERATORS["swap_year"].candidates(d["body"])[0] for d in docs]
    with pytest.raises(InputError, match=r"^HOP-0@1: Swap the year: no year 1999 in the span"):
        derive_edited(
            hop_case(3),
            docs,
            operator="swap_year",
            span=years[0],
            params={"to_year": 2017, "from_year": 1999},
            doc_id="HOP-0",
            also=[DocEdit("HOP-1", years[1])],
        )
    no_year = Span(0, 6, docs[1]["body"][:6])  # "# Hop " in the second document
    with pytest.raises(InputError, match=r"^HOP-1@1: Swap the year: no year in the span 0-6"):
        derive_edited(
            hop_case(3),
            docs,
            operator="swap_year",
            span=years[0],
            params={"to_year": 2017},
            doc_id="HOP-0",
            also=[DocEdit("HOP-1", no_year)],
        )
    with pytest.raises(InputError, match="HOP-1@1 is listed twice"):
        derive_edited(
            hop_case(3),
            docs,
            operator="swap_year",
            span=years[0],
            params={"to_year": 2017},
            doc_id="HOP-0",
            also=[DocEdit("HOP-1", years[1]), DocEdit("HOP-1", years[1])],
        )


def test_evidence_removed_over_several_documents_drops_or_edits_each() -> None:
    docs = hop_dicts(3)
    v = derive_removed(
        hop_case(3),
        docs,
        passage=answer(0),
        doc_id="HOP-0",
        also=[DocEdit("HOP-1", answer(1)), DocEdit("HOP-2", None)],
    )
    assert (v.suggested_decision, v.evidence_state) == ("abstain", "removed")
    assert [d["doc_id"] for d in v.case["documents"]] == [
        "HOP-0-CF-REMOVED",
        "HOP-1-CF-REMOVED",
    ]  # HOP-2 left the case
    assert len(v.edits) == 2 and v.decisive_passage == f"{answer(0)}\n{answer(1)}"
    checks = family_checks([present_variant(hop_case(3), passage=answer(0)), v], docs)
    assert [c for c in checks if not c.passed] == []


# ------------------------------------------------------------------------------------------
# Item 1 through the database: the same provenance, one edit group, checks in the family view


def hop_base(engine: Engine, tax: Taxonomy, n: int, restricted: tuple[int, ...] = ()) -> int:
    scopes = ("public", "restricted") if restricted else ("public",)
    corpus.import_documents(
        engine,
        SYSTEM,
        [hop_doc(i, "restricted" if i in restricted else "public") for i in range(n)],
    )
    item = cases.validate_case(hop_case(n, scopes), "hop", 1, tax)
    return write(engine, cases.create_case, SYSTEM, item, tax)


def spec_for(engine: Engine, case_id: int, n: int) -> variants.VariantSpec:
    docs = documents.case_documents(engine, SYSTEM, case_id)
    spans = [answer_span(d.body or "", i) for i, d in enumerate(docs)]
    return variants.VariantSpec(
        "edited",
        doc_ref="HOP-0@1",
        operator="remove_answer",
        start=spans[0].start,
        end=spans[0].end,
        params={},
        also=tuple(
            variants.MoreDoc(f"HOP-{i}@1", spans[i].start, spans[i].end) for i in range(1, n)
        ),
    )


def test_a_saved_edit_of_nine_documents_records_one_group_and_passes_the_checks(
    engine: Engine, tax: Taxonomy
) -> None:
    base_id = hop_base(engine, tax, 9)
    saved = write(
        engine, variants.build_variant, SYSTEM, tax, base_id, spec_for(engine, base_id, 9)
    )
    assert (saved.suggested_decision, saved.evidence_state) == ("abstain", "removed")
    assert len(saved.edit_ids) == len(saved.documents) == 9
    with read_session(engine) as s:
        rows = list(s.scalars(select(CaseEdit).where(CaseEdit.id.in_(saved.edit_ids))))
        derive = s.scalars(
            select(AuditLog).where(AuditLog.entity == "case_variant", AuditLog.action == "derive")
        ).one()
    # the same provenance: operator, params, author, time and edit group; one source each
    assert (
        len({(r.operator, str(r.params), r.author, r.created_at, r.edit_group) for r in rows}) == 1
    )
    assert rows[0].edit_group and len(rows[0].edit_group) == 32
    assert sorted(r.source_doc_key for r in rows) == [f"HOP-{i}" for i in range(9)]
    assert derive.after is not None and len(derive.after["passages"]) == 9
    fam = family_view.family_view(engine, SYSTEM, "FAM-HOP-9")
    assert fam is not None and fam.failed == ()
    row = next(v for v in fam.variants if v.key == saved.key)
    assert {e.group for e in row.edits} == {rows[0].edit_group}
    (line,) = tables.edit_groups(row.edits)
    assert line.startswith("One edit of 9 documents: Remove the answer on HOP-0@1, HOP-1@1")


def test_documents_only_share_the_group_and_a_refusal_saves_nothing(
    engine: Engine, tax: Taxonomy
) -> None:
    base_id = hop_base(engine, tax, 3)
    docs = documents.case_documents(engine, SYSTEM, base_id)
    spans = [answer_span(d.body or "", i) for i, d in enumerate(docs)]
    triples = [(d.ref, sp.start, sp.end) for d, sp in zip(docs, spans, strict=True)]
    saved = write(engine, documents.save_edits, SYSTEM, tax, triples, "remove_answer", {})
    with read_session(engine) as s:
        groups = {
            s.get(CaseEdit, e.edit_id).edit_group  # type: ignore[union-attr]
            for e in saved
        }
    assert len(saved) == 3 and len(groups) == 1 and None not in groups
    with read_session(engine) as s:
        before = s.scalar(select(func.count(Document.id)))
    bad = [*triples[:2], ("HOP-2@1", 0, 4)]  # "# Ho": no answer text in that span
    with pytest.raises(InputError, match=r"^HOP-2@1: Remove the answer: no answer text"):
        write(engine, documents.save_edits, SYSTEM, tax, bad, "remove_answer", {})
    with read_session(engine) as s:
        assert s.scalar(select(func.count(Document.id))) == before


def test_a_restricted_decisive_document_needs_clearance(engine: Engine, tax: Taxonomy) -> None:
    base_id = hop_base(engine, tax, 3, restricted=(2,))
    spec = spec_for(engine, base_id, 3)
    annotator = make_actor("annotator")  # no clearance
    with pytest.raises(PermissionDenied, match="HOP-2@1 is restricted"):
        write(engine, variants.build_variant, annotator, tax, base_id, spec)
    docs = documents.case_documents(engine, annotator, base_id)
    offered, hidden = forms.decisive_group(docs, "HOP-0@1")
    assert [d.ref for d in offered] == ["HOP-1@1"] and hidden == ["HOP-2@1"]
    cleared = make_actor("annotator", "cleared@test.example", clearance=True)
    saved = write(engine, variants.build_variant, cleared, tax, base_id, spec)
    assert saved.suggested_decision == "abstain" and len(saved.edit_ids) == 3


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 6).flatmap(lambda n: st.tuples(st.just(n), st.sets(st.integers(0, n - 1)))))
def test_the_suggestion_is_abstain_exactly_when_every_decisive_document_is_edited(
    drawn: tuple[int, set[int]],
) -> None:
    n, extra = drawn
    edited = sorted({0} | extra)  # the first document is always edited
    docs = hop_dicts(n)
    spans = {i: answer_span(docs[i]["body"], i) for i in edited}
    v = derive_edited(
        hop_case(n),
        docs,
        operator="remove_answer",
        span=spans[0],
        doc_id="HOP-0",
        also=[DocEdit(f"HOP-{i}", spans[i]) for i in edited[1:]],
    )
    everything = len(edited) == n
    assert v.suggested_decision == ("abstain" if everything else "answer")
    assert len(v.edits) == len(edited)
    checks = family_checks([present_variant(hop_case(n), passage=answer(0)), v], docs)
    flagged = [c for c in checks if c.name == "decisive_documents_accounted" and not c.passed]
    assert bool(flagged) != everything
    if flagged:
        kept = [f"HOP-{i}@1" for i in range(n) if i not in edited]
        assert f"{', '.join(kept)} still carr" in flagged[0].detail


# ------------------------------------------------------------------------------------------
# Item 1, second round: the forbidden and conflicted variants over several decisive documents


def forbid_all(n: int, keep: int = 0) -> Any:
    """Forbid the first ``n - keep`` of ``n`` decisive documents to the identity, one variant."""
    docs = hop_dicts(n)
    v = derive_forbidden(
        hop_case(n),
        docs,
        passage=answer(0),
        doc_id="HOP-0",
        also=[DocEdit(f"HOP-{i}", answer(i)) for i in range(1, n - keep)],
    )
    return v, family_checks([present_variant(hop_case(n), passage=answer(0)), v], docs)


def contest(
    n: int, which: list[int], mode: str = "unresolved", docs: list[dict[str, Any]] | None = None
) -> Any:
    """A conflicting copy (another year) of each decisive document in ``which`` (HOP-0 first)
    of ``n``, one variant, and the family checks."""
    docs = docs or hop_dicts(n)
    v = derive_conflicted(
        hop_case(n),
        docs,
        passage=answer(0),
        operator="swap_year",
        params={"to_year": 2017},
        mode=mode,  # type: ignore[arg-type]
        doc_id="HOP-0",
        also=[DocEdit(f"HOP-{i}", answer(i)) for i in which[1:]],
    )
    return v, family_checks([present_variant(hop_case(n), passage=answer(0)), v], docs)


def contest_all(n: int, keep: int = 0) -> Any:
    """A conflicting copy of the first ``n - keep`` of ``n`` decisive documents."""
    return contest(n, list(range(n - keep)))


@pytest.mark.parametrize("n", [1, 3, 9])
def test_forbidding_every_decisive_document_suggests_abstain_and_passes(n: int) -> None:
    v, checks = forbid_all(n)
    assert (v.suggested_decision, v.evidence_state) == ("abstain", "forbidden")
    assert v.suggested_reasons == ("source_not_allowed",)
    # public documents cannot be hidden: a restricted copy of each replaces it, forbidden
    assert [d["doc_id"] for d in v.new_documents] == [f"HOP-{i}-CF-RESTRICTED" for i in range(n)]
    assert {d["access_scope"] for d in v.new_documents} == {"restricted"}
    assert {r["visibility"] for r in v.case["documents"]} == {"forbidden"}
    assert "restricted" not in v.case["identity"]["scopes"]
    assert [c for c in checks if not c.passed] == []
    assert all(answer(i) in (v.decisive_passage or "") for i in range(n))
    if n > 1:
        assert v.derivation.startswith(f"{n} decisive documents are kept but forbidden")


def test_forbidding_some_decisive_documents_keeps_the_answer_and_names_the_others() -> None:
    v, checks = forbid_all(9, keep=2)
    assert (v.suggested_decision, v.evidence_state) == ("answer", "forbidden")
    (flag,) = [c for c in checks if not c.passed]
    assert flag.name == "decisive_documents_accounted"
    assert "HOP-7@1, HOP-8@1 still carry the answer" in flag.detail


def test_forbidding_documents_of_two_scopes_takes_both_from_the_identity() -> None:
    docs = [hop_doc(0, "internal").model_dump(), hop_doc(1).model_dump()]
    case = hop_case(2, ("public", "internal"))
    v = derive_forbidden(case, docs, doc_id="HOP-0", also=[DocEdit("HOP-1")])
    assert v.case["identity"]["scopes"] == ["public"]
    assert v.case["identity"]["name"] == "customer (without internal access)"
    assert [r["doc_id"] for r in v.case["documents"]] == ["HOP-0", "HOP-1-CF-RESTRICTED"]
    with pytest.raises(InputError, match="would leave the identity with no scope"):
        derive_forbidden(
            hop_case(2, ("internal",)),
            [hop_doc(0, "internal").model_dump(), hop_doc(1, "internal").model_dump()],
            doc_id="HOP-0",
            also=[DocEdit("HOP-1")],
        )


@pytest.mark.parametrize("n", [1, 3, 9])
def test_contesting_every_decisive_document_suggests_abstain_and_passes(n: int) -> None:
    v, checks = contest_all(n)
    assert (v.suggested_decision, v.evidence_state) == ("abstain", "conflicted")
    assert v.suggested_reasons == ("conflicting_evidence",)
    assert len(v.edits) == len(v.new_documents) == n  # one copy and one record per document
    assert [e.doc_id for e in v.edits] == [f"HOP-{i}" for i in range(n)]
    assert all("2017 final" in d["body"] for d in v.new_documents)
    copies = [r for r in v.case["documents"] if r["doc_id"].endswith("-CF-CONFLICT")]
    assert len(copies) == n and {r["role"] for r in copies} == {"decisive"}
    assert [c for c in checks if not c.passed] == []
    accounted = [c for c in checks if c.name == "decisive_documents_accounted"]
    if n > 1:
        assert f"One edit of {n} decisive documents." in v.derivation
        (c,) = accounted
        assert c.detail.startswith("no decisive document settles the answer alone: HOP-0@1, ")
    else:
        assert accounted == []


def test_an_unresolved_conflict_that_leaves_a_decisive_document_keeps_the_answer() -> None:
    v, checks = contest_all(9, keep=2)
    assert (v.suggested_decision, v.evidence_state) == ("answer", "conflicted")
    assert "HOP-7@1, HOP-8@1 are not contested and still settle the answer" in v.derivation
    (flag,) = [c for c in checks if not c.passed]
    assert flag.name == "decisive_documents_accounted"
    assert "HOP-7@1, HOP-8@1 still carry the answer uncontested" in flag.detail
    assert flag.detail.startswith("HOP-0@1, HOP-1@1, HOP-2@1, HOP-3@1, HOP-4@1, HOP-5@1, HOP-6@1")


@pytest.mark.parametrize("mode", ["older_version", "lower_authority"])
def test_a_conflict_the_originals_control_leaves_every_decisive_document_usable(
    mode: str,
) -> None:
    docs = hop_dicts(3)
    for d in docs:
        d["effective_date"] = "2024-05-01"
        d["authority"] = "policy"
    v, checks = contest(3, [0, 1], mode, docs)
    assert v.suggested_decision == "answer" and len(v.edits) == 2
    (c,) = [c for c in checks if c.name == "decisive_documents_accounted"]
    assert c.passed
    assert c.detail == (
        "3 decisive documents still control the answer here: HOP-0@1, HOP-1@1, HOP-2@1 "
        "(each controls its conflicting copy: HOP-0@1, HOP-1@1)"
    )


def test_a_conflicting_copy_of_several_documents_needs_each_passage() -> None:
    docs = hop_dicts(3)
    with pytest.raises(InputError, match=r"^HOP-1@1: derive_conflicted needs the passage"):
        derive_conflicted(
            hop_case(3),
            docs,
            passage=answer(0),
            operator="swap_year",
            params={"to_year": 2017},
            mode="unresolved",
            doc_id="HOP-0",
            also=[DocEdit("HOP-1")],
        )
    with pytest.raises(InputError, match=r"^HOP-2@1: Swap the year: no year in the span"):
        derive_conflicted(
            hop_case(3),
            docs,
            passage=answer(0),
            operator="swap_year",
            params={"to_year": 2017},
            mode="unresolved",
            doc_id="HOP-0",
            also=[DocEdit("HOP-2", "The rest is about the group stage.")],
        )


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 6).flatmap(lambda n: st.tuples(st.just(n), st.sets(st.integers(0, n - 1)))))
def test_an_unresolved_conflict_suggests_abstain_exactly_when_every_decisive_one_is_contested(
    drawn: tuple[int, set[int]],
) -> None:
    n, extra = drawn
    contested = sorted({0} | extra)
    v, checks = contest(n, contested)
    everything = len(contested) == n
    assert v.suggested_decision == ("abstain" if everything else "answer")
    flagged = [c for c in checks if c.name == "decisive_documents_accounted" and not c.passed]
    assert bool(flagged) != everything
    if flagged:
        free = [f"HOP-{i}@1" for i in range(n) if i not in contested]
        assert f"{', '.join(free)} still carr" in flagged[0].detail


def state_spec(
    engine: Engine, case_id: int, n: int, kind: str, **more: Any
) -> variants.VariantSpec:
    """An evidence-state variant (kind) over the first ``n`` decisive documents, at each
    answer passage."""
    docs = documents.case_documents(engine, SYSTEM, case_id)
    spans = [answer_span(d.body or "", i) for i, d in enumerate(docs)]
    return variants.VariantSpec(
        kind,  # type: ignore[arg-type]
        doc_ref="HOP-0@1",
        start=spans[0].start,
        end=spans[0].end,
        also=tuple(
            variants.MoreDoc(f"HOP-{i}@1", spans[i].start, spans[i].end) for i in range(1, n)
        ),
        **more,
    )


def conflict_spec(engine: Engine, case_id: int, n: int) -> variants.VariantSpec:
    """An unresolved conflict (another year) over the first ``n`` decisive documents."""
    return state_spec(
        engine,
        case_id,
        n,
        "conflicted",
        operator="swap_year",
        params={"to_year": 2017},
        mode="unresolved",
    )


def counts(engine: Engine) -> tuple[int, int, int]:
    with read_session(engine) as s:
        return (
            int(s.scalar(select(func.count(Document.id))) or 0),
            int(s.scalar(select(func.count(Case.id))) or 0),
            int(s.scalar(select(func.count(CaseEdit.id))) or 0),
        )


def test_a_saved_conflict_over_three_documents_records_one_group_and_passes_the_checks(
    engine: Engine, tax: Taxonomy
) -> None:
    base_id = hop_base(engine, tax, 3)
    spec = conflict_spec(engine, base_id, 3)
    preview = variants.preview_variant(engine, SYSTEM, base_id, spec)
    assert [c.source for c in preview.changes] == ["HOP-0@1", "HOP-1@1", "HOP-2@1"]
    assert all(
        c.outcome.startswith(f"copy HOP-{i}-CF-1@1 (visible, decisive)")
        for i, c in enumerate(preview.changes)
    )
    assert all("{+2017+}" in c.after_excerpt for c in preview.changes)
    assert counts(engine)[2] == 0  # a preview writes nothing
    saved = write(engine, variants.build_variant, SYSTEM, tax, base_id, spec)
    assert (saved.suggested_decision, saved.evidence_state) == ("abstain", "conflicted")
    assert len(saved.edit_ids) == len(saved.documents) == 3
    with read_session(engine) as s:
        rows = list(s.scalars(select(CaseEdit).where(CaseEdit.id.in_(saved.edit_ids))))
    assert (
        len({(r.operator, str(r.params), r.author, r.created_at, r.edit_group) for r in rows}) == 1
    )
    fam = family_view.family_view(engine, SYSTEM, "FAM-HOP-3")
    assert fam is not None and fam.failed == ()
    (check,) = [
        c for c in fam.checks if c.name == "decisive_documents_accounted" and c.variant == saved.key
    ]
    assert check.detail.startswith("no decisive document settles the answer alone")
    row = next(v for v in fam.variants if v.key == saved.key)
    (line,) = tables.edit_groups(row.edits)
    assert line.startswith("One edit of 3 documents: Swap the year on HOP-0@1, HOP-1@1, HOP-2@1")


def test_a_family_check_names_the_decisive_documents_a_saved_conflict_leaves(
    engine: Engine, tax: Taxonomy
) -> None:
    base_id = hop_base(engine, tax, 3)
    spec = conflict_spec(engine, base_id, 2)
    saved = write(engine, variants.build_variant, SYSTEM, tax, base_id, spec)
    assert saved.suggested_decision == "answer"
    fam = family_view.family_view(engine, SYSTEM, "FAM-HOP-3")
    assert fam is not None
    (flag,) = fam.failed
    assert "HOP-2@1 still carries the answer uncontested" in flag.detail


@pytest.mark.parametrize("kind", ["forbidden", "conflicted"])
def test_a_restricted_decisive_document_needs_clearance_and_nothing_is_written(
    engine: Engine, tax: Taxonomy, kind: str
) -> None:
    base_id = hop_base(engine, tax, 3, restricted=(2,))
    spec = conflict_spec(engine, base_id, 3) if kind == "conflicted" else None
    spec = spec or state_spec(engine, base_id, 3, kind)
    before = counts(engine)
    annotator = make_actor("annotator")  # no clearance
    with pytest.raises(PermissionDenied, match="HOP-2@1 is restricted"):
        write(engine, variants.build_variant, annotator, tax, base_id, spec)
    with pytest.raises(PermissionDenied, match="HOP-2@1 is restricted"):
        variants.preview_variant(engine, annotator, base_id, spec)
    assert counts(engine) == before
    cleared = make_actor("annotator", "cleared@test.example", clearance=True)
    saved = write(engine, variants.build_variant, cleared, tax, base_id, spec)
    assert (saved.evidence_state, saved.suggested_decision) == (kind, "abstain")
    # a restricted document is forbidden as it is; a public one through a restricted copy
    assert len(saved.documents) == (2 if kind == "forbidden" else 3)


def test_a_saved_forbidden_variant_of_nine_documents_passes_the_checks(
    engine: Engine, tax: Taxonomy
) -> None:
    base_id = hop_base(engine, tax, 9)
    spec = state_spec(engine, base_id, 9, "forbidden")
    preview = variants.preview_variant(engine, SYSTEM, base_id, spec)
    assert [c.outcome for c in preview.changes][:1] == [
        "replaced by a copy HOP-0-CF-1@1 in scope 'restricted', forbidden"
    ]
    saved = write(engine, variants.build_variant, SYSTEM, tax, base_id, spec)
    assert (saved.suggested_decision, saved.evidence_state) == ("abstain", "forbidden")
    assert len(saved.documents) == 9
    fam = family_view.family_view(engine, SYSTEM, "FAM-HOP-9")
    assert fam is not None and fam.failed == ()


# ------------------------------------------------------------------------------------------
# Item 1, second round: an edit of several documents saved as their next versions


def test_an_edit_of_three_documents_saved_as_next_versions_gives_each_its_next_version(
    engine: Engine, tax: Taxonomy
) -> None:
    base_id = hop_base(engine, tax, 3)
    spec = dataclasses.replace(spec_for(engine, base_id, 3), as_new_version=True)
    saved = write(engine, variants.build_variant, SYSTEM, tax, base_id, spec)
    assert saved.documents == ("HOP-0@2", "HOP-1@2", "HOP-2@2")
    assert "HOP-0-CF" not in saved.derivation and "HOP-0@2" in saved.derivation
    with read_session(engine) as s:
        rows = list(s.scalars(select(CaseEdit).where(CaseEdit.id.in_(saved.edit_ids))))
        assert sorted(r.record["result_ref"] for r in rows) == ["HOP-0@2", "HOP-1@2", "HOP-2@2"]
        assert len({r.edit_group for r in rows}) == 1
    assert saved.suggested_decision == "abstain"


def test_next_versions_are_refused_for_all_when_one_source_is_not_the_newest(
    engine: Engine, tax: Taxonomy
) -> None:
    base_id = hop_base(engine, tax, 3)
    spec = dataclasses.replace(spec_for(engine, base_id, 3), as_new_version=True)
    newer = hop_doc(1).model_copy(update={"version": 2})
    corpus.import_documents(engine, SYSTEM, [newer])
    before = counts(engine)
    with pytest.raises(InputError, match=r"not the newest: HOP-1@1 \(the newest is HOP-1@2\)"):
        write(engine, variants.build_variant, SYSTEM, tax, base_id, spec)
    assert counts(engine) == before
