"""No ``IN`` list grows with the data: PostgreSQL takes at most 65,535 parameters a
statement (SQLite 32,766 on common builds), and a list of every case of a run, every key of
an import file or every id of a scope once broke the Monthly review page at 500,000 cases.

Every ``.in_(x)`` / ``.not_in(x)`` under review/ and storage/ whose argument is neither a
literal list of constants nor a ``select(...)`` (a subquery) must be listed in ``BOUNDED``
below with why its list cannot grow with the data. A list that can grows goes through
``storage.db.one_of`` (one parameter on either engine) or becomes a join or a subquery on
the rows it came from. A site is named by its file, its function and its argument's text,
so the list survives edits around it and a changed argument is seen again (a new site in
the same function with the very same argument text passes unseen: the price of that)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tests.helpers.paths import ROOT

# (file, function, argument as ast.unparse writes it) -> why the list is bounded
BOUNDED: dict[tuple[str, str, str], str] = {
    # --- subqueries held in a variable (one parameter whatever their size)
    ("review/audits/estimates.py", "tallies", "current"): "a select of verdict ids",
    ("review/audits/verdicts.py", "current_verdicts", "latest"): "a select of verdict ids",
    ("review/cases/choices.py", "document_keys", "quoted"): "a select of document ids",
    ("review/cases/choices.py", "document_keys", "kept"): "at most choices.SEEK_LIMIT (200)",
    ("review/evaluation/evalruns.py", "outputs_stamp", "mine"): "a select of the run's case ids",
    ("review/evaluation/runview.py", "stamp", "mine"): "a select of the run's case ids",
    ("review/labels/annotator_figures.py", "_queue", "ready"): "a select of ready case ids",
    ("review/labels/counts.py", "label_counts", "ready_ids"): "a select of ready case ids",
    ("review/labels/counts.py", "queue_progress", "hidden"): "a select of restricted case ids",
    ("review/labels/imports.py", "_before", "newest"): "a select of label ids",
    ("review/labels/labeling.py", "progress", "ready_ids"): "a select of ready case ids",
    ("review/traces/browse.py", "_count_text_only", "candidates"): "a select of trigram hits",
    # --- chunked by the caller's loop
    ("review/audits/verdicts.py", "current_verdicts", "chunk"): "900 item ids a query",
    ("review/cases/agreed.py", "refresh_agreed", "part"): "_CHUNK (500) case ids",
    ("review/cases/agreed.py", "agreed_reference_subquery", "case_ids"): (
        "its one caller with ids, _fill, passes refresh_agreed's parts of _CHUNK (500)"
    ),
    ("review/builder/family_view.py", "family_view", "ids"): (
        "the family's cases, _family_cases reads at most MAX_FAMILY_VARIANTS (200)"
    ),
    ("review/builder/family_view.py", "family_view", "emails"): (
        "the confirmers and edit authors of at most MAX_FAMILY_VARIANTS (200) cases"
    ),
    ("review/builder/family_view.py", "_logged", "[str(i) for i in ids]"): (
        "family_view's cases, at most MAX_FAMILY_VARIANTS (200)"
    ),
    ("review/cases/exchange.py", "_batches", "ids"): "one batch of BATCH (500) cases",
    ("review/cases/sight.py", "_blind_of", "chunk"): "500 values a query",
    ("review/core/clearance.py", "restricted_cases", "chunk"): "900 case ids a query",
    ("review/corpus/restricted_traces.py", "_facts", "pks"): (
        "one part of _chunks (_BATCH, 500) or a single trace"
    ),
    ("review/corpus/restricted_traces.py", "follow", "part"): "_chunks of _BATCH (500) keys",
    ("review/corpus/restricted_traces.py", "recompute", "chosen"): (
        "the flipped ones of one part of _BATCH (500) traces"
    ),
    ("review/evaluation/execution.py", "pipeline_inputs", "ids"): "one batch of 200 cases",
    ("review/labels/imports.py", "suggested_users", "[u.lower() for u in wanted]"): (
        "the users of one file: more than MAX_USERS (10,000) is refused"
    ),
    ("review/labels/imports.py", "_check_users", "emails"): (
        "a user mapping: more than MAX_USERS (10,000) is refused"
    ),
    ("review/labels/imports.py", "_current", "part"): "400 (case, annotator) pairs a query",
    ("review/labels/imports.py", "_before", "refs"): "one batch of BATCH (1,000) records",
    ("review/labels/imports.py", "_cases", "keys"): "one batch of BATCH (1,000) records",
    ("review/labels/imports.py", "_write", "case_ids"): "one batch of BATCH (1,000) records",
    ("review/labels/labeling.py", "disagreements", "check"): (
        "one page of candidates, max(limit, 100); the callers' limits are 101 and a page's"
    ),
    ("review/thresholds/replay.py", "replay_traces", "ids[start:start + 900]"): "900 a query",
    ("review/thresholds/replay.py", "_latest_verdicts", "ids[start:start + 900]"): "900",
    ("review/thresholds/replay.py", "_examples_frame", "ids[start:start + 900]"): "900",
    ("review/traces/live/push.py", "_pushed", "ids[lo:lo + 500]"): "500 a query",
    ("review/traces/live/push.py", "_roots", "ids[lo:lo + 500]"): "500 a query",
    ("review/traces/live/push.py", "work", "{p.key[1] for p in batch}"): (
        "one batch sent to Phoenix (BATCH, 100)"
    ),
    ("review/traces/live/staging.py", "_known", "part"): "_chunks of _CHUNK (500)",
    ("review/traces/live/staging.py", "_span_pks", "part"): "_chunks of _CHUNK (500)",
    ("review/traces/live/staging.py", "_stored", "part"): "_chunks of _CHUNK (500)",
    ("review/traces/live/staging.py", "work", "part"): "_chunks of _CHUNK (500)",
    ("review/traces/live/staging.py", "_waiting_entries", "part"): "_chunks of _CHUNK (500)",
    ("review/traces/live/staging.py", "_imported_before", "part"): "_chunks of _CHUNK (500)",
    ("review/traces/retention.py", "work", "ids"): "one delete batch (batch, 2,000)",
    ("review/traces/retention.py", "work", "[t for _, t in found]"): "one delete batch",
    ("storage/inlists.py", "one_of", "values"): "one_of itself: at most SQLITE_IN_LIMIT on SQLite",
    # --- values of the taxonomy, the configuration or a person's choice, not of the data
    ("review/audits/plans.py", "key_rows", "list(windows)"): "the strata of one plan",
    ("review/audits/plans.py", "_draw_query", "list(wanted)"): "the strata of one plan",
    ("review/audits/popcount.py", "stratum_terms", "stale"): (
        "stale days of the range, at most MAX_STALE_DAYS"
    ),
    ("review/audits/population.py", "_in_values", "real"): (
        "the values a person picked in a population filter"
    ),
    ("review/audits/queue.py", "next_item", "skip"): "items a reviewer skipped this session",
    ("review/jobs/queue.py", "claim", "list(kinds)"): "job kinds (a constant set)",
    ("review/jobs/queue.py", "counts", "allowed"): "job kinds (a constant set)",
    ("review/jobs/queue.py", "recent", "allowed"): "job kinds (a constant set)",
    ("review/labels/agreement_sql.py", "_unknown_codes", "sorted(suspects)"): (
        "distinct reason-code lists holding a code the taxonomy no longer has (labels are "
        "checked against the taxonomy when written)"
    ),
    ("review/labels/agreement_sql.py", "_stored_rows", "codes"): "the taxonomy's reason codes",
    ("review/labels/agreement_sql.py", "agreement_report_sql", "cats"): "the decisions",
    ("review/labels/counts.py", "advance", "_LABEL_ONLY"): "audit actions (a constant)",
    ("review/labels/labeling.py", "work", "sorted(tried)"): (
        "cases the annotator skipped plus those lost to a race in this one call"
    ),
    ("review/policy/signoff.py", "_audit_filter", "SIGN_ACTIONS"): "audit actions (a constant)",
    ("review/thresholds/replay.py", "_flipped_groups", "named"): "ranking modes named",
    ("review/traces/browse.py", "_decision_condition", "[*named, '']"): "the decisions",
    ("review/traces/browse.py", "_decision_condition", "named"): "the decisions",
    ("review/traces/browse.py", "_choice_conditions", "sorted(NEGATIVE_FEEDBACK)"): "constant",
    ("review/traces/live/sources.py", "_waiting", "source_ids"): (
        "the live sources an admin configured"
    ),
    ("review/traces/live/tally.py", "source_counts", "list(source_ids)"): (
        "the live sources an admin configured"
    ),
    ("review/traces/monitoring.py", "_rollup_days", "list(values)"): (
        "one segment value or the top few (weekly_by_segment's top, 8)"
    ),
    ("review/traces/rollup.py", "decision_total", "list(decisions)"): "the decisions",
}


def _is_bounded_by_shape(arg: ast.expr) -> bool:
    """A literal list of constants, or a ``select(...)`` / ``union_all(...)`` with any
    methods chained on it (a subquery: one statement, no parameter per row)."""
    if isinstance(arg, ast.List | ast.Tuple | ast.Set):
        return all(isinstance(e, ast.Constant) for e in arg.elts)
    node: ast.expr = arg
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        node = node.func.value
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("select", "union_all")
    )


def in_list_sites(source: str) -> Iterator[tuple[str, str, int]]:
    """(function, argument, line) of each ``.in_(x)`` / ``.not_in(x)`` in ``source`` whose
    ``x`` is not bounded by its shape."""
    tree = ast.parse(source)

    def walk(node: ast.AST, function: str) -> Iterator[tuple[str, str, int]]:
        for child in ast.iter_child_nodes(node):
            inner = (
                child.name
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
                else function
            )
            if (
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Attribute)
                and child.func.attr in ("in_", "not_in")
                and len(child.args) == 1
                and not _is_bounded_by_shape(child.args[0])
            ):
                yield function, ast.unparse(child.args[0]), child.lineno
            yield from walk(child, inner)

    yield from walk(tree, "<module>")


def _found() -> dict[tuple[str, str, str], list[int]]:
    found: dict[tuple[str, str, str], list[int]] = {}
    for path in sorted([*(ROOT / "review").rglob("*.py"), *(ROOT / "storage").rglob("*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        for function, arg, line in in_list_sites(path.read_text(encoding="utf-8")):
            found.setdefault((rel, function, arg), []).append(line)
    return found


def test_every_in_list_is_bounded_or_goes_through_one_of() -> None:
    found = _found()
    unlisted = [
        f"{path}:{lines[0]} in {function}(): .in_({arg})"
        for (path, function, arg), lines in found.items()
        if (path, function, arg) not in BOUNDED
    ]
    assert not unlisted, (
        "an IN list whose length may grow with the data (PostgreSQL refuses more than 65,535 "
        "parameters a statement): use storage.db.one_of(session, column, values), or a join "
        "or subquery; if it is bounded, add it to BOUNDED with why:\n" + "\n".join(unlisted)
    )


def test_the_allow_list_names_only_sites_that_exist() -> None:
    stale = sorted(set(BOUNDED) - set(_found()))
    assert not stale, f"BOUNDED names sites that are gone (remove them): {stale}"


def test_the_scan_tells_a_variable_from_a_constant_list_and_a_subquery() -> None:
    source = (
        "def f(s, ids):\n"
        "    a = Case.id.in_(ids)\n"
        "    b = Case.status.in_(['ready', 'draft'])\n"
        "    c = Case.id.in_(select(Label.case_id).where(Label.x == 1).distinct())\n"
        "    d = Case.id.not_in(sorted(ids))\n"
        "    def g():\n"
        "        return Case.key.in_([k for k in ids])\n"
        "    e = one_of(s, Case.id, ids)\n"
    )
    assert list(in_list_sites(source)) == [
        ("f", "ids", 2),
        ("f", "sorted(ids)", 5),
        ("g", "[k for k in ids]", 7),
    ]
