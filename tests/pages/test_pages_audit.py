"""AppTest of the Audit page: plans (create, count, draw, change warning), the verdict form,
claim review, promotion, estimates and export; with the demo batches and on empty databases."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import Button

from review.admin import users
from review.audits import display, estimates, plans, queue
from review.audits import verdicts as audit_verdicts
from review.audits.plans import PlanSpec
from review.audits.population import PopulationFilter
from review.core.errors import PermissionDenied
from review.core.identity import SYSTEM
from review.core.taxonomy import Taxonomy, taxonomy
from review.demo import batches
from review.wording.findings import rule_title
from storage.db import make_engine, migrate, read_session
from storage.models import AuditVerdict, Case, SamplingPlan
from tests.helpers.actors import REVIEWER, make_actor
from tests.helpers.audits import CONTRACT, PLANS, REFUND, add_trace, realistic_traces
from tests.helpers.pages import ADA, INES, no_exception, open_tab, page_app, readable
from tests.helpers.transact import write

RAVI = "ravi.menon@brightwave.example"
PAGE = "pages/audit_page.py"
TAB = "aud_tab"  # the page's lazy tabs: only the open one is drawn


@pytest.fixture
def audit_url(demo_url: str, tax: Taxonomy) -> str:
    """The demo database with production traces and the two demo audit batches."""
    eng = make_engine(demo_url)
    realistic_traces(eng)
    batches.build_demo_audits(eng, tax)
    eng.dispose()
    return demo_url


def run(url: str, monkeypatch: pytest.MonkeyPatch, user: str = RAVI, **query: str) -> AppTest:
    at = page_app(url, monkeypatch, PAGE, user, **query).run()
    no_exception(at)
    return at


def button(at: AppTest, label: str) -> Button:
    found = [b for b in at.button if b.label == label]
    assert found, [b.label for b in at.button]
    return found[0]


def shown(elements: object) -> list[str]:
    """Texts of alerts and captions as a person reads them (markdown escapes removed)."""
    return [str(e.value).replace("\\", "") for e in elements]  # type: ignore[attr-defined]


def errors(at: AppTest) -> list[str]:
    return shown(at.error)


def test_renders_with_the_demo_batches(audit_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = run(audit_url, monkeypatch)
    assert readable(at.title[0]) == "Audit"
    assert [t.label for t in at.tabs] == ["Plans", "My queue", "Estimates", "Export"]
    batch = at.selectbox(key="aud_plan")
    assert batches.DEMO_OPEN in batch.format_func(batch.value)  # newest first
    assert not at.error
    # the finished batch: estimates with weighted and raw rates side by side
    eng = make_engine(audit_url)
    done = next(p for p in plans.list_plans(eng) if p.name.startswith(batches.DEMO_COMPLETE))
    eng.dispose()
    at.selectbox(key="aud_plan").set_value(done.id).run()
    no_exception(at)
    open_tab(at, "Estimates", TAB)
    no_exception(at)
    labels = [df.value for df in at.dataframe]
    assert any("population rate, weighted (95 %)" in d.columns for d in labels)
    assert any("sample rate (95 % Wilson)" in d.columns for d in labels)
    # a stratum with one audited trace is named, not taken as certain
    eng = make_engine(audit_url)
    single = estimates.estimates(eng, done.id).single_item_strata
    eng.dispose()
    warned = [w for w in shown(at.warning) if "with one audited trace" in w]
    assert bool(warned) == bool(single)
    named = [display.stratum_label(s, done.spec.strata, taxonomy()) for s in single[:5]]
    assert all(str(name) in warned[0] for name in named)  # each stratum in words


@pytest.mark.parametrize("user", [ADA, INES, RAVI])
def test_renders_on_the_plain_demo(
    demo_url: str, monkeypatch: pytest.MonkeyPatch, user: str
) -> None:
    at = run(demo_url, monkeypatch, user)
    assert readable(at.title[0]) == "Audit"
    assert bool([b for b in at.button if b.label == "Create plan"]) == (user == RAVI)


@pytest.fixture
def no_traces_url(tmp_path: Path) -> str:
    """A database with one reviewer and no traces."""
    url = f"sqlite:///{tmp_path / 'bare.db'}"
    eng = make_engine(url)
    migrate(eng)
    users.add_user(eng, SYSTEM, RAVI, "Ravi Menon", ["reviewer"], True)
    eng.dispose()
    return url


def test_no_traces_no_plans(no_traces_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = run(no_traces_url, monkeypatch)
    assert any("No sampling plans yet" in t for t in shown(at.info))
    open_tab(at, "My queue", TAB)
    assert any("No audit batch yet" in t for t in shown(at.info))
    open_tab(at, "Plans", TAB)
    # creating a plan on an empty population says so and writes nothing
    at.text_input(key="aud_name").input("June review")
    button(at, "Create plan").click().run()
    no_exception(at)
    assert any("Nothing was created" in e and "population is empty" in e for e in errors(at))
    eng = make_engine(no_traces_url)
    assert plans.list_plans(eng) == []
    eng.dispose()


def test_renders_on_an_empty_database(empty_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = run(empty_url, monkeypatch, "solo@example.org")
    assert any("Plans are created and drawn by reviewers" in i for i in shown(at.info))


def test_create_count_and_draw_a_plan(audit_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    eng = make_engine(audit_url)
    counts = plans.count_population(eng, PopulationFilter(), ("decision",))
    eng.dispose()
    at = run(audit_url, monkeypatch)
    at.multiselect(key="aud_strata").set_value(["decision"])
    button(at, "Count the population").click().run()
    no_exception(at)
    expected = f"{sum(c.count for c in counts)} traces in {len(counts)} strata"
    assert any(expected in c for c in shown(at.caption))

    at.text_input(key="aud_name").input("Ad-hoc check")
    at.multiselect(key="aud_strata").set_value(["decision"])
    at.number_input(key="aud_total").set_value(15)
    at.number_input(key="aud_seed").set_value(11)
    button(at, "Create plan").click().run()
    no_exception(at)
    assert any("Plan 'Ad-hoc check' created" in s for s in shown(at.success))
    eng = make_engine(audit_url)
    with read_session(eng) as s:
        row = s.scalar(select(SamplingPlan).where(SamplingPlan.name == "Ad-hoc check"))
    assert row is not None and row.status == "planned" and row.seed == 11
    at.button(key="aud_draw").click().run()
    no_exception(at)
    assert any("Drew 15 traces" in s for s in shown(at.success))
    assert queue.count_items(eng, row.id) == 15
    eng.dispose()

    # error path: the same name again writes nothing and says why
    at.text_input(key="aud_name").input("Ad-hoc check")
    button(at, "Create plan").click().run()
    no_exception(at)
    assert any("already exists" in e for e in errors(at))
    at.text_input(key="aud_name").input("Explicit")
    at.radio(key="aud_alloc").set_value("explicit")
    at.text_area(key="aud_explicit").input("answer: lots")
    button(at, "Create plan").click().run()
    assert any("'lots' is not a whole number" in e for e in errors(at))


def test_plan_form_filters_and_stratifies_by_index_version(
    audit_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    eng = make_engine(audit_url)
    for i in range(5):  # 3 on idx-new (2 with prompt p-2), 2 on idx-old
        add_trace(eng, f"v-{i}", versions={"index": "idx-new" if i < 3 else "idx-old",
                                           "prompt": "p-2" if i < 2 else "p-1"})  # fmt: skip
    eng.dispose()
    at = run(audit_url, monkeypatch)
    assert {"idx-new", "idx-old"} <= set(at.multiselect(key="aud_f_index").options)
    at.multiselect(key="aud_f_index").set_value(["idx-new"])
    at.multiselect(key="aud_strata").set_value(["version.prompt"])
    button(at, "Count the population").click().run()
    no_exception(at)
    assert any("3 traces in 2 strata (index versions: idx-new)" in c for c in shown(at.caption))
    table = next(d.value for d in at.dataframe if list(d.value.columns) == ["stratum", "traces"])
    assert dict(zip(table["stratum"], table["traces"], strict=True)) == {
        "Prompt version: p-1": 1,
        "Prompt version: p-2": 2,
    }


def test_a_changed_population_is_shown_on_the_plan(
    audit_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    eng = make_engine(audit_url)
    pid = write(eng, plans.create_plan, REVIEWER, PlanSpec(name="to draw", total=5))
    n = plans.check_population(eng, pid).current_total
    add_trace(eng, "arrived-later")
    eng.dispose()
    at = run(audit_url, monkeypatch, plan=str(pid))
    assert any(f"{n} → {n + 1} traces" in w for w in shown(at.warning))
    at.button(key="aud_draw").click().run()
    assert any("Nothing was drawn" in e for e in errors(at))
    at.button(key="aud_recount").click().run()
    no_exception(at)
    at.button(key="aud_draw").click().run()
    no_exception(at)
    assert any("Drew 5 traces" in s for s in shown(at.success))


def test_the_plan_shows_traces_added_after_it_was_shown_without_waiting_for_the_cache(
    audit_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page keeps a plan's population check a minute; traces added meanwhile (an import
    here or from the command line) are shown on the next rerun, not a minute later."""
    eng = make_engine(audit_url)
    pid = write(eng, plans.create_plan, REVIEWER, PlanSpec(name="seen twice", total=5))
    n = plans.check_population(eng, pid).current_total
    at = run(audit_url, monkeypatch, plan=str(pid))
    assert not any("traces" in w and "→" in w for w in shown(at.warning))
    add_trace(eng, "imported-meanwhile")
    eng.dispose()
    at.run()
    no_exception(at)
    assert any(f"{n} → {n + 1} traces" in w for w in shown(at.warning))


def test_verdict_form_happy_and_error_paths(
    audit_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    eng = make_engine(audit_url)
    open_plan = next(p for p in plans.list_plans(eng) if p.name == batches.DEMO_OPEN)
    before = queue.progress(eng, REVIEWER, open_plan.id)
    at = run(audit_url, monkeypatch, plan=str(open_plan.id))
    open_tab(at, "My queue", TAB)
    button(at, "Next trace").click().run()
    no_exception(at)
    radio = [r for r in at.radio if r.key and r.key.startswith("aud_verdict_")]
    item = int(radio[0].key.rsplit("_", 1)[1])  # type: ignore[union-attr]
    assert str(item) in str(at.query_params["item"])  # the deep link follows the item
    at.radio(key=f"aud_verdict_{item}").set_value("false_refusal")
    if at.checkbox(key=f"aud_claimreview_{item}").value:
        at.checkbox(key=f"aud_claimreview_{item}").uncheck()
    at.run()
    at.button(key=f"aud_save_{item}").click().run()
    no_exception(at)
    assert any("say where it failed" in e for e in errors(at))
    at.pills(key=f"aud_stages_{item}").set_value(["policy_too_strict"])
    at.text_area(key=f"aud_notes_{item}").input("The refund policy answers this.")
    at.button(key=f"aud_save_{item}").click().run()
    no_exception(at)
    assert any("Saved your verdict" in s for s in shown(at.success))
    mine = audit_verdicts.my_verdict(eng, make_actor("reviewer", RAVI), item)
    assert mine is not None and mine.verdict == "false_refusal"
    assert mine.stages == ("policy_too_strict",)
    assert queue.progress(eng, REVIEWER, open_plan.id).verdicts == before.verdicts + 1
    eng.dispose()
    # after saving: the verdicts on the trace and a way on
    assert at.button(key="aud_next")


def answer_item(url: str) -> int:
    """A plan holding one answer trace whose third claim cites a filtered chunk."""
    eng = make_engine(url)
    add_trace(
        eng,
        "claims-1",
        answer_text=(
            f"Monthly charges can be refunded within 14 days [{REFUND['chunk_id']}]. "
            "The Team plan has 20 seats. Enterprise gets a credit for unused months."
        ),
        citations=[
            {"claim": "The Team plan includes 20 seats.", "chunk_ids": [PLANS["chunk_id"]]},
            {"claim": "Enterprise credit", "chunk_ids": [CONTRACT["chunk_id"]]},
        ],
        chunks=[REFUND, PLANS, CONTRACT],
        feedback="answer_wrong",
        customer_tier="claims-test",
    )
    pid = write(
        eng,
        plans.create_plan,
        REVIEWER,
        PlanSpec(name="claims", filter=PopulationFilter(customer_tiers=("claims-test",)), total=1),
    )
    write(eng, plans.draw_plan, REVIEWER, pid)
    with read_session(eng) as s:
        from storage.models import AuditItem

        item = s.scalar(select(AuditItem.id).where(AuditItem.plan_id == pid))
    eng.dispose()
    assert item is not None
    return int(item)


def test_claim_review_edits_claims_and_refuses_a_passing_verdict_on_a_failing_claim(
    audit_url: str, monkeypatch: pytest.MonkeyPatch, tax: Taxonomy
) -> None:
    item = answer_item(audit_url)
    at = run(audit_url, monkeypatch, item=str(item))
    assert at.checkbox(key=f"aud_claimreview_{item}").value is True
    texts = [t for t in at.text_area if t.key and t.key.startswith(f"aud_ct_{item}_")]
    assert [t.value for t in texts][1] == "The Team plan has 20 seats."
    cites = [m for m in at.multiselect if m.key and m.key.startswith(f"aud_cc_{item}_")]
    assert [c.value for c in cites] == [
        [REFUND["chunk_id"]],
        [PLANS["chunk_id"]],
        [CONTRACT["chunk_id"]],
    ]
    # picked from the trace's chunks, read by rank, document and first words
    assert all(opt.startswith("#") for opt in cites[0].options)
    assert cites[0].options == cites[1].options
    for sb in [s for s in at.selectbox if s.key and s.key.startswith(f"aud_cv_{item}_")]:
        sb.set_value("supported")
    at.radio(key=f"aud_verdict_{item}").set_value("supported_answer")
    at.run()
    no_exception(at)
    assert any("Answer fails" in c for c in shown(at.caption))  # CONTRACT was filtered out
    at.button(key=f"aud_save_{item}").click().run()
    assert any("claim 3" in e and "not in the context" in e for e in errors(at))

    # the reviewer edits the list: adds a claim, removes the third, marks the new one
    at.button(key=f"aud_add_{item}").click().run()
    no_exception(at)
    texts = [t for t in at.text_area if t.key and t.key.startswith(f"aud_ct_{item}_")]
    assert len(texts) == 4
    texts[3].input("Refunds go back to the original payment method.").run()
    remove = [b for b in at.button if b.key and b.key.startswith(f"aud_cr_{item}_")][2]
    remove.click().run()
    no_exception(at)
    verdicts = [s for s in at.selectbox if s.key and s.key.startswith(f"aud_cv_{item}_")]
    assert len(verdicts) == 3
    verdicts[2].set_value("unsupported")
    at.radio(key=f"aud_verdict_{item}").set_value("partially_supported")
    at.pills(key=f"aud_stages_{item}").set_value(["generator_ignored_signal"])
    at.button(key=f"aud_save_{item}").click().run()
    no_exception(at)
    assert not errors(at)
    eng = make_engine(audit_url)
    with read_session(eng) as s:
        row = s.scalar(select(AuditVerdict).where(AuditVerdict.item_id == item))
    assert row is not None and row.verdict == "partially_supported"
    assert [c["text"] for c in row.claims][2] == "Refunds go back to the original payment method."
    assert [c["status"] for c in row.claims] == ["pass", "pass", "fail"]

    # promote it to a case from the page
    at.selectbox(key=f"aud_split_{item}").set_value("test")
    at.button(key=f"aud_promote_{item}").click().run()
    no_exception(at)
    assert any("Draft case" in s for s in shown(at.success))
    with read_session(eng) as s:
        case = s.scalar(select(Case).where(Case.notes.like("%claims-1%")))
    assert case is not None and case.split == "test" and case.expected_decision == "partial"
    eng.dispose()


def test_annotators_read_but_do_not_audit(audit_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = run(audit_url, monkeypatch, INES)
    assert not [b for b in at.button if b.label in ("Create plan", "Next trace")]
    open_tab(at, "My queue", TAB)
    assert any("Auditing is for reviewers" in i for i in shown(at.info))
    assert not [b for b in at.button if b.label in ("Create plan", "Next trace")]


def test_restricted_item_link_needs_clearance(
    audit_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    eng = make_engine(audit_url)
    add_trace(eng, "secret-1", restricted=True, customer_tier="secret-test",
              query="What did the Halvorsen settlement pay?")  # fmt: skip
    pid = write(
        eng,
        plans.create_plan,
        REVIEWER,
        PlanSpec(name="secret", filter=PopulationFilter(customer_tiers=("secret-test",)), total=1),
    )
    write(eng, plans.draw_plan, REVIEWER, pid)
    item = queue.list_items(eng, pid)[0].id
    eng.dispose()
    at = run(audit_url, monkeypatch, INES, item=str(item))
    assert any("restricted" in e for e in errors(at))
    assert "Halvorsen" not in str([t.value for t in at.text])
    at = run(audit_url, monkeypatch, RAVI, item=str(item))
    assert "What did the Halvorsen settlement pay?" in [t.value for t in at.text]


def test_export_offers_both_files(audit_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = run(audit_url, monkeypatch)
    open_tab(at, "Export", TAB)
    at.button(key="aud_export").click().run()
    no_exception(at)
    files = at.session_state["aud_export_files"]
    assert files[1].splitlines()[0].startswith('{"allocation"')
    assert files[2].startswith("plan,seed,fingerprint")
    eng = make_engine(audit_url)
    with read_session(eng) as s:
        assert s.scalar(select(func.count(SamplingPlan.id))) == 2
    eng.dispose()


def test_the_verdict_form_shows_the_wording_findings_of_a_refusal(
    audit_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The production wording check feeds the audit's wording-violation verdict: a sampled
    refusal that breaks a wording rule shows the rule beside the verdict form."""
    from review.wording import production
    from storage.models import AuditItem

    eng = make_engine(audit_url)
    ravi = users.to_actor(users.get_by_email(eng, RAVI))  # type: ignore[arg-type]
    with read_session(eng) as s:
        items = s.execute(select(AuditItem.id, AuditItem.plan_id, AuditItem.trace_pk)).all()
    found = None
    for item_id, plan_id, trace_pk in items:
        try:
            hit = production.trace_findings(eng, ravi, trace_pk)
        except PermissionDenied:
            continue
        if hit.findings:
            found = (item_id, plan_id, hit)
            break
    if found is None:  # the demo sample holds no such refusal: sample one that does
        pk = add_trace(
            eng, "wording-1", decision="abstain", reason_code="no_answer_bearing_evidence",
            answer_text="That policy does not exist. Call Maria Lopez on 555-0100.",
        )  # fmt: skip
        pid = write(
            eng,
            plans.create_plan,
            REVIEWER,
            PlanSpec(name="wording", total=1, seed=1, filter=PopulationFilter()),
        )
        write(eng, plans.draw_plan, REVIEWER, pid)
        with read_session(eng) as s:
            drawn = s.scalar(select(AuditItem.id).where(AuditItem.plan_id == pid))
        assert drawn is not None
        found = (drawn, pid, production.trace_findings(eng, ravi, pk))
    item_id, plan_id, hit = found
    assert hit.findings
    at = run(audit_url, monkeypatch, plan=str(plan_id), item=str(item_id))
    no_exception(at)
    shown = " ".join(str(readable(m)) for m in at.markdown)
    assert "Refusal wording check" in shown
    table = next(d.value for d in at.dataframe if "rule" in d.value.columns)
    assert set(table["rule"]) == {rule_title(f.rule) for f in hit.findings}


def test_chunks_beside_the_form_are_picked_not_typed_and_claims_take_verdict_keys(
    audit_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 17, item 7: every chunk in full beside the verdict form; a claim's chunks are
    picked from the trace's own; the keys 1-4 judge the claim in hand and move on."""
    item = answer_item(audit_url)
    at = run(audit_url, monkeypatch, item=str(item))
    no_exception(at)
    texts = [t.value for t in at.text]
    for chunk in (REFUND, PLANS, CONTRACT):  # in full, not cut in a table cell
        assert chunk["text"] in texts
    assert any("authorization filter removed it" in w for w in shown(at.warning))
    cites = [m for m in at.multiselect if m.key and m.key.startswith(f"aud_cc_{item}_")]
    labels = cites[0].options
    assert labels[0].startswith("#1 · POL-REFUND-MONTHLY@2 · 2.1 A monthly plan charge")
    assert labels[2].endswith("not in the context")
    cites[1].set_value([REFUND["chunk_id"], PLANS["chunk_id"]]).run()
    no_exception(at)
    cites = [m for m in at.multiselect if m.key and m.key.startswith(f"aud_cc_{item}_")]
    assert cites[1].value == [REFUND["chunk_id"], PLANS["chunk_id"]]
    # keys: 1 supported, 4 not a claim; each judges the claim in hand, then the next one
    assert any("Keys judge claim 1 of 3" in c for c in shown(at.caption))
    at.button(key=f"aud_key_supported_{item}").click().run()
    no_exception(at)
    at.button(key=f"aud_key_not_a_claim_{item}").click().run()
    no_exception(at)
    verdicts = [s for s in at.selectbox if s.key and s.key.startswith(f"aud_cv_{item}_")]
    assert [v.value for v in verdicts] == ["supported", "not_a_claim", "(not judged)"]
    assert any("Keys judge claim 3 of 3" in c for c in shown(at.caption))
    at.button(key=f"aud_prevclaim_{item}").click().run()
    assert any("Keys judge claim 2 of 3" in c for c in shown(at.caption))
    assert not at.warning or all("Session State" not in w for w in shown(at.warning))
    # "not a claim" is stored and left out of the check
    at.button(key=f"aud_nextclaim_{item}").click().run()
    at.button(key=f"aud_key_unsupported_{item}").click().run()
    at.radio(key=f"aud_verdict_{item}").set_value("unsupported_answer")
    at.pills(key=f"aud_stages_{item}").set_value(["generator_ignored_signal"]).run()
    save = at.button(key=f"aud_save_{item}")
    assert save.label == "Save verdict [Ctrl+Enter]"
    save.click().run()
    no_exception(at)
    assert not errors(at)
    eng = make_engine(audit_url)
    with read_session(eng) as s:
        row = s.scalar(select(AuditVerdict).where(AuditVerdict.item_id == item))
    assert row is not None
    assert [c["verdict"] for c in row.claims] == ["supported", "not_a_claim", "unsupported"]
    assert row.claims[1]["cited"] == [REFUND["chunk_id"], PLANS["chunk_id"]]
    eng.dispose()


def test_only_the_open_tab_is_drawn_and_a_verdict_in_progress_outlives_a_look_elsewhere(
    audit_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    item = answer_item(audit_url)
    at = run(audit_url, monkeypatch, item=str(item))  # a link to an item opens My queue
    assert at.session_state[TAB] == "My queue"
    assert not [b for b in at.button if b.label == "Create plan"]  # the Plans tab is not drawn
    at.radio(key=f"aud_verdict_{item}").set_value("unsupported_answer")
    at.text_area(key=f"aud_notes_{item}").input("Half of it is made up.")
    at.run()
    open_tab(at, "Estimates", TAB)
    no_exception(at)
    assert not [r for r in at.radio if r.key == f"aud_verdict_{item}"]
    open_tab(at, "My queue", TAB)
    no_exception(at)
    assert at.radio(key=f"aud_verdict_{item}").value == "unsupported_answer"
    assert at.text_area(key=f"aud_notes_{item}").value == "Half of it is made up."
    assert all("Session State" not in w for w in shown(at.warning))


def test_save_without_a_verdict_is_refused_at_the_button_and_keys_are_shown_on_the_options(
    audit_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Save button is never disabled (a disabled button's Ctrl+Enter did nothing, with no
    message): without a verdict it says why, right under it; the verdict and the stages show
    the keys that pick them."""
    item = answer_item(audit_url)
    at = run(audit_url, monkeypatch, item=str(item))
    save = at.button(key=f"aud_save_{item}")
    assert not save.disabled
    assert save.proto.shortcut == "ctrl+enter"
    save.click().run()
    no_exception(at)
    assert any("Pick a verdict first (keys A–G); nothing was saved." in e for e in errors(at))
    assert not at.success
    verdict = at.radio(key=f"aud_verdict_{item}")
    assert [readable(o) for o in verdict.options[:2]] == [
        "A · Correct refusal",
        "B · False refusal (I expected an answer)",
    ]
    stages = at.pills(key=f"aud_stages_{item}")
    shown_stages = [readable(getattr(o, "content", o)) for o in stages.options]
    assert shown_stages[0] == "5 · Retrieval missed the evidence"
    eng = make_engine(audit_url)
    assert audit_verdicts.my_verdict(eng, make_actor("reviewer", RAVI), item) is None
    eng.dispose()
    # saved: the message sits with the form, not at the top of the page
    verdict.set_value("unsupported_answer")
    at.pills(key=f"aud_stages_{item}").set_value(["retrieval_missed"]).run()
    at.button(key=f"aud_save_{item}").click().run()
    no_exception(at)
    assert any("Saved your verdict" in s for s in shown(at.success))
