"""An import whose traces became restricted because they cite documents the corpus has never
seen says so (issue 35 item 6b): how many of the imported traces, which document ids (the
first few and the total, bounded however many there are) and the way forward (import those
documents, or an admin clears the rule), in the import report, `workbench import-traces` and
the Traces page's import result."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine

from review.corpus.restricted_traces import Reason
from review.traces import unknowndocs
from review.traces.unknowndocs import UnknownDocuments
from tests.helpers.pages import no_exception, page_app, readable
from tests.helpers.traces import (
    add_document,
    canonical_lines,
    chunk,
    import_traces,
    make_trace,
    write_jsonl,
)

TRACES = "pages/traces_page.py"


def test_the_message_counts_names_the_ids_and_the_way_forward() -> None:
    u = UnknownDocuments()
    u.add(
        [
            (Reason("unknown", "DOC-B"), Reason("unknown", "DOC-A")),
            (Reason("unknown", "DOC-A"),),
            (Reason("scope"), Reason("unknown", "DOC-C")),
            (Reason("unknown"),),  # a chunk that names no document
            (Reason("document", "SECRET"),),  # restricted, but not for an unknown document
            (),  # open
        ]
    )
    assert (u.traces, u.only, u.nameless, u.ids) == (4, 3, 1, {"DOC-A", "DOC-B", "DOC-C"})
    lines = u.lines(imported=6)
    assert lines[0] == (
        "4 of 6 imported traces are restricted because they cite documents the corpus has "
        "never seen (3 document ids); 1 cites a chunk that names no document. 1 of them is "
        "also restricted for another reason (a restricted document, scope, title or "
        "attribute) and stay restricted either way."
    )
    assert lines[1] == "Unknown document ids: DOC-A, DOC-B, DOC-C"
    assert lines[2] == unknowndocs.WAY_FORWARD
    assert "import those documents" in lines[2] and "Admin page" in lines[2]
    assert UnknownDocuments().lines(5) == []


def test_ten_thousand_unknown_ids_give_a_bounded_message() -> None:
    u = UnknownDocuments()
    u.add([(Reason("unknown", f"DOC-{i:05d}"),) for i in range(10_000)])
    text = "\n".join(u.lines(10_000))
    assert "10,000 of 10,000 imported traces" in text and "(10,000 document ids)" in text
    assert "DOC-00000, DOC-00001" in text and "DOC-00020" not in text
    assert "(the first 20 of 10,000)" in text
    assert len(text) < 2_000
    # an absurdly long id is cut to size
    long = UnknownDocuments()
    long.add([(Reason("unknown", "X" * 5_000),)])
    assert len(long.ids_text()) <= unknowndocs.ID_CHARS


def test_more_ids_than_are_remembered_say_more_than(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(unknowndocs, "MAX_TRACKED", 5)
    u = UnknownDocuments()
    u.add([(Reason("unknown", f"D{i}"),) for i in range(8)])
    assert u.traces == 8 and len(u.ids) == 5 and u.more
    assert "(more than 5 document ids)" in u.headline(8)
    assert u.ids_text().endswith("(the first 5 of more than 5)")


def test_an_import_where_only_some_traces_cite_unknown_documents(engine: Engine) -> None:
    add_document(engine, "KNOWN-1")
    items = [
        make_trace("open-1", chunks=[chunk("a", doc="KNOWN-1")]),
        make_trace("open-2", chunks=[chunk("b", doc="KNOWN-1")]),
        make_trace("new-1", chunks=[chunk("c", doc="NEW-DOC-2"), chunk("d", doc="KNOWN-1")]),
        make_trace("new-2", chunks=[chunk("e", doc="NEW-DOC-1")]),
        make_trace("new-3", chunks=[chunk("f", doc="NEW-DOC-1")]),
    ]
    report = import_traces(engine, items, batch_size=2)  # counted across batches
    assert report.added == 5 and report.restricted == 3
    assert (report.unknown.traces, report.unknown.only) == (3, 3)
    assert report.unknown.ids == {"NEW-DOC-1", "NEW-DOC-2"}
    assert "3 restricted (3 cite documents the corpus has never seen)" in report.summary()
    lines = report.unknown.lines(report.added)
    assert lines[0].startswith("3 of 5 imported traces are restricted because they cite")
    assert lines[1] == "Unknown document ids: NEW-DOC-1, NEW-DOC-2"
    # importing them again adds nothing and says nothing about unknown documents
    again = import_traces(engine, items)
    assert again.added == 0 and again.unknown.lines(0) == []


def test_an_import_of_known_documents_says_nothing_about_them(engine: Engine) -> None:
    add_document(engine, "KNOWN-1")
    report = import_traces(engine, [make_trace("t", chunks=[chunk("a", doc="KNOWN-1")])])
    assert report.restricted == 0 and report.unknown.traces == 0
    assert "never seen" not in report.summary()


def test_the_command_line_says_why_and_what_to_do(
    sqlite_url: str, engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from review.cli import tracecli

    items = [
        make_trace(f"qa-{i}", chunks=[chunk(f"c{i}", doc=f"QA-DOC-{i:03d}")]) for i in range(30)
    ]
    path = write_jsonl(tmp_path / "qa.jsonl", canonical_lines(items))
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", sqlite_url)
    out = CliRunner().invoke(tracecli.import_traces_cmd, [str(path)])
    assert out.exit_code == 0, out.output
    assert "30 of 30 imported traces are restricted because they cite documents" in out.output
    assert "(30 document ids)" in out.output
    assert "QA-DOC-000, QA-DOC-001" in out.output and "(the first 20 of 30)" in out.output
    assert "QA-DOC-020" not in out.output
    assert "Way forward: import those documents" in out.output


def test_the_traces_page_import_result_says_why(
    empty_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = [
        make_trace(f"qa-{i}", chunks=[chunk(f"c{i}", doc=f"QA-DOC-{i:03d}")]) for i in range(25)
    ]
    payload = "\n".join(canonical_lines(items)).encode("utf-8")
    at = page_app(empty_url, monkeypatch, TRACES, "solo@example.org").run()
    at.file_uploader[0].set_value([("qa.jsonl", payload, "application/jsonl")])
    next(b for b in at.button if b.label == "Import traces").click().run()
    no_exception(at)
    warned = [readable(w) for w in at.warning]
    assert any(
        w.startswith("25 of 25 imported traces are restricted because they cite documents")
        for w in warned
    ), warned
    assert any(readable(c) == "Unknown document ids: the first 20 of 25" for c in at.caption)
    ids = next(c.value for c in at.code if "QA-DOC-000" in c.value)
    assert ids.splitlines() == [f"QA-DOC-{i:03d}" for i in range(20)]
    assert any("Way forward: import those documents" in readable(c) for c in at.caption)
