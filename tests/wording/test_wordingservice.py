"""Refusal wording as a signed policy: sign-off rules, drafts, comparisons, production check."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from typing import Any

import pytest
from sqlalchemy import Engine, delete, event, update
from sqlalchemy.orm import Session

from review.admin import users
from review.core.clearance import REDACTED
from review.core.errors import InputError, PermissionDenied, PolicyFileError, StaleWriteError
from review.core.identity import SYSTEM, Role
from review.core.taxonomy import Taxonomy
from review.demo import people, wording_versions
from review.policy import signoff
from review.wording import compare, drafts, production, signing, terms, versions
from review.wording.lint import lint
from review.wording.messages import (
    EXAMPLE_VALUES,
    load_wording,
    parse_wording,
    render,
    wording_path,
)
from storage.db import run_write
from storage.models import Document, Trace
from tests.helpers.actors import make_actor

PAULA = make_actor("product_owner", "paula@example.org", uid=10)
OMAR = make_actor("product_owner", "omar@example.org", uid=11)
CHEN = make_actor("compliance", "chen@example.org", clearance=True, uid=12)
INES = make_actor("annotator", "ines@example.org", uid=13)
ADA = make_actor("admin", "ada@example.org", clearance=True, uid=14)
RAVI = make_actor("reviewer", "ravi@example.org", uid=15)  # no clearance

NEW_R2 = (
    "The documents available to you cover {topic}, but none of them settles your question. "
    "Could you tell me {missing_item}?"
)
NEW_R3 = (
    "I drafted an answer, but the documents available to you do not back all of it, so I have "
    "held it back. Please raise a support ticket and {role} will look at your question."
)


@pytest.fixture(autouse=True)
def _fresh_scans() -> Iterable[None]:
    production.clear_production_cache()
    yield
    production.clear_production_cache()


def approved_v1(engine: Engine) -> int:
    """The shipped file as version 1, signed by a product owner and compliance."""
    vid = signing.propose_wording(
        engine, OMAR, versions.in_force(engine).text, "first", based_on=None
    )
    signing.sign_wording(engine, PAULA, vid, "approve")
    signing.sign_wording(engine, CHEN, vid, "approve")
    return vid


# --- required roles and the canonical form ---------------------------------------------------


def shipped() -> str:
    return wording_path().read_text(encoding="utf-8")


def edited(key: str, text: str) -> str:
    return drafts.draft_yaml(shipped(), {key: drafts.MessageDraft(text)})


def test_first_version_needs_product_owner_and_compliance() -> None:
    assert versions.required_roles(shipped(), None) == {Role.product_owner, Role.compliance}


@pytest.mark.parametrize(
    ("key", "text", "compliance"),
    [
        ("R2", NEW_R2, False),
        ("R1", "I found nothing about {topic} in the documents available to you.", False),
        ("C1", "Parts of this answer rest on thin support. Please check {document}.", False),
        ("R3", NEW_R3, True),
        ("E1", "A person must handle this, so I have passed it to {role}.", True),
    ],
)
def test_compliance_signs_only_when_r3_or_e1_changed(key: str, text: str, compliance: bool) -> None:
    roles = versions.required_roles(edited(key, text), shipped())
    expected = {Role.product_owner, Role.compliance} if compliance else {Role.product_owner}
    assert roles == expected


def test_a_description_change_to_e1_also_needs_compliance() -> None:
    new = drafts.draft_yaml(
        shipped(),
        {"E1": drafts.MessageDraft(load_wording().messages["E1"].text, "Route to a team.")},
    )
    assert Role.compliance in versions.required_roles(new, shipped())


def test_canonical_ignores_version_number_comments_and_layout() -> None:
    text = shipped()
    relaid = drafts.dump_wording(load_wording().model_copy(update={"version": 7}))
    assert "#" not in relaid
    assert versions.canonical(relaid) == versions.canonical(text)
    assert versions.canonical(edited("R2", NEW_R2)) != versions.canonical(text)


def test_draft_keeps_the_header_round_trips_and_derives_placeholders() -> None:
    out = drafts.draft_yaml(shipped(), {"R2": drafts.MessageDraft(NEW_R2)}, version=2)
    assert out.startswith("# What the Brightwave assistant says")
    new = parse_wording(out)
    assert new.version == 2
    assert new.messages["R2"].text == NEW_R2
    assert new.messages["R2"].placeholders == ["topic", "missing_item"]
    assert new.messages["R2"].description == load_wording().messages["R2"].description
    assert "placeholders: [topic, missing_item]" in out
    assert {k: m for k, m in new.messages.items() if k != "R2"} == {
        k: m for k, m in load_wording().messages.items() if k != "R2"
    }


def test_draft_errors_name_the_key_and_field() -> None:
    with pytest.raises(PolicyFileError, match=r"messages\.R2\.text: has a brace"):
        edited("R2", "I found {Topic} but it does not settle it.")
    with pytest.raises(PolicyFileError, match=r"messages\.R2\.text"):
        edited("R2", "   ")
    with pytest.raises(InputError, match=r"messages\.R9_BILLING\.description"):
        drafts.draft_yaml(shipped(), {"R9_BILLING": drafts.MessageDraft("Ask {role}.")})
    with pytest.raises(PolicyFileError, match="message keys use capital letters"):
        drafts.draft_yaml(
            shipped(), {"r9": drafts.MessageDraft("Ask the team.", "Billing refusals")}
        )
    with pytest.raises(InputError, match="required message cannot be removed"):
        drafts.draft_yaml(shipped(), {}, remove=["R1"])


def test_custom_key_can_be_added_and_removed() -> None:
    added = drafts.draft_yaml(
        shipped(),
        {
            "R2_BILLING": drafts.MessageDraft(
                "Please ask {role} about invoices.", "Billing refusals"
            )
        },
    )
    assert parse_wording(added).messages["R2_BILLING"].placeholders == ["role"]
    removed = drafts.draft_yaml(added, {}, remove=["R2_BILLING"])
    assert "R2_BILLING" not in parse_wording(removed).messages


# --- proposing and signing -------------------------------------------------------------------


def test_wording_in_force_is_the_shipped_file_until_a_version_is_approved(engine: Engine) -> None:
    current = versions.in_force(engine)
    assert current.version is None and current.wording == load_wording()
    vid = signing.propose_wording(engine, OMAR, current.text, "first", based_on=None)
    assert versions.in_force(engine).version is None  # pending is not in force
    signing.sign_wording(engine, PAULA, vid, "approve")
    v = signoff.get_version(engine, vid)
    assert v.status == "pending" and v.missing_roles == ["compliance"]
    signing.sign_wording(engine, CHEN, vid, "approve")
    assert versions.in_force(engine).version_id == vid
    assert signoff.verify_chain(engine) == []


def test_author_can_never_approve_their_own_change(engine: Engine) -> None:
    approved_v1(engine)
    vid = signing.propose_edits(engine, PAULA, {"R2": drafts.MessageDraft(NEW_R2)}, "plainer")
    with pytest.raises(PermissionDenied, match="author of a change can never approve"):
        signing.sign_wording(engine, PAULA, vid, "approve")
    with pytest.raises(PermissionDenied, match="author"):
        signing.sign_wording(engine, PAULA, vid, "reject", note="changed my mind")


def test_r2_change_is_approved_by_one_other_product_owner(engine: Engine) -> None:
    approved_v1(engine)
    vid = signing.propose_edits(engine, PAULA, {"R2": drafts.MessageDraft(NEW_R2)}, "plainer R2")
    v = signoff.get_version(engine, vid)
    assert v.number == 2 and v.status == "pending" and v.missing_roles == ["product_owner"]
    assert v.snapshot is not None and v.snapshot["changed_keys"] == ["R2"]
    assert v.snapshot["needs_compliance"] is False
    with pytest.raises(InputError, match="does not need a compliance signature"):
        signing.sign_wording(engine, CHEN, vid, "approve")
    signing.sign_wording(engine, OMAR, vid, "approve")
    current = versions.in_force(engine)
    assert current.version_id == vid
    assert current.wording.messages["R2"].text == NEW_R2
    assert parse_wording(current.text).version == 2


def test_r3_change_stays_pending_until_compliance_signs(engine: Engine) -> None:
    approved_v1(engine)
    vid = signing.propose_edits(engine, PAULA, {"R3": drafts.MessageDraft(NEW_R3)}, "softer R3")
    signing.sign_wording(engine, OMAR, vid, "approve")
    v = signoff.get_version(engine, vid)
    assert v.status == "pending" and v.missing_roles == ["compliance"]
    assert versions.in_force(engine).wording.messages["R3"].text != NEW_R3
    signing.sign_wording(engine, CHEN, vid, "approve")
    assert versions.in_force(engine).wording.messages["R3"].text == NEW_R3


def test_a_rejection_needs_a_note_and_ends_the_proposal(engine: Engine) -> None:
    approved_v1(engine)
    vid = signing.propose_edits(engine, PAULA, {"R2": drafts.MessageDraft(NEW_R2)}, "plainer R2")
    with pytest.raises(InputError, match="rejection needs a note"):
        signing.sign_wording(engine, OMAR, vid, "reject")
    signing.sign_wording(engine, OMAR, vid, "reject", note="too casual")
    assert signoff.get_version(engine, vid).status == "rejected"
    assert versions.pending(engine) == []


def test_only_product_owners_and_compliance_propose(engine: Engine) -> None:
    with pytest.raises(PermissionDenied, match="may not propose policy changes"):
        signing.propose_edits(engine, INES, {"R2": drafts.MessageDraft(NEW_R2)}, "plainer")
    vid = signing.propose_edits(engine, CHEN, {"R2": drafts.MessageDraft(NEW_R2)}, "plainer")
    with pytest.raises(PermissionDenied, match="may not approve"):
        signing.sign_wording(engine, INES, vid, "approve")


def test_a_rationale_is_required_and_an_unchanged_wording_is_refused(engine: Engine) -> None:
    approved_v1(engine)
    with pytest.raises(InputError, match="rationale is required"):
        signing.propose_edits(engine, PAULA, {"R2": drafts.MessageDraft(NEW_R2)}, "  ")
    text = load_wording().messages["R2"].text
    with pytest.raises(InputError, match="nothing changed"):
        signing.propose_edits(engine, PAULA, {"R2": drafts.MessageDraft(text)}, "same again")


def test_lint_findings_are_stored_and_approval_needs_a_note(engine: Engine) -> None:
    approved_v1(engine)
    bad = "There is no such discount. Could you tell me {missing_item}?"
    vid = signing.propose_edits(engine, PAULA, {"R2": drafts.MessageDraft(bad)}, "shorter")
    snap = signoff.get_version(engine, vid).snapshot
    assert snap is not None and snap["lint_total"] == 1
    assert snap["lint"] == {
        "R2": [
            {
                "rule": "universal_negative",
                "start": 0,
                "end": 11,
                "excerpt": "There is no",
                "explanation": snap["lint"]["R2"][0]["explanation"],
            }
        ]
    }
    review = signing.review_version(engine, vid)
    assert review.lint_total == 1 and review.findings["R2"][0].rule == "universal_negative"
    with pytest.raises(InputError, match="1 lint finding"):
        signing.sign_wording(engine, OMAR, vid, "approve")
    signing.sign_wording(
        engine, OMAR, vid, "approve", note="Deliberate: the discount was withdrawn."
    )
    sig = signoff.get_version(engine, vid).signatures[0]
    assert sig.metrics_snapshot["lint_total"] == 1
    assert sig.data_fingerprint == terms.corpus_terms(engine).fingerprint()


def test_restricted_titles_of_the_corpus_are_linted(engine: Engine) -> None:
    add_restricted_doc(engine)
    leak = "The Project Falcon acquisition memo may cover this; please ask {role}."
    vid = signing.propose_edits(
        engine, CHEN, {"R3": drafts.MessageDraft(leak)}, "point to the memo"
    )
    snap = signoff.get_version(engine, vid).snapshot
    assert snap is not None
    assert [f["excerpt"] for f in snap["lint"]["R3"]] == ["Project Falcon acquisition memo"]


def test_proposing_from_a_version_no_longer_in_force_is_refused(engine: Engine) -> None:
    v1 = approved_v1(engine)
    with pytest.raises(StaleWriteError, match="from the shipped file, but version 1 is in"):
        signing.propose_edits(
            engine, PAULA, {"R2": drafts.MessageDraft(NEW_R2)}, "x", based_on=None
        )
    assert versions.pending(engine) == []
    signing.propose_edits(engine, PAULA, {"R2": drafts.MessageDraft(NEW_R2)}, "x", based_on=v1)
    assert len(versions.pending(engine)) == 1


def test_approving_a_proposal_whose_parent_was_replaced_is_refused(engine: Engine) -> None:
    approved_v1(engine)
    a = signing.propose_edits(engine, PAULA, {"R2": drafts.MessageDraft(NEW_R2)}, "R2")
    b = signing.propose_edits(
        engine, OMAR, {"F1": drafts.MessageDraft("Which {missing_item}?")}, "F1"
    )
    signing.sign_wording(engine, OMAR, a, "approve")
    review = signing.review_version(engine, b)
    assert review.stale_parent is not None and "undo" in review.stale_parent
    with pytest.raises(InputError, match="would undo that change"):
        signing.sign_wording(engine, PAULA, b, "approve")
    signing.sign_wording(engine, PAULA, b, "reject", note="superseded by version 2")
    assert versions.in_force(engine).wording.messages["R2"].text == NEW_R2


def test_review_compares_with_the_parent_and_explains_the_roles(engine: Engine) -> None:
    approved_v1(engine)
    vid = signing.propose_edits(
        engine,
        PAULA,
        {"E1": drafts.MessageDraft("A person must handle this, so I have passed it to {role}.")},
        "shorter E1",
        allowed_contacts=[*load_wording().allowed_contacts, "the Trust team"],
    )
    r = signing.review_version(engine, vid)
    assert r.parent_label == "version 1"
    assert [(c.key, c.status) for c in r.changes if c.status != "unchanged"] == [("E1", "changed")]
    assert r.compliance_reason == "Compliance signs too: E1 changed."
    assert r.settings == [("allowed_contacts", "added: the Trust team")]


# --- comparing -------------------------------------------------------------------------------


def test_compare_lists_every_key_with_its_status() -> None:
    old = load_wording()
    new = parse_wording(
        drafts.draft_yaml(
            shipped(),
            {
                "R2": drafts.MessageDraft(NEW_R2),
                "E1_LEGAL": drafts.MessageDraft(
                    "I have passed this to {role}.", "Legal escalations"
                ),
            },
        )
    )
    rows = {c.key: c for c in compare.compare(old, new)}
    assert list(rows) == ["R1", "R2", "R3", "C1", "F1", "E1", "E1_LEGAL"]
    assert rows["R2"].status == "changed" and rows["R2"].fields == ("text",)
    assert rows["E1_LEGAL"].status == "added" and rows["E1_LEGAL"].old_text is None
    assert rows["R1"].status == "unchanged"
    back = {c.key: c.status for c in compare.compare(new, old)}
    assert back["E1_LEGAL"] == "removed"
    frame = compare.compare_frame(compare.compare(old, new))
    assert frame.loc[frame["key"] == "R3", "compliance signs"].item() == "yes"


def test_word_diff_marks_removed_and_added_words() -> None:
    assert compare.word_diff(
        "I found documents about refunds.", "I found nothing about refunds."
    ) == ("I found [-documents -]{+nothing +}about refunds.")
    assert compare.word_diff("same", "same") == "same"
    assert compare.word_diff("", "new text") == "{+new text+}"


def test_caret_lines_put_carets_under_each_span() -> None:
    text = "There is no refund. Contact Mr Smith today."
    findings = lint(text, key="E1")
    out = terms.caret_lines(text, findings, width=20)
    assert out.splitlines() == [
        "There is no refund.",
        "^^^^^^^^^^^  Says the answer does not exist",
        "Contact Mr Smith",
        "^^^^^^^^^^^^^^^^  Escalation names a person, Names an unlisted contact",
        "today.",
    ]


def test_findings_frame_has_one_row_per_finding_with_excerpt() -> None:
    text = "There is no refund."
    frame = terms.findings_frame(text, lint(text))
    assert frame[["rule", "start", "end", "excerpt"]].values.tolist() == [
        ["Says the answer does not exist", 0, 11, "There is no"]
    ]


# --- production check ------------------------------------------------------------------------

T0 = dt.datetime(2025, 6, 2, 9, 0, tzinfo=dt.UTC)

# (trace id, decision, reason code, text, restricted) -> the rule it trips (None: clean or
# not a refusal text). Each bad text trips exactly one rule (checked by the first test).
ESCALATE_TO_NAME = (
    "This needs a person, so I have passed it to Maria Lopez. You will get a reply through "
    "your support ticket."
)
CAVEAT_SCORE = (
    "Parts of this answer rest on limited support (relevance score 0.41). Please check it "
    "against your order form."
)
FALCON = "The Project Falcon acquisition memo covers this, so I cannot help here."
OTHER_EMAIL = (
    "I could not find this in the documents available to you. Please email "
    "help@other.example for help."
)
R1_RENDERED = render(load_wording().messages["R1"], EXAMPLE_VALUES)
PRODUCTION: list[tuple[str, str, str | None, str, bool, str | None]] = [
    (
        "t01",
        "abstain",
        "no_answer_bearing_evidence",
        "There is no such discount.",
        False,
        "universal_negative",
    ),
    ("t02", "abstain", "no_answer_bearing_evidence", R1_RENDERED, False, None),
    ("t03", "escalate", "restricted_topic", ESCALATE_TO_NAME, False, "escalation_names_person"),
    (
        "t04",
        "clarify",
        "ambiguous_question",
        "This could mean several things.",
        False,
        "followup_without_request",
    ),
    ("t05", "answer", "support_below_threshold", CAVEAT_SCORE, False, "leaked_internal"),
    ("t06", "answer", None, "There is no refund for annual plans after 30 days.", False, None),
    ("t07", "abstain", "source_not_allowed", FALCON, True, "leaked_internal"),
    ("t08", "abstain", "source_not_allowed", FALCON, False, "leaked_internal"),
    (
        "t09",
        "abstain",
        "required_claim_not_covered",
        "I cannot confirm this, but enterprise customers usually have 60 days.",
        False,
        "claim_after_refusal",
    ),
    ("t10", "abstain", "no_answer_bearing_evidence", OTHER_EMAIL, False, "unlisted_contact"),
    (
        "t11",
        "clarify",
        "ambiguous_question",
        "Your question makes no sense. Could you tell me the plan name?",
        False,
        "blames_user",
    ),
    (
        "t12",
        "answer",
        "false_premise",
        "There is no Enterprise Lite plan; the plans are Team and Enterprise.",
        False,
        None,
    ),
    ("t13", "abstain", None, "", False, None),
]


def add_restricted_doc(engine: Engine) -> None:
    def work(s: Session) -> None:
        s.add(
            Document(
                doc_key="MA-FALCON",
                version=1,
                title="Project Falcon acquisition memo",
                body="Confidential.",
                authority="internal_memo",
                owner="Corporate Development",
                access_scope="restricted",
                jurisdiction="global",
                sha256="0" * 64,
            )
        )

    run_write(engine, work)


def add_traces(
    engine: Engine,
    rows: Iterable[tuple[str, str, str | None, str, bool, str | None]],
    start: int = 0,
) -> None:
    def work(s: Session) -> None:
        for i, (tid, decision, reason, text, restricted, _rule) in enumerate(rows, start):
            s.add(
                Trace(
                    trace_id=tid,
                    at=T0 + dt.timedelta(minutes=i),
                    query="q",
                    decision=decision,
                    reason_code=reason,
                    answer_text=text,
                    restricted=restricted,
                )
            )

    run_write(engine, work)


@pytest.fixture
def prod(any_engine: Engine) -> Engine:
    add_restricted_doc(any_engine)
    add_traces(any_engine, PRODUCTION)
    return any_engine


def test_each_production_text_trips_exactly_its_rule() -> None:
    wording = load_wording()
    for tid, decision, _reason, text, _restricted, rule in PRODUCTION:
        found = lint(
            str(text),
            key=production.message_key_for(str(decision)),
            restricted_titles=["Project Falcon acquisition memo"],
            allowed_contacts=wording.allowed_contacts,
        )
        if rule is not None:
            assert {f.rule for f in found} == {rule}, tid


def test_production_counts_per_rule_with_clearance(prod: Engine) -> None:
    s = production.production_counts(prod, ADA)
    # candidates: every non-answer with text (t01-t04, t07-t11) plus the caveat answer t05;
    # not the plain answer t06, the false-premise answer t12 or the empty text t13
    assert s.checked == 10
    assert s.offending == 9 and s.hidden_restricted == 0
    assert s.per_rule == {
        "universal_negative": 1,
        "leaked_internal": 3,
        "unlisted_contact": 1,
        "claim_after_refusal": 1,
        "blames_user": 1,
        "followup_without_request": 1,
        "escalation_names_person": 1,
    }
    assert s.wording_version is None


def test_restricted_traces_are_hidden_without_clearance_and_titles_masked(prod: Engine) -> None:
    s = production.production_counts(prod, RAVI)
    assert s.checked == 9 and s.offending == 8 and s.hidden_restricted == 1
    assert s.per_rule["leaked_internal"] == 2
    page = production.production_findings(prod, RAVI, 1, 50)
    assert "t07" not in {r.trace_id for r in page.rows}
    t08 = next(r for r in page.rows if r.trace_id == "t08")
    assert t08.masked
    assert t08.text == f"The {REDACTED} covers this, so I cannot help here."
    assert t08.findings[0].excerpt == REDACTED
    assert "Falcon" not in t08.findings[0].explanation
    full = production.production_findings(prod, ADA, 1, 50)
    t08c = next(r for r in full.rows if r.trace_id == "t08")
    assert not t08c.masked and "Project Falcon" in t08c.text
    assert {r.trace_id for r in full.rows} >= {"t07", "t08"}


def test_production_findings_are_paginated_newest_first(prod: Engine) -> None:
    first = production.production_findings(prod, ADA, 1, 4)
    assert first.total == 9
    assert [r.trace_id for r in first.rows] == ["t11", "t10", "t09", "t08"]
    third = production.production_findings(prod, ADA, 3, 4)
    assert [r.trace_id for r in third.rows] == ["t01"]
    assert production.production_findings(prod, ADA, 4, 4).rows == []
    row = first.rows[0]
    assert row.key == "F1" and row.rules == ["blames_user"]
    assert row.findings[0].excerpt == "Your question makes no sense"
    assert first.frame()["rules"].tolist() == [
        "Blames the user",
        "Names an unlisted contact",
        "Answers after refusing",
        "Leaks internal details",
    ]


def test_production_findings_filter_by_rule(prod: Engine) -> None:
    leaked = production.production_findings(prod, ADA, 1, 10, rule="leaked_internal")
    assert [r.trace_id for r in leaked.rows] == ["t08", "t07", "t05"]
    assert leaked.total == 3
    with pytest.raises(InputError, match="unknown wording rule"):
        production.production_findings(prod, ADA, rule="too_long")


def test_new_and_removed_traces_are_picked_up(prod: Engine) -> None:
    assert production.production_counts(prod, ADA).offending == 9
    add_traces(
        prod,
        [("t14", "abstain", None, "That document does not exist.", False, None)],
        start=20,
    )
    s = production.production_counts(prod, ADA)
    assert s.checked == 11 and s.per_rule["universal_negative"] == 2
    assert production.production_findings(prod, ADA, 1, 1).rows[0].trace_id == "t14"

    def drop(s: Session) -> None:
        s.execute(delete(Trace).where(Trace.trace_id == "t01"))

    run_write(prod, drop)
    s = production.production_counts(prod, ADA)
    assert s.checked == 10 and s.per_rule["universal_negative"] == 1


def test_a_trace_marked_restricted_later_disappears_for_users_without_clearance(
    prod: Engine,
) -> None:
    assert production.production_counts(prod, RAVI).offending == 8

    def mark(s: Session) -> None:
        s.execute(update(Trace).where(Trace.trace_id == "t09").values(restricted=True))

    run_write(prod, mark)
    s = production.production_counts(prod, RAVI)
    assert s.offending == 7 and s.hidden_restricted == 2
    ids = {r.trace_id for r in production.production_findings(prod, RAVI, 1, 50).rows}
    assert "t09" not in ids


def test_the_approved_wording_decides_which_contacts_are_allowed(prod: Engine) -> None:
    assert production.production_counts(prod, ADA).per_rule["unlisted_contact"] == 1
    vid = signing.propose_edits(
        prod,
        PAULA,
        {},
        "help@other.example is our partner desk",
        allowed_contacts=[*load_wording().allowed_contacts, "help@other.example"],
    )
    signing.sign_wording(prod, OMAR, vid, "approve")
    signing.sign_wording(prod, CHEN, vid, "approve")
    s = production.production_counts(prod, ADA)
    assert s.per_rule["unlisted_contact"] == 0 and s.wording_version == 1


def test_trace_findings_for_one_trace(prod: Engine) -> None:
    page = production.production_findings(prod, ADA, 1, 50)
    pk = {r.trace_id: r.id for r in page.rows}
    one = production.trace_findings(prod, RAVI, pk["t03"])
    assert one.key == "E1" and [f.excerpt for f in one.findings] == ["Maria Lopez"]
    with pytest.raises(PermissionDenied, match="clearance"):
        production.trace_findings(prod, RAVI, pk["t07"])
    with pytest.raises(InputError, match="does not exist"):
        production.trace_findings(prod, ADA, 10_000)


def test_no_traces_means_nothing_to_check(engine: Engine) -> None:
    s = production.production_counts(engine, ADA)
    assert (s.checked, s.offending, s.hidden_restricted) == (0, 0, 0)
    page = production.production_findings(engine, ADA)
    assert page.total == 0 and page.rows == [] and page.frame().empty


# --- demo data -------------------------------------------------------------------------------


def test_demo_wording_needs_the_demo_users(engine: Engine, tax: Taxonomy) -> None:
    assert wording_versions.build_demo_wording(engine, tax) == 0
    assert versions.versions(engine) == []


def test_demo_wording_has_an_approved_set_and_a_pending_r2_change(
    engine: Engine, tax: Taxonomy
) -> None:
    for u in people.DEMO_USERS:
        users.add_user(engine, SYSTEM, u.email, u.name, list(u.roles), u.clearance)
    demo_engine = engine
    assert wording_versions.build_demo_wording(demo_engine, tax) == 2
    assert wording_versions.build_demo_wording(demo_engine, tax) == 0
    current = versions.in_force(demo_engine)
    assert current.version is not None and current.version.number == 1
    assert {(s.signer, s.role) for s in current.version.signatures} == {
        ("paula.kim@brightwave.example", "product_owner"),
        ("chen.li@brightwave.example", "compliance"),
    }
    (pending,) = versions.pending(demo_engine)
    assert pending.author == "paula.kim@brightwave.example"
    assert pending.missing_roles == ["product_owner"]
    review = signing.review_version(demo_engine, pending.id)
    assert [c.key for c in review.changes if c.status == "changed"] == ["R2"]
    assert review.lint_total == 0
    assert signoff.verify_chain(demo_engine) == []


def test_unchecked_count_says_what_the_next_check_must_lint(prod: Engine) -> None:
    assert production.unchecked_count(prod) == 10
    production.production_counts(prod, ADA)
    assert production.unchecked_count(prod) == 0
    add_traces(prod, [("t20", "abstain", None, "No such plan.", False, None)], start=30)
    assert production.unchecked_count(prod) == 1


# --- the stored YAML and the command-line report ---------------------------------------------


def test_a_stored_edit_changes_only_its_own_lines(engine: Engine) -> None:
    v1 = approved_v1(engine)
    vid = signing.propose_edits(
        engine, PAULA, {"R2": drafts.MessageDraft(NEW_R2)}, "plainer", based_on=v1
    )
    text = signoff.get_version(engine, vid).yaml_text
    changed = [
        line
        for line in compare.yaml_diff(shipped(), text).splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert changed[:2] == ["-version: 1", "+version: 2"]
    assert all("document" in line or "{" in line or "you" in line for line in changed[2:])
    assert sum(line.startswith("+") for line in changed) == 3  # version + the folded R2 text
    assert text.startswith("# What the Brightwave assistant says")
    assert "# Titles of restricted documents." in text  # comments further down are kept


def test_lint_report_has_one_line_per_finding() -> None:
    bad = parse_wording(
        drafts.draft_yaml(
            shipped(), {"R1": drafts.MessageDraft("There is no {topic}. Call Dr Who.")}
        )
    )
    lines = terms.lint_report(bad)
    assert [line.split(" [")[0] for line in lines] == [
        "R1 universal_negative",
        "R1 unlisted_contact",
    ]
    assert terms.lint_report(load_wording()) == []


def test_the_refusal_texts_are_counted_from_groups_and_a_small_index(any_engine: Engine) -> None:
    """The candidates' count runs on every Wording and Monitoring page view: it must come from
    the population groups less the small partial index of refusals without a text, not a
    read of every trace (2.5 s at a million traces) nor of every refusal's index entry (0.6-1
    s at ten million), and still count exactly the refusal, follow-up, escalation, partial
    and caveat texts."""
    from tests.helpers.audits import add_trace

    add_trace(
        any_engine,
        "refuse",
        decision="abstain",
        reason_code="no_answer_bearing_evidence",
        answer_text="I can't answer that.",
    )
    add_trace(
        any_engine,
        "caveat",
        decision="answer",
        reason_code="support_below_threshold",
        answer_text="Probably 14 days.",
        restricted=True,
    )
    add_trace(any_engine, "plain", decision="answer", answer_text="14 days.")
    add_trace(
        any_engine,
        "premise",
        decision="answer",
        reason_code="false_premise",
        answer_text="No such plan.",
    )
    add_trace(
        any_engine, "empty", decision="clarify", reason_code="ambiguous_question", answer_text=""
    )
    add_trace(any_engine, "undecided", decision=None, answer_text="text")
    count, restricted, _ = production.candidate_population(any_engine)
    assert (count, restricted) == (2, 1)
    if any_engine.dialect.name == "sqlite":
        seen: list[tuple[str, Any]] = []

        def listen(_c: Any, _cur: Any, statement: str, params: Any, *_a: Any) -> None:
            seen.append((statement, params))

        event.listen(any_engine, "before_cursor_execute", listen)
        try:
            production.candidate_population(any_engine)
        finally:
            event.remove(any_engine, "before_cursor_execute", listen)
        [(sql, params)] = [(q, p) for q, p in seen if "trace_population_groups" in q]
        with any_engine.connect() as c:
            rows = c.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, params).all()
        plan = " | ".join(str(r[-1]) for r in rows)
        assert "ix_traces_empty_refusals" in plan, plan
        assert "SCAN trace_population_groups" in plan, plan
        assert re.findall(r"(?:SCAN|SEARCH) traces(?! USING)", plan) == [], plan  # no table read


def test_weekly_violations_come_from_an_up_to_date_scan_only(prod: Engine) -> None:
    from review.traces.monitoring import week_start

    monday = week_start(T0)
    start, end = monday - dt.timedelta(weeks=2), monday + dt.timedelta(weeks=2)
    assert production.weekly_violations(prod, ADA, start, end) is None  # not scanned yet
    s = production.production_counts(prod, ADA)
    frame = production.weekly_violations(prod, ADA, start, end)
    assert frame is not None and list(frame["week"]) == [
        start + dt.timedelta(weeks=i) for i in range(4)
    ]
    row = frame[frame["week"] == monday].iloc[0]
    assert int(row["offending"]) == s.offending == 9  # all the traces are in T0's week
    assert {r: int(row[r]) for r in s.per_rule} == s.per_rule
    assert int(frame["offending"].sum()) == 9
    # without clearance the restricted trace is not counted
    assert int(production.weekly_violations(prod, RAVI, start, end)["offending"].sum()) == 8  # type: ignore[index]
    # a window that ends before T0's week counts nothing
    early = production.weekly_violations(prod, ADA, start, monday)
    assert early is not None and int(early["offending"].sum()) == 0
