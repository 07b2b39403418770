"""The Corpus page's tables: a table block with every column shown, metadata, results."""

from __future__ import annotations

from sqlalchemy import Engine

from review.core.identity import SYSTEM
from review.core.taxonomy import taxonomy
from review.corpus import corpus
from review.corpus.docformat import table_frame


def test_a_table_block_keeps_every_column_even_unnamed_or_repeated() -> None:
    frame = table_frame([["Plan", "", "Days", "Days"], ["Monthly", "x", "14", "30"]])
    assert list(frame.columns) == ["Plan", "col 2", "Days (3)", "Days (4)"]
    assert frame.values.tolist() == [["Monthly", "x", "14", "30"]]
    assert table_frame([["a", "b"]]).empty


def test_metadata_versions_and_results_of_the_demo(demo_engine: Engine) -> None:
    rows = corpus.search_documents(demo_engine, SYSTEM, corpus.DocFilter(text="refund"), page=1)
    results = corpus.results_frame(rows, lambda pk: f"/corpus?doc={pk}")
    assert len(results) == len(rows) > 0
    assert results["open"].tolist() == [f"/corpus?doc={r.id}" for r in rows]
    doc = corpus.get_document(demo_engine, SYSTEM, rows[0].id)
    meta = dict(corpus.metadata_frame(doc).values.tolist())
    assert meta["id"] == doc.doc_key and meta["version"] == str(doc.version)
    tax = taxonomy()
    labelled = dict(corpus.metadata_frame(doc, tax, {}).values.tolist())
    assert labelled["access scope"] == tax.label("access_scopes", doc.access_scope)
    assert labelled["authority"] == tax.label("authorities", doc.authority)
    shown = corpus.results_frame(rows, str, tax)
    assert shown["jurisdiction"].tolist() == [
        tax.label("jurisdictions", r.jurisdiction) for r in rows
    ]
    history = corpus.version_history(demo_engine, SYSTEM, doc.doc_key)
    versions = corpus.versions_frame(history, str)
    assert versions["version"].tolist() == [h.version for h in history]
    assert versions["current"].sum() == 1
