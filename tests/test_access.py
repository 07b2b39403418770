"""Access (issue 11): every write path checks role and clearance.

* The write services are found from the source, not listed by hand: every public function of
  ``review/`` that reaches a write transaction (``run_write``/``write_session``, directly or
  through the functions it calls), and every public Session-taking function (a service the
  entry points run in their transaction) that reaches the change log or, for an Actor, sends
  an INSERT, UPDATE or DELETE. Each one that takes an
  :class:`Actor` must have a row in :data:`ALLOWED` below (the roles the domain allows) and a
  call in :data:`CALLS`; each one that does not must be in :data:`NO_ACTOR` with the reason.
  A new unguarded write path makes :func:`test_every_write_service_is_in_the_table` fail. The
  few inner writers (one row's writer, called inside services that check the role) are in
  :data:`INNER`, and no page or command calls them.
* Each write service is then called as every role (and as a user with no role left): an
  allowed role gets past the checks (the call succeeds or is refused for a reason about the
  data, never PermissionDenied); any other role gets PermissionDenied and the database is
  untouched: no INSERT, UPDATE or DELETE is even sent, the row counts and the audit log stay.
* Clearance: the writes that touch restricted documents or traces, or store unredacted
  traces, are refused without clearance.
* The author of a policy or wording change can never sign it, whatever roles they hold, and
  a user holding both approver roles gives only one of the required approvals.
* No page shows restricted text to a user without clearance.
"""

from __future__ import annotations

import ast
import io
import itertools
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event, func, inspect, select

from review.admin import users
from review.audits import plans as audit_plans
from review.audits import promote, pushback, queue, verdicts
from review.builder import documents, suggestions, variants
from review.cases import cases, splits
from review.core import userdrafts
from review.core.errors import InputError, PermissionDenied, StaleWriteError
from review.core.identity import GRANTS, Actor, Permission, Role
from review.core.taxonomy import Taxonomy
from review.corpus import corpus
from review.corpus.docformat import DocumentIn, parse_markdown
from review.evaluation import evalruns, execution, judges
from review.jobs import catalog as job_catalog
from review.jobs import queue as job_queue
from review.jobs import runner as job_runner
from review.labels import adjudication, labeling
from review.labels import imports as label_imports
from review.monthly import reviews
from review.policy import inforce, signoff
from review.thresholds import signing as threshold_signing
from review.thresholds import thresholds
from review.traces import importer, restricted, retention
from review.traces.formats.canonical import iter_canonical_jsonl
from review.traces.live import phoenix as live_phoenix
from review.traces.live import push, sources, staging
from review.wording import drafts, signing, versions
from review.wording.messages import wording_path
from storage.db import make_engine, read_session, write_session
from storage.models import (
    AuditItem,
    AuditLog,
    Case,
    CaseClaim,
    CaseDocument,
    CaseFamily,
    Document,
    Trace,
)
from tests.helpers.pages import app, page_files, readable
from tests.helpers.paths import ROOT
from tests.helpers.transact import write

#: every kind of job registered (the catalog imports each kind's module)
JOB_KINDS = job_catalog.kinds.REGISTRY

A, RV, PO, CO, AD = Role.annotator, Role.reviewer, Role.product_owner, Role.compliance, Role.admin

# ---------------------------------------------------------------------------------------
# Who may do what, from the domain (DESIGN.md "Core entities" and "Identity", DOMAIN.md, the
# README's page table): annotators build and label cases; reviewers audit production traces,
# adjudicate and import traces; product owners and compliance propose and sign policy and
# wording; admins manage users, settings and retention. Cases are built by annotators,
# reviewers and admins; the corpus by annotators and admins; evaluations are run by everyone
# who reads their results except compliance.

CASE_EDITORS = frozenset({A, RV, AD})
CORPUS_EDITORS = frozenset({A, AD})
AUDITORS = frozenset({RV})
POLICY = frozenset({PO, CO})
MONTHLY_REVIEW = frozenset({RV, PO, CO, AD})
EVALUATORS = frozenset({A, RV, PO, AD})
TRACE_IMPORTERS = frozenset({RV, AD})
ADMINS = frozenset({AD})
LABELERS = frozenset({A})
LABEL_EXCHANGERS = frozenset({RV, AD})

ALLOWED: dict[str, frozenset[Role]] = {
    "audits.plans.close_plan": AUDITORS,
    "audits.plans.create_plan": AUDITORS,
    "audits.plans.draw_plan": AUDITORS,
    "audits.queue.next_item": AUDITORS,
    "audits.promote.promote_to_case": AUDITORS & CASE_EDITORS,
    "audits.plans.recount_plan": AUDITORS,
    "audits.queue.release_item": AUDITORS,
    "audits.queue.reserve_item": AUDITORS,
    "audits.verdicts.submit_verdict": AUDITORS,
    "builder.variants.build_variant": CASE_EDITORS,
    "builder.suggestions.confirm_suggestion": CASE_EDITORS,
    "builder.suggestions.mark_passage": CASE_EDITORS,
    "builder.documents.save_edit": CORPUS_EDITORS,
    "builder.documents.save_edits": CORPUS_EDITORS,
    "builder.suggestions.set_required_claims": CASE_EDITORS,
    "cases.cases.create_case": CASE_EDITORS,
    "cases.cases.import_cases": CASE_EDITORS,
    # a person's own drafts (issue 33): everyone who holds a role keeps theirs
    "core.userdrafts.save_draft": frozenset(Role),
    "core.userdrafts.discard_draft": frozenset(Role),
    "labels.imports.import_labels": LABEL_EXCHANGERS,
    # a job of an admin's kind; the access actors are no users, so it is refused for that
    "jobs.runner.start": ADMINS,
    # who may see some kind of job may ask to cancel one (job 0 does not exist)
    "jobs.queue.cancel": frozenset(
        r
        for r in Role
        if Permission.manage_users in GRANTS[r]
        or any(k.permission in GRANTS[r] for k in JOB_KINDS.values())
    ),
    "cases.cases.update_case": CASE_EDITORS,
    "corpus.corpus.add_version": CORPUS_EDITORS,
    "corpus.corpus.import_documents": CORPUS_EDITORS,
    "evaluation.execution.execute": EVALUATORS,
    "evaluation.evalruns.import_run": EVALUATORS,
    "evaluation.judges.import_judge_labels": EVALUATORS,
    "labels.adjudication.set_settings": ADMINS,
    "labels.labeling.adjudicate": frozenset({RV}),
    "labels.labeling.next_case": LABELERS,
    "labels.labeling.release": LABELERS,
    "labels.labeling.reserve": LABELERS,
    "labels.labeling.set_settings": ADMINS,
    "labels.labeling.submit": LABELERS,
    "monthly.reviews.add_action": MONTHLY_REVIEW,
    "monthly.reviews.add_finding": MONTHLY_REVIEW,
    "monthly.reviews.carry_finding": MONTHLY_REVIEW,
    "monthly.reviews.close_session": MONTHLY_REVIEW,
    "monthly.reviews.open_month": MONTHLY_REVIEW,
    "monthly.reviews.open_session": MONTHLY_REVIEW,
    "monthly.reviews.store_validation": MONTHLY_REVIEW,
    "monthly.reviews.update_session": MONTHLY_REVIEW,
    "policy.signoff.adopt_signing_key": ADMINS,
    "policy.signoff.propose": POLICY,
    "policy.signoff.sign": POLICY,
    "cases.splits.apply": CASE_EDITORS,
    "thresholds.signing.sign_thresholds": POLICY,
    "thresholds.thresholds.propose_rollback": POLICY,
    "thresholds.thresholds.propose_thresholds": POLICY,
    "traces.retention.apply_retention": ADMINS,
    "traces.importer.import_bytes": TRACE_IMPORTERS,
    "traces.importer.import_file": TRACE_IMPORTERS,
    "traces.importer.import_items": TRACE_IMPORTERS,
    "traces.retention.purge_older_than": ADMINS,
    # verdicts back to Phoenix (issue 31 item 3): the roles that import traces
    "traces.live.push.push_verdicts": TRACE_IMPORTERS,
    "audits.pushback.push_to_phoenix": TRACE_IMPORTERS,
    "traces.live.sources.add_source": ADMINS,
    "traces.live.sources.ensure_source": ADMINS,
    "traces.live.sources.remove_source": ADMINS,
    "traces.live.sources.set_status": ADMINS,
    "traces.live.staging.assemble": TRACE_IMPORTERS,
    "traces.live.phoenix.sync_phoenix": TRACE_IMPORTERS,
    "traces.retention.set_retention": ADMINS,
    "traces.restricted.mark_trace": ADMINS,
    "traces.restricted.set_unknown_documents": ADMINS,
    "admin.users.add_user": ADMINS,
    "admin.users.update_user": ADMINS,
    "wording.signing.propose_edits": POLICY,
    "wording.signing.propose_wording": POLICY,
    "wording.signing.sign_wording": POLICY,
}

# Writes that take no Actor, and why that is safe.
NO_ACTOR: dict[str, str] = {
    "admin.users.bootstrap_admin": "creates the first admin, refused once any user exists",
    "demo.fixtures.build_demo": "the demo builder (command line and tests), acting as SYSTEM",
    "demo.fixtures.build_demo_labels": "part of the demo builder",
    "demo.fixtures.build_demo_policies": "part of the demo builder",
    "demo.batches.build_demo_audits": "part of the demo builder",
    "demo.case_families.build_demo_variants": "part of the demo builder",
    "demo.months.build_demo_reviews": "part of the demo builder",
    "demo.wording_versions.build_demo_wording": "part of the demo builder",
    "demo.tracedemo.build_demo_traces": "part of the demo builder",
    "core.database.write": "the unit of work the entry points run a service in; the service "
    "takes the Actor",
    "cli.common.transact": "the command line's entry point; the service it runs takes the Actor",
    "traces.live.staging.stage": "holds the spans a source delivered (the receiver, behind its "
    "bearer token, or a sync the command line or an admin runs) until assemble, which takes the "
    "Actor, imports them",
    "traces.live.sources.record_sync": "a source's bookkeeping (where its next sync resumes), "
    "written by the sync and the receiver",
    "traces.live.sources.record_error": "a source's bookkeeping (its last error), written by the "
    "sync and the receiver",
    "traces.live.receiver.Receiver.assemble_once": "the receiver's assembly pass: it calls "
    "assemble with the command line's Actor",
    "cli.receivecli.receive_cmd": "the command line, acting as cli_actor",
    "traces.live.tally.add_counts": "a receiver's bookkeeping (the requests it answered, per "
    "status), written by the receiver",
    "traces.live.tally.flush": "a receiver's bookkeeping: add_counts of what it counted",
    "traces.live.receiver.Receiver.flush_counts": "the receiver's bookkeeping: tally.flush",
    "cli.pushcli.push_phoenix_cmd": "command line, acting as the CLI admin",
    "cli.labelscli.import_cmd": "command line, acting as the CLI admin",
    "cli.jobscli.cancel_cmd": "command line, acting as the CLI admin",
    "cli.jobscli.worker_cmd": "the command line: runs jobs, each as the user who started it",
    "jobs.runner.run_worker": "runs jobs, each as the user who started it (re-read, roles and "
    "clearance as they are now, refused if they may no longer start its kind)",
    "jobs.runner.run_one": "runs one job as the user who started it (see run_worker)",
    "jobs.context.JobContext.beat_once": "a running job's bookkeeping (progress, lease)",
    "jobs.context.JobContext.output": "a running job's result file, under its claim",
    "cli.synccli.sync_phoenix_cmd": "the command line, acting as cli_actor",
    "cli.main.seed_demo": "command line: the operator of the machine, acting as the CLI admin",
    "cli.main.import_docs": "command line, acting as the CLI admin",
    "cli.main.import_cases_cmd": "command line, acting as the CLI admin",
    "cli.main.add_user_cmd": "command line, acting as the CLI admin",
    "cli.main.import_run_cmd": "command line, acting as the CLI admin",
    "cli.main.import_judge_cmd": "command line, acting as the CLI admin",
    "cli.main.evaluate_cmd": "command line, acting as the CLI admin",
    "cli.main.adopt_signing_key_cmd": "command line, acting as the CLI admin",
    "cli.tracecli.import_traces_cmd": "command line, acting as the CLI admin",
    "cli.tracecli.purge_cmd": "command line, acting as the CLI admin",
    "cli.tracecli.rebuild_rollup_cmd": "command line, acting as the CLI admin",
    "traces.rollup.rebuild": "recomputes the monitoring rollup from stored traces (derived data)",
    "cli.labelscli.rebuild_agreement_cmd": "command line, acting as the CLI admin",
    "labels.agreement_rollup.rebuild_everything": "recomputes the Agreement page's stored "
    "figures from the stored labels and cases (derived data)",
    "cli.tracecli.recompute_restricted_cmd": "command line, acting as the CLI admin",
    "traces.restricted.recompute_all": "recomputes the restricted flags from the stored traces "
    "and the corpus with the one rule (derived data; it never changes a person's mark)",
}

# The one writer of a row, inside a service's transaction: it checks no role, so only services
# that do call it (never a page or a command).
INNER: dict[str, str] = {
    "cases.cases.insert_case": "the one writer of a new case, for import_cases, "
    "create_case and build_variant",
    "corpus.corpus.insert_version": "the one writer of a document version, for the corpus "
    "imports and the case builder's documents",
    "builder.documents.insert_document": "adds a derived document version inside the builder's "
    "save_edit and build_variant, which check edit_cases first",
    "builder.documents.add_edit": "records one edit's provenance inside save_edit and "
    "build_variant, which check edit_cases first",
}

# ---------------------------------------------------------------------------------------
# Finding the write services in the source

WRITE_PRIMITIVES = {"run_write", "write_session"}


def _module_functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    out: dict[str, ast.FunctionDef] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            out[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    out[f"{node.name}.{item.name}"] = item
    return out


def _review_imports(tree: ast.Module, known: set[str]) -> tuple[dict[str, str], dict[str, str]]:
    """What a module imports from review/: local name -> "module.function", and local name
    -> review module."""
    names: dict[str, str] = {}
    modules: dict[str, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.level:
            continue
        if node.module != "review" and not (node.module or "").startswith("review."):
            continue
        base = (node.module or "").removeprefix("review").removeprefix(".")
        for a in node.names:
            target = f"{base}.{a.name}" if base else a.name
            if target in known:
                modules[a.asname or a.name] = target
            elif base:
                names[a.asname or a.name] = target
    return names, modules


@dataclass
class _Reach:
    """What one function does: the review functions it calls (dotted paths), and whether it
    opens a write transaction, reaches the change log or sends a writing statement itself."""

    calls: set[str] = field(default_factory=set)
    writes: bool = False
    records: bool = False
    statements: bool = False


def _is_writing_statement(n: ast.AST) -> bool:
    """``session.execute(insert(...))`` (or update, delete): a write in the caller's
    transaction."""
    return (
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "execute"
        and bool(n.args)
        and isinstance(n.args[0], ast.Call)
        and ast.unparse(n.args[0].func).split("(")[0] in {"insert", "update", "delete"}
    )


def _calls(
    mod: str,
    fn: ast.FunctionDef,
    funcs: Mapping[str, object],
    names: Mapping[str, str],
    modules: Mapping[str, str],
) -> _Reach:
    """The review functions ``fn`` calls, and what it writes itself."""
    r = _Reach()
    for n in ast.walk(fn):
        if isinstance(n, ast.Name):
            if n.id in WRITE_PRIMITIVES:
                r.writes = True
            elif f"{mod}.{n.id}" in funcs:
                r.calls.add(f"{mod}.{n.id}")
            elif n.id in names:
                r.calls.add(names[n.id])
        elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
            if n.attr in WRITE_PRIMITIVES or (n.value.id, n.attr) == ("sqlite3", "connect"):
                r.writes = True
            elif (n.value.id, n.attr) == ("changes", "record"):
                r.records = True
            elif n.value.id in modules:
                r.calls.add(f"{modules[n.value.id]}.{n.attr}")
        r.statements |= _is_writing_statement(n)
    return r


def _closure(reached: set[str], calls: Mapping[str, set[str]]) -> None:
    """Add to ``reached`` every function that calls one in it, until nothing changes."""
    changed = True
    while changed:
        changed = False
        for qual, out in calls.items():
            if qual not in reached and out & reached:
                reached.add(qual)
                changed = True


def takes(fn: ast.FunctionDef, annotation: str) -> bool:
    """Whether a parameter of ``fn`` is annotated with ``annotation``."""
    args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
    return any(a.annotation is not None and annotation in ast.unparse(a.annotation) for a in args)


def write_services(package: Path = ROOT / "review") -> dict[str, bool]:
    """Every public function of review/ that reaches a write transaction -> whether it takes
    an Actor, keyed by its module's dotted path under review/ (``audits.plans.draw_plan``).
    Calls are followed through same-module names, ``from review.x.y import f`` and ``from
    review.x import y`` (at module level or inside functions)."""
    funcs: dict[str, tuple[str, ast.FunctionDef]] = {}
    names: dict[str, dict[str, str]] = {}  # module -> local name -> "module.function"
    modules: dict[str, dict[str, str]] = {}  # module -> local name -> review module

    def rel(path: Path) -> str:
        return ".".join(path.relative_to(package).with_suffix("").parts)

    paths = sorted(p for p in package.rglob("*.py") if p.name != "__init__.py")
    known = {rel(p) for p in paths}
    for path in paths:
        mod = rel(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names[mod], modules[mod] = _review_imports(tree, known)
        for qual, fn in _module_functions(tree).items():
            funcs[f"{mod}.{qual}"] = (mod, fn)

    calls: dict[str, set[str]] = {}
    writes: set[str] = set()
    records: set[str] = set()  # reach the change log, which every write adds to
    statements: set[str] = set()  # send an INSERT, UPDATE or DELETE
    for qual, (mod, fn) in funcs.items():
        reach = _calls(mod, fn, funcs, names[mod], modules[mod])
        calls[qual] = reach.calls
        for flag, found in (
            (reach.writes, writes),
            (reach.records, records),
            (reach.statements, statements),
        ):
            if flag:
                found.add(qual)
    for reached in (writes, records, statements):
        _closure(reached, calls)
    # a Session-taking service writes inside its caller's transaction (transactions at the
    # edge): it is a write service when it reaches the change log or a writing statement
    # (derived tables kept in step, which take no Actor, are not services)
    writes |= {q for q in records if takes(funcs[q][1], "Session")}
    writes |= {
        q for q in statements if takes(funcs[q][1], "Session") and takes(funcs[q][1], "Actor")
    }

    def public(qual: str) -> bool:
        return not any(part.startswith("_") for part in qual.split(".")[1:])

    return {q: takes(funcs[q][1], "Actor") for q in sorted(writes) if public(q)}


def test_every_write_service_is_in_the_table() -> None:
    found = write_services()
    with_actor = {q for q, has in found.items() if has}
    without = {q for q, has in found.items() if not has}
    assert with_actor - set(ALLOWED) - set(INNER) == set(), (
        "new write services: add them to ALLOWED and CALLS"
    )
    assert (set(ALLOWED) | set(INNER)) - with_actor == set(), (
        "ALLOWED names functions that no longer write"
    )
    for path in [*(ROOT / "pages").rglob("*.py"), *(ROOT / "review" / "cli").rglob("*.py")]:
        source = path.read_text(encoding="utf-8")
        called = [q for q in INNER if f"{q.rsplit('.', 1)[1]}(" in source]
        assert called == [], f"{path.name} calls an inner writer, which checks no role"
    assert without - set(NO_ACTOR) == set(), "writes without an Actor: give them one"
    assert set(NO_ACTOR) - without == set()
    assert set(CALLS) == set(ALLOWED)


def test_the_enumeration_sees_a_new_write_path(tmp_path: Path) -> None:
    """The finder is not vacuous: through a private helper, another module (imported either
    way, also inside a function) or a class, a public function that writes is reported."""
    (tmp_path / "store.py").write_text(
        "from storage.db import run_write\n"
        "def _helper(engine):\n    run_write(engine, lambda s: None)\n"
        "def sneaky(engine, actor: Actor):\n    _helper(engine)\n"
        "def reader(engine, actor: Actor):\n    return 1\n"
    )
    (tmp_path / "other.py").write_text(
        "from review.store import sneaky\n"
        "def unguarded(engine):\n    sneaky(engine, None)\n"
        "def lazy(engine):\n    from review import store\n    store.sneaky(engine, None)\n"
        "class Thing:\n    def save(self, engine):\n        unguarded(engine)\n"
    )
    assert write_services(tmp_path) == {
        "other.Thing.save": False,
        "other.lazy": False,
        "other.unguarded": False,
        "store.sneaky": True,
    }


# ---------------------------------------------------------------------------------------
# Calling every write service as every role


@dataclass
class Ctx:
    engine: Engine
    tax: Taxonomy
    tmp: Path
    ids: dict[str, Any] = field(default_factory=dict)
    counter: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def n(self) -> int:
        return next(self.counter)


def actor(role: Role | None, clearance: bool = True) -> Actor:
    name = role.value if role else "nobody"
    return Actor(
        id=9000 + (list(Role).index(role) if role else 99),
        email=f"{name}@access.example",
        name=f"Access {name}",
        roles=frozenset({role}) if role else frozenset(),
        clearance=clearance,
    )


def _case_in(ctx: Ctx, key: str | None = None) -> cases.CaseIn:
    line = (ROOT / "review" / "demo" / "cases.jsonl").read_text(encoding="utf-8").splitlines()[0]
    data = {**json.loads(line), "key": key or f"ACCESS-{ctx.n()}", "family": None}
    data["evidence_state"] = None
    return cases.validate_case(data, "access", 1, ctx.tax)


def _doc_in(ctx: Ctx, doc_id: str, version: int, scope: str = "public") -> DocumentIn:
    text = (
        f"---\ndoc_id: {doc_id}\nversion: {version}\ntitle: Access test {ctx.n()}\n"
        "effective_date: 2025-03-01\nauthority: policy\nowner: Billing Operations\n"
        f"access_scope: {scope}\njurisdiction: EU\n---\n# Access\n\nA body {ctx.n()}.\n"
    )
    return parse_markdown(text, "access.md", ctx.tax)


SAMPLE_TRACES = ROOT / "tests" / "data" / "traces" / "canonical.jsonl"


def _traces(ctx: Ctx) -> list[Any]:
    items = list(iter_canonical_jsonl(SAMPLE_TRACES.read_text().splitlines(), "x"))
    n = ctx.n()
    return [replace(i.trace, trace_id=f"{i.trace.trace_id}-acc{n}") for i in items]  # type: ignore[union-attr]


def _policy_text(ctx: Ctx) -> str:
    base = inforce.in_force(ctx.engine).text
    return base + f"\n# access test {ctx.n()}\n"


def _wording_text(ctx: Ctx) -> str:
    return versions.in_force(ctx.engine).text or wording_path().read_text(encoding="utf-8")


CALLS: dict[str, Callable[[Ctx, Actor], object]] = {
    "audits.plans.close_plan": lambda c, a: write(
        c.engine, audit_plans.close_plan, a, c.ids["open_plan"]
    ),
    "audits.plans.create_plan": lambda c, a: write(
        c.engine,
        audit_plans.create_plan,
        a,
        audit_plans.PlanSpec(name=f"access {c.n()}", total=3, seed=c.n()),
    ),
    "audits.plans.draw_plan": lambda c, a: write(
        c.engine, audit_plans.draw_plan, a, c.ids["planned_plan"]
    ),
    "audits.queue.next_item": lambda c, a: write(c.engine, queue.next_item, a, c.ids["open_plan"]),
    "audits.promote.promote_to_case": lambda c, a: write(
        c.engine, promote.promote_to_case, a, c.ids["item"], c.tax
    ),
    "audits.plans.recount_plan": lambda c, a: write(
        c.engine, audit_plans.recount_plan, a, c.ids["planned_plan"]
    ),
    "audits.queue.release_item": lambda c, a: write(c.engine, queue.release_item, a, c.ids["item"]),
    "audits.queue.reserve_item": lambda c, a: write(c.engine, queue.reserve_item, a, c.ids["item"]),
    "audits.verdicts.submit_verdict": lambda c, a: write(
        c.engine,
        verdicts.submit_verdict,
        a,
        c.ids["item"],
        verdicts.VerdictIn("correct_refusal"),
        None,
    ),
    "builder.variants.build_variant": lambda c, a: write(
        c.engine,
        variants.build_variant,
        a,
        c.tax,
        c.ids["present_case"],
        variants.VariantSpec(kind="removed"),
    ),
    "builder.suggestions.confirm_suggestion": lambda c, a: write(
        c.engine,
        suggestions.confirm_suggestion,
        a,
        c.ids["variant_case"],
        "abstain",
        ["no_answer_bearing_evidence"],
    ),
    "builder.suggestions.mark_passage": lambda c, a: write(
        c.engine, suggestions.mark_passage, a, c.ids["present_case"], "14 days"
    ),
    "builder.documents.save_edit": lambda c, a: write(
        c.engine,
        documents.save_edit,
        a,
        c.tax,
        "POL-REFUND-MONTHLY@2",
        "no_such_operator",
        0,
        5,
        {},
    ),
    "builder.documents.save_edits": lambda c, a: write(
        c.engine,
        documents.save_edits,
        a,
        c.tax,
        [("POL-REFUND-MONTHLY@2", 0, 5)],
        "no_such_operator",
        {},
    ),
    "builder.suggestions.set_required_claims": lambda c, a: write(
        c.engine, suggestions.set_required_claims, a, c.tax, c.ids["present_case"], 1, ["A claim."]
    ),
    "cases.cases.create_case": lambda c, a: write(
        c.engine, cases.create_case, a, _case_in(c), c.tax
    ),
    "labels.imports.import_labels": lambda c, a: write(
        c.engine,
        label_imports.import_labels,
        a,
        "label-studio",
        lambda skipped: iter(()),
        {"1": "ines.duarte@brightwave.example"},
        c.tax,
        file_name="access.json",
        sha256="0" * 64,
    ),
    "jobs.runner.start": lambda c, a: job_runner.start(c.engine, a, "rollup_rebuild", {}),
    "jobs.queue.cancel": lambda c, a: write(c.engine, job_queue.cancel, a, 0),
    # the access actors are no users: their drafts are kept as Tom's (a real row), each call
    # under a key of its own
    "core.userdrafts.save_draft": lambda c, a: write(
        c.engine,
        userdrafts.save_draft,
        replace(a, id=c.ids["tom"].id),
        f"access.{c.n()}",
        {"text": "a draft"},
        None,
    ),
    "core.userdrafts.discard_draft": lambda c, a: write(
        c.engine, userdrafts.discard_draft, replace(a, id=c.ids["tom"].id), f"access.{c.n()}", None
    ),
    "cases.cases.import_cases": lambda c, a: write(
        c.engine, cases.import_cases, a, [(1, _case_in(c))], "access.jsonl"
    ),
    "cases.cases.update_case": lambda c, a: write(
        c.engine, cases.update_case, a, c.ids["present_case"], 1, _case_in(c, "CASE-001"), c.tax
    ),
    "corpus.corpus.add_version": lambda c, a: corpus.add_version(
        c.engine, a, "POL-REFUND-MONTHLY", 2, _doc_in(c, "POL-REFUND-MONTHLY", 3)
    ),
    "corpus.corpus.import_documents": lambda c, a: corpus.import_documents(
        c.engine, a, [_doc_in(c, f"ACCESS-DOC-{c.n()}", 1)]
    ),
    "evaluation.execution.execute": lambda c, a: execution.execute(
        c.engine,
        a,
        lambda query, docs, config: {},
        c.tax,
        name=f"access {c.n()}",
        system_version="x",
        repeats=0,
    ),
    "evaluation.evalruns.import_run": lambda c, a: evalruns.import_run(
        c.engine,
        a,
        f"access {c.n()}",
        "x",
        [(1, evalruns.OutputIn(case="CASE-001", decision="answer", score=0.5))],
        "access.jsonl",
    ),
    "evaluation.judges.import_judge_labels": lambda c, a: judges.import_judge_labels(
        c.engine,
        a,
        evalruns.list_runs(c.engine)[0].id,
        [(1, judges.JudgeIn(case="CASE-001", judge=f"access {c.n()}", decision="answer"))],
        "judge.jsonl",
    ),
    "labels.adjudication.set_settings": lambda c, a: adjudication.set_settings(
        c.engine, a, True, adjudication.get_settings(c.engine).version
    ),
    "labels.labeling.adjudicate": lambda c, a: labeling.adjudicate(
        c.engine, a, c.ids["present_case"], "answer", [], "access note", c.tax
    ),
    "labels.labeling.next_case": lambda c, a: labeling.next_case(c.engine, a),
    "labels.labeling.release": lambda c, a: labeling.release(c.engine, a, c.ids["present_case"]),
    "labels.labeling.reserve": lambda c, a: labeling.reserve(c.engine, a, c.ids["present_case"]),
    "labels.labeling.set_settings": lambda c, a: labeling.set_settings(
        c.engine, a, 2, 30, labeling.get_settings(c.engine).version
    ),
    "labels.labeling.submit": lambda c, a: labeling.submit(
        c.engine, a, c.ids["present_case"], labeling.LabelIn("answer"), None, c.tax
    ),
    "monthly.reviews.add_action": lambda c, a: reviews.add_action(
        c.engine, a, c.ids["session"], "Do it", "reviewer", None
    ),
    "monthly.reviews.add_finding": lambda c, a: reviews.add_finding(
        c.engine, a, c.ids["session"], "Found it", "low"
    ),
    "monthly.reviews.carry_finding": lambda c, a: reviews.carry_finding(
        c.engine, a, c.ids["finding"]
    ),
    "monthly.reviews.close_session": lambda c, a: reviews.close_session(
        c.engine, a, c.ids["session"], c.ids["session_version"]
    ),
    "monthly.reviews.open_month": lambda c, a: reviews.open_month(
        c.engine, a, f"{2100 + c.n()}-02"
    ),
    "monthly.reviews.open_session": lambda c, a: reviews.open_session(
        c.engine, a, f"{2100 + c.n()}-01"
    ),
    "monthly.reviews.store_validation": lambda c, a: reviews.store_validation(
        c.engine, a, c.ids["session"], {"checked": 0}
    ),
    "monthly.reviews.update_session": lambda c, a: reviews.update_session(
        c.engine, a, c.ids["session"], c.ids["session_version"], attendees=["x"], summary="s"
    ),
    "policy.signoff.adopt_signing_key": lambda c, a: signoff.adopt_signing_key(c.engine, a),
    "policy.signoff.propose": lambda c, a: signoff.propose(
        c.engine, a, inforce.KIND, _policy_text(c), "access test"
    ),
    "policy.signoff.sign": lambda c, a: signoff.sign(
        c.engine, a, c.ids["pending_policy"], "reject", note="access test"
    ),
    "cases.splits.apply": lambda c, a: splits.apply(c.engine, a, seed=c.n()),
    "thresholds.signing.sign_thresholds": lambda c, a: threshold_signing.sign_thresholds(
        c.engine, a, c.tax, c.ids["pending_policy"], "reject", note="access test"
    ),
    "thresholds.thresholds.propose_rollback": lambda c, a: thresholds.propose_rollback(
        c.engine, a, 1, "access test"
    ),
    "thresholds.thresholds.propose_thresholds": lambda c, a: thresholds.propose_thresholds(
        c.engine, a, "vector", 0.3, 0.5, "access test", tuned_on_split="validation"
    ),
    "traces.retention.apply_retention": lambda c, a: retention.apply_retention(c.engine, a),
    "traces.importer.import_bytes": lambda c, a: importer.import_bytes(
        c.engine,
        a,
        "\n".join(json.dumps(traces_to_dict(t)) for t in _traces(c)).encode(),
        "access.jsonl",
    ),
    "traces.importer.import_file": lambda c, a: importer.import_file(c.engine, a, SAMPLE_TRACES),
    "traces.importer.import_items": lambda c, a: importer.import_items(
        c.engine, a, _traces(c), source="access"
    ),
    "traces.live.sources.add_source": lambda c, a: sources.add_source(
        c.engine, a, kind="otlp", name=f"receiver {next(c.counter)}"
    ),
    "traces.live.sources.ensure_source": lambda c, a: sources.ensure_source(
        c.engine, a, kind="otlp", name=f"receiver {next(c.counter)}"
    ),
    # no such source: an allowed role gets past the role check to the data's refusal
    "traces.live.sources.remove_source": lambda c, a: sources.remove_source(c.engine, a, 999_999),
    "traces.live.sources.set_status": lambda c, a: sources.set_status(
        c.engine, a, 999_999, "paused"
    ),
    "traces.live.staging.assemble": lambda c, a: staging.assemble(c.engine, a, 999_999),
    "traces.live.phoenix.sync_phoenix": lambda c, a: live_phoenix.sync_phoenix(
        c.engine, a, 999_999
    ),
    "traces.retention.purge_older_than": lambda c, a: retention.purge_older_than(
        c.engine, a, 36500
    ),
    "traces.live.push.push_verdicts": lambda c, a: push.push_verdicts(
        c.engine, a, [], pushback.VOCABULARY
    ),
    "audits.pushback.push_to_phoenix": lambda c, a: pushback.push_to_phoenix(
        c.engine, a, all_plans=True
    ),
    "traces.retention.set_retention": lambda c, a: retention.set_retention(
        c.engine, a, None, retention.get_retention(c.engine).version
    ),
    "traces.restricted.mark_trace": lambda c, a: restricted.mark_trace(
        c.engine, a, c.ids["open_trace"], "restricted", f"access test {c.n()}"
    ),
    "traces.restricted.set_unknown_documents": lambda c, a: restricted.set_unknown_documents(
        c.engine, a, True, restricted.get_unknown_setting(c.engine).version
    ),
    "admin.users.add_user": lambda c, a: users.add_user(
        c.engine, a, f"new{c.n()}@access.example", "New", ["annotator"]
    ),
    "admin.users.update_user": lambda c, a: users.update_user(
        c.engine,
        a,
        c.ids["tom"].id,
        c.ids["tom"].version,
        name="Tom B.",
        roles=["annotator"],
        clearance=False,
        active=True,
    ),
    "wording.signing.propose_edits": lambda c, a: signing.propose_edits(
        c.engine, a, {"R1": drafts.MessageDraft(f"Sorry, I can't help ({c.n()}).")}, "t"
    ),
    "wording.signing.propose_wording": lambda c, a: signing.propose_wording(
        c.engine, a, _wording_text(c), "access test"
    ),
    "wording.signing.sign_wording": lambda c, a: signing.sign_wording(
        c.engine, a, c.ids["pending_wording"], "reject", note="access test"
    ),
}


def traces_to_dict(t: Any) -> dict[str, Any]:
    from review.traces.formats.canonical import trace_to_dict

    return trace_to_dict(t)


class Writes:
    """Every INSERT, UPDATE, DELETE or REPLACE the engine sends."""

    def __init__(self, engine: Engine) -> None:
        self.statements: list[str] = []
        event.listen(engine, "before_cursor_execute", self._seen)

    def _seen(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        head = statement.lstrip().split(None, 1)[0].upper() if statement.strip() else ""
        if head in {"INSERT", "UPDATE", "DELETE", "REPLACE"}:
            self.statements.append(statement)


def state(engine: Engine) -> dict[str, int]:
    """Row count of every table and the newest audit log entry."""
    out: dict[str, int] = {}
    tables = inspect(engine).get_table_names()
    with read_session(engine) as s:
        for t in tables:
            out[t] = int(s.scalar(select(func.count()).select_from(inspect_table(engine, t))) or 0)
        out["audit_log.max_id"] = int(s.scalar(select(func.max(AuditLog.id))) or 0)
    return out


def inspect_table(engine: Engine, name: str) -> Any:
    from sqlalchemy import table

    return table(name)


@pytest.fixture
def ctx(demo_url: str, tmp_path: Path, tax: Taxonomy) -> Iterator[Ctx]:
    eng = make_engine(demo_url)
    c = Ctx(eng, tax, tmp_path)
    reviewer = actor(RV)
    with read_session(eng) as s:
        c.ids["present_case"] = s.scalar(select(Case.id).where(Case.key == "CASE-001"))
        c.ids["variant_case"] = s.scalar(select(Case.id).where(Case.key == "CASE-001-CF-1"))
        restricted = s.scalar(select(Trace.id).where(Trace.restricted.is_(True)).limit(1))
        c.ids["open_trace"] = s.scalar(select(Trace.id).where(Trace.restricted.is_(False)).limit(1))
    plans = audit_plans.list_plans(eng)
    c.ids["open_plan"] = next(p.id for p in plans if p.status == "open")
    c.ids["planned_plan"] = write(
        eng,
        audit_plans.create_plan,
        reviewer,
        audit_plans.PlanSpec(name="access planned", total=3, seed=7),
    )
    c.ids["item"] = queue.list_items(eng, c.ids["open_plan"])[0].id
    with write_session(eng) as s:  # a restricted trace in the open plan, for the clearance test
        s.add(AuditItem(plan_id=c.ids["open_plan"], trace_pk=restricted, stratum="x", position=999))
    with read_session(eng) as s:
        c.ids["restricted_item"] = s.scalar(
            select(AuditItem.id).where(AuditItem.trace_pk == restricted)
        )
    session = next(v for v in reviews.list_sessions(eng) if v.status == "open")
    c.ids["session"], c.ids["session_version"] = session.id, session.version
    c.ids["finding"] = reviews.add_finding(eng, reviewer, session.id, "to carry", "low")
    pending = [v for v in signoff.versions(eng, inforce.KIND) if v.status == "pending"]
    c.ids["pending_policy"] = pending[0].id
    pending_w = [v for v in signoff.versions(eng, versions.KIND) if v.status == "pending"]
    c.ids["pending_wording"] = pending_w[0].id
    c.ids["tom"] = users.get_by_email(eng, "tom.becker@brightwave.example")
    yield c
    eng.dispose()


CLEAR_REFUSALS = (InputError, StaleWriteError)


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_each_write_service_allows_exactly_its_roles(name: str, ctx: Ctx) -> None:
    call = CALLS[name]
    writes = Writes(ctx.engine)
    # the denied first: their refusal must not depend on what an allowed call changed
    for role in [None, *sorted(set(Role) - ALLOWED[name])]:
        before = state(ctx.engine)
        writes.statements.clear()
        with pytest.raises(PermissionDenied):
            call(ctx, actor(role))
        assert writes.statements == [], f"{name} as {role}: wrote before refusing"
        assert state(ctx.engine) == before, f"{name} as {role}: the database changed"
    for role in sorted(ALLOWED[name]):
        try:
            call(ctx, actor(role))
        except PermissionDenied as exc:  # pragma: no cover - the failure message
            pytest.fail(f"{name} refused {role.value}: {exc}")
        except CLEAR_REFUSALS:
            pass  # refused for a reason about the data: the role check was passed


# ---------------------------------------------------------------------------------------
# Clearance


def _denied_without_clearance(ctx: Ctx, call: Callable[[Actor], object], role: Role) -> None:
    writes = Writes(ctx.engine)
    before = state(ctx.engine)
    with pytest.raises(PermissionDenied, match=r"restricted|clearance"):
        call(actor(role, clearance=False))
    assert writes.statements == []
    assert state(ctx.engine) == before


def test_restricted_documents_are_written_only_with_clearance(ctx: Ctx) -> None:
    c = ctx
    restricted = "MEMO-PRICING-2026"
    _denied_without_clearance(
        c, lambda a: corpus.add_version(c.engine, a, restricted, 1, _doc_in(c, restricted, 2)), A
    )
    _denied_without_clearance(
        c, lambda a: corpus.import_documents(c.engine, a, [_doc_in(c, restricted, 5)]), A
    )
    _denied_without_clearance(
        c,
        lambda a: write(
            c.engine, documents.save_edit, a, c.tax, f"{restricted}@1", "replace_tier", 0, 5, {}
        ),
        A,
    )
    _denied_without_clearance(  # one edit of several documents, one of them restricted
        c,
        lambda a: write(
            c.engine,
            documents.save_edits,
            a,
            c.tax,
            [("POL-REFUND-MONTHLY@2", 0, 5), (f"{restricted}@1", 0, 5)],
            "replace_tier",
            {"to_tier": "Team"},
        ),
        A,
    )
    # with clearance the same writes go through
    v = corpus.add_version(c.engine, actor(A), restricted, 1, _doc_in(c, restricted, 2))
    assert v.version == 2
    # a public document stays open to annotators without clearance
    corpus.add_version(
        c.engine,
        actor(A, clearance=False),
        "POL-REFUND-MONTHLY",
        2,
        _doc_in(c, "POL-REFUND-MONTHLY", 3),
    )


def test_restricted_traces_are_audited_and_promoted_only_with_clearance(ctx: Ctx) -> None:
    c = ctx
    item = c.ids["restricted_item"]
    _denied_without_clearance(c, lambda a: write(c.engine, queue.reserve_item, a, item), RV)
    _denied_without_clearance(
        c,
        lambda a: write(
            c.engine, verdicts.submit_verdict, a, item, verdicts.VerdictIn("correct_refusal"), None
        ),
        RV,
    )
    _denied_without_clearance(
        c, lambda a: write(c.engine, promote.promote_to_case, a, item, c.tax), RV
    )
    write(c.engine, queue.reserve_item, actor(RV), item)


def test_traces_are_marked_and_the_unknown_setting_changed_only_with_clearance(
    ctx: Ctx,
) -> None:
    c = ctx
    pk = c.ids["open_trace"]
    _denied_without_clearance(
        c, lambda a: restricted.mark_trace(c.engine, a, pk, "restricted", "why"), AD
    )
    _denied_without_clearance(
        c, lambda a: restricted.set_unknown_documents(c.engine, a, False, 0), AD
    )
    restricted.mark_trace(c.engine, actor(AD), pk, "restricted", "why")


def test_unredacted_traces_are_imported_only_with_clearance(ctx: Ctx) -> None:
    c = ctx
    _denied_without_clearance(
        c, lambda a: importer.import_items(c.engine, a, _traces(c), source="x", redact=False), RV
    )
    report = importer.import_items(c.engine, actor(RV), _traces(c), source="x", redact=False)
    assert report.added > 0


# ---------------------------------------------------------------------------------------
# The author of a change never signs it


BOTH = Actor(
    id=9100,
    email="both.roles@access.example",
    name="Both Roles",
    roles=frozenset({PO, CO}),
    clearance=True,
)


def _author_cannot_sign(ctx: Ctx, version_id: int, sign: Callable[..., object]) -> None:
    for role in (PO, CO):
        for meaning, note in (("approve", "fine by me"), ("reject", "no")):
            writes = Writes(ctx.engine)
            before = state(ctx.engine)
            with pytest.raises(PermissionDenied, match="author"):
                sign(ctx.engine, BOTH, version_id, meaning, role=role, note=note)
            assert writes.statements == []
            assert state(ctx.engine) == before
    assert signoff.get_version(ctx.engine, version_id).status == "pending"


def test_the_author_of_a_threshold_change_never_signs_it(ctx: Ctx) -> None:
    vid = thresholds.propose_thresholds(
        ctx.engine, BOTH, "vector", 0.31, 0.52, "author test", tuned_on_split="validation"
    )
    _author_cannot_sign(ctx, vid, signoff.sign)
    signoff.sign(ctx.engine, actor(PO), vid, "approve")  # someone else may


def test_the_author_of_a_wording_change_never_signs_it(ctx: Ctx) -> None:
    vid = signing.propose_edits(
        ctx.engine, BOTH, {"R1": drafts.MessageDraft("I can't answer that here.")}, "t"
    )
    _author_cannot_sign(ctx, vid, signing.sign_wording)


def test_the_demo_authors_cannot_sign_their_pending_changes(ctx: Ctx) -> None:
    for vid, sign in (
        (ctx.ids["pending_policy"], signoff.sign),
        (ctx.ids["pending_wording"], signing.sign_wording),
    ):
        v = signoff.get_version(ctx.engine, vid)
        row = users.get_by_email(ctx.engine, v.author)
        assert row is not None
        author = users.to_actor(row)
        with pytest.raises(PermissionDenied, match="author"):
            sign(ctx.engine, author, vid, "approve", note="mine")
        # the author's address in another case is still the author
        shouting = replace(author, email=author.email.upper())
        with pytest.raises(PermissionDenied):
            sign(ctx.engine, shouting, vid, "approve", note="mine")


def _one_person_one_approval(ctx: Ctx, version_id: int, sign: Callable[..., object]) -> None:
    """BOTH (not the author) approves as product owner; approving again as compliance is
    refused before anything is written; another person completes the four eyes."""
    sign(ctx.engine, BOTH, version_id, "approve", role=PO, note="fine by me")
    writes = Writes(ctx.engine)
    before = state(ctx.engine)
    with pytest.raises(PermissionDenied, match="different people"):
        sign(ctx.engine, BOTH, version_id, "approve", role=CO, note="and again")
    assert writes.statements == []
    assert state(ctx.engine) == before
    v = signoff.get_version(ctx.engine, version_id)
    assert v.status == "pending" and v.missing_roles == ["compliance"]
    sign(ctx.engine, actor(CO), version_id, "approve", note="second pair of eyes")
    assert signoff.get_version(ctx.engine, version_id).status == "approved"


def test_a_user_holding_both_roles_gives_one_threshold_approval(ctx: Ctx) -> None:
    vid = thresholds.propose_thresholds(
        ctx.engine, actor(PO), "vector", 0.32, 0.53, "distinct", tuned_on_split="validation"
    )
    _one_person_one_approval(ctx, vid, signoff.sign)


def test_a_user_holding_both_roles_gives_one_wording_approval(ctx: Ctx) -> None:
    r3 = (
        "I prepared an answer, but I could not back every part of it with the documents "
        "available to you, so I have held it back. Please raise a support ticket and {role} "
        "will look at your question."
    )
    vid = signing.propose_edits(
        ctx.engine, actor(PO), {"R3": drafts.MessageDraft(r3)}, "R3 needs compliance"
    )
    assert signoff.get_version(ctx.engine, vid).missing_roles == ["compliance", "product_owner"]
    _one_person_one_approval(ctx, vid, signing.sign_wording)


# ---------------------------------------------------------------------------------------
# Restricted text never reaches a page for a user without clearance

INES = "ines.duarte@brightwave.example"  # annotator, no clearance
PAULA = "paula.kim@brightwave.example"  # product owner, no clearance
ADA = "ada.admin@brightwave.example"  # admin, clearance
PAGES = sorted(p.name for p in (ROOT / "pages").glob("*_page.py"))
# distinctive sentences of the demo's restricted traces (the restricted documents' own passages
# are read from the corpus: see restricted_passages)
RESTRICTED_TEXT = [
    "filed a claim in the High Court of Ireland",
    "Ingrid Solberg",
    "non-binding offer from a strategic acquirer",
    "approved by the pricing committee on 14 May 2025",
    "Incident commander paged within 15 minutes",
    "Legal Operations sends a hold notice",
    "settlement authority of up to 150,000 EUR",
]
# every query key a page reads as a deep link, and the restricted targets restricted_links
# gives it; a page that starts reading a new key fails the enumeration test until a restricted
# target for it is added here
DEEP_LINK_KEYS = frozenset(
    {"case", "doc", "trace", "item", "plan", "family", "tab", "version", "job", "before", "after"}
)
_QUERY_READ = re.compile(r'query_int\(\s*"(\w+)"|query_params(?:\.get\(|\.pop\(|\[)\s*"(\w+)"')


def page_sources() -> list[Path]:
    return sorted((ROOT / "pages").rglob("*.py"))


def test_every_deep_link_key_of_the_pages_is_searched() -> None:
    read = {
        key
        for p in page_sources()
        for m in _QUERY_READ.finditer(p.read_text(encoding="utf-8"))
        for key in m.groups()
        if key
    }
    assert read, "the pattern no longer finds the pages' deep links"
    assert read - {"as"} <= DEEP_LINK_KEYS, read - {"as"} - DEEP_LINK_KEYS


#: the length of the word runs the leak search compares
NGRAM = 5
_WORD = re.compile(r"[^\W_]+")


def ngrams(text: str, n: int = NGRAM) -> set[str]:
    """Every run of ``n`` consecutive words of ``text``, lowercased, punctuation dropped: a
    restricted fact retold in a claim, a table cell or a reworded sentence still shares them."""
    words = _WORD.findall(text.lower())
    return {" ".join(words[i : i + n]) for i in range(len(words) - n + 1)}


@dataclass(frozen=True)
class Restricted:
    """What must not reach a user without clearance: the word runs of the restricted
    documents that no public document has, and the restricted traces' distinctive sentences."""

    grams: frozenset[str]
    sentences: tuple[str, ...]

    def found_in(self, shown: str) -> list[str]:
        return sorted(ngrams(shown) & self.grams) + [p for p in self.sentences if p in shown]


def restricted_content(engine: Engine) -> Restricted:
    with read_session(engine) as s:
        hidden = s.scalars(select(Document.body).where(Document.access_scope == "restricted"))
        grams = {g for body in hidden for g in ngrams(body)}
        public = s.scalars(select(Document.body).where(Document.access_scope != "restricted"))
        for body in public:
            grams -= ngrams(body)
    assert len(grams) >= 200
    return Restricted(frozenset(grams), tuple(RESTRICTED_TEXT))


@pytest.fixture
def restricted_passages(ctx: Ctx) -> Restricted:
    return restricted_content(ctx.engine)


def test_the_word_runs_find_a_restricted_fact_retold() -> None:
    memo = "3.1 Starter will be closed to new customers from 1 October 2025."
    found = Restricted(frozenset(ngrams(memo)), ())
    claim = "Required claims: 1. Starter will be closed to new customers from 1 October 2025"
    assert found.found_in(claim)
    assert not found.found_in("Starter stays open to new customers.")


def everything(at: Any) -> str:
    """All an AppTest run shows: every element's content (tables as CSV, charts' data and
    the rest as their protobuf text, Markdown also as read), main area and sidebar."""
    from google.protobuf import text_format

    parts: list[str] = []

    def walk(node: Any) -> None:
        if getattr(node, "type", "") == "arrow_data_frame":
            parts.append(node.value.to_csv())
        elif getattr(node, "proto", None) is not None:
            parts.append(text_format.MessageToString(node.proto, as_utf8=True))
            value = getattr(node, "value", None) if hasattr(node, "value") else None
            if isinstance(value, str):  # Markdown as the person reads it (escapes taken out)
                parts.append(readable(value))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return "\n".join(parts)


def _import_rejecting_restricted_text(engine: Engine) -> int:
    """A trace-import job (run inline by an admin with clearance) whose one line is rejected
    quoting a restricted sentence: its rejected lines are unredacted."""
    from review.jobs import runner, trace_import

    row = users.get_by_email(engine, ADA)
    assert row is not None
    line = json.dumps({"trace_id": "leak-1", "query": RESTRICTED_TEXT[1], "top_score": "high"})
    return runner.start(
        engine,
        users.to_actor(row),
        trace_import.NAME,
        trace_import.params("leak.jsonl", "canonical", skip_bad=True, redact=True),
        {"traces": line.encode()},
    )


@pytest.fixture
def restricted_links(ctx: Ctx) -> list[tuple[str, dict[str, str]]]:
    """Deep links to every view that shows a restricted document, case document or trace."""
    eng = ctx.engine
    with read_session(eng) as s:
        docs = s.scalars(select(Document.id).where(Document.access_scope == "restricted")).all()
        case_ids = s.scalars(
            select(CaseDocument.case_id)
            .join(Document, Document.id == CaseDocument.document_id)
            .where(Document.access_scope == "restricted")
            .distinct()
        ).all()
        families = s.scalars(
            select(CaseFamily.key)
            .join(Case, Case.family_id == CaseFamily.id)
            .where(Case.id.in_(case_ids))
            .distinct()
        ).all()
        restricted_traces = s.scalars(
            select(Trace.id).where(Trace.restricted.is_(True)).limit(3)
        ).all()
        claims = s.execute(
            select(CaseClaim.case_id, CaseClaim.text).where(CaseClaim.case_id.in_(case_ids))
        ).all()
    # the cases whose own text retells a restricted document first
    grams = restricted_content(eng).grams
    retelling = {cid for cid, text in claims if ngrams(text) & grams}
    assert retelling
    case_ids = sorted(case_ids, key=lambda c: (c not in retelling, c))
    links: list[tuple[str, dict[str, str]]] = []
    links += [("corpus_page.py", {"doc": str(d)}) for d in docs]
    for cid in case_ids[:4]:
        for page in (
            "cases_page.py",
            "labeling_page.py",
            "adjudication_page.py",
            "builder_page.py",
        ):
            links.append((page, {"case": str(cid)}))
    links += [("builder_page.py", {"family": f}) for f in families[:2]]
    links += [("traces_page.py", {"trace": str(t)}) for t in restricted_traces]
    links.append(("audit_page.py", {"item": str(ctx.ids["restricted_item"])}))
    links.append(("audit_page.py", {"plan": str(ctx.ids["open_plan"])}))
    pending = signoff.get_version(ctx.engine, ctx.ids["pending_policy"])
    links.append(("thresholds_page.py", {"tab": "signoff", "version": str(pending.number)}))
    job = _import_rejecting_restricted_text(eng)
    links += [(page, {"job": str(job)}) for page in ("traces_page.py", "jobs_page.py")]
    # the list of jobs, a keyset page each way, with each job's result in words
    links += [("jobs_page.py", {"before": str(job + 1)}), ("jobs_page.py", {"after": str(job - 1)})]
    assert {k for _, q in links for k in q} == DEEP_LINK_KEYS
    return links


@pytest.fixture
def widget_views(ctx: Ctx) -> list[tuple[str, dict[str, object]]]:
    """Views behind a choice on a page: the Runs page with each run, every perturbed answer
    shown, and the changes made for a case that quotes a restricted document."""
    with read_session(ctx.engine) as s:
        quoting = s.scalars(
            select(Case.key)
            .join(CaseDocument, CaseDocument.case_id == Case.id)
            .join(Document, Document.id == CaseDocument.document_id)
            .where(Document.access_scope == "restricted")
            .distinct()
        ).all()
    runs = evalruns.list_runs(ctx.engine)
    assert runs and quoting
    views: list[tuple[str, dict[str, object]]] = []
    for run in runs:
        for key in quoting[:2]:
            views.append(
                (
                    "runs_page.py",
                    {"runs_pick": run.name, "runs_pert_failing": False, "runs_pert_case": key},
                )
            )
    return views


class Downloads:
    """What every download button of a run offers (its data, as the person would save it)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import streamlit

        self.seen: list[str] = []
        original = streamlit.download_button

        def capture(label: str, data: Any, *args: Any, **kwargs: Any) -> Any:
            payload = data() if callable(data) else data
            if isinstance(payload, bytes):
                self.seen.append(payload.decode("utf-8", errors="replace"))
            elif payload is not None and not hasattr(payload, "read"):
                self.seen.append(str(payload))
            return original(label, payload, *args, **kwargs)

        monkeypatch.setattr(streamlit, "download_button", capture)

    def take(self) -> str:
        out = "\n".join(self.seen)
        self.seen.clear()
        return out


def _shows(
    url: str,
    monkeypatch: pytest.MonkeyPatch,
    page: str,
    user: str,
    widgets: dict[str, object] | None = None,
    downloads: Downloads | None = None,
    **q: str,
) -> str:
    """Open ``page`` through the app's router as ``user`` (deep link query ``q``, widget
    choices ``widgets``): all it shows, with what its download buttons offer."""
    at = app(url, monkeypatch, user).run()
    try:
        at.switch_page(f"pages/{page}")
    except ValueError:  # not registered for this user's roles: not reachable at all
        return ""
    for k, v in q.items():
        at.query_params[k] = v
    for key, value in (widgets or {}).items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, (page, q, [readable(e) for e in at.exception])
    return everything(at) + ("\n" + downloads.take() if downloads else "")


def test_the_search_for_restricted_text_finds_it_with_clearance(
    ctx: Ctx, demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with read_session(ctx.engine) as s:
        memo = s.scalar(select(Document.id).where(Document.doc_key == "MEMO-PRICING-2026"))
    shown = _shows(demo_url, monkeypatch, "corpus_page.py", ADA, doc=str(memo))
    assert "approved by the pricing committee on 14 May 2025" in shown


@pytest.mark.parametrize("user", [INES, PAULA])
def test_no_page_shows_restricted_text_without_clearance(
    user: str,
    ctx: Ctx,
    demo_url: str,
    restricted_links: list[tuple[str, dict[str, str]]],
    widget_views: list[tuple[str, dict[str, object]]],
    restricted_passages: Restricted,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every page app.py registers (all its tabs render in AppTest), every deep link key the
    pages read, the Runs page with each run, and every download button on them: none shows
    a restricted passage to a user without clearance."""
    downloads = Downloads(monkeypatch)
    views: list[tuple[str, dict[str, str], dict[str, object]]] = [
        (page.removeprefix("pages/"), {}, {}) for page in page_files()
    ]
    views += [(page, query, {}) for page, query in restricted_links]
    views += [(page, {}, widgets) for page, widgets in widget_views]
    leaks = []
    reached = set()
    for page, query, widgets in views:
        shown = _shows(demo_url, monkeypatch, page, user, widgets, downloads, **query)
        if shown:
            reached.add(page)
        leaks += [(page, query, widgets, p) for p in restricted_passages.found_in(shown)]
    assert leaks == []
    # every page was read: one a user cannot use is reached by its link and says who uses it
    assert reached == set(PAGES)


def test_with_clearance_the_same_views_show_the_restricted_passages(
    ctx: Ctx,
    demo_url: str,
    widget_views: list[tuple[str, dict[str, object]]],
    restricted_passages: Restricted,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The search above can find what it looks for: Ravi (reviewer, clearance) sees
    restricted passages in the Runs page's outputs."""
    ravi = "ravi.menon@brightwave.example"
    shown = "\n".join(
        _shows(demo_url, monkeypatch, page, ravi, widgets) for page, widgets in widget_views
    )
    assert restricted_passages.found_in(shown)


def test_with_clearance_a_case_page_shows_the_claim_the_search_looks_for(
    ctx: Ctx, demo_url: str, restricted_passages: Restricted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A case's required claim that retells a restricted memo is found by the word runs on
    the Cases page for a user with clearance (and hidden, above, from users without)."""
    with read_session(ctx.engine) as s:
        case = s.scalar(select(Case.id).where(Case.key == "CASE-082"))
    shown = _shows(demo_url, monkeypatch, "cases_page.py", ADA, case=str(case))
    assert "be closed to new customers" in restricted_passages.found_in(shown)


def _cli_export(url: str, monkeypatch: pytest.MonkeyPatch, tmp: Path, fmt: str) -> str:
    from click.testing import CliRunner

    from review.cli.main import main as cli

    monkeypatch.setenv("WORKBENCH_DATABASE_URL", url)
    out = tmp / f"cases.{fmt}"
    result = CliRunner().invoke(
        cli, ["export-cases", str(out), "--format", fmt, "--without-restricted"]
    )
    assert result.exit_code == 0, result.output
    return out.read_text(encoding="utf-8")


@pytest.mark.parametrize("fmt", ["canonical", "ragas", "deepeval"])
def test_no_export_for_a_user_without_clearance_retells_a_restricted_document(
    fmt: str,
    ctx: Ctx,
    demo_url: str,
    restricted_passages: Restricted,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cases exports (the file the service writes for a user without clearance, and the
    command line's --without-restricted) share no word run with a restricted document; with
    clearance the same export does (the search can find what it looks for)."""
    from review.cases import exchange

    found = users.get_by_email(ctx.engine, INES)
    assert found is not None and not found.clearance
    ines = users.to_actor(found)
    hidden = io.StringIO()
    exchange.export(ctx.engine, hidden, fmt, ctx.tax, viewer=ines)
    assert restricted_passages.found_in(hidden.getvalue()) == []
    assert restricted_passages.found_in(_cli_export(demo_url, monkeypatch, ctx.tmp, fmt)) == []
    full = io.StringIO()
    exchange.export(ctx.engine, full, fmt, ctx.tax, viewer=actor(AD))
    assert restricted_passages.found_in(full.getvalue())
