"""The Thresholds page and the Monthly review say which decisions their release figures are
on (issue 35 item 6c), and the Thresholds History tab shows the change in force (item 7):
after an approval its default diff is the new version against the version it replaced, not a
proposal that was never approved, and every picker and header names a version the same way."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine

from review.admin import users
from review.core.identity import Role
from review.core.terms import VersionStatus
from review.monthly import report
from review.policy import display as policy_display
from review.policy import inforce, signoff
from review.thresholds import display
from tests.helpers.pages import PAULA, app, no_exception, open_tab, readable

OMAR = "omar.haddad@brightwave.example"
CHEN = "chen.li@brightwave.example"
RAVI = "ravi.menon@brightwave.example"
PAGE = "pages/thresholds_page.py"


def _actor(engine: Engine, email: str) -> Any:
    return users.to_actor(users.get_by_email(engine, email))  # type: ignore[arg-type]


def _approve_a_competitor(engine: Engine) -> tuple[signoff.VersionView, signoff.VersionView]:
    """The demo's pending proposal P stays pending (never approved); a second proposal Q on
    top of the same version in force is approved. Returns (P, Q)."""
    (p,) = [v for v in signoff.versions(engine, inforce.KIND) if v.status == "pending"]
    pif = inforce.in_force(engine)
    text = pif.text.replace("refuse_below: 0.55", "refuse_below: 0.56", 1)
    assert text != pif.text
    author = next(e for e in (OMAR, PAULA, CHEN) if e != p.author)
    qid = signoff.propose(engine, _actor(engine, author), inforce.KIND, text, "A small step.")
    signers = [(PAULA, Role.product_owner), (OMAR, Role.product_owner), (CHEN, Role.compliance)]
    signed: set[Role] = set()
    for email, role in signers:
        if email == author or role in signed:
            continue
        signoff.sign(engine, _actor(engine, email), qid, "approve", role=role)
        signed.add(role)
    q = signoff.get_version(engine, qid)
    assert q.status == VersionStatus.approved
    return signoff.get_version(engine, p.id), q


def test_headings_and_the_change_in_force_are_one_vocabulary(demo_engine: Engine) -> None:
    p, q = _approve_a_competitor(demo_engine)
    allv = signoff.versions(demo_engine, inforce.KIND)
    before, after = policy_display.in_force_change(allv, q.id)  # type: ignore[misc]
    assert after.id == q.id and before is not None and before.id == q.parent_id
    assert before.id != p.id
    label = policy_display.version_heading
    assert label(q, q.id) == f"sign-off v{q.number} · file version {q.file_version} (in force)"
    assert label(p, q.id).endswith("(proposal, waiting for sign-off)")
    assert label(before, q.id).endswith("(approved, replaced since)")
    assert label(None, q.id) == "the shipped file"
    assert policy_display.in_force_change(allv, None) is None


def test_history_defaults_to_the_change_in_force(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    p, q = _approve_a_competitor(demo_engine)
    parent = signoff.get_version(demo_engine, q.parent_id)  # type: ignore[arg-type]
    at = app(demo_url, monkeypatch, CHEN).run()
    at.switch_page(PAGE).run()
    open_tab(at, "History")
    no_exception(at)
    a = at.selectbox(key=f"thr_hist_a_{q.id}")
    b = at.selectbox(key=f"thr_hist_b_{q.id}")
    assert (a.value, b.value) == (parent.id, q.id)
    now = f"sign-off v{q.number} · file version {q.file_version} (in force)"
    was = (
        f"sign-off v{parent.number} · file version {parent.file_version} "
        f"(approved, replaced by version {q.number})"
    )
    assert any(
        readable(c) == f"The change in force: {now} against the version it replaced, {was}."
        for c in at.caption
    )
    diff = next(c.value for c in at.code if c.value.startswith("---"))
    assert diff.splitlines()[:2] == [f"--- {was}", f"+++ {now}"]
    assert "+    refuse_below: 0.56" in diff.splitlines()
    # the proposal never approved reads in the same words, not "proposal: ..."
    stale = (
        f"sign-off v{p.number} · file version {p.file_version} "
        f"(stale: superseded by version {q.number})"
    )
    assert stale in a.options and not any(o.startswith("proposal") for o in a.options)
    assert all(o.startswith(("sign-off v", "the shipped file")) for o in a.options)


def test_the_calibrate_tab_says_its_targets_are_on_decisions_re_made_from_scores(
    demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = app(demo_url, monkeypatch, PAULA).run()
    at.switch_page(PAGE).run()
    no_exception(at)
    shown = [readable(c) for c in at.caption]
    assert any(c.startswith(display.GATE_BASIS) for c in shown), shown
    newest = at.selectbox(key="thr_run").options[0]
    assert any(
        f"The Monthly review's release gate of this run, {newest}, is on the decisions the "
        "pipeline logged" in c
        for c in shown
    ), shown
    # another run: the monthly review does not gate it, so it is not named
    older = at.selectbox(key="thr_run").options[1]
    at.selectbox(key="thr_run").select(older).run()
    shown = [readable(c) for c in at.caption]
    assert any(c.startswith(display.GATE_BASIS) for c in shown)
    assert not any("The Monthly review's release gate" in c for c in shown)


def test_the_sign_off_tab_says_it_too(demo_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = app(demo_url, monkeypatch, CHEN, tab="signoff").run()
    at.switch_page(PAGE).run()
    no_exception(at)
    assert any(readable(c).startswith(display.GATE_BASIS) for c in at.caption)


def test_the_monthly_review_says_its_gate_is_on_logged_decisions(
    demo_url: str, demo_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = app(demo_url, monkeypatch, RAVI).run()
    at.switch_page("pages/review_page.py").run()
    no_exception(at)
    shown = [readable(c) for c in at.caption]
    assert any(
        c.startswith("Release gate on the decisions the pipeline logged (")
        and "The Thresholds page shows this run's targets on decisions re-made from its scores" in c
        for c in shown
    ), shown


def test_the_sentences() -> None:
    ctx = report.MonthContext("2025-06", [], "run A", [], [], [])
    assert report.gate_basis(ctx) == (
        "Release gate on the decisions the pipeline logged (run A, test split): each output's "
        "own decision, as production would have shown it."
    )
    rescored = report.MonthContext("2025-06", [], "run A", [], [], [], gate_rescored=True)
    assert "Thresholds page" in report.gate_basis(rescored)
    assert report.gate_basis(report.MonthContext("2025-06", [], None, [], [], [])) == ""
    run = {"kind": "run", "run_id": 4, "run_name": "run A"}
    assert display.gate_basis(run, 5) == display.GATE_BASIS
    assert display.gate_basis(run, 4).endswith(
        "The Monthly review's release gate of this run, run A, is on the decisions the "
        "pipeline logged, so the two can differ."
    )
    audit = display.gate_basis({"kind": "audit", "plan_ids": [1]}, 4)
    assert "audited trace's logged score" in audit and "Monthly" not in audit
    # a frozen review keeps the sentence
    frozen = report.thaw_context("2025-06", report.freeze_context(rescored))
    assert report.gate_basis(frozen) == report.gate_basis(rescored)


def test_with_no_run_yet_the_calibrate_tab_links_to_runs(
    empty_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh workbench with a corpus and cases but no run (the public data trial, issue 35):
    the tab says calibration needs outcomes from the Runs page, and links to it."""
    from review.core.identity import SYSTEM
    from storage.db import make_engine

    eng = make_engine(empty_url)
    users.add_user(eng, SYSTEM, "po@example.org", "Po", ["product_owner"], False)
    eng.dispose()
    at = app(empty_url, monkeypatch, "po@example.org").run()
    at.switch_page(PAGE).run()
    no_exception(at)
    assert any(readable(i).startswith("Calibration needs outcomes") for i in at.info)
    assert "runs" in [link.proto.page for link in at.get("page_link")]


def test_an_empty_month_says_why_its_sections_are_empty(
    empty_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A month reviewed after the fact (the public data trial opened October's review in
    December, its only run stored in December): the release gate read "(none)", as if
    nothing had been gated; each empty section now says why it is empty."""
    from review.core.identity import SYSTEM
    from review.monthly import reviews
    from storage.db import make_engine

    eng = make_engine(empty_url)
    rev = users.add_user(eng, SYSTEM, "rev@example.org", "Rev", ["reviewer"], False)
    reviews.open_month(eng, users.to_actor(rev), "2026-10")
    eng.dispose()
    at = app(empty_url, monkeypatch, "rev@example.org").run()
    at.switch_page("pages/review_page.py").run()
    no_exception(at)
    shown = [readable(c) for c in at.caption]
    assert "(none)" not in shown
    assert (
        "No evaluation run was stored by the end of 2026-10: the release gate is on the newest "
        "run created by then. A run stored later counts for a later month's review."
    ) in shown
    assert (
        "No threshold or wording version was proposed or signed in 2026-10, and none waits "
        "for sign-off."
    ) in shown
