"""The ``workbench`` command line."""

from __future__ import annotations

import dataclasses
import importlib
import sys
from pathlib import Path

import click
from sqlalchemy import make_url

from review.admin import users
from review.cases import cases, exchange, splits
from review.cli.common import WorkbenchGroup, cli_actor, open_engine, transact
from review.core import database, readable
from review.core.taxonomy import load_taxonomy
from review.corpus import corpus
from review.demo import fixtures
from review.evaluation import evalruns, execution, runmetrics
from storage.db import database_url, get_engine, migrate


@click.group(cls=WorkbenchGroup)
@click.version_option(package_name="abstention-workbench")
def main() -> None:
    """Abstention Workbench: test when your RAG assistant should not answer.

    The database is WORKBENCH_DATABASE_URL (default: SQLite under data/).
    """


@main.command("migrate")
def migrate_cmd() -> None:
    """Create or upgrade the database schema to the newest revision.

    Several processes started together on one database: one migrates, the others wait for it
    (at most WORKBENCH_MIGRATE_WAIT seconds, default 600) and find the schema at head.
    """
    database.show_migration_log()
    result = migrate(get_engine())
    shown = make_url(database_url()).render_as_string(hide_password=True)
    click.echo(f"{result.describe()}: {shown}")


@main.command("seed-demo")
@click.option("--if-empty", is_flag=True, help="Only load when the database has no data yet.")
def seed_demo(if_empty: bool) -> None:
    """Load the demo company: users, documents and cases."""
    engine = open_engine()
    if if_empty and not fixtures.is_empty(engine):
        click.echo("database already has data; demo not loaded")
        return
    report = fixtures.build_demo(engine, load_taxonomy())
    held = fixtures.held(engine)
    # what the pages count (the case builder's variants and their document versions, and the
    # case promoted from an audit, are in the totals), then what this load added
    click.echo(
        f"demo loaded: {held.users} users, {held.documents:,} document versions, "
        f"{held.cases:,} cases, {report.runs} evaluation runs, {held.labels:,} labels, "
        f"{held.traces:,} production traces (imported: {report.documents} document "
        f"versions, {report.cases} cases, {report.traces:,} traces; "
        f"{report.variants} case-builder variants)"
    )


@main.command("import-docs")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
def import_docs(paths: tuple[Path, ...]) -> None:
    """Import documents: Markdown/text files with YAML front matter, folders of them, or JSONL.

    All files land together or nothing is written (the error names file, line and field).
    """
    engine = open_engine()
    docs, nfiles = corpus.read_files(paths, load_taxonomy())
    report = corpus.import_documents(
        engine, cli_actor(), docs, nfiles, source=", ".join(str(p) for p in paths)[:500]
    )
    click.echo(report.summary())


@main.command("import-cases")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--batch",
    default=None,
    help="A label for this import (default: the file's name and the time); "
    "`evaluate --batch` runs on its cases alone.",
)
def import_cases_cmd(file: Path, batch: str | None) -> None:
    """Import cases from canonical JSONL (all or nothing)."""
    engine = open_engine()
    with file.open(encoding="utf-8") as fh:
        items = list(cases.iter_cases_jsonl(fh, str(file), load_taxonomy()))
    label = cases.import_batch_label(str(file), batch)
    actor = cli_actor()
    report = transact(engine, lambda s: cases.import_cases(s, actor, items, str(file), batch=label))
    click.echo(f"{report.summary()} (import batch {label!r})")


@main.command("export-cases")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--status", default=None, help="Only cases with this status (draft, ready, ...).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(exchange.FORMATS),
    default="canonical",
    show_default=True,
    help="canonical JSONL (exact round trip), ragas (single-turn samples, JSONL) or "
    "deepeval (goldens, JSON).",
)
@click.option(
    "--without-restricted",
    is_flag=True,
    help="Write the file as a user without clearance sees the cases: restricted documents' "
    "texts and the text of cases relying on them replaced by the redaction text.",
)
def export_cases_cmd(file: Path, status: str | None, fmt: str, without_restricted: bool) -> None:
    """Export cases as canonical JSONL, a Ragas dataset or DeepEval goldens ('-' for stdout)."""
    engine = open_engine()
    viewer = cli_actor()
    if without_restricted:
        viewer = dataclasses.replace(viewer, clearance=False)
    flt = cases.CaseFilter(status=status)
    tax = load_taxonomy()
    if str(file) == "-":
        report = exchange.export(engine, sys.stdout, fmt, tax, flt, viewer=viewer)
    else:
        tmp = file.with_suffix(file.suffix + ".partial")
        with tmp.open("w", encoding="utf-8") as fh:
            report = exchange.export(engine, fh, fmt, tax, flt, viewer=viewer)
        tmp.replace(file)
    click.echo(report.summary(), err=str(file) == "-")


@main.command("add-user")
@click.argument("email")
@click.option("--name", required=True, help="Display name.")
@click.option(
    "--role",
    "roles",
    multiple=True,
    required=True,
    help="annotator, reviewer, product_owner, compliance or admin (repeatable).",
)
@click.option("--clearance", is_flag=True, help="May see restricted documents and traces.")
def add_user_cmd(email: str, name: str, roles: tuple[str, ...], clearance: bool) -> None:
    """Add a user (e.g. the first admin)."""
    engine = open_engine()
    u = users.add_user(engine, cli_actor(), email, name, list(roles), clearance)
    click.echo(
        f"user {u.email} added with roles {', '.join(u.roles)}"
        + (" and clearance" if u.clearance else "")
    )


@main.command("import-run")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--name", required=True, help="A unique name for the run.")
@click.option("--system-version", default="unspecified", help="What was evaluated.")
def import_run_cmd(file: Path, name: str, system_version: str) -> None:
    """Import an evaluation run's outputs (JSONL: case, decision, score, text, cited_ids,
    repeat, versions, error). All or nothing."""
    engine = open_engine()
    with file.open(encoding="utf-8") as fh:
        items = list(evalruns.iter_outputs(fh, str(file), load_taxonomy()))
    run_id = evalruns.import_run(engine, cli_actor(), name, system_version, items, str(file))
    click.echo(f"run {name!r} imported (id {run_id}) with {readable.count(len(items), 'output')}")


@main.command("import-judge")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--run", "run_name", required=True, help="The run whose outputs were judged.")
def import_judge_cmd(file: Path, run_name: str) -> None:
    """Import LLM-judge labels of a run's outputs (JSONL: case, repeat, judge, decision,
    reason_codes, output_acceptable) and print the judge's agreement with the experts per
    field. All or nothing."""
    import pandas as pd

    from review.evaluation import judges

    engine = open_engine()
    tax = load_taxonomy()
    run = next((r for r in evalruns.list_runs(engine) if r.name == run_name), None)
    if run is None:
        raise click.BadParameter(f"no run named {run_name!r}", param_hint="--run")
    with file.open(encoding="utf-8") as fh:
        items = list(judges.iter_judge_labels(fh, str(file), tax))
    n = judges.import_judge_labels(engine, cli_actor(), run.id, items, str(file))
    click.echo(f"{readable.count(n, 'judge label')} stored for run {run_name!r}")
    table = judges.display_table(judges.agreement(engine, run.id, tax))
    with pd.option_context("display.width", 200, "display.max_colwidth", 60):
        click.echo(table.to_string(index=False))


# Pipelines that moved with the layout of review/ into area packages: the old names still load.
_MOVED_PIPELINES = {"review.refpipeline": "review.evaluation.refpipeline"}


def _load_pipeline(spec: str) -> execution.Pipeline:
    module, _, func = spec.partition(":")
    if not module or not func:
        raise click.BadParameter(
            "use module:function, e.g. review.evaluation.refpipeline:reference"
        )
    module = _MOVED_PIPELINES.get(module, module)
    try:
        fn = getattr(importlib.import_module(module), func)
    except (ImportError, AttributeError) as exc:
        raise click.BadParameter(f"cannot load {spec}: {exc}") from None
    if not callable(fn):
        raise click.BadParameter(f"{spec} is not callable")
    return fn  # type: ignore[no-any-return]


@main.command("evaluate")
@click.option(
    "--pipeline",
    "spec",
    required=True,
    help="module:function taking (question, documents, identity).",
)
@click.option("--repeats", default=1, show_default=True, type=click.IntRange(1, 100))
@click.option("--name", default=None, help="Run name (default: pipeline and time).")
@click.option("--system-version", default=None, help="Default: the pipeline spec.")
@click.option("--timeout", default=30.0, show_default=True, help="Seconds per call.")
@click.option(
    "--perturbations/--no-perturbations",
    default=True,
    show_default=True,
    help="Also re-run each case with its irrelevant documents reordered and with a "
    "high-overlap distractor added (the metamorphic checks that need a re-run).",
)
@click.option("--family", default=None, help="Only the cases of this question family.")
@click.option("--slice", "slice_", default=None, help="Only the cases in this slice.")
@click.option(
    "--split",
    default=None,
    type=click.Choice(["train", "validation", "test"]),
    help="Only the cases of this split.",
)
@click.option("--category", default=None, help="Only the cases of this category.")
@click.option("--batch", default=None, help="Only the cases of this import batch.")
@click.option(
    "--document",
    default=None,
    help="Only the cases that use this document (any version): a targeted regression "
    "after it changed.",
)
@click.option("--language", default=None, help="Only the cases in this question language.")
@click.option(
    "--mentions",
    default=None,
    help="Only the cases whose question or a required claim mentions this text (an entity "
    "or product that changed; case-insensitive).",
)
@click.option("--cases", "keys", default=None, help="Only these case keys (comma-separated).")
def evaluate_cmd(
    spec: str,
    repeats: int,
    name: str | None,
    system_version: str | None,
    timeout: float,
    perturbations: bool,
    family: str | None,
    slice_: str | None,
    split: str | None,
    category: str | None,
    batch: str | None,
    document: str | None,
    language: str | None,
    mentions: str | None,
    keys: str | None,
) -> None:
    """Run a pipeline on every ready case (or a subset: family, slice, split, category,
    import batch, the cases using a document, question language, the cases mentioning a text,
    case keys; all given apply) and store the
    outputs as a run.

    A call that raises, times out or returns a malformed response is recorded per case as an
    infrastructure failure, never as an answer. Prints the pass rate of every metamorphic
    check over all repeats (never the best run).
    """
    import datetime as dt

    from review.thresholds.thresholds import configured_pipeline

    engine = open_engine()
    fn, used = configured_pipeline(engine, _load_pipeline(spec))
    tax = load_taxonomy()
    name = name or f"{spec} {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M:%S}"
    with click.progressbar(length=0, label="evaluating", show_pos=True) as bar:

        def tick(n: int) -> None:
            bar.update(1)

        run_id = execution.execute(
            engine,
            cli_actor(),
            fn,
            tax,
            name=name,
            system_version=system_version or spec,
            repeats=repeats,
            timeout_s=timeout,
            config={"pipeline": spec, **used},
            progress=tick,
            perturb=perturbations,
            subset=execution.CaseSubset(
                family=family,
                slice=slice_,
                split=split,
                category=category,
                import_batch=batch,
                document=document,
                language=language,
                mentions=mentions,
                keys=tuple(k.strip() for k in keys.split(",") if k.strip()) if keys else None,
            ),
        )
    runs = {r.id: r for r in evalruns.list_runs(engine)}
    r = runs[run_id]
    click.echo(
        f"run {r.name!r} (id {run_id}): {readable.count(r.outputs, 'output')} on "
        f"{readable.count(r.cases, 'case')}, "
        f"{readable.count(r.infra_failures, 'infrastructure failure')}"
    )
    checks = runmetrics.metamorphic_checks(
        evalruns.outputs_frame(engine, run_id, tax), evalruns.perturbed_frame(engine, run_id, tax)
    )
    for c in checks.itertuples(index=False):
        click.echo(
            f"  {c.check}: {c.passed}/{c.runs} passed, {readable.count(c.varying, 'case')} varying "
            "between repeats"
        )


@main.command("gate")
@click.option(
    "--policy",
    "policy_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The no-answer policy YAML whose targets must hold.",
)
@click.option(
    "--run",
    "run_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Run outputs JSONL (as for import-run); joined to the gold labels here.",
)
@click.option(
    "--baseline",
    "baseline_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The previous run's outputs JSONL, for the release gate's drift row (neither boundary may "
    "move by more than the policy's release.max_boundary_drift).",
)
@click.option(
    "--split",
    default="test",
    show_default=True,
    type=click.Choice(["test", "validation", "train", "all"]),
)
def gate_cmd(policy_file: Path, run_file: Path, baseline_file: Path | None, split: str) -> None:
    """Release gate for CI: every row of the release gate (docs/release-gate.md), overall
    and per gated slice, with the count behind each; exit 1 if any fails, naming it.

    The run is scored against the gold labels in the database without being stored.
    Infrastructure failures count as wrong decisions on both sides; every ready case of the
    split needs an output (a case without one fails the gate), and every non-answer a reason
    code.
    """
    import pandas as pd

    from review.policy.policy import load_policy
    from review.thresholds import release

    engine = open_engine()
    tax = load_taxonomy()
    policy = load_policy(policy_file)

    def scored(path: Path) -> pd.DataFrame:
        with path.open(encoding="utf-8") as fh:
            items = list(evalruns.iter_outputs(fh, str(path), tax))
        return evalruns.score_outputs(engine, items, str(path), tax)

    frame = scored(run_file)
    baseline = scored(baseline_file) if baseline_file is not None else None
    in_scope = splits.scope_pairs(engine, split)
    report = release.release_gate(policy, frame, split, baseline=baseline, in_scope=in_scope)
    with pd.option_context("display.width", 250, "display.max_colwidth", 90):
        click.echo(release.gate_table(report).to_string(index=False))
    if report.not_measured:
        click.echo("\nNot measured:")
        for line in report.not_measured:
            click.echo(f"  - {line}")
    failed = report.failed
    click.echo(
        f"\n{readable.count(len(report.rows) - len(failed), 'row')} met, {len(failed)} failed "
        f"({readable.count(report.cases, split + ' case')})"
    )
    for r in failed:
        click.echo(f"FAILED: {r.row} [{r.scope}]: {r.why}")
    sys.exit(1 if failed else 0)


@main.command("verify-signoffs")
@click.option(
    "--head",
    "expected_head",
    default=None,
    metavar="HASH",
    help="A chain head recorded elsewhere (an exported policy carries it): exit 1 unless the "
    "stored record still holds it (signatures added since are fine; a record rewritten or cut "
    "back before it is not).",
)
def verify_signoffs_cmd(expected_head: str | None) -> None:
    """Check the hash chain of every sign-off; exit 1 if a row was altered, added or deleted.

    With the signing key in WORKBENCH_SIGNING_KEY, the record must carry the key's seal
    (`workbench adopt-signing-key`), and plain rows verify only when the seal covers them; the
    output says which rows are keyed and which are not. Signatures the audit log recorded
    must all be stored, with the hash logged. Without a key the chain detects edits, not a
    complete rewrite of the record and the audit log: compare with a head recorded elsewhere
    (--head) for that."""
    from review.policy import chain, signoff

    engine = open_engine()
    key = chain.signing_key()
    status = signoff.check_afresh(engine)
    problems = list(status.problems) + signoff.text_findings(engine)
    for p in problems:
        if p in status.unchecked:
            label = "UNCHECKED"
        elif p in status.shrunk:
            label = "SHRUNK"
        elif p.startswith("the sign-off record is not sealed"):
            label = "UNSEALED"
        else:
            label = "TAMPERED"
        click.echo(f"{label}: {p}")
    for line in chain.describe(status, key):
        click.echo(line)
    click.echo(f"chain head {status.head} ({readable.count(status.count, 'signature')} stored)")
    mismatch = False
    if expected_head is not None:
        ok, why = signoff.recorded_head(engine, expected_head)
        click.echo(why)
        mismatch = not ok
    if problems or mismatch:
        sys.exit(1)
    click.echo(
        "sign-off chain intact"
        + (" and sealed with the signing key" if key is not None else " (no signing key)")
        + (" and it holds the recorded head" if expected_head is not None else "")
    )


@main.command("adopt-signing-key")
@click.option(
    "--head",
    "expected_head",
    default=None,
    metavar="HASH",
    help="A chain head recorded elsewhere: refuse unless the record still holds it.",
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def adopt_signing_key_cmd(expected_head: str | None, yes: bool) -> None:
    """Seal the sign-off record as it stands with the signing key in WORKBENCH_SIGNING_KEY.

    With a key configured, only a record sealed with it verifies. This checks the record
    first (every row, the head, the audit log's signatures, the policy texts, and --head when
    given), then seals it: its plain rows are vouched for by the key from now on, and every
    new signature is keyed. Written to the audit log. Adopt only a record you trust."""
    from review.policy import chain, signoff

    engine = open_engine()
    key = chain.signing_key()
    status = signoff.check_afresh(engine)
    sealed = status.seal is not None and not status.seal.legacy and not status.problems
    if not yes and key is not None and not sealed:
        click.echo(
            f"This seals the sign-off record with the signing key {chain.alg_for(key)}: "
            f"{readable.count(status.count, 'signature')} ({len(status.plain)} plain, "
            f"{len(status.keyed)} keyed), "
            f"head {status.head}. The key then vouches for them."
        )
        click.confirm("Adopt the signing key on this record?", abort=True)
    done = signoff.adopt_signing_key(engine, cli_actor(), expected_head=expected_head)
    if done.already:
        click.echo(f"the record is already sealed with this signing key ({done.alg})")
        return
    click.echo(
        f"the signing key {done.alg} now seals the sign-off record: "
        f"{readable.count(done.count, 'signature')} "
        f"({done.plain} plain, {done.keyed} keyed), head {done.head}. Every new signature is "
        "keyed; with the key configured, a record without this seal does not verify."
    )


@main.command("backup")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
def backup_cmd(file: Path) -> None:
    """Copy the whole database to FILE (SQLite online backup, or pg_dump for PostgreSQL).

    Safe while the app is running; FILE is replaced only once the copy is complete."""
    from review.admin import backup

    report = backup.backup(database_url(), file)
    click.echo(report.summary())


@main.command("restore")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Replace a database that already holds data.")
def restore_cmd(file: Path, force: bool) -> None:
    """Replace the database with a backup made by `workbench backup`.

    Refuses a file that is not a workbench backup, and a database that holds data unless
    --force. Upgrades the schema afterwards and verifies the sign-off chain."""
    from review.admin import backup

    report = backup.restore(database_url(), file, force=force)
    click.echo(report.summary())
    if report.chain_problems:
        sys.exit(1)


@main.command("export-policy")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
def export_policy_cmd(file: Path) -> None:
    """Write the approved no-answer policy with approved_on and its change record."""
    from review.thresholds import thresholds

    text = thresholds.export_approved(open_engine())
    file.write_text(text, encoding="utf-8")
    click.echo(f"approved policy written to {file}")


@main.command("lint-wording")
@click.argument(
    "file", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
def lint_wording_cmd(file: Path | None) -> None:
    """Validate a refusal wording file and lint every message (default: the wording in force).

    Restricted titles and document ids come from the corpus. Exits 1 on any finding."""
    from review.wording import terms, versions
    from review.wording.messages import parse_wording

    engine = open_engine()
    if file is None:
        ws = versions.in_force(engine).wording
    else:
        ws = parse_wording(file.read_text(encoding="utf-8"), str(file))
    lines = terms.lint_report(ws, terms.corpus_terms(engine))
    for line in lines:
        click.echo(line)
    click.echo(
        f"{readable.count(len(ws.messages), 'message')}, "
        f"{readable.count(len(lines), 'lint finding')}"
    )
    sys.exit(1 if lines else 0)


@main.command("wording-check")
@click.option("--rule", default=None, help="Only traces that trip this wording rule.")
@click.option("--limit", default=20, show_default=True, help="Offending traces to list.")
def wording_check_cmd(rule: str | None, limit: int) -> None:
    """Lint the refusal texts of imported traces with the wording in force.

    Prints counts per rule and the newest offending traces (ids and rules, never the text)."""
    from review.wording import production

    engine = open_engine()
    page = production.production_findings(engine, cli_actor(), 1, limit, rule=rule)
    s = page.summary
    click.echo(f"{readable.count(s.checked, 'refusal text')} checked, {s.offending} with findings")
    for name, n in s.per_rule.items():
        click.echo(f"  {name}: {n}")
    for row in page.rows:
        click.echo(
            f"{row.trace_id}\t{row.at:%Y-%m-%d %H:%M}\t{row.decision}\t{', '.join(row.rules)}"
        )


@main.command("export-audit")
@click.argument("plan_id", type=int)
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--format", "fmt", type=click.Choice(["jsonl", "csv"]), default="jsonl", show_default=True
)
def export_audit_cmd(plan_id: int, file: Path, fmt: str) -> None:
    """Export an audit batch (plan, sample, verdicts) as JSONL or CSV."""
    from review.audits import export

    with file.open("w", encoding="utf-8", newline="") as out:
        writer = export.export_jsonl if fmt == "jsonl" else export.export_csv
        n = writer(open_engine(), cli_actor(), plan_id, out)
    click.echo(f"{readable.count(n, 'record')} written to {file}")


def _register_trace_commands() -> None:
    from review.cli import (
        decidecli,
        jobscli,
        labelscli,
        pushcli,
        receivecli,
        synccli,
        tracecli,
    )

    main.add_command(decidecli.decide_cmd)
    main.add_command(tracecli.import_traces_cmd)
    main.add_command(tracecli.purge_cmd)
    main.add_command(tracecli.runs_cmd)
    main.add_command(tracecli.rebuild_rollup_cmd)
    main.add_command(tracecli.recompute_restricted_cmd)
    main.add_command(receivecli.receive_cmd)
    main.add_command(synccli.sync_cmd)
    main.add_command(pushcli.push_group)
    main.add_command(labelscli.labels_group)
    main.add_command(jobscli.worker_cmd)
    main.add_command(jobscli.jobs_group)


_register_trace_commands()


if __name__ == "__main__":
    main()
