"""A required claim's kind stored on the case (issue 35, item 3): what kind of fact it states,
so the no-answer policy's freshness rule for that kind applies. Carried by the JSONL format,
the Cases form and the builder's claims, and used by the Thresholds page's evidence gate and
the builder's suggestions of stale evidence; a case without kinds behaves as before."""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, select

from review.builder import suggestions, tables
from review.builder.family_view import ClaimMark
from review.builder.operator import Suggestion
from review.cases import cases
from review.cases import form as case_form
from review.cli.main import main
from review.core.clearance import case_record
from review.core.errors import InputError
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy
from review.corpus import corpus
from review.corpus.docformat import parse_markdown
from review.policy import inforce
from review.thresholds import casegate
from storage.db import read_session
from storage.models import CaseClaim
from tests.helpers.actors import make_actor
from tests.helpers.corpus import GOOD
from tests.helpers.transact import write

HISTORY = "Monthly plans had a 14-day refund window in March 2025."
PRICE = "The Team plan costs 12 euros a month."
STALE = Suggestion("abstain", ("evidence_stale",), ("temporal_mismatch",))


def case(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "key": "CASE-K1",
        "question": "How long was the refund window for monthly plans in March 2025?",
        "required_claims": [HISTORY, PRICE],
        "claim_kinds": {HISTORY: "historical", PRICE: "current_price"},
        "identity": {"name": "customer-eu", "scopes": ["public"]},
        "documents": [
            {"doc_id": "POL-REFUND", "version": 2, "visibility": "visible", "role": "decisive"}
        ],
        "expected_decision": "answer",
        "expected_message": None,
        "reason_codes": [],
        "category": "in_scope",
        "slices": [],
        "split": "test",
        "family": None,
        "evidence_state": None,
        "language": None,
        "status": "ready",
        "notes": "",
    }
    base.update(over)
    return base


@pytest.fixture
def seeded(engine: Engine, tax: Taxonomy, admin: Actor) -> Engine:
    corpus.import_documents(engine, admin, [parse_markdown(GOOD, "a.md", tax)])
    return engine


def _import(engine: Engine, admin: Actor, tax: Taxonomy, *items: dict[str, Any]) -> None:
    parsed = list(cases.iter_cases_jsonl([json.dumps(i) for i in items], "c.jsonl", tax))
    write(engine, cases.import_cases, admin, parsed, "c.jsonl")


def _exported(engine: Engine, admin: Actor) -> list[dict[str, Any]]:
    out = io.StringIO()
    cases.export_cases(engine, out, viewer=admin)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_kinds_are_stored_per_claim_and_round_trip_exactly(
    seeded: Engine, tax: Taxonomy, admin: Actor
) -> None:
    _import(seeded, admin, tax, case(), case(key="CASE-K2", claim_kinds={PRICE: "current_price"}))
    with read_session(seeded) as s:
        stored = s.execute(select(CaseClaim.text, CaseClaim.kind).order_by(CaseClaim.id)).all()
    assert [tuple(r) for r in stored] == [
        (HISTORY, "historical"),
        (PRICE, "current_price"),
        (HISTORY, None),
        (PRICE, "current_price"),
    ]
    records = _exported(seeded, admin)
    assert records[0]["claim_kinds"] == {HISTORY: "historical", PRICE: "current_price"}
    assert records[1]["claim_kinds"] == {PRICE: "current_price"}
    view = cases.get_case(seeded, key="CASE-K1")
    assert view is not None and view.claim_kinds == ("historical", "current_price")
    # importing the export again changes nothing (the round trip is exact)
    again = list(cases.iter_cases_jsonl([json.dumps(r) for r in records], "again", tax))
    assert write(seeded, cases.import_cases, admin, again, "again").unchanged == 2


def test_a_case_without_kinds_reads_and_exports_as_before(
    seeded: Engine, tax: Taxonomy, admin: Actor
) -> None:
    plain = case()
    del plain["claim_kinds"]
    _import(seeded, admin, tax, plain, case(key="CASE-K2", claim_kinds={HISTORY: None}))
    records = _exported(seeded, admin)
    assert all("claim_kinds" not in r for r in records)
    assert {k: v for k, v in records[0].items() if k != "agreed"} == plain


@pytest.mark.parametrize(
    ("kinds", "expected"),
    [
        ({HISTORY: "eternal"}, "field claim_kinds.0: 'eternal' is not one of: historical"),
        ({PRICE: "<img src=x onerror=alert(1)>"}, "field claim_kinds.1: '<img src=x"),
        ({PRICE: "Historical"}, "field claim_kinds.1: 'Historical' is not one of"),
        ({"A claim the case does not make.": "historical"}, "field claim_kinds: 'A claim the"),
        ({HISTORY: 7}, "field claim_kinds."),
        ({HISTORY: ["historical"]}, "field claim_kinds."),
        ({HISTORY: "k" * 61}, "field claim_kinds."),
        (["historical", "current_price"], "field claim_kinds"),
    ],
)
def test_an_unknown_or_hostile_kind_is_refused_with_line_and_field_and_nothing_is_written(
    seeded: Engine, tax: Taxonomy, admin: Actor, kinds: Any, expected: str
) -> None:
    lines = [json.dumps(case(key="CASE-OK")), json.dumps(case(claim_kinds=kinds))]
    with pytest.raises(InputError) as info:
        items = list(cases.iter_cases_jsonl(lines, "c.jsonl", tax))
        write(seeded, cases.import_cases, admin, items, "c.jsonl")
    assert str(info.value).startswith("c.jsonl: line 2:")
    assert expected in str(info.value)
    assert cases.count_cases(seeded, cases.CaseFilter()) == 0


def test_the_command_line_import_refuses_an_unknown_kind_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    run = CliRunner().invoke
    assert run(main, ["migrate"]).exit_code == 0
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text(GOOD, encoding="utf-8")
    assert run(main, ["import-docs", str(docs)]).exit_code == 0
    bad = tmp_path / "cases.jsonl"
    bad.write_text(
        json.dumps(case(key="CASE-OK")) + "\n" + json.dumps(case(claim_kinds={HISTORY: "x"})),
        encoding="utf-8",
    )
    r = run(main, ["import-cases", str(bad)])
    assert r.exit_code == 1
    assert "line 2: field claim_kinds.0: 'x' is not one of: historical, current_price" in r.output
    out = tmp_path / "out.jsonl"
    assert run(main, ["export-cases", str(out)]).exit_code == 0
    assert out.read_text(encoding="utf-8") == ""


def test_a_redacted_record_does_not_carry_the_claims_text_in_its_kinds() -> None:
    record = case()
    hidden = case_record(make_actor("annotator"), record, restricted=True)
    assert HISTORY not in json.dumps(hidden) and "claim_kinds" not in hidden


def test_the_form_writes_a_kind_at_the_end_of_a_claim_line(tax: Taxonomy) -> None:
    start = case_form.form_start(case())
    assert start.claims == f"{HISTORY} [kind: historical]\n{PRICE} [kind: current_price]"
    claims, kinds = case_form.parse_claim_lines(
        f"  {HISTORY}   [Kind:  historical ]\n\n{PRICE}\nA third one [kind: ]\n"
    )
    assert claims == [HISTORY, PRICE, "A third one"]
    assert kinds == {HISTORY: "historical"}
    assert case_form.parse_claims(f"{HISTORY} [kind: historical]") == [HISTORY]
    values = case_form.FormValues(
        key="CASE-F",
        question="How long was the refund window?",
        claims=f"{HISTORY} [kind: bogus]",
        identity_name="customer",
        identity_scopes=["public"],
        documents=[],
        expected_decision="answer",
        category="in_scope",
        split="test",
    )
    with pytest.raises(InputError, match=r"claim_kinds.0: 'bogus' is not one of"):
        case_form.validate_form(values, tax)
    ok = case_form.validate_form(
        case_form.FormValues(**{**values.__dict__, "claims": f"{HISTORY} [kind: historical]"}),
        tax,
    )
    assert ok.claim_kinds == {HISTORY: "historical"}
    assert "historical (historical fact)" in case_form.kinds_help(tax)


def test_the_builders_claims_keep_their_kinds_and_take_new_ones(
    seeded: Engine, tax: Taxonomy, admin: Actor
) -> None:
    _import(seeded, admin, tax, case())
    view = cases.get_case(seeded, key="CASE-K1")
    assert view is not None
    # a claim kept keeps its kind; a new one has none
    v2 = write(
        seeded, suggestions.set_required_claims, admin, tax, view.id, 1, [HISTORY, "New claim."]
    )
    after = cases.get_case(seeded, key="CASE-K1")
    assert after is not None and after.claim_kinds == ("historical", None)
    # the expert gives kinds as they write the claims
    write(
        seeded,
        suggestions.set_required_claims,
        admin,
        tax,
        view.id,
        v2,
        ["New claim.", PRICE],
        {"New claim.": "historical", PRICE: "current_price"},
    )
    last = cases.get_case(seeded, key="CASE-K1")
    assert last is not None and last.claim_kinds == ("historical", "current_price")
    with pytest.raises(InputError, match=r"claim_kinds\.0: 'forever' is not one of"):
        write(
            seeded,
            suggestions.set_required_claims,
            admin,
            tax,
            view.id,
            last.version,
            ["New claim."],
            {"New claim.": "forever"},
        )


def test_the_evidence_gate_starts_from_the_cases_kinds(
    seeded: Engine, tax: Taxonomy, admin: Actor
) -> None:
    """The shipped policy: no age limit for a historical claim, 30 days for a current price,
    365 days otherwise. The passage is from 2025-03-01; asked about in 2027."""
    plain = case(key="CASE-K0")
    del plain["claim_kinds"]
    _import(seeded, admin, tax, case(claim_kinds={HISTORY: "historical"}), plain)
    policy = inforce.in_force(seeded).policy
    reviewer = make_actor("product_owner")
    later = dt.date(2027, 1, 1)

    def decided(key: str) -> tuple[list[str | None], Any]:
        inp = casegate.case_input(seeded, reviewer, key)
        rows = casegate.passage_rows(inp)
        rows[0]["support_score"] = 0.9
        done = casegate.input_from_rows(inp, rows, as_of=later)
        return [c.kind for c in inp.required_claims], casegate.decide_case(done, policy)

    kinds, state = decided("CASE-K1")
    assert kinds == ["historical", None]
    assert list(state.stale_evidence) == ["c2"]  # the historical claim is not stale
    assert "rule: global max_age_days" in state.stale_evidence["c2"]
    assert casegate.claim_kinds(policy, casegate.case_input(seeded, reviewer, "CASE-K1")) == [
        "current_price",
        "historical",
    ]
    # a case without kinds: every claim under the global limit, as before
    kinds, state = decided("CASE-K0")
    assert kinds == [None, None] and sorted(state.stale_evidence) == ["c1", "c2"]


def test_the_builders_stale_note_gives_each_claims_limit_from_its_kind() -> None:
    from review.policy.policy import load_policy
    from tests.helpers.paths import ROOT

    policy = load_policy(ROOT / "policies" / "no-answer-policy.yaml")
    note = suggestions.freshness_note(policy, "policy", STALE, ("historical", None))
    assert note is not None
    assert "claim 1 (kind 'historical'): no age limit (claim kind 'historical')" in note
    assert "claim 2 (no kind): 365 days (global max_age_days)" in note
    # no kind on any claim: the limit per kind the rules name, as before
    before = suggestions.freshness_note(policy, "policy", STALE, (None, None))
    assert before == suggestions.freshness_note(policy, "policy", STALE)
    assert before is not None and "a claim without a kind: 365 days" in before


def test_the_family_views_claims_table_shows_kinds_only_when_a_claim_has_one(
    tax: Taxonomy,
) -> None:
    marks = (ClaimMark(HISTORY, "supported", "historical"), ClaimMark(PRICE, "supported"))
    assert tables.claims_table(marks).to_dict("records") == [
        {"claim": HISTORY, "kind": "historical", "support": "supported"},
        {"claim": PRICE, "kind": "—", "support": "supported"},
    ]
    named = tables.claims_table(marks, tax).to_dict("records")
    assert [r["kind"] for r in named] == ["Historical fact", "—"]
    plain = (ClaimMark(HISTORY, "supported"),)
    assert list(tables.claims_table(plain).columns) == ["claim", "support"]


@settings(max_examples=200, deadline=None)
@given(
    kind=st.one_of(
        st.none(),
        st.sampled_from(["historical", "current_price", " historical ", "", "   "]),
        st.text(max_size=70),
        st.integers(),
        st.floats(allow_nan=True),
        st.booleans(),
    )
)
def test_any_kind_is_taken_as_a_known_kind_as_none_or_refused_naming_the_field(
    tax: Taxonomy, kind: object
) -> None:
    """Whatever a file gives as a claim's kind, the case either has that known kind, has none
    (null or blank), or is refused naming claim_kinds; never another kind, never a crash."""
    try:
        got = cases.validate_case(case(claim_kinds={HISTORY: kind}), "c.jsonl", 4, tax)
    except InputError as exc:
        assert str(exc).startswith("c.jsonl: line 4: field claim_kinds")
        assert not (isinstance(kind, str) and kind.strip() in tax.claim_kinds)
        return
    if isinstance(kind, str) and kind.strip():
        assert kind.strip() in tax.claim_kinds
        assert got.kind_of(HISTORY) == kind.strip()
    else:
        assert kind is None or (isinstance(kind, str) and not kind.strip())
        assert got.kind_of(HISTORY) is None and got.claim_kinds == {}
