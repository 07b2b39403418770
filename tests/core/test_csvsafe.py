"""Exports are safe to open: every CSV the workbench writes goes through review.core.csvsafe,
which neutralises text cells a spreadsheet would run as formulas (OWASP: a leading ``'``) and
leaves numbers as numbers. The writers are enumerated from the source, so a new CSV export
cannot bypass it; each export is checked with hostile cells."""

from __future__ import annotations

import ast
import csv
import io
import unicodedata
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine

from review.audits import export, queue, verdicts
from review.audits import plans as audit_plans
from review.audits.plans import PlanSpec
from review.audits.verdicts import VerdictIn
from review.charts.downloads import csv_text
from review.core import csvsafe
from review.policy.policy import Costs
from review.policy.selective import sweep, sweep_by_slice
from tests.helpers.actors import REVIEWER
from tests.helpers.audits import add_trace
from tests.helpers.paths import ROOT
from tests.helpers.transact import write

HOSTILE = ['=HYPERLINK("http://x","y")', "+1+1", "@SUM(A1)", "\t=1", "-2+3", "\r=1"]
FORMULA = tuple(csvsafe.FORMULA_START)

# Code that calls a CSV writer without csvsafe, and why that is right. Nothing else may.
NOT_EXPORTS = {
    ("review/thresholds/thresholds.py", "data_fingerprint"): "the CSV text is hashed into a "
    "sha256 the sign-offs record; it is never written out (neutralising it would change every "
    "recorded fingerprint)",
}


def _csv_writers(path: Path) -> list[tuple[str, int]]:
    """(enclosing function, line) of every CSV writer in ``path``: a ``.to_csv(`` call, or
    ``csv.writer`` / ``csv.DictWriter`` / ``DictWriter`` imported from csv."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    from_csv = {
        a.asname or a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "csv"
        for a in node.names
    }
    found = []
    for fn in [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))]:
        name = getattr(fn, "name", "<module>")
        body = [n for stmt in getattr(fn, "body", []) for n in ast.walk(stmt)]
        for node in body:
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            attr = f.attr if isinstance(f, ast.Attribute) else None
            is_writer = attr == "to_csv" or (
                isinstance(f, ast.Attribute)
                and isinstance(f.value, ast.Name)
                and f.value.id == "csv"
                and attr in {"writer", "DictWriter"}
            )
            is_writer = is_writer or (
                isinstance(f, ast.Name) and f.id in from_csv and f.id in {"writer", "DictWriter"}
            )
            if is_writer:
                found.append((name, node.lineno))
    # a call inside a nested function is seen from each enclosing one: keep the innermost
    innermost: dict[int, str] = {}
    for name, line in found:
        if name != "<module>" or line not in innermost:
            innermost[line] = name
    return sorted((name, line) for line, name in innermost.items())


def test_every_csv_writer_goes_through_csvsafe() -> None:
    sources = [ROOT / "app.py", *(ROOT / "pages").rglob("*.py"), *(ROOT / "review").rglob("*.py")]
    bypass = []
    seen_allowed = set()
    for path in sources:
        rel = str(path.relative_to(ROOT))
        if rel == "review/core/csvsafe.py":
            continue
        for fn, line in _csv_writers(path):
            if (rel, fn) in NOT_EXPORTS:
                seen_allowed.add((rel, fn))
                continue
            bypass.append(f"{rel}:{line} ({fn})")
    assert not bypass, "write CSV with review.core.csvsafe (frame_csv, DictWriter):\n" + (
        "\n".join(bypass)
    )
    assert seen_allowed == set(NOT_EXPORTS), "an allowlist entry no longer matches the code"


def test_csv_downloads_on_pages_are_fed_by_csvsafe_writers() -> None:
    """A page hands over CSV (mime text/csv) only from a writer that goes through csvsafe."""
    safe = {"csv_text", "export_csv", "frame_csv"}
    for path in [ROOT / "app.py", *(ROOT / "pages").rglob("*.py")]:
        src = path.read_text(encoding="utf-8")
        if "text/csv" in src:
            assert any(f"{name}(" in src for name in safe), path


def test_the_scan_finds_writers(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import csv\nfrom csv import DictWriter\n"
        "def a(df, out):\n    df.to_csv(out)\n"
        "def b(out):\n    csv.writer(out)\n"
        "def c(out):\n    DictWriter(out, ['x'])\n"
        "def d(rows):\n    csv.reader(rows)\n",
        encoding="utf-8",
    )
    assert [fn for fn, _ in _csv_writers(probe)] == ["a", "b", "c"]


def test_hostile_text_cells_are_quoted_and_numbers_stay_numbers() -> None:
    for cell in HOSTILE:
        assert csvsafe.safe_cell(cell) == "'" + cell
    for fine in ["plain", "a=b", " a=1", "", "'=already quoted", "  ", "x -1"]:
        assert csvsafe.safe_cell(fine) == fine
    for number in [-0.5, -2, 3, np.float64(-1.25), np.int64(-7), None, True]:
        assert csvsafe.safe_cell(number) is number

    frame = pd.DataFrame(
        {
            "text": HOSTILE,
            "score": [-0.5, -1.0, 0.25, -2.0, 1.0, 0.0],
            "count": [-1, 2, -3, 4, -5, 6],
            "=col": ["ok"] * 6,
        }
    )
    text = csvsafe.frame_csv(frame)
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["text", "score", "count", "'=col"]
    assert [r[0] for r in rows[1:]] == ["'" + h for h in HOSTILE]
    assert [r[1] for r in rows[1:]] == ["-0.5", "-1.0", "0.25", "-2.0", "1.0", "0.0"]
    back = pd.read_csv(io.StringIO(text))
    assert back["score"].dtype == float and back["count"].dtype == np.int64
    assert back["score"].tolist() == frame["score"].tolist()
    assert frame["text"].tolist() == HOSTILE  # the caller's frame is left as it was


# A formula character behind what a spreadsheet trims or does not show (the cases:
# spaces, a line feed, a byte-order mark; and their relatives).
HIDDEN_START = [
    " =1+1",
    "   +1+1",
    '\n=HYPERLINK("http://x","y")',
    "\ufeff@SUM(A1)",
    "\ufeff -2+3",
    " \n\t=1",
    "\u00a0=1",
    "\u200b=1",
    "\u3000@x",
    "\x0b=1",
]


def test_a_formula_behind_blanks_line_breaks_or_a_bom_is_neutralised() -> None:
    for cell in HIDDEN_START:
        assert csvsafe.safe_cell(cell) == "'" + cell, repr(cell)
    text = csvsafe.frame_csv(pd.DataFrame({"text": HIDDEN_START}))
    rows = list(csv.reader(io.StringIO(text)))
    assert [r[0] for r in rows[1:]] == ["'" + h for h in HIDDEN_START]


@given(
    prefix=st.text(
        alphabet=st.sampled_from([" ", "\t", "\r", "\n", "\ufeff", "\u00a0", "\u200b", "\x00"]),
        max_size=6,
    ),
    lead=st.sampled_from(["=", "+", "-", "@"]),
    rest=st.text(max_size=20),
)
def test_any_invisible_prefix_before_a_formula_character_is_neutralised(
    prefix: str, lead: str, rest: str
) -> None:
    cell = prefix + lead + rest
    assert csvsafe.safe_cell(cell) == "'" + cell


@given(st.text(max_size=30))
def test_text_with_a_visible_first_character_other_than_a_formula_one_is_kept(text: str) -> None:
    first_visible = bool(text) and unicodedata.category(text[0])[0] not in "CZ"
    if first_visible and not text[0].isspace() and text[0] not in "=+-@":
        assert csvsafe.safe_cell(text) == text


def test_the_dict_writer_neutralises_header_and_rows() -> None:
    out = io.StringIO()
    w = csvsafe.DictWriter(out, ["name", "-n"])
    w.writeheader()
    w.writerow({"name": "=1+1", "-n": -3})
    w.writerows([{"name": "@x", "-n": 0.5}])
    assert list(csv.reader(io.StringIO(out.getvalue()))) == [
        ["name", "'-n"],
        ["'=1+1", "-3"],
        ["'@x", "0.5"],
    ]


def test_the_chart_data_csv_of_the_thresholds_page_is_safe() -> None:
    """The sweep and per-slice curves the Thresholds page offers as CSV: slice names (from
    case data) neutralised, thresholds and rates (negative ones too) kept as numbers."""
    rng = np.random.default_rng(1)
    n = 120
    score = -rng.random(n).round(3)  # a lower-is-better score: negative confidences
    answerable = rng.random(n) < 0.6
    frame = pd.DataFrame(
        {
            "score": score,
            "answerable": answerable,
            "acceptable": answerable & (rng.random(n) < 0.7),
            "slice": [[HOSTILE[i % len(HOSTILE)]] for i in range(n)],
        }
    )
    costs = Costs(false_refusal=1.0, unsupported_answer=5.0)
    by_slice = sweep_by_slice(frame, costs)
    text = csv_text(by_slice)
    back = pd.read_csv(io.StringIO(text))
    assert set(back["slice"]) == {"'" + h for h in HOSTILE}
    numeric = [c for c in by_slice.columns if pd.api.types.is_float_dtype(by_slice[c])]
    assert numeric and all(pd.api.types.is_numeric_dtype(back[c]) for c in numeric), numeric
    sweep_csv = pd.read_csv(io.StringIO(csv_text(sweep(frame, costs))))
    assert (sweep_csv["threshold"].dropna() < 0).any()  # negative thresholds, as numbers
    for row in list(csv.reader(io.StringIO(text)))[1:]:
        for cell in row:
            assert not cell.startswith(FORMULA) or _is_number(cell), row


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


@pytest.fixture
def hostile_batch(engine: Engine) -> int:
    """A batch over traces whose query and answer are formulas, named like one, audited with a
    formula in the reviewer's notes."""
    for i, text in enumerate(HOSTILE):
        add_trace(engine, f"t{i}", query=text, answer_text=text, decision="abstain")
    pid = write(
        engine,
        audit_plans.create_plan,
        REVIEWER,
        PlanSpec(name="=cmd|' /C calc'!A0", total=len(HOSTILE)),
    )
    write(engine, audit_plans.draw_plan, REVIEWER, pid)
    item = write(engine, queue.next_item, REVIEWER, pid)
    assert item is not None
    verdict = VerdictIn("false_refusal", stages=("policy_too_strict",), notes="@SUM(A1)")
    write(engine, verdicts.submit_verdict, REVIEWER, item, verdict, None)
    return pid


def test_the_audit_csv_export_is_safe_to_open(engine: Engine, hostile_batch: int) -> None:
    out = io.StringIO()
    n = export.export_csv(engine, REVIEWER, hostile_batch, out)
    assert n == len(HOSTILE)
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert {r["plan"] for r in rows} == {"'=cmd|' /C calc'!A0"}
    assert sorted(r["query"] for r in rows) == sorted("'" + h for h in HOSTILE)
    assert sorted(r["answer_text"] for r in rows) == sorted("'" + h for h in HOSTILE)
    assert [r["notes"] for r in rows if r["notes"]] == ["'@SUM(A1)"]
    judged = next(r for r in rows if r["verdict"])
    assert judged["claims_total"] == "0" and judged["seed"] == "0"
    for row in rows:
        for cell in row.values():
            assert not cell.startswith(FORMULA) or _is_number(cell), row


def test_tables_do_not_offer_an_unneutralised_csv_download() -> None:
    """st.dataframe's own CSV download writes cells unchanged; the shipped config turns it off
    so every CSV a user gets comes from a csvsafe writer."""
    import tomllib

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    assert config["client"]["disableDataExport"] is True
