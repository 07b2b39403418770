"""The Admin page's Audit log tab lists imports and purges with their status: an import that
never closed is shown as interrupted with its counts, and the run that resumed it is named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from review.core.identity import SYSTEM
from review.traces import importer
from storage import runs
from tests.helpers.pages import ADA, no_exception, page_app, readable
from tests.helpers.traces import canonical_lines, chunk, make_trace, write_jsonl


def _runs_table(at: Any) -> Any:
    frames = [d.value for d in at.dataframe if "run" in d.value.columns]
    assert len(frames) == 1
    return frames[0]


def test_admin_sees_an_interrupted_import_and_the_run_that_resumed_it(
    demo_url: str, demo_engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = [make_trace(f"p-{i}", chunks=[chunk("a")]) for i in range(6)]
    path = write_jsonl(tmp_path / "page.jsonl", canonical_lines(items))
    real = importer.insert_chunks
    calls = {"n": 0}

    def dying(session: Any, rows: list[tuple[Any, ...]]) -> None:
        calls["n"] += 1
        real(session, rows)
        if calls["n"] == 2:
            raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(importer, "insert_chunks", dying)
        m.setattr(importer, "_close_import", lambda *a, **k: None)  # killed: nothing closes
        with pytest.raises(KeyboardInterrupt):
            importer.import_file(demo_engine, SYSTEM, path, "canonical", batch_size=2)
    first = importer.recent_imports(demo_engine)[0].id
    monkeypatch.setattr(runs, "process_alive", lambda host, pid: False)

    at = page_app(demo_url, monkeypatch, "pages/admin_page.py", ADA).run()
    no_exception(at)
    table = _runs_table(at)
    row = table[table["run"] == f"trace_import {first}"].iloc[0]
    assert row["status"] == "interrupted" and row["counts"].startswith("added 2, skipped 0")
    assert "no closing entry" in row["details"]
    assert any("interrupted and not resumed" in readable(w) for w in at.warning)

    report = importer.import_file(demo_engine, SYSTEM, path, "canonical", batch_size=2)
    at = page_app(demo_url, monkeypatch, "pages/admin_page.py", ADA).run()
    no_exception(at)
    table = _runs_table(at)
    old = table[table["run"] == f"trace_import {first}"].iloc[0]
    new = table[table["run"] == f"trace_import {report.import_id}"].iloc[0]
    assert old["status"] == "interrupted"
    assert f"resumed by trace_import {report.import_id}" in old["details"]
    assert new["status"] == "completed"
    assert f"resumes interrupted trace_import {first}" in new["details"]
    assert not any("interrupted and not resumed" in readable(w) for w in at.warning)
