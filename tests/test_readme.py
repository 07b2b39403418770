"""The README and the docs stay honest: their examples parse, and every command and page is
documented."""

from __future__ import annotations

import re

from sqlalchemy import Engine

from review.cases import cases
from review.cli.main import main
from review.core.taxonomy import Taxonomy
from review.corpus.docformat import parse_markdown
from review.demo.people import DEMO_ACTOR
from tests.helpers import docs
from tests.helpers.paths import ROOT

README = docs.text("README")


def test_readme_document_example_imports(tax: Taxonomy) -> None:
    doc = parse_markdown(docs.example("documents/refund-monthly.md"), "refund-monthly.md", tax)
    assert doc.doc_id == "POL-REFUND-MONTHLY" and doc.version == 2


def test_readme_case_example_is_valid_canonical_jsonl(tax: Taxonomy) -> None:
    lines = docs.example("cases.jsonl").splitlines()
    parsed = list(cases.iter_cases_jsonl(lines, "cases.jsonl", tax))
    assert [case.key for _, case in parsed] == ["CASE-001", "CASE-002"]


def test_every_cli_command_is_in_the_readme() -> None:
    for name in main.commands:
        assert f"workbench {name}" in docs.text("commands"), name


def test_every_page_is_in_the_readme() -> None:
    app = (ROOT / "app.py").read_text(encoding="utf-8")
    titles = re.findall(r'PageSpec\(\s*"\w+",\s*"\w+\.py",\s*"([^"]+)"', app)
    assert len(titles) >= 15
    for title in titles:
        assert f"**{title}**" in README, title
        assert f"\n## {title}\n" in docs.text("pages"), title


def test_the_two_commands_come_first() -> None:
    head = README[:400]
    assert "make run" in head and "make test" in head


def test_readme_trace_example_is_a_valid_canonical_trace() -> None:
    import json

    from review.traces.formats.canonical import trace_from_dict

    example = docs.example("traces.jsonl")
    trace = trace_from_dict(json.loads(example), "docs/import.md")
    assert trace.trace_id and trace.chunks


def test_readme_trace_example_logs_every_signal_the_shipped_policy_needs() -> None:
    """Following the example, a team's traces can be replayed on the Thresholds page: the
    example once named a ranking mode no policy has ("cosine") and no topics, so every trace
    written after it was "not replayable" (found importing a public data set, issue 35)."""
    import json

    from review.policy.gate import decide
    from review.policy.policy import load_policy
    from review.thresholds.redecide import lacked, signals_of

    logged = json.loads(docs.example("traces.jsonl"))
    policy = load_policy()
    assert lacked(policy, logged) == []
    assert decide(policy, signals_of(logged)).decision == logged["decision"]


def test_the_demo_section_states_the_sizes_the_fixtures_build() -> None:
    from review.demo import files, fixtures, people

    section = README[README.index("## The demo company") : README.index("## Documentation")]
    text = " ".join(section.split())
    traces = fixtures.DEMO_TRACES + fixtures.EXTRA_DEMO_TRACES
    assert f"{traces:,} production traces" in text
    assert f"({fixtures.DEMO_TRACES:,} generated" in text
    n_docs = len(list(files.DEMO_DOCS.glob("*.md")))
    assert f"{n_docs} document versions" in text
    n_cases = len(files.DEMO_CASES.read_text(encoding="utf-8").splitlines())
    assert f"the {n_cases} imported" in text
    assert len(people.DEMO_USERS) == 7 and "seven users" in text


def test_the_demo_figures_are_the_ones_the_overview_shows(
    demo_engine: Engine, tax: Taxonomy
) -> None:
    """README's cases, share expecting no answer and traces are what the app shows on the
    demo: the Overview's own figures (build_overview), and the trace count seed-demo makes."""
    import inspect

    from review.core import readable
    from review.demo import fixtures
    from review.monthly.overview import build_overview

    section = README[README.index("## The demo company") : README.index("## Documentation")]
    text = " ".join(section.split())
    ov = build_overview(demo_engine, DEMO_ACTOR, tax)
    assert ov.unanswerable_share is not None
    ready = ov.cases_by_status["ready"]
    assert f"{ov.cases_total} cases in {ov.families} counterfactual families" in text
    share = readable.percent(ov.unanswerable_share)
    assert f"{share} of the {ready} ready cases expecting no answer" in text
    # seed-demo calls build_demo with its default trace count; the test demo makes fewer
    seeded = inspect.signature(fixtures.build_demo).parameters["trace_count"].default
    assert seeded == fixtures.DEMO_TRACES
    assert f"{seeded + fixtures.EXTRA_DEMO_TRACES:,} production traces" in text
    # seed-demo prints the totals the database holds, the ones README states
    held = fixtures.held(demo_engine)
    assert held.cases == ov.cases_total
    assert f"{held.documents} in the corpus" in text
    assert f"{held.labels} labels by three annotators" in text
    assert held.users == 7 and "and seven users" in text


def test_the_architecture_table_matches_the_areas() -> None:
    """Every area of review/ is a row, and its "May use" column is what its docstring says
    (which tests/test_architecture.py checks against the imports)."""
    import ast

    section = docs.text("architecture")
    rows = re.findall(r"^\| `(\w+)` \| [^|]+ \| ([^|]+) \|$", section, re.M)
    review = ROOT / "review"
    areas = sorted(p.name for p in review.iterdir() if (p / "__init__.py").exists())
    assert sorted(name for name, _ in rows) == areas
    for name, uses in rows:
        doc = ast.get_docstring(ast.parse((review / name / "__init__.py").read_text())) or ""
        declared = re.search(r"May use: ([^.]+)\.", doc)
        assert declared and " ".join(declared.group(1).split()) == uses.strip(), name


def test_security_md_names_only_files_commands_and_settings_that_exist() -> None:
    """SECURITY.md promises defences by name: every file it names exists, every
    ``workbench`` command it names is a command, and the shipped config holds what it says."""
    from review.cli.main import main as cli

    text = (ROOT / "SECURITY.md").read_text(encoding="utf-8")
    paths = set(re.findall(r"`((?:review|tests|pages|storage)/[\w/]+\.py)`", text))
    assert len(paths) >= 4
    for path in paths:
        assert (ROOT / path).is_file(), path
    commands = set(re.findall(r"`workbench ([a-z][a-z-]+)", text))
    assert {"verify-signoffs", "runs"} <= commands
    assert commands <= set(cli.commands), commands - set(cli.commands)
    config = (ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8")
    assert 'showErrorDetails = "none"' in config and 'showErrorDetails = "none"' in text
    assert 'address = "127.0.0.1"' in config and "`127.0.0.1`" in text
    assert "disableDataExport = true" in config


def test_the_performance_table_is_the_recorded_runs_of_both_engines() -> None:
    """The Performance page's table is what `benchmarks/scale.py --table` prints for the three
    recorded runs (SQLite and PostgreSQL at 1.6M traces, PostgreSQL at 10M), so its figures
    are the recorded ones."""
    from benchmarks import figures

    sources = [
        "benchmarks/recorded/scale-sqlite.json",
        "benchmarks/recorded/scale-postgresql.json",
        "benchmarks/recorded/scale-postgresql-10m.json",
    ]
    table = figures.render_engines([figures.load_record(ROOT / p) for p in sources], sources)
    body = table.split("\n", 2)[2]  # without its title
    assert body in docs.text("performance"), (
        "run `benchmarks/scale.py --table` and paste its table into docs/performance.md"
    )


def test_the_parallel_check_figures_are_the_code_s() -> None:
    from review.traces import importparts

    mib = importparts.PARALLEL_MIN_BYTES // 2**20
    assert (
        f"a canonical JSONL file of {mib} MiB or\nmore is checked in parts, one process per "
        f"core (up to {importparts.MAX_PARTS})" in docs.text("import")
    )


def test_the_browser_table_is_the_recorded_runs_of_both_engines() -> None:
    """The Performance page's table of what a person waits for is what
    `benchmarks/browser.py --table` prints for the two recorded runs (SQLite and PostgreSQL)."""
    from benchmarks import browser, figures

    sources = [
        "benchmarks/recorded/browser-sqlite.json",
        "benchmarks/recorded/browser-postgresql.json",
    ]
    table = browser.render_engines([figures.load_record(ROOT / p) for p in sources], sources)
    body = table.split("\n", 2)[2]  # without its title
    assert body in docs.text("performance"), (
        "run `benchmarks/browser.py --table` and paste its table into docs/performance.md"
    )


def test_make_run_listens_where_port_and_address_say() -> None:
    """`make run PORT=8600 ADDRESS=...` are the Makefile's own variables (a dry run prints the
    command it would start), and the README says so."""
    import shutil
    import subprocess

    make = shutil.which("make")
    assert make is not None
    out = subprocess.run(
        [make, "-n", "-W", "pyproject.toml", "run", "PORT=8600", "ADDRESS=0.0.0.0"],
        cwd=ROOT, capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    serve = next(line for line in out.splitlines() if "serve.py" in line)
    assert "--server.port 8600" in serve and "--server.address 0.0.0.0" in serve
    default = subprocess.run(
        [make, "-n", "run"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert "--server.port 8501 " in default and "--server.address 127.0.0.1 " in default
    assert "make run PORT=" in README and "make run ADDRESS=" in README
