"""benchmarks/population_counts.py runs on the demo database and prints one row per step (its
figures are printed, never asserted)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchmarks import population_counts
from storage.db import make_engine, read_session
from storage.models import SamplingPlan


def test_the_benchmark_prints_every_step_and_leaves_no_plan(
    demo_template: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "demo.db"
    shutil.copy(demo_template, path)
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    with read_session(engine) as s:
        plans_before = s.query(SamplingPlan).count()
    population_counts.main(["--url", url, "--runs", "1"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + 7  # the header and seven steps
    assert all(line.count("|") == 9 for line in rows)
    with read_session(engine) as s:
        assert s.query(SamplingPlan).count() == plans_before
    engine.dispose()
