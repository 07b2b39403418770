"""What the Wording page shows around versions, as plain data: captions and labels, who signs a
pending version and what everyone else is shown, the history table, the sign-off chain verdict,
and the production check's texts and tables."""

from __future__ import annotations

import datetime as dt

from review.core.identity import Role
from review.policy import display as policy_display
from review.policy import signoff
from review.wording import display
from review.wording.compare import MessageChange
from review.wording.findings import RULES
from review.wording.production import OffendingTrace, ProductionSummary, TraceFinding
from tests.helpers.actors import make_actor

AT = dt.datetime(2025, 6, 2, 9, 30, tzinfo=dt.UTC)
PAULA = make_actor("product_owner", "paula@example.org", uid=10)
OMAR = make_actor("product_owner", "omar@example.org", uid=11)
CHEN = make_actor("compliance", "chen@example.org", clearance=True, uid=12)
RAVI = make_actor("reviewer", "ravi@example.org", uid=15)


def signature(role: str, meaning: str = "approve", note: str = "") -> signoff.Signature:
    return signoff.Signature(1, f"{role}@example.org", role, meaning, note, AT, "", "", {})


def version(
    *sigs: signoff.Signature,
    author: str = "omar@example.org",
    roles: frozenset[Role] = frozenset({Role.product_owner, Role.compliance}),
    snapshot: dict[str, object] | None = None,
) -> signoff.VersionView:
    return signoff.VersionView(
        id=7,
        kind="refusal_wording",
        number=3,
        yaml_text="",
        sha256="0123456789abcdef0123",
        parent_id=None,
        author=author,
        rationale="why",
        tuned_on_split=None,
        override_note=None,
        snapshot=snapshot,
        created_at=AT,
        signatures=sigs,
        required_roles=roles,
    )


def change(key: str, fields: tuple[str, ...] = (), compliance: bool = False) -> MessageChange:
    return MessageChange(key, "changed", fields, "old", "new", compliance)


def test_the_version_in_force_caption() -> None:
    done = version(signature("product_owner"), signature("compliance"))
    assert display.in_force_caption(done) == (
        "In force: sign-off v3, approved 2025-06-02 · sha256 0123456789ab…"
    )


def test_signatures_and_change_captions() -> None:
    assert policy_display.signatures_text(version()) == "none"
    v = version(signature("product_owner"), signature("compliance", "reject"))
    assert policy_display.signatures_text(v, {"product_owner@example.org": "Paula Kim"}) == (
        "Product owner approve (Paula Kim), Compliance reject (compliance)"
    )
    assert display.change_caption(change("R2")) == "R2 · changed"
    assert display.change_caption(change("R3", ("text",), True)) == "R3 · changed (text)"
    assert display.change_caption(change("R3", ("text",), True), for_signing=True) == (
        "R3 · answer blocked as ungrounded · changed (text) · compliance signs this key"
    )
    assert display.change_caption(change("X1"), for_signing=True) == "X1 · custom message · changed"


def test_version_labels() -> None:
    v = version()
    assert display.version_label(None, {}) == "the shipped file (policies/refusal-wording.yaml)"
    # the words of the Thresholds page and the in-force caption: sign-off number and status
    assert display.version_label(7, {7: v}) == "sign-off v3 (proposal, waiting for sign-off)"
    done = version(signature("product_owner"), signature("compliance"))
    assert display.version_label(7, {7: done}, 7) == "sign-off v3 (in force)"
    assert display.version_label(7, {7: done}, 8) == "sign-off v3 (approved, replaced since)"


def test_who_signs_and_what_the_others_see() -> None:
    v = version(signature("product_owner"))  # compliance still needed
    assert display.sign_choice(OMAR, v) == "author"
    assert display.sign_choice(CHEN, v) == "sign"
    assert display.signing_roles(CHEN, v) == [Role.compliance]
    assert display.sign_choice(PAULA, v) == "not_needed"  # the product owner signed already
    assert display.signing_roles(PAULA, v) == []
    assert display.sign_choice(RAVI, v) == "not_a_signer"
    fresh = version()
    assert display.signing_roles(PAULA, fresh) == [Role.product_owner]


def test_the_history_table() -> None:
    v = version(
        signature("product_owner", note="fine"),
        signature("compliance"),
        snapshot={"changed_keys": ["R2", "R3"], "lint_total": 2},
    )
    names = {"product_owner@example.org": "Paula Kim"}
    row = display.history_frame([v, version()], v.id, names).iloc[0]
    assert row["version"] == 3 and row["status"] == "in force"
    assert row["changed keys"] == "R2, R3" and row["lint findings"] == 2
    assert row["sha256"] == "0123456789abcdef"
    assert row["signatures"] == (
        "Product owner: approve by Paula Kim at 2025-06-02 09:30 (fine); "
        "Compliance: approve by compliance at 2025-06-02 09:30"  # no name known: never the e-mail
    )
    blank = display.history_frame([version()], None).iloc[0]
    assert blank["changed keys"] == "" and blank["signatures"] == ""


def test_the_chain_verdict() -> None:
    assert display.chain_message([]) == ("Sign-off chain: intact (every signature hash verifies)")
    assert display.chain_message(["v2 edited", "v3 forged"]) == (
        "Sign-off chain: v2 edited; v3 forged"
    )


def test_the_production_check_asks_before_a_large_first_check() -> None:
    assert display.should_ask_first(display.ASK_BEFORE + 1, confirmed=False)
    assert not display.should_ask_first(display.ASK_BEFORE + 1, confirmed=True)
    assert not display.should_ask_first(display.ASK_BEFORE, confirmed=False)


def test_production_texts_and_tables() -> None:
    s = ProductionSummary(8, 2, 0, {"universal_negative": 2, "blames_user": 0}, None)
    assert display.production_share(s) == "25%"
    assert display.production_share(ProductionSummary(0, 0, 0, {}, 4)) == "—"
    assert display.production_caption(s) == (
        "Linted with the approved contacts of the shipped file, the restricted titles of the "
        "corpus and every document id."
    )
    hidden = ProductionSummary(8, 2, 3, {}, 4)
    assert display.production_caption(hidden).endswith(
        "of version 4, the restricted titles of the corpus and every document id. 3 offending "
        "restricted traces are hidden: seeing them needs clearance."
    )
    rules = display.rules_frame(s)
    assert rules.values.tolist() == [
        ["Says the answer does not exist", RULES["universal_negative"], 2],
        ["Blames the user", RULES["blames_user"], 0],
    ]


def test_an_offending_trace_in_one_line_and_its_findings() -> None:
    finding = TraceFinding("universal_negative", 0, 8, "There is", "says it does not exist")
    row = OffendingTrace(
        5, "tr-9", AT, "abstain", "no_answer", "R1", True, "text", (finding,), False
    )
    assert display.trace_line(row) == (
        "tr-9 · 2025-06-02 09:30 UTC · decision abstain (no_answer) · checked as R1 · "
        "restricted trace"
    )
    bare = OffendingTrace(5, "tr-9", AT, None, None, None, False, "", (), False)
    assert display.trace_line(bare) == "tr-9 · 2025-06-02 09:30 UTC · decision —"
    assert display.finding_rows_frame(row).values.tolist() == [
        ["Says the answer does not exist", "There is", "says it does not exist"]
    ]
