"""One fixtures builder for the demo data and the tests.

The demo company is Brightwave Software (fictional). Its documents live in
``review/demo/docs`` as Markdown with front matter and its cases in ``review/demo/cases.jsonl``;
both are loaded through the same importers a user would use, so the demo exercises them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

from sqlalchemy import Engine, func, select

from review.cases import cases
from review.core import clearance
from review.core.identity import Role
from review.core.taxonomy import Taxonomy
from review.core.terms import CaseStatus
from review.corpus import corpus
from review.demo import months, tracedemo, wording_versions
from review.demo.batches import build_demo_audits
from review.demo.case_families import build_demo_variants
from review.demo.files import DEMO_CASE_BATCH, DEMO_CASES, DEMO_DOCS
from review.demo.people import DEMO_ACTOR, DEMO_USERS, demo_actor
from review.evaluation import evalruns, execution, refpipeline
from review.labels import labeling
from review.policy import chain, inforce, signoff
from review.thresholds import thresholds
from review.thresholds.thresholds import configured_pipeline
from review.traces import importer
from storage.db import read_session, run_write
from storage.models import Case, Document, Label, Trace, User

# Twelve weeks of production traffic for the demo; the test suite builds a smaller sample
# (the same generator) to stay fast.
DEMO_TRACES = 20_000


@dataclass(frozen=True)
class DemoRun:
    name: str
    version: str
    spec: str  # module:function, as `workbench evaluate --pipeline` takes it
    pipeline: Callable[[], execution.Pipeline]  # a fresh one per build (seeded sampling)
    repeats: int
    at: dt.datetime


# Three months of the same pipeline family, oldest first (the drift view reads them in this
# order): a sampling prototype run three times per case, the naive configuration, and the
# reference. The newest run stays the reference (the thresholds and reviews read it).
DEMO_RUNS: tuple[DemoRun, ...] = (
    DemoRun(
        "sampled-v0 (May)",
        "rag-sampled-2025.05",
        "review.evaluation.refpipeline:sampled",
        lambda: refpipeline.Sampled(seed=2025),
        3,
        dt.datetime(2025, 5, 20, 9, 0, tzinfo=dt.UTC),
    ),
    DemoRun(
        "naive-v0 (June)",
        "rag-naive-2025.06",
        "review.evaluation.refpipeline:naive",
        lambda: refpipeline.naive,
        1,
        dt.datetime(2025, 6, 17, 9, 0, tzinfo=dt.UTC),
    ),
    DemoRun(
        "reference-v1 (July)",
        "rag-reference-2025.07",
        "review.evaluation.refpipeline:reference",
        lambda: refpipeline.reference,
        1,
        dt.datetime(2025, 7, 15, 9, 0, tzinfo=dt.UTC),
    ),
)


@dataclass(frozen=True)
class DemoReport:
    users: int
    documents: int
    cases: int
    runs: int = 0
    labels: int = 0
    policies: int = 0
    variants: int = 0
    traces: int = 0


@dataclass(frozen=True)
class Held:
    """What the database holds: the totals the pages count."""

    users: int
    documents: int  # document versions
    cases: int
    labels: int
    traces: int


def held(engine: Engine) -> Held:
    with read_session(engine) as s:
        n = [
            int(s.scalar(select(func.count()).select_from(m)) or 0)
            for m in (User, Document, Case, Label, Trace)
        ]
    return Held(*n)


def is_empty(engine: Engine) -> bool:
    with read_session(engine) as s:
        return not any(
            s.scalar(select(func.count()).select_from(m)) for m in (User, Document, Case)
        )


def build_demo(
    engine: Engine,
    tax: Taxonomy,
    *,
    variants: bool = True,
    with_traces: bool = True,
    trace_count: int | None = DEMO_TRACES,
) -> DemoReport:
    """Load the demo users, documents and cases. Idempotent: existing rows are kept."""

    def add_users(s: object) -> int:
        from sqlalchemy.orm import Session

        assert isinstance(s, Session)
        n = 0
        for u in DEMO_USERS:
            if s.scalar(select(User.id).where(User.email == u.email)) is None:
                s.add(
                    User(
                        email=u.email,
                        name=u.name,
                        roles=list(u.roles),
                        clearance=u.clearance,
                        active=True,
                        updated_by=DEMO_ACTOR.email,
                    )
                )
                n += 1
        return n

    users = run_write(engine, add_users)
    if chain.signing_key() is not None and signoff.chain_head(engine)[1] == 0:
        # a deployment with a signing key seals its empty sign-off record before anything is
        # signed (an audited adoption, as the command line would do; refused on a record that
        # lost signatures the audit log recorded)
        signoff.adopt_signing_key(engine, DEMO_ACTOR)
    docs, files = corpus.read_files([DEMO_DOCS], tax)
    doc_report = corpus.import_documents(engine, DEMO_ACTOR, docs, files, source="demo data")
    with DEMO_CASES.open(encoding="utf-8") as fh:
        items = list(cases.iter_cases_jsonl(fh, str(DEMO_CASES.name), tax))
    case_report = run_write(
        engine,
        partial(
            cases.import_cases,
            actor=DEMO_ACTOR,
            items=items,
            source=DEMO_CASES.name,
            batch=DEMO_CASE_BATCH,
        ),
    )
    runs = 0
    existing = {r.name for r in evalruns.list_runs(engine)}
    for run in DEMO_RUNS:
        if run.name not in existing:
            pipeline, used = configured_pipeline(engine, run.pipeline())
            execution.execute(
                engine,
                DEMO_ACTOR,
                pipeline,
                tax,
                name=run.name,
                system_version=run.version,
                repeats=run.repeats,
                config={"pipeline": run.spec, **used},
                created_at=run.at,
            )
            runs += 1
    labels = build_demo_labels(engine, tax)
    policies = build_demo_policies(engine, tax)
    made = build_demo_variants(engine, tax) if variants else 0
    n_traces = tracedemo.build_demo_traces(engine, tax, trace_count) if with_traces else 0
    if n_traces:
        _demo_wording_traces(engine)
    wording_versions.build_demo_wording(engine, tax)
    build_demo_audits(engine, tax)
    months.build_demo_reviews(engine, tax)
    return DemoReport(
        users, doc_report.added, case_report.added, runs, labels, policies, made, n_traces
    )


def demo_first_policy(shipped: str) -> str:
    """The demo's first signed policy, made from the shipped file: file version 2 (its change
    record ends there), vector thresholds 0.50/0.60 and no freshness rules (those came with
    file version 4). The second signed version is the shipped file itself."""
    import re

    from review.policy.policy import replace_thresholds

    older = replace_thresholds(shipped, "vector", refuse_below=0.50, caveat_below=0.60)
    older = re.sub(r"(?m)^version: \d+$", "version: 2", older)
    older = re.sub(r"(?ms)^  - version: [3-9]\n.*?(?=^  - |^\S|\Z)", "", older)
    return re.sub(r"(?m)^  freshness:\n(?:    .*\n)*", "", older)


def build_demo_policies(engine: Engine, tax: Taxonomy) -> int:
    """Policy history: version 1 (vector 0.50/0.60) and version 2 (the shipped file) signed by
    a product owner and compliance, and a pending proposal to raise the vector thresholds."""
    from review.policy.policy import default_policy_path, parse_policy

    if signoff.versions(engine, inforce.KIND):
        return 0
    paula = demo_actor("paula.kim@brightwave.example")
    omar = demo_actor("omar.haddad@brightwave.example")
    chen = demo_actor("chen.li@brightwave.example")
    shipped = default_policy_path().read_text(encoding="utf-8")
    older = demo_first_policy(shipped)
    run = next((r for r in evalruns.list_runs(engine) if r.name.startswith("reference")), None)
    snap: dict[str, object] = {}
    fingerprint = ""
    case_ids: list[int] = []
    if run is not None:
        policy = parse_policy(shipped, "policy")
        frame = thresholds.outcomes(engine, run.id, tax, policy, "vector")
        a = thresholds.analyse(frame, policy, "vector", 0.50, 0.55)
        snap, fingerprint, case_ids = a.snapshot(), a.fingerprint, a.case_ids
    v1 = signoff.propose(
        engine,
        omar,
        inforce.KIND,
        older,
        "First policy for the vector index, from the launch golden set.",
        tuned_on_split="validation",
        snapshot=snap,
    )
    signoff.sign(
        engine,
        paula,
        v1,
        "approve",
        note="Both sides within target on validation.",
        data_fingerprint=fingerprint,
        metrics_snapshot=snap,
        lock_case_ids=case_ids,
    )
    signoff.sign(
        engine,
        chen,
        v1,
        "approve",
        note="Refusal wording reviewed separately.",
        data_fingerprint=fingerprint,
        metrics_snapshot=snap,
        lock_case_ids=case_ids,
    )
    v2 = signoff.propose(
        engine,
        paula,
        inforce.KIND,
        shipped,
        "Monthly review found unsupported answers on plan questions; raise the "
        "vector refuse threshold to 0.55 and the caveat to 0.65. With it, freshness that "
        "fits the fact (file version 4): no age limit for historical claims, 30 days for "
        "a current price.",
        tuned_on_split="validation",
        snapshot=snap,
    )
    signoff.sign(
        engine,
        omar,
        v2,
        "approve",
        data_fingerprint=fingerprint,
        metrics_snapshot=snap,
        lock_case_ids=case_ids,
    )
    signoff.sign(
        engine,
        chen,
        v2,
        "approve",
        data_fingerprint=fingerprint,
        metrics_snapshot=snap,
        lock_case_ids=case_ids,
    )
    proposal: dict[str, object] = {}
    if run is not None:
        # the figures Paula saw, on the source every signer will see them on
        from review.thresholds import evidence

        policy = parse_policy(shipped, "policy")
        frame = thresholds.outcomes(engine, run.id, tax, policy, "vector")
        a = thresholds.analyse(frame, policy, "vector", 0.55, 0.60)
        proposal = {
            **a.snapshot(),
            "source": evidence.run_source(run, "vector", "validation", "test"),
            "fingerprint": a.fingerprint,
        }
    thresholds.propose_thresholds(
        engine,
        paula,
        "vector",
        0.60,
        0.68,
        "Validation sweep: refusing below 0.60 fixes more unsupported answers than it adds "
        "false refusals at the agreed 5:1 cost.",
        tuned_on_split="validation",
        snapshot=proposal or None,
    )
    return 3


# Deterministic, realistic partial disagreement: Tom confuses abstain with clarify or partial
# on some compound and ambiguous cases and drops a second reason code now and then; Ravi
# labels a third of the cases and mostly agrees with the expected decision.
_TOM_SWAP = {
    "abstain": "clarify",
    "clarify": "abstain",
    "partial": "abstain",
    "escalate": "abstain",
    "answer": "partial",
}
DEMO_LABELED_CASES = 70


def build_demo_labels(engine: Engine, tax: Taxonomy) -> int:
    """Labels by the demo annotators on the first ready cases they may read, plus a few
    adjudications. Inés and Tom have no clearance, so a case whose text is restricted is not
    theirs to label (the queue never gives it to them): those wait for annotators with
    clearance, as in a real team."""
    with read_session(engine) as s:
        if s.scalar(select(func.count()).select_from(Label)):
            return 0
        ready = s.execute(
            select(Case.id, Case.key, Case.expected_decision, Case.reason_codes, Case.category)
            .where(Case.status == CaseStatus.ready)
            .order_by(Case.id)
        ).all()
        hidden = clearance.restricted_cases(s, [r.id for r in ready])
    rows = [r for r in ready if r.id not in hidden][:DEMO_LABELED_CASES]
    people = {u.email: u for u in DEMO_USERS}
    actors = {
        email: replace(
            DEMO_ACTOR,
            email=email,
            name=people[email].name,
            roles=frozenset(Role(r) for r in people[email].roles),
            clearance=people[email].clearance,
        )
        for email in people
    }
    ines, tom, ravi = (
        actors["ines.duarte@brightwave.example"],
        actors["tom.becker@brightwave.example"],
        actors["ravi.menon@brightwave.example"],
    )
    n = 0
    disagreements: list[tuple[int, str, tuple[str, ...]]] = []
    ravi_labeled: set[int] = set()
    for i, r in enumerate(rows):
        reasons = tuple(r.reason_codes)
        gold = labeling.LabelIn(
            r.expected_decision,
            reasons,
            r.category,
            "Matches the evidence as the identity sees it.",
        )
        labeling.submit(engine, ines, r.id, gold, None, tax)
        tom_label = gold
        if i % 7 == 3:
            swapped = _TOM_SWAP[r.expected_decision]
            tom_reasons = reasons or ("required_claim_not_covered",)
            if tax.decisions[swapped].answers and swapped == "answer":
                tom_reasons = ()
            tom_label = labeling.LabelIn(
                swapped, tom_reasons, r.category, "I read the question differently."
            )
            disagreements.append((r.id, r.expected_decision, reasons))
        elif i % 11 == 5 and len(reasons) > 1:
            tom_label = labeling.LabelIn(
                r.expected_decision, reasons[:1], r.category, "One reason is enough here."
            )
        labeling.submit(engine, tom, r.id, tom_label, None, tax)
        n += 2
        if i % 3 == 0:
            ravi_label = (
                gold
                if i % 9
                else labeling.LabelIn(
                    _TOM_SWAP[r.expected_decision],
                    reasons or ("support_below_threshold",)
                    if not tax.decisions[_TOM_SWAP[r.expected_decision]].answers
                    else (),
                    r.category,
                    "Borderline: the passage is close but not decisive.",
                )
            )
            labeling.submit(engine, ravi, r.id, ravi_label, None, tax)
            ravi_labeled.add(r.id)
            n += 1
    # Ravi, the demo's one reviewer, adjudicates only cases he did not label himself.
    for case_id, decision, reasons in [d for d in disagreements if d[0] not in ravi_labeled][:3]:
        labeling.adjudicate(
            engine,
            ravi,
            case_id,
            decision,
            reasons,
            "The decisive clause settles it; the expected decision stands.",
            tax,
        )
    return n


EXTRA_DEMO_TRACES = 2  # added by _demo_wording_traces on top of the generated ones


def _demo_wording_traces(engine: Engine) -> int:
    """Two more production refusals, so the demo trips every wording rule: one blames the
    user, one escalation names a person instead of a role."""
    import datetime as dt

    from review.traces.model import Trace

    when = dt.datetime.now(dt.UTC).replace(hour=10, minute=0, second=0, microsecond=0)
    texts = [
        (
            "bw-demo-wording-blame",
            40,
            "can i get a refund",
            "abstain",
            "ambiguous_question",
            "Your question is unclear and you did not provide the plan, so I cannot answer it.",
        ),
        (
            "bw-demo-wording-person",
            39,
            "Can we terminate our contract after the acquisition?",
            "escalate",
            "restricted_topic",
            "This needs a human. Please ask Maria Jensen in Legal to review your contract.",
        ),
    ]
    items = [
        Trace(
            trace_id=tid,
            time=when - dt.timedelta(days=days),
            query=q,
            decision=d,
            reason_code=r,
            answer_text=a,
            ranking_mode="vector",
            hits_after_filter=1,
            top_score=0.41,
            user_role="customer_admin",
            identity_scopes=("public",),
            versions={"model": "m-2025-06", "policy": "no-answer-policy@3"},
            attributes={"language": "en", "customer_tier": "team"},
        )
        for tid, days, q, d, r, a in texts
    ]
    report = importer.import_items(engine, DEMO_ACTOR, items, source="demo data")
    return int(report.added)
