"""Transactions at the edge (issue 36 item 2): a converted service takes a Session and never
opens, commits or ends a transaction; the pages and the command line each have one entry
point that does (``pages/ui.py``'s ``transact``, ``review/cli/common.py``'s ``transact``, both
through ``review.core.database.write``), and they call the converted services only through it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from review.builder import suggestions
from review.cli import common
from review.core import database
from review.core.errors import InputError
from storage.models import AuditLog, Case
from tests.helpers.actors import make_actor
from tests.helpers.paths import ROOT

# The modules whose write services take a Session (converted area by area).
CONVERTED = (
    "review/audits/plans.py",
    "review/audits/promote.py",
    "review/audits/queue.py",
    "review/audits/verdicts.py",
    "review/cases/cases.py",
    "review/builder/documents.py",
    "review/builder/suggestions.py",
    "review/builder/variants.py",
    "review/labels/imports.py",
    "review/core/userdrafts.py",
)
# What opens, commits or ends a transaction.
TRANSACTION_NAMES = {"run_write", "write_session", "sessionmaker", "commit", "rollback", "begin"}
# What a writer does inside the caller's transaction.
WRITE_NAMES = {"add", "add_all", "flush", "delete", "begin_nested"}
# Writers of other modules that work inside the caller's transaction.
SESSION_WRITERS = {"insert_case", "insert_version", "with_new_ids", "create_case", "update_case"}
ENTRY_POINTS = ("pages/ui.py", "review/cli/common.py")


def _tree(rel: str) -> ast.Module:
    return ast.parse((ROOT / rel).read_text(encoding="utf-8"))


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def _writers(tree: ast.Module) -> set[str]:
    """The module's functions that write (directly, or through another of its functions, a
    Session-taking service of another module or an inner writer)."""
    funcs = _functions(tree)
    calls: dict[str, set[str]] = {}
    writes: set[str] = set()
    for name, fn in funcs.items():
        calls[name] = set()
        params = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args]}
        for n in ast.walk(fn):
            if not isinstance(n, ast.Call):
                continue
            f = n.func
            called = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            owner = ast.unparse(f.value) if isinstance(f, ast.Attribute) else None
            if (
                (owner == "changes" and called == "record")
                or (owner in params | {"s"} and called in WRITE_NAMES)
                or (
                    owner in params | {"s"}
                    and called == "execute"
                    and bool(n.args)
                    and isinstance(n.args[0], ast.Call)
                    and ast.unparse(n.args[0].func).split("(")[0] in {"insert", "update", "delete"}
                )
                or called in SESSION_WRITERS
            ):
                writes.add(name)
            elif called in funcs:
                calls[name].add(called)
        for n in ast.walk(fn):  # a module function passed on (to a savepoint, a lambda)
            if isinstance(n, ast.Name) and n.id in funcs and n.id != name:
                calls[name].add(n.id)
    changed = True
    while changed:
        changed = False
        for name, out in calls.items():
            if name not in writes and out & writes:
                writes.add(name)
                changed = True
    return writes


def _annotations(fn: ast.FunctionDef) -> list[str]:
    args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
    return [ast.unparse(a.annotation) if a.annotation is not None else "" for a in args]


@pytest.mark.parametrize("rel", CONVERTED)
def test_a_converted_service_works_inside_its_callers_transaction(rel: str) -> None:
    """No transaction is opened, committed or ended in a converted module, and each of its
    public functions that writes takes a Session first (the caller's transaction)."""
    tree = _tree(rel)
    opened = [
        f"line {getattr(n, 'lineno', '?')}: {name}"
        for n in ast.walk(tree)
        if (name := n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", None))
        in TRANSACTION_NAMES
    ]
    assert opened == [], f"{rel} opens or ends a transaction"
    funcs = _functions(tree)
    writers = sorted(n for n in _writers(tree) if not n.startswith("_"))
    assert writers, f"{rel}: the finder sees no writer (is the module still converted?)"
    for name in writers:
        first = (_annotations(funcs[name]) or [""])[0]
        assert first == "Session", f"{rel}: {name} writes but does not take a Session first"


def test_the_finder_sees_a_writer_that_opens_its_own_transaction() -> None:
    tree = ast.parse(
        "def save(engine: Engine, x: int) -> None:\n    _store(engine, x)\n"
        "def _store(engine, x):\n    run_write(engine, lambda s: s.add(x))\n"
    )
    assert _writers(tree) == {"save", "_store"}
    assert _annotations(_functions(tree)["save"])[0] == "Engine"


def _calls_of_converted_writers(tree: ast.Module) -> list[ast.Call]:
    names = {n for rel in CONVERTED for n in _writers(_tree(rel)) if not n.startswith("_")}
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in names
    ]


def _front_ends() -> list[Path]:
    return sorted([*(ROOT / "pages").rglob("*.py"), *(ROOT / "review" / "cli").rglob("*.py")])


def test_only_the_entry_points_open_write_transactions_in_the_pages_and_the_cli() -> None:
    for path in _front_ends():
        rel = str(path.relative_to(ROOT))
        if rel in ENTRY_POINTS:
            continue
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            opens = (isinstance(n, ast.Name) and n.id in {"run_write", "write_session"}) or (
                isinstance(n, ast.Attribute)
                and (n.attr in {"run_write", "write_session"} or ast.unparse(n) == "database.write")
            )
            assert not opens, (
                f"{rel}: line {getattr(n, 'lineno', '?')} opens a write transaction; use transact"
            )


def _works(tree: ast.Module) -> list[ast.Lambda | ast.FunctionDef]:
    """What a module gives ``transact`` to run: the lambda or function passed to it, and a
    function of the module the lambda hands its Session to."""
    defs = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    works: list[ast.Lambda | ast.FunctionDef] = []
    for n in ast.walk(tree):
        if not (
            isinstance(n, ast.Call)
            and ast.unparse(n.func) in {"ui.transact", "transact", "common.transact"}
        ):
            continue
        for arg in n.args:
            if isinstance(arg, ast.Lambda) and arg.args.args:
                works.append(arg)
                body = arg.body
                if (
                    isinstance(body, ast.Call)
                    and isinstance(body.func, ast.Name)
                    and body.func.id in defs
                    and body.args
                    and ast.unparse(body.args[0]) == arg.args.args[0].arg
                ):
                    works.append(defs[body.func.id])
            elif isinstance(arg, ast.Name) and arg.id in defs:
                works.append(defs[arg.id])
    return works


def test_the_pages_and_the_cli_run_converted_services_through_the_entry_point() -> None:
    """Each call of a converted service is inside the work given to ``transact`` (a lambda,
    or a function composing several services in one action), with the work's Session."""
    seen = 0
    for path in _front_ends():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        through: set[int] = set()
        for work in _works(tree):
            session = work.args.args[0].arg
            for n in ast.walk(work):
                if isinstance(n, ast.Call) and n.args and ast.unparse(n.args[0]) == session:
                    through.add(id(n))
        for call in _calls_of_converted_writers(tree):
            seen += 1
            assert id(call) in through, (
                f"{path.relative_to(ROOT)}: line {call.lineno} calls "
                f"{ast.unparse(call.func)} outside the transaction entry point"
            )
    assert seen >= 15  # the builder's forms, the audit pages, the cases pages, the import


# ---------------------------------------------------------------------------------------
# The entry points at run time

EXPERT = make_actor("annotator", "ines@test.example")


def _log_size(engine: Engine) -> int:
    with Session(engine) as s:
        return int(s.scalar(select(func.count(AuditLog.id))) or 0)


def test_what_a_service_wrote_is_rolled_back_when_the_action_fails_later(
    demo_engine: Engine,
) -> None:
    """The service does not commit: a failure after it, in the same action, undoes it."""
    with Session(demo_engine) as s:
        present = s.scalar(select(Case.id).where(Case.key == "CASE-001"))
    assert present is not None
    before = _log_size(demo_engine)
    marked: list[str] = []

    def work(s: Session) -> None:
        marked.append(
            suggestions.mark_passage(s, EXPERT, present, "**14 days of the charge date**")
        )
        raise InputError("a later step of the action refused")

    with pytest.raises(InputError, match="later step"):
        database.write(demo_engine, work)
    assert marked and _log_size(demo_engine) == before


def test_a_busy_database_reruns_the_whole_action(engine: Engine) -> None:
    runs: list[int] = []

    def work(s: Session) -> str:
        runs.append(1)
        if len(runs) == 1:
            raise OperationalError("BEGIN IMMEDIATE", {}, Exception("database is locked"))
        return "done"

    assert database.write(engine, work) == "done" and len(runs) == 2


def test_the_cli_entry_point_ends_a_refused_action_with_its_message(
    engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    def work(s: Session) -> None:
        raise InputError("case CASE-9 does not exist")

    with pytest.raises(SystemExit) as stop:
        common.transact(engine, work)
    assert stop.value.code == 1
    assert capsys.readouterr().err == "error: case CASE-9 does not exist\n"
    assert common.transact(engine, lambda s: 42) == 42
