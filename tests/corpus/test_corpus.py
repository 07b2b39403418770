"""Documents: parsing Markdown front matter and JSONL (malformed input), import, versions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from review.core.errors import InputError, PermissionDenied, StaleWriteError
from review.core.identity import Actor
from review.core.taxonomy import Taxonomy
from review.corpus import corpus
from review.corpus.docformat import iter_jsonl, parse_blocks, parse_markdown
from storage.db import read_session
from storage.models import AuditLog, Document
from tests.helpers.actors import make_actor
from tests.helpers.corpus import GOOD


def test_markdown_with_front_matter_parses_metadata_and_body(tax: Taxonomy) -> None:
    doc = parse_markdown(GOOD, "refund.md", tax)
    assert (doc.doc_id, doc.version, doc.jurisdiction) == ("POL-REFUND", 2, "EU")
    assert str(doc.effective_date) == "2025-03-01"
    assert doc.body.startswith("# Refund policy")
    assert "---" not in doc.body.splitlines()[0]


def test_body_structure_keeps_headings_tables_and_footnotes() -> None:
    blocks = parse_blocks(GOOD.split("---\n", 2)[2])
    kinds = [b.kind for b in blocks]
    assert kinds == ["heading", "heading", "paragraph", "table", "footnote"]
    table = blocks[3]
    assert table.rows == [["Plan", "Window"], ["Monthly", "14 days"], ["Annual", "30 days"]]
    assert blocks[4].rows == [["1"]] and blocks[4].text == "Counted from the first invoice date."
    assert blocks[1].level == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("# no front matter\n", "line 1: front matter"),
        ("---\ndoc_id: X\n", "no closing '---'"),
        (GOOD.replace("version: 2", "version: two"), "line 3: field version"),
        (
            GOOD.replace("effective_date: 2025-03-01", "effective_date: 2025-13-45"),
            "line 5: field effective_date",
        ),
        (
            GOOD.replace("access_scope: public", "access_scope: secret"),
            "line 9: field access_scope: 'secret' is not one of",
        ),
        (GOOD.replace("owner: Billing Operations\n", ""), "field owner: required field is missing"),
        (
            GOOD.replace("jurisdiction: EU", "jurisdiction: EU\ncolour: red"),
            "line 11: field colour: unknown field",
        ),
        (GOOD.replace("title: Refund policy", "title: [unclosed"), "refund.md: line"),
        (GOOD.replace("doc_id: POL-REFUND", "doc_id: 'bad id!'"), "line 2: field doc_id"),
        (GOOD.split("---\n# Refund")[0] + "---\n", "field body"),
        (GOOD.replace("version: 2", "version: 2\nversion: 3"), "duplicate key 'version'"),
        ("---\n- a\n---\nbody\n", "expected key: value pairs"),
        ("\x00\x01binary", "binary"),
    ],
)
def test_malformed_markdown_is_refused_with_line_and_field(
    tax: Taxonomy, text: str, expected: str
) -> None:
    with pytest.raises(InputError) as info:
        parse_markdown(text, "refund.md", tax)
    assert expected in str(info.value)
    assert str(info.value).startswith("refund.md")


def _jsonl_doc(**over: object) -> str:
    base = {
        "doc_id": "FAQ-1",
        "version": 1,
        "title": "FAQ",
        "effective_date": "2024-01-01",
        "authority": "faq",
        "owner": "Support",
        "access_scope": "public",
        "jurisdiction": "global",
        "body": "# FAQ\nText.",
    }
    base.update(over)
    return json.dumps(base)


def test_jsonl_errors_name_the_line_and_field(tax: Taxonomy) -> None:
    lines = [_jsonl_doc(), "", _jsonl_doc(doc_id="FAQ-2", version="x")]
    with pytest.raises(InputError, match=r"docs.jsonl: line 3: field version"):
        list(iter_jsonl(lines, "docs.jsonl", tax))
    with pytest.raises(InputError, match=r"line 2: not valid JSON"):
        list(iter_jsonl([_jsonl_doc(), "{not json"], "docs.jsonl", tax))
    with pytest.raises(InputError, match=r"line 1: expected a JSON object"):
        list(iter_jsonl(["[1, 2]"], "docs.jsonl", tax))
    with pytest.raises(InputError, match=r"line 1: field version"):
        list(iter_jsonl([_jsonl_doc(version=True)], "docs.jsonl", tax))
    docs = list(iter_jsonl([_jsonl_doc(), _jsonl_doc(doc_id="FAQ-2")], "d.jsonl", tax))
    assert [d.doc_id for d in docs] == ["FAQ-1", "FAQ-2"]


def _count(engine: Engine) -> int:
    with read_session(engine) as s:
        return int(s.scalar(select(func.count(Document.id))) or 0)


def test_a_bad_file_in_a_folder_writes_nothing(
    engine: Engine, tax: Taxonomy, tmp_path: Path, admin: Actor
) -> None:
    (tmp_path / "a.md").write_text(GOOD, encoding="utf-8")
    (tmp_path / "b.md").write_text(GOOD.replace("version: 2", "version: -1"), encoding="utf-8")
    with pytest.raises(InputError, match=r"b.md: line 3: field version"):
        corpus.read_files([tmp_path], tax)
    assert _count(engine) == 0


def test_import_is_atomic_idempotent_and_refuses_silent_overwrite(
    engine: Engine, tax: Taxonomy, admin: Actor
) -> None:
    good = parse_markdown(GOOD, "a.md", tax)
    report = corpus.import_documents(engine, admin, [good])
    assert (report.added, report.unchanged) == (1, 0)
    assert corpus.import_documents(engine, admin, [good]).unchanged == 1
    changed = good.model_copy(update={"body": good.body + "\nNew line."})
    other = good.model_copy(update={"doc_id": "POL-OTHER"})
    with pytest.raises(InputError, match="already exists with different content"):
        corpus.import_documents(engine, admin, [other, changed])
    assert _count(engine) == 1  # POL-OTHER did not land either
    with pytest.raises(InputError, match="appears twice"):
        corpus.import_documents(engine, admin, [other, other])


def test_new_version_keeps_the_old_one_and_detects_a_concurrent_version(
    engine: Engine, tax: Taxonomy, admin: Actor
) -> None:
    v2 = parse_markdown(GOOD, "a.md", tax)
    corpus.import_documents(engine, admin, [v2])
    v3 = v2.model_copy(update={"version": 3, "body": v2.body.replace("14 days", "21 days")})
    saved = corpus.add_version(engine, admin, "POL-REFUND", 2, v3)
    assert saved.version == 3 and saved.is_current
    hist = corpus.version_history(engine, admin, "POL-REFUND")
    assert [(h.version, h.is_current) for h in hist] == [(3, True), (2, False)]
    old = corpus.find_document(engine, admin, "POL-REFUND@2")
    assert old is not None and "14 days" in old.body and old.superseded_by == "POL-REFUND@3"
    with pytest.raises(StaleWriteError, match="newer version 3"):
        corpus.add_version(engine, admin, "POL-REFUND", 2, v3)
    with pytest.raises(InputError, match="nothing changed"):
        corpus.add_version(engine, admin, "POL-REFUND", 3, v3)
    with read_session(engine) as s:
        assert (
            s.scalar(
                select(func.count()).select_from(AuditLog).where(AuditLog.entity == "document")
            )
            == 2
        )


def test_restricted_documents_need_clearance(engine: Engine, tax: Taxonomy, admin: Actor) -> None:
    secret = parse_markdown(
        GOOD.replace("access_scope: public", "access_scope: restricted").replace(
            "POL-REFUND", "MEMO-1"
        ),
        "m.md",
        tax,
    )
    public = parse_markdown(GOOD, "a.md", tax)
    corpus.import_documents(engine, admin, [secret, public])
    reader = make_actor("annotator")
    rows = corpus.search_documents(engine, reader, corpus.DocFilter())
    assert [r.ref for r in rows] == ["POL-REFUND@2"]
    assert corpus.count_documents(engine, reader, corpus.DocFilter(text="refund")) == 1
    assert corpus.count_documents(engine, admin, corpus.DocFilter(text="refund")) == 2
    restricted_id = corpus.search_documents(engine, admin, corpus.DocFilter(text="MEMO"))[0].id
    with pytest.raises(PermissionDenied):
        corpus.get_document(engine, reader, restricted_id)
    assert corpus.find_document(engine, reader, "MEMO-1") is None
    assert corpus.get_document(engine, admin, restricted_id).title == "Refund policy"


def test_search_filters_and_pages_in_sql(engine: Engine, tax: Taxonomy, admin: Actor) -> None:
    docs = [
        parse_markdown(
            GOOD.replace("POL-REFUND", f"DOC-{i:02d}").replace(
                "jurisdiction: EU", f"jurisdiction: {'EU' if i % 2 else 'US'}"
            ),
            f"{i}.md",
            tax,
        )
        for i in range(30)
    ]
    corpus.import_documents(engine, admin, docs)
    f = corpus.DocFilter(jurisdiction="EU")
    assert corpus.count_documents(engine, admin, f) == 15
    page1 = corpus.search_documents(engine, admin, f, page=1, page_size=10)
    page2 = corpus.search_documents(engine, admin, f, page=2, page_size=10)
    assert len(page1) == 10 and len(page2) == 5
    assert not {r.ref for r in page1} & {r.ref for r in page2}
    assert corpus.count_documents(engine, admin, corpus.DocFilter(text="doc-07")) == 1


def test_only_corpus_editors_import(engine: Engine, tax: Taxonomy) -> None:
    doc = parse_markdown(GOOD, "a.md", tax)
    with pytest.raises(PermissionDenied, match="may not add or change documents"):
        corpus.import_documents(engine, make_actor("product_owner"), [doc])
    assert _count(engine) == 0


def _superseded(ref: str | None, version: int = 2) -> str:
    value = "null" if ref is None else f'"{ref}"'
    return GOOD.replace("superseded_by: null", f"superseded_by: {value}").replace(
        "version: 2", f"version: {version}"
    )


def test_superseded_by_must_name_a_version_in_the_corpus_or_the_same_import(
    engine: Engine, tax: Taxonomy, admin: Actor
) -> None:
    older = parse_markdown(_superseded("POL-REFUND@3"), "old.md", tax)
    # the version it names is neither in the corpus nor in the import: refused at its line
    with pytest.raises(
        InputError,
        match=r"old\.md: line 6: field superseded_by: 'POL-REFUND@3' names no document version",
    ):
        corpus.import_documents(engine, admin, [older])
    assert _count(engine) == 0
    record = {**parse_markdown(GOOD, "a.md", tax).model_dump(mode="json"), "superseded_by": "X-1"}
    (from_jsonl,) = iter_jsonl(["", json.dumps(record)], "d.jsonl", tax)
    with pytest.raises(InputError, match=r"d\.jsonl: line 2: field superseded_by: 'X-1' names"):
        corpus.import_documents(engine, admin, [from_jsonl])
    # a version cannot supersede itself
    itself = parse_markdown(_superseded("POL-REFUND@2"), "self.md", tax)
    with pytest.raises(InputError, match="line 6: field superseded_by: a version cannot"):
        corpus.import_documents(engine, admin, [itself])
    assert _count(engine) == 0
    # both versions in one import, the older one first: resolved within the import
    newer = parse_markdown(_superseded(None, version=3), "new.md", tax)
    assert corpus.import_documents(engine, admin, [older, newer]).added == 2
    # a later import may name what the corpus holds, with or without the version
    first = parse_markdown(_superseded("POL-REFUND", version=1), "v1.md", tax)
    assert corpus.import_documents(engine, admin, [first]).added == 1


@pytest.mark.parametrize("day", ["0001-03-01", "1899-12-31", "2200-01-01", "9999-12-31"])
def test_an_effective_date_outside_1900_to_2199_is_refused_with_its_line(
    tax: Taxonomy, day: str
) -> None:
    with pytest.raises(InputError, match=r"d\.md: line 5: field effective_date: must lie between"):
        parse_markdown(GOOD.replace("2025-03-01", day), "d.md", tax)
