"""Monthly review: validation check (hand-counted), read-only after closing, carry, export."""

from __future__ import annotations

import datetime as dt
import re

import pandas as pd
import pytest
from sqlalchemy import Engine

from review.cases import splits
from review.core.errors import InputError, PermissionDenied, StaleWriteError
from review.core.taxonomy import Taxonomy
from review.evaluation import evalruns
from review.monthly import records, report, reviews, validation
from tests.helpers.actors import make_actor
from tests.helpers.transact import write

RAVI = make_actor("reviewer", "ravi.menon@brightwave.example")
TEMPLATES = [
    "The documents available to you do not establish this. Could you share {missing_item}?",
    "I have passed this to {role}.",
]


def frame(rows: list[tuple[str, str, str | None, str | None, str, bool]]) -> pd.DataFrame:
    answering = {"answer", "partial"}
    return pd.DataFrame(
        [
            {
                "key": k,
                "gold": g,
                "decision": d,
                "reason_code": r,
                "text": t,
                "infra": infra,
                "answerable": g in answering,
            }
            for k, g, d, r, t, infra in rows
        ]
    )


def test_validation_check_hand_counted() -> None:
    f = frame(
        [
            ("A1", "answer", "answer", None, "14 days.", False),
            ("A2", "answer", "answer", None, "30 days.", False),
            (
                "A3",
                "answer",
                "abstain",
                "support_below_threshold",
                "The documents available to you do not establish this. "
                "Could you share the contract?",
                False,
            ),
            ("A4", "partial", "partial", None, "Part one.", False),
            (
                "U1",
                "abstain",
                "abstain",
                "no_answer_bearing_evidence",
                "The documents available to you do not establish this. Could you share the plan?",
                False,
            ),
            ("U2", "abstain", "abstain", None, "There is no such refund.", False),
            (
                "U3",
                "escalate",
                "escalate",
                "restricted_topic",
                "I have passed this to the Legal team.",
                False,
            ),
            ("U4", "clarify", "answer", None, "Probably yes.", False),
            ("U5", "abstain", None, None, "", True),
        ]
    )
    r = validation.validation_check(
        f,
        {"min_answer_rate_answerable": 0.9, "min_abstention_recall": 0.9},
        TEMPLATES,
        {"answer", "partial"},
    )
    assert (r["answerable"], r["answered"]) == (4, 3)  # A1 A2 A4 of A1..A4
    # U5 is an infrastructure failure: in the denominator, a failure; U1 U2 U3 behaved
    assert (r["unanswerable"], r["expected_behaviour"]) == (5, 3)
    assert r["failed_cases"] == ["U5"]
    assert r["answer_rate"] == pytest.approx(0.75)
    assert r["refusals"] == 4  # A3 U1 U2 U3
    assert r["refusals_without_reason"] == 1  # U2
    assert r["refusals_off_wording"] == 1 and r["off_wording_cases"] == ["U2"]
    assert r["infrastructure_failures"] == 1 and r["passed"] is False


def test_session_lifecycle_read_only_after_close_and_carry(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    with pytest.raises(PermissionDenied):
        reviews.open_session(demo_engine, make_actor("annotator"), "2031-01")
    s: records.SessionView | None = reviews.open_session(demo_engine, RAVI, "2031-01")
    assert s is not None
    with pytest.raises(InputError, match="already exists"):
        reviews.open_session(demo_engine, RAVI, "2031-01")
    fid = reviews.add_finding(
        demo_engine,
        RAVI,
        s.id,
        "False refusals on SLA questions.",
        "high",
        [{"kind": "case", "ref": "CASE-005"}],
    )
    reviews.add_action(
        demo_engine,
        RAVI,
        s.id,
        "Lower the reranker refuse band.",
        "product_owner",
        dt.date(2031, 2, 15),
    )
    s = reviews.get_session(demo_engine, "2031-01")
    assert s is not None and len(s.findings) == 1 and len(s.actions) == 1
    s = reviews.update_session(
        demo_engine,
        RAVI,
        s.id,
        s.version,
        attendees=[RAVI.email, "chen.li@brightwave.example"],
        summary="Two alerts; one finding.",
    )
    with pytest.raises(StaleWriteError):
        reviews.update_session(
            demo_engine, RAVI, s.id, s.version - 1, attendees=[], summary="stale"
        )
    with pytest.raises(InputError, match="not a user"):
        reviews.update_session(demo_engine, RAVI, s.id, s.version, attendees=["x@y.z"], summary="")
    with pytest.raises(InputError, match="validation check before closing"):
        reviews.close_session(demo_engine, RAVI, s.id, s.version)
    run = evalruns.list_runs(demo_engine)[0]
    result = validation.run_validation(demo_engine, RAVI, tax, run.id, "validation", TEMPLATES)
    reviews.store_validation(demo_engine, RAVI, s.id, result)
    s = reviews.get_session(demo_engine, "2031-01")
    assert s is not None and s.validation is not None and s.validation["run"] == run.name
    reviews.close_session(demo_engine, RAVI, s.id, s.version)
    with pytest.raises(InputError, match="closed and read-only"):
        reviews.add_finding(demo_engine, RAVI, s.id, "late", "low")
    with pytest.raises(InputError, match="closed and read-only"):
        reviews.store_validation(demo_engine, RAVI, s.id, {})
    new_id = reviews.carry_finding(demo_engine, RAVI, fid)
    nxt = reviews.get_session(demo_engine, "2031-02")
    assert nxt is not None and nxt.findings[0].id == new_id
    assert nxt.findings[0].carried_from_id == fid


def test_export_has_every_section_and_no_network_references(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    s = reviews.open_session(demo_engine, RAVI, "2031-03")
    reviews.add_finding(demo_engine, RAVI, s.id, "<script>alert(1)</script> in a refusal", "low")
    view = reviews.get_session(demo_engine, "2031-03")
    assert view is not None
    ctx = report.month_context(demo_engine, tax, "2031-03")
    html_text = report.export_html(view, ctx)
    for section in (
        "Attendees",
        "Release gate",
        "Policy and wording changes",
        "Validation check",
        "Findings",
        "Actions",
    ):
        assert section in html_text
    assert "<script>alert(1)</script>" not in html_text  # escaped
    assert not re.search(r"(src|href)\s*=\s*['\"]?https?:", html_text)
    md, images = report.export_markdown(view, ctx)
    for section in ("## Attendees", "## Findings", "## Actions", "## Validation check"):
        assert section in md
    for name in images:
        assert f"]({name})" in md and images[name][:8] == b"\x89PNG\r\n\x1a\n"
    # the page shows the text without paying for the PNGs; the zip gets the same text
    text_only, none = report.export_markdown(view, ctx, render_images=False)
    assert text_only == md and none == {} and images


def test_month_validation() -> None:
    assert records.next_month("2025-12") == "2026-01"
    with pytest.raises(InputError):
        records.month_bounds("2025-13")


def test_a_closed_review_keeps_the_month_as_it_was_when_closed(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    from sqlalchemy import select

    from review.audits import plans
    from review.audits.plans import PlanSpec
    from storage.db import read_session
    from storage.models import AuditLog

    closed = [v for v in reviews.list_sessions(demo_engine) if v.closed]
    opened = [v for v in reviews.list_sessions(demo_engine) if not v.closed]
    assert closed and opened, "the demo has closed reviews and an open one"
    view, live_view = closed[0], opened[0]
    ctx = report.month_context(demo_engine, tax, view.month)
    assert ctx.frozen_tables is not None and ctx.frozen_at
    html_before = report.export_html(view, ctx)
    md_before, _ = report.export_markdown(view, ctx, render_images=False)
    assert [t for t, _ in ctx.charts], "the frozen record keeps the charts"

    # the world moves on: a new audit batch in progress (every live month lists open batches)
    write(
        demo_engine,
        plans.create_plan,
        make_actor("reviewer", "chen.li@brightwave.example"),
        PlanSpec(name="After the close", strata=("decision",), total=6, seed=3),
    )
    live_now = report.live_context(demo_engine, tax, view.month)
    live_audit = dict(report.context_tables(live_now))["Audit batches and weighted estimates"]
    assert "After the close" in set(live_audit["batch"])  # the live month would change...
    again = report.month_context(demo_engine, tax, view.month)
    assert report.export_html(view, again) == html_before  # ...the closed record does not
    assert report.export_markdown(view, again, render_images=False)[0] == md_before
    assert "After the close" not in html_before
    # an open review is live
    open_ctx = report.month_context(demo_engine, tax, live_view.month)
    assert open_ctx.frozen_tables is None
    open_audit = dict(report.context_tables(open_ctx))["Audit batches and weighted estimates"]
    assert "After the close" in set(open_audit["batch"])
    # closing is in the audit log
    with read_session(demo_engine) as s:
        logged = s.scalars(
            select(AuditLog).where(AuditLog.action == "close", AuditLog.entity == "review_session")
        ).all()
    assert {a.entity_id for a in logged} >= {v.month for v in closed}


def test_validation_on_chosen_cases_against_the_authors_calibration_run(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    runs = evalruns.list_runs(demo_engine)
    assert len(runs) >= 2
    ref, other = runs[0], runs[1]
    frame = evalruns.outputs_frame(demo_engine, ref.id, tax)
    first = frame[frame["repeat"] == frame["repeat"].min()]
    keys = list(first[first["answerable"]]["key"][:6]) + list(
        first[~first["answerable"]]["key"][:4]
    )
    a = validation.run_validation(demo_engine, RAVI, tax, ref.id, "all", TEMPLATES, case_keys=keys)
    assert a["cases"] == 10 and a["split"] == "chosen cases"
    assert a["answerable"] == 6 and a["unanswerable"] == 4
    with pytest.raises(InputError, match="not in the run: NOPE-1"):
        validation.run_validation(
            demo_engine, RAVI, tax, ref.id, "all", TEMPLATES, case_keys=["NOPE-1"]
        )
    same = validation.run_validation(
        demo_engine, RAVI, tax, ref.id, "all", TEMPLATES, case_keys=keys, calibration_run_id=ref.id
    )
    assert same["within_tolerance"] and same["calibration_answered"] == a["answered"]
    b = validation.run_validation(
        demo_engine, RAVI, tax, other.id, "all", TEMPLATES, case_keys=keys
    )
    vs = validation.run_validation(
        demo_engine,
        RAVI,
        tax,
        other.id,
        "all",
        TEMPLATES,
        case_keys=keys,
        calibration_run_id=ref.id,
    )
    close = (
        abs(b["answered"] - a["answered"]) <= 1
        and abs(b["expected_behaviour"] - a["expected_behaviour"]) <= 1
    )
    assert vs["within_tolerance"] is close
    assert vs["passed"] == (b["passed"] and close)
    assert (vs["calibration_answered"], vs["calibration_expected_behaviour"]) == (
        a["answered"],
        a["expected_behaviour"],
    )


def test_links_and_case_keys_are_read_as_typed() -> None:
    from review.monthly import records, validation

    assert records.parse_links("case:CASE-005\n\n  trace : bw-1 \nrun") == [
        {"kind": "case", "ref": "CASE-005"},
        {"kind": "trace", "ref": "bw-1"},
        {"kind": "run", "ref": ""},
    ]
    assert records.links_text(({"kind": "case", "ref": "C-1"}, {"kind": "run", "ref": "r"})) == (
        "case:C-1, run:r"
    )
    assert validation.parse_case_keys("CASE-1, CASE-2;CASE-3\n CASE-4  ") == [
        "CASE-1",
        "CASE-2",
        "CASE-3",
        "CASE-4",
    ]
    assert validation.parse_case_keys(" \n ") == []


def test_the_dry_run_is_refused_to_the_author_of_the_version_it_validates(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    run = evalruns.list_runs(demo_engine)[0]
    target = validation.policy_under_validation(demo_engine)
    assert target.author is not None and target.status == "in force"
    author = make_actor("product_owner", target.author)
    with pytest.raises(PermissionDenied, match="someone other than the author"):
        validation.run_validation(demo_engine, author, tax, run.id, "validation", TEMPLATES)
    result = validation.run_validation(demo_engine, RAVI, tax, run.id, "validation", TEMPLATES)
    assert result["ran_by"] == RAVI.email
    assert (result["policy_version"], result["policy_sha256"]) == (target.number, target.sha256)


def test_the_dry_run_re_decides_each_case_with_the_policy_it_validates(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    run = next(r for r in evalruns.list_runs(demo_engine) if r.name.startswith("reference"))
    frame = evalruns.outputs_frame(demo_engine, run.id, tax)
    frame = frame[frame["repeat"] == 0]
    policy = validation.policy_under_validation(demo_engine).policy
    # the reference pipeline logs every signal the signed policy needs (issue 30: it declares
    # none "not produced" on its own), so re-deciding with the policy in force reproduces it
    assert not any((sig or {}).get("not_produced") for sig in frame["signals"])
    same = validation.redecided(policy, frame)
    # the run was decided with the policy in force: the re-decision reproduces every output
    assert same["redecidable"].all()
    assert (same["decision"] == same["logged_decision"]).all()
    vector = policy.ranking_modes["vector"].model_copy(
        update={"refuse_below": 0.99, "caveat_below": 0.995}
    )
    strict = policy.model_copy(update={"ranking_modes": {**policy.ranking_modes, "vector": vector}})
    tighter = validation.redecided(strict, frame)
    answering = {"answer", "partial"}
    assert tighter["decision"].isin(answering).sum() < same["decision"].isin(answering).sum()
    changed = tighter[tighter["decision"] != tighter["logged_decision"]]
    assert len(changed) and set(changed["reason_code"]) == {"support_below_threshold"}
    check = validation.validation_check(
        tighter,
        {"min_answer_rate_answerable": 0.9, "min_abstention_recall": 0.9},
        TEMPLATES,
        answering,
    )
    # refusals the re-decision created are worded from the approved message, not checked
    # against the answer text that was logged
    assert check["refusals_reworded"] == len(changed[~changed["decision"].isin(answering)])


def test_outputs_without_signals_and_crashes_are_failures_not_passes(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    annotator = make_actor("annotator", "ines@test.example")
    ref = next(r for r in evalruns.list_runs(demo_engine) if r.name.startswith("reference"))
    frame = evalruns.outputs_frame(demo_engine, ref.id, tax)
    keys = list(frame.loc[(frame["split"] == "validation") & (frame["repeat"] == 0), "key"])
    lines = []
    for i, k in enumerate(keys):
        if i % 2:
            lines.append(f'{{"case": "{k}", "error": "timed out after 30s"}}')
        else:
            lines.append(f'{{"case": "{k}", "decision": "answer", "text": "Yes."}}')
    items = list(evalruns.iter_outputs(lines, "bare.jsonl", tax))
    run_id = evalruns.import_run(demo_engine, annotator, "bare", "x", items, "bare.jsonl")
    r = validation.run_validation(demo_engine, RAVI, tax, run_id, "validation", TEMPLATES)
    assert r["infrastructure_failures"] == len(keys) // 2
    assert r["not_redecidable"] == len(keys) - len(keys) // 2
    assert r["answerable"] + r["unanswerable"] == len(keys)
    assert (r["answered"], r["expected_behaviour"]) == (0, 0)
    assert r["passed"] is False


def test_a_pending_proposal_can_be_dry_run_but_not_by_its_author(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    choices = validation.validation_choices(demo_engine)
    assert choices[0][0] is None and "in force" in choices[0][1]
    pending = [n for n, label in choices if label.startswith("proposal")]
    assert pending, choices
    number = pending[0]
    target = validation.policy_under_validation(demo_engine, number)
    assert target.status == "pending" and target.author is not None
    run = evalruns.list_runs(demo_engine)[0]
    result = validation.run_validation(
        demo_engine, RAVI, tax, run.id, "validation", TEMPLATES, policy_version=number
    )
    assert (result["policy_version"], result["policy_status"]) == (number, "pending")
    with pytest.raises(PermissionDenied):
        validation.run_validation(
            demo_engine,
            make_actor("product_owner", target.author),
            tax,
            run.id,
            "validation",
            TEMPLATES,
            policy_version=number,
        )
    with pytest.raises(InputError, match="not a version"):
        validation.policy_under_validation(demo_engine, 99)


def _report_texts(engine: Engine, tax: Taxonomy) -> list[str]:
    texts = []
    for view in reviews.list_sessions(engine):
        ctx = report.month_context(engine, tax, view.month)
        texts.append(report.export_html(view, ctx).split("<figure>")[0])  # tables, not SVG
        texts.append(report.export_markdown(view, ctx, render_images=False)[0])
    return texts


def test_the_demo_report_reads_like_the_pages(demo_engine: Engine, tax: Taxonomy) -> None:
    """Every review of the demo, open or closed, as HTML and Markdown: no "nan", no float
    with more than three decimals, rates as percentages, taxonomy labels and people's names
    instead of keys and addresses, the sign-off version labelled as such."""
    texts = _report_texts(demo_engine, tax)
    assert len(texts) >= 4
    slice_key = "near_neighbour_distractor"
    for text in texts:
        plain = text.replace("\\", "")  # Markdown escapes
        assert not re.search(r"\bnan\b", plain, re.IGNORECASE), "a missing value reads nan"
        long = re.findall(r"\d\.\d{4,}", plain)
        assert not long, f"floats with more than three decimals: {long[:5]}"
        assert "0.3409090909090909" not in plain
        assert "@brightwave.example" not in plain.replace("\u2060", "")  # names, not e-mails
        assert "Ravi Menon" in plain
        assert slice_key not in plain and tax.slices[slice_key].label in plain
        assert "false_refusal_rate <=" not in plain and "≤ 10%" in plain
        assert "sign-off v" in plain and "file version" in plain
    html_text = texts[0]
    assert "<td class='fail'>fail</td>" in html_text  # pass/fail in colour


def test_the_validation_check_reads_as_rates_with_counts_and_targets() -> None:
    rows = validation.validation_rows(
        {
            "answerable": 13,
            "answered": 12,
            "answer_rate": 12 / 13,
            "answer_rate_target": 0.9,
            "unanswerable": 0,
            "expected_behaviour": 0,
            "behaviour_rate": float("nan"),
            "behaviour_target": 0.9,
            "ran_by": "ravi.menon@brightwave.example",
            "at": "2026-12-01T19:56:48.484904+00:00",
            "policy_version": 7,
            "policy_file_version": 3,
            "policy_status": "in force",
            "passed": False,
        },
        {"ravi.menon@brightwave.example": "Ravi Menon"},
    )
    value = dict(zip(rows["check"], rows["value"], strict=True))
    assert value["answerable cases answered"] == "92% (12 of 13), target ≥ 90%"
    assert value["unanswerable cases given their expected behaviour"].startswith("undefined")
    assert value["ran by"] == "Ravi Menon"
    assert value["ran at"] == "2026-12-01 19:56 UTC"
    assert value["policy checked"] == "sign-off v7 · file version 3 (in force)"
    assert value["result"] == "fail"
    assert validation.validation_rows({}, {}).empty


def test_the_months_release_gate_counts_the_cases_the_run_left_out(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    """The monthly record's gate is the release gate with the split's ready cases in scope, so a
    run that left cases out fails there as in `workbench gate`, instead of "not measured"."""
    opened = [v for v in reviews.list_sessions(demo_engine) if not v.closed]
    ctx = report.live_context(demo_engine, tax, opened[0].month)
    assert ctx.gate_run is not None
    rows = [r for r in ctx.gate if r.row == "Every case in scope has an output"]
    assert [r.scope for r in rows][:1] == ["overall"]
    run = next(r for r in evalruns.list_runs(demo_engine) if r.name == ctx.gate_run)
    frame = evalruns.outputs_frame(demo_engine, run.id, tax)
    answered = set(frame.loc[frame["split"] == "test", "key"].astype(str))
    expected = set(splits.cases_in_scope(demo_engine, "test")["key"].astype(str))
    assert rows[0].n == len(expected) > 0
    assert rows[0].k == len(expected & answered)  # k of n cases have an output
    assert rows[0].passed == (expected <= answered)
