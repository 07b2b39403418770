"""Categories drive behaviour (note 004): a category's default decision is the suggestion, a
case expecting another needs a note, and a case expecting a non-answer names the wording key
it expects; runs check the key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from alembic import command
from sqlalchemy import Engine, select, text

from review.cases import cases, display, form
from review.core.errors import InputError
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy
from review.evaluation import evalruns, runmetrics
from storage.db import alembic_config, make_engine, read_session
from storage.models import Case
from tests.helpers.paths import ROOT
from tests.helpers.transact import write


def record(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "question": "How long is the refund window for monthly plans?",
        "identity": {"name": "customer", "scopes": ["public"]},
        "expected_decision": "abstain",
        "reason_codes": ["no_answer_bearing_evidence"],
        "category": "out_of_scope",
        "split": "train",
        "status": "ready",
    }
    base.update(over)
    return base


def check(tax: Taxonomy, **over: Any) -> cases.CaseIn:
    return cases.validate_case(record(**over), "cases.jsonl", 3, tax)


def test_the_taxonomy_suggests_the_wording_key(tax: Taxonomy) -> None:
    # the category's default message when the case expects the category's default decision
    assert tax.expected_message("abstain", "near_miss", ["no_answer_bearing_evidence"]) == "R2"
    assert tax.expected_message("escalate", "restricted_topic", []) == "E1"
    # else the reasons' message the decision allows, in order
    assert tax.expected_message("abstain", "in_scope", ["source_not_allowed"]) == "R1"
    assert tax.expected_message("abstain", "in_scope", ["evidence_stale"]) == "R2"
    # else the decision's only message; an answer has none to suggest
    assert tax.expected_message("clarify", "in_scope", []) == "F1"
    assert tax.expected_message("abstain", "in_scope", []) is None
    assert tax.expected_message("answer", "in_scope", []) is None


def test_every_non_answer_decision_and_category_default_is_consistent(tax: Taxonomy) -> None:
    for key, term in tax.decisions.items():
        if not term.answers:
            assert term.messages, f"{key} lists the wording keys a case may expect"
    for key, cat in tax.categories.items():
        if cat.default_message:
            assert cat.default_message in tax.decisions[cat.default_decision].messages, key


def test_a_bad_default_message_in_the_taxonomy_is_refused(tmp_path: Path) -> None:
    from review.core.errors import WorkbenchError
    from review.core.taxonomy import load_taxonomy

    src = (ROOT / "policies" / "taxonomy.yaml").read_text(encoding="utf-8")
    bad = src.replace("    default_message: E1\n", "    default_message: R1\n", 1)
    assert bad != src
    (tmp_path / "taxonomy.yaml").write_text(bad, encoding="utf-8")
    with pytest.raises(WorkbenchError, match=r"categories\.restricted_topic\.default_message"):
        load_taxonomy(tmp_path / "taxonomy.yaml")


def test_import_fills_the_suggested_key_and_keeps_a_named_one(tax: Taxonomy) -> None:
    assert check(tax).expected_message == "R1"
    assert check(tax, expected_message="R2").expected_message == "R2"
    assert (
        check(
            tax, expected_decision="answer", reason_codes=[], category="in_scope"
        ).expected_message
        is None
    )
    assert (
        check(
            tax,
            expected_decision="answer",
            reason_codes=[],
            category="in_scope",
            expected_message="C1",
        ).expected_message
        == "C1"
    )


@pytest.mark.parametrize(
    ("over", "field", "says"),
    [
        # another decision than the category's default needs a note saying why
        (
            {"category": "in_scope"},
            "notes",
            "category 'in_scope' expects 'answer' by default",
        ),
        # a key the decision does not use
        ({"expected_message": "E1"}, "expected_message", "'E1' is not a message for 'abstain'"),
        (
            {
                "expected_decision": "answer",
                "reason_codes": [],
                "category": "in_scope",
                "expected_message": "R1",
            },
            "expected_message",
            "one of: C1",
        ),
        # a ready non-answer with no suggestion must name its key
        (
            {"category": "in_scope", "reason_codes": ["false_premise"], "notes": "why"},
            "expected_message",
            "names the wording it expects (one of: R1, R2, R3)",
        ),
    ],
)
def test_bad_cases_are_refused_with_line_and_field(
    tax: Taxonomy, over: dict[str, Any], field: str, says: str
) -> None:
    with pytest.raises(InputError, match=rf"cases\.jsonl: line 3: field {field}: .*") as err:
        check(tax, **over)
    assert says in str(err.value)


def test_a_draft_may_leave_the_key_for_later_and_a_note_allows_a_mismatch(tax: Taxonomy) -> None:
    draft = check(
        tax, category="in_scope", reason_codes=["false_premise"], notes="why", status="draft"
    )
    assert draft.expected_message is None
    noted = check(tax, category="in_scope", notes="The refund table was removed on purpose.")
    assert noted.expected_message == "R1"


def test_the_form_suggests_the_category_default(tax: Taxonomy) -> None:
    start = form.form_start({"status": "draft"})
    assert (start.expected_decision, start.expected_message) == ("", "")
    values = form.FormValues(
        key=None,
        question="Which court handles our dispute with the vendor?",
        claims="",
        identity_name="customer",
        identity_scopes=["public"],
        documents=[],
        expected_decision="",  # the category's default
        category="restricted_topic",
        split="train",
        reason_codes=["restricted_topic"],
        status="ready",
    )
    case = form.validate_form(values, tax)
    assert (case.expected_decision, case.expected_message) == ("escalate", "E1")
    assert form.message_options(tax)[0] == "" and {"R1", "C1", "F1", "E1"} <= set(
        form.message_options(tax)
    )


def test_stored_cases_keep_the_key_and_show_a_mismatch(
    engine: Engine, admin: Actor, tax: Taxonomy
) -> None:
    cid = write(
        engine, cases.create_case, admin, cases.CaseIn.model_validate(record(key="C-1")), tax
    )
    view = cases.get_case(engine, cid)
    assert view is not None and view.expected_message == "R1"
    assert view.record["expected_message"] == "R1"
    assert display.category_mismatch(view, tax) is None
    assert ("expected wording", "R1") in list(display.details_table(view).itertuples(index=False))
    other = write(
        engine,
        cases.create_case,
        admin,
        cases.CaseIn.model_validate(
            record(key="C-2", category="in_scope", notes="removed on purpose")
        ),
        tax,
    )
    v2 = cases.get_case(engine, other)
    assert v2 is not None
    assert display.category_mismatch(v2, tax) == (
        "Expects 'Abstain' where category 'In scope' defaults to 'Answer'; the notes say why."
    )
    # changing the decision re-suggests a key that fits it
    edited = cases.CaseIn.model_validate(
        {
            **v2.record,
            "expected_decision": "clarify",
            "expected_message": None,
            "reason_codes": ["ambiguous_question"],
        }
    )
    write(engine, cases.update_case, admin, other, v2.version, edited, tax)
    again = cases.get_case(engine, other)
    assert again is not None and again.expected_message == "F1"


def _output(case: str, decision: str, key: str | None) -> str:
    return json.dumps({"case": case, "decision": decision, "message_key": key, "text": "t"})


def test_runs_check_the_wording_key(engine: Engine, admin: Actor, tax: Taxonomy) -> None:
    specs = [
        ("K-1", record(key="K-1")),  # abstain, expects R1
        ("K-2", record(key="K-2", category="near_miss")),  # abstain, expects R2
        (
            "K-3",
            record(
                key="K-3",
                expected_decision="clarify",
                category="ambiguous",
                reason_codes=["ambiguous_question"],
            ),
        ),
        (
            "K-4",
            record(key="K-4", expected_decision="answer", category="in_scope", reason_codes=[]),
        ),
        ("K-5", record(key="K-5")),  # answered: not counted
    ]
    for _, r in specs:
        write(engine, cases.create_case, admin, cases.CaseIn.model_validate(r), tax)
    lines = [
        _output("K-1", "abstain", "R1"),  # matches
        _output("K-2", "abstain", "R1"),  # wrong key
        _output("K-3", "clarify", None),  # no key: counts as not matching
        _output("K-4", "answer", "C1"),  # an answer: not in the figure
        _output("K-5", "answer", None),
    ]
    items = list(evalruns.iter_outputs(lines, "out.jsonl", tax))
    rid = evalruns.import_run(engine, admin, "keys", "v", items, "out.jsonl")
    df = evalruns.outputs_frame(engine, rid, tax)
    expected = [None if pd.isna(m) else m for m in df["expected_message"]]
    assert dict(zip(df["key"], expected, strict=True)) == {
        "K-1": "R1",
        "K-2": "R2",
        "K-3": "F1",
        "K-4": None,
        "K-5": "R1",
    }
    m = runmetrics.summarize(df)["wording_key_match"]
    assert (m.k, m.n) == (1, 3)
    table = runmetrics.summary_table(df)
    assert "Wording-key match" in set(table["metric"])
    with pytest.raises(InputError, match="line 1: field message_key"):
        list(
            evalruns.iter_outputs(
                ['{"case": "K-1", "decision": "abstain", "message_key": "R 1"}'], "out.jsonl", tax
            )
        )


def test_the_migration_fills_the_suggested_keys(any_url: str, tax: Taxonomy, admin: Actor) -> None:
    eng = make_engine(any_url)
    cfg = alembic_config(eng)
    command.upgrade(cfg, "head")
    made = [
        record(key="M-1"),
        record(key="M-2", category="near_miss"),
        record(
            key="M-3",
            expected_decision="escalate",
            category="restricted_topic",
            reason_codes=["restricted_topic"],
        ),
        record(key="M-4", expected_decision="answer", category="in_scope", reason_codes=[]),
    ]
    for r in made:
        write(eng, cases.create_case, admin, cases.CaseIn.model_validate(r), tax)
    command.downgrade(cfg, "0009")
    command.upgrade(cfg, "head")
    with read_session(eng) as s:
        got = {k: m for k, m in s.execute(select(Case.key, Case.expected_message))}
    assert got == {"M-1": "R1", "M-2": "R2", "M-3": "E1", "M-4": None}
    for r in made:
        assert got[r["key"]] == tax.expected_message(
            r["expected_decision"], r["category"], r["reason_codes"]
        )
    with eng.begin() as c:  # the outputs' column is there too
        c.execute(text("select message_key from eval_outputs"))
    eng.dispose()
