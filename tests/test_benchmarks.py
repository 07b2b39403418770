"""The scale benchmark's pure parts (benchmarks/figures.py) on made-up figures: the ratio to a
reference, targets, the comparison with recorded figures (by ratio, regressions first) and the
table of two engines side by side. No database, no timing."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest

from benchmarks import figures
from benchmarks.figures import Figure, Reference, Target

SEC1 = figures.target_s(1.0)
FLOOR = Target("max_ratio", 2.0, "≥ 50% of the floor's rate")
REQUESTED = {"traces": 1000, "cases": 10}


def record(
    engine: str,
    scan: float,
    floor: float,
    figs: list[Figure],
    *,
    requested: dict[str, Any] | None = None,
    code: str = "abc1234",
) -> dict[str, Any]:
    return figures.make_record(
        engine=engine,
        machine={"cpus": "2", "cpu": "Test CPU", "memory": "4 GiB", "code": code},
        requested=REQUESTED if requested is None else requested,
        sizes={"traces": 1000, "trace_chunks": 5000, "cases": 10, "labels": 40},
        references=[
            Reference("scan", "one full read of the traces table", scan, scan * 0.9),
            Reference("floor", "raw insert floor", floor, floor * 0.8),
        ],
        figures=figs,
        recorded_at="2026-12-01 22:00 UTC",
    )


def page(key: str, wall: float | None, *, error: str = "") -> Figure:
    return Figure(f"page:{key}", "Page", key.title(), wall, wall, "scan", SEC1, error=error)


def test_ratio_and_target() -> None:
    refs = {"scan": Reference("scan", "scan", 2.0, 1.5), "floor": Reference("floor", "f", 4, 3)}
    fast = page("a", 0.5)
    assert figures.ratio(fast, refs) == pytest.approx(0.25)
    assert figures.met(fast, refs) is True
    assert figures.met(page("b", 1.5), refs) is False
    imp = Figure("import:file", "Import", "import", 7.9, 6.0, "floor", FLOOR)
    assert figures.met(imp, refs) is True  # 7.9 s against a 4 s floor: above half its rate
    assert figures.met(Figure("import:file", "I", "i", 8.1, 6.0, "floor", FLOOR), refs) is False
    # no reference, no ratio; no target, no verdict; a failed figure has neither
    assert figures.ratio(Figure("x", "A", "x", 1.0, 1.0, "missing"), refs) is None
    assert figures.met(Figure("x", "A", "x", 1.0, 1.0, "scan"), refs) is None
    assert figures.met(page("c", None, error="boom"), refs) is None
    assert figures.ratio(page("d", 1.0), {"scan": Reference("scan", "s", 0.0, 0.0)}) is None


def test_regressions_are_read_by_ratio_so_a_busy_machine_cancels() -> None:
    then = record("sqlite", 1.0, 10.0, [page("a", 0.5), page("b", 0.5), page("c", 0.5)])
    # the whole machine is twice as slow now: every figure and the reference doubled
    busy = record("sqlite", 2.0, 20.0, [page("a", 1.0), page("b", 1.0), page("c", 1.0)])
    assert figures.compare(busy, then) == ([], [])
    # on the busy machine, b really got slower (3x its ratio) and c faster (4x)
    now = record("sqlite", 2.0, 20.0, [page("a", 1.0), page("b", 3.0), page("c", 0.25)])
    worse, better = figures.compare(now, then)
    assert [c.key for c in worse] == ["page:b"]
    assert worse[0].factor == pytest.approx(3.0)
    assert worse[0].expected_s == pytest.approx(1.0)  # the recorded ratio at today's reference
    assert [c.key for c in better] == ["page:c"]
    assert better[0].factor == pytest.approx(0.25)


def test_regressions_worst_first_and_failures_before_them() -> None:
    then = record("sqlite", 1.0, 10.0, [page(k, 0.4) for k in "abcd"])
    now = record(
        "sqlite",
        1.0,
        10.0,
        [page("a", 0.6), page("b", 1.2), page("c", None, error="exit 1"), page("d", 0.41)],
    )
    worse, better = figures.compare(now, then)
    assert [c.key for c in worse] == ["page:c", "page:b", "page:a"]
    assert worse[0].ratio_now is None and math.isinf(worse[0].factor)
    assert better == []


def test_small_jitter_and_unmatched_figures_are_not_news() -> None:
    then = record("sqlite", 1.0, 10.0, [page("tiny", 0.01), page("gone", 0.5)])
    # 4x a 10 ms figure is 30 ms: under the minimum delta; a new figure has nothing to compare
    now = record("sqlite", 1.0, 10.0, [page("tiny", 0.04), page("new", 5.0)])
    assert figures.compare(now, then) == ([], [])
    with pytest.raises(ValueError, match="factor"):
        figures.compare(now, then, factor=1.0)


def test_comparison_text_puts_regressions_first_and_refuses_other_sizes() -> None:
    then = record("sqlite", 1.0, 10.0, [page("a", 0.5), page("b", 0.5)])
    now = record("sqlite", 1.0, 10.0, [page("a", 2.0), page("b", 0.1)])
    text = figures.render_comparison(now, then, "benchmarks/recorded/scale-sqlite.json")
    assert text.index("## Regressions") < text.index("- Page: A:") < text.index("## Improvements")
    assert text.index("## Improvements") < text.index("- Page: B:")
    assert "4.00x slower" in text and "5.00x faster" in text
    assert "code abc1234" in text
    other = record("sqlite", 1.0, 10.0, [page("a", 2.0)], requested={"traces": 5})
    assert "Not compared" in figures.render_comparison(other, then, "x.json")
    pg = record("postgresql", 1.0, 10.0, [page("a", 2.0)])
    assert "recorded on SQLite" in figures.render_comparison(pg, then, "x.json")


def test_records_round_trip(tmp_path: Path) -> None:
    rec = record("sqlite", 1.0, 10.0, [page("a", 0.5), Figure("i", "Import", "i", 5, 4, "floor")])
    path = tmp_path / "recorded" / "scale-sqlite.json"
    figures.save_record(path, rec)
    assert figures.load_record(path) == rec
    (tmp_path / "bad.json").write_text('{"engine": "sqlite"}', encoding="utf-8")
    with pytest.raises(ValueError, match="not a scale benchmark record"):
        figures.load_record(tmp_path / "bad.json")


def test_two_engine_table() -> None:
    imp = Figure("import:file", "Import", "import_file of 1,000 traces", 30.0, 20.0, "floor", FLOOR)
    sq = record("sqlite", 2.0, 10.0, [page("a", 0.5), page("b", 1.5), imp], code="abc1234")
    pg_imp = dataclasses.replace(imp, wall_s=15.0)
    pg = record(
        "postgresql",
        4.0,
        10.0,
        [page("a", None, error="exit 1: boom"), pg_imp, page("only_pg", 0.2)],
        code="def5678",
    )
    table = figures.render_engines([sq, pg], ["scale-sqlite.json", "scale-postgresql.json"])
    lines = table.splitlines()
    assert "| Area | What | Target | SQLite | Met | PostgreSQL | Met |" in lines
    assert any("**SQLite**" in ln and "code abc1234" in ln for ln in lines)
    assert any("**PostgreSQL**" in ln and "code def5678" in ln for ln in lines)
    row = {ln.split(" | ")[1]: ln for ln in lines if ln.startswith("| ") and " | " in ln}
    assert row["A"] == (
        "| Page | A | ≤ 1 s | 0.50 s (CPU 0.50 s; 0.25× scan) | yes | failed: exit 1: boom | "
        "failed |"
    )
    assert row["B"].endswith("| 1.50 s (CPU 1.50 s; 0.75× scan) | **no** | not run |  |")
    # import: 3x its floor on SQLite (under half its rate), 1.5x on PostgreSQL
    assert row["import_file of 1,000 traces"] == (
        "| Import | import_file of 1,000 traces | ≥ 50% of the floor's rate | 30.00 s (CPU 20.00 "
        "s; 3× floor) | **no** | 15.00 s (CPU 20.00 s; 1.5× floor) | yes |"
    )
    assert row["Only_Pg"].startswith("| Page | Only_Pg | ≤ 1 s | not run |  | 0.20 s")
    # every row has the same number of cells as the header
    rows = [ln for ln in lines if ln.startswith("|")]
    assert len({ln.count(" | ") for ln in rows if not ln.startswith("|---")}) == 1


def test_two_runs_of_one_engine_are_told_apart_by_their_size() -> None:
    """The 10M PostgreSQL run beside the 1M runs: each column says its engine and, where two
    share an engine, its number of traces."""
    small = record("postgresql", 4.0, 10.0, [page("a", 0.4)], code="aaa1111")
    big = record(
        "postgresql",
        40.0,
        10.0,
        [page("a", 0.9)],
        code="bbb2222",
        requested={"traces": 10_000_000, "cases": 500_000},
    )
    big["sizes"] = dict(big["sizes"], traces=10_100_002)
    small["sizes"] = dict(small["sizes"], traces=1_620_002)
    sq = record("sqlite", 2.0, 10.0, [page("a", 0.5)])
    assert figures.run_labels([sq, small, big]) == [
        "SQLite",
        "PostgreSQL, 1.6M traces",
        "PostgreSQL, 10.1M traces",
    ]
    table = figures.render_engines([sq, small, big], ["s.json", "p.json", "p10.json"])
    lines = table.splitlines()
    assert (
        "| Area | What | Target | SQLite | Met | PostgreSQL, 1.6M traces | Met | "
        "PostgreSQL, 10.1M traces | Met |"
    ) in lines
    assert any(ln.startswith("- **PostgreSQL, 10.1M traces** (p10.json") for ln in lines)
    assert any("different sizes" in ln for ln in lines)
    # same engine, same size: numbered rather than confused
    assert figures.run_labels([small, small]) == [
        "PostgreSQL, 1.6M traces (1)",
        "PostgreSQL, 1.6M traces (2)",
    ]


def test_one_engine_table_names_each_reference() -> None:
    refs = {"scan": Reference("scan", "one full read of the traces table", 2.0, 1.8)}
    lines = figures.render_figures([page("a", 0.5), page("b", None, error="timed out")], refs)
    assert "- *scan*: one full read of the traces table: 2.00 s wall, 1.80 s CPU" in lines
    assert "| Page | A | 0.50 s | 0.50 s | 0.25× scan | ≤ 1 s | yes |  |  |  |  |" in lines
    assert "| Page | B | failed |  |  | ≤ 1 s | failed |  |  |  | timed out |" in lines


def test_scale_collects_figures_and_references_from_the_children() -> None:
    from benchmarks import scale

    args = scale.parse_args(["--traces", "100", "--cases", "5", "--labels", "20"])
    ok = {"first_s": 0.4, "first_cpu_s": 0.3, "rerun_s": 0.2, "rerun_cpu_s": 0.1, "problems": []}
    refs, figs = scale.collect(
        args,
        {},
        {"scan_s": 2.0, "scan_cpu_s": 1.5, "rows": 100},
        [
            ("pages/a_page.py", "A", "ravi@x", ok),
            ("pages/b_page.py", "B", "ravi@x", {"error": "timed out after 60s"}),
        ],
        {"error": "exit 1: boom"},
        {},
        {"replay_s": 3.0, "replay_cpu_s": 2.5, "traces": 100, "flipped": 3, "skipped": 0},
        {},
    )
    by_key = {f.key: f for f in figs}
    assert list(by_key) == [
        "page:pages/a_page.py",
        "page:pages/a_page.py:rerun",
        "page:pages/b_page.py",
        "page:pages/b_page.py:rerun",
        "thresholds:replay",
        "import:file",
        "import:again",
    ]
    assert (by_key["page:pages/a_page.py"].wall_s, by_key["page:pages/a_page.py"].cpu_s) == (
        0.4,
        0.3,
    )
    assert by_key["page:pages/b_page.py:rerun"].error == "timed out after 60s"
    assert by_key["import:file"].error == "exit 1: boom" and refs["floor"].error
    replay = by_key["thresholds:replay"]
    assert figures.ratio(replay, refs) == pytest.approx(1.5)
    assert figures.met(replay, refs) is False  # over its 2 s target
    assert refs["scan"].wall_s == 2.0 and "sklearn" not in refs


def test_a_reused_build_is_shown_but_not_scaled_by_this_runs_reference() -> None:
    from benchmarks import scale

    args = scale.parse_args(["--traces", "100"])
    build = {"build_demo_s": 9.0, "load_traces_s": 2.0, "load_cases_labels_s": 1.0}
    scan = {"scan_s": 1.0, "scan_cpu_s": 1.0}
    refs, fresh = scale.collect(args, build, scan, [], {}, {}, {}, {})
    assert [figures.ratio(f, refs) for f in fresh] == [9.0, 2.0, 1.0]
    refs, reused = scale.collect(args, build, scan, [], {}, {}, {}, {}, build_reused=True)
    assert [figures.ratio(f, refs) for f in reused] == [None, None, None]
    assert all("reused database" in f.notes for f in reused)


def test_on_sqlite_a_regression_needs_the_cpu_ratio_to_grow_too() -> None:
    def fig(wall: float, cpu: float) -> Figure:
        return Figure("page:a", "Page", "A", wall, cpu, "scan", SEC1)

    # wall stretched 3x by other work on the machine, CPU as before
    for engine, flagged in (("sqlite", []), ("postgresql", ["page:a"])):
        then = record(engine, 1.0, 10.0, [fig(0.5, 0.4)])
        now = record(engine, 1.0, 10.0, [fig(1.5, 0.4)])
        assert [c.key for c in figures.compare(now, then)[0]] == flagged, engine
    # the code got slower: both grow, on either engine, and the line says by how much in CPU
    then = record("sqlite", 1.0, 10.0, [fig(0.5, 0.4)])
    now = record("sqlite", 1.0, 10.0, [fig(1.5, 1.2)])
    [change] = figures.compare(now, then)[0]
    assert change.cpu_factor == pytest.approx(3.0)
    assert "CPU ratio 3.00x the recorded one" in figures.render_comparison(now, then, "x.json")


def test_the_import_floors_write_every_trace_and_chunk(any_url: str, tmp_path: Path) -> None:
    """The raw-insert floor the importer is measured against writes the same rows on each
    engine (sqlite3 executemany; COPY into a database made beside ``any_url``)."""
    from sqlalchemy import text

    from benchmarks import synthetic
    from storage.db import make_engine

    data = tmp_path / "traces.jsonl"
    with data.open("w", encoding="utf-8") as fh:
        synthetic.write_synthetic(fh, 30, 5, seed=3)
    expected = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines()]

    def stored(url: str) -> tuple[list[str], int]:
        engine = make_engine(url)
        with engine.connect() as conn:
            ids = list(conn.scalars(text("SELECT trace_id FROM traces ORDER BY id")))
            chunks = int(conn.scalar(text("SELECT COUNT(*) FROM trace_chunks")) or 0)
        engine.dispose()
        return ids, chunks

    other = tmp_path / "other.jsonl"  # the same traces under other ids
    other.write_text(data.read_text(encoding="utf-8").replace('"bench-', '"again-'), "utf-8")
    if any_url.startswith("sqlite"):
        db = tmp_path / "floor.db"
        assert synthetic.sqlite_floor(db, data) == 30
        ids, chunks = stored(f"sqlite:///{db}")
        # into a database that holds traces, rolled back: it writes them all, then leaves it
        assert synthetic.sqlite_floor(db, other, batch=7, schema_ready=True, rollback=True) == 30
        assert stored(f"sqlite:///{db}") == (ids, chunks)
    else:
        with synthetic.postgres_floor_database(any_url) as floor_url:
            assert synthetic.postgres_floor(floor_url, data, batch=7) == 30
            ids, chunks = stored(floor_url)
            assert synthetic.postgres_floor(floor_url, other, batch=7, rollback=True) == 30
            assert stored(floor_url) == (ids, chunks)
    assert ids == [d["trace_id"] for d in expected]
    assert chunks == sum(len(d["chunks"]) for d in expected)


def test_a_damaged_record_is_reported_not_fatal(tmp_path: Path) -> None:
    from benchmarks import scale

    bad = tmp_path / "scale-sqlite.json"
    damaged = {"engine": "sqlite", "requested": REQUESTED, "references": [], "figures": [{}]}
    bad.write_text(json.dumps(damaged), encoding="utf-8")
    args = scale.parse_args(["--compare", str(bad)])
    now = record("sqlite", 1.0, 10.0, [page("a", 0.5)])
    assert "could not be read" in scale.comparison(args, now)
    args = scale.parse_args(["--compare", str(tmp_path / "missing.json")])
    assert "No recorded figures" in scale.comparison(args, now)


def test_the_bulk_load_stores_what_the_maker_made(any_engine: Any, tax: Any) -> None:
    """The scale benchmark's bulk writer (executemany on SQLite, COPY on PostgreSQL) stores
    each generated trace and chunk as the ORM reads it back: JSON, booleans, timestamps."""
    from sqlalchemy import func, select

    from benchmarks import scale
    from storage.models import Trace, TraceChunk

    scale.load_traces(any_engine, tax, 40, 2, seed=5)
    made, chunks = scale.TraceMaker(tax, 40, 2, seed=5).rows(0, 0, 40, 0)
    with any_engine.connect() as conn:
        stored = {t.trace_id: t for t in conn.execute(select(Trace).order_by(Trace.id))}
        n_chunks = conn.scalar(select(func.count()).select_from(TraceChunk))
    assert sorted(stored) == sorted(m["trace_id"] for m in made)
    assert n_chunks == len(chunks)
    for m in made:
        t = stored[m["trace_id"]]
        for key in ("decision", "reason_code", "attributes", "versions", "topics", "restricted"):
            assert getattr(t, key) == m[key], (key, m["trace_id"])
        assert t.top_score == (None if m["top_score"] is None else pytest.approx(m["top_score"]))
        assert t.at.tzinfo is not None and abs((t.at - m["at"]).total_seconds()) < 60


def test_the_bulk_load_leaves_the_schema_and_the_rollup_as_an_import_would(
    any_engine: Any, tax: Any
) -> None:
    """The build loads without the secondary indexes, the chunks' key and the trace id's
    trigger on PostgreSQL, and counts the rollup as it writes: afterwards every index, key and
    trigger is back as it was, and the rollup equals a recount from the traces."""
    from sqlalchemy import select, text

    from benchmarks import scale
    from review.traces import rollup
    from storage.models import TraceRollup

    def schema() -> tuple[set[str], set[str], set[tuple[str, str]]]:
        if any_engine.dialect.name != "postgresql":
            return set(), set(), set()
        with any_engine.connect() as conn:
            # the tables' indexes, each valid and present on every partition (a partitioned
            # table's index made "ON ONLY" the table would be a shell without them)
            indexes = {
                f"{d} valid={v} on every partition={whole}"
                for d, v, whole in conn.execute(
                    text(
                        "SELECT pg_get_indexdef(x.indexrelid), x.indisvalid, "
                        "(SELECT count(*) FROM pg_inherits i WHERE i.inhparent = x.indexrelid) "
                        "= (SELECT count(*) FROM pg_inherits p WHERE p.inhparent = x.indrelid) "
                        "FROM pg_index x "
                        "WHERE x.indrelid IN ('traces'::regclass, 'trace_chunks'::regclass)"
                    )
                )
            }
            keys = {
                str(d)
                for (d,) in conn.execute(
                    text(
                        "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid "
                        "IN ('traces'::regclass, 'trace_chunks'::regclass) AND conparentid = 0"
                    )
                )
            }
            triggers = {
                (str(n), str(e))
                for n, e in conn.execute(
                    text(
                        "SELECT tgname, tgenabled FROM pg_trigger "
                        "WHERE tgrelid = 'traces'::regclass AND NOT tgisinternal"
                    )
                )
            }
        return indexes, keys, triggers

    def counts() -> set[tuple[object, ...]]:
        with any_engine.connect() as conn:
            return {tuple(r) for r in conn.execute(select(TraceRollup))}

    before = schema()
    scale.load_traces(any_engine, tax, 60, 2, seed=3)
    assert schema() == before
    loaded = counts()
    assert loaded
    rollup.rebuild(any_engine)
    assert counts() == loaded
